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

Functions take and return numpy arrays (torch inputs are converted), except
:func:`attention_stack`, which also runs on torch tensors so that autograd can
differentiate through it.
"""

from __future__ import annotations

import math
from typing import Callable, Optional

import numpy as np
import torch

from . import attention as att
from ._backend import Array, ShapeError, is_torch, shape_str, to_numpy

__all__ = [
    "attention_adjacency", "attention_edges", "topology_mask", "banded_mask",
    "message_passing", "receptive_field", "dependency_support",
    "attention_rollout", "attention_flow",
    "gcn_normalise", "gcn_layer", "gat_scores", "gatv2_scores", "gat_layer", "gatv2_layer",
    "dot_product_scores", "top_neighbour", "ranking_comparison",
    "init_stack_params", "attention_stack", "rank_one_residual", "rank_collapse",
]


# ------------------------------------------------------------ graphs and masks
def _square(name: str, m: Array, what: str = "(T, T)") -> np.ndarray:
    arr = to_numpy(m)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
        raise ShapeError(f"{name} has shape {tuple(arr.shape)}; expected a square matrix {what}")
    return arr


def attention_adjacency(weights: Array, threshold: float = 0.0) -> np.ndarray:
    """Weighted adjacency matrix of one attention map: ``A[i, j]`` = weight of j -> i.

    Parameters
    ----------
    weights : array, shape (T, T)
        Attention weights of one head (rows = receivers, sum to 1).
    threshold : float
        Edges with weight ``<= threshold`` are dropped (set to 0).

    Examples
    --------
    >>> import numpy as np
    >>> attention_adjacency(np.array([[0.9, 0.1], [0.5, 0.5]]), threshold=0.2)
    array([[0.9, 0. ],
           [0.5, 0.5]])
    """
    A = _square("weights", weights).astype(float)
    return np.where(A > threshold, A, 0.0)


def attention_edges(adjacency: Array) -> list[tuple[int, int, float]]:
    """Edge list ``(source j, target i, weight)`` of a weighted adjacency matrix.

    Examples
    --------
    >>> import numpy as np
    >>> attention_edges(np.array([[0.0, 1.0], [0.25, 0.75]]))
    [(1, 0, 1.0), (0, 1, 0.25), (1, 1, 0.75)]
    """
    A = _square("adjacency", adjacency).astype(float)
    dst, src = np.nonzero(A)  # one edge per non-zero entry, (E,)
    return [(int(j), int(i), float(A[i, j])) for i, j in zip(dst, src)]


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
def _scaled_dot(q_dst: np.ndarray, k_src: np.ndarray) -> np.ndarray:
    return (q_dst * k_src).sum(axis=-1) / math.sqrt(q_dst.shape[-1])  # (E,)


def message_passing(
    q: Array, k: Array, v: Array, mask: Array,
    score: Optional[Callable[[np.ndarray, np.ndarray], np.ndarray]] = None,
) -> tuple[np.ndarray, np.ndarray]:
    r"""One GNN-style round: per-edge scores, softmax per in-neighbourhood, sum of messages.

    Written edge by edge (as graph libraries do) rather than with a matrix
    product; with the default score it equals
    :func:`~attention_course.attention.scaled_dot_product_attention` with ``mask``.

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
    """Jacobian sparsity of :func:`attention_stack`: ``D[i, j]`` = output i moves with input j.

    Computes ``d out[i, :] / d x[j, :]`` with
    :func:`torch.autograd.functional.jacobian` (in ``x``'s dtype; use float64)
    and reports which blocks are non-zero. Compare with :func:`receptive_field`.

    Parameters
    ----------
    x : array, shape (T, d_model)
    params : list of dict
        From :func:`init_stack_params`.
    mask : bool array, shape (T, T), optional
    **stack_kw
        ``skip``, ``mlp``, ``layernorm`` for :func:`attention_stack`.

    Returns
    -------
    numpy.ndarray of bool, shape (T, T)

    Examples
    --------
    >>> x = np.random.default_rng(0).normal(size=(5, 3))
    >>> dependency_support(x, init_stack_params(3, 2, seed=1), banded_mask(5, 1))[0].astype(int)
    array([1, 1, 1, 0, 0])
    """
    x_t = torch.as_tensor(to_numpy(x)).double()
    J = torch.autograd.functional.jacobian(
        lambda z: attention_stack(z, params, mask, **stack_kw)[-1], x_t
    )  # (T, d, T, d)
    return to_numpy(J.abs().amax(dim=(1, 3)) > 0)  # (T, T)


