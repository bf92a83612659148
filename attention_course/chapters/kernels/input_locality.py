r"""Is a trained head a *local* average? Its weights against distances between the layer's inputs (chapter 2).

.. math::

    \rho_i = \operatorname{corr}_{\text{rank}}\bigl(A_{i\cdot},\; -\lVert h_i - h_{\cdot}\rVert\bigr)

depends only on the weights and the layer's input :math:`H`, so no gauge of the query-key space moves it.
The baseline is the query-blind weight: each key's mean weight over the head's queries.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ...core._backend import Array, ShapeError, shape_str, to_numpy
from ...models.encoder import bert_encode
from ...models.queries_keys import minilm_ids_and_weights
from .attention_kernel import rank_correlation

__all__ = ["minilm_hidden_attention", "input_locality_by_head"]


def input_distances(hidden: Array) -> np.ndarray:
    r"""Pairwise distances :math:`D_{ij} = \lVert h_i - h_j\rVert` between the rows of each hidden-state matrix.

    Parameters
    ----------
    hidden : array, shape (..., T, d)

    Returns
    -------
    ndarray, shape (..., T, T)

    Examples
    --------
    >>> input_distances(np.array([[0.0, 0.0], [3.0, 4.0]]))
    array([[0., 5.],
           [5., 0.]])
    """
    h = np.asarray(to_numpy(hidden), dtype=np.float64)
    if h.ndim < 2:
        raise ShapeError(f"hidden has shape {shape_str(h)}; expected (..., T, d)")
    diff = h[..., :, None, :] - h[..., None, :, :]  # (..., T, T, d)
    return np.sqrt((diff**2).sum(-1))  # (..., T, T)


def input_locality(weights: Array, hidden: Array) -> dict[str, np.ndarray]:
    r"""Median over queries of the rank correlation of each head's weights with nearness in the layer's input.

    .. math::

        \rho = \operatorname{median}_i \operatorname{corr}_{\text{rank}}\bigl(A_{i\cdot}, -D_{i\cdot}\bigr)

    Parameters
    ----------
    weights : array, shape (..., h, T, T)
    hidden : array, shape (..., T, d), the input of the layer, the same leading axes

    Returns
    -------
    dict of arrays, shape (..., h): ``rank_corr``, ``blind_rank_corr`` (query-blind weight)

    Examples
    --------
    A Gaussian kernel on the inputs is local: correlation 1.

    >>> h = np.random.default_rng(0).normal(size=(1, 6, 3))  # (layers, T, d)
    >>> D = input_distances(h)  # (1, 6, 6)
    >>> A = np.exp(-D**2); A /= A.sum(-1, keepdims=True)
    >>> input_locality(A[:, None], h)["rank_corr"].round(3)  # (layers, heads)
    array([[1.]])
    """
    w = np.asarray(to_numpy(weights), dtype=np.float64)
    h = np.asarray(to_numpy(hidden), dtype=np.float64)
    if w.ndim < 3 or h.ndim != w.ndim - 1 or w.shape[:-3] != h.shape[:-2] or w.shape[-1] != w.shape[-2] \
            or w.shape[-1] != h.shape[-2] or w.shape[-1] < 2:
        raise ShapeError(f"weights has shape {shape_str(w)} and hidden {shape_str(h)}; expected (..., h, T, T) "
                         f"and (..., T, d) with the same leading axes and T >= 2")
    near = -input_distances(h)[..., None, :, :]  # (..., 1, T, T) nearness, the same for every head
    near = np.broadcast_to(near, w.shape)  # (..., h, T, T)
    blind = np.broadcast_to(w.mean(-2, keepdims=True), w.shape)  # (..., h, T, T) one row for every query
    return {"rank_corr": np.median(rank_correlation(w, near), axis=-1),
            "blind_rank_corr": np.median(rank_correlation(blind, near), axis=-1)}


def minilm_hidden_attention(texts: Sequence[str], dtype: torch.dtype = torch.float64
                            ) -> list[tuple[np.ndarray, np.ndarray]]:
    """all-MiniLM-L6-v2's layer inputs (6, T, 384) and attention weights (6, 12, T, T) per text, float64.

    Each text runs alone, with ``[CLS]`` and ``[SEP]``, through :func:`~attention_course.models.encoder.bert_encode`.
    """
    ids, weights = minilm_ids_and_weights(texts)
    weights = weights.to(dtype)
    out = []
    for row in ids:
        enc = bert_encode(weights, torch.tensor([row], dtype=torch.long))  # hidden: 7 x (1, T, 384)
        hidden = torch.stack([x[0] for x in enc.hidden_states[:-1]])  # (6, T, 384): each layer's input
        attn = torch.stack([a[0] for a in enc.attentions])  # (6, 12, T, T)
        out.append((hidden.double().numpy(), attn.double().numpy()))
    return out


def input_locality_by_head(runs: Sequence[tuple[Array, Array]]) -> dict[str, np.ndarray]:
    """:func:`input_locality` for each ``(hidden, weights)`` of :func:`minilm_hidden_attention`, stacked: (n_texts, ...).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> runs = [(rng.normal(size=(2, T, 4)), rng.dirichlet(np.ones(T), size=(2, 3, T))) for T in (5, 7)]
    >>> input_locality_by_head(runs)["rank_corr"].shape
    (2, 2, 3)
    """
    if len(runs) == 0:
        raise ValueError("runs is empty; expected at least one (hidden, weights)")
    per = [input_locality(w, h) for h, w in runs]
    return {m: np.stack([p[m] for p in per]) for m in ("rank_corr", "blind_rank_corr")}
