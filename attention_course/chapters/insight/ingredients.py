r"""Read the ablation runs: mean accuracy over seeds and its spread, per task and variant, and the decisions.

:func:`accuracy_table` summarises the records of
:func:`~attention_course.chapters.insight.ablation_grid.run_job`; :func:`window_curve` and
:func:`first_within` feed the window slider.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple, Optional

import numpy as np

from .recall_tasks import gaps

__all__ = [
    "Score", "accuracy_table", "window_curve", "covered_share", "ROWS", "decide_data_dependent",
    "decide_all_pairs", "decide_differentiable", "decide_memory",
]


class Score(NamedTuple):
    """Accuracy over seeds: mean, worst seed, best seed, and the number of seeds."""

    mean: float
    low: float
    high: float
    n: int

    @property
    def spread(self) -> float:
        """Best seed minus worst seed."""
        return self.high - self.low


#: Heat-map rows: (ingredient taken away, variant name in the runs).
ROWS = (
    ("none (softmax attention)", "softmax attention"),
    ("data dependence: fixed T x T", "fixed mixing (learned T x T)"),
    ("data dependence: long convolution", "gated long convolution"),
    ("all pairs: window of 4", "window 4"),
    ("gradient: argmax, no gradient", "argmax, no gradient"),
    ("gradient: straight-through argmax", "straight-through argmax"),
    ("softmax -> sparsemax", "sparsemax"),
    ("asymmetry: tied W_Q = W_K", "tied"),
    ("tied, self masked", "tied, self masked"),
    ("learned metric: W_Q = W_K = I (scale learned)", "W_Q = W_K = I, scale learned"),
    ("softmax -> linear attention", "linear attention"),
    ("mixing altogether", "no mixing"),
)


def accuracy_table(runs: Sequence[Mapping]) -> dict[tuple[str, str], Score]:
    """``(task, variant) -> Score`` over each run's seeds.

    Examples
    --------
    >>> t = accuracy_table([{"task": "a", "variant": "v", "accuracy": [0.5, 0.7, 0.6]}])
    >>> s = t["a", "v"]
    >>> round(s.mean, 3), s.low, s.high, s.n, round(s.spread, 3)
    (0.6, 0.5, 0.7, 3, 0.2)
    """
    out = {}
    for r in runs:
        a = np.asarray(r["accuracy"], dtype=float)
        out[r["task"], r["variant"]] = Score(float(a.mean()), float(a.min()), float(a.max()), int(a.size))
    return out


def covered_share(n_pairs: int, windows: Sequence[int], seed: int = 0) -> np.ndarray:
    """Share of the queries of stacked MQAR whose key lies inside a causal window of ``w`` positions.

    Examples
    --------
    >>> covered_share(16, [1, 32]).tolist()
    [0.0, 1.0]
    """
    g = gaps(n_pairs, seed=seed).numpy()  # (queries,)
    return np.array([(g < w).mean() for w in windows])


def window_curve(table: Mapping[tuple[str, str], Score], task: str = "recall (MQAR, 16 pairs)",
                 full: int = 32) -> tuple[list[int], list[Score]]:
    """Windows (ascending, the full length last) and their scores; the full window is softmax attention.

    Examples
    --------
    >>> S = lambda m: Score(m, m, m, 1)
    >>> t = {("r", "window 4"): S(0.2), ("r", "window 2"): S(0.1), ("r", "softmax attention"): S(0.99)}
    >>> w, s = window_curve(t, "r")
    >>> w, [x.mean for x in s]
    ([2, 4, 32], [0.1, 0.2, 0.99])
    """
    ws = sorted(int(v.split()[1]) for (t, v) in table if t == task and v.startswith("window "))
    scores = [table[task, f"window {w}"] for w in ws] + [table[task, "softmax attention"]]
    return ws + [full], scores


def first_within(values: Sequence[float], margin: float, target: Optional[float] = None) -> Optional[int]:
    """The first index whose value is within ``margin`` of ``target`` (default: the last value).

    Examples
    --------
    >>> first_within([0.1, 0.5, 0.97, 0.99], 0.05)
    2
    >>> first_within([0.1, 0.2], 0.05, target=0.9) is None
    True
    """
    target = values[-1] if target is None else target
    for i, v in enumerate(values):
        if abs(v - target) <= margin:
            return i
    return None


# ------------------------------------------------------------------ the pre-registered decisions
# Each function applies the ``decision`` field of its claim in attention_course/data/claims.toml to the
# numbers, so that the chapter asserts the ledger's verdict instead of typing it. "undecided" means the
# numbers fall between the registered cases.
RECALL, COPY = "recall (MQAR, 16 pairs)", "previous token"


def _m(t, task, variant) -> float:
    return t[task, variant].mean


def decide_data_dependent(t: Mapping) -> str:
    """``data-dependent``: softmax against the best data-independent mixer, on recall and on the copy.

    Examples
    --------
    >>> S = lambda m: Score(m, m, m, 3)
    >>> t = {(RECALL, "softmax attention"): S(1.0), (RECALL, "fixed mixing (learned T x T)"): S(0.1),
    ...      (RECALL, "gated long convolution"): S(0.1), (COPY, "softmax attention"): S(1.0),
    ...      (COPY, "fixed mixing (learned T x T)"): S(1.0), (COPY, "gated long convolution"): S(0.9)}
    >>> decide_data_dependent(t)
    'holds when'
    """
    fixed = ("fixed mixing (learned T x T)", "gated long convolution")
    gap_r = _m(t, RECALL, "softmax attention") - max(_m(t, RECALL, v) for v in fixed)
    gap_c = _m(t, COPY, "softmax attention") - max(_m(t, COPY, v) for v in fixed)
    if gap_r <= 0.05:
        return "wrong as stated"
    if gap_r > 0.2 and gap_c > 0.2:
        return "holds"
    if gap_r > 0.2 and gap_c <= 0.05:
        return "holds when"
    return "undecided"


def decide_all_pairs(t: Mapping, n_pairs: int = 16) -> str:
    """``all-pairs``: every window shorter than the input against full attention and the covered share."""
    windows, scores = window_curve(t, RECALL, full=2 * n_pairs)
    full = scores[-1].mean
    part = [s.mean for s in scores[:-1]]
    cover = covered_share(n_pairs, windows[:-1])
    copy_gap = _m(t, COPY, "softmax attention") - _m(t, COPY, "window 4")
    if any(full - a <= 0.05 for a in part):
        return "wrong as stated"
    if copy_gap > 0.05:
        return "holds"
    if copy_gap <= 0.05 and np.all(np.abs(np.array(part) - cover) <= 0.15):
        return "holds when"
    return "undecided"


def decide_differentiable(t: Mapping) -> str:
    """``differentiable``: argmax with no gradient against softmax and sparsemax, on recall."""
    soft, sparse, none = (_m(t, RECALL, v) for v in ("softmax attention", "sparsemax", "argmax, no gradient"))
    if soft - none <= 0.1:
        return "wrong as stated"
    if none < 0.2 and soft >= 0.9 and sparse >= 0.9:
        return "holds"
    if none < 0.2 and sparse < 0.9:
        return "holds when"
    return "undecided"


def decide_memory(caps: Mapping[str, Mapping[int, int]]) -> str:
    """``associative-memory``: ``caps[memory][d]`` (worst seed) for the two softmax memories and the outer product.

    Examples
    --------
    >>> caps = {"softmax, beta = 1": {16: 32, 32: 999}, "softmax, beta = 1/sqrt(d)": {16: 8, 32: 64},
    ...         "outer product (linear)": {16: 2, 32: 4}}
    >>> decide_memory(caps)
    'holds'
    """
    op = caps["outer product (linear)"]
    ok = {name: all(c[d] > op[d] for d in c) and all(c[d] > d for d in c if d >= 32)
          for name, c in caps.items() if name.startswith("softmax")}
    if all(ok.values()):
        return "holds"
    if any(ok.values()):
        return "holds when"
    if all(any(c[d] <= op[d] for d in c) for name, c in caps.items() if name.startswith("softmax")):
        return "wrong as stated"
    return "undecided"
