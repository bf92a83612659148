r"""Is the kernel inside attention a smoothing kernel? Three measurable differences.

Scaled dot-product attention is Nadaraya-Watson regression with the kernel

.. math::

    \kappa(x_i, x_j) = \exp\!\bigl(q_i\cdot k_j / \sqrt{d}\bigr), \qquad q_i = W_Q^\top x_i,\ k_j = W_K^\top x_j .

A classical smoothing kernel (Gaussian, Laplace, boxcar) is symmetric, and the
Gaussian one is positive semi-definite and local: a query's own point gets the
largest weight. The helpers below measure each property on a Gram matrix
:math:`K_{ij} = \kappa(x_i, x_j)` or on a set of keys:

=========================  ====================================================
``kernel_asymmetry(K)``    :math:`\max|K - K^\top| / \max|K|` (0 = symmetric)
``eigenvalue_ratio(K)``    :math:`\lambda_{\min}/\lambda_{\max}` of :math:`\tfrac12(K+K^\top)` (< 0 = not PSD)
``own_key_top_rate(keys)`` how often a key, used as a query, gives itself the largest weight
``rank_correlation(a, b)``  Spearman correlation of each row of ``a`` with the same row of ``b``
``locality_over_draws(…)``  own-key rate and weight-distance correlation over random draws of keys
=========================  ====================================================

Locality is what separates a smoothing kernel from the dot-product kernel:
Nadaraya-Watson needs only non-negative weights, and the boxcar and
Epanechnikov kernels are not PSD either (``eigenvalue_ratio`` < 0 on their Gram
matrices), so a negative eigenvalue does not tell the two kinds apart.
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
    r"""Relative asymmetry of a Gram matrix, :math:`\max_{ij} |K_{ij} - K_{ji}| / \max_{ij} |K_{ij}|`.

    0 for a symmetric kernel (every smoothing kernel, and attention with
    :math:`W_Q = W_K`); up to 1 when :math:`\kappa(x_i, x_j)` and :math:`\kappa(x_j, x_i)` differ
    by the size of the largest entry.

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
    r"""Smallest over largest eigenvalue of the symmetrised Gram matrix :math:`\tfrac12(K + K^\top)`.

    A (Mercer) kernel's Gram matrix is positive semi-definite, so the ratio is
    :math:`\ge 0` up to rounding (about :math:`-n\varepsilon` in float64); a negative
    ratio of order 1 means the kernel is not PSD. The symmetrised matrix is the one
    whose quadratic form :math:`c^\top K c` the kernel defines.

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
    r"""How often each key, used as a query, gives **itself** the largest attention weight.

    Each row of ``keys`` is also a query (self-attention without projections), and
    the fraction of queries :math:`i` with :math:`\arg\max_j \alpha_{ij} = i` is reported for
    three kernels at the temperature of scaled dot-product attention, :math:`\sigma^2 = \sqrt d`:

    * ``"gaussian"``: :math:`\alpha_{ij} \propto \exp(-\lVert k_i - k_j\rVert^2 / 2\sqrt d)`
      (:func:`~attention_course.chapters.kernels.smoothing.gaussian_nw_as_attention`); always 1, since the
      distance to itself is 0.
    * ``"dot"``: :math:`\alpha_{ij} \propto \exp(k_i\cdot k_j/\sqrt d)`, plain SDPA: a longer key
      :math:`k_j` can beat :math:`k_i` itself, because :math:`k_i\cdot k_j` grows with :math:`\lVert k_j\rVert`.
    * ``"unit"``: the same SDPA on the keys scaled to norm 1; by Cauchy-Schwarz, :math:`k_i\cdot k_j \le 1 = k_i\cdot k_i`,
      so it is 1 unless two keys point the same way.

    Parameters
    ----------
    keys : array, shape (n, d)

    Returns
    -------
    dict
        ``{"gaussian": float, "dot": float, "unit": float}``, each a fraction in [0, 1].

    Examples
    --------
    A short key next to a long one in the same direction: as a query, the short key
    prefers the long one under the dot product.

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
    r"""Spearman rank correlation of row ``i`` of ``a`` with row ``i`` of ``b``, for every row.

    .. math::

        \rho_i = \operatorname{corr}\bigl(\operatorname{rank}(a_{i\cdot}), \operatorname{rank}(b_{i\cdot})\bigr)

    1 when row ``i`` of ``a`` increases with row ``i`` of ``b``, -1 when it decreases, about 0 when
    the two are unrelated. Ties are ranked by position (the inputs here are continuous).
    With ``a`` the attention scores and ``b`` minus the query-key distances, :math:`\rho_i = 1`
    says that query ``i``'s weight falls with distance, as a smoothing kernel's does.

    Parameters
    ----------
    a, b : array, shape (..., T, S), S >= 2
        Leading axes (layers, heads) are kept.

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


def locality_over_draws(
    n: int, d: int, draws: int, seed: int = 0, norm_range: tuple[float, float] = (0.5, 2.0)
) -> dict[str, dict[str, np.ndarray]]:
    r"""Two locality measures of four kernels, over ``draws`` random sets of keys.

    Draw ``s`` uses ``np.random.default_rng((seed, s))``: ``n`` keys
    :math:`k_i = r_i z_i` with :math:`z_i \sim N(0, I_d)` and lengths
    :math:`r_i \sim U(\text{norm\_range})`, then an ``(n, n)`` matrix of i.i.d.
    :math:`N(0, 1)` scores. Each key is also a query (self-attention without
    projections). The kernels, at the temperature of attention, :math:`\sigma^2 = \sqrt d`:

    * ``"gaussian"``: score :math:`-\lVert k_i - k_j\rVert^2 / 2\sqrt d`, a smoothing kernel;
    * ``"dot"``: score :math:`k_i\cdot k_j / \sqrt d`, scaled dot-product attention;
    * ``"unit"``: the same on the keys scaled to norm 1 (distances between the unit keys);
    * ``"random"``: the random scores, a kernel that ignores where the keys are.

    The measures, per draw:

    * ``"own_key"``: the fraction of queries whose own key (distance 0) gets the
      largest weight, as :func:`own_key_top_rate`; chance (the ``"random"`` kernel) is :math:`1/n`;
    * ``"rank_corr"``: the mean over queries of :func:`rank_correlation` between the
      scores and minus the distances: 1 when weight falls with distance, about 0 for random scores.

    and, to compare the spread of the keys with a trained model's, ``"norm_ratio"``: the
    largest over the smallest key norm of each draw.

    Parameters
    ----------
    n, d : int
        Number of keys (each also a query) and their dimension; ``n >= 2``.
    draws : int
        Number of independent draws.
    seed : int
        First element of each draw's generator seed.
    norm_range : (float, float)
        Range of the length factor :math:`r_i`; ``(1, 1)`` keeps the Gaussian keys' own norms.

    Returns
    -------
    dict
        ``{"own_key": {kernel: (draws,)}, "rank_corr": {kernel: (draws,)}}`` for the four kernels,
        and ``"norm_ratio": {"keys": (draws,)}``.

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
