"""book/08_encoder.ipynb as a learner meets it: the teach-first opening, rated exercises with hints before
the solution, and a solved copy (course/solutions.py pasted into the stubs) that passes every check
and, run in full, builds the whole model from the learner's functions."""

from __future__ import annotations

import copy
import inspect
import re
import sys
from pathlib import Path

import nbclient
import nbformat
import pytest

from attention_course.chapters.encoder import EXERCISES
from attention_course.course import progress
from attention_course.course.solutions import SOLUTIONS
from attention_course.exercises import REGISTRY

ROOT = Path(__file__).resolve().parents[3]
NOTEBOOK = ROOT / "book" / "08_encoder.ipynb"
TITLE_RE = re.compile(r":::\{exercise\} (?P<title>.+) \(difficulty (?P<d>\d)/3, (?P<m>\d+) min\)\n:label: ex-(?P<id>[\w-]+)")


@pytest.fixture(scope="module")
def nb():
    return nbformat.read(NOTEBOOK, as_version=4)


def _markdown(nb):
    return [c.source for c in nb.cells if c.cell_type == "markdown"]


def test_the_opening_is_teach_first(nb):
    first = _markdown(nb)[0]
    assert first.startswith("# Build it")
    for part in ("**The question.**", "**Why it matters.**", "**You will be able to**", "**It assumes**",
                 "**Reading time:**", "{doc}`chapter 1 <01_mechanics>`", "{doc}`chapter 4 <04_multi_head>`"):
        assert part in first, part
    question = first.split("**The question.**")[1].split("**Why")[0]
    assert question.strip().count("?") == 1  # one sentence
    bullets = re.findall(r"^- ", first.split("**You will be able to**")[1].split("**It assumes**")[0], re.M)
    assert len(bullets) == 3


def test_the_main_text_is_under_4000_words(nb):
    text = "\n".join(_markdown(nb))
    text = re.sub(r"\$\$.*?\$\$|\$[^$]*\$|\{eval\}`[^`]*`|````.*?````", " x ", text, flags=re.S)
    assert len(re.findall(r"[A-Za-z0-9']+", text)) < 4000


def test_every_exercise_shows_its_difficulty_and_minutes(nb):
    found = [m.groupdict() for m in TITLE_RE.finditer("\n".join(_markdown(nb)))]
    assert [f["id"] for f in found] == list(EXERCISES)
    for f in found:
        ex = REGISTRY[f["id"]]
        assert (int(f["d"]), int(f["m"])) == (ex.difficulty, ex.minutes), f["id"]


def test_one_or_two_hints_come_before_each_solution(nb):
    cells = nb.cells
    for i, cell in enumerate(cells):
        m = progress.EXERCISE_RE.search(cell.source) if cell.cell_type == "code" else None
        if not m:
            continue
        after = cells[i + 2]  # the stub, the check, then the hints and the solution
        assert after.cell_type == "markdown", m[1]
        hints = re.findall(r":::\{dropdown\} Hint (\d)\n", after.source)
        assert hints in (["1"], ["1", "2"]), (m[1], hints)
        assert after.source.index("Hint 1") < after.source.index(f"{{solution}} ex-{m[1]}")


def test_the_index_figure_and_the_hidden_test_cells(nb):
    tagged = [c for c in nb.cells if "index-figure" in c.metadata.get("tags", [])]
    assert len(tagged) == 1 and tagged[0].metadata["mystnb"]["figure"]["name"] == "fig-build-layers"
    for cell in nb.cells:
        if cell.cell_type == "code" and re.search(r"^\s*(glue\(|assert\b)", cell.source, re.M):
            assert "remove-cell" in cell.metadata.get("tags", []), cell.source[:60]


# ------------------------------------------------------------------ the solved copy
def _pasted(eid: str, stub: str, fn) -> str:
    """The solution's source renamed to the stub, importing the names it uses (as tests/course/test_progress.py does)."""
    module = sys.modules[fn.__module__]
    names = [n for n in fn.__code__.co_names if n in vars(module) and n != fn.__name__]
    header = f"from {fn.__module__} import {', '.join(names)}\n" if names else ""
    source = re.sub(rf"^def {fn.__name__}\(", f"def {stub}(", inspect.getsource(fn), count=1, flags=re.M)
    return f"# EXERCISE: {eid}\n{header}{source}"


def _solved(nb):
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        m = progress.EXERCISE_RE.search(cell.source) if cell.cell_type == "code" else None
        if m:
            (stub,) = progress.DEF_RE.findall(cell.source)
            cell.source = _pasted(m[1], stub, SOLUTIONS[m[1]])
    return nb


def test_the_committed_stubs_are_not_attempted_and_the_solved_copy_passes(nb, tmp_path):
    solved = tmp_path / "08_encoder.ipynb"
    nbformat.write(_solved(nb), solved)
    committed, learner = progress.run([NOTEBOOK, solved])
    assert committed.error is None and learner.error is None
    assert [e.id for e in committed.exercises] == list(EXERCISES)
    assert all(e.status == "not attempted" for e in committed.exercises)
    assert [(e.id, e.status) for e in learner.exercises] == [(eid, "passed") for eid in EXERCISES], learner


@pytest.mark.slow
def test_the_solved_copy_runs_in_full_on_the_learners_own_parts(nb, tmp_path):
    """Every later step picks the learner's functions, and the search still ranks as transformers' model."""
    solved = _solved(nb)
    client = nbclient.NotebookClient(solved, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()
    text = "\n".join(o.get("text", "") for c in solved.cells if c.cell_type == "code" for o in c.outputs
                     if o.get("output_type") == "stream")
    assert text.count("passed all") == len(EXERCISES)
    for part in ("self_attention", "post_ln_block", "encoder"):
        assert re.search(rf"^{part}: yours \(", text, re.M), part
    assert "the same ranking of all 10 sentences as transformers, for every query: True" in text
