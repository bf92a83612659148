"""Chapter 9's exercises (the decoder's parts): registered, rated and solved; a battery of learner answers
gets the right verdict; check never raises whatever comes back.

(tests/exercises/test_exercises.py runs the generic checks over every exercise: the reference, solution and
alternatives pass, the stub is not attempted, every mutant gets its own feedback; chapter 9's battery is here.)
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attention_course.chapters.decoder import exercises as dx
from attention_course.chapters.decoder.rope import apply_rope
from attention_course.course.solutions import SOLUTIONS
from attention_course.exercises import evaluate
from exercise_battery import ANY, PASS, assert_rated_and_solved, battery_tests, fb

pytestmark = [pytest.mark.numerics, pytest.mark.usefixtures("one_torch_thread")]
IDS = list(dx.EXERCISES)


def test_four_exercises_registered_rated_and_solved():
    assert len(IDS) == 4
    assert_rated_and_solved(IDS, min_mutants=6)


# ------------------------------------------------------------------ a battery of learner answers
def _rms_numpy(x, weight, eps):
    a = x.numpy()
    return a / np.sqrt((a**2).mean(-1, keepdims=True) + eps) * weight.numpy()


def _rms_in_place(x, weight, eps):
    x /= torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return x * weight


def _rms_float32(x, weight, eps):
    return SOLUTIONS["rms-norm"](x, weight, eps).float()


def _rope_sin_cos_swapped(x, positions, base):
    d = x.shape[-1]
    a = positions.to(x.dtype)[:, None] * base ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)
    a = torch.cat([a, a], -1)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * a.sin() + torch.cat([-x2, x1], -1) * a.cos()


def _rope_half_angle_halves(x, positions, base):
    """Each half with its own frequencies: pair i uses base^(-i/d) for i in 0..d-1 split in two (a plausible misreading)."""
    d = x.shape[-1]
    a = positions.to(x.dtype)[:, None] * base ** (-torch.arange(d, dtype=x.dtype) / d)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * a.cos() + torch.cat([-x2, x1], -1) * a.sin()


def _rope_numpy(x, positions, base):
    return apply_rope(x, positions, base).numpy()


def _gqa_expand(q, k, v):
    B, h, T, d = q.shape
    h_kv, S = k.shape[1], k.shape[2]
    g = h // h_kv
    k = k[:, :, None].expand(B, h_kv, g, S, d).reshape(B, h, S, d)  # (B, h, S, d): 0,0,1,1
    v = v[:, :, None].expand(B, h_kv, g, S, d).reshape(B, h, S, d)
    s = (q @ k.transpose(-2, -1) / math.sqrt(d)).masked_fill(torch.ones(T, S, dtype=torch.bool).tril(S - T) == 0, -math.inf)
    return torch.softmax(s, -1) @ v


def _gqa_minus_1e9(q, k, v):
    B, h, T, d = q.shape
    S = k.shape[2]
    g = h // k.shape[1]
    s = q @ k.repeat_interleave(g, 1).transpose(-2, -1) / math.sqrt(d)
    s = s.masked_fill(~torch.ones(T, S, dtype=torch.bool).tril(S - T), -1e9)
    return torch.softmax(s, -1) @ v.repeat_interleave(g, 1)


def _gqa_is_causal_sdpa(q, k, v):
    """SDPA's is_causal aligns at the top-left: wrong once S > T."""
    g = q.shape[1] // k.shape[1]
    return F.scaled_dot_product_attention(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1), is_causal=True)


def _gqa_weights_too(q, k, v):
    return SOLUTIONS["grouped-attention"](q, k, v), None


def _block_sdpa(x, layer, cfg, positions):
    return dx._block_written_out(x, layer, cfg, positions)


def _block_no_gate(x, layer, cfg, positions):
    """The feed-forward without its gate: a + silu(RMSNorm(a) W_up) W_down."""
    d = x.shape[-1]
    xn = F.rms_norm(x, (d,), layer.attn_norm, cfg.eps)
    B, T, _ = x.shape
    q = apply_rope((xn @ layer.W_q).view(B, T, cfg.n_heads, cfg.d_head).transpose(1, 2), positions, cfg.rope_base)
    k = apply_rope((xn @ layer.W_k).view(B, T, cfg.n_kv_heads, cfg.d_head).transpose(1, 2), positions, cfg.rope_base)
    v = (xn @ layer.W_v).view(B, T, cfg.n_kv_heads, cfg.d_head).transpose(1, 2)
    a = x + dx._gqa_sdpa(q, k, v).transpose(1, 2).reshape(B, T, d) @ layer.W_o
    an = F.rms_norm(a, (d,), layer.mlp_norm, cfg.eps)
    return a + F.silu(an @ layer.W_up) @ layer.W_down


