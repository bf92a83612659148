r"""Which heads are low-rank? Two properties a reader can measure on any model's attention.

For a head's attention matrix :math:`A` (shape ``(n, n)``):

* the **mean row entropy** :math:`\bar H = \frac1n\sum_i -\sum_j A_{ij}\log A_{ij}` (nats;
  :math:`\log n` for uniform rows, 0 for one-hot rows), from
  :func:`~attention_course.chapters.mechanics.properties.row_entropy`;
* the **sink share**, the mean weight on ``[CLS]`` and ``[SEP]``
  (:func:`~attention_course.chapters.lowrank.baselines.sink_share`).

Both are functions of :math:`A` alone, so no reparametrisation of the queries and keys that
leaves attention unchanged (:math:`q \to aq,\ k \to k/a`; a shift of every key) can move them.
:func:`auc` says how well one of them ranks the low-rank heads above the others.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...core._backend import Array, to_numpy
from ..mechanics.properties import row_entropy
from .baselines import sink_share

__all__ = ["auc", "best_threshold"]


def mean_row_entropy(A: Array) -> np.ndarray:
    r"""Mean over rows of each row's entropy (nats), :math:`\frac1T \sum_i H(A_{i,:})`; ``A``: (..., T, S) -> (...,).

    Examples
    --------
    >>> float(mean_row_entropy(np.full((4, 4), 0.25)).round(6)) == round(float(np.log(4)), 6)
    True
    """
    return np.asarray(row_entropy(to_numpy(A))).mean(axis=-1)


def head_properties(A: Array, sinks: Sequence[int]) -> dict[str, np.ndarray]:
    """Mean row entropy and sink share of every head, ``A``: (..., T, S) -> two arrays (...,).

    Examples
    --------
    >>> A = np.array([[[1.0, 0.0], [1.0, 0.0]], [[0.5, 0.5], [0.5, 0.5]]])   # a sink head, a uniform head
    >>> {k: v.round(3).tolist() for k, v in head_properties(A, [0]).items()}
    {'entropy': [0.0, 0.693], 'sink_share': [1.0, 0.5]}
    """
    return {"entropy": mean_row_entropy(A), "sink_share": sink_share(A, sinks)}


def auc(score: Sequence[float], positive: Sequence[bool]) -> float:
    r"""Area under the ROC curve: the chance that a random positive scores above a random negative.

    .. math:: \mathrm{AUC} = \frac{1}{|P|\,|N|}\sum_{p \in P}\sum_{m \in N}
              \big(\mathbb 1[s_p > s_m] + \tfrac12\,\mathbb 1[s_p = s_m]\big)

    1: the score separates them perfectly; 0.5: no better than chance; 0: perfectly, the other
    way round (so ``max(AUC, 1 - AUC)`` reads a property in either direction).

    Examples
    --------
    >>> auc([0.9, 0.8, 0.1, 0.2], [True, True, False, False]), auc([1, 1], [True, False])
    (1.0, 0.5)
    """
    s, y = np.asarray(score, dtype=float), np.asarray(positive, dtype=bool)
    if s.shape != y.shape or s.ndim != 1:
        raise ValueError(f"score has shape {s.shape} and positive {y.shape}; expected two 1-D arrays of one length")
    if y.all() or not y.any():
        raise ValueError(f"positive has {int(y.sum())} of {y.size} True; expected at least one of each")
    diff = s[y][:, None] - s[~y][None, :]  # (|P|, |N|)
    return float(((diff > 0) + 0.5 * (diff == 0)).mean())


def best_threshold(score: Sequence[float], positive: Sequence[bool]) -> tuple[float, bool, float]:
    """The cut of ``score`` that best classifies ``positive``: ``(threshold, above, accuracy)``.

    ``above`` says whether the positives are the scores ``>= threshold`` (else ``<``).

    Examples
    --------
    >>> best_threshold([0.9, 0.8, 0.1, 0.2], [True, True, False, False])
    (0.8, True, 1.0)
    """
    s, y = np.asarray(score, dtype=float), np.asarray(positive, dtype=bool)
    best = (float(s.min()), True, float(y.mean()))
    for t in np.unique(s):
        for above in (True, False):
            acc = float(((s >= t) == y).mean() if above else ((s < t) == y).mean())
            if acc > best[2]:
                best = (float(t), above, acc)
    return best
