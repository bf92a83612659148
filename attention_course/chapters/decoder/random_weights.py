"""Small random float64 decoders: the smallest sizes that show every typical mistake (4 query heads over
2 key/value heads, ``d_head = 4``, RMSNorm gains away from 1), and the start of a model trained from scratch.
"""

from __future__ import annotations

import torch

from ...models.smollm2 import DecoderConfig, DecoderLayer, DecoderWeights

__all__ = ["random_layer", "random_decoder"]

#: A tiny decoder: vocabulary 20, d = 16, 2 layers, 4 query heads over 2 key/value heads, d_ff = 24.
TINY_DECODER = DecoderConfig(vocab_size=20, d_model=16, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=24,
                             rope_base=100.0, eps=1e-5)


def _randn(g: torch.Generator, *shape: int, std: float, dtype: torch.dtype) -> torch.Tensor:
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype) * std  # (*shape)


def random_layer(g: torch.Generator, cfg: DecoderConfig, dtype: torch.dtype = torch.float64,
                 gain_std: float = 0.3) -> DecoderLayer:
    """One decoder layer with weights N(0, 1/fan_in) and RMSNorm gains ``1 + N(0, gain_std)``.

    Examples
    --------
    >>> layer = random_layer(torch.Generator().manual_seed(0), TINY_DECODER)
    >>> tuple(layer.W_k.shape), tuple(layer.W_down.shape)
    ((16, 8), (24, 16))
    """
    d, hd, kd, f = cfg.d_model, cfg.n_heads * cfg.d_head, cfg.n_kv_heads * cfg.d_head, cfg.d_ff
    return DecoderLayer(
        attn_norm=1 + _randn(g, d, std=gain_std, dtype=dtype), W_q=_randn(g, d, hd, std=d**-0.5, dtype=dtype),
        W_k=_randn(g, d, kd, std=d**-0.5, dtype=dtype), W_v=_randn(g, d, kd, std=d**-0.5, dtype=dtype),
        W_o=_randn(g, hd, d, std=hd**-0.5, dtype=dtype), mlp_norm=1 + _randn(g, d, std=gain_std, dtype=dtype),
        W_gate=_randn(g, d, f, std=d**-0.5, dtype=dtype), W_up=_randn(g, d, f, std=d**-0.5, dtype=dtype),
        W_down=_randn(g, f, d, std=f**-0.5, dtype=dtype))


def random_decoder(seed: int, cfg: DecoderConfig = TINY_DECODER, dtype: torch.dtype = torch.float64,
                   gain_std: float = 0.3, embed_std: float = 1.0) -> DecoderWeights:
    """A random decoder of shape ``cfg`` (float64 by default), seeded.

    Examples
    --------
    >>> w = random_decoder(0)
    >>> len(w.layers), tuple(w.embed.shape), w.embed.dtype
    (2, (20, 16), torch.float64)
    """
    g = torch.Generator().manual_seed(seed)
    return DecoderWeights(cfg, _randn(g, cfg.vocab_size, cfg.d_model, std=embed_std, dtype=dtype),
                          [random_layer(g, cfg, dtype, gain_std) for _ in range(cfg.n_layers)],
                          1 + _randn(g, cfg.d_model, std=gain_std, dtype=dtype))
