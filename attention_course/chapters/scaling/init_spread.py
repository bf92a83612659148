r"""The variance law where its argument applies: real inputs, fresh random projections, every width (chapter 6).

With random :math:`W_Q, W_K` (entries :math:`N(0, 1/D)`) a query's scores spread like :math:`\sqrt{d_k}`.
:func:`init_spread` measures the median within-row spread at many widths, :func:`spread_slopes` its
log-log slope (the law: 1/2 unscaled, 0 scaled), :func:`band_exponents` which scalings :math:`d_k^{-p}`
land in a band :math:`[1/c, c]`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from ...core._backend import Array, ShapeError, shape_str, to_numpy
from ..lowrank.baselines import loglog_slope
from .anisotropy import within_row_spread

__all__ = ["init_spread", "spread_slopes", "band_exponents"]


@dataclass(frozen=True)
class InitSpread:
    """Median within-row spreads at initialisation: ``unscaled`` and ``scaled`` are (seeds, widths)."""

    dims: np.ndarray
    unscaled: np.ndarray
    scaled: np.ndarray


def init_spread(x: Array, valid: Optional[Array], dims: Sequence[int], seeds: Sequence[int]) -> InitSpread:
    r"""Median within-row spread of :math:`q_i\cdot k_j` and :math:`q_i\cdot k_j/\sqrt{d_k}` for fresh random projections.

    :math:`W_Q, W_K \in \mathbb{R}^{D\times d_k}` with entries :math:`N(0, 1/D)`, seeded by ``(seed, d_k)``.

    Parameters
    ----------
    x : array, shape (B, T, D)
        A layer's input (token states).
    valid : array of bool, shape (B, T), or None
        Real tokens (None: all).
    dims, seeds : sequences of int

    Returns
    -------
    InitSpread
        ``unscaled`` and ``scaled`` of shape (len(seeds), len(dims)).

    Examples
    --------
    >>> x = np.random.default_rng(0).normal(size=(2, 30, 64))
    >>> r = init_spread(x, None, [4, 64], seeds=[0])
    >>> np.round(r.scaled, 1)  # independent inputs: the same spread, a little under 1, at both widths
    array([[0.9, 0.9]])
    """
    x = to_numpy(x).astype(np.float64)
    if x.ndim != 3:
        raise ShapeError(f"x has shape {shape_str(x)}; expected (B, T, D)")
    D = x.shape[-1]
    unscaled = np.empty((len(seeds), len(dims)))
    for a, seed in enumerate(seeds):
        for b, d in enumerate(dims):
            rng = np.random.default_rng([seed, d])
            W_q, W_k = rng.normal(scale=1 / math.sqrt(D), size=(2, D, d))  # (D, d_k) each
            q, k = (x @ W_q)[:, None], (x @ W_k)[:, None]  # (B, 1, T, d_k): one head
            unscaled[a, b] = np.median(within_row_spread(q, k, valid)) * math.sqrt(d)
    dims = np.asarray(dims)
    return InitSpread(dims, unscaled, unscaled / np.sqrt(dims))


def spread_slopes(result: InitSpread) -> tuple[np.ndarray, np.ndarray]:
    r"""Log-log slopes of the median spread against :math:`d_k`, one per seed: (unscaled, scaled), each (seeds,).

    >>> dims = np.array([4, 16, 64])
    >>> spread_slopes(InitSpread(dims, np.sqrt(dims)[None] * 2.0, np.full((1, 3), 2.0)))
    (array([0.5]), array([0.]))
    """
    fit = lambda y: np.array([round(loglog_slope(result.dims, row), 12) + 0.0 for row in y])  # (seeds,)
    return fit(result.unscaled), fit(result.scaled)


def band_exponents(unscaled_median: float, d_k: int, band: float = 3.0) -> tuple[float, float]:
    r"""The exponents :math:`p \in [\ln(m/c)/\ln d_k,\ \ln(mc)/\ln d_k]` for which :math:`d_k^{-p}` times a median :math:`m` lies in :math:`[1/c, c]`.

    >>> lo, hi = band_exponents(8.0, 64)  # sqrt(64) = 8: p = 1/2 lands exactly on 1
    >>> round(lo, 3), round(hi, 3)
    (0.236, 0.764)
    """
    if unscaled_median <= 0 or d_k < 2 or band <= 1:
        raise ValueError(f"need a positive median, d_k >= 2 and a band above 1; got {unscaled_median}, {d_k}, {band}")
    log_d = math.log(d_k)
    return math.log(unscaled_median / band) / log_d, math.log(unscaled_median * band) / log_d
