r"""Where is the softmax most sensitive? Its Jacobian's size against the spread of its logits (chapter 6).

For one row of logits with :math:`p = \operatorname{softmax}(x)`, :math:`J = \operatorname{diag}(p) - pp^\top`;
a uniform row has :math:`\lVert J\rVert_F = \sqrt{S-1}/S` (the *floor*), a one-hot row 0, and the norm
peaks in between. The band of spreads :math:`\sigma` around the peak is the softmax's *sensitive
regime*, read by the ``sensitive-regime`` verdict; :math:`d_k` enters only through :math:`\sigma`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple, Optional

import numpy as np

from ...core.attention import softmax
from .measures import softmax_jacobian_norm

__all__ = ["jacobian_floor", "jacobian_vs_spread", "half_maximum_band", "passed_gradient", "gradient_vs_spread",
           "largest_rows_in_band", "flow_ratio", "typical_row_verdict", "query_gradient_norms",
           "saturation_width"]


def _logit_draws(n_rows: int, n_keys: int, seed: int, d_k: Optional[int]) -> np.ndarray:
    """Rows of unit-spread logits (n_rows, n_keys): independent N(0, 1), or with ``d_k`` Gaussian q . k / sqrt(d_k)."""
    rng = np.random.default_rng(seed)
    if d_k is None:
        return rng.standard_normal((int(n_rows), int(n_keys)))  # (rows, S)
    q = rng.standard_normal((-(-int(n_rows) // 64), 64, int(d_k)))  # (blocks, 64, d_k): 64 queries share keys
    k = rng.standard_normal((q.shape[0], int(n_keys), int(d_k)))  # (blocks, S, d_k)
    return (q @ np.swapaxes(k, -1, -2)).reshape(-1, int(n_keys))[:int(n_rows)] / math.sqrt(d_k)  # (rows, S)


def _edge(s: np.ndarray, y: np.ndarray, cut: float, j: int, k: int) -> float:
    """The sigma where the curve ``y`` crosses ``cut`` between grid points j and k, linear in log sigma."""
    xs, ys = np.log(s[[j, k]]), y[[j, k]]
    order = np.argsort(ys)
    return float(np.exp(np.interp(cut, ys[order], xs[order])))


def jacobian_norm_rows(logits: np.ndarray) -> np.ndarray:
    r"""Frobenius norm of the softmax Jacobian of each row of ``logits`` (..., S), shape (...).

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
    return softmax_jacobian_norm(softmax(x))


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
    r"""Median :math:`\lVert J\rVert_F` over ``n_rows`` rows of ``n_keys`` logits of spread :math:`\sigma`, shape (len(sigmas),).

    The same draws are multiplied by each :math:`\sigma` (a smooth curve). With ``d_k`` the logits are
    :math:`\sigma\, q\cdot k/\sqrt{d_k}` of Gaussian queries and keys (a head at initialisation).

    Examples
    --------
    >>> jacobian_vs_spread([0.01, 4.0, 100.0], n_keys=64, n_rows=512).round(3)
    array([0.124, 0.335, 0.   ])
    """
    z = _logit_draws(n_rows, n_keys, seed, d_k)
    return np.array([float(np.median(jacobian_norm_rows(float(s) * z))) for s in sigmas])


class Band(NamedTuple):
    """A band of sigma: ``lo``, ``hi`` (interpolated) and ``peak`` (sigma at the curve's maximum)."""

    lo: float
    hi: float
    peak: float


def half_maximum_band(sigmas: Sequence[float], J: Sequence[float], floor: float) -> Band:
    r"""The band of :math:`\sigma` where :math:`J - \text{floor}` is at least half its maximum (edges linear in :math:`\log\sigma`).

    ``sigmas`` must increase, and the curve must cross half its height on both sides of the peak.

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
    return Band(lo=_edge(s, y, half, a, a + 1), hi=_edge(s, y, half, b - 1, b), peak=float(s[i]))


def jacobian_at(sigmas: Sequence[float], J: Sequence[float], sigma: float = 1.0) -> float:
    r"""The curve ``J`` at ``sigma``, interpolated linearly in :math:`(\log\sigma, \log J)`.

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