# --------------------------------------------------------- rollout and flow
def _augmented(weights: Array) -> np.ndarray:
    """Per-layer ``(A + I)`` row-normalised (= 0.5 A + 0.5 I for stochastic A), (L, T, T)."""
    W = to_numpy(weights).astype(float)
    if W.ndim == 4:
        W = W.mean(axis=1)  # average the heads, (L, T, T)
    if W.ndim != 3 or W.shape[1] != W.shape[2]:
        raise ShapeError(
            f"weights has shape {tuple(W.shape)}; expected (L, T, T) or (L, h, T, T) "
            f"(one square attention map per layer)"
        )
    aug = 0.5 * W + 0.5 * np.eye(W.shape[1])  # residual: half the token stays put
    return aug / aug.sum(axis=-1, keepdims=True)  # rows sum to 1, (L, T, T)


def attention_rollout(weights: Array) -> np.ndarray:
    r"""Attention rollout (Abnar & Zuidema 2020): how much of input j reaches output i.

    .. math::

        \hat A_\ell = \operatorname{rownorm}\big(\tfrac12 A_\ell + \tfrac12 I\big), \qquad
        \tilde A = \hat A_L \hat A_{L-1} \cdots \hat A_1

    Parameters
    ----------
    weights : array, shape (L, T, T) or (L, h, T, T)
        Attention maps of layers 1..L (heads are averaged).

    Returns
    -------
    numpy.ndarray, shape (T, T)
        Rows sum to 1.

    Examples
    --------
    >>> A = np.array([[[0.0, 1.0], [0.0, 1.0]]] * 2)
    >>> attention_rollout(A)
    array([[0.25, 0.75],
           [0.  , 1.  ]])
    """
    aug = _augmented(weights)
    rollout = np.eye(aug.shape[1])
    for A_hat in aug:  # layer 1 first; later layers multiply on the left
        rollout = A_hat @ rollout  # (T, T)
    return rollout


def _max_flow(cap: np.ndarray, s: int, t: int, tol: float = 1e-12) -> float:
    """Edmonds-Karp: augment along shortest residual paths (level-by-level BFS)."""
    residual = cap.copy()
    total = 0.0
    while True:
        parent = np.full(len(cap), -1)
        parent[s] = s
        frontier = np.array([s])
        while frontier.size and parent[t] < 0:
            reach = (residual[frontier] > tol) & (parent < 0)[None, :]  # (F, n)
            new = np.flatnonzero(reach.any(axis=0))
            parent[new] = frontier[reach[:, new].argmax(axis=0)]  # first frontier parent
            frontier = new
        if parent[t] < 0:
            return total
        path = [t]
        while path[-1] != s:
            path.append(int(parent[path[-1]]))
        u, w = np.array(path[1:]), np.array(path[:-1])  # the path's edges u -> w
        push = residual[u, w].min()  # the bottleneck
        residual[u, w] -= push
        residual[w, u] += push  # reverse edges: later paths may undo this flow
        total += float(push)


