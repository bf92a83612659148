r"""BERT's self-attention: the multi-head attention of chapter 4, with the biases MiniLM's projections have.

.. math::

    q = x W_Q + b_Q, \quad k = x W_K + b_K, \quad v = x W_V + b_V, \qquad
    \operatorname{head}_i = \operatorname{softmax}\!\left(\frac{q_i k_i^\top}{\sqrt{d_k}} + M\right) v_i, \qquad
    \operatorname{out} = \operatorname{Concat}_i(\operatorname{head}_i)\, W_O + b_O

with ``d_k = d / h`` (MiniLM: 384 / 12 = 32) and head ``i`` owning the features
``i*d_k:(i+1)*d_k``. This module adds no second implementation: it hands the layer's
weights to :func:`~attention_course.core.multihead.multi_head_attention`.

Mask convention (the package's): boolean, ``True`` = *may attend*, broadcastable to
``(B, h, T, S)``. A padding mask is ``(B, 1, 1, S)`` (:func:`key_mask`): every query of every
head may read the real tokens only; padded *queries* still get an output, as in
``transformers``. A causal mask is ``(T, T)`` or ``(1, 1, T, T)``. A query with no allowed key
gets weights 0.
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
        ``True`` = may attend (see the module docstring).

    Returns
    -------
    output : torch.Tensor, shape (B, T, d)
    weights : torch.Tensor, shape (B, h, T, T), each row sums to 1 over the keys

    Examples
    --------
    >>> g = torch.Generator().manual_seed(0)
    >>> r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)
    >>> layer = BertLayerWeights(*[r(4, 4) for _ in range(4)], *[r(4) for _ in range(6)],
    ...                          r(4, 8), r(8), r(8, 4), r(4), r(4), r(4))
    >>> out, w = self_attention(r(2, 3, 4), layer, num_heads=2, mask=key_mask(torch.tensor([[1, 1, 1], [1, 1, 0]])))
    >>> tuple(out.shape), tuple(w.shape), float(w[1, :, :, 2].abs().max())   # nobody reads the padding
    ((2, 3, 4), (2, 2, 3, 3), 0.0)
    """
    if mask is not None and mask.ndim < 4:
        mask = mask.reshape((1,) * (4 - mask.ndim) + tuple(mask.shape))  # (T, S) -> (1, 1, T, S)
    return multi_head_attention(x, x, layer.W_q, layer.W_k, layer.W_v, layer.W_o,
                                layer.b_q, layer.b_k, layer.b_v, layer.b_o,
                                num_heads=num_heads, mask=mask)  # (B, T, d), (B, h, T, T)
