"""Predict, then reveal: one question per chapter, answered by the chapter's own glued number.

The answer is read from ``attention_course/data/evidence.json``, so the reveal and the verdict
box cannot disagree; the correct choice is the range the number falls in.
"""

from __future__ import annotations

import json
import math
import tomllib
from dataclasses import dataclass
from pathlib import Path

from .widgets import PredictReveal

__all__ = ["Prediction", "PREDICTIONS", "prediction", "verdict_href", "EVIDENCE_FILE", "CLAIMS_FILE"]

EVIDENCE_FILE = Path(__file__).resolve().parents[1] / "data" / "evidence.json"
#: The ledger: each claim names the page whose verdict box decides it (its ``chapter``).
CLAIMS_FILE = Path(__file__).resolve().parents[1] / "data" / "claims.toml"


def verdict_href(claim: str, path: Path = CLAIMS_FILE) -> str:
    """The link to ``claim``'s verdict box from any page of the book: ``<page>.html#claim-<claim>``.

    Examples
    --------
    >>> verdict_href("l-hops")
    '05_message_passing_evidence.html#claim-l-hops'
    >>> verdict_href("no-such-claim")
    Traceback (most recent call last):
    ...
    KeyError: "no claim 'no-such-claim' in claims.toml"
    """
    with open(path, "rb") as f:
        pages = {c["id"]: c["chapter"] for c in tomllib.load(f)["claim"]}
    if claim not in pages:
        raise KeyError(f"no claim {claim!r} in {path.name}")
    return f"{pages[claim]}.html#claim-{claim}"


@dataclass(frozen=True)
class Prediction:
    """A question about one glued number, with ranges ``(label, low, high)`` (low <= x < high)."""

    claim: str
    glue: str
    question: str
    ranges: tuple
    answer: str  # format string over ``value``

    def correct(self, value: float) -> str:
        hits = [label for label, lo, hi in self.ranges if lo <= value < hi]
        if len(hits) != 1:
            raise ValueError(f"{self.claim}/{self.glue} = {value!r} falls in {len(hits)} of the ranges "
                             f"{[(lo, hi) for _, lo, hi in self.ranges]}; expected exactly one")
        return hits[0]


_INF = math.inf
#: One prediction per chapter, keyed by the interactive name used on the page.
PREDICTIONS: dict = {
    "ix-predict-mech": Prediction(
        "convex-combination", "hull_dropout",
        "Dropout with p = 0.1 is applied to the attention weights of 500 random problems (3 to 9 queries, "
        "3 to 9 keys, values in the plane), so a row no longer sums to one. What share of the outputs "
        "then falls outside the convex hull of the values?",
        (("none", 0, 1e-9), ("under a fifth", 1e-9, 0.2), ("a fifth to a half", 0.2, 0.5), ("over half", 0.5, _INF)),
        "{value:.1%} of the outputs leave the hull: rescaled weights that no longer sum to one can push an output past the values."),
    "ix-predict-kern": Prediction(
        "local-average", "mse_w3",
        "Nadaraya-Watson with a Gaussian kernel of inverse width w = 0.3, 3 or 30: which test error "
        "does the middle width, w = 3, reach on the chapter's sine data (the noise variance is 1)?",
        (("below 0.5", 0, 0.5), ("between 0.5 and 1", 0.5, 1.0), ("above 1", 1.0, _INF)),
        "w = 3 reaches a test error of {value:.3f}; the narrow and the wide kernels do worse."),
    "ix-predict-lowrank": Prediction(
        "structure-implies-low-rank", "exp_rank_soft",
        "The logits of an 8 x 8 attention matrix have rank 1. What is the rank of the attention "
        "matrix after the row softmax?",
        (("1", 1, 2), ("2 to 7", 2, 8), ("8, full rank", 8, 9)),
        "The softmax of rank-1 logits has rank {value:.0f}: the exponential does not keep low rank."),
    "ix-predict-heads": Prediction(
        "heads-specialise", "div_loss1_mean",
        "Each output of the two-offset task needs the previous token and the token three back. One layer "
        "with a single head of width 32 trains as long as one with four heads of width 8. What held-out loss "
        "does the single head reach (knowing nothing: ln 64 = 4.16 nats; one digit right, the other guessed: "
        "ln 8 = 2.08)?",
        (("below 0.1: it solves the task", 0, 0.1), ("0.1 to 1: partly", 0.1, 1.0),
         ("above 1: it cannot look at both places", 1.0, _INF)),
        "A single head of width 32 stays at {value:.2f} nats on average over five seeds trained to convergence."),
    "ix-predict-graph": Prediction(
        "l-hops", "hc_L1",
        "One layer of 4 heads is trained, for up to 20,000 steps at its best learning rate, to follow two "
        "pointers in a row on 8 nodes, and tested on maps it never saw. What held-out accuracy does it "
        "reach (guessing scores 0.125)?",
        (("below 0.25: no better than guessing", 0, 0.25), ("0.25 to 0.9: partly", 0.25, 0.9),
         ("0.9 or more: it solves the task", 0.9, _INF)),
        "One layer reaches {value:.2f}: given time, it chains two lookups without a second layer."),
    "ix-predict-scale": Prediction(
        "saturation", "frac_none_1024",
        "Without the 1/sqrt(d_k) scale, at d_k = 1024, what share of attention rows puts more than "
        "0.99 of its weight on a single key?",
        (("under a tenth", 0, 0.1), ("a tenth to a half", 0.1, 0.5), ("over half", 0.5, _INF)),
        "{value:.0%} of the rows are saturated."),
}


def _evidence(path: Path = EVIDENCE_FILE) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def prediction(name: str, path: Path = EVIDENCE_FILE) -> PredictReveal:
    """The :class:`~attention_course.figures.widgets.PredictReveal` box ``name`` of :data:`PREDICTIONS`.

    Examples
    --------
    >>> box = prediction("ix-predict-lowrank")
    >>> box.correct
    '8, full rank'
    >>> prediction("ix-predict-nothing")
    Traceback (most recent call last):
    ...
    KeyError: "no prediction 'ix-predict-nothing'; expected one of [...]"
    """
    if name not in PREDICTIONS:
        raise KeyError(f"no prediction {name!r}; expected one of {sorted(PREDICTIONS)}")
    p = PREDICTIONS[name]
    ev = _evidence(path)
    if p.claim not in ev or p.glue not in ev[p.claim]:
        raise KeyError(f"{name}: evidence.json has no {p.claim}/{p.glue}; run `python -m attention_course evidence`")
    value = float(ev[p.claim][p.glue])
    return PredictReveal(name, p.question, [label for label, _, _ in p.ranges], p.correct(value),
                         p.answer.format(value=value) + f' <a href="{verdict_href(p.claim)}">See the verdict.</a>')
