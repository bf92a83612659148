r"""Efficient attention trained with its approximation: softmax against linear attention as the associations grow.

Reads chapter 7's runs (``attention_course/data/insight_linear.json`` and ``insight_linear_long.json``)
as data and applies this chapter's pre-registered rule ``efficient-attention``: :func:`decide_trained`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Optional

import numpy as np

from ...models.experiments import read_json
from ...models.records import DATA_DIR

__all__ = ["LINEAR", "load_trained_runs", "trained_points", "decide_trained"]

TRAINED_RUNS = DATA_DIR / "insight_linear.json"
TRAINED_LONG_RUNS = DATA_DIR / "insight_linear_long.json"
SOFTMAX, LINEAR = "softmax attention", "linear attention"


def load_trained_runs(path: Path = TRAINED_RUNS, long_path: Optional[Path] = TRAINED_LONG_RUNS) -> list[dict]:
    """Every (mixer, N, d) record, each rerun point replaced by its longer-budget record (``budget``: short or long)."""
    runs = read_json(path)["runs"]
    long_runs = read_json(long_path)["runs"] if long_path and Path(long_path).is_file() else []
    key = lambda r: (r["variant"], r["n_pairs"], r["d_model"])  # noqa: E731
    new = {key(r): dict(r, budget="long") for r in long_runs}
    return [new.get(key(r), dict(r, budget="short")) for r in runs]


def trained_points(records: Sequence[Mapping]) -> list[dict]:
    """One point per (N, d) with both mixers: mean held-out accuracies over seeds, the gap, and its class.

    ``informative``: softmax at least 0.9 and N >= d; ``small``: N <= d / 4 (the state holds at least
    four times the pairs). Sorted by N / d, then d.

    Examples
    --------
    >>> r = lambda v, n, d, a: {"variant": v, "n_pairs": n, "d_model": d, "accuracy": a}
    >>> p = trained_points([r(SOFTMAX, 8, 32, [1.0, 1.0]), r(LINEAR, 8, 32, [0.97, 0.99]),
    ...                     r(SOFTMAX, 32, 32, [0.99, 0.97]), r(LINEAR, 32, 32, [0.5, 0.4])])
    >>> [(q["n"], q["d"], round(q["gap"], 2), q["small"], q["informative"]) for q in p]
    [(8, 32, 0.02, True, False), (32, 32, 0.53, False, True)]
    """
    acc = {(r["variant"], r["n_pairs"], r["d_model"]): float(np.mean(r["accuracy"])) for r in records}
    points = []
    for (variant, n, d), soft in acc.items():
        if variant != SOFTMAX or (LINEAR, n, d) not in acc:
            continue
        lin = acc[LINEAR, n, d]
        points.append({"n": n, "d": d, "ratio": n / d, "softmax": soft, "linear": lin, "gap": soft - lin,
                       "small": 4 * n <= d, "informative": n >= d and soft >= 0.9})
    return sorted(points, key=lambda p: (p["ratio"], p["d"]))


def decide_trained(points: Sequence[Mapping]) -> str:
    """The pre-registered rule of ``efficient-attention`` on :func:`trained_points`.

    holds when: gap <= 0.05 at every small point and > 0.1 at every informative point; wrong as stated:
    gap > 0.1 at some small point, or <= 0.05 at every informative point; otherwise undecided.

    Examples
    --------
    >>> pt = lambda gap, small, inf: {"gap": gap, "small": small, "informative": inf}
    >>> decide_trained([pt(0.01, True, False), pt(0.5, False, True)])
    'holds when'
    >>> decide_trained([pt(0.2, True, False), pt(0.5, False, True)]), decide_trained([pt(0.0, True, False)])
    ('wrong as stated', 'undecided')
    """
    small = [p["gap"] for p in points if p["small"]]
    informative = [p["gap"] for p in points if p["informative"]]
    if any(g > 0.1 for g in small) or (informative and all(g <= 0.05 for g in informative)):
        return "wrong as stated"
    if small and informative and all(g <= 0.05 for g in small) and all(g > 0.1 for g in informative):
        return "holds when"
    return "undecided"