def attention_flow(weights: Array, method: str = "maxflow") -> np.ndarray:
    r"""Attention flow (Abnar & Zuidema 2020) on the layered graph of :math:`\hat A_\ell`.

    Nodes are (layer, position); the edge from node ``j`` at layer ``l-1`` to
    node ``i`` at layer ``l`` has capacity :math:`\hat A_\ell[i, j]` (as in
    :func:`attention_rollout`). ``F[i, j]`` is the maximum flow from input ``j``
    (layer 0) to output ``i`` (layer L), by Edmonds-Karp: ``T**2`` flow problems,
    about 2 s for ``T=8, L=6`` on a laptop core, so keep ``T`` small.
    ``method="widest"`` instead gives the widest single path (its bottleneck
    capacity), a max-min matrix product over the layers:
    :math:`W_\ell[i, j] = \max_k \min(\hat A_\ell[i, k], W_{\ell-1}[k, j])`.

    Parameters
    ----------
    weights : array, shape (L, T, T) or (L, h, T, T)
    method : {"maxflow", "widest"}

    Returns
    -------
    numpy.ndarray, shape (T, T)
        Not normalised (a row can sum to more than 1: each entry is its own
        flow problem); ``widest <= maxflow <= 1``.

    Examples
    --------
    >>> A = np.array([[[0.0, 1.0], [0.0, 1.0]]] * 2)
    >>> attention_flow(A)
    array([[0.5, 1. ],
           [0. , 1. ]])
    >>> attention_flow(A, method="widest")
    array([[0.5, 0.5],
           [0. , 1. ]])
    """
    aug = _augmented(weights)
    L, T, _ = aug.shape
    if method == "widest":
        W = aug[0]
        for A_hat in aug[1:]:
            W = np.minimum(A_hat[:, :, None], W[None, :, :]).max(axis=1)  # (T, T)
        return W
    if method != "maxflow":
        raise ValueError(f"method={method!r}; expected 'maxflow' or 'widest'")
    cap = np.zeros(((L + 1) * T, (L + 1) * T))  # node (l, i) has index l*T + i
    for l, A_hat in enumerate(aug):
        cap[l * T:(l + 1) * T, (l + 1) * T:(l + 2) * T] = A_hat.T  # j at l -> i at l+1
    return np.array([[_max_flow(cap, j, L * T + i) for j in range(T)] for i in range(T)])


# ------------------------------------------------------------- GCN and GAT
def _leaky_relu(x: np.ndarray, slope: float) -> np.ndarray:
    return np.where(x > 0, x, slope * x)


def gcn_normalise(adjacency: Array) -> np.ndarray:
    r"""Kipf & Welling's fixed propagation matrix :math:`D^{-1/2}(A + I)D^{-1/2}`.

    ``A`` should not contain self loops (they are added); ``D`` holds the row
    sums (in-degrees) of ``A + I``.

    Examples
    --------
    >>> gcn_normalise(np.array([[0.0, 1.0], [1.0, 0.0]]))
    array([[0.5, 0.5],
           [0.5, 0.5]])
    """
    A = _square("adjacency", adjacency).astype(float) + np.eye(len(adjacency))  # (N, N)
    d_inv_sqrt = 1.0 / np.sqrt(A.sum(axis=1))  # (N,)
    return d_inv_sqrt[:, None] * A * d_inv_sqrt[None, :]  # (N, N)


def _check_features(x: np.ndarray, n: int, W: np.ndarray, rows: int) -> None:
    if x.ndim != 2 or x.shape[0] != n or W.ndim != 2 or W.shape[0] != rows:
        raise ShapeError(
            f"x has shape {x.shape}, W has shape {W.shape}, graph has {n} nodes; "
            f"expected x ({n}, d_in) and W ({rows}, d_out)"
        )


def gcn_layer(x: Array, adjacency: Array, W: Array) -> np.ndarray:
    """GCN layer without nonlinearity: ``gcn_normalise(A) @ x @ W``, shape (N, d_out).

    The weight of edge j -> i is ``1 / sqrt(d_i d_j)``: fixed by the graph, not by the data.

    Examples
    --------
    >>> gcn_layer(np.eye(2), np.array([[0.0, 1.0], [1.0, 0.0]]), np.ones((2, 1)))
    array([[1.],
           [1.]])
    """
    A_norm = gcn_normalise(adjacency)
    x, W = to_numpy(x), to_numpy(W)
    _check_features(x, len(A_norm), W, x.shape[-1])
    return A_norm @ (x @ W)  # (N, d_out)


