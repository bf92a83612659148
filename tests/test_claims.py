"""The claims ledger (attention_course/claims.py) against the chapters it summarises (verdicts.py).

The ledger may not drift from the book: every claim needs a chapter, a verdict
and glued evidence; each chapter's verdict box must say what the ledger says;
and the evidence shipped with the package must be what the chapters glued
(nbval, in `make test`, keeps those stored outputs current).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from attention_course.course import claims as cl
from attention_course.course import verdicts as vd

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"


def test_the_ledger_is_complete():
    assert cl.ledger_problems() == []
    assert 20 <= len(cl.CLAIMS) <= 30
    assert {c.section for c in cl.CLAIMS} == set(cl.SECTIONS)  # every essay section has claims
    counts = cl.verdict_counts()
    assert all(counts[v] > 0 for v in cl.VERDICTS), counts  # the essay is neither all right nor all wrong
    assert sum(counts.values()) == len(cl.CLAIMS)


@pytest.mark.parametrize("change, expected", [
    ({"chapter": ""}, "no chapter"),
    ({"verdict": ""}, "verdict '' is not one of"),
    ({"verdict": "mostly"}, "verdict 'mostly'"),
    ({"evidence": "no numbers here"}, "names no glued number"),
    ({"finding": " "}, "no finding"),
    ({"section": 8}, "section 8"),
])
def test_ledger_problems_catch_a_broken_claim(change, expected):
    broken = dataclasses.replace(cl.CLAIMS[0], **change)
    problems = cl.ledger_problems([broken, *cl.CLAIMS[1:]])
    assert len(problems) == 1 and expected in problems[0], problems


def test_duplicate_ids_are_caught():
    assert "id used twice" in cl.ledger_problems([cl.CLAIMS[0], cl.CLAIMS[0]])[0]


def test_chapters_agree_with_the_ledger():
    """Each claim's chapter has a box labelled claim-<id> with the same verdict and class."""
    assert vd.chapter_problems(BOOK) == []


@pytest.fixture
def book_copy(tmp_path):
    for path in BOOK.glob("[0-9][0-9]_*.ipynb"):
        shutil.copy(path, tmp_path / path.name)
    return tmp_path


def _edit_markdown(path: Path, old: str, new: str) -> None:
    nb = json.loads(path.read_text())
    hits = 0
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        if cell["cell_type"] == "markdown" and old in src:
            cell["source"] = src.replace(old, new)
            hits += 1
    assert hits == 1, f"{old!r} found in {hits} cells"
    path.write_text(json.dumps(nb))


def test_a_chapter_that_changes_its_verdict_is_caught(book_copy):
    c = cl.by_id("gradient-vanishes")
    box = vd.chapter_verdicts(BOOK / f"{c.chapter}.ipynb")[c.label]
    _edit_markdown(book_copy / f"{c.chapter}.ipynb", box["title"],
                   box["title"].replace("— wrong as stated", "— holds"))
    problems = vd.chapter_problems(book_copy)
    assert any(p.startswith("gradient-vanishes: the ledger says 'wrong as stated'") for p in problems), problems


def test_a_missing_box_label_and_an_unknown_label_are_caught(book_copy):
    c = cl.by_id("saturation")
    path = book_copy / f"{c.chapter}.ipynb"
    _edit_markdown(path, f":name: {c.label}\n", ":name: claim-not-in-the-ledger\n")
    problems = vd.chapter_problems(book_copy)
    assert f"saturation: {c.chapter} has no verdict box labelled claim-saturation" in problems
    assert f"{c.chapter}: box claim-not-in-the-ledger is not in the ledger" in problems


def test_an_unlabelled_verdict_box_is_caught(book_copy):
    c = cl.by_id("message-passing")
    _edit_markdown(book_copy / f"{c.chapter}.ipynb", f":name: {c.label}\n", "")
    problems = vd.chapter_problems(book_copy)
    assert any("verdict box without a claim label" in p for p in problems), problems


def test_a_missing_glue_is_caught(book_copy):
    c = cl.by_id("formula")
    broken = dataclasses.replace(c, evidence="{no_such_glue:.2f}")
    ledger = [broken if x.id == "formula" else x for x in cl.CLAIMS]
    assert vd.chapter_problems(book_copy, ledger) == ["formula: 01_mechanics glues no no_such_glue"]
    with pytest.raises(KeyError, match="claim 'formula': chapter 01_mechanics glues no no_such_glue"):
        vd.collect_evidence(book_copy, [broken])


