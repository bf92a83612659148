r"""Attention rollout and attention flow (Abnar & Zuidema 2020): tracing inputs through layers.

A stack of attention layers is a layered graph: node ``j`` at layer ``l-1``
sends to node ``i`` at layer ``l`` with weight :math:`A_\ell[i, j]`. The skip
connection keeps half of each token where it is, so each layer is modelled as

.. math::

    \hat A_\ell = \operatorname{rownorm}\big(\tfrac12 A_\ell + \tfrac12 I\big)

(rows sum to 1; heads are averaged first). *Rollout* multiplies these maps
(the total weight of all paths from input ``j`` to output ``i``); *flow* treats
them as capacities and computes a maximum flow (or the widest single path).
Both take numpy arrays (torch inputs are converted) and return numpy arrays.
"""

from __future__ import annotations

import numpy as np

from ..core._backend import Array, ShapeError, to_numpy

__all__ = ["attention_rollout", "attention_flow"]


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


