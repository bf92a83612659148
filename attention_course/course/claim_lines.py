"""One line per claim in its lesson: what the essay says, its verdict, and a link to the evidence.

Written from the ledger by the sync step after a MyST comment mark::

    % claim-line: rows-sum-to-one
    **{term}`The essay <essay>`:** Every row of A is ... **Verdict: holds.** ({ref}`the evidence <claim-rows-sum-to-one>`)
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Union

from .claims import CLAIMS, Claim
from .expressions import load_notebook, save_notebook

__all__ = ["MARK", "PREFIX", "claim_line", "sync_claim_lines", "claim_line_problems"]

#: The comment that marks where a claim's line goes; the line itself follows it.
MARK = re.compile(r"^% claim-line: (?P<id>[a-z0-9-]+)[ \t]*$", re.M)
#: How a claim line starts; "The essay" links the glossary's entry for it.
PREFIX = "**{term}`The essay <essay>`:**"
#: Starts of the lines the sync step replaces (the current one and the earlier one without the link).
_LINE_STARTS = (PREFIX, "**The essay:**")


def claim_line(c: Claim) -> str:
    """The one line a lesson shows for claim ``c``: the claim, its verdict, a link to its box.

    Examples
    --------
    >>> c = Claim("x", 1, "01_x_evidence", "A is n × n.", "holds when", "queries and keys are one sequence.",
    ...           "{a}", lesson="01_x")
    >>> claim_line(c)
    '**{term}`The essay <essay>`:** A is n × n. **Verdict: holds when** queries and keys are one sequence. ({ref}`the evidence <claim-x>`)'
    >>> claim_line(Claim("y", 1, "01_x_evidence", "Rows sum to one.", "holds", "f", "{a}", lesson="01_x"))
    '**{term}`The essay <essay>`:** Rows sum to one. **Verdict: holds.** ({ref}`the evidence <claim-y>`)'
    """
    if c.verdict == "holds when":
        verdict = f"**Verdict: holds when** {c.finding.strip().rstrip('.')}."
    else:
        verdict = f"**Verdict: {c.verdict}.**"
    return f"{PREFIX} {c.text.strip()} {verdict} ({{ref}}`the evidence <{c.label}>`)"


def _source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _rewrite(nb: dict, claims: Iterable[Claim]) -> list[str]:
    """Write the line after every mark in ``nb``'s markdown cells, in place; return the ids whose line changed."""
    table = {c.id: c for c in claims}
    changed = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        lines = _source(cell).split("\n")
        out, i = [], 0
        while i < len(lines):
            out.append(lines[i])
            m = MARK.match(lines[i])
            if m and m["id"] in table:
                want = claim_line(table[m["id"]])
                has_line = i + 1 < len(lines) and lines[i + 1].startswith(_LINE_STARTS)
                if not (has_line and lines[i + 1] == want):
                    changed.append(m["id"])
                out.append(want)
                i += 2 if has_line else 1
                continue
            i += 1
        new = "\n".join(out)
        if new != _source(cell):  # kept as the notebook stores it: a list of lines, or one string
            cell["source"] = new.splitlines(keepends=True) if isinstance(cell["source"], list) else new
    return changed


def sync_claim_lines(path: Union[str, Path], claims: Iterable[Claim] = CLAIMS) -> bool:
    """Rewrite a lesson's claim lines from the ledger; return whether the file changed."""
    nb = load_notebook(path)
    if not _rewrite(nb, claims):
        return False
    return save_notebook(Path(path), nb)


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