# ------------------------------------------------------------------ the essay's definition: "where gradients flow"
def passed_gradient(logits: np.ndarray, g: np.ndarray) -> np.ndarray:
    r"""The gradient a softmax row passes back to its logits, :math:`J g = p \odot (g - p\cdot g)`.

    Parameters
    ----------
    logits, g : array, shape (..., S)
        The logits, and the upstream gradient on the weights :math:`p`.

    Returns
    -------
    np.ndarray, shape (..., S)

    Examples
    --------
    >>> passed_gradient(np.zeros(4), np.array([1.0, 0.0, 0.0, 0.0]))  # uniform row: (g - mean g) / S
    array([ 0.1875, -0.0625, -0.0625, -0.0625])
    """
    x, up = np.asarray(logits, dtype=np.float64), np.asarray(g, dtype=np.float64)
    if x.ndim < 1 or x.shape != up.shape:
        raise ValueError(f"logits has shape {x.shape} and g {up.shape}; expected the same shape (..., S)")
    p = softmax(x)
    return p * (up - (p * up).sum(-1, keepdims=True))  # $J g = p \odot (g - p\cdot g)$   (..., S)


def gradient_vs_spread(sigmas: Sequence[float], n_keys: int = 64, n_rows: int = 1024, seed: int = 0,
                       measure: str = "jg", d_k: Optional[int] = None, stat: str = "median") -> np.ndarray:
    r"""A statistic over rows of the gradient a softmax row passes back, against the spread :math:`\sigma`, shape (len(sigmas),).

    ``measure="jg"``: :math:`\lVert J g\rVert` for one upstream gradient :math:`g \sim N(0, I_S)` per row
    (the same at every :math:`\sigma`); ``"fro"``, ``"spectral"``: norms of :math:`J`. The logits are
    :func:`jacobian_vs_spread`'s draws. ``stat``: ``"median"`` (the typical row), ``"mean"`` or ``"rms"``.

    Examples
    --------
    >>> gradient_vs_spread([1e-3, 1.0, 1e3], n_keys=16, n_rows=256).round(3)   # uniform, sigma = 1, one-hot
    array([0.235, 0.279, 0.   ])
    >>> gradient_vs_spread([0.0, 32.0], n_keys=64, n_rows=4096, stat="mean").round(3)  # rare near-ties carry the mean
    array([0.124, 0.055])
    """
    if measure not in ("jg", "fro", "spectral"):
        raise ValueError(f"measure={measure!r}; expected 'jg', 'fro' or 'spectral'")
    reduce = {"median": np.median, "mean": np.mean, "rms": lambda x: np.sqrt(np.mean(np.square(x)))}.get(stat)
    if reduce is None:
        raise ValueError(f"stat={stat!r}; expected 'median', 'mean' or 'rms'")
    z = _logit_draws(n_rows, n_keys, seed, d_k)
    g = np.random.default_rng([seed, 1]).standard_normal(z.shape)  # (rows, S) upstream gradient, fixed over sigma
    out = []
    for s in sigmas:
        x = float(s) * z  # (rows, S)
        if measure == "jg":
            out.append(float(reduce(np.linalg.norm(passed_gradient(x, g), axis=-1))))  # $\lVert J g\rVert$ per row
        else:
            out.append(float(reduce(softmax_jacobian_norm(softmax(x), measure))))
    return np.array(out)


