r"""Graph neural networks beside attention: how GCN, GAT and GATv2 weigh their edges (chapter 5).

One template, :math:`h_i' = \sum_{j \in N(i)} \alpha_{ij} W h_j`, three ways of choosing
:math:`\alpha_{ij}`: GCN fixes them by the graph; GAT computes them from the features but every
node ranks its neighbours in the same order (*static* attention); GATv2 and dot-product attention
rank them query by query (*dynamic*). ``A[i, j]`` is the weight of the message from ``j`` to ``i``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import numpy as np

from ...core import attention as att
from ...core._backend import Array, ShapeError, to_numpy

__all__ = ["ranking_comparison", "shared_top_fraction"]


def _leaky_relu(x: np.ndarray, slope: float) -> np.ndarray:
    return np.where(x > 0, x, slope * x)


def _check_features(x: np.ndarray, n: int, W: np.ndarray, rows: int) -> None:
    if x.ndim != 2 or x.shape[0] != n or W.ndim != 2 or W.shape[0] != rows:
        raise ShapeError(f"x has shape {x.shape}, W has shape {W.shape}, graph has {n} nodes; "
                         f"expected x ({n}, d_in) and W ({rows}, d_out)")


def gat_scores(x: Array, W: Array, a: Array, negative_slope: float = 0.2) -> np.ndarray:
    r"""GAT scores (Velickovic 2018): :math:`e_{ij} = \mathrm{LeakyReLU}(a^\top [W h_i \| W h_j])`, (N, N).

    ``x`` (N, d_in), ``W`` (d_in, d_out), ``a`` (2 d_out,). LeakyReLU is increasing, so every row
    ranks the keys by the same number :math:`a_2^\top W h_j`.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> e = gat_scores(rng.normal(size=(4, 3)), rng.normal(size=(3, 2)), rng.normal(size=4))
    >>> e.argmax(axis=1)  # every query prefers the same key
    array([3, 3, 3, 3])
    """
    x, W, a = to_numpy(x), to_numpy(W), to_numpy(a)
    _check_features(x, len(x), W, x.shape[-1])
    d_out = W.shape[1]
    if a.shape != (2 * d_out,):
        raise ShapeError(f"a has shape {a.shape} but W has shape {W.shape}; expected a ({2 * d_out},)")
    h = x @ W  # (N, d_out)
    s_dst, s_src = h @ a[:d_out], h @ a[d_out:]  # (N,), (N,)
    return _leaky_relu(s_dst[:, None] + s_src[None, :], negative_slope)  # (N, N)


def gatv2_scores(x: Array, W: Array, a: Array, negative_slope: float = 0.2) -> np.ndarray:
    r"""GATv2 scores (Brody 2022): :math:`e_{ij} = a^\top \mathrm{LeakyReLU}(W [h_i \| h_j])`, (N, N).

    ``x`` (N, d_in), ``W`` (2 d_in, d_out), ``a`` (d_out,).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> gatv2_scores(rng.normal(size=(4, 3)), rng.normal(size=(6, 5)), rng.normal(size=5)).shape
    (4, 4)
    """
    x, W, a = to_numpy(x), to_numpy(W), to_numpy(a)
    d_in = x.shape[-1]
    _check_features(x, len(x), W, 2 * d_in)
    if a.shape != (W.shape[1],):
        raise ShapeError(f"a has shape {a.shape} but W has shape {W.shape}; expected a ({W.shape[1]},)")
    u, w = x @ W[:d_in], x @ W[d_in:]  # the h_i and h_j halves, (N, d_out) each
    return _leaky_relu(u[:, None, :] + w[None, :, :], negative_slope) @ a  # (N, N)


def dot_product_scores(x: Array, W_q: Array, W_k: Array) -> np.ndarray:
    r"""Transformer scores :math:`e_{ij} = (x_i W_q)\cdot(x_j W_k)/\sqrt{d_k}`, (N, N); ``W_q``, ``W_k`` (d, d_k).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> dot_product_scores(rng.normal(size=(5, 3)), rng.normal(size=(3, 2)), rng.normal(size=(3, 2))).shape
    (5, 5)
    """
    x, W_q, W_k = to_numpy(x), to_numpy(W_q), to_numpy(W_k)
    q, k = x @ W_q, x @ W_k  # (N, d_k) each
    return q @ k.T * att.resolve_scale(q.shape[-1])  # (N, N)


def top_neighbour(scores: Array, mask: Optional[Array] = None) -> np.ndarray:
    """For each query ``i`` the key ``j`` with the largest score among allowed keys (-1 if none).

    Examples
    --------
    >>> top_neighbour(np.array([[1.0, 3.0], [2.0, 0.0]]), np.array([[True, False], [True, True]]))
    array([0, 0])
    """
    e = to_numpy(scores).astype(float)
    if mask is not None:
        e = np.where(to_numpy(mask), e, -np.inf)
    return np.where(np.isfinite(e).any(axis=-1), e.argmax(axis=-1), -1)  # (T,)


def ranking_comparison(n_nodes: int = 6, d: int = 4, *, seed: int = 0) -> dict[str, np.ndarray]:
    """Score matrices (N, N) of GAT, GATv2 and dot-product attention on one random complete graph (seeded).

    Examples
    --------
    >>> s = ranking_comparison(seed=0)
    >>> {name: len(set(top_neighbour(e).tolist())) for name, e in s.items()}
    {'gat': 1, 'gatv2': 1, 'dot-product': 3}
    """
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n_nodes, d))
    return {
        "gat": gat_scores(x, rng.normal(size=(d, d)), rng.normal(size=2 * d)),
        "gatv2": gatv2_scores(x, rng.normal(size=(2 * d, d)), rng.normal(size=d)),
        "dot-product": dot_product_scores(x, rng.normal(size=(d, d)), rng.normal(size=(d, d))),
    }


def shared_top_fraction(n_graphs: int = 200, n_nodes: int = 6, d: int = 4, *, seed: int = 0) -> dict[str, float]:
    """Fraction of random graphs on which every query picks one top key, per scoring.

    The graphs are :func:`ranking_comparison`'s, seeds ``seed, seed + 1, ...``. GAT's is 1.0 by
    construction; for GATv2 and dot products it is a property of random weights.

    Examples
    --------
    >>> shared_top_fraction(50, seed=0)["gat"]
    1.0
    """
    counts = {"gat": 0, "gatv2": 0, "dot-product": 0}
    for t in range(n_graphs):
        for name, e in ranking_comparison(n_nodes, d, seed=seed + t).items():
            counts[name] += len(set(top_neighbour(e).tolist())) == 1
    return {name: c / n_graphs for name, c in counts.items()}


def shared_top_key(weights: Array) -> np.ndarray:
    r"""Per head, the share of queries whose top key is the head's most common top key, in [1/T, 1].

    With :math:`t_i = \arg\max_j \alpha_{ij}` the share is :math:`\max_c \frac1T \#\{i : t_i = c\}`;
    a GAT head scores 1 on every input. ``weights`` is (..., T, S), the leading axes heads;
    returns (...).

    Examples
    --------
    >>> w = np.array([[[0.7, 0.2, 0.1], [0.6, 0.3, 0.1], [0.1, 0.1, 0.8]]])  # (1 head, T = 3, S = 3)
    >>> shared_top_key(w).round(3).tolist()
    [0.667]
    """
    w = to_numpy(weights)
    if w.ndim < 2:
        raise ShapeError(f"weights has shape {w.shape}; expected (..., T, S)")
    top = w.argmax(axis=-1)  # (..., T)
    flat = top.reshape(-1, top.shape[-1])  # (heads, T)
    counts = np.array([np.bincount(row, minlength=w.shape[-1]).max() for row in flat])  # (heads,)
    return (counts / top.shape[-1]).reshape(top.shape[:-1])


def static_counts(shares: Array, lines: Sequence[float]) -> np.ndarray:
    r"""For each line :math:`t`, how many heads are static-like (shared-top-key share at least :math:`t`).

    Examples
    --------
    >>> static_counts(np.array([0.4, 0.75, 0.8, 1.0]), [0.5, 0.75, 0.9]).tolist()
    [3, 3, 1]
    """
    s = np.asarray(to_numpy(shares), dtype=float).ravel()  # (heads,)
    return np.array([(s >= round(t, 12) - 1e-12).sum() for t in lines])  # a share k/T on the line counts


def static_flip(shares: Array, lines: Sequence[float]) -> Optional[int]:
    r"""The first line at which fewer than half of the heads are static-like (``None`` if never).

    Examples
    --------
    >>> static_flip(np.array([0.4, 0.75, 0.8, 1.0]), [0.5, 0.75, 0.8, 0.9])   # at 0.9 one of four
    3
    """
    s = np.asarray(to_numpy(shares), dtype=float).ravel()  # (heads,)
    low = [i for i, c in enumerate(static_counts(s, lines)) if 2 * c < s.size]
    return low[0] if low else None
