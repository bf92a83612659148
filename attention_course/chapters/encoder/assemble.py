r"""The whole encoder from the chapter's parts: :math:`H_0 = \operatorname{Embed}(x)`,
:math:`H_\ell = \operatorname{Block}_\ell(H_{\ell - 1})`, stacked embeddings first (``transformers``'
``output_hidden_states`` as one tensor); the same computation as
:func:`~attention_course.models.encoder.bert_encode`.
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
    input_ids : LongTensor, shape (B, T)
    attention_mask : tensor, shape (B, T), optional
        1 = real token, 0 = padding. Only keys are masked: padded positions still get states, as in
        ``transformers``.
    token_type_ids : LongTensor, shape (B, T), optional
        Default 0.
    norm : ``"post"`` (BERT, MiniLM) or ``"pre"``
    approximate : ``"none"`` (exact GELU, MiniLM) or ``"tanh"``

    Examples
    --------
    >>> from attention_course.chapters.encoder.random_weights import random_bert
    >>> from attention_course.models.encoder import bert_encode
    >>> w = random_bert(0, d=4, d_ff=8, vocab=10, max_len=16)
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
