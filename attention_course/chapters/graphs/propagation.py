r"""Self-attention as message passing on a learned, weighted, directed graph (chapter 5).

Nodes are positions ``0..T-1`` and :math:`A_{ij}` is the weight of the message from node
:math:`j` to node :math:`i`, so an attention matrix is such an ``A`` and a boolean mask
(``True`` = may attend) is its edge set. One layer is one round of message passing,

.. math::

    \alpha_{ij} = \operatorname{softmax}_{j \in N(i)} e(q_i, k_j), \qquad
    h_i' = \sum_{j \in N(i)} \alpha_{ij} v_j,

and a node with no in-neighbours receives 0. :func:`banded_stack_reach` and :func:`hops_flip`
serve the ``l-hops`` slider.
"""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np
import torch

from ...core import attention as att
from ...core._backend import Array, ShapeError, to_numpy
from .collapse import attention_stack, init_stack_params

__all__ = [
    "banded_mask", "example_topologies", "message_passing", "message_passing_gap", "receptive_field",
    "dependency_support", "band_width", "banded_stack_reach",
]


# ------------------------------------------------------------ graphs and masks
def _square(name: str, m: Array, what: str = "(T, T)") -> np.ndarray:
    arr = to_numpy(m)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
        raise ShapeError(f"{name} has shape {tuple(arr.shape)}; expected a square matrix {what}")
    return arr


def banded_mask(T: int, window: int, causal: bool = False) -> np.ndarray:
    """Local attention: ``True`` where ``|i - j| <= window`` (and ``j <= i`` if causal).

    Examples
    --------
    >>> banded_mask(4, 1).astype(int)
    array([[1, 1, 0, 0],
           [1, 1, 1, 0],
           [0, 1, 1, 1],
           [0, 0, 1, 1]])
    """
    if int(T) != T or T < 1:
        raise ValueError(f"T={T!r}; expected a positive integer number of nodes")
    if int(window) != window or window < 0:
        raise ValueError(f"window={window!r}; expected an integer window >= 0 (0 = self only)")
    offset = np.arange(T)[:, None] - np.arange(T)[None, :]  # (T, T), i - j
    allowed = np.abs(offset) <= window
    return allowed & (offset >= 0) if causal else allowed


def topology_mask(kind: str, T: int, window: Optional[int] = None, adjacency: Optional[Array] = None) -> np.ndarray:
    """A graph topology as a boolean (T, T) mask (``True`` = edge j -> i).

    ``kind`` is one of complete, causal, banded, causal-banded (these need ``window``) or
    adjacency (``adjacency != 0`` as it is, without added self loops).

    Examples
    --------
    >>> topology_mask("causal-banded", 4, window=1).astype(int)
    array([[1, 0, 0, 0],
           [1, 1, 0, 0],
           [0, 1, 1, 0],
           [0, 0, 1, 1]])
    """
    if kind == "complete":
        return np.ones((T, T), dtype=bool)
    if kind == "causal":
        return att.causal_mask(T)
    if kind in ("banded", "causal-banded"):
        if window is None:
            raise ValueError(f"kind={kind!r} needs a window (an integer >= 0)")
        return banded_mask(T, window, causal=kind == "causal-banded")
    if kind == "adjacency":
        if adjacency is None:
            raise ValueError("kind='adjacency' needs an adjacency matrix of shape (T, T)")
        A = _square("adjacency", adjacency)
        if A.shape[0] != T:
            raise ShapeError(f"adjacency has shape {A.shape} but T={T}; expected ({T}, {T})")
        return A != 0
    raise ValueError(f"kind={kind!r}; expected complete, causal, banded, causal-banded or adjacency")


# ------------------------------------------------------------- message passing
def example_topologies(T: int, rng: np.random.Generator, p_edge: float = 0.3) -> dict[str, np.ndarray]:
    """Chapter 5's five graphs on ``T`` nodes, as boolean masks.

    ``random + self loops`` draws each edge with probability ``p_edge`` from ``rng``;
    ``node 2 isolated`` is that graph with node 2's in-edges removed (a fully masked row).

    Examples
    --------
    >>> masks = example_topologies(4, np.random.default_rng(0))
    >>> {name: int(m.sum()) for name, m in masks.items() if name in ("complete", "causal", "banded, w = 1")}
    {'complete': 16, 'causal': 10, 'banded, w = 1': 10}
    >>> bool(masks["random + self loops"].diagonal().all()), bool(masks["node 2 isolated"][2].any())
    (True, False)
    """
    random_graph = (rng.random((T, T)) < p_edge) | np.eye(T, dtype=bool)  # random edges + self loops
    isolated = random_graph.copy()
    isolated[2] = False  # node 2 receives no message
    return {
        "complete": topology_mask("complete", T),
        "causal": topology_mask("causal", T),
        "banded, w = 1": banded_mask(T, 1),
        "random + self loops": random_graph,
        "node 2 isolated": isolated,
    }


