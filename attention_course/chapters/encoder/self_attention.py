r"""BERT's self-attention: chapter 4's multi-head attention with the biases MiniLM's projections have.

.. math::

    \operatorname{head}_i = \operatorname{softmax}\!\left(\frac{q_i k_i^\top}{\sqrt{d_k}} + M\right) v_i, \quad
    q = x W_Q + b_Q,\; k = x W_K + b_K,\; v = x W_V + b_V, \quad
    \operatorname{out} = \operatorname{Concat}_i(\operatorname{head}_i)\, W_O + b_O

Masks are boolean, ``True`` = may attend, broadcastable to ``(B, h, T, S)``: padding ``(B, 1, 1, S)``
(:func:`key_mask`; padded queries still get an output, as in ``transformers``) or causal ``(T, T)``.
"""

from __future__ import annotations

from typing import Optional

import torch

from ...core._backend import ShapeError, shape_str
from ...core.multihead import multi_head_attention
from ...models.encoder import BertLayerWeights

__all__ = ["self_attention"]


def key_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """A tokenizer's ``attention_mask`` (B, S), 1 = real token, as the mask ``(B, 1, 1, S)`` of the package.

    Examples
    --------
    >>> key_mask(torch.tensor([[1, 1, 0]])).shape, key_mask(torch.tensor([[1, 1, 0]])).flatten().tolist()
    (torch.Size([1, 1, 1, 3]), [True, True, False])
    """
    if attention_mask.ndim != 2:
        raise ShapeError(f"attention_mask has shape {shape_str(attention_mask)}; expected (B, S), "
                         f"1 for a real token and 0 for padding")
    return attention_mask.bool()[:, None, None, :]  # (B, 1, 1, S): the same keys for every head and query


def self_attention(x: torch.Tensor, layer: BertLayerWeights, num_heads: int,
                   mask: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Multi-head self-attention with biases: returns ``(output, weights)``.

    Parameters
    ----------
    x : torch.Tensor, shape (B, T, d)
    layer : BertLayerWeights
        Uses ``W_q, W_k, W_v, W_o`` (d, d) and ``b_q, b_k, b_v, b_o`` (d,), as ``x @ W + b``.
    num_heads : int
        ``h``; ``d_k = d / h``.
    mask : bool tensor broadcastable to (B, h, T, T), optional

    Returns
    -------
    output : torch.Tensor, shape (B, T, d)
    weights : torch.Tensor, shape (B, h, T, T), each row sums to 1 over the keys

    Examples
    --------
    >>> from attention_course.chapters.encoder.random_weights import random_layer
    >>> layer, x = random_layer(torch.Generator().manual_seed(0), 4, 8), torch.randn(2, 3, 4, dtype=torch.float64)
    >>> out, w = self_attention(x, layer, num_heads=2, mask=key_mask(torch.tensor([[1, 1, 1], [1, 1, 0]])))
    >>> tuple(out.shape), tuple(w.shape), float(w[1, :, :, 2].abs().max())   # nobody reads the padding
    ((2, 3, 4), (2, 2, 3, 3), 0.0)
    """
    if mask is not None and mask.ndim < 4:
        mask = mask.reshape((1,) * (4 - mask.ndim) + tuple(mask.shape))  # (T, S) -> (1, 1, T, S)
    return multi_head_attention(x, x, layer.W_q, layer.W_k, layer.W_v, layer.W_o,
                                layer.b_q, layer.b_k, layer.b_v, layer.b_o,
                                num_heads=num_heads, mask=mask)  # (B, T, d), (B, h, T, T)
