"""Perturbed and batched runs of a BERT encoder: scrambled weights, attention maps of many texts.

:func:`scrambled_weights` is the untrained-model baseline; :func:`encoder_maps` returns each
text's token ids and attention maps, cut to its own length.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import fields, replace
from typing import Any

import numpy as np
import torch

from .encoder import BertWeights, bert_encode

__all__ = ["scrambled_weights", "encoder_maps"]

#: The layer matrices, the only tensors scrambled by default.
#: The layer matrices of each layout: the encoder's feed-forward W_1, W_2, the decoder's SwiGLU block.
ENCODER_LAYER_MATRICES = ("W_q", "W_k", "W_v", "W_o", "W_1", "W_2")
DECODER_LAYER_MATRICES = ("W_q", "W_k", "W_v", "W_o", "W_gate", "W_up", "W_down")
# The default scrambles both (a name a layer does not have is skipped: the draws for either layout are its own).
_MATRICES = ENCODER_LAYER_MATRICES + DECODER_LAYER_MATRICES[4:]


def scrambled_weights(weights: Any, seed: int, *, every_tensor: bool = False,
                      tensors: Collection[str] = _MATRICES) -> Any:
    """A copy of a model's weights with the entries of chosen weight tensors randomly permuted.

    Each scrambled tensor keeps its shape and values (so its scale). ``every_tensor=False``:
    only the layer matrices (``W_q, W_k, W_v, W_o, W_1, W_2``); ``every_tensor=True``: every
    tensor, embeddings, biases and norms too; ``tensors=("W_q", "W_k")``: only those.
    ``weights`` is a :class:`~attention_course.models.encoder.BertWeights` or
    :class:`~attention_course.models.smollm2.DecoderWeights`. One seeded generator draws one
    permutation per tensor in field order; the input is not changed.

    Examples
    --------
    >>> from attention_course.models.encoder import BertLayerWeights
    >>> L = BertLayerWeights(*[torch.arange(4.0).reshape(2, 2)] * 4, *[torch.zeros(2)] * 6,
    ...                      torch.ones(2, 3), torch.zeros(3), torch.ones(3, 2), *[torch.zeros(2)] * 3)
    >>> W = BertWeights(torch.arange(10.0).reshape(5, 2), torch.zeros(4, 2), torch.zeros(1, 2), torch.ones(2),
    ...                 torch.zeros(2), (L,), num_heads=1, layer_norm_eps=1e-12)
    >>> sorted(scrambled_weights(W, seed=0).layers[0].W_q.flatten().tolist())
    [0.0, 1.0, 2.0, 3.0]
    >>> torch.equal(scrambled_weights(W, seed=0).word_embeddings, W.word_embeddings)
    True
    >>> torch.equal(scrambled_weights(W, seed=0, every_tensor=True).word_embeddings, W.word_embeddings)
    False
    >>> qk = scrambled_weights(W, seed=0, tensors=("W_q", "W_k")).layers[0]
    >>> torch.equal(qk.W_q, L.W_q), torch.equal(qk.W_v, L.W_v)
    (False, True)
    """
    g = torch.Generator().manual_seed(seed)

    def permute(t: torch.Tensor) -> torch.Tensor:
        flat = t.detach().reshape(-1)  # (numel,)
        return flat[torch.randperm(flat.numel(), generator=g)].reshape(t.shape)

    def scramble(obj: Any) -> Any:  # a copy of a weights dataclass, its fields visited in order
        new = {}
        for f in fields(obj):
            value = getattr(obj, f.name)
            if f.name == "layers":
                new[f.name] = type(value)(scramble(layer) for layer in value)
            elif isinstance(value, torch.Tensor) and (every_tensor or f.name in tensors):
                new[f.name] = permute(value)
        return replace(obj, **new)

    return scramble(weights)


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
