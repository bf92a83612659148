"""The claims ledger (attention_course/claims.py) against the chapters it summarises (verdicts.py).

The ledger may not drift from the book: every claim needs a chapter, a verdict,
glued evidence, and (issue 16) a reading, a baseline and a robustness; each
chapter's verdict box must say what the ledger says, and show those three fields
exactly as the ledger has them; no threshold may stand in for a measured error;
and the evidence shipped with the package must be what the chapters glued
(nbval, in `make test`, keeps those stored outputs current).

Each mutation test breaks one thing on a copy and checks that exactly that
problem is added to the ones the real ledger and book have.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path

import pytest

from attention_course.course import claims as cl
from attention_course.course import verdict_boxes as vb
from attention_course.course import verdicts as vd
from book_checks import box_problems, is_threshold, ledger_problems

ROOT = Path(__file__).resolve().parents[2]
BOOK = ROOT / "book"


def test_the_ledger_is_complete():
    assert ledger_problems() == []
    assert box_problems() == []  # every claim has a box title and summary, within the word budgets
    assert 20 <= len(cl.CLAIMS) <= 45  # chapter 7 adds one claim per ingredient of the thesis
    assert {c.section for c in cl.CLAIMS} == set(cl.SECTIONS)  # every essay section has claims
    counts = cl.verdict_counts()
    assert all(counts[v] > 0 for v in cl.VERDICTS[:3]), counts  # the essay is neither all right nor all wrong
    assert sum(counts.values()) == len(cl.CLAIMS)


def _new_problems(problems, baseline):
    """The problems that a mutation added to the ``baseline`` problems of the real ledger and book.

    Comparing with the real state keeps each mutation test about its mutation
    alone, whatever else is still unfinished in the ledger or the chapters.
    """
    return [p for p in problems if p not in set(baseline)]


@pytest.fixture(scope="module")
def book_problems():
    return vd.chapter_problems(BOOK)


def _replaced(claim_id, **change):
    return [dataclasses.replace(c, **change) if c.id == claim_id else c for c in cl.CLAIMS]


@pytest.mark.parametrize("change, expected", [
    ({"chapter": ""}, "no chapter"),
    ({"verdict": ""}, "verdict '' is not one of"),
    ({"verdict": "mostly"}, "verdict 'mostly'"),
    ({"evidence": "no numbers here"}, "names no glued number"),
    ({"finding": " "}, "no finding"),
    ({"section": 8}, "section 8"),
    ({"reading": ""}, "formula: no reading"),
    ({"baseline": " "}, "formula: no baseline"),
    ({"robustness": ""}, "formula: no robustness"),
    ({"reading": "tested on {torch_err}"}, "formula: the reading is plain text, but has a brace"),
    ({"evidence": "agrees within {torch_tol:.0e}"}, "formula: uses the threshold torch_tol as evidence"),
    ({"robustness": "{row_sum_tol64} of rows"}, "formula: uses the threshold row_sum_tol64"),
])
def test_ledger_problems_catch_a_broken_claim(change, expected):
    problems = _new_problems(ledger_problems(_replaced("formula", **change)), ledger_problems())
    assert len(problems) == 1 and expected in problems[0], problems


def test_every_claim_has_its_reading_baseline_and_robustness():
    """Issue 16: all three fields, for every claim (chapters 3 and 4 included)."""
    missing = [p for p in ledger_problems() if p.endswith((": no reading", ": no baseline", ": no robustness"))]
    assert missing == []


def test_duplicate_ids_are_caught():
    assert "id used twice" in ledger_problems([cl.CLAIMS[0], cl.CLAIMS[0]])[0]


def test_chapters_agree_with_the_ledger():
    """Each claim's chapter has a box labelled claim-<id> with the same verdict and class."""
    assert vd.chapter_problems(BOOK) == []


@pytest.fixture
def book_copy(tmp_path):
    for path in BOOK.glob("*.ipynb"):
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
    c = cl.by_id("saturation")
    box = vd.chapter_verdicts(BOOK / f"{c.chapter}.ipynb")[c.label]
    _edit_markdown(book_copy / f"{c.chapter}.ipynb", box["title"],
                   box["title"].replace("— holds", "— wrong as stated"))
    problems = vd.chapter_problems(book_copy)
    assert any(p.startswith("saturation: the ledger says 'holds'") for p in problems), problems


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


def test_a_missing_glue_is_caught(book_copy, book_problems):
    broken = _replaced("formula", evidence="{no_such_glue:.2f}")
    vb.sync_verdict_boxes(book_copy / "01_mechanics_evidence.ipynb", broken)  # the box agrees: only the glue is missing
    assert _new_problems(vd.chapter_problems(book_copy, broken), book_problems) == [
        "formula: 01_mechanics_evidence glues no no_such_glue"]
    with pytest.raises(KeyError, match="claim 'formula': chapter 01_mechanics_evidence glues no no_such_glue"):
        vd.collect_evidence(book_copy, [dataclasses.replace(cl.by_id("formula"), evidence="{no_such_glue:.2f}")])


