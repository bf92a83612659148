"""Verdict boxes written from the ledger (attention_course/course/verdict_boxes.py).

A generated box must read back as the verdict the ledger has (the chapters' checks parse
it), keep the word budgets, convert to plain Markdown for Colab, and be rewritten in place
without touching the prose around it.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from attention_course.course import claims as cl
from attention_course.course import plain_edition as pe
from attention_course.course import verdict_boxes as vb
from attention_course.course import verdicts as vd
from book_checks import box_problems

CLAIM = cl.Claim("toy", 1, "01_toy", "t", "holds when", "the keys are distinct.", "gap {gap:.2f}",
                 title="Each query retrieves its own key", summary="The right key wins by {gap:.2f} on average.",
                 reading="R.", baseline="B.", robustness="over {n} seeds", experiment="E.", control="C.",
                 decision="holds if the gap is positive.", details="A detail.")


def _notebook(tmp_path, markdown):
    nb = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": markdown}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "01_toy.ipynb"
    path.write_text(json.dumps(nb, indent=1) + "\n")
    return path


def test_a_generated_box_reads_back_as_the_ledgers_verdict(tmp_path):
    path = _notebook(tmp_path, "Before.\n\n" + vb.box_markdown(CLAIM) + "\n\nAfter.")
    box = vd.chapter_verdicts(path)["claim-toy"]
    assert box["verdict"] == "holds when"
    assert box["class"] == cl.VERDICT_CLASS["holds when"]
    assert box["title"] == "Each query retrieves its own key — holds when the keys are distinct"


def test_the_box_shows_every_field_once_with_numbers_as_glue_roles():
    md = vb.box_markdown(CLAIM)
    for text in ("R.", "E.", "B.", "C.", "holds if the gap is positive.", "A detail.", "How this was tested"):
        assert md.count(text) == 1, text
    assert md.count('{eval}`value_of("gap:.2f")`') == 2  # the summary and the evidence
    assert '{eval}`value_of("n")`' in md and "{n}" not in md


def test_a_control_equal_to_the_baseline_is_not_repeated():
    md = vb.box_markdown(dataclasses.replace(CLAIM, control="B."))
    assert "**Control.**" not in md and md.count("B.") == 1


@pytest.mark.parametrize("change, expected", [
    ({"title": ""}, "toy: no title"),
    ({"summary": " "}, "toy: no summary"),
    ({"title": "a " * 15}, "toy: the box title has 21 words (at most 20)"),
    ({"summary": "word " * 60 + "{gap:.2f}"}, "toy: the summary has 61 words (at most 60)"),
])
def test_box_problems_catch_a_missing_or_long_field(change, expected):
    assert box_problems([CLAIM]) == []
    assert box_problems([dataclasses.replace(CLAIM, **change)]) == [expected]


def test_sync_rewrites_an_old_box_and_keeps_the_prose_around_it(tmp_path):
    old = ":::{admonition} Verdict: an old title — holds\n:class: tip\n:name: claim-toy\n**Reading.** old\n:::"
    path = _notebook(tmp_path, "Before.\n\n" + old + "\n\nAfter.")
    assert vb.stale_boxes(path, [CLAIM]) == ["claim-toy"]
    assert vb.sync_verdict_boxes(path, [CLAIM]) is True
    source = json.loads(path.read_text())["cells"][0]["source"]
    assert source == "Before.\n\n" + vb.box_markdown(CLAIM) + "\n\nAfter."
    assert vb.stale_boxes(path, [CLAIM]) == []
    assert vb.sync_verdict_boxes(path, [CLAIM]) is False  # a second sync changes nothing


def test_sync_leaves_a_claim_of_another_chapter_alone(tmp_path):
    old = ":::{admonition} Verdict: x — holds\n:class: tip\n:name: claim-toy\nold\n:::"
    path = _notebook(tmp_path, old)
    assert vb.sync_verdict_boxes(path, [dataclasses.replace(CLAIM, chapter="02_other")]) is False


def test_box_span_needs_the_label_among_the_options_and_a_closing_fence():
    assert vb.box_span(":::{admonition} T\n:class: tip\nText :name: claim-toy\n:::", "claim-toy") is None
    assert vb.box_span(":::{note}\n:name: claim-toy\n:::", "claim-toy") is None  # not an admonition
    with pytest.raises(ValueError, match="claim-toy .* never closed"):
        vb.box_span("::::{admonition} T\n:name: claim-toy\n:::{note}\nx\n:::\n", "claim-toy")


def test_the_plain_edition_turns_a_box_into_a_quote_with_collapsed_details():
    md = vb.box_markdown(dataclasses.replace(CLAIM, summary="The right key wins."))
    blocks = pe._parse_blocks(md)
    assert len(blocks) == 1 and blocks[0].name == "admonition"
    inner = pe._parse_blocks(blocks[0].body)
    dropdown = next(b for b in inner if not isinstance(b, str))
    assert dropdown.name == "dropdown" and dropdown.arg == "How this was tested"


def test_every_box_title_in_the_ledger_keeps_the_budget():
    """Claims that have a title and summary keep the budgets (all of them, once the ledger is complete)."""
    written = [c for c in cl.CLAIMS if c.title.strip() and c.summary.strip()]
    assert box_problems(written) == []
