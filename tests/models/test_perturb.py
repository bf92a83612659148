"""Tests for attention_course.models.perturb: the scrambled-weights baselines of chapters 5 and 7.

Reference: one torch generator drawing a permutation per scrambled tensor in field order, by hand.
"""

from __future__ import annotations

from dataclasses import fields

import pytest
import torch

from attention_course.models.encoder import BertLayerWeights, BertWeights
from attention_course.models.perturb import scrambled_weights

MATRICES = ("W_q", "W_k", "W_v", "W_o", "W_1", "W_2")


def _tiny_weights(seed=0, d=8, vocab=40, n_layers=2):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    layers = tuple(BertLayerWeights(*[r(d, d) for _ in range(4)], *[r(d) for _ in range(6)],
                                    r(d, 2 * d), r(2 * d), r(2 * d, d), *[r(d) for _ in range(3)])
                   for _ in range(n_layers))
    return BertWeights(r(vocab, d), r(32, d), r(2, d), r(d), r(d), layers, num_heads=2, layer_norm_eps=1e-12)


def _tensors(w):
    """(name, tensor) of every tensor, in field order: the embeddings, then each layer's fields."""
    top = [(f.name, getattr(w, f.name)) for f in fields(w) if isinstance(getattr(w, f.name), torch.Tensor)]
    return top + [(f.name, getattr(L, f.name)) for L in w.layers for f in fields(L)]


def test_scrambled_weights_permute_each_matrix_and_keep_the_rest():
    W = _tiny_weights()
    S = scrambled_weights(W, seed=1)
    for a, b in zip(W.layers, S.layers):
        for name in MATRICES:
            x, y = getattr(a, name), getattr(b, name)
            assert torch.equal(torch.sort(x.flatten()).values, torch.sort(y.flatten()).values)
            assert not torch.equal(x, y)
        assert torch.equal(a.b_q, b.b_q) and torch.equal(a.ln1_weight, b.ln1_weight)
    assert torch.equal(W.word_embeddings, S.word_embeddings)
    assert (S.num_heads, S.layer_norm_eps) == (W.num_heads, W.layer_norm_eps)


def test_every_tensor_permutes_every_tensor_and_leaves_the_input_alone():
    W = _tiny_weights()
    before = [t.clone() for _, t in _tensors(W)]
    S = scrambled_weights(W, seed=1, every_tensor=True)
    for (name, x), (_, y) in zip(_tensors(W), _tensors(S)):
        assert y.shape == x.shape, name
        same_entries = torch.equal(torch.sort(y.flatten()).values, torch.sort(x.flatten()).values)
        assert same_entries, name
        assert not torch.equal(y, x), name  # in another order
    assert all(torch.equal(t, b) for (_, t), b in zip(_tensors(W), before))  # the input is unchanged
    other_seed = scrambled_weights(W, seed=2, every_tensor=True)
    assert not torch.equal(other_seed.layers[0].W_q, S.layers[0].W_q)


@pytest.mark.parametrize("every_tensor", [False, True])
def test_one_generator_draws_the_permutations_in_field_order(every_tensor):
    # the order the notebooks' stored numbers depend on: one randperm per scrambled tensor, field by field
    W = _tiny_weights(seed=3)
    g = torch.Generator().manual_seed(7)
    expected = [t.flatten()[torch.randperm(t.numel(), generator=g)].reshape(t.shape)
                if every_tensor or name in MATRICES else t for name, t in _tensors(W)]
    got = [t for _, t in _tensors(scrambled_weights(W, seed=7, every_tensor=every_tensor))]
    assert all(torch.equal(a, b) for a, b in zip(got, expected))


def test_a_decoders_default_scramble_covers_its_swiglu_block():
    """scrambled_weights' default scrambles every layer matrix of either layout (the decoder's W_gate, W_up,
    W_down too, which the encoder's names alone missed), with the same draws as naming them."""
    from attention_course.chapters.decoder.random_weights import random_decoder
    from attention_course.models.perturb import DECODER_LAYER_MATRICES

    W = random_decoder(seed=0)
    default, named = scrambled_weights(W, seed=1), scrambled_weights(W, seed=1, tensors=DECODER_LAYER_MATRICES)
    for before, a, b in zip(W.layers, default.layers, named.layers):
        for name in DECODER_LAYER_MATRICES:
            assert torch.equal(getattr(a, name), getattr(b, name)), name
            assert not torch.equal(getattr(a, name), getattr(before, name)), name
