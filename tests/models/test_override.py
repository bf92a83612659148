"""Tests for the models' hook point, models.override, through the tiny transformer and the BERT encoder.

References are written out by hand in float64: per-head projections, torch's own SDPA for
the heads that are left alone, and the closed form of uniform attention (the mean of the
values a query may see) for the head that is swapped.
"""

import math

import pytest
import torch
import torch.nn.functional as F

from attention_course import ShapeError
from attention_course.models.encoder import BertLayerWeights, BertWeights, bert_encode
from attention_course.models.tiny import ModelConfig, TinyTransformer

F64 = dict(dtype=torch.float64)


def _bert(n_layers=2, h=2, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, **F64)  # noqa: E731
    layers = tuple(BertLayerWeights(*[r(d, d) for _ in range(4)], *[r(d) for _ in range(6)],
                                    r(d, 2 * d), r(2 * d), r(2 * d, d), r(d), r(d), r(d)) for _ in range(n_layers))
    return BertWeights(r(20, d), r(16, d), r(2, d), r(d), r(d), layers, num_heads=h, layer_norm_eps=1e-12)


def _tiny(**kw):
    return TinyTransformer(ModelConfig(**kw), seed=3).double()


def _swap_head(layer, head, new_map):
    """An override that gives head ``head`` of layer ``layer`` the map ``new_map(weights)``."""
    def override(q, k, v, w, at):
        if at != layer:
            return None
        z = w @ v  # (B, h, T, d_v)
        z[:, head] = new_map(w[:, head]) @ v[:, head]
        return z
    return override


IDS = torch.tensor([[1, 5, 7, 2, 9, 3], [4, 4, 8, 0, 1, 2]])
TOKENS = torch.randint(0, 64, (3, 10), generator=torch.Generator().manual_seed(0))


# ------------------------------------------------------------------ a head's own map changes nothing
def test_own_map_changes_nothing_in_either_model():
    own = lambda q, k, v, w, layer: w @ v  # noqa: E731
    W = _bert()
    ref = bert_encode(W, IDS)
    out = bert_encode(W, IDS, attention_override=own)
    for a, b in zip(out.hidden_states + out.attentions, ref.hidden_states + ref.attentions):
        assert torch.equal(a, b)
    model = _tiny(mlp=True)
    logits, weights = model(TOKENS)
    logits_own, weights_own = model(TOKENS, attention_override=own)
    assert torch.equal(logits_own, logits)
    assert all(torch.equal(a, b) for a, b in zip(weights_own, weights))


