"""Tests for attention_course.models.queries_keys: a BERT encoder's per-layer, per-head queries and keys.

Reference: the course's encoder's own attention maps, which softmax(q k^T / sqrt(d_k)) must
reproduce, and the transformers route to MiniLM's token ids and weights.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attention_course import ShapeError
from attention_course.models.encoder import BertLayerWeights, BertWeights, bert_encode
from attention_course.models.queries_keys import bert_queries_keys, minilm_queries_keys, sentence_queries_keys


def random_bert(n_layers=2, d=12, h=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64) / math.sqrt(s[0])  # noqa: E731
    layers = tuple(
        BertLayerWeights(*[r(d, d) for _ in range(4)], *[r(d) for _ in range(4)], 1 + r(d), r(d),
                         r(d, 2 * d), r(2 * d), r(2 * d, d), r(d), 1 + r(d), r(d))
        for _ in range(n_layers)
    )
    return BertWeights(r(20, d), r(16, d), r(2, d), 1 + r(d), r(d), layers, h, 1e-12)


def test_bert_queries_keys_reproduce_the_encoders_attention():
    w = random_bert()
    ids = torch.tensor([[1, 5, 7, 2, 9, 4], [3, 8, 2, 0, 0, 0]])
    real = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]])
    out = bert_encode(w, ids, real)
    qk = bert_queries_keys(w, out.hidden_states)
    assert len(qk) == 2
    keys_ok = real.bool()[:, None, None, :]  # (B, 1, 1, S): the real keys
    for (q, k), attn in zip(qk, out.attentions):
        assert q.shape == k.shape == (2, 3, 6, 4)
        p = torch.softmax((q @ k.transpose(-2, -1) / 2.0).masked_fill(~keys_ok, float("-inf")), -1)
        torch.testing.assert_close(p, attn, rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError, match=r"1 hidden states for 2 layers"):
        bert_queries_keys(w, out.hidden_states[:1])


def test_sentence_queries_keys_reproduce_the_attention_maps():
    w = random_bert()
    sentences = [[1, 5, 7, 2], torch.tensor([[3, 4, 9]])]
    pairs = sentence_queries_keys(w, sentences)
    for ids, (q, k) in zip(sentences, pairs):
        assert q.dtype == k.dtype == np.float64 and q.shape == k.shape == (2, 3, len(np.ravel(ids)), 4)
        maps = bert_encode(w, torch.as_tensor(ids).reshape(1, -1)).attentions  # L x (1, h, T, T)
        scores = q @ np.swapaxes(k, -2, -1) / np.sqrt(q.shape[-1])  # (L, h, T, T)
        rebuilt = np.exp(scores - scores.max(-1, keepdims=True))
        rebuilt /= rebuilt.sum(-1, keepdims=True)
        expected = torch.stack([a[0] for a in maps]).numpy()  # (L, h, T, T)
        np.testing.assert_allclose(rebuilt, expected, atol=1e-12)  # float64 both ways
    with pytest.raises(ShapeError, match=r"input_ids\[1\] has shape \(1, 0\)"):
        sentence_queries_keys(w, [[1, 2], []])


def test_minilm_queries_keys_match_the_transformers_route():
    # the fast route (tokenizers + safetensors) must give the ids and weights that load_minilm gives
    from attention_course.models.pretrained import load_minilm, minilm_weights

    texts = ["The cat sat on the mat.", "Attention is a weighted average of values."]
    tokenizer, _ = load_minilm()
    expected = sentence_queries_keys(minilm_weights(), [tokenizer(t)["input_ids"] for t in texts])
    got = minilm_queries_keys(texts)
    for (q, k), (q_ref, k_ref) in zip(got, expected):
        assert q.shape == q_ref.shape == (6, 12, len(q_ref[0, 0]), 32)
        np.testing.assert_array_equal(q, q_ref)  # same ids, same weights, same float32 arithmetic
        np.testing.assert_array_equal(k, k_ref)
    with pytest.raises(ValueError, match="texts must be a non-empty list of strings"):
        minilm_queries_keys("one string")