@pytest.mark.parametrize("field", ["robustness", "summary"])
def test_a_missing_robustness_or_summary_glue_is_caught(book_copy, book_problems, field):
    c = cl.by_id("local-average")
    broken = _replaced(c.id, **{field: getattr(c, field) + " over {no_such_seeds} seeds"})
    vb.sync_verdict_boxes(book_copy / f"{c.chapter}.ipynb", broken)  # the box agrees: only the glue is missing
    assert _new_problems(vd.chapter_problems(book_copy, broken), book_problems) == [
        f"local-average: {c.chapter} glues no no_such_seeds"]


def test_every_box_is_the_one_the_ledger_writes():
    """Each verdict box is generated from the ledger (title, summary, How this was tested): none was edited by hand."""
    assert [p for p in vd.chapter_problems(BOOK) if "differs from the one the ledger writes" in p] == []


@pytest.mark.parametrize("claim_id, old, new", [
    ("formula", "**Reading.** The formula", "**Reading.** A formula"),  # an edited field
    ("formula", ":class: tip\n:name: claim-formula\n", ":name: claim-formula\n:class: tip\n"),  # reordered
    ("local-average", '{eval}`value_of("u_draws")`', "20"),  # a typed number
    ("local-average", '{eval}`value_of("med_w3:.2f")`', '{eval}`value_of("med_w3:.3f")`'),  # another format
    ("learned-width", ":::{dropdown} How this was tested", ":::{dropdown} Details"),
])
def test_a_box_edited_by_hand_is_caught(book_copy, book_problems, claim_id, old, new):
    c = cl.by_id(claim_id)
    path = book_copy / f"{c.chapter}.ipynb"
    source = next(s for s in ("".join(cell["source"]) for cell in json.loads(path.read_text())["cells"])
                  if f":name: {c.label}" in s)
    start, end = vb.box_span(source, c.label)
    assert source[start:end].count(old) >= 1
    box = source[start:end]
    _edit_markdown(path, box, box.replace(old, new, 1))
    problems = _new_problems(vd.chapter_problems(book_copy), book_problems)
    assert len(problems) == 1 and problems[0].startswith(f"{claim_id}: the verdict box differs"), problems


# ----------------------------------------------------------- thresholds vs measured errors
def test_error_ceiling_is_a_power_of_ten_at_or_above_the_error():
    for error, ceiling in [(8.9e-16, 1e-15), (1e-15, 1e-15), (1.0000001e-15, 1e-14), (2.4e-7, 1e-6),
                           (0.5, 1.0), (3.0, 10.0)]:
        assert cl.error_ceiling(error) == ceiling and repr(cl.error_ceiling(error)) == repr(ceiling)


def test_the_chapters_glue_their_tolerances_as_constants_and_their_errors_as_results():
    """The naming rule matches what the cells do: `_tol` names are typed thresholds, `_err` names are computed."""
    for path in sorted(BOOK.glob("*.ipynb")):
        constants, glued = vd.constant_glues(path), vd.read_glue(path)
        for name in glued:
            if is_threshold(name):
                assert name in constants, f"{path.name}: {name} is named a threshold but computed"
            if name.endswith(("_err", "_err32", "_err64")):
                assert name not in constants, f"{path.name}: {name} is named a measured error but typed"
    assert {"torch_tol", "row_sum_tol64", "hull_n"} <= vd.constant_glues(BOOK / "01_mechanics_evidence.ipynb")
    assert "torch_err" not in vd.constant_glues(BOOK / "01_mechanics_evidence.ipynb")


