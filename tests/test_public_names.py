"""Each chapter exports what a reader uses, and no code is there only for its tests (issue 40).

A chapter's face (``attention_course/chapters/<topic>/__init__.py``, generated from its modules'
``__all__``) is what a notebook imports as ``ch``. A name belongs in it when a page of the book, a
later chapter, the package outside the chapter, or the build (``.ci/``, ``book/_ext/``) uses it; a
name that only its own chapter uses stays importable from its module but leaves ``__all__``. And a
function or class that nothing in the package, the book or the build uses, only the tests, is dead
code: delete it with its tests (a helper the tests need lives in ``tests/``). The writers of the
stored slider data, run by hand and named in ``tests/test_commands.py``'s ``NOT_EXPERIMENTS``, are
the exception that page documents.
"""

from __future__ import annotations

import ast
import json
import re
from functools import lru_cache
from pathlib import Path

import pytest

from test_commands import NOT_EXPERIMENTS

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "attention_course"
FACES = sorted((PACKAGE / "chapters").glob("*/__init__.py"))


def _all(tree: ast.Module) -> list[str]:
    for st in tree.body:
        if isinstance(st, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in st.targets):
            return list(ast.literal_eval(st.value))
    return []


@lru_cache(maxsize=1)
def _book_and_build() -> str:
    parts = ["".join(c["source"]) for p in sorted((ROOT / "book").glob("*.ipynb"))
             for c in json.loads(p.read_text(encoding="utf-8"))["cells"]]
    parts += [p.read_text(encoding="utf-8") for p in (ROOT / "book").glob("*.md")]
    parts += [p.read_text(encoding="utf-8") for p in [*(ROOT / ".ci").glob("*.py"), *(ROOT / "book" / "_ext").glob("*.py")]]
    return "\n".join(parts)


def _without_docstrings(src: str) -> str:
    """The module's code: its docstrings (module, classes, functions) blanked, so that a name a doctest or a
    docstring mentions does not count as a use (three helpers once passed as used by their own doctests)."""
    lines = src.splitlines()
    for node in ast.walk(ast.parse(src)):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body \
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            for i in range(body[0].lineno - 1, body[0].end_lineno):
                lines[i] = ""
    return "\n".join(lines)


@lru_cache(maxsize=1)
def _modules() -> dict[Path, str]:
    return {p: p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"}


@lru_cache(maxsize=None)
def _words(text: str) -> frozenset[str]:
    return frozenset(re.findall(r"\w+", text))


@lru_cache(maxsize=1)
def _counts() -> dict[Path, dict[str, int]]:
    """Each module's words, with how often each occurs."""
    out = {}
    for path, src in _modules().items():
        counts: dict[str, int] = {}
        for w in re.findall(r"\w+", _without_docstrings(src)):
            counts[w] = counts.get(w, 0) + 1
        out[path] = counts
    return out


@pytest.mark.parametrize("face", FACES, ids=lambda p: p.parent.name)
def test_every_name_a_chapter_exports_is_used_outside_it(face):
    outside = _words(_book_and_build()) | {w for p, c in _counts().items() if face.parent not in p.parents for w in c}
    unused = [n for n in _all(ast.parse(face.read_text(encoding="utf-8"))) if n not in outside]
    assert not unused, (f"{face.parent.name} exports names that only the chapter itself uses: {unused}; take them "
                        "out of their module's __all__ and regenerate the face (python .ci/chapter_faces.py)")


def test_no_function_or_class_is_there_only_for_the_tests():
    elsewhere = _words(_book_and_build()) | _words(" ".join(NOT_EXPERIMENTS.values()))
    in_modules: dict[str, int] = {}  # word -> how many modules use it
    for counts in _counts().values():
        for w in counts:
            in_modules[w] = in_modules.get(w, 0) + 1
    dead = []
    for path, src in _modules().items():
        for node in ast.parse(src).body:
            if not isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                continue
            n = node.name
            own = _counts()[path].get(n, 0) - 1 - _without_docstrings(src).count(f'"{n}"')  # minus its def and __all__ entry
            used = own > 0 or in_modules.get(n, 0) > 1 or n in elsewhere
            if not used:
                dead.append(f"{path.relative_to(PACKAGE)}: {node.name}")
    assert not dead, "nothing but the tests uses these (delete them, or move a test helper into tests/):\n" + "\n".join(dead)
