"""The claims ledger: every claim of the essay, its verdict and its evidence.

:data:`CLAIMS` (read from ``attention_course/data/claims.toml``) is rendered by chapter 7 and
checked against the chapters by the tests. Each :class:`Claim` names the page whose verdict box
(labelled ``claim-<id>``) decides it. Its evidence is a format string over that chapter's glue
names (``"{torch_err:.0e}"``), filled from ``attention_course/data/evidence.json``
(:func:`load_evidence`, rewritten by ``python -m attention_course evidence``). A glue name with a
``tol`` part is a threshold, never a result, and may not appear in the ledger.
"""

from __future__ import annotations

import json
import math
import string
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Union

__all__ = [
    "Claim", "CLAIMS", "LEDGER_FILE", "load_claims", "VERDICTS", "VERDICT_CLASS", "SECTIONS", "EVIDENCE_FILE", "by_id",
    "load_evidence", "evidence_text", "verdict_counts", "ledger_markdown", "error_ceiling",
]  # fmt: skip

#: "undecided" is a verdict too: the experiment that would decide the claim cannot run here (the
#: claim's finding says what would decide it).
VERDICTS = ("holds", "holds when", "wrong as stated", "undecided")
#: The admonition class that goes with each verdict.
VERDICT_CLASS = {"holds": "tip", "holds when": "warning", "wrong as stated": "danger", "undecided": "note"}
#: The essay's sections, in order; chapter N tests section N (the closing section's
#: own claims are tested in chapters 3 and 7).
SECTIONS = {
    1: "Mechanics",
    2: "Kernel smoothing",
    3: "Low rank",
    4: "Multi-head",
    5: "Message passing",
    6: "The scale",
    7: "The insight",
}
EVIDENCE_FILE = Path(__file__).resolve().parents[1] / "data" / "evidence.json"
#: The published book (``_config.yml``'s address, as the plain edition derives it; a test keeps
#: them equal). Chapter 7's generated Markdown links here, so its links work in the book, in
#: JupyterLab and in the plain edition on Colab, GitHub and VS Code alike.
PUBLISHED_BOOK = "https://attention-course.github.io/attention-is-learned-association"


@dataclass(frozen=True)
class Claim:
    """One claim of the essay, in the course's words, with where it is decided.

    Attributes
    ----------
    id : str
        Short kebab-case name; the chapter's verdict box is labelled ``claim-<id>``.
    section : int
        The essay section (1-6, or 7 for its closing "insight") that makes the claim.
    chapter : str
        Stem of the page whose verdict box decides it, e.g. ``"01_mechanics_evidence"``.
    text : str
        The claim, paraphrased.
    verdict : str
        One of :data:`VERDICTS`.
    finding : str
        What the chapter found, in words: the condition for *holds when*, what is
        wrong for *wrong as stated*.
    evidence : str
        A format string over the chapter's glue names, e.g.
        ``"{row_sum_tol64:.0e}"``.
    implied : bool
        True when the essay implies the claim rather than states it.
    reading : str
        The reading of the essay's words that the chapter tests. Plain text.
    baseline : str
        What the deciding number is compared with. Plain text.
    robustness : str
        Over how many seeds, inputs or sizes the verdict holds: a format string like
        ``evidence``, or words where nothing is random.
    title : str
        The claim in a few words (the box's title is ``<title> — <verdict>``), at most 20 words.
    summary : str
        The box's body, at most 60 words; a format string like ``evidence``.
    experiment, control, decision : str
        Stated before the deciding run: the experiment, its matched control, and which result
        gives which verdict. Plain text.
    details : str
        Optional MyST for the collapsed "How this was tested".
    lesson : str
        Stem of the lesson that states the claim in one line, e.g. ``"01_mechanics"``.
    """

    id: str
    section: int
    chapter: str
    text: str
    verdict: str
    finding: str
    evidence: str
    implied: bool = False
    reading: str = ""
    baseline: str = ""
    robustness: str = ""
    title: str = ""
    summary: str = ""
    experiment: str = ""
    control: str = ""
    decision: str = ""
    details: str = ""
    lesson: str = ""

    @property
    def label(self) -> str:
        """The label of the chapter's verdict box, ``claim-<id>``."""
        return f"claim-{self.id}"

    @property
    def url(self) -> str:
        """The address of the chapter's verdict box in the published book."""
        return f"{PUBLISHED_BOOK}/book/{self.chapter}.html#{self.label}"

    @property
    def evidence_names(self) -> tuple[str, ...]:
        """The glue names the evidence string uses, in order of appearance."""
        return _field_names(self.evidence)

    @property
    def robustness_names(self) -> tuple[str, ...]:
        """The glue names the robustness string uses, in order of appearance."""
        return _field_names(self.robustness)

    @property
    def glue_names(self) -> tuple[str, ...]:
        """Every glue name the claim uses: its evidence's, its robustness's, then its summary's."""
        return tuple(dict.fromkeys(self.evidence_names + self.robustness_names + _field_names(self.summary)))


def _field_names(fmt: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(f for _, f, _, _ in string.Formatter().parse(fmt) if f))


#: The ledger itself, one ``[[claim]]`` table per claim: data, shipped with the package.
LEDGER_FILE = Path(__file__).resolve().parents[1] / "data" / "claims.toml"


