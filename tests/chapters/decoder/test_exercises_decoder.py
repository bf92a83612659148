"""Chapter 9's exercises: references, solutions and correct alternatives pass; every mutant gets its own
feedback; a battery of learner answers gets the right verdict; check never raises whatever comes back.

(tests/exercises/test_exercises.py runs the generic checks over every exercise too; chapter 9's battery is here.)
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attention_course.chapters.decoder import exercises as dx
from attention_course.chapters.decoder.model import forward
from attention_course.chapters.decoder.rope import apply_rope
from attention_course.course.solutions import SOLUTIONS
from attention_course.exercises import REGISTRY, evaluate

pytestmark = [pytest.mark.numerics, pytest.mark.usefixtures("one_torch_thread")]
IDS = list(dx.EXERCISES)
PASS = "passed"
ANY = ""  # any failure: the engine words the feedback of an unnamed mistake itself


def fb(eid, name):
    (m,) = [m for m in REGISTRY[eid].mutants if m.name == name]
    return m.feedback


def test_seven_exercises_registered_rated_and_solved():
    assert len(IDS) == 7 and set(IDS) <= set(REGISTRY) and set(IDS) <= set(SOLUTIONS)
    for eid in IDS:
        ex = REGISTRY[eid]
        assert ex.difficulty in (1, 2, 3) and 5 <= ex.minutes <= 30, eid
        assert len(ex.mutants) >= 6 and len({m.feedback for m in ex.mutants}) == len(ex.mutants), eid
        assert len(ex.alternatives) >= 2, eid


@pytest.mark.parametrize("eid", IDS)
def test_reference_solution_and_alternatives_pass_and_the_stub_is_not_attempted(eid):
    ex = REGISTRY[eid]
    for fn in (ex.reference, SOLUTIONS[eid], *ex.alternatives):
        result = evaluate(eid, fn)
        assert result.passed, (fn, result.message)

    def stub(*args):
        raise NotImplementedError

    result = evaluate(eid, stub)
    assert result.status == "not attempted" and "not implemented yet" in result.message


MUTANTS = [(eid, m) for eid in IDS for m in REGISTRY[eid].mutants]


@pytest.mark.parametrize("eid,mutant", MUTANTS, ids=[f"{e}:{m.name}" for e, m in MUTANTS])
def test_every_mutant_is_rejected_with_its_own_feedback(eid, mutant):
    result = evaluate(eid, mutant.fn)
    assert (result.status, result.message) == ("failed", mutant.feedback)


def test_the_check_tolerance_is_the_logit_estimate():
    assert 1e-3 < dx.FORWARD_ATOL < 5e-3  # 32 ((30 + 1) sqrt(1536) + sqrt(576)) 2^-24 = 2.4e-3


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


def _forward_tuple_list(weights, ids, cache):
    logits, c = forward(weights, ids, cache)
    return [logits, c]


def _forward_logits_only(weights, ids, cache):
    return forward(weights, ids, cache)[0]


def _forward_float64_inside(weights, ids, cache):
    logits, c = forward(weights.to(torch.float64), ids, cache.double())
    return logits, c


def _forward_untied_scale(weights, ids, cache):
    """Multiplies the embeddings by sqrt(d), as the original Transformer (and Gemma) do."""
    from dataclasses import replace

    scaled = replace(weights, embed=weights.embed * math.sqrt(weights.config.d_model))
    logits, c = forward(scaled, ids, cache)
    return logits / math.sqrt(weights.config.d_model), c


def _forward_only_new_cache(weights, ids, cache):
    """Returns a cache of the new positions only (forgot to keep the old ones)."""
    logits, c = forward(weights, ids, cache)
    return logits, c[..., cache.shape[4]:, :]


def _probs_numpy(logits, t, k, p):
    return SOLUTIONS["next-token-probs"](logits, t, k, p).numpy()


def _probs_logits_back(logits, t, k, p):
    """Returns log-probabilities, not probabilities."""
    return torch.log(SOLUTIONS["next-token-probs"](logits, t, k, p))


def _probs_top_k_off_by_one(logits, t, k, p):
    return SOLUTIONS["next-token-probs"](logits, t, k + 1 if k else 0, p)


def _loss_numpy_float(logits, ids):
    return float(SOLUTIONS["next-token-loss"](logits, ids))


def _loss_manual(logits, ids):
    lse = torch.logsumexp(logits[:, :-1], -1)  # (B, T-1)
    picked = logits[:, :-1].gather(-1, ids[:, 1:, None])[..., 0]
    return (lse - picked).mean()


def _loss_per_sequence_mean(logits, ids):
    """Mean over the sequences of each sequence's mean: the same as the overall mean when every sequence has T - 1 predictions."""
    V = logits.shape[-1]
    per = F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1), reduction="none")
    return per.reshape(ids.shape[0], -1).mean(1).mean()


