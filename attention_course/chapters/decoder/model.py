r"""The whole decoder: embeddings, the blocks, a final RMSNorm and the tied output head, with a key/value cache.

.. math::

    h_0 = E[x], \qquad h_\ell = \operatorname{Block}_\ell(h_{\ell-1}), \qquad
    z = \operatorname{RMSNorm}(h_L)\, E^\top

The cache is one tensor ``(L, 2, B, h_kv, S, d_head)``: each layer's rotated keys (index 0) and values
(index 1) of the ``S`` positions seen so far.
"""

from __future__ import annotations

from typing import Callable, Optional

import torch

from ...core._backend import ShapeError, shape_str
from ...models.smollm2 import DecoderConfig, DecoderWeights
from .block import block_with_cache, decoder_block
from .rms_norm import rms_norm

__all__ = ["empty_cache", "forward", "hidden_states", "output_logits"]


def empty_cache(config: DecoderConfig, batch: int = 1, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A cache holding no positions: shape ``(L, 2, B, h_kv, 0, d_head)``.

    Examples
    --------
    >>> from attention_course.models.smollm2 import DecoderConfig
    >>> tuple(empty_cache(DecoderConfig(), batch=2).shape)
    (30, 2, 2, 3, 0, 64)
    """
    return torch.zeros(config.n_layers, 2, batch, config.n_kv_heads, 0, config.d_head, dtype=dtype)


def output_logits(weights: DecoderWeights, h: torch.Tensor) -> torch.Tensor:
    """The final RMSNorm and the tied head: (..., d) -> (..., V)."""
    return rms_norm(h, weights.final_norm, weights.config.eps) @ weights.embed.T  # (..., V)


def forward(weights: DecoderWeights, ids: torch.Tensor, cache: Optional[torch.Tensor] = None):
    """Logits of the new tokens and the extended cache: ``(logits (B, T, V), cache (L, 2, B, h_kv, S + T, d_head))``.

    ``ids`` (B, T) are the new tokens, at positions ``S, ..., S + T - 1`` after the ``S`` cached ones.

    Examples
    --------
    >>> from attention_course.chapters.decoder.random_weights import random_decoder
    >>> w = random_decoder(0)
    >>> ids = torch.tensor([[3, 1, 4, 1, 5]])
    >>> full, _ = forward(w, ids)
    >>> first, cache = forward(w, ids[:, :3])             # a prefix, then the rest from the cache
    >>> rest, cache = forward(w, ids[:, 3:], cache)
    >>> tuple(cache.shape), torch.allclose(rest, full[:, 3:])
    ((2, 2, 1, 2, 5, 4), True)
    """
    cfg = weights.config
    B, T = ids.shape
    if cache is None:
        cache = empty_cache(cfg, B, weights.embed.dtype)
    if cache.ndim != 6 or cache.shape[:4] != (cfg.n_layers, 2, B, cfg.n_kv_heads) or cache.shape[5] != cfg.d_head:
        raise ShapeError(f"cache has shape {shape_str(cache)}; expected (L, 2, B, h_kv, S, d_head) = "
                         f"({cfg.n_layers}, 2, {B}, {cfg.n_kv_heads}, S, {cfg.d_head})")
    S0 = cache.shape[4]
    positions = torch.arange(S0, S0 + T)  # (T,): the new tokens follow the cached ones
    x = weights.embed[ids]  # (B, T, d)
    keys, values = [], []
    for layer, past in zip(weights.layers, cache):
        x, k, v = block_with_cache(x, layer, cfg, positions, past[0], past[1])
        keys.append(k), values.append(v)
    new_cache = torch.stack([torch.stack(keys), torch.stack(values)], dim=1)  # (L, 2, B, h_kv, S0 + T, d_head)
    return output_logits(weights, x), new_cache


def hidden_states(weights: DecoderWeights, ids: torch.Tensor,
                  block: Callable = decoder_block) -> torch.Tensor:
    """Every layer's output (before the final norm) by ``block``, the embeddings first: ``(L+1, B, T, d)``."""
    x = weights.embed[ids]  # (B, T, d)
    positions = torch.arange(ids.shape[1])  # (T,)
    states = [x]
    for layer in weights.layers:
        x = block(x, layer, weights.config, positions)  # (B, T, d)
        states.append(x)
    return torch.stack(states)  # (L+1, B, T, d)