def _scaled_dot(q_dst: np.ndarray, k_src: np.ndarray) -> np.ndarray:
    return (q_dst * k_src).sum(axis=-1) * att.resolve_scale(q_dst.shape[-1])  # (E,)


def message_passing(q: Array, k: Array, v: Array, mask: Array,
                    score: Optional[Callable[[np.ndarray, np.ndarray], np.ndarray]] = None
                    ) -> tuple[np.ndarray, np.ndarray]:
    r"""One GNN-style round, written edge by edge: per-edge scores, softmax per in-neighbourhood, sum.

    .. math::

        e_{ij} = \frac{q_i \cdot k_j}{\sqrt{d_k}}, \quad
        \alpha_{ij} = \operatorname{softmax}_{j \in N(i)}(e_{ij}), \quad
        h_i' = \sum_{j \in N(i)} \alpha_{ij} v_j

    Parameters
    ----------
    q, k, v : arrays, shapes (T, d_k), (S, d_k), (S, d_v)
    mask : bool array, shape (T, S)
        ``True`` = edge j -> i. Nodes without in-edges get output 0.
    score : callable, optional
        ``score(q_dst, k_src) -> e`` on edge-aligned arrays ``(E, d_k) -> (E,)``.

    Returns
    -------
    output : numpy.ndarray, shape (T, d_v)
    alpha : numpy.ndarray, shape (T, S), 0 off the edge set

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = rng.normal(size=(4, 3)), rng.normal(size=(4, 3)), rng.normal(size=(4, 2))
    >>> out, alpha = message_passing(q, k, v, banded_mask(4, 1))
    >>> out.shape, alpha.sum(axis=1).round(6).tolist()
    ((4, 2), [1.0, 1.0, 1.0, 1.0])
    """
    q, k, v, mask = (to_numpy(t) for t in (q, k, v, mask))
    two_d = q.ndim == k.ndim == v.ndim == 2
    if not two_d or k.shape[1] != q.shape[1] or v.shape[0] != k.shape[0]:
        raise ShapeError(f"q {q.shape}, k {k.shape}, v {v.shape}; expected q (T, d_k), k (S, d_k), v (S, d_v)")
    T, S = q.shape[0], k.shape[0]
    if mask.shape != (T, S) or mask.dtype != np.bool_:
        raise ShapeError(f"mask has shape {mask.shape} and dtype {mask.dtype}; expected bool ({T}, {S})")
    score = _scaled_dot if score is None else score
    dst, src = np.nonzero(mask)  # edge j=src -> i=dst, (E,) each
    e = score(q[dst], k[src])  # $e_{ij}$   (E,)
    e_max = np.full(T, -np.inf)
    np.maximum.at(e_max, dst, e)  # max over each in-neighbourhood, (T,)
    w = np.exp(e - e_max[dst])  # (E,)
    z = np.zeros(T)
    np.add.at(z, dst, w)  # softmax denominators, (T,)
    alpha = w / z[dst]  # $\alpha_{ij}$, sums to 1 over N(i)   (E,)
    messages = alpha[:, None] * v[src]  # $m_{ij} = \alpha_{ij} v_j$   (E, d_v)
    out = np.zeros((T, v.shape[1]))
    np.add.at(out, dst, messages)  # $h_i' = \sum_{j \in N(i)} m_{ij}$   (T, d_v)
    A = np.zeros((T, S))
    A[dst, src] = alpha  # (T, S)
    return out, A


def message_passing_gap(q: Array, k: Array, v: Array, mask: Array) -> float:
    """Largest difference, outputs and weights, between :func:`message_passing` and matrix attention.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = rng.normal(size=(5, 3)), rng.normal(size=(5, 3)), rng.normal(size=(5, 2))
    >>> message_passing_gap(q, k, v, banded_mask(5, 1)) < 1e-15
    True
    """
    out_mp, alpha = message_passing(q, k, v, mask)  # edge by edge, (T, d_v), (T, S)
    out_att, w = att.scaled_dot_product_attention(to_numpy(q), to_numpy(k), to_numpy(v),
                                                  mask=to_numpy(mask))  # matrix form
    return float(max(np.abs(out_mp - out_att).max(), np.abs(alpha - w).max()))


