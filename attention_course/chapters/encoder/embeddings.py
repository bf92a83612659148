r"""BERT's input layer: word, learned position (from 0) and segment vectors, added and normalised.

.. math::

    H_0[b, t] = \operatorname{LN}\big(E_{\text{word}}[x_{bt}] + E_{\text{pos}}[t] + E_{\text{type}}[s_{bt}]\big)

The segment is 0 for a single sentence, but its vector is not zero.
"""

from __future__ import annotations

from typing import Optional

import torch

from ...core._backend import ShapeError, shape_str
from ...models.encoder import BertWeights
from .layer_norm import layer_norm

__all__ = ["embeddings"]


def embeddings(weights: BertWeights, input_ids: torch.Tensor,
               token_type_ids: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The encoder's input, ``LN(word + position + token type)``, shape (B, T, d).

    Parameters
    ----------
    weights : BertWeights
    input_ids : LongTensor, shape (B, T)
    token_type_ids : LongTensor, shape (B, T), optional
        Default 0 everywhere (one sentence per sequence).

    Examples
    --------
    >>> g = torch.Generator().manual_seed(0)
    >>> r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)
    >>> w = BertWeights(r(10, 4), r(16, 4), r(2, 4), torch.ones(4), torch.zeros(4), (), 2, 1e-12)
    >>> h = embeddings(w, torch.tensor([[1, 2, 3]]))
    >>> tuple(h.shape), round(float(h.var(-1, unbiased=False).mean()), 6)   # unit variance per token
    ((1, 3, 4), 1.0)
    """
    if input_ids.ndim != 2:
        raise ShapeError(f"input_ids has shape {shape_str(input_ids)}; expected (B, T)")
    B, T = input_ids.shape
    if T > weights.position_embeddings.shape[0]:
        raise ShapeError(f"input_ids has shape {shape_str(input_ids)}: T={T} is longer than the "
                         f"{weights.position_embeddings.shape[0]} learned positions")
    if token_type_ids is None:
        token_type_ids = torch.zeros_like(input_ids)  # (B, T): one segment
    elif tuple(token_type_ids.shape) != (B, T):
        raise ShapeError(f"token_type_ids has shape {shape_str(token_type_ids)} but input_ids has shape "
                         f"{shape_str(input_ids)}; expected ({B}, {T})")
    positions = torch.arange(T, device=input_ids.device)  # (T,) 0, 1, ..., T-1 in every sequence
    x = (weights.word_embeddings[input_ids]  # (B, T, d)
         + weights.position_embeddings[positions]  # (T, d), broadcast over the batch
         + weights.token_type_embeddings[token_type_ids])  # (B, T, d)
    return layer_norm(x, weights.ln_weight, weights.ln_bias, weights.layer_norm_eps)  # (B, T, d)