def test_shipped_evidence_matches_the_chapters():
    """attention_course/data/evidence.json == what the chapters glue (rewrite: python -m attention_course evidence)."""
    assert cl.load_evidence() == vd.collect_evidence(BOOK)


def test_every_evidence_string_formats():
    evidence = cl.load_evidence()
    for c in cl.CLAIMS:
        text = cl.evidence_text(c, evidence[c.id])
        assert "{" not in text and text.strip(), c.id


def test_read_glue_reads_numbers_strings_and_numpy_reprs(tmp_path):
    def record(name, text):
        return {"output_type": "display_data", "metadata": {"scrapbook": {"name": name, "mime_prefix": ""}},
                "data": {"application/papermill.record/text/plain": text}}

    nb = {"cells": [{"cell_type": "code", "source": "", "metadata": {}, "outputs": [
        record("a", "0.084"), record("b", "np.float64(2.5)"), record("c", "'2 and 3'"), record("d", "47")]}]}
    path = tmp_path / "x.ipynb"
    path.write_text(json.dumps(nb))
    assert vd.read_glue(path) == {"a": 0.084, "b": 2.5, "c": "2 and 3", "d": 47}


def test_read_glue_on_a_real_chapter_gives_its_number():
    glued = vd.read_glue(BOOK / "06_scaling.ipynb")
    assert glued["var_64"] == pytest.approx(64, rel=0.1)  # Var(q.k) = d_k at initialisation


@pytest.mark.parametrize("title, kind", [
    ("Verdict: x — holds", "holds"),
    ("Verdict: x — holds (on this task)", "holds"),
    ("Verdict: x — holds, exactly", "holds"),
    ("Verdict: x — holds when keys share a norm", "holds when"),
    ("Verdict: x — wrong as stated; it depends", "wrong as stated"),
    ("Verdict: x — wrong", None),
    ("Verdict: x — holdsworth", None),
    ("Verdict: x holds", None),
])
def test_parse_verdict(title, kind):
    assert vd.parse_verdict(title) == kind


def test_ledger_markdown_has_one_row_per_claim_with_a_link():
    table = cl.ledger_markdown(cl.load_evidence())
    rows = table.splitlines()[2:]
    assert len(rows) == len(cl.CLAIMS)
    for c, row in zip(cl.CLAIMS, rows):
        section, text, verdict, numbers, link = [cell.strip() for cell in row.strip("|").split(" | ")]
        assert (section, link) == (str(c.section), f"[ch. {int(c.chapter[:2])}](#{c.label})")
        assert verdict.split(" ", 1)[1].startswith(c.verdict + (" " if c.verdict == "holds when" else ":"))
        assert c.finding.rstrip(".") in verdict and numbers == cl.evidence_text(c, cl.load_evidence()[c.id])


def test_chapter_7_renders_the_ledger():
    nb = json.loads((BOOK / "07_insight.ipynb").read_text())
    shown = json.dumps([c.get("outputs", []) for c in nb["cells"] if c["cell_type"] == "code"])
    for c in cl.CLAIMS:
        assert f"(#{c.label})" in shown, f"chapter 7 does not link claim {c.id}"
    assert "not collected yet" not in shown, "chapter 7 ran before `python -m attention_course evidence`"


def test_evidence_command_writes_what_the_chapters_glue(tmp_path, capsys):
    from attention_course.__main__ import main

    out = tmp_path / "evidence.json"
    assert main(["evidence", "--book", str(BOOK), "--out", str(out)]) == 0
    assert cl.load_evidence(out) == vd.collect_evidence(BOOK)
    assert f"wrote the evidence of {len(cl.CLAIMS)} claims" in capsys.readouterr().out


def test_evidence_command_refuses_when_a_chapter_disagrees(book_copy, tmp_path, capsys):
    from attention_course.__main__ import main

    c = cl.by_id("saturation")
    _edit_markdown(book_copy / f"{c.chapter}.ipynb", f":name: {c.label}\n", "")
    out = tmp_path / "evidence.json"
    assert main(["evidence", "--book", str(book_copy), "--out", str(out)]) == 1
    assert not out.exists()
    assert "has no verdict box labelled claim-saturation" in capsys.readouterr().err
