r"""How low-rank is an attention matrix? Spectra, ranks and the two cheap approximations.

Singular spectra, effective and stable rank, the best rank-:math:`k` approximation against row-wise
top-:math:`k`, a seeded synthetic-attention generator with a temperature sweep, and a demonstration
that ``exp`` of a rank-1 logit matrix is full rank. Functions take arrays or tensors ``(..., R, C)``
and return numpy results.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import numpy as np

from ...core._backend import Array, ShapeError, shape_str, to_numpy
from ..mechanics.properties import row_entropy

__all__ = [
    "effective_rank", "effective_rank_from_singular_values", "stable_rank",
    "stable_rank_from_singular_values", "best_rank_k", "rank_k_error", "topk_error", "synthetic_attention",
    "exp_rank_demo",
]


def _as_matrix(name: str, A: Array) -> np.ndarray:
    a = to_numpy(A)
    if a.ndim < 2 or not np.issubdtype(a.dtype, np.floating):
        raise ShapeError(
            f"{name} has shape {shape_str(a)} and dtype {a.dtype}; expected a float "
            f"matrix (or stack of matrices) of shape (..., R, C)"
        )
    return a


def _check_k(k: int, A: np.ndarray, limit: int, what: str) -> None:
    if int(k) != k or k < 0 or k > limit:
        raise ValueError(
            f"k={k!r} for A of shape {shape_str(A)}; expected an integer 0 <= k <= {limit} ({what})"
        )


def singular_values(A: Array) -> np.ndarray:
    r"""Singular values :math:`\sigma_1 \ge \sigma_2 \ge \dots \ge 0` of each matrix.

    ``A``: (..., R, C) -> (..., min(R, C)), in decreasing order.

    Examples
    --------
    >>> singular_values(np.diag([3.0, 1.0, 2.0]))
    array([3., 2., 1.])
    """
    return np.linalg.svd(_as_matrix("A", A), compute_uv=False)


def _nonzero_spectrum(A: Array) -> np.ndarray:
    a = _as_matrix("A", A)
    s = np.linalg.svd(a, compute_uv=False)  # (..., min(R, C)), decreasing
    if np.any(s[..., 0] == 0):
        raise ValueError(
            f"A of shape {shape_str(a)} is (or contains) a zero matrix: all its singular "
            f"values are 0, so ranks and relative errors are undefined"
        )
    return s


def effective_rank(A: Array) -> np.ndarray:
    r"""Entropy effective rank (Roy & Vetterli 2007).

    .. math::

        \operatorname{erank}(A) = \exp\Big(-\sum_i p_i \log p_i\Big), \qquad
        p_i = \frac{\sigma_i}{\sum_j \sigma_j}

    It is 1 for a rank-1 matrix and :math:`r` when :math:`r` singular values are equal.

    Examples
    --------
    >>> float(effective_rank(np.eye(5)).round(6)), float(effective_rank(np.ones((4, 4))).round(6))
    (5.0, 1.0)
    """
    return effective_rank_from_singular_values(_nonzero_spectrum(A))


def _checked_singular_values(s: Array, measure: str) -> np.ndarray:
    """``s`` as a float array of shape (..., k), k >= 1, with no all-zero spectrum (``measure`` names the error)."""
    s = to_numpy(s)
    s = s if np.issubdtype(s.dtype, np.floating) else s.astype(np.float64)
    if s.ndim < 1 or s.shape[-1] == 0:
        raise ShapeError(f"s has shape {shape_str(s)}; expected (..., k) with k >= 1 singular values")
    if np.any(np.abs(s).max(axis=-1) == 0):
        raise ValueError(f"s of shape {shape_str(s)} is (or contains) all zeros: the {measure} of a "
                         f"zero matrix is undefined")
    return s


def effective_rank_from_singular_values(s: Array) -> np.ndarray:
    r""":func:`effective_rank` from the singular values alone: :math:`\exp H(\sigma / \textstyle\sum_j \sigma_j)`.

    ``s``: (..., k), each matrix's singular values, non-negative, not all zero, in any order -> (...).

    Examples
    --------
    >>> effective_rank_from_singular_values(np.array([[3.0, 0.0, 0.0], [1.0, 1.0, 1.0]])).round(6).tolist()
    [1.0, 3.0]
    """
    s = _checked_singular_values(s, "effective rank").astype(np.float64)
    p = s / s.sum(axis=-1, keepdims=True)  # (..., k), sums to 1
    return np.exp(row_entropy(p))  # (...,), 0 log 0 = 0


def stable_rank(A: Array) -> np.ndarray:
    r"""Stable rank :math:`\|A\|_F^2 / \|A\|_2^2 = \sum_i \sigma_i^2 / \sigma_1^2`.

    .. math:: \operatorname{srank}(A) = \frac{\lVert A\rVert_F^2}{\lVert A\rVert_2^2} \in [1, \operatorname{rank} A]

    Its inverse is the share of the energy in the top singular direction.

    Examples
    --------
    >>> float(stable_rank(np.diag([2.0, 1.0, 1.0])))
    1.5
    """
    return stable_rank_from_singular_values(_nonzero_spectrum(A))  # (...,)


def stable_rank_from_singular_values(s: Array) -> np.ndarray:
    r""":func:`stable_rank` from the singular values alone: :math:`\sum_j \sigma_j^2 / \max_j \sigma_j^2`.

    ``s``: (..., k), each matrix's singular values, non-negative, in any order -> (...).

    Examples
    --------
    >>> s = np.array([[3.0, 0.0, 0.0], [1.0, 1.0, 1.0], [2.0, 1.0, 1.0]])  # rank 1, equal values, mixed
    >>> stable_rank_from_singular_values(s).tolist()
    [1.0, 3.0, 1.5]
    """
    s = _checked_singular_values(s, "stable rank")
    return (s**2).sum(axis=-1) / (s**2).max(axis=-1)  # (...): ||M||_F^2 / ||M||_2^2


def best_rank_k(A: Array, k: int) -> np.ndarray:
    r"""The best rank-:math:`k` approximation :math:`A_k = U_k \Sigma_k V_k^\top` (Eckart-Young).

    No matrix of rank at most :math:`k` is closer to :math:`A` in Frobenius or spectral norm.

    Examples
    --------
    >>> best_rank_k(np.diag([3.0, 2.0, 1.0]), 2)
    array([[3., 0., 0.],
           [0., 2., 0.],
           [0., 0., 0.]])
    """
    a = _as_matrix("A", A)
    _check_k(k, a, min(a.shape[-2:]), "the rank of the approximation")
    U, s, Vh = np.linalg.svd(a, full_matrices=False)  # (..., R, r), (..., r), (..., r, C)
    return (U[..., :, :k] * s[..., None, :k]) @ Vh[..., :k, :]  # (..., R, C)


def rank_k_error(A: Array, k: int) -> np.ndarray:
    r"""Relative Frobenius error of the best rank-:math:`k` approximation.

    .. math::

        \frac{\|A - A_k\|_F}{\|A\|_F} = \sqrt{\frac{\sum_{i > k} \sigma_i^2}{\sum_i \sigma_i^2}}

    Examples
    --------
    >>> float(rank_k_error(np.diag([3.0, 2.0, 1.0]), 1).round(4))  # sqrt(5 / 14)
    0.5976
    """
    a = _as_matrix("A", A)
    _check_k(k, a, min(a.shape[-2:]), "the rank of the approximation")
    return _tail_error(_nonzero_spectrum(a), k)


def _tail_error(s: np.ndarray, k: int) -> np.ndarray:
    s2 = s**2  # (..., r) energies
    return np.sqrt(s2[..., k:].sum(axis=-1) / s2.sum(axis=-1))


def topk_sparsify(A: Array, k: int) -> np.ndarray:
    """Keep the ``k`` largest-magnitude entries of each row; set the rest to 0.

    Ties are broken by position (the earlier column wins). Rows are *not*
    renormalised: the error measures what the dropped entries carried.

    Examples
    --------
    >>> topk_sparsify(np.array([[0.5, 0.1, 0.4], [0.2, 0.3, 0.5]]), 2)
    array([[0.5, 0. , 0.4],
           [0. , 0.3, 0.5]])
    """
    a = _as_matrix("A", A)
    _check_k(k, a, a.shape[-1], "entries kept per row")
    idx = np.argsort(-np.abs(a), axis=-1, kind="stable")[..., :k]  # (..., R, k)
    out = np.zeros_like(a)
    np.put_along_axis(out, idx, np.take_along_axis(a, idx, axis=-1), axis=-1)
    return out


def topk_error(A: Array, k: int) -> np.ndarray:
    r"""Relative Frobenius error :math:`\|A - \operatorname{top}_k(A)\|_F / \|A\|_F` of row-wise top-:math:`k`.

    Examples
    --------
    >>> float(topk_error(np.array([[3.0, 4.0]]), 1))  # drops the 3: 3 / 5
    0.6
    """
    a = _as_matrix("A", A)
    num = np.linalg.norm(a - topk_sparsify(a, k), axis=(-2, -1))
    return num / np.linalg.norm(a, axis=(-2, -1))


def synthetic_attention(
    n: int = 256, d: int = 32, beta: float = 1.0, seed: int = 0
) -> np.ndarray:
    r"""A synthetic attention matrix at inverse temperature ``beta``.

    .. math::

        A = \operatorname{softmax}_{\text{rows}}\!\Big(\beta\,\frac{QK^\top}{\sqrt d}\Big),
        \qquad Q, K \in \mathbb{R}^{n \times d},\ \text{entries iid } \mathcal N(0, 1)

    The logits have standard deviation about ``beta``; ``Q``, ``K`` depend only on ``seed``.

    Returns (n, n); rows sum to 1.

    Examples
    --------
    >>> A = synthetic_attention(n=8, d=4, beta=2.0, seed=0)
    >>> A.shape, A.sum(axis=1).round(6).tolist() == [1.0] * 8
    ((8, 8), True)
    """
    for name, val in (("n", n), ("d", d)):
        if int(val) != val or val < 1:
            raise ValueError(f"{name}={val!r}; expected a positive integer")
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(n, d))  # (n, d)
    k = rng.normal(size=(n, d))  # (n, d)
    logits = beta * (q @ k.T) / np.sqrt(d)  # (n, n)
    logits = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(logits)
    return e / e.sum(axis=1, keepdims=True)  # (n, n), rows sum to 1


def temperature_sweep(
    betas: Optional[Sequence[float]] = None,
    n: int = 256,
    d: int = 32,
    k: int = 16,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """Effective rank, rank-``k`` SVD error and top-``k`` sparse error against ``beta``.

    ``betas`` defaults to 20 values from 0.2 to 4; returns arrays (len(betas),) ``beta``,
    ``effective_rank``, ``stable_rank``, ``svd_error``, ``sparse_error``.

    Examples
    --------
    >>> sweep = temperature_sweep([0.2, 4.0], n=64, d=16, k=8)
    >>> bool(sweep["svd_error"][0] < sweep["sparse_error"][0]), bool(sweep["svd_error"][1] > sweep["sparse_error"][1])
    (True, True)
    """
    betas = np.linspace(0.2, 4.0, 20) if betas is None else np.asarray(betas, dtype=float)
    A = np.stack([synthetic_attention(n, d, b, seed) for b in betas])  # (len(betas), n, n)
    _check_k(k, A, n, "rank and entries kept per row")
    s = _nonzero_spectrum(A)  # (len(betas), n): one SVD per matrix serves all three ranks
    return {
        "beta": betas,
        "effective_rank": effective_rank_from_singular_values(s),
        "stable_rank": stable_rank_from_singular_values(s),
        "svd_error": _tail_error(s, k),
        "sparse_error": topk_error(A, k),
    }


def crossover_beta(sweep: dict[str, np.ndarray]) -> float:
    """The ``beta`` where the SVD error first exceeds the sparse error (linear interpolation).

    Returns NaN when the two curves do not cross inside the sweep.

    Examples
    --------
    >>> crossover_beta({"beta": np.array([0.0, 1.0, 2.0]),
    ...                 "svd_error": np.array([0.1, 0.5, 0.9]), "sparse_error": np.array([0.9, 0.7, 0.1])})
    1.2
    """
    beta = np.asarray(sweep["beta"], dtype=float)
    gap = np.asarray(sweep["svd_error"]) - np.asarray(sweep["sparse_error"])  # < 0: low rank wins
    above = np.flatnonzero(gap > 0)
    if above.size == 0 or above[0] == 0:
        return float("nan")
    i = above[0]
    t = -gap[i - 1] / (gap[i] - gap[i - 1])
    return float(beta[i - 1] + t * (beta[i] - beta[i - 1]))


def exp_rank_demo(n: int = 8, scale: float = 4.0) -> dict:
    r"""``exp`` of a rank-1 logit matrix is full rank.

    :math:`L_{ij} = s\, x_i x_j` (distinct :math:`x_i` in :math:`[-1, 1]`) has rank 1, yet
    :math:`e^{xy}` is strictly totally positive, so :math:`\exp(L)` and its row-softmax are
    nonsingular. Keep ``n`` small to see the full rank in floating point.

    Returns ``logits``, ``softmax`` (n, n), their ranks and ``exp(L)``'s (``rank_*``) and its ``singular_values``.

    Examples
    --------
    >>> demo = exp_rank_demo(n=8, scale=4.0)
    >>> demo["rank_logits"], demo["rank_exp"], demo["rank_softmax"]
    (1, 8, 8)
    """
    if int(n) != n or n < 2:
        raise ValueError(f"n={n!r}; expected an integer >= 2")
    x = np.linspace(-1.0, 1.0, int(n))  # (n,) distinct points
    logits = scale * np.outer(x, x)  # (n, n), rank 1
    E = np.exp(logits)  # (n, n), entrywise exp
    P = E / E.sum(axis=1, keepdims=True)  # (n, n), row softmax
    return {
        "logits": logits,
        "softmax": P,
        "rank_logits": int(np.linalg.matrix_rank(logits)),
        "rank_exp": int(np.linalg.matrix_rank(E)),
        "rank_softmax": int(np.linalg.matrix_rank(P)),
        "singular_values": np.linalg.svd(E, compute_uv=False),
    }