def receptive_field(mask: Array, n_layers: int, skip: bool = False) -> np.ndarray:
    r"""Which inputs each node depends on after ``n_layers`` rounds: (T, T) bool, ``R[i, j]``.

    .. math:: R^{(L)} = \operatorname{supp}\big((A + I)^L\big), \qquad R^{(0)} = I.

    One exception: without ``skip``, a node with a single in-neighbour ``j != i`` gets weight 1
    whatever its query, so it does not depend on itself (and one with none depends on nothing).

    Examples
    --------
    >>> receptive_field(banded_mask(5, 1), 2)[0].astype(int)
    array([1, 1, 1, 0, 0])
    """
    M = _square("mask", mask) != 0
    if int(n_layers) != n_layers or n_layers < 0:
        raise ValueError(f"n_layers={n_layers!r}; expected an integer >= 0")
    T = len(M)
    self_dep = np.ones(T, bool) if skip else M.sum(axis=1) >= 2  # query (or skip) matters
    step = (M | np.diag(self_dep)).astype(np.int64)  # A + I, (T, T)
    R = np.eye(T, dtype=np.int64)
    for _ in range(int(n_layers)):
        R = ((step @ R) > 0).astype(np.int64)  # boolean product, (T, T)
    return R > 0


def dependency_support(x: Array, params: list[dict], mask: Optional[Array] = None, **stack_kw: bool) -> np.ndarray:
    """Jacobian sparsity of an attention stack: ``D[i, j]`` = output i moves with input j, (T, T) bool.

    ``x`` is (T, d_model); ``params`` and ``**stack_kw`` (``skip``, ``mlp``, ``layernorm``) go to
    :func:`~attention_course.chapters.graphs.collapse.attention_stack`. The Jacobian is taken in float64.

    Examples
    --------
    >>> from attention_course.chapters.graphs.collapse import init_stack_params
    >>> x = np.random.default_rng(0).normal(size=(5, 3))
    >>> dependency_support(x, init_stack_params(3, 2, seed=1), banded_mask(5, 1))[0].astype(int)
    array([1, 1, 1, 0, 0])
    """
    x_t = torch.as_tensor(to_numpy(x)).double()
    J = torch.autograd.functional.jacobian(lambda z: attention_stack(z, params, mask, **stack_kw)[-1], x_t)  # (T,d,T,d)
    return to_numpy(J.abs().amax(dim=(1, 3)) > 0)  # (T, T)


def band_width(support: Array) -> int:
    """Largest ``|i - j|`` over the ``True`` entries of a (T, T) dependency matrix (-1 if none).

    Examples
    --------
    >>> band_width(receptive_field(banded_mask(10, 2), 3))
    6
    """
    S = _square("support", support) != 0
    i, j = np.nonzero(S)  # (E,) each
    return int(np.abs(i - j).max()) if i.size else -1


def banded_stack_reach(T: int = 16, window: int = 2, d_model: int = 4, max_layers: int = 4,
                       x_seed: int = 1, w_seed: int = 2) -> list[np.ndarray]:
    r"""Measured dependency matrices of random stacks of 1..``max_layers`` banded attention layers.

    Entry ``L - 1`` is :func:`dependency_support` of the first ``L`` layers, (T, T) bool, which
    should be the support of :math:`(A + I)^L` (:func:`receptive_field`). Chapter 5's seeds.

    Examples
    --------
    >>> [band_width(D) for D in banded_stack_reach(T=8, window=1, max_layers=3)]
    [1, 2, 3]
    """
    if not 1 <= window < T or max_layers < 1:
        raise ValueError(f"window={window}, T={T}, max_layers={max_layers}: need 1 <= window < T and max_layers >= 1")
    band = banded_mask(T, window)  # (T, T)
    x = np.random.default_rng(x_seed).normal(size=(T, d_model))  # (T, d_model)
    params = init_stack_params(d_model, max_layers, seed=w_seed)
    return [dependency_support(x, params[:L], band) for L in range(1, max_layers + 1)]  # (T, T) bool each


def hops_flip(summary: dict, layers: list[int], hops: int = 2, threshold: float = 0.9) -> Optional[int]:
    """Index in ``layers`` of the fewest layers at which every seed reaches ``threshold`` on ``hops``.

    ``summary`` maps ``(k, L)`` to ``{"mean", "min", "max"}`` over seeds (from
    :func:`attention_course.chapters.graphs.composition.summarise`); missing pairs never count.

    Examples
    --------
    >>> s = {(2, 1): {"mean": 0.5, "min": 0.4, "max": 0.6}, (2, 2): {"mean": 0.99, "min": 0.98, "max": 1.0}}
    >>> hops_flip(s, [1, 2, 3])
    1
    """
    ok = [i for i, L in enumerate(layers) if (hops, L) in summary and summary[hops, L]["min"] >= threshold]
    return ok[0] if ok else None
