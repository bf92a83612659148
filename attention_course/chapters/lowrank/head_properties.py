r"""Which heads are low-rank? Mean row entropy and sink share, two properties of :math:`A` alone.

:func:`auc` says how well one of them ranks the low-rank heads above the others.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...core._backend import Array, to_numpy
from ..mechanics.properties import row_entropy
from .baselines import content_part, sink_share
from .spectra import effective_rank_from_singular_values, stable_rank_from_singular_values

__all__ = []


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


def content_measures(A: Array, sinks: Sequence[int], k: int) -> dict[str, np.ndarray]:
    r"""Each head's sink share, and the rank and entropy of its content part (the course's sink treatment).

    With :math:`C` the :func:`~attention_course.chapters.lowrank.baselines.content_part` (sink rows
    dropped) and :math:`\sigma_i` its singular values:

    .. math::

        \text{energy}_k = \frac{\sum_{i \le k} \sigma_i^2}{\sum_i \sigma_i^2}, \qquad
        e_k = \frac{\|C - C_k\|_F}{\|C\|_F} = \sqrt{1 - \text{energy}_k},

    and :math:`C`'s stable rank, effective rank and mean row entropy. ``A``: (H, T, S) -> arrays (H,)
    ``sink_share``, ``energy``, ``rank_error``, ``stable_rank``, ``effective_rank``, ``entropy``,
    ``rows`` (rows of C kept).

    Examples
    --------
    >>> A = np.array([[[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.5, 0.25, 0.25]]])   # causal, sink at 0
    >>> m = content_measures(A, [0], k=1)   # C = [[1, 0], [0.5, 0.5]] (row 0 dropped): sigma^2 = 1.309, 0.191
    >>> {key: round(float(v[0]), 3) for key, v in m.items()}
    {'sink_share': 0.667, 'energy': 0.873, 'rank_error': 0.357, 'stable_rank': 1.146, 'effective_rank': 1.803, 'entropy': 0.347, 'rows': 2.0}
    """
    a = np.asarray(to_numpy(A), dtype=float)
    if a.ndim != 3:
        raise ValueError(f"A has shape {a.shape}; expected one map per head (H, T, S)")
    if int(k) != k or k < 1:
        raise ValueError(f"k={k!r}; expected a positive integer rank")
    share = sink_share(a, sinks)  # (H,)
    part = content_part(a, sinks)
    out = {key: np.empty(len(a)) for key in ("energy", "rank_error", "stable_rank", "effective_rank", "entropy", "rows")}
    for h in range(len(a)):
        C = part.weights[h][~part.sink_rows[h]]  # (T', S') the rows that have weight off the sinks
        s = np.linalg.svd(C, compute_uv=False)  # (min(T', S'),)
        e = s**2
        energy = float(e[: int(k)].sum() / e.sum())
        out["energy"][h] = energy
        out["rank_error"][h] = np.sqrt(max(1.0 - energy, 0.0))
        out["stable_rank"][h] = float(stable_rank_from_singular_values(s))
        out["effective_rank"][h] = float(effective_rank_from_singular_values(s[s > 0]))
        out["entropy"][h] = float(mean_row_entropy(C))
        out["rows"][h] = len(C)
    return {"sink_share": share, **out}


def auc(score: Sequence[float], positive: Sequence[bool]) -> float:
    r"""Area under the ROC curve: the chance that a random positive scores above a random negative.

    .. math:: \mathrm{AUC} = \frac{1}{|P|\,|N|}\sum_{p \in P}\sum_{m \in N}
              \big(\mathbb 1[s_p > s_m] + \tfrac12\,\mathbb 1[s_p = s_m]\big)

    0.5 is chance; ``max(AUC, 1 - AUC)`` reads a property in either direction.

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


