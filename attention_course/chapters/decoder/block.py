r"""The pre-norm decoder block of Llama-style models: attention and SwiGLU, each behind an RMSNorm.

.. math::

    a = x + \operatorname{Attn}(\operatorname{RMSNorm}_1(x)), \qquad
    y = a + \operatorname{FFN}(\operatorname{RMSNorm}_2(a))

Attention rotates queries and keys with RoPE and shares each key/value head among a group of query heads.
"""

from __future__ import annotations

from typing import Optional

import torch

from ...models.smollm2 import DecoderConfig, DecoderLayer
from .grouped_attention import grouped_query_attention
from .rms_norm import rms_norm
from .rope import apply_rope
from .swiglu import swiglu

__all__ = ["attention", "decoder_block"]


def attention(x: torch.Tensor, layer: DecoderLayer, config: DecoderConfig, positions: torch.Tensor,
              past_k: Optional[torch.Tensor] = None, past_v: Optional[torch.Tensor] = None):
    """Causal grouped-query self-attention with RoPE: ``(output (B, T, d), k (B, h_kv, S, d_head), v)``.

    ``x`` (B, T, d) is already normalised; ``positions`` (T,) are the new tokens' positions;
    ``past_k``, ``past_v`` (B, h_kv, S0, d_head), the cache of earlier positions (their keys already
    rotated), are prepended, so ``S = S0 + T``.
    """
    B, T, _ = x.shape
    h, h_kv, dh = config.n_heads, config.n_kv_heads, config.d_head
    q = (x @ layer.W_q).view(B, T, h, dh).transpose(1, 2)  # (B, h, T, d_head)
    k = (x @ layer.W_k).view(B, T, h_kv, dh).transpose(1, 2)  # (B, h_kv, T, d_head)
    v = (x @ layer.W_v).view(B, T, h_kv, dh).transpose(1, 2)  # (B, h_kv, T, d_head)
    q, k = apply_rope(q, positions, config.rope_base), apply_rope(k, positions, config.rope_base)
    if past_k is not None and past_k.shape[2]:
        k, v = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)  # (B, h_kv, S, d_head)
    heads = grouped_query_attention(q, k, v)  # (B, h, T, d_head)
    out = heads.transpose(1, 2).reshape(B, T, h * dh) @ layer.W_o  # (B, T, d)
    return out, k, v


def block_with_cache(x, layer, config, positions, past_k=None, past_v=None):
    """:func:`decoder_block` with a cache: ``(y (B, T, d), k, v)``, the keys and values of all S positions."""
    out, k, v = attention(rms_norm(x, layer.attn_norm, config.eps), layer, config, positions, past_k, past_v)
    a = x + out  # (B, T, d)
    return a + swiglu(rms_norm(a, layer.mlp_norm, config.eps), layer), k, v


def decoder_block(x: torch.Tensor, layer: DecoderLayer, config: DecoderConfig, positions: torch.Tensor) -> torch.Tensor:
    """One pre-norm decoder layer: ``x`` (B, T, d) at ``positions`` (T,) -> (B, T, d).

    Examples
    --------
    >>> from attention_course.chapters.decoder.random_weights import random_decoder
    >>> w = random_decoder(0)
    >>> x = torch.randn(2, 5, 16, dtype=torch.float64)
    >>> tuple(decoder_block(x, w.layers[0], w.config, torch.arange(5)).shape)
    (2, 5, 16)
    """
    return block_with_cache(x, layer, config, positions)[0]
