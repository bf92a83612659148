r"""Baselines for "approximately low-rank": the uniform part, the input length, and sink heads.

The uniform matrix (:func:`uniform_error`) and the mean row (:func:`centred_rank_k_error`) make a soft
head look low-rank; :func:`loglog_slope` fits the growth of a rank with :math:`n`. The course's one
treatment of sinks (an encoder's ``[CLS]`` and ``[SEP]``, a decoder's first position) is here: a head
is a sink head when its :func:`sink_share` is at least :data:`SINK_THRESHOLD`, properties are measured
on its :func:`content_part`, and :func:`classify_heads` puts every head in one of :data:`HEAD_BINS`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from ...core._backend import Array, ShapeError, shape_str, to_numpy
from ...models.pretrained import SENTENCES
from .spectra import rank_k_error, topk_sparsify

__all__ = ["SENTENCES", "uniform_error", "centred_rank_k_error", "rank_vs_topk", "sink_share", "HEAD_BINS",
           "classify_heads", "loglog_slope"]


def long_text(n_sentences: int = len(SENTENCES)) -> str:
    """The first ``n_sentences`` of :data:`SENTENCES` joined by spaces (about 29 WordPiece tokens each).

    Examples
    --------
    >>> len(SENTENCES), long_text(2).count(".")
    (20, 2)
    """
    if int(n_sentences) != n_sentences or not 1 <= n_sentences <= len(SENTENCES):
        raise ValueError(f"n_sentences={n_sentences!r}; expected 1 <= n_sentences <= {len(SENTENCES)}")
    return " ".join(SENTENCES[: int(n_sentences)])


def uniform_error(A: Array) -> np.ndarray:
    r"""Relative error of the uniform matrix, :math:`\|A - \tfrac1S\mathbf 1\mathbf 1^\top\|_F / \|A\|_F`.

    The rank-1 baseline for any rank-:math:`k` error; ``A``: (..., T, S) -> (...,).

    Examples
    --------
    >>> float(uniform_error(np.eye(2)).round(4))  # |I - J/2| / |I| = sqrt(4 * 0.25) / sqrt(2)
    0.7071
    """
    a = to_numpy(A)
    return np.linalg.norm(a - 1.0 / a.shape[-1], axis=(-2, -1)) / np.linalg.norm(a, axis=(-2, -1))


def centred_rank_k_error(A: Array, k: int) -> np.ndarray:
    r"""Rank-``k`` error of :math:`A` with its mean row removed, relative to the centred matrix.

    .. math::

        \bar A = A - \mathbf 1 \mu^\top, \quad \mu_j = \tfrac1T \sum_i A_{ij}, \qquad
        \frac{\|\bar A - \bar A_k\|_F}{\|\bar A\|_F}

    ``A``: (..., T, S) -> (...,); no matrix may have all rows equal (then :math:`\bar A = 0`).

    Examples
    --------
    >>> A = np.array([[0.5, 0.5, 0.0], [0.5, 0.0, 0.5], [0.5, 0.5, 0.0]])
    >>> float(rank_k_error(A, 1).round(3)), abs(float(centred_rank_k_error(A, 1).round(3)))
    (0.46, 0.0)
    """
    a = to_numpy(A)
    return rank_k_error(a - a.mean(axis=-2, keepdims=True), k)  # (..., T, S) minus its mean row


def rank_vs_topk(A: Array, k: int) -> tuple[float, float, bool]:
    r"""Rank-``k`` against top-``k`` at equal budget, both measured on the informative part of ``A``.

    .. math::

        e_{\text{rank}} = \frac{\|\bar A - \bar A_k\|_F}{\|\bar A\|_F}, \qquad
        e_{\text{top}} = \frac{\|A - \operatorname{top}_k(A)\|_F}{\|\bar A\|_F}, \qquad
        \bar A = A - \mathbf 1 \mu^\top

    Budgets :math:`k(T + S) + S` and :math:`2kT` are equal when :math:`T = S`. ``A``: (T, S), rows
    not all equal -> ``(rank_error, topk_error, rank_wins)``.

    Examples
    --------
    >>> rank_vs_topk(np.eye(4), 1)   # a permutation: sparse, not low-rank
    (0.816..., 0.0, False)
    """
    a = np.asarray(to_numpy(A), dtype=float)
    centred = a - a.mean(axis=-2, keepdims=True)  # (T, S) minus the mean row
    rank_err = float(rank_k_error(centred, k))
    topk_err = float(np.linalg.norm(a - topk_sparsify(a, k)) / np.linalg.norm(centred))
    return rank_err, topk_err, rank_err < topk_err


def sink_share(A: Array, positions: Sequence[int]) -> np.ndarray:
    """Mean over queries of the weight on the key ``positions`` (e.g. ``[0, n - 1]``: [CLS], [SEP]).

    ``A``: (..., T, S) -> (...,), in [0, 1] for row-stochastic ``A``.

    Examples
    --------
    >>> float(sink_share(np.array([[0.9, 0.1], [0.5, 0.5]]), [0]))
    0.7
    """
    a = to_numpy(A)
    return a[..., list(positions)].sum(axis=-1).mean(axis=-1)


class ContentPart(NamedTuple):
    """What :func:`content_part` returns: the renormalised ``weights`` and the ``sink_rows`` it could not renormalise."""

    weights: np.ndarray  # (..., T, S - len(sinks)); a sink row is all zeros
    sink_rows: np.ndarray  # (..., T) bool: the row's weight off the sinks was at most min_mass


def content_part(A: Array, sink_positions: Sequence[int], min_mass: float = 1e-12) -> ContentPart:
    r"""A head's attention with the sink columns removed and each row renormalised.

    .. math::

        C_{ij} = \frac{A_{ij}}{\sum_{j' \notin \mathcal S} A_{ij'}}, \qquad j \notin \mathcal S

    with :math:`\mathcal S` the sink positions. A row with at most ``min_mass`` off the sinks is
    reported in ``sink_rows`` and left as zeros: drop those rows before measuring the content part.

    Parameters
    ----------
    A : array, shape (..., T, S), rows summing to 1
    sink_positions : sequence of int, each in ``[-S, S)``; duplicates count once
    min_mass : float

    Returns
    -------
    ContentPart
        ``weights`` (..., T, S - number of distinct sinks), float64, each row summing to 1 except
        the sink rows (zeros); ``sink_rows`` (..., T) bool.

    Examples
    --------
    >>> A = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.2, 0.2, 0.6]])   # causal, sink at 0
    >>> part = content_part(A, [0])
    >>> part.weights.round(2).tolist(), part.sink_rows.tolist()
    ([[0.0, 0.0], [1.0, 0.0], [0.25, 0.75]], [True, False, False])
    """
    a = np.asarray(to_numpy(A), dtype=float)
    if a.ndim < 2:
        raise ShapeError(f"A has shape {shape_str(a)}; expected attention weights (..., T, S)")
    S = a.shape[-1]
    bad = [p for p in sink_positions if int(p) != p or not -S <= p < S]
    if bad:
        raise ValueError(f"sink_positions {list(sink_positions)} has {bad} outside the {S} keys of A {shape_str(a)}")
    sinks = sorted({int(p) % S for p in sink_positions})
    keep = np.setdiff1d(np.arange(S), sinks)  # (S - len(sinks),)
    content = a[..., keep]  # (..., T, S') the weights on the content keys
    mass = content.sum(axis=-1)  # (..., T) each row's weight off the sinks
    sink_rows = mass <= min_mass
    weights = np.divide(content, mass[..., None], out=np.zeros_like(content), where=~sink_rows[..., None])
    return ContentPart(weights, sink_rows)


#: A head is a sink head when its sink share is at least this (the course's one threshold, swept 0.3-0.7).
SINK_THRESHOLD = 0.5
#: The three bins every claim that counts heads reports, in this order.
HEAD_BINS = ("property", "no property", "sink")


def classify_heads(has_property: Sequence[bool], sink_shares: Sequence[float],
                   sink_threshold: float = SINK_THRESHOLD) -> np.ndarray:
    """Each head's bin: ``"sink"`` if its sink share is at least ``sink_threshold``, else ``"property"`` or ``"no property"``.

    Measure ``has_property`` (bool, any shape) on each head's :func:`content_part`; ``sink_shares``
    has the same shape, in [0, 1]. Returns one of :data:`HEAD_BINS` per head, the same shape.

    Examples
    --------
    >>> classify_heads([True, False, True, False], [0.1, 0.2, 0.5, 0.9]).tolist()
    ['property', 'no property', 'sink', 'sink']
    >>> classify_heads([True, False, True, False], [0.1, 0.2, 0.5, 0.9], sink_threshold=0.6).tolist()
    ['property', 'no property', 'property', 'sink']
    """
    prop, share = np.asarray(has_property), np.asarray(sink_shares, dtype=float)
    if prop.shape != share.shape:
        raise ShapeError(f"has_property has shape {shape_str(prop)} and sink_shares {shape_str(share)}; "
                         f"expected one value of each per head")
    if prop.dtype != bool:
        raise ValueError(f"has_property has dtype {prop.dtype}; expected booleans (measure the property, then compare)")
    if not 0 < sink_threshold <= 1:
        raise ValueError(f"sink_threshold={sink_threshold}; expected 0 < sink_threshold <= 1")
    if share.size and (np.isnan(share).any() or share.min() < -1e-9 or share.max() > 1 + 1e-9):
        raise ValueError(f"sink_shares range over [{np.nanmin(share):.3g}, {np.nanmax(share):.3g}]; expected shares in [0, 1]")
    return np.where(share >= sink_threshold, "sink", np.where(prop, "property", "no property"))


def head_bins(labels: Sequence[str]) -> dict[str, float]:
    """Shares of ALL heads in each bin of :data:`HEAD_BINS` (they sum to 1).

    Examples
    --------
    >>> head_bins(["property", "sink", "no property", "property"])
    {'property': 0.5, 'no property': 0.25, 'sink': 0.25}
    """
    lab = np.asarray(labels).ravel()
    unknown = set(lab.tolist()) - set(HEAD_BINS)
    if lab.size == 0 or unknown:
        raise ValueError(f"labels {sorted(unknown) or 'empty'}; expected a non-empty list of {HEAD_BINS}")
    return {b: float((lab == b).mean()) for b in HEAD_BINS}


def loglog_slope(x: Sequence[float], y: Sequence[float]) -> float:
    r"""Least-squares slope :math:`b` of :math:`\log y = a + b \log x` (the exponent of a power law).

    :math:`b = 1`: ``y`` grows in proportion to ``x``; :math:`b = 0`: ``y`` does not grow.

    Examples
    --------
    >>> round(loglog_slope([1, 10, 100], [3, 300, 30000]), 6)
    2.0
    """
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if xa.shape != ya.shape or xa.ndim != 1 or xa.size < 2:
        raise ValueError(f"x has shape {xa.shape} and y has shape {ya.shape}; expected two 1-D sequences "
                         f"of the same length >= 2")
    if not (np.all(xa > 0) and np.all(ya > 0) and np.all(np.isfinite(xa * ya))):
        raise ValueError(f"x={xa.tolist()} and y={ya.tolist()} must be positive and finite")
    return float(np.polyfit(np.log(xa), np.log(ya), 1)[0])  # [slope, intercept][0]


def logit_std(A: Array, floor: float = 1e-300) -> np.ndarray:
    r"""Sharpness of a head: the standard deviation of each row's logits, averaged over rows.

    .. math::

        s = \frac1T \sum_i \operatorname{std}_j \log A_{ij}

    (:math:`\log A_{ij}` is the logit minus a constant per row). ``A``: (..., T, S), a softmax without
    masked keys -> (...,); weights that underflowed to 0 are raised to ``floor``.

    Examples
    --------
    >>> L = np.array([[0.0, 1.0], [2.0, 0.0]])   # row stds 0.5 and 1.0
    >>> A = np.exp(L) / np.exp(L).sum(axis=1, keepdims=True)
    >>> float(logit_std(A).round(6))
    0.75
    """
    a = to_numpy(A)
    return np.log(np.maximum(a, floor)).std(axis=-1).mean(axis=-1)
