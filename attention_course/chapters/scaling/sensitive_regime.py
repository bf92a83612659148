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

__all__ = ["jacobian_floor", "jacobian_vs_spread", "half_maximum_band", "passed_gradient", "gradient_vs_spread",
           "largest_rows_in_band", "flow_ratio", "typical_row_verdict", "query_gradient_norms",
           "saturation_width"]


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


# ------------------------------------------------------------------ the essay's definition: "where gradients flow"
def passed_gradient(logits: np.ndarray, g: np.ndarray) -> np.ndarray:
    r"""The gradient a softmax row passes back to its logits, :math:`J g = p \odot (g - p\cdot g)` with :math:`J = \operatorname{diag}(p) - pp^\top`.

    Parameters
    ----------
    logits : array, shape (..., S)
        The softmax normalises over the last axis.
    g : array, shape (..., S)
        The upstream gradient on the weights :math:`p`.

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
    p = np.exp(x - x.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)  # (..., S), softmax over the keys
    return p * (up - (p * up).sum(-1, keepdims=True))  # $J g = p \odot (g - p\cdot g)$   (..., S)


def gradient_vs_spread(sigmas: Sequence[float], n_keys: int = 64, n_rows: int = 1024, seed: int = 0,
                       measure: str = "jg", d_k: Optional[int] = None, stat: str = "median") -> np.ndarray:
    r"""Median (or mean, or rms) over rows of the gradient a softmax row passes back, against the spread :math:`\sigma` of its logits.

    ``measure="jg"``: :math:`\lVert J g\rVert` for one upstream gradient :math:`g \sim N(0, I_S)` per
    row (the same :math:`g` at every :math:`\sigma`), :math:`J = \operatorname{diag}(p) - pp^\top`, so
    :math:`J g = p \odot (g - p\cdot g)`; ``"fro"`` and ``"spectral"``: the norms of :math:`J` itself.
    The logits are :func:`jacobian_vs_spread`'s draws (the same seed), independent
    :math:`N(0, \sigma^2)`, or with ``d_k`` the scores :math:`\sigma\,q\cdot k/\sqrt{d_k}` of Gaussian
    queries and keys. ``stat``: ``"median"`` (the typical row), ``"mean"`` or ``"rms"`` over the rows
    (a gradient summed over rows with independent upstream gradients has the rms's size). :math:`\sigma = 0`
    is the uniform row.

    Returns
    -------
    np.ndarray, shape (len(sigmas),)

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
    rng = np.random.default_rng(seed)
    if d_k is None:
        z = rng.standard_normal((int(n_rows), int(n_keys)))  # (rows, S), jacobian_vs_spread's draws
    else:
        q = rng.standard_normal((-(-int(n_rows) // 64), 64, int(d_k)))  # (blocks, 64, d_k)
        k = rng.standard_normal((q.shape[0], int(n_keys), int(d_k)))  # (blocks, S, d_k)
        z = (q @ np.swapaxes(k, -1, -2)).reshape(-1, int(n_keys))[:int(n_rows)] / math.sqrt(d_k)  # (rows, S)
    g = np.random.default_rng([seed, 1]).standard_normal(z.shape)  # (rows, S) upstream gradient, fixed over sigma
    out = []
    for s in sigmas:
        x = float(s) * z  # (rows, S)
        if measure == "jg":
            out.append(float(reduce(np.linalg.norm(passed_gradient(x, g), axis=-1))))  # $\lVert J g\rVert$ per row
        else:
            p = np.exp(x - x.max(-1, keepdims=True))
            p /= p.sum(-1, keepdims=True)  # (rows, S), softmax over the keys
            out.append(float(reduce(softmax_jacobian_norm(p, measure))))
    return np.array(out)


class FlowBand(NamedTuple):
    """Where a gradient curve is at least ``theta`` of its peak: ``lo``, ``hi`` (interpolated sigma), ``peak`` (sigma at the maximum)."""

    lo: float
    hi: float
    peak: float


def flow_band(sigmas: Sequence[float], G: Sequence[float], theta: float = 0.5) -> FlowBand:
    r"""The band of :math:`\sigma` where the curve ``G`` is at least ``theta`` times its maximum (no floor subtracted).

    Edges are interpolated linearly in :math:`\log\sigma`; a curve already above ``theta`` of its
    peak at the grid's first point has ``lo = 0`` (the uniform row passes gradient too). It must fall
    below ``theta`` of its peak after the peak, inside the grid.

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

    def edge(j: int, k: int) -> float:  # sigma where the curve crosses the cut between grid points j and k
        xs, ys = np.log(s[[j, k]]), y[[j, k]]
        order = np.argsort(ys)
        return float(np.exp(np.interp(cut, ys[order], xs[order])))

    lo = edge(left[-1], left[-1] + 1) if left.size else 0.0
    return FlowBand(lo=lo, hi=edge(right[0] - 1, right[0]), peak=float(s[i]))


def largest_rows_in_band(sigmas: Sequence[float], curves: dict, thetas: Sequence[float], sigma: float = 1.0) -> np.ndarray:
    r"""For each threshold :math:`\theta`, the largest row length S (a key of ``curves``) whose flow band holds ``sigma``.

    ``curves`` maps S to a gradient curve on ``sigmas`` (:func:`gradient_vs_spread`). Returns 0 where
    no S holds it. This is the decision plotted against its threshold.

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
    r"""The gradient a row passes at spread :math:`\sigma`, over what the uniform (least saturated) row passes.

    .. math::

        R(\sigma) = \frac{\operatorname{stat}_{\text{rows}} \lVert J_\sigma g\rVert}
                          {\operatorname{stat}_{\text{rows}} \lVert J_0 g\rVert},
        \qquad J_0 g = (g - \bar g)/S ,

    with :func:`gradient_vs_spread`'s rows and upstream gradients (the same :math:`g` in both).
    Gradients flow at :math:`\sigma` when :math:`R(\sigma) \ge \theta`; saturation drives it to 0.

    Examples
    --------
    >>> flow_ratio([1.0, 32.0], n_keys=64, n_rows=4096).round(4)   # the scaled spread, the unscaled one at d_k = 1024
    array([1.3775e+00, 1.3000e-03])
    """
    G = gradient_vs_spread([0.0, *sigmas], n_keys=n_keys, n_rows=n_rows, seed=seed, stat=stat)
    return G[1:] / G[0]


def saturation_width(sigmas: Sequence[float], R: Sequence[float], theta: float = 0.5) -> float:
    r"""The key width :math:`d_k = \sigma^2` from which the unscaled typical row passes less than ``theta``.

    ``R`` is :func:`flow_ratio` on ``sigmas``; past its peak, the first :math:`\sigma` where it falls below
    ``theta`` (interpolated linearly in :math:`\log\sigma`), squared: without the scale the logits of
    Gaussian :math:`q, k` spread like :math:`\sigma = \sqrt{d_k}`.

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
    xs, ys = np.log(s[[j - 1, j]]), y[[j - 1, j]]
    return float(np.exp(np.interp(theta, ys[::-1], xs[::-1]))) ** 2


def typical_row_verdict(r_one: dict, r32_median: float, r32_mean: float, theta: float = 0.5) -> str:
    r"""The ``sensitive-regime`` rule, stated before the run.

    ``r_one`` maps S (16, 64, 256) to the median :math:`R(1)`; ``r32_median`` and ``r32_mean`` are
    :math:`R(32)` at S = 64 for the median and the mean row. ``"undecided"`` if the median does not separate
    (:math:`R(32) \ge \theta`); ``"wrong as stated"`` if :math:`R(1) < \theta` at S = 16 and 64;
    ``"holds when S"`` if it passes at some S only; ``"holds when typical"`` if it passes at every S but
    the mean does not separate; ``"holds"`` otherwise.

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
    r"""Per row, the gradient that reaches the query through the scores, with or without the scale.

    For Gaussian :math:`q, k_j \in \mathbb R^{d_k}`, logits :math:`x_j = q\cdot k_j / c` (:math:`c = \sqrt{d_k}`
    when ``scaled``, else 1) and an upstream gradient :math:`g \sim N(0, I_S)` on the weights,

    .. math::

        \frac{\partial\mathcal L}{\partial q} = \frac1c \sum_j (J g)_j\, k_j ,

    the chain rule's :math:`1/c` included: an unscaled row that does not saturate passes a gradient
    :math:`\sqrt{d_k}` times larger.

    The rows are drawn in :math:`O(S)` each, not :math:`O(S d_k)`, by splitting every key into its part
    along :math:`\hat q = q/\lVert q\rVert` and the rest: :math:`k_j = u_j \hat q + k_j^\perp` with
    :math:`u_j \sim N(0, 1)`, so :math:`x_j = \lVert q\rVert u_j / c`, and
    :math:`\sum_j (Jg)_j k_j^\perp \sim N(0, \lVert Jg\rVert^2 I_{d_k - 1})` in the plane orthogonal to
    :math:`\hat q`, independent of the logits. Hence, exactly in distribution,

    .. math::

        \Big\lVert\frac{\partial\mathcal L}{\partial q}\Big\rVert^2
        = \frac1{c^2}\Big[\Big(\sum_j (Jg)_j u_j\Big)^2 + \lVert Jg\rVert^2\, \chi^2_{d_k - 1}\Big],
        \qquad \lVert q\rVert^2 \sim \chi^2_{d_k} .

    The tests compare it with the gradient autograd computes for explicit Gaussian vectors.

    Returns
    -------
    np.ndarray, shape (n_rows,), the norms

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
