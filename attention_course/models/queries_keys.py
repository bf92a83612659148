"""Queries and keys of a BERT encoder, per layer and head, for whole sentences.

Chapter 2 compares a trained head's attention weights with the distances between its own
queries and keys (:mod:`attention_course.chapters.kernels.qk_kernel`); these helpers run the course's
encoder (:func:`~attention_course.models.encoder.bert_encode`) to get them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Union

import numpy as np
import torch

from ..core._backend import ShapeError, shape_str
from ..core.multihead import split_heads
from .encoder import BertWeights, bert_encode, bert_weights_from_safetensors
from .pretrained import load_minilm, locate_minilm, minilm_weights

__all__ = ["sentence_queries_keys", "minilm_queries_keys"]


def sentence_queries_keys(weights: BertWeights, input_ids: Sequence[Union[torch.Tensor, Sequence[int]]]
                          ) -> list[tuple[np.ndarray, np.ndarray]]:
    r"""Every layer's and head's queries and keys for each sentence, run one at a time (no padding).

    For sentence ``s`` and layer :math:`\ell`, :math:`q = H_\ell W_Q + b_Q` and
    :math:`k = H_\ell W_K + b_K` split into heads
    (the hidden states of
    :func:`~attention_course.models.encoder.bert_encode`, projected per layer), so that
    ``softmax(q k^T / sqrt(d_k))`` is that head's attention.

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
    >>> from attention_course.models.encoder import BertLayerWeights
    >>> g = torch.Generator().manual_seed(0)
    >>> r = lambda *s: torch.randn(*s, generator=g)
    >>> layer = BertLayerWeights(*[r(8, 8) for _ in range(4)], *[r(8) for _ in range(6)],
    ...                          r(8, 16), r(16), r(16, 8), r(8), r(8), r(8))
    >>> w = BertWeights(r(10, 8), r(16, 8), r(2, 8), r(8), r(8), (layer, layer), 2, 1e-12)
    >>> [q.shape for q, _ in sentence_queries_keys(w, [[1, 2, 3], torch.tensor([[4, 5]])])]
    [(2, 2, 3, 4), (2, 2, 2, 4)]
    """
    out = []
    for i, ids in enumerate(input_ids):
        t = torch.as_tensor(ids, dtype=torch.long).reshape(1, -1)  # (1, T)
        if t.shape[1] == 0:
            raise ShapeError(f"input_ids[{i}] has shape {shape_str(t)}; expected at least one token")
        hidden = bert_encode(weights, t).hidden_states  # L + 1 tensors (1, T, d_model)
        # each layer's input H_l, projected and split into heads (lenses.scaling.bert_queries_keys
        # does the same for a batch; models may not import lenses)
        q = torch.stack([split_heads(x @ L.W_q + L.b_q, weights.num_heads)[0]
                         for L, x in zip(weights.layers, hidden)])  # (L, h, T, d_k)
        k = torch.stack([split_heads(x @ L.W_k + L.b_k, weights.num_heads)[0]
                         for L, x in zip(weights.layers, hidden)])  # (L, h, T, d_k)
        out.append((q.double().numpy(), k.double().numpy()))
    return out


def minilm_queries_keys(texts: Sequence[str], dtype: torch.dtype = torch.float32
                        ) -> list[tuple[np.ndarray, np.ndarray]]:
    r"""all-MiniLM-L6-v2's queries and keys, (6, 12, T, 32) per text, from the course's own encoder.

    Each text is tokenized with ``[CLS]`` and ``[SEP]`` (no truncation, no padding) and run
    alone through :func:`sentence_queries_keys`. When the weights are in a local folder
    (:func:`~attention_course.models.pretrained.locate_minilm`), the tokenizer is read from
    its ``tokenizer.json`` with the ``tokenizers`` library and the weights from
    ``model.safetensors``, which skips importing ``transformers`` (several seconds);
    otherwise :func:`~attention_course.models.pretrained.load_minilm` provides both.
    The tests check that the two ways give the same token ids and weights.

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
    if isinstance(texts, str) or len(texts) == 0:
        raise ValueError(f"texts must be a non-empty list of strings; got {texts!r:.60}")
    location, source = locate_minilm()
    folder = Path(location)
    if source != "hub" and (folder / "tokenizer.json").is_file() and (folder / "model.safetensors").is_file():
        from tokenizers import Tokenizer  # a dependency of transformers; imports in milliseconds

        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        tokenizer.no_truncation()
        tokenizer.no_padding()
        ids = [tokenizer.encode(text).ids for text in texts]
        weights = bert_weights_from_safetensors(folder)
    else:  # weights from the Hub: transformers downloads and reads them
        tokenizer, _ = load_minilm()
        ids = [tokenizer(text)["input_ids"] for text in texts]
        weights = minilm_weights()
    return sentence_queries_keys(weights.to(dtype), ids)
