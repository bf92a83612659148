"""Tests for attention_course.chapters.graphs.topology_rule: shuffles, the fixed rule."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_course.core._backend import ShapeError
from attention_course.chapters.graphs import topology, topology_rule as tr
from attention_course.models.encoder import BertLayerWeights, BertWeights
from attention_course.models.perturb import encoder_maps
from attention_course.chapters.graphs.topology import shuffled_sentences


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_shuffled_sentences_perm_maps_positions_to_words():
    sentence = "the quick brown fox jumps over a lazy dog."
    texts, perms = shuffled_sentences(sentence, 3, seed=4)
    words = sentence.rstrip(".").split() + ["."]
    assert texts[0] == sentence and len(texts) == 4
    for text, perm in zip(texts[1:], perms):
        shuffled = text.rstrip(".").split() + ["."]
        assert [words[perm[p]] for p in range(len(words))] == shuffled
        assert perm[-1] == len(words) - 1  # the full stop stays last
    assert shuffled_sentences(sentence, 3, seed=4) == (texts, perms)  # seeded


def test_uniform_miss_by_hand():
    A = np.stack([np.eye(4), np.full((4, 4), 0.25)])  # (H=2, n, n)
    np.testing.assert_allclose(tr.uniform_miss([A]), [0.75, 0.0], atol=1e-15)  # one-hot rows: 1 - 1/4


def _rule_maps(rng, theta_tok, theta_off, ids_list):
    # a head that follows a fixed rule exactly: softmax over keys of a[token_j] + c[j - i]
    maps = []
    for ids in ids_list:
        n = len(ids)
        logits = theta_tok[np.array(ids)][None, :] + theta_off[np.subtract.outer(np.arange(n), np.arange(n)).T + 10]
        maps.append(_softmax(logits)[None])  # (H=1, n, n)
    return maps


def test_the_rule_reproduces_a_rule_head_and_misses_a_content_head():
    rng = np.random.default_rng(0)
    vocab, n = 12, 8
    theta_tok, theta_off = 2.0 * rng.normal(size=vocab), 2.0 * rng.normal(size=21)
    ids = [rng.choice(vocab, size=n, replace=False).tolist() for _ in range(10)]
    rule_head = _rule_maps(rng, theta_tok, theta_off, ids)
    q_emb, k_emb = rng.normal(size=(2, vocab, 6))  # a content head: token i's query meets token j's key
    content_head = [_softmax(1.5 * q_emb[s] @ k_emb[s].T)[None] for s in ids]
    fit, held = slice(0, 7), slice(7, 10)
    rule = tr.fit_fixed_rule(rule_head[fit], ids[fit])
    assert tr.rule_miss(rule, rule_head[held], ids[held])[0] < 0.05  # ridge 1e-3 leaves a small bias
    rule_c = tr.fit_fixed_rule(content_head[fit], ids[fit])
    miss_c = tr.rule_miss(rule_c, content_head[held], ids[held])[0]
    assert miss_c > 0.15 and miss_c < tr.uniform_miss(content_head[held])[0]
    # the rule's rows are distributions, and an unseen token gets no token score
    pred = rule.predict([0, 1, 99])
    np.testing.assert_allclose(pred.sum(axis=-1), 1.0, atol=1e-12)
    with pytest.raises(ShapeError, match="at most 8"):
        rule.predict(list(range(9)))
    with pytest.raises(ValueError, match="2 maps and 1 id lists"):
        tr.fit_fixed_rule(rule_head[:2], ids[:1])


def _tiny_weights(seed=0, d=8, vocab=40, heads=2, n_layers=2):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: 0.5 * torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    layers = tuple(BertLayerWeights(*[r(d, d) for _ in range(4)], *[r(d) for _ in range(4)],
                                    torch.ones(d, dtype=torch.float64), r(d), r(d, 2 * d), r(2 * d), r(2 * d, d), r(d),
                                    torch.ones(d, dtype=torch.float64), r(d)) for _ in range(n_layers))
    return BertWeights(r(vocab, d), r(32, d), r(2, d), torch.ones(d, dtype=torch.float64),
                       torch.zeros(d, dtype=torch.float64), layers, num_heads=heads, layer_norm_eps=1e-12)


class _WordTokenizer:
    """One id per word (and the full stop), [CLS] = 1 and [SEP] = 2, padded with 0."""

    def __init__(self):
        self.ids = {}

    def __call__(self, texts, padding=True, return_tensors="pt"):
        seqs = [[1] + [self.ids.setdefault(w, 3 + len(self.ids)) for w in t.replace(".", " .").split()] + [2]
                for t in texts]
        T = max(map(len, seqs))
        ids = torch.tensor([s + [0] * (T - len(s)) for s in seqs])
        return {"input_ids": ids, "attention_mask": (ids > 0).long()}


def test_held_out_shuffles_splits_each_sentence_s_versions():
    W, tok = _tiny_weights(), _WordTokenizer()
    encode = lambda texts: encoder_maps(W, tok, texts)  # noqa: E731
    sentences = ["a b c d e f.", "g h i j k l m."]
    (fit_ids, fit_maps), (held_ids, held_maps) = tr.held_out_shuffles(encode, sentences, n_shuffles=3, n_fit=2)
    assert len(fit_ids) == 4 and len(held_ids) == 4 and fit_maps[0].shape == (4, 9, 9)  # (L * H, n, n): 6 words, ".", [CLS], [SEP]
