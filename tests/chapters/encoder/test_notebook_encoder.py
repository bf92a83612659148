"""book/08_encoder.ipynb as a learner meets it: the teach-first opening, hints before the solution, and a
solved copy (course/solutions.py pasted into the stubs) that passes every check and, run in full, builds
the whole model from the learner's functions."""

from __future__ import annotations

import re

import nbformat
import pytest
from solved_copy import BOOK, opening, run_solved, solved

from attention_course.chapters.encoder import EXERCISES
from attention_course.course import progress

NOTEBOOK = BOOK / "08_encoder.ipynb"


@pytest.fixture(scope="module")
def nb():
    return nbformat.read(NOTEBOOK, as_version=4)


def test_the_opening_is_teach_first(nb):
    first = opening(nb)
    assert first.startswith("# Build it")
    for part in ("**The question.**", "**Why it matters.**", "**You will be able to**", "**It assumes**",
                 "**Reading time:**", "{doc}`chapter 1 <01_mechanics>`", "{doc}`chapter 4 <04_multi_head>`"):
        assert part in first, part
    question = first.split("**The question.**")[1].split("**Why")[0]
    assert question.strip().count("?") == 1  # one sentence
    bullets = re.findall(r"^- ", first.split("**You will be able to**")[1].split("**It assumes**")[0], re.M)
    assert len(bullets) == 3


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
@pytest.mark.extended
def test_the_solved_copy_passes_every_exercise(nb, tmp_path):
    """(That the committed stubs come out "not attempted" is checked for every chapter in tests/course/test_progress.py;
    extended, as its test_every_chapters_solved_copy_passes.)"""
    solved_path = tmp_path / "08_encoder.ipynb"
    nbformat.write(solved(nb), solved_path)
    (learner,) = progress.run([solved_path])
    assert learner.error is None
    assert [(e.id, e.status) for e in learner.exercises] == [(eid, "passed") for eid in EXERCISES], learner


@pytest.mark.extended
def test_the_solved_copy_runs_in_full_on_the_learners_own_parts(nb):
    """Every later step picks the learner's functions, and the search still ranks as transformers' model."""
    text = run_solved(nb, timeout=300)
    assert text.count("passed all") == len(EXERCISES)
    assert "Your parts: attention (exercise 1), block (exercise 2), encoder (exercise 3)\n" in text
    assert "The course's parts: none\n" in text
    # the hidden cell after the payoff asserts that the ranking is transformers' (run_solved fails otherwise)