def load_claims(path: Union[str, Path] = LEDGER_FILE) -> tuple[Claim, ...]:
    """Read the ledger (``attention_course/data/claims.toml``) into :class:`Claim` objects, in order.

    Examples
    --------
    >>> claims = load_claims()
    >>> claims[0].id, claims[0].section, claims[0].verdict in VERDICTS
    ('formula', 1, True)
    """
    with open(path, "rb") as fh:
        return tuple(Claim(**entry) for entry in tomllib.load(fh)["claim"])


CLAIMS: tuple[Claim, ...] = load_claims()


# ------------------------------------------------------------- validation
def error_ceiling(error: float) -> float:
    """The smallest power of ten at or above a measured error (``1e-300`` for an error of 0).

    Round-off differs between CPUs, so a chapter glues a round-off error through this ceiling.

    Examples
    --------
    >>> error_ceiling(8.9e-16), error_ceiling(1.07e-15), error_ceiling(1e-15), error_ceiling(0.0)
    (1e-15, 1e-14, 1e-15, 1e-300)
    """
    if not error > 0:
        return 1e-300
    exponent = math.ceil(math.log10(error))
    while float(f"1e{exponent}") < error:  # log10 may round down just below a power of ten
        exponent += 1
    return float(f"1e{exponent}")


def load_evidence(path: Union[str, Path] = EVIDENCE_FILE) -> dict[str, dict[str, Any]]:
    """Read the evidence shipped with the package (see :func:`attention_course.course.verdicts.collect_evidence`)."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def evidence_text(c: Claim, values: Mapping[str, Any]) -> str:
    """Fill a claim's evidence string with its glued values.

    Examples
    --------
    >>> evidence_text(by_id("formula"), {"torch_err": 1e-15})
    "largest difference from PyTorch's SDPA below 1e-15 (float64)"
    """
    return c.evidence.format(**values)


def verdict_counts(claims: Iterable[Claim] = CLAIMS) -> dict[str, int]:
    """How many claims got each verdict.

    Examples
    --------
    >>> counts = verdict_counts()
    >>> sum(counts.values()) == len(CLAIMS)
    True
    """
    counts = dict.fromkeys(VERDICTS, 0)
    for c in claims:
        counts[c.verdict] += 1
    return counts


def by_id(claim_id: str) -> Claim:
    """Look a claim up by id (KeyError naming the known ids otherwise)."""
    for c in CLAIMS:
        if c.id == claim_id:
            return c
    raise KeyError(f"no claim {claim_id!r}; known: {', '.join(c.id for c in CLAIMS)}")


# ------------------------------------------------------------------ display
# Plain symbols that common text fonts have (emoji need an emoji font).
MISSING_EVIDENCE = "(not collected yet: run `python -m attention_course evidence`)"
_MARK = {"holds": "✓", "holds when": "⚠", "wrong as stated": "✗", "undecided": "?"}


def _card_fields(c: Claim, evidence: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """The text of one ledger card, field by field (numbers filled from the glue, or said missing)."""
    numbers, robustness = MISSING_EVIDENCE, MISSING_EVIDENCE
    if set(c.glue_names) <= set(evidence.get(c.id, ())):  # else the shipped evidence is out of date
        numbers, robustness = evidence_text(c, evidence[c.id]), c.robustness.format(**evidence[c.id]) or "—"
    verdict = f"{_MARK[c.verdict]} {c.verdict}" + (" " if c.verdict == "holds when" else ": ") + c.finding.rstrip(".")
    return {"Verdict": verdict, "Read as": c.reading, "Numbers": numbers, "Against": c.baseline,
            "Holds over": robustness, "Tested in": f"[chapter {int(c.chapter[:2])}]({c.url})"}


def ledger_markdown(evidence: Mapping[str, Mapping[str, Any]], claims: Iterable[Claim] = CLAIMS) -> str:
    """The ledger as Markdown cards, one block per claim, readable on a phone (no table to scroll).

    Plain Markdown (it renders everywhere); empty fields are left out.

    Examples
    --------
    >>> c = Claim("square", 1, "01_mechanics", "A is an n × n matrix.", "holds when",
    ...           "queries and keys come from one sequence", "a cross example gives {T} × {S}",
    ...           implied=True, reading="One row per query, one column per key.",
    ...           baseline="Self-attention.", robustness="deterministic")
    >>> print(ledger_markdown({"square": {"T": 3, "S": 7}}, [c]))
    **§1 · A is an n × n matrix.** *(implied)*
    <BLANKLINE>
    - **Verdict:** ⚠ holds when queries and keys come from one sequence
    - **Read as:** One row per query, one column per key.
    - **Numbers:** a cross example gives 3 × 7
    - **Against:** Self-attention.
    - **Holds over:** deterministic
    - **Tested in:** [chapter 1](https://attention-course.github.io/attention-is-learned-association/book/01_mechanics.html#claim-square)
    """
    cards = []
    for c in claims:
        head = f"**§{c.section} · {c.text}**" + (" *(implied)*" if c.implied else "")
        items = [f"- **{name}:** {text}" for name, text in _card_fields(c, evidence).items() if text]
        cards.append(head + "\n\n" + "\n".join(items))
    return "\n\n".join(cards)
