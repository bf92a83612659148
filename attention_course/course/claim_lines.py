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

__all__ = ["MARK", "PREFIX", "claim_line", "sync_claim_lines"]

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
