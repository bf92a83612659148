"""Small random float64 encoders, scaled so every typical mistake shows: weights N(0, 1/d), biases of
size 0.5, LayerNorm gains and shifts away from 1 and 0, feed-forward pre-activations reaching |z| = 2.7
(where the tanh GELU is furthest from the exact one).
"""

from __future__ import annotations

import torch

from ...models.encoder import BertLayerWeights, BertWeights

__all__ = ["random_layer"]


def _randn(g: torch.Generator, *shape: int, std: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=g, dtype=torch.float64) * std  # (*shape)


def random_layer(g: torch.Generator, d: int = 8, d_ff: int = 32) -> BertLayerWeights:
    """A float64 encoder layer with the module's scales.

    Examples
    --------
    >>> layer = random_layer(torch.Generator().manual_seed(0))
    >>> tuple(layer.W_1.shape), layer.b_q.dtype
    ((8, 32), torch.float64)
    """
    s = d**-0.5
    return BertLayerWeights(
        W_q=_randn(g, d, d, std=s), W_k=_randn(g, d, d, std=s), W_v=_randn(g, d, d, std=s),
        W_o=_randn(g, d, d, std=s), b_q=_randn(g, d, std=0.5), b_k=_randn(g, d, std=0.5),
        b_v=_randn(g, d, std=0.5), b_o=_randn(g, d, std=0.5),
        ln1_weight=1 + _randn(g, d, std=0.3), ln1_bias=_randn(g, d, std=0.3),
        W_1=_randn(g, d, d_ff, std=2.5 * s), b_1=_randn(g, d_ff, std=0.5),
        W_2=_randn(g, d_ff, d, std=2 * d_ff**-0.5), b_2=_randn(g, d, std=0.5),
        ln2_weight=1 + _randn(g, d, std=0.3), ln2_bias=_randn(g, d, std=0.3),
    )  # fmt: skip


def random_bert(seed: int, n_layers: int = 2, d: int = 8, num_heads: int = 2, d_ff: int = 32,
                vocab: int = 20, max_len: int = 24, eps: float = 1e-12) -> BertWeights:
    """A tiny float64 BERT (``max_len >= vocab``, so a table can be indexed by either).

    Examples
    --------
    >>> w = random_bert(0)
    >>> len(w.layers), tuple(w.word_embeddings.shape), w.num_heads
    (2, (20, 8), 2)
    """
    g = torch.Generator().manual_seed(seed)
    return BertWeights(
        word_embeddings=_randn(g, vocab, d), position_embeddings=_randn(g, max_len, d),
        token_type_embeddings=_randn(g, 2, d), ln_weight=1 + _randn(g, d, std=0.3),
        ln_bias=_randn(g, d, std=0.3), layers=tuple(random_layer(g, d, d_ff) for _ in range(n_layers)),
        num_heads=num_heads, layer_norm_eps=eps,
    )  # fmt: skip
