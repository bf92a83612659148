"""Chapter 9's parts against trusted references: torch's RMSNorm and SDPA, transformers' Llama modules
(rotary embedding, the whole LlamaForCausalLM built from a config and our weights) in float64, and the
cache against full recomputation."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.chapters.decoder.grouped_attention import decoder_mask
from attention_course.chapters.decoder.rope import apply_rope_interleaved

from attention_course.chapters.decoder import (
    apply_rope, decoder_block, empty_cache, forward,
    grouped_query_attention, hidden_states, permute_for_llama_cpp, random_decoder, rms_norm, swiglu,
)
from attention_course.chapters.decoder.random_weights import TINY_DECODER
from attention_course.chapters.gpt import next_token_loss, next_token_probs, sample
from attention_course.models.smollm2 import DecoderConfig
from hf_bridge import hf_state_dict

pytestmark = [pytest.mark.numerics, pytest.mark.usefixtures("one_torch_thread")]


def _randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_rms_norm_matches_torch():
    x, g = _randn(2, 3, 16), 1 + 0.3 * _randn(16, seed=1)
    torch.testing.assert_close(rms_norm(x, g, 1e-6), F.rms_norm(x, (16,), g, 1e-6), rtol=0, atol=1e-14)


def test_rms_norm_rejects_a_gain_of_the_wrong_size():
    with pytest.raises(ValueError, match=r"weight has shape \(8,\) but x has shape \(2, 16\)"):
        rms_norm(_randn(2, 16), torch.ones(8, dtype=torch.float64), 1e-6)


def test_rope_matches_transformers_rotary_embedding():
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    cfg = LlamaConfig(hidden_size=64, num_attention_heads=4, rope_theta=1e5)
    rot = LlamaRotaryEmbedding(cfg)
    q, k = _randn(1, 4, 7, 16), _randn(1, 4, 7, 16, seed=1)
    positions = torch.arange(3, 10)
    cos, sin = rot(q.float(), positions[None])  # transformers computes the angles in float32
    hq, hk = apply_rotary_pos_emb(q, k, cos.double(), sin.double())
    ours = apply_rope(q.float(), positions, 1e5).double(), apply_rope(k.float(), positions, 1e5).double()
    torch.testing.assert_close(ours[0], hq, rtol=0, atol=1e-5)
    torch.testing.assert_close(ours[1], hk, rtol=0, atol=1e-5)


def test_rope_keeps_lengths_and_scores_depend_on_the_offset():
    q, k = _randn(1, 1, 1, 8), _randn(1, 1, 1, 8, seed=1)
    rq = apply_rope(q, torch.tensor([5]), 100.0)
    torch.testing.assert_close(rq.norm(), q.norm())
    s1 = apply_rope(q, torch.tensor([7]), 100.0) @ apply_rope(k, torch.tensor([2]), 100.0).transpose(-2, -1)
    s2 = apply_rope(q, torch.tensor([107]), 100.0) @ apply_rope(k, torch.tensor([102]), 100.0).transpose(-2, -1)
    torch.testing.assert_close(s1, s2)


def test_the_two_rope_layouts_agree_once_the_features_are_permuted():
    x = _randn(2, 5, 8)  # (..., T, d_head)
    pos = torch.arange(5)
    perm = lambda t: permute_for_llama_cpp(t.transpose(0, -1), 1).transpose(0, -1)  # noqa: E731  features as rows
    torch.testing.assert_close(perm(apply_rope(x, pos, 1e4)), apply_rope_interleaved(perm(x), pos, 1e4))
    assert not torch.allclose(apply_rope(x, pos, 1e4), apply_rope_interleaved(x, pos, 1e4))


@pytest.mark.parametrize("T,S", [(5, 5), (2, 5), (1, 6), (1, 1)])
def test_grouped_attention_matches_sdpa_with_a_bottom_right_mask(T, S):
    q, k, v = _randn(2, 6, T, 4), _randn(2, 3, S, 4, seed=1), _randn(2, 3, S, 4, seed=2)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=decoder_mask(T, S), enable_gqa=True)
    torch.testing.assert_close(grouped_query_attention(q, k, v), ref, rtol=0, atol=1e-13)


def test_grouped_attention_names_the_shapes_it_rejects():
    with pytest.raises(ValueError, match=r"q \(1, 4, 3, 8\), k \(1, 3, 3, 8\)"):
        grouped_query_attention(_randn(1, 4, 3, 8), _randn(1, 3, 3, 8), _randn(1, 3, 3, 8))


def _hf_llama(weights):
    """transformers' LlamaForCausalLM with ``weights`` copied in (same dtype), eager attention."""
    from transformers import LlamaConfig, LlamaForCausalLM

    c = weights.config
    cfg = LlamaConfig(vocab_size=c.vocab_size, hidden_size=c.d_model, intermediate_size=c.d_ff,
                      num_hidden_layers=c.n_layers, num_attention_heads=c.n_heads, num_key_value_heads=c.n_kv_heads,
                      rms_norm_eps=c.eps, rope_theta=c.rope_base, tie_word_embeddings=True, max_position_embeddings=64,
                      attn_implementation="eager")
    model = LlamaForCausalLM(cfg).to(weights.embed.dtype).eval()
    model.load_state_dict(hf_state_dict(weights))
    return model


