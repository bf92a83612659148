r"""Is the kernel inside attention a smoothing kernel? Its locality, against three kernels and random scores (chapter 2).

Scaled dot-product attention is Nadaraya-Watson with the kernel
:math:`\kappa(x_i, x_j) = \exp(q_i\cdot k_j / \sqrt{d})`. Only locality tells it apart from a
smoothing kernel: boxcar and Epanechnikov are not PSD either.
"""

from __future__ import annotations

import numpy as np

from ...core._backend import Array, ShapeError, shape_str, to_numpy

__all__ = ["locality_over_draws"]


def rank_correlation(a: Array, b: Array) -> np.ndarray:
    r"""Spearman rank correlation of row ``i`` of ``a`` with row ``i`` of ``b``, for every row (ties by position).

    .. math::

        \rho_i = \operatorname{corr}\bigl(\operatorname{rank}(a_{i\cdot}), \operatorname{rank}(b_{i\cdot})\bigr)

    Parameters
    ----------
    a, b : array, shape (..., T, S), S >= 2

    Returns
    -------
    ndarray, shape (..., T)

    Examples
    --------
    >>> rank_correlation(np.array([[1.0, 5.0, 9.0], [3.0, 2.0, 1.0]]), np.array([[0.1, 0.2, 0.3], [1.0, 2.0, 3.0]]))
    array([ 1., -1.])
    """
    x, y = (np.asarray(to_numpy(m), dtype=np.float64) for m in (a, b))
    if x.ndim < 2 or x.shape != y.shape or x.shape[-1] < 2:
        raise ShapeError(f"a has shape {shape_str(x)} and b {shape_str(y)}; expected the same shape (..., T, S) "
                         f"with S >= 2")
    rx, ry = (m.argsort(-1).argsort(-1).astype(np.float64) for m in (x, y))  # (..., T, S) ranks 0 .. S-1
    rx -= rx.mean(-1, keepdims=True)
    ry -= ry.mean(-1, keepdims=True)
    return (rx * ry).sum(-1) / np.sqrt((rx**2).sum(-1) * (ry**2).sum(-1))


def locality_over_draws(n: int, d: int, draws: int, seed: int = 0, norm_range: tuple[float, float] = (0.5, 2.0)
                       ) -> dict[str, dict[str, np.ndarray]]:
    r"""Two locality measures of four kernels over ``draws`` random sets of keys (each key also a query).

    Draw ``s`` (``default_rng((seed, s))``): keys :math:`k_i = r_i z_i`, :math:`z_i \sim N(0, I_d)`,
    :math:`r_i \sim U(\text{norm\_range})`, then an (n, n) matrix of N(0, 1) scores. Kernels, at
    :math:`\sigma^2 = \sqrt d`: ``gaussian``, ``dot``, ``unit`` (dot product of unit keys) and ``random``.
    Measures: ``own_key`` (the share of keys that, used as queries, give themselves the largest weight;
    chance :math:`1/n`) and ``rank_corr`` (mean
    :func:`rank_correlation` of the scores with minus the distances).

    Returns
    -------
    dict
        ``{"own_key": {kernel: (draws,)}, "rank_corr": {kernel: (draws,)}, "norm_ratio": {"keys": (draws,)}}``.

    Examples
    --------
    >>> loc = locality_over_draws(n=50, d=8, draws=5, seed=0)
    >>> {name: round(float(r.mean()), 2) for name, r in loc["own_key"].items()}
    {'gaussian': 1.0, 'dot': 0.48, 'unit': 1.0, 'random': 0.02}
    >>> {name: round(float(r.mean()), 2) for name, r in loc["rank_corr"].items()}
    {'gaussian': 1.0, 'dot': 0.59, 'unit': 1.0, 'random': -0.01}
    >>> loc["norm_ratio"]["keys"].round(1)  # largest / smallest key norm of each draw
    array([ 6.4, 10. ,  5.7,  5.3,  6.9])
    """
    if n < 2 or d < 1 or draws < 1:
        raise ValueError(f"n={n}, d={d}, draws={draws}; expected n >= 2, d >= 1, draws >= 1")
    kernels = ("gaussian", "dot", "unit", "random")
    out: dict[str, dict[str, list[float]]] = {m: {k: [] for k in kernels} for m in ("own_key", "rank_corr")}
    out["norm_ratio"] = {"keys": []}
    for s in range(draws):
        gen = np.random.default_rng((seed, s))
        keys = gen.normal(size=(n, d)) * gen.uniform(*norm_range, size=(n, 1))  # (n, d), lengths vary
        norms = np.linalg.norm(keys, axis=-1, keepdims=True)  # (n, 1)
        out["norm_ratio"]["keys"].append(float(norms.max() / norms.min()))
        unit = keys / norms  # (n, d), norm 1
        sq = ((keys[:, None, :] - keys[None, :, :]) ** 2).sum(-1)  # (n, n) squared distances
        sq_unit = ((unit[:, None, :] - unit[None, :, :]) ** 2).sum(-1)  # (n, n) between unit keys
        scores = {
            "gaussian": (-sq / (2 * np.sqrt(d)), sq),
            "dot": (keys @ keys.T / np.sqrt(d), sq),
            "unit": (unit @ unit.T / np.sqrt(d), sq_unit),
            "random": (gen.normal(size=(n, n)), sq),  # ignores the keys
        }
        for name, (score, dist2) in scores.items():  # softmax is monotone: rank and argmax of the scores
            out["own_key"][name].append(float(np.mean(score.argmax(-1) == np.arange(n))))
            out["rank_corr"][name].append(float(rank_correlation(score, -dist2).mean()))
    return {m: {k: np.array(v) for k, v in per.items()} for m, per in out.items()}
