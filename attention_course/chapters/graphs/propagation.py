r"""Self-attention as message passing on a learned, weighted, directed graph.

Graph convention (used by every function here): the nodes are the positions
``0..T-1`` and

.. math::

    A_{ij} = \text{weight of the message from node } j \text{ to node } i,

so row ``i`` lists node ``i``'s *in*-neighbours. An attention weight matrix
(rows = queries = receivers, columns = keys = senders) is such an ``A``, and a
boolean mask (``True`` = may attend, the package convention) is its edge set:
the topology is fixed by the mask, the weights on it are computed from the data.

One layer of self-attention is one round of message passing,

.. math::

    m_{ij} = \alpha_{ij} v_j, \qquad
    \alpha_{ij} = \frac{\exp e(q_i, k_j)}{\sum_{j' \in N(i)} \exp e(q_i, k_{j'})}, \qquad
    h_i' = \sum_{j \in N(i)} m_{ij}.

A node with no in-neighbours receives nothing: its output and its row of
weights are 0 (the package's fully-masked-row rule).

Functions take and return numpy arrays (torch inputs are converted). Related
modules: :mod:`~attention_course.chapters.graphs.rollout` (tracing inputs through many layers),
:mod:`~attention_course.chapters.graphs.gnn` (GCN, GAT, GATv2) and :mod:`~attention_course.chapters.graphs.collapse`
(deep stacks and rank collapse).

Chapter 5's ``l-hops`` slider: :func:`banded_stack_reach` measures the reach of stacks of
banded layers, and :func:`hops_flip` finds the fewest layers that learn two hops on every seed
from a summary of the stored pointer-chasing runs.
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


def topology_mask(
    kind: str, T: int, window: Optional[int] = None, adjacency: Optional[Array] = None
) -> np.ndarray:
    """A graph topology as a boolean mask (``True`` = may attend, i.e. edge j -> i).

    Parameters
    ----------
    kind : {"complete", "causal", "banded", "causal-banded", "adjacency"}
        ``banded`` needs ``window``; ``adjacency`` uses ``adjacency != 0`` as it is
        (add self loops yourself if you want them; a row without edges is a
        fully masked query and gets weights and output 0).
    T : int
        Number of nodes.

    Returns
    -------
    numpy.ndarray of bool, shape (T, T)

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
    raise ValueError(
        f"kind={kind!r}; expected complete, causal, banded, causal-banded or adjacency"
    )


# ------------------------------------------------------------- message passing
def example_topologies(T: int, rng: np.random.Generator, p_edge: float = 0.3) -> dict[str, np.ndarray]:
    """Five graphs on ``T`` nodes, as boolean masks: the ones chapter 5 runs message passing on.

    ``complete``, ``causal``, ``banded, w = 1``, ``random + self loops`` (each edge
    j -> i with probability ``p_edge``, drawn from ``rng``, plus the diagonal) and
    ``node 2 isolated`` (the random graph with node 2's in-edges removed: a fully
    masked row).

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


def message_passing(
    q: Array, k: Array, v: Array, mask: Array,
    score: Optional[Callable[[np.ndarray, np.ndarray], np.ndarray]] = None,
) -> tuple[np.ndarray, np.ndarray]:
    r"""One GNN-style round: per-edge scores, softmax per in-neighbourhood, sum of messages.

    Written edge by edge (as graph libraries do) rather than with a matrix
    product; with the default score it equals
    :func:`~attention_course.core.attention.scaled_dot_product_attention` with ``mask``.

    .. math::

        e_{ij} = \frac{q_i \cdot k_j}{\sqrt{d_k}}, \quad
        \alpha_{ij} = \operatorname{softmax}_{j \in N(i)}(e_{ij}), \quad
        h_i' = \sum_{j \in N(i)} \alpha_{ij} v_j

    Parameters
    ----------
    q : array, shape (T, d_k)
    k : array, shape (S, d_k)
    v : array, shape (S, d_v)
    mask : bool array, shape (T, S)
        ``True`` = edge j -> i (may attend). Nodes without in-edges get output 0.
    score : callable, optional
        ``score(q_dst, k_src) -> e`` on edge-aligned arrays ``(E, d_k) -> (E,)``.

    Returns
    -------
    output : numpy.ndarray, shape (T, d_v)
    alpha : numpy.ndarray, shape (T, S)
        Edge weights as a dense adjacency matrix (0 off the edge set).

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
        raise ShapeError(
            f"q {q.shape}, k {k.shape}, v {v.shape}; expected q (T, d_k), k (S, d_k), v (S, d_v)"
        )
    T, S = q.shape[0], k.shape[0]
    if mask.shape != (T, S) or mask.dtype != np.bool_:
        raise ShapeError(
            f"mask has shape {mask.shape} and dtype {mask.dtype}; expected bool ({T}, {S})"
        )
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
    """Largest difference between edge-by-edge :func:`message_passing` and matrix attention.

    The maximum over the outputs (T, d_v) and the weights (T, S) of
    ``|message passing - scaled_dot_product_attention(q, k, v, mask)|``: float64
    round-off when one layer of attention is one round of message passing.

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
    r"""Which inputs each node depends on after ``n_layers`` rounds: support of (A+I)^L.

    Node ``i``'s output depends on its in-neighbours' inputs (keys and values)
    and on its own input (through its query, or through the skip connection),
    so one layer reaches the support of ``A + I`` and ``L`` layers reach the
    boolean matrix power

    .. math:: R^{(L)} = \operatorname{supp}\big((A + I)^L\big), \qquad R^{(0)} = I.

    One exception, handled exactly here: without ``skip``, a node with a single
    in-neighbour ``j != i`` gets weight 1 on it whatever its query, so it does
    *not* depend on itself (and a node with no in-neighbour outputs 0, which
    depends on nothing). Masks with a ``True`` diagonal (complete, causal,
    banded) never hit this case. Dependence means "generically non-zero
    Jacobian" (random weights; see :func:`dependency_support`).

    Parameters
    ----------
    mask : bool array, shape (T, T)
        The topology (``True`` = edge j -> i).
    n_layers : int, >= 0
    skip : bool
        Layers with a skip connection ``x + SA(x)``.

    Returns
    -------
    numpy.ndarray of bool, shape (T, T)
        ``R[i, j]`` = output ``i`` depends on input ``j``.

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