BATTERY = [
    ("rms-norm", "F.rms_norm", lambda x, w, eps: F.rms_norm(x, (x.shape[-1],), w, eps), PASS),
    ("rms-norm", "rsqrt", lambda x, w, eps: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w, PASS),
    ("rms-norm", "vector norm", dx._rms_norm_of_vector, PASS),
    ("rms-norm", "numpy array", _rms_numpy, "expected a torch tensor"),
    ("rms-norm", "in place", _rms_in_place, "changed its input in place"),
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
    ("decoder-block", "GELU gate", dx._block_variant(act="gelu"), fb("decoder-block", "gelu-gate")),
    ("decoder-forward", "one token at a time", dx._forward_loop, PASS),
    ("decoder-forward", "preallocated cache", dx._forward_recompute, PASS),
    ("decoder-forward", "the package's", forward, PASS),
    ("decoder-forward", "a list", _forward_tuple_list, "return a tuple instead"),
    ("decoder-forward", "logits only", _forward_logits_only, "expected a tuple of 2 results (logits, cache)"),
    ("decoder-forward", "float64 inside", _forward_float64_inside, ANY),
    ("decoder-forward", "embeddings scaled by sqrt(d)", _forward_untied_scale, ANY),
    ("decoder-forward", "the new positions' cache only", _forward_only_new_cache, "expected shape"),
    ("decoder-forward", "positions restart", dx._forward_variant(positions="restart"), fb("decoder-forward", "positions-restart")),
    ("decoder-forward", "no final norm", dx._forward_variant(final_norm=False), fb("decoder-forward", "no-final-norm")),
    ("next-token-probs", "a loop", dx._probs_sorted_loop, PASS),
    ("next-token-probs", "transformers-style warpers", dx._probs_hf_style, PASS),
    ("next-token-probs", "the package's", dx.next_token_probs, PASS),
    ("next-token-probs", "numpy result", _probs_numpy, "expected a torch tensor"),
    ("next-token-probs", "log-probabilities", _probs_logits_back, ANY),
    ("next-token-probs", "top-k off by one", _probs_top_k_off_by_one, ANY),
    ("next-token-probs", "multiplied temperature", dx._probs_variant(temperature="multiply"),
     fb("next-token-probs", "temperature-multiplied")),
    ("next-token-probs", "nucleus without the crossing token", dx._probs_variant(crossing=False),
     fb("next-token-probs", "top-p-drops-crossing-token")),
    ("next-token-loss", "log_softmax and gather", dx._loss_log_softmax, PASS),
    ("next-token-loss", "logsumexp", _loss_manual, PASS),
    ("next-token-loss", "mean of per-sequence means", _loss_per_sequence_mean, PASS),
    ("next-token-loss", "a loop", dx._loss_loop, PASS),
    ("next-token-loss", "a Python float", _loss_numpy_float, "a float"),
    ("next-token-loss", "no shift", dx._loss_variant("no-shift"), fb("next-token-loss", "no-shift")),
    ("next-token-loss", "the wrong way", dx._loss_variant("backwards"), fb("next-token-loss", "shifted-backwards")),
    ("next-token-loss", "bits", dx._loss_variant("bits"), fb("next-token-loss", "bits")),
    ("next-token-loss", "the sum", dx._loss_variant("sum"), fb("next-token-loss", "sum-not-mean")),
]


@pytest.mark.parametrize("eid,label,fn,expect", BATTERY, ids=[f"{b[0]}:{b[1]}" for b in BATTERY])
def test_learner_answer_gets_the_right_verdict(eid, label, fn, expect):
    result = evaluate(eid, fn)
    if expect == PASS:
        assert result.passed, result.message
    else:
        assert result.status == "failed", result.message
        assert expect in result.message, result.message


@pytest.mark.parametrize("eid", IDS)
def test_every_exercise_has_a_battery(eid):
    answers = [b for b in BATTERY if b[0] == eid]
    right = [b for b in answers if b[3] == PASS]
    assert len(answers) >= 8 and len(right) >= 3 and len(answers) - len(right) >= 5, eid
