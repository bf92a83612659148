"""Perturbed and batched runs of a BERT encoder: scrambled weights, attention maps of many texts.

:func:`scrambled_weights` is the untrained-model baseline of chapter 5: every layer matrix keeps
its own entries (so its scale) in a random order, so whatever training put where is lost.
:func:`encoder_maps` runs texts through :func:`attention_course.models.encoder.bert_encode` and
returns each text's token ids and attention maps, cut to its own length.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from .encoder import BertWeights, bert_encode

__all__ = ["scrambled_weights", "encoder_maps"]

_MATRICES = ("W_q", "W_k", "W_v", "W_o", "W_1", "W_2")


def scrambled_weights(weights: BertWeights, seed: int) -> BertWeights:
    """A copy of an encoder's weights with the entries of every layer matrix randomly permuted.

    Each matrix keeps its own values (so its scale and spectrum of sizes); what training put
    where is lost. Embeddings, biases and LayerNorm parameters are kept.

    Examples
    --------
    >>> from attention_course.models.encoder import BertLayerWeights
    >>> L = BertLayerWeights(*[torch.arange(4.0).reshape(2, 2)] * 4, *[torch.zeros(2)] * 6,
    ...                      torch.ones(2, 3), torch.zeros(3), torch.ones(3, 2), *[torch.zeros(2)] * 3)
    >>> W = BertWeights(torch.zeros(5, 2), torch.zeros(4, 2), torch.zeros(1, 2), torch.ones(2),
    ...                 torch.zeros(2), (L,), num_heads=1, layer_norm_eps=1e-12)
    >>> sorted(scrambled_weights(W, seed=0).layers[0].W_q.flatten().tolist())
    [0.0, 1.0, 2.0, 3.0]
    """
    g = torch.Generator().manual_seed(seed)

    def permute(t: torch.Tensor) -> torch.Tensor:
        return t.flatten()[torch.randperm(t.numel(), generator=g)].reshape(t.shape)

    layers = tuple(replace(L, **{k: permute(getattr(L, k)) for k in _MATRICES}) for L in weights.layers)
    return replace(weights, layers=layers)


def encoder_maps(weights: BertWeights, tokenizer: Any, texts: Sequence[str]) -> tuple[list[list[int]], list[np.ndarray]]:
    """Token ids and attention maps, each (L, H, n, n) float64, of ``texts`` through an encoder.

    Texts run as one padded batch; each map is cut to its own length (padding gets weight 0).
    """
    enc = tokenizer(list(texts), padding=True, return_tensors="pt")
    with torch.no_grad():
        out = bert_encode(weights, enc["input_ids"], enc["attention_mask"])
    A = torch.stack(out.attentions, dim=1).double().numpy()  # (B, L, H, T, T)
    lengths = enc["attention_mask"].sum(dim=1).tolist()
    ids = [enc["input_ids"][b, :n].tolist() for b, n in enumerate(lengths)]
    return ids, [A[b, :, :, :n, :n] for b, n in enumerate(lengths)]