def _block_eps_fixed(x, layer, cfg, positions):
    """A hard-coded eps of 1e-5 (the default of many libraries) instead of config.eps."""
    from dataclasses import replace

    return SOLUTIONS["decoder-block"](x, layer, replace(cfg, eps=1e-5), positions)


def _block_float32(x, layer, cfg, positions):
    return SOLUTIONS["decoder-block"](x, layer, cfg, positions).float()


def _attention_branch(xn, layer, cfg, positions):
    """The lesson's attention_branch (step 3's attention at any positions), as a learner has it on the page."""
    B, T, _ = xn.shape
    q = (xn @ layer.W_q).view(B, T, cfg.n_heads, cfg.d_head).transpose(1, 2)
    k = (xn @ layer.W_k).view(B, T, cfg.n_kv_heads, cfg.d_head).transpose(1, 2)
    v = (xn @ layer.W_v).view(B, T, cfg.n_kv_heads, cfg.d_head).transpose(1, 2)
    q, k = apply_rope(q, positions, cfg.rope_base), apply_rope(k, positions, cfg.rope_base)
    return dx._gqa_sdpa(q, k, v).transpose(1, 2).reshape(B, T, -1) @ layer.W_o


def _swiglu(z, layer):
    return (F.silu(z @ layer.W_gate) * (z @ layer.W_up)) @ layer.W_down


def _block_learner_pre_norm(x, layer, cfg, positions):
    """The right block, written the way the lesson's hints put it."""
    a = x + _attention_branch(F.rms_norm(x, (x.shape[-1],), layer.attn_norm, cfg.eps), layer, cfg, positions)
    return a + _swiglu(F.rms_norm(a, (x.shape[-1],), layer.mlp_norm, cfg.eps), layer)


def _block_learner_output_renormalised(x, layer, cfg, positions):
    """A third blind reader's planted mistake: pre-norm branches, then the sum normalised again (BERT's habit)."""
    d = x.shape[-1]
    a = x + _attention_branch(F.rms_norm(x, (d,), layer.attn_norm, cfg.eps), layer, cfg, positions)
    y = a + _swiglu(F.rms_norm(a, (d,), layer.mlp_norm, cfg.eps), layer)
    return F.rms_norm(y, (d,), layer.mlp_norm, cfg.eps)


def _block_learner_bert_order(x, layer, cfg, positions):
    """Chapter 8's post-norm order with RMSNorm: normalise each sum, the branches read the stream as it is."""
    d = x.shape[-1]
    a = F.rms_norm(x + _attention_branch(x, layer, cfg, positions), (d,), layer.attn_norm, cfg.eps)
    return F.rms_norm(a + _swiglu(a, layer), (d,), layer.mlp_norm, cfg.eps)


def _block_learner_post_norm_attention(x, layer, cfg, positions):
    """Post-norm in the attention half only."""
    d = x.shape[-1]
    a = F.rms_norm(x + _attention_branch(x, layer, cfg, positions), (d,), layer.attn_norm, cfg.eps)
    return a + _swiglu(F.rms_norm(a, (d,), layer.mlp_norm, cfg.eps), layer)


