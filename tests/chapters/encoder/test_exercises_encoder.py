"""Chapter 8's exercises: a battery of learner answers gets the right verdict, and the messages that need
chapter 8's own cases (the first layer and position that leave MiniLM, padding told apart) say so.

(tests/exercises/test_exercises.py runs the generic checks over every exercise too; its answer battery,
tests/exercises/test_exercise_battery.py, lists chapters 1-6 only, so chapter 8's battery is here.)
"""

from __future__ import annotations

import math
import sys

import pytest
import torch

from attention_course.chapters.encoder import exercises as bx
from attention_course.chapters.encoder.assemble import encode
from attention_course.models.encoder import bert_encode
from attention_course.chapters.encoder.feed_forward import GELU_GAP
from attention_course.course import solutions
from attention_course.course.solutions import SOLUTIONS
from attention_course.exercises import check, evaluate
from exercise_battery import ANY, PASS, assert_rated_and_solved, battery_tests, fb

pytestmark = [pytest.mark.numerics, pytest.mark.usefixtures("one_torch_thread")]
IDS = list(bx.EXERCISES)


def test_seven_exercises_registered_rated_and_solved():
    assert 3 <= len(IDS) <= 7
    assert_rated_and_solved(IDS, min_mutants=5)


# The references, solutions, correct alternatives, stubs and every mutant's own feedback are tested for every
# exercise, chapter 8's included, in tests/exercises/test_exercises.py (not repeated here: each chapter-8
# check runs MiniLM or a tiny BERT, and the suite's time is shared).


def test_the_tanh_gelu_feedback_says_which_gelu_and_how_far():
    message = fb("bert-encoder", "tanh-gelu")
    assert "tanh GELU" in message and "erf" in message and f"{GELU_GAP:.1e}" in message
    assert "pre-LN block" in fb("post-ln-block", "pre-ln")


# ------------------------------------------------------------------ a battery of learner answers
def _t(*s):
    return torch.randn(*s, dtype=torch.float64)


def _attention_loop(x, layer, num_heads, mask):
    """One head at a time, in a Python loop."""
    B, T, d = x.shape
    d_k = d // num_heads
    q, k, v = x @ layer.W_q + layer.b_q, x @ layer.W_k + layer.b_k, x @ layer.W_v + layer.b_v
    heads, maps = [], []
    m = mask.expand(B, num_heads, T, T)
    for i in range(num_heads):
        cols = slice(i * d_k, (i + 1) * d_k)
        s = q[..., cols] @ k[..., cols].transpose(-2, -1) / math.sqrt(d_k)  # (B, T, T)
        w = torch.softmax(s.masked_fill(~m[:, i], -math.inf), dim=-1)
        heads.append(w @ v[..., cols])
        maps.append(w)
    return torch.cat(heads, dim=-1) @ layer.W_o + layer.b_o, torch.stack(maps, dim=1)


def _attention_additive_mask(x, layer, num_heads, mask):
    """The mask as an additive float (0 / -inf), as transformers builds it."""
    out, w = SOLUTIONS["bert-attention"](x, layer, num_heads, torch.ones_like(mask))
    B, T, d = x.shape
    d_k = d // num_heads
    split = lambda t: t.reshape(B, T, num_heads, d_k).transpose(1, 2)  # noqa: E731
    q, k, v = (split(x @ W + b) for W, b in ((layer.W_q, layer.b_q), (layer.W_k, layer.b_k), (layer.W_v, layer.b_v)))
    bias = torch.zeros(mask.shape, dtype=x.dtype).masked_fill(~mask, -math.inf)
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d_k) + bias, dim=-1)
    return (w @ v).transpose(1, 2).reshape(B, T, d) @ layer.W_o + layer.b_o, w


def _attention_minus_1e9(x, layer, num_heads, mask):
    B, T, d = x.shape
    d_k = d // num_heads
    split = lambda t: t.reshape(B, T, num_heads, d_k).transpose(1, 2)  # noqa: E731
    q, k, v = (split(x @ W + b) for W, b in ((layer.W_q, layer.b_q), (layer.W_k, layer.b_k), (layer.W_v, layer.b_v)))
    w = torch.softmax((q @ k.transpose(-2, -1) / math.sqrt(d_k)).masked_fill(~mask, -1e9), dim=-1)
    return (w @ v).transpose(1, 2).reshape(B, T, d) @ layer.W_o + layer.b_o, w