def gat_scores(x: Array, W: Array, a: Array, negative_slope: float = 0.2) -> np.ndarray:
    r"""GAT scores (Velickovic 2018): :math:`e_{ij} = \mathrm{LeakyReLU}(a^\top [W h_i \| W h_j])`.

    ``x`` (N, d_in), ``W`` (d_in, d_out), ``a`` (2 d_out,); returns ``e`` (N, N).
    Since LeakyReLU is increasing, every row ranks the keys ``j`` by the same
    number :math:`a_2^\top W h_j`: the ranking is *static*.

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
        raise ShapeError(
            f"a has shape {a.shape} but W has shape {W.shape}; expected a ({2 * d_out},)"
        )
    h = x @ W  # (N, d_out)
    s_dst, s_src = h @ a[:d_out], h @ a[d_out:]  # (N,), (N,)
    return _leaky_relu(s_dst[:, None] + s_src[None, :], negative_slope)  # (N, N)


def gatv2_scores(x: Array, W: Array, a: Array, negative_slope: float = 0.2) -> np.ndarray:
    r"""GATv2 scores (Brody 2022): :math:`e_{ij} = a^\top \mathrm{LeakyReLU}(W [h_i \| h_j])`.

    ``x`` (N, d_in), ``W`` (2 d_in, d_out) acting on ``[h_i || h_j]``, ``a`` (d_out,);
    returns ``e`` (N, N). The nonlinearity sits *before* ``a``, so rankings can
    differ per query (*dynamic* attention).
    """
    x, W, a = to_numpy(x), to_numpy(W), to_numpy(a)
    d_in = x.shape[-1]
    _check_features(x, len(x), W, 2 * d_in)
    if a.shape != (W.shape[1],):
        raise ShapeError(
            f"a has shape {a.shape} but W has shape {W.shape}; expected a ({W.shape[1]},)"
        )
    u, w = x @ W[:d_in], x @ W[d_in:]  # the h_i and h_j halves, (N, d_out) each
    return _leaky_relu(u[:, None, :] + w[None, :, :], negative_slope) @ a  # (N, N)


def _masked_layer(e: np.ndarray, mask: Array, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mask = to_numpy(mask)
    if mask.shape != e.shape:
        raise ShapeError(
            f"mask has shape {mask.shape}; expected {e.shape} (one entry per node pair)"
        )
    alpha = att.softmax(e, axis=-1, mask=mask.astype(bool))  # (N, N), over in-neighbours
    return alpha @ values, alpha  # (N, d_out), (N, N)


def gat_layer(x: Array, W: Array, a: Array, mask: Array, negative_slope: float = 0.2):
    """GAT layer: ``softmax`` of :func:`gat_scores` over each in-neighbourhood, times ``x W``.

    Returns ``(output (N, d_out), alpha (N, N))``; ``mask`` ``True`` = edge j -> i
    (include self loops, as GAT does, by setting the diagonal).
    """
    return _masked_layer(gat_scores(x, W, a, negative_slope), mask, to_numpy(x) @ to_numpy(W))


def gatv2_layer(x: Array, W: Array, a: Array, mask: Array, negative_slope: float = 0.2):
    """GATv2 layer; messages are ``h_j W[d_in:]`` (the source half, as in PyG's GATv2Conv)."""
    x_np = to_numpy(x)
    values = x_np @ to_numpy(W)[x_np.shape[-1]:]  # (N, d_out)
    return _masked_layer(gatv2_scores(x, W, a, negative_slope), mask, values)


def dot_product_scores(x: Array, W_q: Array, W_k: Array) -> np.ndarray:
    r"""Transformer scores :math:`e_{ij} = (x_i W_q)\cdot(x_j W_k)/\sqrt{d_k}`, (N, N)."""
    x, W_q, W_k = to_numpy(x), to_numpy(W_q), to_numpy(W_k)
    q, k = x @ W_q, x @ W_k  # (N, d_k) each
    return q @ k.T / math.sqrt(q.shape[-1])  # (N, N)


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
    """Score matrices (N, N) of GAT, GATv2 and dot-product attention on one random complete graph.

    Random features and parameters (standard normal, seeded). Feed each to
    :func:`top_neighbour`: GAT's argmax key is the same for every query.

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


# --------------------------------------------------------- stacks and rank collapse
def init_stack_params(
    d_model: int, n_layers: int, *, seed: int, mlp: bool = False, d_ff: Optional[int] = None
) -> list[dict[str, np.ndarray]]:
    """Random weights for :func:`attention_stack`, entries N(0, 1/fan_in), float64.

    Each layer has ``W_q, W_k, W_v`` (d_model, d_model) and, with ``mlp``,
    ``W_1`` (d_model, d_ff) and ``W_2`` (d_ff, d_model), ``d_ff = 4 d_model``.
    """
    rng = np.random.default_rng(seed)
    d_ff = 4 * d_model if d_ff is None else d_ff

    def w(n_in: int, n_out: int) -> np.ndarray:
        return rng.normal(size=(n_in, n_out)) / math.sqrt(n_in)

    params = []
    for _ in range(n_layers):
        layer = {"W_q": w(d_model, d_model), "W_k": w(d_model, d_model), "W_v": w(d_model, d_model)}
        if mlp:
            layer.update(W_1=w(d_model, d_ff), W_2=w(d_ff, d_model))
        params.append(layer)
    return params


def _layer_norm(x: Array, eps: float = 1e-5) -> Array:
    mu = x.mean(axis=-1, keepdims=True)  # (T, 1)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)  # (T, 1)
    return (x - mu) / (var + eps) ** 0.5  # (T, d_model), no affine parameters


def attention_stack(
    x: Array, params: list[dict], mask: Optional[Array] = None, *,
    skip: bool = False, mlp: bool = False, layernorm: bool = False,
) -> list[Array]:
    r"""Run single-head self-attention layers; returns ``[x_0, x_1, ..., x_L]``.

    Pure attention (default): :math:`x_{\ell+1} = \operatorname{SA}(x_\ell)`. With
    ``skip``: :math:`x + \operatorname{SA}(x)`; ``mlp`` adds a ReLU MLP sublayer
    (with its own skip when ``skip``); ``layernorm`` applies LayerNorm (no affine)
    after each sublayer (post-LN). Works on numpy or torch ``x`` (T, d_model).

    Examples
    --------
    >>> x = np.random.default_rng(0).normal(size=(6, 8))
    >>> outs = attention_stack(x, init_stack_params(8, 3, seed=0), skip=True)
    >>> len(outs), outs[-1].shape
    (4, (6, 8))
    """
    if x.ndim != 2 or x.shape[-1] != params[0]["W_q"].shape[0]:
        raise ShapeError(
            f"x has shape {shape_str(x)}; "
            f"expected (T, {params[0]['W_q'].shape[0]}) for these params"
        )
    conv = (lambda p: torch.as_tensor(p, dtype=x.dtype)) if is_torch(x) else (lambda p: p)
    outs = [x]
    for layer in params:
        P = {name: conv(p) for name, p in layer.items()}
        q, k, v = x @ P["W_q"], x @ P["W_k"], x @ P["W_v"]  # (T, d_model) each
        h, _ = att.scaled_dot_product_attention(q, k, v, mask)  # (T, d_model)
        x = x + h if skip else h
        x = _layer_norm(x) if layernorm else x
        if mlp:
            u = x @ P["W_1"]  # (T, d_ff)
            f = (u * (u > 0)) @ P["W_2"]  # ReLU, (T, d_model)
            x = x + f if skip else f
            x = _layer_norm(x) if layernorm else x
        outs.append(x)
    return outs


def rank_one_residual(x: Array) -> float:
    r"""Relative distance to rank 1 (Dong et al. 2021), in the Frobenius norm.

    .. math::

        \operatorname{res}(X) = \frac{\min_x \|X - \mathbf 1 x^\top\|_F}{\|X\|_F}, \qquad
        \text{minimised by } x = \text{the mean row of } X.

    Examples
    --------
    >>> rank_one_residual(np.array([[1.0, 2.0], [1.0, 2.0]]))
    0.0
    """
    X = to_numpy(x).astype(float)
    if X.ndim != 2:
        raise ShapeError(f"x has shape {X.shape}; expected (T, d) tokens by features")
    return float(np.linalg.norm(X - X.mean(axis=0, keepdims=True)) / np.linalg.norm(X))


def rank_collapse(
    n_tokens: int = 16, d_model: int = 64, n_layers: int = 5, *, seed: int = 0,
    skip: bool = False, mlp: bool = False, layernorm: bool = False,
) -> np.ndarray:
    """Distance to rank 1 after each layer of a random stack, input first: (n_layers + 1,).

    Input tokens are standard normal; weights come from :func:`init_stack_params`
    (same ``seed``). Pure attention collapses doubly exponentially (Dong et al. 2021).

    Examples
    --------
    >>> rank_collapse(n_layers=5, seed=0).round(3).tolist()[:3]
    [0.965, 0.686, 0.029]
    >>> bool(rank_collapse(n_layers=5, seed=0)[-1] < 1e-12)
    True
    """
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n_tokens, d_model))
    params = init_stack_params(d_model, n_layers, seed=seed + 1, mlp=mlp)
    outs = attention_stack(x, params, skip=skip, mlp=mlp, layernorm=layernorm)
    return np.array([rank_one_residual(o) for o in outs])
