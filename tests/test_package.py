"""The package's public surface: a flat, curated __all__ and a light import."""

import subprocess
import sys

import attention_course as ac


def test_all_names_exist_and_are_unique():
    assert len(ac.__all__) == len(set(ac.__all__))
    missing = [name for name in ac.__all__ if not hasattr(ac, name)]
    assert not missing


def test_import_and_training_load_neither_transformers_nor_the_compiler():
    """Importing the package loads no transformers; training and the L-BFGS fits load no torch._dynamo,
    which torch.optim's optimisers import (3 s of CPU in every notebook that trains); reading MiniLM
    (tokenizer, weights, attention maps) loads no transformers (6 s)."""
    code = ("import sys, attention_course as ac; print('transformers' in sys.modules); "
            "model = ac.TinyTransformer(ac.ModelConfig(d_model=16, n_heads=2), seed=0); "
            "ac.train(model, ac.make_task('repeated_sequences'), steps=2); "
            "from attention_course.chapters.heads.bottleneck import dirichlet_attention, fit_low_rank_attention; "
            "fit_low_rank_attention(dirichlet_attention(4, seed=0), 1, restarts=1, max_iter=3); "
            "print('torch._dynamo' in sys.modules); "
            "ac.minilm_tokenizer()('a b'); ac.minilm_weights(); ac.attention_maps('The cat sat.'); "
            "print('transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False", "False"]
    assert out.stderr == ""


# ------------------------------------------------------------------ layering
import ast  # noqa: E402
import functools  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

PACKAGE = Path(ac.__file__).parent
#: The chapters in reading order: a chapter may import from earlier chapters, never later ones.
READING_ORDER = ("mechanics", "kernels", "lowrank", "heads", "graphs", "scaling", "insight", "encoder", "decoder", "gpt")
#: What each layer may import from the package (see attention_course/README.md). ``core``, the
#: exercise engine and the shared figure helpers are foundations; ``course`` may import anything.
ALLOWED = {
    "core": {"core"},
    "exercises": {"exercises"},
    "figures": {"core", "figures"},
    "models": {"core", "models"},
    "chapters": {"core", "models", "figures", "exercises", "chapters"},
    "course": {"core", "models", "figures", "exercises", "chapters", "course"},
}


@functools.lru_cache(maxsize=None)  # two tests scan all ~150 modules (pass `package` for one cache key); the files do not change during a run
def _package_imports(path: Path, package: Path = PACKAGE):
    """(target parts, line, at module level?) for every import of the package in ``path``.

    ``target parts`` is the imported module's path inside the package, e.g. ``("chapters",
    "lowrank", "spectra")``. Imports under ``if TYPE_CHECKING:`` are left out: they never run.
    An import is a statement, so expressions (which hold no statements) are not walked.
    """
    parts = path.relative_to(package).parts
    tree = ast.parse(path.read_text())
    out = []

    def visit(node, top_level):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                continue
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, ast.ImportFrom):
                if child.level:  # relative: resolve against this file's folder
                    base = list(parts[:-1])[: len(parts) - child.level]
                    target = base + (child.module.split(".") if child.module else [])
                    if len(target) < 2 and not child.module:  # `from .. import x`: x is a module
                        target = target + [child.names[0].name]
                    out.append((tuple(target), child.lineno, top_level))
                elif child.module and child.module.startswith("attention_course."):
                    out.append((tuple(child.module.split(".")[1:]), child.lineno, top_level))
            is_scope = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            visit(child, top_level and not is_scope)

    visit(tree, True)
    return tuple(out)


def layering_problems(path: Path, package: Path = PACKAGE) -> list[str]:
    """Every import in ``path`` against the layers, or against the chapters' reading order."""
    parts = path.relative_to(package).parts
    layer = parts[0]
    wrong = []
    for target, line, _ in _package_imports(path, package):
        where = f"{path.relative_to(package)}:{line} imports {'.'.join(target)}"
        if target[0] not in ALLOWED[layer]:
            wrong.append(f"{where}: {layer} may import only {sorted(ALLOWED[layer])}")
        elif layer == "chapters" == target[0] and len(parts) > 2 and len(target) > 1:
            here, there = READING_ORDER.index(parts[1]), READING_ORDER.index(target[1])
            if there > here:
                wrong.append(f"{where}: chapter {here + 1} ({parts[1]}) reads before chapter {there + 1} ({target[1]})")
    return wrong


def _modules():
    return [p for p in sorted(PACKAGE.rglob("*.py")) if len(p.relative_to(PACKAGE).parts) > 1]


