r"""Is the kernel inside attention a smoothing kernel? Symmetry, positive definiteness, locality (chapter 2).

Scaled dot-product attention is Nadaraya-Watson with the kernel
:math:`\kappa(x_i, x_j) = \exp(q_i\cdot k_j / \sqrt{d})`. Only locality tells it apart from a
smoothing kernel: boxcar and Epanechnikov are not PSD either.
"""

from __future__ import annotations

import numpy as np

from ...core._backend import Array, ShapeError, shape_str, to_numpy
from ...core.attention import scaled_dot_product_attention
from .smoothing import gaussian_nw_as_attention

__all__ = ["locality_over_draws"]


def _square(name: str, K: Array) -> np.ndarray:
    m = np.asarray(to_numpy(K), dtype=np.float64)
    if m.ndim != 2 or m.shape[0] != m.shape[1] or m.shape[0] == 0:
        raise ShapeError(f"{name} has shape {shape_str(m)}; expected a square Gram matrix (n, n) with n >= 1")
    return m


def kernel_asymmetry(K: Array) -> float:
    r"""Relative asymmetry of a Gram matrix, :math:`\max_{ij} |K_{ij} - K_{ji}| / \max_{ij} |K_{ij}|` (0 = symmetric).

    Parameters
    ----------
    K : array, shape (n, n)

    Examples
    --------
    >>> kernel_asymmetry(np.array([[1.0, 2.0], [2.0, 1.0]])), kernel_asymmetry(np.array([[1.0, 4.0], [0.0, 1.0]]))
    (0.0, 1.0)
    """
    m = _square("K", K)
    return float(np.abs(m - m.T).max() / np.abs(m).max())


def eigenvalue_ratio(K: Array) -> float:
    r"""Smallest over largest eigenvalue of :math:`\tfrac12(K + K^\top)`; negative of order 1 = not PSD.

    Parameters
    ----------
    K : array, shape (n, n)

    Examples
    --------
    >>> round(eigenvalue_ratio(np.array([[2.0, 1.0], [1.0, 2.0]])), 4)  # eigenvalues 1 and 3
    0.3333
    >>> round(eigenvalue_ratio(np.array([[1.0, 3.0], [1.0, 1.0]])), 4)  # symmetrised [[1, 2], [2, 1]]: -1 and 3
    -0.3333
    """
    m = _square("K", K)
    ev = np.linalg.eigvalsh((m + m.T) / 2)  # ascending eigenvalues of the symmetric part   (n,)
    return float(ev[0] / ev[-1])


def own_key_top_rate(keys: Array) -> dict[str, float]:
    r"""How often each key, used as a query, gives **itself** the largest weight, for three kernels at :math:`\sigma^2 = \sqrt d`.

    ``gaussian``: :math:`\exp(-\lVert k_i - k_j\rVert^2 / 2\sqrt d)` (always 1); ``dot``:
    :math:`\exp(k_i\cdot k_j/\sqrt d)`, where a longer key can win; ``unit``: the dot product of keys of norm 1.

    Parameters
    ----------
    keys : array, shape (n, d)

    Returns
    -------
    dict of float in [0, 1], keys ``gaussian``, ``dot``, ``unit``

    Examples
    --------
    >>> rates = own_key_top_rate(np.array([[1.0, 0.0], [3.0, 0.5], [-1.0, 2.0]]))
    >>> {name: round(rate, 3) for name, rate in rates.items()}
    {'gaussian': 1.0, 'dot': 0.667, 'unit': 1.0}
    """
    k = np.asarray(to_numpy(keys), dtype=np.float64)
    if k.ndim != 2 or k.shape[0] == 0:
        raise ShapeError(f"keys has shape {shape_str(k)}; expected (n, d) with n >= 1")
    n, d = k.shape
    values = np.eye(n)  # value j = one-hot of j: the outputs are the weights themselves
    _, w_gauss = gaussian_nw_as_attention(k, k, values, bandwidth=d**0.25)  # (n, n), sigma^2 = sqrt(d)
    _, w_dot = scaled_dot_product_attention(k, k, values)  # (n, n), scale 1/sqrt(d), no key bias
    unit = k / np.linalg.norm(k, axis=-1, keepdims=True)  # (n, d), every key of norm 1
    _, w_unit = scaled_dot_product_attention(unit, unit, values)  # (n, n)
    own = np.arange(n)
    return {name: float(np.mean(w.argmax(-1) == own)) for name, w in
            (("gaussian", w_gauss), ("dot", w_dot), ("unit", w_unit))}


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
    Measures: ``own_key`` (as :func:`own_key_top_rate`; chance :math:`1/n`) and ``rank_corr`` (mean
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