def test_override_sees_every_layer_once_with_its_queries_keys_and_weights():
    W = _bert(n_layers=3)
    seen = []
    out = bert_encode(W, IDS, attention_override=lambda q, k, v, w, layer: seen.append((layer, q, k, w)))
    assert [s[0] for s in seen] == [0, 1, 2]
    for layer, q, k, w in seen:  # the scores of the layer's own input, as the model returned them
        x = out.hidden_states[layer]  # (B, T, d): the layer's input
        L = W.layers[layer]
        q_ref = (x @ L.W_q + L.b_q).reshape(2, 6, 2, 4).transpose(1, 2)  # (B, h, T, d_k)
        torch.testing.assert_close(q, q_ref, rtol=1e-12, atol=1e-12)
        assert torch.equal(w, out.attentions[layer])
        torch.testing.assert_close(torch.softmax(q @ k.transpose(-1, -2) / 2, dim=-1), w, rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------ uniform attention, by hand
def test_uniform_head_in_bert_matches_a_hand_computed_layer():
    W = _bert(n_layers=1)
    L, h, eps = W.layers[0], W.num_heads, W.layer_norm_eps
    out = bert_encode(W, IDS, attention_override=_swap_head(0, 1, lambda a: torch.full_like(a, 1 / a.shape[-1])))
    # by hand: head 0 as torch computes it, head 1 the plain mean of its values over the 6 keys
    x = out.hidden_states[0]  # (B, T, d): the embeddings, untouched by the override
    q, k, v = ((x @ M + b).reshape(2, 6, h, 4).transpose(1, 2) for M, b in
               ((L.W_q, L.b_q), (L.W_k, L.b_k), (L.W_v, L.b_v)))  # (B, h, T, d_k)
    head0 = F.scaled_dot_product_attention(q[:, :1], k[:, :1], v[:, :1])  # (B, 1, T, d_k)
    head1 = v[:, 1:].mean(dim=2, keepdim=True).expand(-1, -1, 6, -1)  # (B, 1, T, d_k): every query the same
    z = torch.cat([head0, head1], dim=1).transpose(1, 2).reshape(2, 6, 8)  # (B, T, h d_k)
    a = F.layer_norm(x + z @ L.W_o + L.b_o, (8,), L.ln1_weight, L.ln1_bias, eps)
    y = F.layer_norm(a + F.gelu(a @ L.W_1 + L.b_1) @ L.W_2 + L.b_2, (8,), L.ln2_weight, L.ln2_bias, eps)
    torch.testing.assert_close(out.hidden_states[1], y, rtol=1e-12, atol=1e-12)
    assert (y - bert_encode(W, IDS).hidden_states[1]).abs().max() > 1e-2  # and it did change the output


def test_uniform_head_in_the_tiny_model_matches_a_hand_computed_forward():
    model = _tiny(n_layers=1, n_heads=2, d_model=16)
    T = TOKENS.shape[1]
    causal_uniform = lambda a: torch.tril(torch.ones(T, T, **F64)) / torch.arange(1, T + 1, **F64)[:, None]  # noqa: E731
    logits, weights = model(TOKENS, attention_override=_swap_head(0, 0, lambda a: causal_uniform(a).expand_as(a)))
    # by hand: head 0 averages the values of keys j <= i, head 1 is causal softmax attention
    x = model.W_E[TOKENS] + model.W_pos[:T]  # (B, T, d)
    xn = model.ln[0](x)
    v0 = xn @ model.W_v[0][0]  # (B, T, d_k)
    z0 = v0.cumsum(dim=1) / torch.arange(1, T + 1, **F64)[:, None]  # running mean of the values
    q1, k1, v1 = (xn @ M[0][1] for M in (model.W_q, model.W_k, model.W_v))
    z1 = F.scaled_dot_product_attention(q1, k1, v1, is_causal=True, scale=1 / math.sqrt(q1.shape[-1]))
    x = x + z0 @ model.W_o[0][0] + z1 @ model.W_o[0][1]
    torch.testing.assert_close(logits, model.ln[-1](x) @ model.W_U, rtol=1e-12, atol=1e-12)
    assert torch.equal(weights[0], model(TOKENS)[1][0])  # the returned maps are the model's own
    assert (logits - model(TOKENS)[0]).abs().max() > 1e-2


def test_head_mask_still_applies_to_an_overridden_head():
    model = _tiny(n_layers=1)
    louder_head_0 = _swap_head(0, 0, lambda a: 5 * a)  # head 0's output times 5
    silenced = torch.tensor([[0.0, 1.0, 1.0, 1.0]])
    assert torch.equal(model(TOKENS, head_mask=silenced, attention_override=louder_head_0)[0],
                       model(TOKENS, head_mask=silenced)[0])  # a removed head stays removed
    assert (model(TOKENS, attention_override=louder_head_0)[0] - model(TOKENS)[0]).abs().max() > 1e-2


def test_an_override_of_the_wrong_shape_names_it():
    with pytest.raises(ShapeError, match=r"layer 0 returned shape \(2, 2, 6\); expected .*\(2, 2, 6, 4\)"):
        bert_encode(_bert(), IDS, attention_override=lambda q, k, v, w, layer: w.sum(-1))