BATTERY = [
    ("rms-norm", "F.rms_norm", lambda x, w, eps: F.rms_norm(x, (x.shape[-1],), w, eps), PASS),
    ("rms-norm", "rsqrt", lambda x, w, eps: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w, PASS),
    ("rms-norm", "vector norm", dx._rms_norm_of_vector, PASS),
    ("rms-norm", "numpy array", _rms_numpy, "expected a torch tensor"),
    ("rms-norm", "in place", _rms_in_place, "changed its argument `x` in place"),
    ("rms-norm", "float32", _rms_float32, "float32 but the inputs are float64"),
    ("rms-norm", "LayerNorm", lambda x, w, eps: F.layer_norm(x, (x.shape[-1],), w, None, eps), fb("rms-norm", "subtracts-mean")),
    ("rms-norm", "x.norm without 1/d", lambda x, w, eps: x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + eps) * w,
     fb("rms-norm", "sum-not-mean")),
    ("rms-norm", "over every axis", lambda x, w, eps: x / torch.sqrt(x.pow(2).mean() + eps) * w, ANY),
    ("rope", "complex numbers", dx._rope_complex, PASS),
    ("rope", "a loop", dx._rope_loop, PASS),
    ("rope", "the package's", apply_rope, PASS),
    ("rope", "numpy result", _rope_numpy, "expected a torch tensor"),
    ("rope", "interleaved pairs", dx.apply_rope_interleaved, fb("rope", "interleaved-pairs")),
    ("rope", "sin and cos swapped", _rope_sin_cos_swapped, ANY),
    ("rope", "d frequencies", _rope_half_angle_halves, ANY),
    ("rope", "positions ignored", dx._rope_variant(positions_mode="arange"), fb("rope", "positions-ignored")),
    ("grouped-attention", "expand and reshape", _gqa_expand, PASS),
    ("grouped-attention", "-1e9 mask", _gqa_minus_1e9, PASS),
    ("grouped-attention", "SDPA with a bottom-right mask", dx._gqa_sdpa, PASS),
    ("grouped-attention", "SDPA is_causal", _gqa_is_causal_sdpa, fb("grouped-attention", "mask-top-left")),
    ("grouped-attention", "a tuple", _gqa_weights_too, "expected a torch tensor"),
    ("grouped-attention", "repeat", dx._gqa_variant(repeat="repeat"), fb("grouped-attention", "repeat-not-interleave")),
    ("grouped-attention", "no mask", dx._gqa_variant(mask="none"), fb("grouped-attention", "no-causal-mask")),
    ("grouped-attention", "no scale", dx._gqa_variant(scale="none"), fb("grouped-attention", "no-scale")),
    ("decoder-block", "written out with SDPA", _block_sdpa, PASS),
    ("decoder-block", "F.linear", dx._block_linear, PASS),
    ("decoder-block", "the package's", dx.decoder_block, PASS),
    ("decoder-block", "no gate", _block_no_gate, ANY),
    ("decoder-block", "eps hard-coded to 1e-5", _block_eps_fixed, ANY),
    ("decoder-block", "float32", _block_float32, "float32 but the inputs are float64"),
    ("decoder-block", "post-norm", dx._block_variant(order="post"), fb("decoder-block", "post-norm")),
    ("decoder-block", "pre-norm, as the hints put it", _block_learner_pre_norm, PASS),
    ("decoder-block", "the sum normalised again", _block_learner_output_renormalised, fb("decoder-block", "output-renormalised")),
    ("decoder-block", "BERT's post-norm order", _block_learner_bert_order, fb("decoder-block", "post-norm")),
    ("decoder-block", "post-norm attention half", _block_learner_post_norm_attention, fb("decoder-block", "attention-post-norm")),
    ("decoder-block", "GELU gate", dx._block_variant(act="gelu"), fb("decoder-block", "gelu-gate")),
]


test_learner_answer_gets_the_right_verdict, test_every_exercise_has_a_battery = battery_tests(BATTERY, IDS)


POST_NORM_SHAPES = [_block_learner_output_renormalised, _block_learner_bert_order, _block_learner_post_norm_attention,
                    dx._block_variant(order="sandwich"), dx._block_variant(order="post-mlp")]


@pytest.mark.parametrize("fn", POST_NORM_SHAPES, ids=lambda f: getattr(f, "__name__", "variant"))
def test_a_post_norm_block_is_named_as_such(fn):
    """Every way of normalising after the residual add gets a message that says so, never only numbers."""
    result = evaluate("decoder-block", fn)
    assert result.status == "failed", result.message
    assert "normalised after adding the residual" in result.message and "pre-norm block normalises" in result.message, result.message
    assert "should be" not in result.message, result.message


def test_the_post_norm_message_does_not_fire_on_a_pre_norm_block():
    result = evaluate("decoder-block", _block_learner_pre_norm)
    assert result.passed and "normalised after adding" not in result.message, result.message
