r"""One encoder layer: attention and feed-forward, each inside a residual connection with a LayerNorm.

BERT (and MiniLM) normalise after the residual, *post-LN*; GPT-2 and most later models normalise the
branch's input, *pre-LN*, so their residual stream grows with depth (``norm`` of :func:`block`):

.. math::

    \text{post: } a = \operatorname{LN}_1\big(x + \operatorname{MHA}(x)\big),\;
    y = \operatorname{LN}_2\big(a + \operatorname{FFN}(a)\big); \qquad
    \text{pre: } a = x + \operatorname{MHA}\big(\operatorname{LN}_1(x)\big),\;
    y = a + \operatorname{FFN}\big(\operatorname{LN}_2(a)\big).
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import torch

from ...models.encoder import BertLayerWeights
from .feed_forward import feed_forward
from .layer_norm import layer_norm
from .random_weights import random_layer
from .self_attention import self_attention

__all__ = ["block", "stream_size"]


def block(x: torch.Tensor, layer: BertLayerWeights, num_heads: int, mask: Optional[torch.Tensor] = None,
          eps: float = 1e-12, *, norm: str = "post", approximate: str = "none") -> torch.Tensor:
    r"""One transformer layer, post-LN (BERT, the default) or pre-LN (``norm="pre"``).

    Parameters
    ----------
    x : torch.Tensor, shape (B, T, d)
    layer : BertLayerWeights
    num_heads : int
    mask : bool tensor broadcastable to (B, h, T, T), optional
        ``True`` = may attend: a padding mask (B, 1, 1, T) or a causal mask (T, T).
    eps : float
        The LayerNorms' epsilon (MiniLM: 1e-12).
    norm : ``"post"`` or ``"pre"``
    approximate : ``"none"`` (exact GELU, BERT) or ``"tanh"``, passed to :func:`~.feed_forward.feed_forward`

    Returns
    -------
    torch.Tensor, shape (B, T, d)

    Examples
    --------
    >>> g = torch.Generator().manual_seed(0)
    >>> r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)
    >>> layer = BertLayerWeights(*[r(4, 4) for _ in range(4)], *[r(4) for _ in range(4)],
    ...                          torch.ones(4), torch.zeros(4), r(4, 8), r(8), r(8, 4), r(4),
    ...                          torch.ones(4), torch.zeros(4))
    >>> y = block(r(2, 3, 4), layer, num_heads=2)
    >>> tuple(y.shape), round(float(y.mean(-1).abs().max()), 12)   # post-LN: every token has mean 0
    ((2, 3, 4), 0.0)
    """
    if norm == "post":
        a = layer_norm(x + self_attention(x, layer, num_heads, mask)[0], layer.ln1_weight, layer.ln1_bias, eps)
        return layer_norm(a + feed_forward(a, layer, approximate), layer.ln2_weight, layer.ln2_bias, eps)  # (B, T, d)
    if norm == "pre":
        a = x + self_attention(layer_norm(x, layer.ln1_weight, layer.ln1_bias, eps), layer, num_heads, mask)[0]
        return a + feed_forward(layer_norm(a, layer.ln2_weight, layer.ln2_bias, eps), layer, approximate)  # (B, T, d)
    raise ValueError(f"norm={norm!r}; expected 'post' (BERT: normalise after the residual) or 'pre'")


def stream_size(norm: str, n_layers: int = 12, d: int = 64, num_heads: int = 4, T: int = 16,
                seed: int = 0) -> np.ndarray:
    r"""The size of the residual stream through a stack of random layers: rms of :math:`H_\ell`, shape (L+1,).

    For a random input of rms 1 and after each of ``n_layers`` random float64 layers, post-LN or pre-LN.

    Examples
    --------
    >>> post, pre = stream_size("post", n_layers=4), stream_size("pre", n_layers=4)
    >>> bool(np.ptp(post[1:]) < 0.2), bool(pre[-1] > 2 * pre[0])
    (True, True)
    """
    g = torch.Generator().manual_seed(int(seed))
    x = torch.randn(1, T, d, generator=g, dtype=torch.float64)  # (1, T, d), rms about 1
    sizes = [float(x.pow(2).mean().sqrt())]
    for _ in range(n_layers):
        x = block(x, random_layer(g, d, 4 * d), num_heads, None, 1e-12, norm=norm)  # (1, T, d)
        sizes.append(float(x.pow(2).mean().sqrt()))
    return np.array(sizes)