def test_constant_glues_is_kept_per_content_not_per_file(book_copy):
    """The cache is a pure speed-up: a copy gives the parse's own answer, an edited copy is parsed again."""
    path = book_copy / "01_mechanics_evidence.ipynb"
    sources = tuple("".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code")
    uncached = vd._constant_glues.__wrapped__(sources)
    assert vd.constant_glues(path) == vd.constant_glues(BOOK / path.name) == set(uncached) and "torch_tol" in uncached
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["source"] = "".join(cell["source"]).replace('glue("torch_tol", ', 'glue("torch_tol", 0 * torch_err + ')
    path.write_text(json.dumps(nb))
    assert "torch_tol" not in vd.constant_glues(path) and "torch_tol" in vd.constant_glues(BOOK / path.name)


def test_a_threshold_presented_as_a_measured_error_is_caught(book_copy, book_problems):
    """A chapter that glues its threshold under a measured error's name is caught, whatever the name."""
    c = cl.by_id("formula")
    nb_path = book_copy / f"{c.chapter}.ipynb"
    nb = json.loads(nb_path.read_text())
    hits = 0
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        if 'glue("torch_err", torch_err' in src:
            cell["source"] = src.replace('glue("torch_err", torch_err', 'glue("torch_err", tol')
            hits += 1
    assert hits == 1
    nb_path.write_text(json.dumps(nb))
    problems = _new_problems(vd.chapter_problems(book_copy), book_problems)
    assert problems == ["formula: torch_err is presented as a measured error, but 01_mechanics_evidence glues it "
                        "from a number it chose (a threshold)"]
    renamed = _replaced("formula", evidence="differs by less than {hull_n}")  # a typed number, any name
    assert "formula: hull_n is presented as a measured error, but 01_mechanics_evidence glues it from a number it " \
           "chose (a threshold)" in vd.chapter_problems(BOOK, renamed)
    named = _replaced("formula", evidence="largest difference {torch_gap:.0e}")
    nb = json.loads(nb_path.read_text())
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        cell["source"] = src.replace('glue("torch_err", tol', 'glue("torch_gap", tol')
    nb_path.write_text(json.dumps(nb))
    assert "formula: torch_gap is named as a measured error, but 01_mechanics_evidence glues it from a number it " \
           "chose (a threshold)" in vd.chapter_problems(book_copy, named)


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
    glued = vd.read_glue(BOOK / "06_scaling_evidence.ipynb")
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


def _cards(markdown):
    """Split ledger cards into (header, {field: text}) pairs."""
    out = []
    for block in markdown.split("\n\n**§")[0:]:
        head, _, body = block.partition("\n\n")
        fields = dict(re.match(r"- \*\*(.+?):\*\* (.*)", line).groups() for line in body.splitlines())
        out.append((head, fields))
    return out


def test_ledger_markdown_has_one_card_per_claim_with_a_link():
    evidence = cl.load_evidence()
    cards = _cards(cl.ledger_markdown(evidence))
    assert len(cards) == len(cl.CLAIMS)
    for c, (head, fields) in zip(cl.CLAIMS, cards):
        assert head.lstrip("*§").startswith(f"{c.section} · {c.text}")
        assert ("*(implied)*" in head) == c.implied
        assert fields["Tested in"] == f"[chapter {int(c.chapter[:2])}]({c.url})"
        assert fields["Verdict"].split(" ", 1)[1].startswith(c.verdict + (" " if c.verdict == "holds when" else ":"))
        assert c.finding.rstrip(".") in fields["Verdict"]
        assert fields.get("Read as", "") == c.reading and fields.get("Against", "") == c.baseline
        if not set(c.glue_names) <= set(evidence.get(c.id, ())):  # shipped evidence out of date: said so
            assert fields["Numbers"] == fields["Holds over"] == cl.MISSING_EVIDENCE
            continue
        assert fields["Numbers"] == cl.evidence_text(c, evidence[c.id])
        assert fields["Holds over"] == (c.robustness.format(**evidence[c.id]) or "—")


def test_ledger_markdown_has_no_table_to_scroll_sideways():
    md = cl.ledger_markdown(cl.load_evidence())
    assert not any(line.startswith("|") for line in md.splitlines())  # cards, not a wide table
    assert md.count("\n\n**§") == len(cl.CLAIMS) - 1  # one blank line between cards: valid Markdown blocks


def test_ledger_markdown_fills_the_robustness_from_the_glue():
    c = dataclasses.replace(cl.by_id("formula"), robustness="in {n_ok} of {n} seeds", summary="{torch_err:.0e}")
    (_, fields), = _cards(cl.ledger_markdown({"formula": {"torch_err": 1e-15, "n_ok": 4, "n": 5}}, [c]))
    assert fields["Holds over"] == "in 4 of 5 seeds"


def test_the_ledger_page_links_every_claim():
    """The closing ledger page is the hub: every claim's card and summary line link to its box."""
    nb = json.loads((BOOK / "ledger.ipynb").read_text())
    shown = json.dumps([c.get("outputs", []) for c in nb["cells"] if c["cell_type"] == "code"])
    for c in cl.CLAIMS:
        assert shown.count(f"({c.url})") >= 2, f"the ledger page does not link claim {c.id} twice (card and summary)"
    assert "{ref}" not in shown, "the ledger's Markdown outputs use a MyST role, which Colab cannot render"
    assert "not collected yet" not in shown, "the ledger ran before `python -m attention_course evidence`"


def test_the_ledger_links_the_published_book():
    """The address the ledger links to is the one the plain edition and the Colab button use."""
    import yaml

    from attention_course.course.plain_edition import book_url

    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert cl.PUBLISHED_BOOK == book_url(config)
    assert cl.by_id("formula").url == f"{book_url(config)}/book/01_mechanics_evidence.html#claim-formula"


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