def _attention_float32(x, layer, num_heads, mask):
    out, w = SOLUTIONS["bert-attention"](x, layer, num_heads, mask)
    return out.float(), w.float()


def _attention_weights_only(x, layer, num_heads, mask):
    return SOLUTIONS["bert-attention"](x, layer, num_heads, mask)[1]


def _block_written_out(x, layer, num_heads, mask, eps):
    attn, _ = SOLUTIONS["bert-attention"](x, layer, num_heads, mask)
    ln = solutions.layer_norm
    a = ln(attn + x, layer.ln1_weight, layer.ln1_bias, eps)
    return ln(solutions.feed_forward(a, layer) + a, layer.ln2_weight, layer.ln2_bias, eps)


def _block_torch_eps(x, layer, num_heads, mask, eps):
    """torch's LayerNorm default eps, 1e-5, instead of the one passed in."""
    return bx.torch_encoder_layer(x, layer, num_heads, mask, 1e-5)


def _encoder_tuple(weights, input_ids, attention_mask):
    return tuple(SOLUTIONS["bert-encoder"](weights, input_ids, attention_mask))


def _encoder_last_only(weights, input_ids, attention_mask):
    return SOLUTIONS["bert-encoder"](weights, input_ids, attention_mask)[-1]


def _encoder_without_embeddings(weights, input_ids, attention_mask):
    return SOLUTIONS["bert-encoder"](weights, input_ids, attention_mask)[1:]


def _encoder_unbiased_ln(weights, input_ids, attention_mask):
    """A LayerNorm with torch's default (unbiased) x.var(): caught at the embeddings, layer 0."""
    def ln(x, g, b, eps):
        return g * (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + eps) + b

    mask = attention_mask.bool()[:, None, None, :]
    T = input_ids.shape[1]
    x = ln(weights.word_embeddings[input_ids] + weights.position_embeddings[:T] + weights.token_type_embeddings[0],
           weights.ln_weight, weights.ln_bias, weights.layer_norm_eps)
    hidden = [x]
    for L in weights.layers:
        a = ln(x + SOLUTIONS["bert-attention"](x, L, weights.num_heads, mask)[0], L.ln1_weight, L.ln1_bias,
               weights.layer_norm_eps)
        x = ln(a + solutions.feed_forward(a, L), L.ln2_weight, L.ln2_bias, weights.layer_norm_eps)
        hidden.append(x)
    return torch.stack(hidden)


def _encoder_last_layer_off(weights, input_ids, attention_mask):
    """Skips the last block's feed-forward: every state agrees until the last layer."""
    h = SOLUTIONS["bert-encoder"](weights, input_ids, attention_mask).clone()
    if len(weights.layers) > 1:
        L = weights.layers[-1]
        mask = attention_mask.bool()[:, None, None, :]
        a = solutions.layer_norm(h[-2] + SOLUTIONS["bert-attention"](h[-2], L, weights.num_heads, mask)[0],
                                    L.ln1_weight, L.ln1_bias, weights.layer_norm_eps)
        h[-1] = solutions.layer_norm(a, L.ln2_weight, L.ln2_bias, weights.layer_norm_eps)
    return h


def _encoder_float64_inside(weights, input_ids, attention_mask):
    """Runs MiniLM in float64 and returns float64 states: more precise than the float32 reference."""
    return SOLUTIONS["bert-encoder"](weights.to(torch.float64), input_ids, attention_mask)


