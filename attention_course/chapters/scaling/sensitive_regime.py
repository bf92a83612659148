r"""Where is the softmax most sensitive? Its Jacobian's size against the spread of its logits.

For one row of logits :math:`x` (length :math:`S`) with :math:`p = \operatorname{softmax}(x)`,
the Jacobian :math:`J = \operatorname{diag}(p) - pp^\top` is what a gradient passes through, and

.. math::

    \lVert J\rVert_F^2 = \sum_i p_i^2 - 2\sum_i p_i^3 + \Big(\sum_i p_i^2\Big)^2 .

A uniform row (:math:`x` constant) has :math:`\lVert J\rVert_F = \sqrt{S-1}/S`, the *floor*;
a one-hot row has 0. In between the norm peaks. :func:`jacobian_vs_spread` measures the median
norm over rows of independent :math:`N(0, \sigma^2)` logits, and :func:`half_maximum_band` finds
the band of :math:`\sigma` where it is at least half its peak above the floor (a full width at
half maximum): the softmax's *sensitive regime*, the reading tested by chapter 6's
``sensitive-regime`` verdict. The logits are the softmax's own input, so nothing that leaves
attention unchanged (:math:`q \to aq` with :math:`k \to k/a`, a shift of every key) can move
the result; the width :math:`d_k` enters only through :math:`\sigma`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple, Optional

import numpy as np

from .measures import softmax_jacobian_norm

__all__ = ["jacobian_floor", "jacobian_vs_spread", "half_maximum_band"]


def jacobian_norm_rows(logits: np.ndarray) -> np.ndarray:
    r"""Frobenius norm of the softmax Jacobian :math:`\operatorname{diag}(p) - pp^\top` of each row.

    Parameters
    ----------
    logits : array, shape (..., S)
        The softmax normalises over the last axis.

    Returns
    -------
    np.ndarray, shape (...)
        :math:`\lVert J\rVert_F` per row, by :func:`~attention_course.chapters.scaling.measures.softmax_jacobian_norm`
        (closed form, no S x S matrix). Its terms are summed so that a nearly one-hot row keeps
        full relative accuracy: the shorter :math:`\sqrt{\sum p^2 - 2\sum p^3 + (\sum p^2)^2}`
        cancels to about :math:`10^{-16}` there, and a norm of :math:`10^{-7}` would then change
        in its third digit with the order of the sums (by CPU).

    Examples
    --------
    >>> jacobian_norm_rows(np.zeros((1, 4))).round(4)       # uniform: sqrt(S - 1) / S
    array([0.433])
    >>> float(jacobian_norm_rows(np.array([[0.0, 50.0]]))[0]) < 1e-10   # one-hot: 0
    True
    """
    x = np.asarray(logits, dtype=np.float64)
    if x.ndim < 1 or x.shape[-1] < 1:
        raise ValueError(f"logits has shape {x.shape}; expected (..., S) with S >= 1")
    z = x - x.max(axis=-1, keepdims=True)  # stable: the largest logit is 0
    p = np.exp(z)
    p /= p.sum(axis=-1, keepdims=True)  # (..., S), over the last axis
    return softmax_jacobian_norm(p)


def jacobian_floor(n_keys: int) -> float:
    r"""The uniform row's Jacobian norm, :math:`\sqrt{S-1}/S`.

    Examples
    --------
    >>> round(jacobian_floor(64), 4)
    0.124
    """
    return math.sqrt(n_keys - 1) / n_keys


def jacobian_vs_spread(sigmas: Sequence[float], n_keys: int = 64, n_rows: int = 4096, seed: int = 0,
                       d_k: Optional[int] = None) -> np.ndarray:
    r"""Median :math:`\lVert J\rVert_F` over ``n_rows`` rows of ``n_keys`` logits drawn from :math:`N(0, \sigma^2)`.

    The same draws are multiplied by each :math:`\sigma`, so the curve is smooth in :math:`\sigma`
    (common random numbers). With ``d_k``, the logits are instead :math:`\sigma\, q\cdot k/\sqrt{d_k}`
    for Gaussian queries and keys of width ``d_k`` (blocks of 64 queries share their keys): the
    scores of a head at initialisation, whose entries are not independent within a row.

    Returns
    -------
    np.ndarray, shape (len(sigmas),)

    Examples
    --------
    >>> jacobian_vs_spread([0.01, 4.0, 100.0], n_keys=64, n_rows=512).round(3)
    array([0.124, 0.335, 0.   ])
    """
    rng = np.random.default_rng(seed)
    if d_k is None:
        z = rng.standard_normal((int(n_rows), int(n_keys)))  # (rows, S)
    else:
        q = rng.standard_normal((-(-int(n_rows) // 64), 64, int(d_k)))  # (blocks, 64, d_k)
        k = rng.standard_normal((q.shape[0], int(n_keys), int(d_k)))  # (blocks, S, d_k)
        z = (q @ np.swapaxes(k, -1, -2)).reshape(-1, int(n_keys))[:int(n_rows)] / math.sqrt(d_k)  # (rows, S)
    return np.array([float(np.median(jacobian_norm_rows(float(s) * z))) for s in sigmas])


class Band(NamedTuple):
    """The half-maximum band of a Jacobian curve: ``lo``, ``hi`` (interpolated sigma), ``peak`` (sigma at the maximum)."""

    lo: float
    hi: float
    peak: float


def half_maximum_band(sigmas: Sequence[float], J: Sequence[float], floor: float) -> Band:
    r"""The band of :math:`\sigma` where :math:`J - \text{floor}` is at least half its maximum.

    Edges are interpolated linearly in :math:`\log\sigma`. ``sigmas`` must increase, and the curve
    must cross half its height on both sides of the peak inside the grid.

    Examples
    --------
    >>> s = np.geomspace(0.05, 50, 61)
    >>> b = half_maximum_band(s, jacobian_vs_spread(s, n_rows=512), jacobian_floor(64))
    >>> b.lo < b.peak < b.hi
    True
    """
    s, y = np.asarray(sigmas, dtype=float), np.asarray(J, dtype=float) - floor
    if s.ndim != 1 or s.shape != y.shape or np.any(np.diff(s) <= 0):
        raise ValueError(f"sigmas has shape {s.shape} and J {y.shape}; expected equal 1-d shapes, sigmas increasing")
    i = int(np.argmax(y))
    half = y[i] / 2
    left, right = np.flatnonzero(y[:i] < half), np.flatnonzero(y[i:] < half) + i
    if not left.size or not right.size:
        raise ValueError("the curve does not fall below half its height on both sides of its peak; widen the grid")
    a, b = left[-1], right[0]  # last point below half before the peak, first after it
    edge = lambda j, k: float(np.exp(np.interp(half, sorted([y[j], y[k]]),  # noqa: E731
                                               [np.log(s[j]), np.log(s[k])] if y[j] < y[k] else [np.log(s[k]), np.log(s[j])])))
    return Band(lo=edge(a, a + 1), hi=edge(b - 1, b), peak=float(s[i]))


def jacobian_at(sigmas: Sequence[float], J: Sequence[float], sigma: float = 1.0) -> float:
    r"""The curve ``J`` at ``sigma``, interpolated linearly in :math:`(\log\sigma, \log J)` (as chapter 6 reads it).

    Examples
    --------
    >>> round(jacobian_at([0.5, 2.0], [0.1, 0.4]), 6)   # the geometric mean at the middle of the logs
    0.2
    """
    s, y = np.asarray(sigmas, dtype=float), np.asarray(J, dtype=float)
    if s.ndim != 1 or s.shape != y.shape or np.any(y < 0):
        raise ValueError(f"sigmas has shape {s.shape} and J {y.shape}; expected equal 1-d shapes and J >= 0")
    with np.errstate(divide="ignore"):  # a fully saturated row has J = 0: log J = -inf, far from sigma
        return float(np.exp(np.interp(math.log(sigma), np.log(s), np.log(y))))


def sensitive_verdict(band: Band, j_one: float, floor: float, sigma: float = 1.0) -> str:
    r"""The ``sensitive-regime`` decision rule, for one curve: where does ``sigma`` (the scaled spread) lie?

    ``"holds"`` if ``band.lo <= sigma <= band.hi``; ``"holds when"`` if ``sigma`` is below the
    band while its Jacobian ``j_one`` is above the uniform ``floor`` (and the band's upper edge
    is above ``sigma``); ``"wrong as stated"`` otherwise (above the band, or not above the floor).

    Examples
    --------
    >>> sensitive_verdict(Band(0.9, 4.4, 2.5), 0.30, 0.24), sensitive_verdict(Band(1.4, 7.3, 4.0), 0.18, 0.12)
    ('holds', 'holds when')
    """
    if j_one <= floor or sigma > band.hi:
        return "wrong as stated"
    return "holds" if band.lo <= sigma else "holds when"