def flow_band(sigmas: Sequence[float], G: Sequence[float], theta: float = 0.5) -> Band:
    r"""The band of :math:`\sigma` where the curve ``G`` is at least ``theta`` times its maximum (no floor subtracted).

    A curve already above the cut at the grid's first point has ``lo = 0``; it must fall below the cut
    after the peak, inside the grid.

    Examples
    --------
    >>> s = np.geomspace(0.05, 50, 61)
    >>> b = flow_band(s, gradient_vs_spread(s, n_keys=64, n_rows=512))
    >>> b.lo < 1 < b.peak < b.hi < 32
    True
    """
    s, y = np.asarray(sigmas, dtype=float), np.asarray(G, dtype=float)
    if s.ndim != 1 or s.shape != y.shape or np.any(np.diff(s) <= 0) or not 0 < theta < 1:
        raise ValueError(f"sigmas has shape {s.shape}, G {y.shape} and theta={theta}; expected equal 1-d shapes, "
                         f"sigmas increasing and 0 < theta < 1")
    i = int(np.argmax(y))
    cut = theta * y[i]
    left, right = np.flatnonzero(y[:i] < cut), np.flatnonzero(y[i:] < cut) + i
    if not right.size:
        raise ValueError("the curve does not fall below theta of its peak after the peak; widen the grid")
    lo = _edge(s, y, cut, left[-1], left[-1] + 1) if left.size else 0.0
    return Band(lo=lo, hi=_edge(s, y, cut, right[0] - 1, right[0]), peak=float(s[i]))


def largest_rows_in_band(sigmas: Sequence[float], curves: dict, thetas: Sequence[float], sigma: float = 1.0) -> np.ndarray:
    r"""For each threshold :math:`\theta`, the largest row length S whose :func:`flow_band` holds ``sigma`` (0 if none).

    ``curves`` maps S to a gradient curve on ``sigmas`` (:func:`gradient_vs_spread`).

    Examples
    --------
    >>> s = np.geomspace(0.05, 50, 61)
    >>> curves = {S: gradient_vs_spread(s, n_keys=S, n_rows=256) for S in (16, 256)}
    >>> largest_rows_in_band(s, curves, [0.3, 0.7]).tolist()
    [256, 16]
    """
    out = []
    for th in thetas:
        ok = [S for S, G in curves.items() if (b := flow_band(sigmas, G, th)).lo <= sigma <= b.hi]
        out.append(max(ok) if ok else 0)
    return np.array(out)


# ------------------------------------------------------------------ the typical row against the unsaturated row
def flow_ratio(sigmas: Sequence[float], n_keys: int = 64, n_rows: int = 1024, seed: int = 0,
               stat: str = "median") -> np.ndarray:
    r"""The gradient a row passes at spread :math:`\sigma`, over what the uniform row passes.

    .. math::

        R(\sigma) = \frac{\operatorname{stat}_{\text{rows}} \lVert J_\sigma g\rVert}
                          {\operatorname{stat}_{\text{rows}} \lVert J_0 g\rVert}

    with :func:`gradient_vs_spread`'s rows and upstream gradients.

    Examples
    --------
    >>> flow_ratio([1.0, 32.0], n_keys=64, n_rows=4096).round(4)   # the scaled spread, the unscaled one at d_k = 1024
    array([1.3775e+00, 1.3000e-03])
    """
    G = gradient_vs_spread([0.0, *sigmas], n_keys=n_keys, n_rows=n_rows, seed=seed, stat=stat)
    return G[1:] / G[0]


def saturation_width(sigmas: Sequence[float], R: Sequence[float], theta: float = 0.5) -> float:
    r"""The key width :math:`d_k = \sigma^2` from which the unscaled typical row passes less than ``theta``.

    ``R`` is :func:`flow_ratio` on ``sigmas``: the first :math:`\sigma` past its peak where it falls below
    ``theta`` (linear in :math:`\log\sigma`), squared.

    Examples
    --------
    >>> s = np.geomspace(0.05, 50, 61)
    >>> w = saturation_width(s, flow_ratio(s, n_keys=64, n_rows=1024))
    >>> 80 < w < 140
    True
    """
    s, y = np.asarray(sigmas, dtype=float), np.asarray(R, dtype=float)
    if s.ndim != 1 or s.shape != y.shape or np.any(np.diff(s) <= 0) or not theta > 0:
        raise ValueError(f"sigmas has shape {s.shape}, R {y.shape} and theta={theta}; expected equal 1-d shapes, "
                         f"sigmas increasing and theta > 0")
    i = int(np.argmax(y))
    below = np.flatnonzero(y[i:] < theta) + i
    if not below.size:
        raise ValueError("the curve does not fall below theta after its peak; widen the grid")
    j = int(below[0])
    return _edge(s, y, theta, j - 1, j) ** 2