BATTERY = [
    ("bert-attention", "a loop over heads", _attention_loop, PASS),
    ("bert-attention", "an additive -inf mask", _attention_additive_mask, PASS),
    ("bert-attention", "masked with -1e9", _attention_minus_1e9, PASS),
    ("bert-attention", "float32 results", _attention_float32, "float32 but the inputs are float64"),
    ("bert-attention", "the weights only", _attention_weights_only, "expected a tuple of 2 results"),
    ("bert-attention", "forgot every bias", bx._attention_variant(biases="none"), fb("bert-attention", "no-biases")),
    ("bert-attention", "the package's attention", lambda *a: bx.self_attention(*a), "you called the package's attention"),
    ("bert-attention", "sqrt(d_model)", bx._attention_variant(scale="d_model"), fb("bert-attention", "scale-by-d-model")),
    ("bert-attention", "no mask", bx._attention_variant(masking="none"), fb("bert-attention", "mask-ignored")),
    ("post-ln-block", "written out", _block_written_out, PASS),
    ("post-ln-block", "keyword arguments and torch.add", lambda x, L, h, m, eps: bx.layer_norm(
        torch.add(bx.layer_norm(torch.add(x, bx.self_attention(x=x, layer=L, num_heads=h, mask=m)[0]), L.ln1_weight,
                                L.ln1_bias, eps), bx.feed_forward(bx.layer_norm(x + bx.self_attention(x, L, h, m)[0],
                                                                                L.ln1_weight, L.ln1_bias, eps), L)),
        L.ln2_weight, L.ln2_bias, eps), PASS),
    ("post-ln-block", "nn.TransformerEncoderLayer (forbidden)", bx.torch_encoder_layer, "you called a whole encoder layer"),
    ("post-ln-block", "the package's block (forbidden)", lambda x, L, h, m, eps: bx.block(x, L, h, m, eps),
     "you called a whole encoder layer"),
    ("post-ln-block", "the learner's own parts", bx._block_learners_parts, PASS),
    ("post-ln-block", "pre-LN", bx._block_variant(order="pre"), fb("post-ln-block", "pre-ln")),
    ("post-ln-block", "torch's default eps", _block_torch_eps, "you called a whole encoder layer"),
    ("post-ln-block", "eps 1e-5 written in", bx._block_variant(eps_fixed=1e-5), fb("post-ln-block", "eps-hard-coded")),
    ("post-ln-block", "eps 1e-12 written in", lambda x, L, h, m, eps: bx._ln(
        (a := bx._ln(x + bx._attend(x, L, h, m), L, 1, 1e-12)) + bx.feed_forward(a, L), L, 2, 1e-12),
     fb("post-ln-block", "eps-fixed-1e-12")),
    # a newcomer's answer: 1e-12 written into one LayerNorm only was first reported as a float32 step
    ("post-ln-block", "eps 1e-12 written into the first LayerNorm only", lambda x, L, h, m, eps: bx._ln(
        (a := bx._ln(x + bx._attend(x, L, h, m), L, 1, 1e-12)) + bx.feed_forward(a, L), L, 2, eps),
     fb("post-ln-block", "eps-1e-12-in-ln1-only")),
    ("post-ln-block", "eps 1e-12 written into the second LayerNorm only", lambda x, L, h, m, eps: bx._ln(
        (a := bx._ln(x + bx._attend(x, L, h, m), L, 1, eps)) + bx.feed_forward(a, L), L, 2, 1e-12),
     fb("post-ln-block", "eps-1e-12-in-ln2-only")),
    ("post-ln-block", "no residuals at all",
     lambda x, L, h, m, eps: bx._ln(bx.feed_forward(bx._ln(bx._attend(x, L, h, m), L, 1, eps), L), L, 2, eps), ANY),
    ("post-ln-block", "swapped LayerNorms", bx._block_variant(ln_1=2, ln_2=1), fb("post-ln-block", "layer-norms-swapped")),
    ("post-ln-block", "the attention tuple added", lambda x, L, h, m, eps: x + bx.self_attention(x, L, h, m)[1].sum(),
     ANY),
    ("bert-encoder", "models/encoder.py's bert_encode (forbidden)", lambda *a: torch.stack(bert_encode(*a).hidden_states),
     "you called the package's encoder"),
    ("bert-encoder", "written out on own parts", bx._encoder_written_out, PASS),
    ("bert-encoder", "float64 inside", _encoder_float64_inside, "float64 but the inputs are float32"),
    ("bert-encoder", "float64 inside, float32 out", lambda *a: _encoder_float64_inside(*a).to(a[0].word_embeddings.dtype), PASS),
    ("bert-encoder", "one sequence at a time", bx._encoder_loop_by_sequence, PASS),
    ("bert-encoder", "a tuple of states", _encoder_tuple, "torch.stack(hidden)"),
    ("bert-encoder", "the last layer only", _encoder_last_only, "expected shape"),
    ("bert-encoder", "no embeddings in the stack", _encoder_without_embeddings, "You left the embeddings out of the stack"),
    ("bert-encoder", "unbiased variance", _encoder_unbiased_ln, "first leave the reference at layer 0"),
    ("bert-encoder", "last block without its feed-forward", _encoder_last_layer_off, "first leave the reference at layer 2"),
    ("bert-encoder", "pre-LN", bx._encoder_variant(norm="pre"), fb("bert-encoder", "pre-ln")),
    ("bert-encoder", "tanh GELU", bx._encoder_variant(gelu_kind="tanh"), fb("bert-encoder", "tanh-gelu")),
    ("bert-encoder", "eps 1e-5 written in", bx._encoder_variant(eps_fixed=1e-5), fb("bert-encoder", "eps-hard-coded")),
    ("bert-encoder", "no padding mask", bx._encoder_variant(mask="none"), fb("bert-encoder", "padding-ignored")),
]


