"""Verdict boxes written from the ledger: one short box per claim, the same in every chapter.

The notebooks' sync step (``python .ci/execute_notebooks.py --sync-only``, through
:func:`sync_verdict_boxes`) writes each box from the claim's ledger entry: a title of at most
:data:`TITLE_WORDS` words, a body of at most :data:`SUMMARY_WORDS` words, and a collapsed
"How this was tested". ``{name:fmt}`` becomes the role ``{eval}`value_of("name:fmt")```.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Optional, Union

from .claims import CLAIMS, SECTIONS, VERDICT_CLASS, Claim
from .expressions import glue_roles, load_notebook, save_notebook

__all__ = ["TITLE_WORDS", "SUMMARY_WORDS", "box_title", "box_markdown",
           "box_span", "sync_verdict_boxes", "stale_boxes", "closing_summary"]

#: The most words a box's title may have, and its body (issue 25's budget).
TITLE_WORDS, SUMMARY_WORDS = 20, 60
#: The fence of a generated box; its collapsed part uses the three-colon fence inside it.
BOX_FENCE = "::::"
_OPEN = re.compile(r"^(?P<fence>:{3,})\{(?P<name>[\w:-]+)\}")


def box_title(c: Claim) -> str:
    """The box's title: ``<title> — <verdict>``, with ``<finding>`` after *holds when*.

    Examples
    --------
    >>> c = Claim("x", 1, "01_mechanics", "t", "holds when", "queries and keys are one sequence.", "{a}",
    ...           title="A is n × n")
    >>> box_title(c)
    'A is n × n — holds when queries and keys are one sequence'
    >>> box_title(Claim("y", 1, "01_mechanics", "t", "holds", "f", "{a}", title="Rows sum to one"))
    'Rows sum to one — holds'
    """
    condition = f" {c.finding.strip().rstrip('.')}" if c.verdict == "holds when" else ""
    return f"{c.title.strip()} — {c.verdict}{condition}"


def _paragraph(label: str, text: str) -> str:
    return f"**{label}.** {text.strip()}" if text.strip() else ""


def box_markdown(c: Claim) -> str:
    """The MyST of a claim's verdict box, as the sync step writes it into the chapter.

    Examples
    --------
    >>> c = Claim("x", 1, "01_mechanics", "t", "holds", "f", "error {e:.0e}", title="Rows sum to one",
    ...           summary="Every row sums to one within {e:.0e}.", reading="R.", baseline="B.",
    ...           robustness="{n} seeds", experiment="E.", decision="D.")
    >>> print(box_markdown(c))
    ::::{admonition} Rows sum to one — holds
    :class: tip
    :name: claim-x
    Every row sums to one within {eval}`value_of("e:.0e")`.
    <BLANKLINE>
    :::{dropdown} How this was tested
    **Reading.** R.
    <BLANKLINE>
    **Experiment.** E.
    <BLANKLINE>
    **Baseline.** B.
    <BLANKLINE>
    **Decision rule, stated before the run.** D.
    <BLANKLINE>
    **Robustness.** {eval}`value_of("n")` seeds
    <BLANKLINE>
    **Evidence.** error {eval}`value_of("e:.0e")`
    :::
    ::::
    """
    tested = [_paragraph("Reading", c.reading), _paragraph("Experiment", c.experiment),
              _paragraph("Baseline", c.baseline),
              _paragraph("Control", c.control) if c.control.strip() != c.baseline.strip() else "",
              _paragraph("Decision rule, stated before the run", c.decision),
              _paragraph("Robustness", glue_roles(c.robustness)),
              _paragraph("Evidence", glue_roles(c.evidence)), c.details.strip()]
    body = "\n\n".join(t for t in tested if t)
    return (f"{BOX_FENCE}{{admonition}} {box_title(c)}\n:class: {VERDICT_CLASS[c.verdict]}\n:name: {c.label}\n"
            f"{glue_roles(c.summary.strip())}\n\n:::{{dropdown}} How this was tested\n"
            f"{body}\n:::\n{BOX_FENCE}")


def closing_summary(claims: Iterable[Claim] = CLAIMS) -> str:
    """The course's closing summary: one bullet per essay section, each claim's box title linked to its box.

    Examples
    --------
    >>> c = Claim("x", 1, "01_mechanics", "t", "holds", "f", "{a}", title="Rows sum to one")
    >>> print(closing_summary([c]))  # doctest: +ELLIPSIS
    - **Mechanics.** [Rows sum to one — holds](https://.../book/01_mechanics.html#claim-x).
    """
    claims = list(claims)
    bullets = []
    for section, name in SECTIONS.items():
        here = [f"[{box_title(c)}]({c.url})" for c in claims if c.section == section]
        if here:
            bullets.append(f"- **{name}.** " + "; ".join(here) + ".")
    return "\n".join(bullets)


def box_span(markdown: str, label: str) -> Optional[tuple[int, int]]:
    """Where the admonition labelled ``label`` starts and ends in ``markdown`` (character offsets).

    The end is just after its closing fence; ``None`` when there is no such box.

    Examples
    --------
    >>> md = "Intro.\\n::::{admonition} T\\n:name: claim-x\\nA\\n:::{note}\\nB\\n:::\\n::::\\nAfter."
    >>> start, end = box_span(md, "claim-x")
    >>> md[start:end].splitlines()[0], md[end:]
    ('::::{admonition} T', '\\nAfter.')
    >>> box_span(md, "claim-y") is None
    True
    """
    lines = markdown.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    for i, line in enumerate(lines):
        m = _OPEN.match(line)
        if not (m and m["name"] == "admonition"):
            continue
        j = i + 1
        named = False
        while j < len(lines) and re.match(r"^:[\w-]+:", lines[j]):  # the option lines
            named = named or bool(re.match(rf"^:name:\s*{re.escape(label)}\s*$", lines[j]))
            j += 1
        if not named:
            continue
        depth = [m["fence"]]
        for k in range(j, len(lines)):
            inner, s = _OPEN.match(lines[k]), lines[k].strip()
            if inner:
                depth.append(inner["fence"])
            elif s and set(s) == {":"} and len(s) >= len(depth[-1]):
                depth.pop()
                if not depth:
                    return offsets[i], offsets[k] + len(lines[k].rstrip("\n"))
        raise ValueError(f"the box {label} opened with {m['fence']} is never closed")
    return None


def _source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _rewrite(nb: dict, claims: Iterable[Claim]) -> list[str]:
    """Write every generated box into ``nb`` in place; return the labels whose box changed."""
    changed = []
    for c in claims:
        if not (c.title.strip() and c.summary.strip()):
            continue
        for cell in nb["cells"]:
            if cell["cell_type"] != "markdown":
                continue
            source = _source(cell)
            span = box_span(source, c.label)
            if span is None:
                continue
            new = source[:span[0]] + box_markdown(c) + source[span[1]:]
            if new != source:
                cell["source"] = new
                changed.append(c.label)
    return changed


def stale_boxes(path: Union[str, Path], claims: Iterable[Claim] = CLAIMS) -> list[str]:
    """The labels of a chapter's boxes that differ from what the ledger writes (empty when in sync)."""
    claims = [c for c in claims if c.chapter == Path(path).stem]
    return _rewrite(load_notebook(path), claims)


def sync_verdict_boxes(path: Union[str, Path], claims: Iterable[Claim] = CLAIMS) -> bool:
    """Rewrite a chapter's verdict boxes from the ledger; return whether the file changed."""
    path = Path(path)
    nb = load_notebook(path)
    if not _rewrite(nb, [c for c in claims if c.chapter == path.stem]):
        return False
    return save_notebook(path, nb)