def typical_row_verdict(r_one: dict, r32_median: float, r32_mean: float, theta: float = 0.5) -> str:
    r"""The ``sensitive-regime`` rule, stated before the run.

    ``r_one`` maps S (16, 64, 256) to the median :math:`R(1)`; ``r32_median``, ``r32_mean``: :math:`R(32)` at
    S = 64. ``"undecided"`` if the median does not separate (:math:`R(32) \ge \theta`); ``"wrong as stated"``
    if :math:`R(1) < \theta` at S = 16 and 64; ``"holds when S"`` if it passes at some S only; ``"holds when
    typical"`` if the mean does not separate; ``"holds"`` otherwise.

    Examples
    --------
    >>> typical_row_verdict({16: 1.0, 64: 1.1, 256: 1.5}, 0.001, 0.1), typical_row_verdict({16: 1.0, 64: 1.1, 256: 1.5}, 0.001, 0.8)
    ('holds', 'holds when typical')
    >>> typical_row_verdict({16: 0.4, 64: 0.3, 256: 0.6}, 0.001, 0.1), typical_row_verdict({16: 1.0, 64: 1.0, 256: 1.0}, 0.7, 0.8)
    ('wrong as stated', 'undecided')
    """
    if r32_median >= theta:
        return "undecided"
    passes = {S: r >= theta for S, r in r_one.items()}
    if not passes.get(16, False) and not passes.get(64, False):
        return "wrong as stated"
    if not all(passes.values()):
        return "holds when S"
    return "holds" if r32_mean < theta else "holds when typical"


def query_gradient_norms(d_k: int = 1024, n_keys: int = 64, n_rows: int = 4096, seed: int = 0,
                         scaled: bool = True) -> np.ndarray:
    r"""Per row, the norm of the gradient that reaches the query, :math:`\frac1c \sum_j (J g)_j\, k_j`, shape (n_rows,).

    Logits :math:`x_j = q\cdot k_j / c` of Gaussian :math:`q, k_j \in \mathbb R^{d_k}` (:math:`c = \sqrt{d_k}`
    when ``scaled``, else 1), upstream gradient :math:`g \sim N(0, I_S)`. Drawn in :math:`O(S)` per row, exactly
    in distribution, by splitting each key along :math:`\hat q` (:math:`k_j = u_j \hat q + k_j^\perp`):

    .. math::

        \Big\lVert\frac{\partial\mathcal L}{\partial q}\Big\rVert^2
        = \frac1{c^2}\Big[\Big(\sum_j (Jg)_j u_j\Big)^2 + \lVert Jg\rVert^2\, \chi^2_{d_k - 1}\Big],
        \qquad \lVert q\rVert^2 \sim \chi^2_{d_k} .

    Examples
    --------
    >>> u, s = (query_gradient_norms(256, 16, 512, scaled=x) for x in (False, True))
    >>> bool(np.median(u) < np.median(s)), bool(np.mean(u) > np.mean(s))
    (True, True)
    """
    if min(int(d_k), int(n_keys), int(n_rows)) < 1:
        raise ValueError(f"d_k, n_keys and n_rows must be positive; got {d_k}, {n_keys}, {n_rows}")
    rng = np.random.default_rng(seed)
    rows, S, d = int(n_rows), int(n_keys), int(d_k)
    q_norm = np.sqrt(rng.chisquare(d, size=rows))  # (rows,) $\lVert q\rVert$
    u = rng.standard_normal((rows, S))  # (rows, S) each key's component along $\hat q$
    g = rng.standard_normal((rows, S))  # (rows, S) upstream gradient on the weights
    c = math.sqrt(d) if scaled else 1.0
    jg = passed_gradient(q_norm[:, None] * u / c, g)  # $J g$   (rows, S)
    along = (jg * u).sum(-1)  # (rows,) the gradient's component along $\hat q$
    across = (jg ** 2).sum(-1) * (rng.chisquare(d - 1, size=rows) if d > 1 else 0.0)  # (rows,) its squared rest
    return np.sqrt(along ** 2 + across) / c
