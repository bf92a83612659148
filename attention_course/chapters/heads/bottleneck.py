r"""The low-rank bottleneck of a single head (Bhojanapalli et al. 2020; chapter 4).

How close can :math:`\operatorname{softmax}(QK^\top)`, :math:`Q, K` of width ``r``, come to a dense or a
sparse target pattern, in KL divergence?
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from ...core._backend import Array, ShapeError, shape_str, to_numpy
from ...models.lbfgs import lbfgs

__all__ = ["dirichlet_attention", "near_permutation", "fit_low_rank_attention"]


def dirichlet_attention(n: int, alpha: float = 1.0, seed: int = 0) -> np.ndarray:
    """A dense random attention matrix: each of the ``n`` rows drawn from Dirichlet(``alpha``).

    Examples
    --------
    >>> P = dirichlet_attention(4, seed=0)
    >>> P.shape, bool(np.allclose(P.sum(1), 1))
    ((4, 4), True)
    """
    return np.random.default_rng(seed).dirichlet(np.full(n, float(alpha)), size=n)  # (n, n)


def near_permutation(n: int, mass: float = 0.99, seed: int = 0) -> np.ndarray:
    """Row ``i`` puts ``mass`` on key ``perm[i]`` (a seeded permutation) and spreads the rest evenly.

    Examples
    --------
    >>> P = near_permutation(4, mass=0.97, seed=0)
    >>> P.max(1).round(2).tolist(), P.min(1).round(2).tolist()
    ([0.97, 0.97, 0.97, 0.97], [0.01, 0.01, 0.01, 0.01])
    """
    if not 0 < mass < 1 or n < 2:
        raise ValueError(f"mass={mass} and n={n}; expected 0 < mass < 1 and n >= 2")
    P = np.full((n, n), (1 - mass) / (n - 1))
    P[np.arange(n), np.random.default_rng(seed).permutation(n)] = mass
    return P  # (n, n)


def row_kl(P: Array, logits: Array) -> Array:
    r"""Mean over rows of :math:`\mathrm{KL}(P_i \,\|\, \operatorname{softmax}(L_i))` (nats).

    .. math:: \frac1T \sum_i \sum_j P_{ij} \left(\log P_{ij} - \log \operatorname{softmax}(L_i)_j\right)

    ``0 log 0`` counts as 0. numpy in, float out; torch in, a 0-d tensor out (differentiable).

    Examples
    --------
    >>> P = np.array([[0.5, 0.5], [1.0, 0.0]])
    >>> round(row_kl(P, np.zeros((2, 2))), 4)          # (0 + log 2) / 2
    0.3466
    """
    P_t, L_t = torch.as_tensor(P), torch.as_tensor(logits)
    if P_t.shape != L_t.shape or P_t.ndim != 2:
        raise ShapeError(f"P has shape {shape_str(P_t)} and logits {shape_str(L_t)}; "
                         f"expected the same (T, S)")
    log_q = torch.log_softmax(L_t.to(P_t.dtype), dim=-1)  # (T, S), normalised over the keys
    kl = (torch.xlogy(P_t, P_t) - P_t * log_q).sum(-1).mean()  # sum over keys, mean over queries
    return kl if isinstance(P, torch.Tensor) or isinstance(logits, torch.Tensor) else float(kl)


class LowRankFit(NamedTuple):
    """Result of :func:`fit_low_rank_attention`: the KL, the factors and the fitted pattern."""

    kl: float
    q: np.ndarray  # (T, r)
    k: np.ndarray  # (S, r)
    weights: np.ndarray  # (T, S) = softmax(q k^T)


def fit_low_rank_attention(P: Array, r: int, restarts: int = 2, seed: int = 0,
                           max_iter: int = 100) -> LowRankFit:
    r"""The closest single-head pattern of rank ``r`` to a target ``P``, in KL.

    .. math:: \min_{Q \in \mathbb{R}^{T\times r},\, K \in \mathbb{R}^{S\times r}}
              \frac1T\sum_i \mathrm{KL}\!\left(P_i \,\big\|\, \operatorname{softmax}(QK^\top)_i\right)

    L-BFGS in float64 from the rank-``r`` SVD of the row-centred :math:`\log P` and ``restarts - 1``
    seeded Gaussian starts; the best run is returned (an upper bound on the minimum).
    ``P`` (T, S) has positive entries and rows summing to 1; ``0 <= r <= S``.

    Examples
    --------
    >>> P = dirichlet_attention(6, seed=0)
    >>> [round(fit_low_rank_attention(P, r).kl, 3) for r in (0, 5)]
    [0.332, 0.0]
    """
    P_t = torch.as_tensor(to_numpy(P), dtype=torch.float64)
    if P_t.ndim != 2 or (P_t <= 0).any() or not torch.allclose(P_t.sum(-1), torch.ones(1, dtype=P_t.dtype)):
        raise ValueError(f"P has shape {shape_str(P_t)}; expected a (T, S) matrix with positive "
                         f"entries whose rows sum to 1")
    T, S = P_t.shape
    if int(r) != r or not 0 <= r <= S:
        raise ValueError(f"r={r!r} with P of shape {(T, S)}; expected an integer 0 <= r <= S={S}")
    if r == 0:
        return LowRankFit(row_kl(P_t, torch.zeros(T, S)).item(), np.zeros((T, 0)), np.zeros((S, 0)),
                          np.full((T, S), 1.0 / S))
    log_p = torch.log(P_t)
    U, s, Vh = torch.linalg.svd(log_p - log_p.mean(-1, keepdim=True))  # row-centred log P
    starts = [(U[:, :r] * s[:r].sqrt(), Vh[:r].T * s[:r].sqrt())]  # (T, r), (S, r)
    g = torch.Generator().manual_seed(int(seed))
    starts += [(torch.randn(T, r, generator=g, dtype=torch.float64),
                torch.randn(S, r, generator=g, dtype=torch.float64)) for _ in range(restarts - 1)]
    best = None
    for q0, k0 in starts:
        q, k = q0.contiguous().requires_grad_(), k0.contiguous().requires_grad_()
        lbfgs(lambda: row_kl(P_t, q @ k.T), [q, k], max_iter=max_iter, history_size=50,  # q k^T: (T, S), rank <= r
              tolerance_grad=1e-10, tolerance_change=1e-14)  # torch.optim.LBFGS's steps, without its import
        with torch.no_grad():
            kl = row_kl(P_t, q @ k.T).item()
        if best is None or kl < best[0]:
            best = (kl, q.detach(), k.detach())
        if kl < 1e-12:
            break  # an exact fit: no restart can improve on it
    kl, q, k = best
    return LowRankFit(max(kl, 0.0), q.numpy(), k.numpy(), torch.softmax(q @ k.T, -1).numpy())