test_learner_answer_gets_the_right_verdict, test_every_exercise_has_a_battery = battery_tests(BATTERY, IDS)


def test_the_encoder_check_names_the_first_layer_sequence_and_position():
    message = evaluate("bert-encoder", _encoder_last_layer_off).message
    assert "layer 2 (after block 2), sequence 0, position 0" in message and "far above float64 round-off" in message
    assert "from layer 1 to layer 2" in message


def test_the_encoder_check_names_minilms_word_piece():
    """On the MiniLM case the position is named by its word piece."""
    def off_on_minilm(weights, input_ids, attention_mask):
        h = SOLUTIONS["bert-encoder"](weights, input_ids, attention_mask).clone()
        if weights.word_embeddings.shape[0] == 30522:
            h[4, 1, 3] += 0.01  # layer 4, the second sentence, its fourth token
        return h

    message = evaluate("bert-encoder", off_on_minilm).message
    assert "layer 4 (after block 4), sequence 1, position 3 (token 'sat')" in message, message
    assert message.endswith("(case 'MiniLM's own weights (float32), two sentences of different lengths, against transformers')")


def test_the_encoder_check_tells_padding_apart():
    message = evaluate("bert-encoder", bx._encoder_variant(mask="queries-too")).message
    assert message == fb("bert-encoder", "queries-masked-too")

    def zero_padding(weights, input_ids, attention_mask):
        return SOLUTIONS["bert-encoder"](weights, input_ids, attention_mask) * attention_mask[None, :, :, None]

    assert evaluate("bert-encoder", zero_padding).message == fb("bert-encoder", "padding-zeroed")

    def padding_off(weights, input_ids, attention_mask):  # states off at padding only, by no known mistake
        return SOLUTIONS["bert-encoder"](weights, input_ids, attention_mask) + 0.5 * (1 - attention_mask)[None, :, :, None]

    assert "agree at every real token but not at padding" in evaluate("bert-encoder", padding_off).message


# Check-never-raises (odd returns, exceptions, NaN, in-place writes) is tested for every registered
# exercise, chapter 8's included, in tests/exercises/test_exercises.py and test_exercise_battery.py.


def test_a_change_in_place_to_minilms_weights_is_named_and_undone():
    """MiniLM's weights are passed to the learner without a copy (22 million numbers, every check): a change in
    place is still seen (by a fingerprint of the bits) and named, and the weights are restored for the next check."""
    def scales_a_weight(weights, input_ids, attention_mask):
        out = SOLUTIONS["bert-encoder"](weights, input_ids, attention_mask)
        if weights.word_embeddings.dtype == torch.float32:
            weights.layers[2].W_q.mul_(1.0001)
        return out

    message = evaluate("bert-encoder", scales_a_weight).message
    assert "changed its argument `weights` in place" in message and "MiniLM's own weights" in message
    assert evaluate("bert-encoder", SOLUTIONS["bert-encoder"]).passed
