"""Each lesson states its chapter's claims in one line, written from the ledger (course/claim_lines.py)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from attention_course.course import claim_lines as cln
from book_checks import claim_line_problems
from attention_course.course import claims as cl

ROOT = Path(__file__).resolve().parents[2]
BOOK = ROOT / "book"


def test_every_claim_line_is_where_the_ledger_puts_it_and_current():
    assert claim_line_problems(BOOK) == []


def test_every_claim_names_a_lesson_that_exists_and_is_not_an_evidence_page():
    for c in cl.CLAIMS:
        assert (BOOK / f"{c.lesson}.ipynb").exists(), c.id
        assert (BOOK / f"{c.chapter}.ipynb").exists(), c.id
        assert not c.lesson.endswith("_evidence"), c.id


def _lesson(tmp_path: Path, source: str) -> Path:
    cell = {"cell_type": "markdown", "metadata": {}, "source": source}
    path = tmp_path / "01_x.ipynb"
    path.write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


CLAIM = cl.Claim("x", 1, "01_x_evidence", "Rows sum to one.", "holds when", "the row is not masked.", "{a}",
                 lesson="01_x")


def test_the_sync_writes_the_line_after_its_mark_and_keeps_the_rest(tmp_path):
    path = _lesson(tmp_path, "Before.\n\n% claim-line: x\n\nAfter.")
    assert cln.sync_claim_lines(path, [CLAIM])
    source = json.loads(path.read_text())["cells"][0]["source"]
    assert source == ("Before.\n\n% claim-line: x\n" + cln.claim_line(CLAIM) + "\n\nAfter.")
    assert not cln.sync_claim_lines(path, [CLAIM])  # idempotent
    assert "holds when** the row is not masked." in source and "<claim-x>" in source


def test_a_changed_verdict_makes_the_line_stale(tmp_path):
    path = _lesson(tmp_path, "% claim-line: x\n" + cln.claim_line(CLAIM))
    assert claim_line_problems(tmp_path, [CLAIM]) == []
    wrong = dataclasses.replace(CLAIM, verdict="wrong as stated")
    assert "01_x: the line of x is not what the ledger writes (run the sync step)" in claim_line_problems(
        tmp_path, [wrong])


@pytest.mark.parametrize("source, problem", [
    ("No line here.", "01_x: no line for x (mark it with '% claim-line: x')"),
    ("% claim-line: nope\ntext", "01_x: a claim line names 'nope', which the ledger does not have"),
])
def test_problems_name_a_missing_or_unknown_line(tmp_path, source, problem):
    _lesson(tmp_path, source)
    assert problem in claim_line_problems(tmp_path, [CLAIM])


def test_a_line_on_the_evidence_page_is_out_of_place(tmp_path):
    path = _lesson(tmp_path, "% claim-line: x\n" + cln.claim_line(CLAIM))
    shutil.move(path, tmp_path / "01_x_evidence.ipynb")
    problems = claim_line_problems(tmp_path, [CLAIM])
    assert "01_x_evidence: the line of x belongs in its lesson, 01_x" in problems
