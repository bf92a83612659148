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
=========================  ====================================================
"""

from __future__ import annotations

import numpy as np

from ..core._backend import Array, ShapeError, shape_str, to_numpy
from ..core.attention import scaled_dot_product_attention
from .kernels import gaussian_nw_as_attention

__all__ = ["kernel_asymmetry", "eigenvalue_ratio", "own_key_top_rate"]


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
      (:func:`~attention_course.lenses.kernels.gaussian_nw_as_attention`); always 1, since the
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