def test_imports_point_down_the_layers_and_follow_the_reading_order():
    wrong = [w for path in _modules() for w in layering_problems(path)]
    assert not wrong, "imports against the layering:\n" + "\n".join(wrong)


@pytest.mark.parametrize("source, rule", [
    ("from ..scaling.measures import softmax_entropy\n", "reads before chapter 6"),  # a later chapter
    ("from ...course.book import glue\n", "chapters may import only"),  # the layer above
])
def test_layering_check_rejects_an_upward_import(tmp_path, source, rule):
    """The rule can fail: chapter 3 importing chapter 6, or a chapter importing the course machinery."""
    module = tmp_path / "chapters" / "lowrank" / "spectra.py"
    module.parent.mkdir(parents=True)
    module.write_text(source)
    problems = layering_problems(module, package=tmp_path)
    assert len(problems) == 1 and rule in problems[0]


def test_package_imports_are_at_module_level():
    """A function-level import of the package usually dodges a cycle; the layers make none necessary."""
    inside = [f"{p.relative_to(PACKAGE)}:{line}" for p in _modules()
              for _, line, top in _package_imports(p, PACKAGE) if not top]
    assert not inside, "imports of the package inside functions:\n" + "\n".join(inside)


def test_every_chapter_face_exports_each_name_once_from_its_own_folder():
    """``from attention_course.chapters import lowrank as ch`` gives every public name of the chapter."""
    from attention_course import chapters

    for topic in READING_ORDER:
        face = getattr(chapters, topic)
        assert len(face.__all__) == len(set(face.__all__)), topic
        for name in face.__all__:
            obj = getattr(face, name)
            home = getattr(obj, "__module__", None) or ""
            assert not home.startswith("attention_course.") or home.startswith(
                ("attention_course.chapters.", "attention_course.figures.", "attention_course.models.",
                 "attention_course.core.", "attention_course.exercises.")), (topic, name, home)


def test_every_chapter_face_is_current():
    """Each chapter's ``__init__`` re-exports exactly its modules' ``__all__`` (.ci/chapter_faces.py writes it)."""
    import importlib

    from attention_course import chapters

    skip = {"main", "cli", "add_arguments", "VARIANTS"}  # command-line hooks, per module
    for topic in chapters.__all__:
        folder = PACKAGE / "chapters" / topic
        expected = set()
        for path in folder.glob("*.py"):
            if path.stem != "__init__":
                module = importlib.import_module(f"attention_course.chapters.{topic}.{path.stem}")
                expected |= set(module.__all__) - skip
        stale = expected ^ set(getattr(chapters, topic).__all__)
        assert not stale, f"chapters/{topic}/__init__.py is stale ({sorted(stale)}): run python .ci/chapter_faces.py"


# ------------------------------------------------------------------ the maps
def _map_rows() -> dict[str, str]:
    """The package map's rows, joined per folder: ``{"chapters/lowrank/": "spectra baselines ..."}``."""
    rows, folder = {}, None
    for line in (PACKAGE / "README.md").read_text().splitlines():
        if not line.startswith("| ") or line.startswith(("| folder", "|---")):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0]:
            folder = cells[0].split("`")[1]
        rows[folder] = rows.get(folder, "") + " " + cells[1]
    return rows


def test_the_package_map_lists_every_module():
    rows = _map_rows()
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if path.stem.startswith("__") or len(rel.parts) == 1:
            continue
        folder = "/".join(rel.parts[:-1]) + "/"
        if f"`{path.stem}`" not in rows.get(folder, ""):
            missing.append(str(rel))
    assert not missing, f"attention_course/README.md does not list {missing}"


def test_both_readmes_name_every_command():
    from attention_course.__main__ import commands

    for readme in (PACKAGE / "README.md", PACKAGE.parent / "README.md"):
        text = readme.read_text()
        missing = [name for name in commands() if f"`{name}`" not in text]
        assert not missing, f"{readme.name} does not name the commands {missing}"


def test_the_package_docstring_names_every_folder_and_no_missing_one():
    import re

    import attention_course

    doc = attention_course.__doc__
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    named = set(re.findall(r"^\* ``(\w+)", doc, flags=re.M))
    assert named == folders, f"the docstring lists {sorted(named)}; the package's folders are {sorted(folders)}"
    chapters = {p.name for p in (PACKAGE / "chapters").iterdir() if (p / "__init__.py").exists()}
    missing = [c for c in chapters if c not in doc]
    assert not missing, f"the docstring does not name the chapter folders {missing}"
