r"""The whole encoder, assembled from the chapter's parts: embeddings, then L post-LN layers.

.. math::

    H_0 = \operatorname{Embed}(x), \qquad
    H_\ell = \operatorname{Block}_\ell(H_{\ell - 1}), \quad \ell = 1, \dots, L

:func:`encode` returns every :math:`H_\ell` stacked, embeddings first, the layout of
``transformers``' ``output_hidden_states`` (as one tensor). It is the same computation as
:func:`~attention_course.models.encoder.bert_encode`, written from this chapter's steps
(:func:`~.embeddings.embeddings`, :func:`~.block.block`), and the tests hold both to
``transformers.BertModel``.
"""

from __future__ import annotations

from typing import Optional

import torch

from ...core._backend import ShapeError, shape_str
from ...models.encoder import BertWeights
from .block import block
from .embeddings import embeddings
from .self_attention import key_mask

__all__ = ["encode"]


def encode(weights: BertWeights, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
           token_type_ids: Optional[torch.Tensor] = None, *, norm: str = "post",
           approximate: str = "none") -> torch.Tensor:
    """Every layer's hidden states, embeddings first: shape (L+1, B, T, d).

    Parameters
    ----------
    weights : BertWeights
        E.g. :func:`~attention_course.models.pretrained.minilm_weights` (float32) or its ``.to(torch.float64)``.
    input_ids : LongTensor, shape (B, T)
    attention_mask : tensor, shape (B, T), optional
        1 = real token, 0 = padding (what the tokenizer returns with ``padding=True``). Only keys
        are masked: padded positions still get (meaningless) states, as in ``transformers``.
    token_type_ids : LongTensor, shape (B, T), optional
        Default 0.
    norm : ``"post"`` (BERT) or ``"pre"``
        The block order (see :mod:`.block`); MiniLM's weights need ``"post"``.
    approximate : ``"none"`` (exact GELU) or ``"tanh"``
        The GELU of the feed-forward blocks; MiniLM's weights need ``"none"``.

    Examples
    --------
    >>> g = torch.Generator().manual_seed(0)
    >>> r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)
    >>> from attention_course.models.encoder import BertLayerWeights, bert_encode
    >>> layer = BertLayerWeights(*[r(4, 4) for _ in range(4)], *[r(4) for _ in range(6)],
    ...                          r(4, 8), r(8), r(8, 4), r(4), r(4), r(4))
    >>> w = BertWeights(r(10, 4), r(16, 4), r(2, 4), r(4), r(4), (layer, layer), 2, 1e-12)
    >>> ids, mask = torch.tensor([[1, 2, 3], [4, 5, 0]]), torch.tensor([[1, 1, 1], [1, 1, 0]])
    >>> h = encode(w, ids, mask)
    >>> tuple(h.shape), torch.allclose(h, torch.stack(bert_encode(w, ids, mask).hidden_states))
    ((3, 2, 3, 4), True)
    """
    if attention_mask is not None and tuple(attention_mask.shape) != tuple(input_ids.shape):
        raise ShapeError(f"attention_mask has shape {shape_str(attention_mask)} but input_ids has shape "
                         f"{shape_str(input_ids)}; expected the same (B, T)")
    mask = None if attention_mask is None else key_mask(attention_mask)  # (B, 1, 1, T): real keys only
    x = embeddings(weights, input_ids, token_type_ids)  # (B, T, d)
    hidden = [x]
    for layer in weights.layers:
        x = block(x, layer, weights.num_heads, mask, weights.layer_norm_eps, norm=norm,
                  approximate=approximate)  # (B, T, d)
        hidden.append(x)
    return torch.stack(hidden)  # (L+1, B, T, d)
