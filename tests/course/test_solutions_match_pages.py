"""The course's solutions call the lessons' worked code by the lessons' names (chapter 8's
``layer_norm``, chapter 10's ``layer_rest``, ...). ``course/solutions.py`` holds copies of those
functions so that a solution runs outside its notebook; a copy must be the page's function, or a
solved notebook and the tests of the solutions would run different code."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import nbformat
import pytest

from attention_course.course import progress, solutions

BOOK = Path(__file__).resolve().parents[2] / "book"
LESSONS = sorted(p for p in BOOK.glob("[0-9][0-9]_*.ipynb") if not p.stem.endswith("_evidence"))


def _without_docstring(node: ast.FunctionDef) -> str:
    """The function's code, comments and docstring aside, as ``ast.dump`` writes it."""
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return ast.dump(ast.Module(body=body, type_ignores=[])) + ast.dump(node.args)


def worked_code(path: Path) -> dict[str, ast.FunctionDef]:
    """The functions a lesson defines in its own code cells (exercise stubs aside)."""
    found = {}
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type != "code" or progress.EXERCISE_RE.search(cell.source):
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:  # a cell with IPython magics
            continue
        found.update({n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)})
    return found


def copies() -> list[tuple[str, str]]:
    """(lesson, name) for every helper of ``solutions`` (not an answer) that a lesson defines as worked code."""
    answers = set(solutions.SOLUTIONS.values())  # an exercise's answer is not the page's code
    mine = {name for name, fn in vars(solutions).items()
            if inspect.isfunction(fn) and fn.__module__ == solutions.__name__ and fn not in answers}
    return [(p.stem, name) for p in LESSONS for name in sorted(mine & set(worked_code(p)))]


def test_the_known_copies_are_found():
    """The copies this file exists for (a list that must not come out empty by a parsing slip)."""
    found = set(copies())
    for pair in [("08_encoder", "layer_norm"), ("08_encoder", "embeddings"), ("09_decoder", "attention_branch"),
                 ("10_gpt", "layer_qkv"), ("10_gpt", "layer_rest"), ("10_gpt", "tempered_top_k_probs")]:
        assert pair in found, pair


@pytest.mark.parametrize(("stem", "name"), copies(), ids=lambda v: v)
def test_a_solutions_copy_of_a_lessons_function_is_the_same_code(stem, name):
    page = worked_code(BOOK / f"{stem}.ipynb")[name]
    copy_ = ast.parse(inspect.getsource(getattr(solutions, name))).body[0]
    assert _without_docstring(copy_) == _without_docstring(page), (
        f"course/solutions.py's {name} differs from the one book/{stem}.ipynb defines: copy the page's code")
