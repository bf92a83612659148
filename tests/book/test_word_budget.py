"""Each chapter's reading load (issue 25): main text at most 4,000 words, collapsed details under 2,500.

The counts come from `.ci/word_count.py`, the script that reports them; the test checks that it
counts what a reader reads (an inline number is one word, code and options are none) on a small
notebook, then holds every chapter to the budget.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "book").glob("*.ipynb"))
MAIN_WORDS, COLLAPSED_WORDS = 4000, 2500

_spec = importlib.util.spec_from_file_location("word_count", ROOT / ".ci" / "word_count.py")
word_count = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(word_count)


def _toy_chapter(tmp_path, cells):
    """A chapter notebook of markdown cells, written to ``tmp_path``."""
    nb = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": s} for s in cells],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "01_toy.ipynb"
    path.write_text(json.dumps(nb))
    return path


def test_the_counter_counts_what_a_reader_reads(tmp_path):
    cells = ["# Title\n\nThree plain words, then {eval}`value_of(\"x:.2f\")` and `code`.",
             ":::{dropdown} Details\nfour words hidden here\n:::",
             "```python\nnot = counted\n```",
             "## Exercises\n\nfive words in an exercise"]
    path = _toy_chapter(tmp_path, cells)
    assert word_count.chapter_words(path) == {"main": 8, "collapsed": 4, "exercises": 6}


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_each_chapter_keeps_its_word_budget(path):
    counts = word_count.chapter_words(path)
    assert counts["main"] <= MAIN_WORDS, f"{path.stem}: {counts['main']} words of main text (at most {MAIN_WORDS})"
    assert counts["collapsed"] < COLLAPSED_WORDS, (
        f"{path.stem}: {counts['collapsed']} words in collapsed details (under {COLLAPSED_WORDS})")


def test_the_whitespace_count_leaves_out_only_collapsed_blocks(tmp_path):
    cells = ["# Title\n\nThree plain words $x^2$.",
             ":::{dropdown} Details\nfour words hidden here\n:::\nafter",
             "````{solution} ex-a\n:class: dropdown\nhidden\n````",
             ":::{admonition} Open box\nsix words shown\n:::"]
    path = _toy_chapter(tmp_path, cells)
    assert word_count.whitespace_words(path) == 6 + 1 + 7


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_each_chapter_keeps_its_budget_by_the_coarsest_count(path):
    """Every word outside a dropdown, maths, exercises and titles included, split on whitespace."""
    words = word_count.whitespace_words(path)
    assert words <= MAIN_WORDS, f"{path.stem}: {words} whitespace-separated words outside dropdowns (at most {MAIN_WORDS})"
