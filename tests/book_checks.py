"""Checks of the book's pages and the claims ledger that only the tests run (moved out of the package).

:func:`ledger_problems` (the ledger), :func:`box_problems` (the verdict boxes' word budgets),
:func:`claim_line_problems` (the lessons' claim lines) and :func:`figure_ref_problems` (a chapter's
typed figure numbers) each return what is wrong, empty when all is well.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Union

from attention_course.course.claim_lines import MARK, _rewrite, _source
from attention_course.course.claims import CLAIMS, SECTIONS, VERDICTS, Claim
from attention_course.course.expressions import load_notebook
from attention_course.course.figure_refs import NUMREF, _written, book_figure_numbers
from attention_course.course.verdict_boxes import SUMMARY_WORDS, TITLE_WORDS, box_title


_THRESHOLD = re.compile(r"(?:^|_)tol\d*(?:_|$)")


def is_threshold(name: str) -> bool:
    """Whether a glue name is a threshold by the naming rule: it has a ``tol`` part.

    Examples
    --------
    >>> [is_threshold(n) for n in ("torch_tol", "row_sum_tol64", "torch_err", "stolen", "tol_x")]
    [True, True, False, False, True]
    """
    return bool(_THRESHOLD.search(name))


def ledger_problems(claims: Iterable[Claim] = CLAIMS) -> list[str]:
    """List what is missing or malformed in a ledger (empty when all is well).

    Examples
    --------
    >>> bad = Claim("x", 9, "", "a claim", "maybe", "", "within {x_tol:.0e}")
    >>> for p in ledger_problems([bad]):
    ...     print(p)
    x: section 9 is not one of 1-7
    x: no chapter
    x: no lesson (the lesson page that states it)
    x: verdict 'maybe' is not one of holds / holds when / wrong as stated / undecided
    x: no finding
    x: no reading
    x: no baseline
    x: no robustness
    x: uses the threshold x_tol as evidence (a name with a 'tol' part is a threshold, not a result)
    """
    problems, seen = [], set()
    for c in claims:
        if c.id in seen:
            problems.append(f"{c.id}: id used twice")
        seen.add(c.id)
        if c.section not in SECTIONS:
            problems.append(f"{c.id}: section {c.section} is not one of {min(SECTIONS)}-{max(SECTIONS)}")
        if not c.chapter:
            problems.append(f"{c.id}: no chapter")
        if not c.lesson or c.lesson.endswith("_evidence"):
            problems.append(f"{c.id}: no lesson (the lesson page that states it)")
        if not c.text.strip():
            problems.append(f"{c.id}: no claim text")
        if c.verdict not in VERDICTS:
            problems.append(f"{c.id}: verdict {c.verdict!r} is not one of {' / '.join(VERDICTS)}")
        if not c.finding.strip():
            problems.append(f"{c.id}: no finding")
        for field in ("reading", "baseline", "robustness"):
            if not getattr(c, field).strip():
                problems.append(f"{c.id}: no {field}")
        for field in ("reading", "baseline"):
            if "{" in getattr(c, field) or "}" in getattr(c, field):
                problems.append(f"{c.id}: the {field} is plain text, but has a brace")
        if not c.evidence_names:
            problems.append(f"{c.id}: the evidence names no glued number")
        for name in filter(is_threshold, c.glue_names):
            problems.append(f"{c.id}: uses the threshold {name} as evidence "
                            "(a name with a 'tol' part is a threshold, not a result)")
    return problems


def _words(text: str) -> int:
    """Words a reader reads: an inline number (``{name:fmt}``) or maths (``$...$``) is one word."""
    text = re.sub(r"\{[^{}]*\}", " 1 ", text)
    text = re.sub(r"\$[^$]+\$", " x ", text)
    return sum(1 for word in text.split() if any(ch.isalnum() for ch in word))  # a dash is not a word


def box_problems(claims: Iterable[Claim] = CLAIMS) -> list[str]:
    """Claims whose box would be missing a title or a summary, or break the word budgets.

    Examples
    --------
    >>> long = Claim("x", 1, "01_mechanics", "t", "holds", "f", "{a}", title="word " * 20, summary="s")
    >>> box_problems([long, Claim("y", 1, "01_mechanics", "t", "holds", "f", "{a}")])
    ['x: the box title has 21 words (at most 20)', 'y: no title', 'y: no summary']
    """
    problems = []
    for c in claims:
        for field in ("title", "summary"):
            if not getattr(c, field).strip():
                problems.append(f"{c.id}: no {field}")
        if c.title.strip() and _words(box_title(c)) > TITLE_WORDS:
            problems.append(f"{c.id}: the box title has {_words(box_title(c))} words (at most {TITLE_WORDS})")
        if _words(c.summary) > SUMMARY_WORDS:
            problems.append(f"{c.id}: the summary has {_words(c.summary)} words (at most {SUMMARY_WORDS})")
    return problems


def claim_line_problems(book: Union[str, Path], claims: Iterable[Claim] = CLAIMS) -> list[str]:
    """What is wrong with the claim lines of the notebooks in ``book`` (empty when all is well).

    A claim boxed on another page than its lesson has exactly one current line, in its lesson.

    Examples
    --------
    >>> import json, tempfile
    >>> c = Claim("x", 1, "01_x_evidence", "T.", "holds", "f", "{a}", lesson="01_x")
    >>> d = Path(tempfile.mkdtemp())
    >>> cell = {"cell_type": "markdown", "metadata": {}, "source": "% claim-line: x\\nold"}
    >>> _ = (d / "01_x.ipynb").write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4,
    ...                                                "nbformat_minor": 5}))
    >>> claim_line_problems(d, [c])
    ['01_x: the line of x is not what the ledger writes (run the sync step)']
    """
    claims = list(claims)
    table = {c.id: c for c in claims}
    found: dict[str, list[str]] = {c.id: [] for c in claims}
    problems = []
    for path in sorted(Path(book).glob("*.ipynb")):
        nb = load_notebook(path)
        for cell in nb["cells"]:
            if cell["cell_type"] != "markdown":
                continue
            for m in MARK.finditer(_source(cell)):
                if m["id"] not in table:
                    problems.append(f"{path.stem}: a claim line names {m['id']!r}, which the ledger does not have")
                    continue
                found[m["id"]].append(path.stem)
                if path.stem != table[m["id"]].lesson:
                    problems.append(f"{path.stem}: the line of {m['id']} belongs in its lesson, "
                                    f"{table[m['id']].lesson}")
        stale = _rewrite(nb, [table[i] for i, pages in found.items() if path.stem in pages])
        problems += [f"{path.stem}: the line of {i} is not what the ledger writes (run the sync step)"
                     for i in dict.fromkeys(stale)]
    for c in claims:
        if c.chapter != c.lesson and not found[c.id]:
            problems.append(f"{c.lesson}: no line for {c.id} (mark it with '% claim-line: {c.id}')")
        if len(found[c.id]) > 1:
            problems.append(f"{c.id}: {len(found[c.id])} lines ({', '.join(found[c.id])}); one is enough")
    return problems


def figure_ref_problems(path: Union[str, Path]) -> list[str]:
    """References in a chapter whose figure number is missing or stale; empty when all are right."""
    path = Path(path)
    nb = load_notebook(path)
    numbers, problems = book_figure_numbers(path.parent), []
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        for m in NUMREF.finditer(_source(cell)):
            target = m["target"] or m["bare"]
            if target in numbers and m.group(0) != _written(target, numbers):
                problems.append(f"cell {i}: {m.group(0)} should read {_written(target, numbers)}")
    return problems