def dependency_support(
    x: Array, params: list[dict], mask: Optional[Array] = None, **stack_kw: bool
) -> np.ndarray:
    """Jacobian sparsity of a stack of attention layers: ``D[i, j]`` = output i moves with input j.

    Runs :func:`~attention_course.chapters.graphs.collapse.attention_stack`, computes
    ``d out[i, :] / d x[j, :]`` with :func:`torch.autograd.functional.jacobian`
    (in float64) and reports which blocks are non-zero. Masked weights are
    exactly 0 (scores of ``-inf``), so their gradients are exactly 0 too.
    Compare with :func:`receptive_field`.

    Parameters
    ----------
    x : array, shape (T, d_model)
    params : list of dict
        From :func:`~attention_course.chapters.graphs.collapse.init_stack_params`.
    mask : bool array, shape (T, T), optional
    **stack_kw
        ``skip``, ``mlp``, ``layernorm`` for :func:`~attention_course.chapters.graphs.collapse.attention_stack`.

    Returns
    -------
    numpy.ndarray of bool, shape (T, T)

    Examples
    --------
    >>> from attention_course.chapters.graphs.collapse import init_stack_params
    >>> x = np.random.default_rng(0).normal(size=(5, 3))
    >>> dependency_support(x, init_stack_params(3, 2, seed=1), banded_mask(5, 1))[0].astype(int)
    array([1, 1, 1, 0, 0])
    """
    x_t = torch.as_tensor(to_numpy(x)).double()
    J = torch.autograd.functional.jacobian(
        lambda z: attention_stack(z, params, mask, **stack_kw)[-1], x_t
    )  # (T, d, T, d)
    return to_numpy(J.abs().amax(dim=(1, 3)) > 0)  # (T, T)


def band_width(support: Array) -> int:
    """Largest ``|i - j|`` over the ``True`` entries of a (T, T) dependency matrix.

    For a banded receptive field this is its half-width: after ``L`` layers of a
    band of half-width ``w`` it is ``min(L * w, T - 1)``. ``-1`` if nothing is ``True``.

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

    Inputs :math:`x` (T, d_model) from ``default_rng(x_seed)``, weights
    :func:`~attention_course.chapters.graphs.collapse.init_stack_params` ``(d_model, max_layers, seed=w_seed)``
    (chapter 5's seeds 1 and 2); each layer may attend within ``|i - j| <= window``
    (:func:`banded_mask`). Entry ``L - 1`` is :func:`dependency_support` of the first ``L`` layers,
    (T, T) bool, which the closed form says is the support of :math:`(A + I)^L`
    (:func:`receptive_field`).

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

    ``summary`` maps ``(k, L)`` to ``{"mean", "min", "max"}`` over seeds (what
    :func:`attention_course.chapters.graphs.composition.summarise` returns); pairs not in it were not
    trained and never count.

    Examples
    --------
    >>> s = {(2, 1): {"mean": 0.5, "min": 0.4, "max": 0.6}, (2, 2): {"mean": 0.99, "min": 0.98, "max": 1.0}}
    >>> hops_flip(s, [1, 2, 3])
    1
    """
    ok = [i for i, L in enumerate(layers) if (hops, L) in summary and summary[hops, L]["min"] >= threshold]
    return ok[0] if ok else None
