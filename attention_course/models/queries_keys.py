"""Queries and keys of a BERT encoder, per layer and head, for whole sentences.

For chapter 2 (weights against query-key distances) and chapter 6 (variance of the scores).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Union

import numpy as np
import torch

from ..core._backend import ShapeError, shape_str
from ..core.multihead import split_heads
from .encoder import BertWeights, bert_encode
from .pretrained import minilm_tokenizer, minilm_weights

__all__ = ["bert_queries_keys", "sentence_queries_keys", "minilm_ids_and_weights", "minilm_queries_keys"]


def bert_queries_keys(weights: BertWeights, hidden_states: Sequence[torch.Tensor]
                      ) -> list[tuple[torch.Tensor, torch.Tensor]]:
    r"""Every layer's per-head queries and keys of a BERT encoder.

    .. math::

        q^{(\ell)} = H_{\ell} W_Q^{(\ell)} + b_Q^{(\ell)}, \qquad
        k^{(\ell)} = H_{\ell} W_K^{(\ell)} + b_K^{(\ell)},

    split into heads, where :math:`H_\ell` is the *input* of layer :math:`\ell`.

    Parameters
    ----------
    weights : BertWeights
    hidden_states : sequence of tensors, each (B, T, d_model)
        At least one per layer (``bert_encode``'s last one is not used).

    Returns
    -------
    list of (q, k)
        One pair per layer, each of shape (B, h, T, d_k).

    Examples
    --------
    >>> from attention_course.chapters.encoder.random_weights import random_bert
    >>> w = random_bert(0, n_layers=1)  # d_model 8, 2 heads
    >>> out = bert_encode(w, torch.tensor([[1, 2, 3]]))
    >>> [tuple(t.shape) for t in bert_queries_keys(w, out.hidden_states)[0]]
    [(1, 2, 3, 4), (1, 2, 3, 4)]
    """
    if len(hidden_states) < len(weights.layers):
        raise ValueError(f"{len(hidden_states)} hidden states for {len(weights.layers)} layers; "
                         f"expected one input per layer (bert_encode gives L + 1)")
    out = []
    for L, x in zip(weights.layers, hidden_states):  # x: (B, T, d_model), the layer's input
        q = split_heads(x @ L.W_q + L.b_q, weights.num_heads)  # (B, h, T, d_k)
        k = split_heads(x @ L.W_k + L.b_k, weights.num_heads)  # (B, h, T, d_k)
        out.append((q, k))
    return out


def sentence_queries_keys(weights: BertWeights, input_ids: Sequence[Union[torch.Tensor, Sequence[int]]]
                          ) -> list[tuple[np.ndarray, np.ndarray]]:
    r"""Every layer's and head's queries and keys for each sentence, run one at a time (no padding).

    Parameters
    ----------
    weights : BertWeights
    input_ids : sequence of LongTensor of shape (1, T) or (T,), or of lists of token ids
        One entry per sentence; lengths may differ.

    Returns
    -------
    list of (q, k)
        One pair per sentence, each a float64 array of shape (L, h, T, d_k).

    Examples
    --------
    >>> from attention_course.chapters.encoder.random_weights import random_bert
    >>> w = random_bert(0)  # 2 layers, d_model 8, 2 heads
    >>> [q.shape for q, _ in sentence_queries_keys(w, [[1, 2, 3], torch.tensor([[4, 5]])])]
    [(2, 2, 3, 4), (2, 2, 2, 4)]
    """
    out = []
    for i, ids in enumerate(input_ids):
        t = torch.as_tensor(ids, dtype=torch.long).reshape(1, -1)  # (1, T)
        if t.shape[1] == 0:
            raise ShapeError(f"input_ids[{i}] has shape {shape_str(t)}; expected at least one token")
        hidden = bert_encode(weights, t).hidden_states  # L + 1 tensors (1, T, d_model)
        pairs = bert_queries_keys(weights, hidden)  # L x (q, k), each (1, h, T, d_k)
        q = torch.stack([q[0] for q, _ in pairs])  # (L, h, T, d_k)
        k = torch.stack([k[0] for _, k in pairs])  # (L, h, T, d_k)
        out.append((q.double().numpy(), k.double().numpy()))
    return out


def minilm_ids_and_weights(texts: Sequence[str]) -> tuple[list[list[int]], BertWeights]:
    """all-MiniLM-L6-v2's token ids for each text (``[CLS]`` ... ``[SEP]``, no padding) and its weights.

    Raises
    ------
    ValueError
        If ``texts`` is a single string or empty.
    """
    if isinstance(texts, str) or len(texts) == 0:
        raise ValueError(f"texts must be a non-empty list of strings; got {texts!r:.60}")
    tokenizer = minilm_tokenizer()
    return [tokenizer(text)["input_ids"] for text in texts], minilm_weights()


def minilm_queries_keys(texts: Sequence[str], dtype: torch.dtype = torch.float32
                        ) -> list[tuple[np.ndarray, np.ndarray]]:
    r"""all-MiniLM-L6-v2's queries and keys, (6, 12, T, 32) per text, from the course's own encoder.

    Each text is run alone (no truncation, no padding).

    Parameters
    ----------
    texts : non-empty sequence of str
    dtype : torch.dtype
        Precision of the forward pass: float32 (the model's own, twice as fast) or float64.

    Returns
    -------
    list of (q, k)
        One pair of float64 arrays of shape (6, 12, T, 32) per text, T its number of tokens.
    """
    ids, weights = minilm_ids_and_weights(texts)
    return sentence_queries_keys(weights.to(dtype), ids)
