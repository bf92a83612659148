"""Chapter 8's steps, each against a trusted reference: torch's LayerNorm and GELU, nn.MultiheadAttention,
nn.TransformerEncoderLayer, and models/encoder.py (which the tests in test_against_minilm.py hold to
transformers). Float64, so the references agree to round-off; hypothesis varies the shapes."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.core._backend import ShapeError
from attention_course.models import encoder as model_encoder
from attention_course.chapters.encoder.assemble import encode
from attention_course.chapters.encoder.block import block, stream_size
from attention_course.chapters.encoder.embeddings import embeddings
from attention_course.chapters.encoder.exercises import torch_encoder_layer
from attention_course.chapters.encoder.feed_forward import GELU_GAP, GELU_GAP_AT, feed_forward, gelu, gelu_gap
from attention_course.chapters.encoder.layer_norm import layer_norm
from attention_course.chapters.encoder.pooling import sentence_embeddings
from attention_course.chapters.encoder.random_weights import random_bert, random_layer
from attention_course.chapters.encoder.self_attention import key_mask, self_attention

pytestmark = [pytest.mark.numerics, pytest.mark.usefixtures("one_torch_thread")]
F64 = torch.float64
TIGHT = dict(rtol=1e-10, atol=1e-12)  # float64, a few hundred operations on order-1 values: ~1e-14


def _g(seed):
    return torch.Generator().manual_seed(seed)


def _lengths(lengths, T):
    return (torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]).long()


SHAPES = st.tuples(st.integers(1, 3), st.integers(1, 6), st.sampled_from([(4, 1), (8, 2), (12, 3), (16, 4)]))


# ------------------------------------------------------------------ LayerNorm
@settings(max_examples=30, deadline=None)
@given(SHAPES, st.sampled_from([1e-12, 1e-5, 1e-2]), st.integers(0, 10**6))
def test_layer_norm_is_torchs(shape, eps, seed):
    B, T, (d, _) = shape
    g = _g(seed)
    x = torch.randn(B, T, d, generator=g, dtype=F64) * 3 + 1
    gamma, beta = torch.randn(d, generator=g, dtype=F64), torch.randn(d, generator=g, dtype=F64)
    ref = torch.nn.LayerNorm(d, eps=eps, dtype=F64)
    ref.load_state_dict({"weight": gamma, "bias": beta})
    torch.testing.assert_close(layer_norm(x, gamma, beta, eps), ref(x).detach(), **TIGHT)


def test_layer_norm_takes_numpy_and_keeps_the_kind():
    x = np.random.default_rng(0).normal(size=(2, 3, 5))
    y = layer_norm(x, np.ones(5), np.zeros(5), 1e-5)
    assert isinstance(y, np.ndarray) and y.shape == x.shape
    np.testing.assert_allclose(y, F.layer_norm(torch.as_tensor(x), (5,), eps=1e-5).numpy(), rtol=1e-12, atol=1e-12)


def test_layer_norm_constant_token_gives_beta():
    beta = torch.arange(4.0, dtype=F64)
    torch.testing.assert_close(layer_norm(torch.full((1, 4), 3.0, dtype=F64), torch.ones(4, dtype=F64), beta, 1e-5),
                               beta[None])


def test_layer_norm_names_the_shapes():
    with pytest.raises(ShapeError, match=r"gamma has shape \(3,\) but x has shape \(2, 4\); expected \(4,\)"):
        layer_norm(torch.zeros(2, 4), torch.ones(3), torch.zeros(4))


# ------------------------------------------------------------------ GELU and the feed-forward block
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_is_torchs(approximate):
    z = torch.linspace(-8, 8, 10001, dtype=F64)
    torch.testing.assert_close(gelu(z, approximate), F.gelu(z, approximate=approximate), rtol=1e-12, atol=1e-14)


def test_gelu_gap_is_where_the_two_gelus_part_most():
    z = torch.linspace(-10, 10, 2_000_001, dtype=F64)  # ten times finer than gelu_gap's grid
    diff = (F.gelu(z) - F.gelu(z, approximate="tanh")).abs()
    assert abs(float(diff.max()) - GELU_GAP) < 1e-9 and abs(abs(float(z[diff.argmax()])) - GELU_GAP_AT) < 1e-3
    assert gelu_gap(-3, 3, 601)[0] <= GELU_GAP
    gap, at = gelu_gap()  # the constants are this measurement, written down (float64 erf/tanh: a few ulps)
    assert abs(gap - GELU_GAP) < 1e-15 and abs(at - GELU_GAP_AT) < 1e-4


def test_gelu_rejects_an_unknown_variant():
    with pytest.raises(ValueError, match="approximate='sigmoid'"):
        gelu(torch.zeros(1), "sigmoid")


@settings(max_examples=20, deadline=None)
@given(SHAPES, st.integers(0, 10**6))
def test_feed_forward_is_two_linears_and_torchs_gelu(shape, seed):
    B, T, (d, _) = shape
    g = _g(seed)
    layer = random_layer(g, d, 4 * d)
    x = torch.randn(B, T, d, generator=g, dtype=F64)
    expected = F.linear(F.gelu(F.linear(x, layer.W_1.T, layer.b_1)), layer.W_2.T, layer.b_2)
    torch.testing.assert_close(feed_forward(x, layer), expected, **TIGHT)


def test_feed_forward_names_the_shapes():
    layer = random_layer(_g(0), 8, 16)
    with pytest.raises(ShapeError, match=r"x has shape \(2, 5\) but W_1 has shape \(8, 16\)"):
        feed_forward(torch.zeros(2, 5, dtype=F64), layer)


# ------------------------------------------------------------------ attention with biases
@settings(max_examples=30, deadline=None)
@given(SHAPES, st.integers(0, 10**6), st.booleans())
def test_self_attention_is_nn_multihead_attention(shape, seed, pad):
    B, T, (d, h) = shape
    g = _g(seed)
    layer = random_layer(g, d)
    x = torch.randn(B, T, d, generator=g, dtype=F64)
    lengths = torch.randint(1, T + 1, (B,), generator=g) if pad else torch.full((B,), T)
    am = _lengths(lengths.tolist(), T)
    ref = torch.nn.MultiheadAttention(d, h, batch_first=True, dtype=F64)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([layer.W_q.T, layer.W_k.T, layer.W_v.T]))
        ref.in_proj_bias.copy_(torch.cat([layer.b_q, layer.b_k, layer.b_v]))
        ref.out_proj.weight.copy_(layer.W_o.T)
        ref.out_proj.bias.copy_(layer.b_o)
    out_ref, w_ref = ref(x, x, x, key_padding_mask=~am.bool(), average_attn_weights=False)  # True = blocked
    out, w = self_attention(x, layer, h, key_mask(am))
    torch.testing.assert_close(out, out_ref.detach(), **TIGHT)
    torch.testing.assert_close(w, w_ref.detach(), **TIGHT)


def test_self_attention_gives_padding_no_weight_and_rows_sum_to_one():
    layer = random_layer(_g(1), 8)
    x = torch.randn(2, 5, 8, generator=_g(2), dtype=F64)
    _, w = self_attention(x, layer, 2, key_mask(_lengths([5, 2], 5)))
    assert float(w[1, :, :, 2:].abs().max()) == 0.0
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 2, 5, dtype=F64))


def test_self_attention_with_a_two_dimensional_causal_mask():
    layer = random_layer(_g(3), 8)
    x = torch.randn(1, 4, 8, generator=_g(4), dtype=F64)
    causal = torch.ones(4, 4, dtype=torch.bool).tril()
    _, w = self_attention(x, layer, 2, causal)
    assert float(w[..., torch.triu_indices(4, 4, 1)[0], torch.triu_indices(4, 4, 1)[1]].abs().max()) == 0.0


def test_key_mask_names_the_shape():
    with pytest.raises(ShapeError, match=r"attention_mask has shape \(3,\); expected \(B, S\)"):
        key_mask(torch.ones(3))


# ------------------------------------------------------------------ the block
@settings(max_examples=20, deadline=None)
@given(SHAPES, st.integers(0, 10**6), st.sampled_from([1e-12, 1e-5]))
def test_block_is_torchs_transformer_encoder_layer(shape, seed, eps):
    """post-LN with exact GELU = nn.TransformerEncoderLayer(norm_first=False, activation='gelu')."""
    B, T, (d, h) = shape
    g = _g(seed)
    layer = random_layer(g, d, 4 * d)
    x = torch.randn(B, T, d, generator=g, dtype=F64)
    mask = key_mask(_lengths(torch.randint(1, T + 1, (B,), generator=g).tolist(), T))
    torch.testing.assert_close(block(x, layer, h, mask, eps), torch_encoder_layer(x, layer, h, mask, eps), **TIGHT)


def test_pre_ln_block_is_torchs_norm_first_layer():
    layer = random_layer(_g(5), 8, 32)
    x = torch.randn(2, 3, 8, generator=_g(6), dtype=F64)
    ref = torch.nn.TransformerEncoderLayer(8, 2, 32, dropout=0.0, activation="gelu", layer_norm_eps=1e-5,
                                           batch_first=True, norm_first=True, dtype=F64)
    with torch.no_grad():
        ref.self_attn.in_proj_weight.copy_(torch.cat([layer.W_q.T, layer.W_k.T, layer.W_v.T]))
        ref.self_attn.in_proj_bias.copy_(torch.cat([layer.b_q, layer.b_k, layer.b_v]))
        ref.self_attn.out_proj.weight.copy_(layer.W_o.T)
        ref.self_attn.out_proj.bias.copy_(layer.b_o)
        ref.linear1.weight.copy_(layer.W_1.T), ref.linear1.bias.copy_(layer.b_1)
        ref.linear2.weight.copy_(layer.W_2.T), ref.linear2.bias.copy_(layer.b_2)
        ref.norm1.weight.copy_(layer.ln1_weight), ref.norm1.bias.copy_(layer.ln1_bias)
        ref.norm2.weight.copy_(layer.ln2_weight), ref.norm2.bias.copy_(layer.ln2_bias)
    torch.testing.assert_close(block(x, layer, 2, None, 1e-5, norm="pre"), ref.eval()(x).detach(), **TIGHT)


def test_block_is_the_layer_of_models_encoder():
    """One implementation of the layer, tested equal: models/encoder.py's _layer and this chapter's block."""
    layer = random_layer(_g(7), 12, 48)
    x = torch.randn(2, 5, 12, generator=_g(8), dtype=F64)
    mask = key_mask(_lengths([5, 3], 5))
    torch.testing.assert_close(block(x, layer, 3, mask, 1e-12), model_encoder._layer(x, layer, 3, mask, 1e-12)[0], **TIGHT)


def test_block_rejects_an_unknown_order():
    with pytest.raises(ValueError, match="norm='middle'"):
        block(torch.zeros(1, 2, 8, dtype=F64), random_layer(_g(0)), 2, norm="middle")


def test_stream_size_post_ln_stays_and_pre_ln_grows():
    post, pre = stream_size("post"), stream_size("pre")
    assert post.shape == pre.shape == (13,)
    assert np.all(np.abs(post[1:] - 1) < 0.25)  # each layer ends in a LayerNorm with gains ~ 1 +- 0.3
    assert np.all(np.diff(pre[[0, 1, 4, 8, 12]]) > 0) and pre[12] > 10 * post[12]


# ------------------------------------------------------------------ embeddings and the whole encoder
def test_embeddings_are_bert_encodes_first_state():
    w = random_bert(9)
    ids = torch.tensor([[1, 5, 5, 0], [3, 2, 7, 9]])
    tt = torch.tensor([[0, 0, 1, 1], [0, 0, 0, 0]])
    torch.testing.assert_close(embeddings(w, ids, tt),
                               model_encoder.bert_encode(w, ids, token_type_ids=tt).hidden_states[0], **TIGHT)


def test_embeddings_name_the_shapes():
    w = random_bert(0)
    with pytest.raises(ShapeError, match=r"token_type_ids has shape \(1, 2\) but input_ids has shape \(1, 3\)"):
        embeddings(w, torch.zeros(1, 3, dtype=torch.long), torch.zeros(1, 2, dtype=torch.long))
    with pytest.raises(ShapeError, match=r"T=30 is longer than the 24 learned positions"):
        embeddings(w, torch.zeros(1, 30, dtype=torch.long))


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 3), st.integers(1, 7), st.integers(0, 3), st.integers(0, 10**6))
def test_encode_is_bert_encode(B, T, n_layers, seed):
    w = random_bert(seed % 1000, n_layers=n_layers)
    g = _g(seed)
    am = _lengths(torch.randint(1, T + 1, (B,), generator=g).tolist(), T)
    ids = torch.randint(0, 20, (B, T), generator=g) * am
    h = encode(w, ids, am)
    assert h.shape == (n_layers + 1, B, T, 8)
    torch.testing.assert_close(h, torch.stack(model_encoder.bert_encode(w, ids, am).hidden_states), **TIGHT)


def test_encode_names_the_shapes():
    with pytest.raises(ShapeError, match=r"attention_mask has shape \(1, 2\) but input_ids has shape \(1, 3\)"):
        encode(random_bert(0), torch.zeros(1, 3, dtype=torch.long), torch.ones(1, 2))


# ------------------------------------------------------------------ pooling
def test_sentence_embeddings_ignore_padding_and_have_unit_length():
    g = _g(10)
    h = torch.randn(2, 4, 6, generator=g, dtype=F64)
    am = _lengths([4, 2], 4)
    e = sentence_embeddings(h, am)
    torch.testing.assert_close(e.norm(dim=-1), torch.ones(2, dtype=F64))
    torch.testing.assert_close(e[1], F.normalize(h[1, :2].mean(0), dim=0))
    h2 = h.clone()
    h2[1, 2:] = 1e6  # padding changes nothing
    torch.testing.assert_close(sentence_embeddings(h2, am), e)


def test_sentence_embeddings_name_the_shapes():
    with pytest.raises(ShapeError, match=r"hidden has shape \(2, 3\)"):
        sentence_embeddings(torch.zeros(2, 3), torch.ones(2, 3))


# ------------------------------------------------------------------ the re-check
def test_effective_ranks_are_chapter_3s():
    from attention_course import effective_rank
    from attention_course.chapters.encoder.recheck import effective_ranks

    maps = torch.softmax(torch.randn(2, 3, 7, 7, generator=_g(11), dtype=F64) * 3, dim=-1)  # (2, 3, 7, 7)
    np.testing.assert_allclose(effective_ranks(maps), effective_rank(maps.numpy()), rtol=1e-12)
    with pytest.raises(ShapeError, match=r"maps has shape \(3,\)"):
        effective_ranks(torch.ones(3))