@pytest.mark.parametrize("cfg", [TINY_DECODER, DecoderConfig(vocab_size=20, d_model=24, n_layers=3, n_heads=6,
                                                             n_kv_heads=3, d_ff=40, rope_base=100.0, eps=1e-6)])
def test_the_decoder_matches_transformers_llama_layer_by_layer_in_float64(cfg):
    """Every block's output and the logits. transformers computes the rotary angles in float32 (u = 6e-8 relative),
    so values of order 10 through a few layers agree to about 1e-6, not 1e-12: 1e-5 leaves a margin."""
    w = random_decoder(3, cfg)
    ids = torch.randint(0, 20, (2, 9), generator=torch.Generator().manual_seed(0))
    model = _hf_llama(w)
    with torch.no_grad():
        out = model(input_ids=ids, output_hidden_states=True)
    ours = hidden_states(w, ids)  # (L+1, B, T, d)
    for l in range(cfg.n_layers):  # transformers' last hidden state is after the final norm
        torch.testing.assert_close(ours[l], out.hidden_states[l], rtol=0, atol=1e-5)
    torch.testing.assert_close(forward(w, ids)[0], out.logits, rtol=0, atol=1e-5)


def test_a_wrong_part_breaks_the_agreement():
    """The comparison can fail: the interleaved RoPE, or repeat for repeat_interleave, leave transformers."""
    w = random_decoder(4)
    ids = torch.randint(0, 20, (1, 6), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = _hf_llama(w)(input_ids=ids).logits
    assert torch.allclose(forward(w, ids)[0], ref, atol=1e-5)
    import attention_course.chapters.decoder.block as block_module

    original = block_module.apply_rope
    block_module.apply_rope = apply_rope_interleaved
    try:
        assert not torch.allclose(forward(w, ids)[0], ref, atol=1e-3)
    finally:
        block_module.apply_rope = original


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 8), st.integers(1, 3), st.integers(0, 100))
def test_the_cache_gives_the_logits_of_full_recomputation(split, batch, seed):
    w = random_decoder(5)
    ids = torch.randint(0, 20, (batch, 9), generator=torch.Generator().manual_seed(seed))
    full, full_cache = forward(w, ids)
    first, cache = forward(w, ids[:, :split], empty_cache(w.config, batch, torch.float64))
    rest, cache = forward(w, ids[:, split:], cache)
    torch.testing.assert_close(torch.cat([first, rest], dim=1), full, rtol=0, atol=1e-12)
    torch.testing.assert_close(cache, full_cache, rtol=0, atol=1e-12)


def test_no_position_reads_a_later_one():
    """Autograd, not the mask: d logits_i / d embedding_j is exactly zero for every j > i."""
    w = random_decoder(6)
    x = w.embed[torch.tensor([[1, 2, 3, 4, 5]])].clone().requires_grad_(True)
    positions = torch.arange(5)

    def run(h):
        for layer in w.layers:
            h = decoder_block(h, layer, w.config, positions)
        return h

    jac = torch.autograd.functional.jacobian(run, x)  # (1, 5, d, 1, 5, d)
    dep = jac.abs().sum(dim=(0, 2, 3, 5))  # (5 outputs, 5 inputs)
    lower = torch.ones(5, 5, dtype=torch.bool).tril()
    assert (dep[~lower] == 0).all() and (dep[lower] > 0).all()


def test_swiglu_is_silu_gate_times_up():
    w = random_decoder(7)
    x = _randn(2, 3, 16)
    layer = w.layers[0]
    torch.testing.assert_close(swiglu(x, layer), (F.silu(x @ layer.W_gate) * (x @ layer.W_up)) @ layer.W_down)


def test_sampling_rules_on_a_hand_worked_row():
    z = torch.log(torch.tensor([[0.4, 0.3, 0.2, 0.1]], dtype=torch.float64))
    torch.testing.assert_close(next_token_probs(z, 1.0, 2, 1.0), torch.tensor([[4 / 7, 3 / 7, 0, 0]], dtype=torch.float64))
    torch.testing.assert_close(next_token_probs(z, 1.0, 0, 0.75), torch.tensor([[4 / 9, 3 / 9, 2 / 9, 0]], dtype=torch.float64))
    p = next_token_probs(z, 0.5, 0, 1.0)  # p^2 normalised
    torch.testing.assert_close(p, z.exp() ** 2 / (z.exp() ** 2).sum())
    draws = torch.stack([sample(next_token_probs(z, 1.0, 2, 1.0), torch.Generator().manual_seed(s)) for s in range(200)])
    assert set(draws.flatten().tolist()) == {0, 1}


def test_next_token_loss_of_a_uniform_model_is_ln_v():
    assert math.isclose(float(next_token_loss(torch.zeros(2, 4, 9), torch.zeros(2, 4, dtype=torch.long))), math.log(9), rel_tol=1e-6)
