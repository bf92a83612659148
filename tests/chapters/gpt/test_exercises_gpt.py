"""Chapter 10's exercises (the decoder with a cache, sampling, the loss): registered, rated and solved; a battery of learner answers
gets the right verdict; check never raises whatever comes back.

(tests/exercises/test_exercises.py runs the generic checks over every exercise: the reference, solution and
alternatives pass, the stub is not attempted, every mutant gets its own feedback; chapter 10's battery is here.)
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attention_course.chapters.decoder.model import forward
from attention_course.chapters.gpt import exercises as gx
from attention_course.course.solutions import SOLUTIONS
from exercise_battery import ANY, PASS, assert_rated_and_solved, battery_tests, fb

pytestmark = [pytest.mark.numerics, pytest.mark.usefixtures("one_torch_thread")]
IDS = list(gx.EXERCISES)


def test_three_exercises_registered_rated_and_solved():
    assert len(IDS) == 3
    assert_rated_and_solved(IDS, min_mutants=6)


def test_the_check_tolerance_is_the_logit_estimate():
    assert 1e-3 < gx.FORWARD_ATOL < 5e-3  # 32 ((30 + 1) sqrt(1536) + sqrt(576)) 2^-24 = 2.4e-3


# ------------------------------------------------------------------ a battery of learner answers
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


def _probs_top_k_strict(logits, t, k, p):
    """A learner's top-k that keeps the logits above the k-th largest (z > kth): k - 1 tokens."""
    if t == 0 or not 0 < k < logits.shape[-1]:
        return SOLUTIONS["next-token-probs"](logits, t, k, p)
    z = logits / t
    z = z.masked_fill(z <= torch.topk(z, k).values[..., -1:], -math.inf)  # drops the k-th itself
    return SOLUTIONS["next-token-probs"](z, 1.0, 0, p)


def _probs_top_k_exactly_k(logits, t, k, p):
    """A learner's top-k that keeps exactly k tokens (torch.topk's indices): right except at a tie with the k-th."""
    if t == 0 or not 0 < k < logits.shape[-1]:
        return SOLUTIONS["next-token-probs"](logits, t, k, p)
    z = logits / t
    keep = torch.zeros_like(z, dtype=torch.bool).scatter(-1, torch.topk(z, k).indices, True)
    return SOLUTIONS["next-token-probs"](z.masked_fill(~keep, -math.inf), 1.0, 0, p)


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
    ("decoder-forward", "one token at a time", gx._forward_loop, PASS),
    ("decoder-forward", "preallocated cache", gx._forward_recompute, PASS),
    ("decoder-forward", "the package's", forward, PASS),
    ("decoder-forward", "a list", _forward_tuple_list, "return a tuple instead"),
    ("decoder-forward", "logits only", _forward_logits_only, "expected a tuple of 2 results (logits, cache)"),
    ("decoder-forward", "float64 inside", _forward_float64_inside, ANY),
    ("decoder-forward", "embeddings scaled by sqrt(d)", _forward_untied_scale, ANY),
    ("decoder-forward", "the new positions' cache only", _forward_only_new_cache, "expected shape"),
    ("decoder-forward", "positions restart", gx._forward_variant(positions="restart"), fb("decoder-forward", "positions-restart")),
    ("decoder-forward", "no final norm", gx._forward_variant(final_norm=False), fb("decoder-forward", "no-final-norm")),
    ("next-token-probs", "a loop", gx._probs_sorted_loop, PASS),
    ("next-token-probs", "transformers-style warpers", gx._probs_hf_style, PASS),
    ("next-token-probs", "the package's", gx.next_token_probs, PASS),
    ("next-token-probs", "numpy result", _probs_numpy, "expected a torch tensor"),
    ("next-token-probs", "log-probabilities", _probs_logits_back, ANY),
    ("next-token-probs", "top-k off by one", _probs_top_k_off_by_one, ANY),
    ("next-token-probs", "top-k keeps k - 1 (z > kth)", _probs_top_k_strict, fb("next-token-probs", "top-k-drops-kth")),
    ("next-token-probs", "top-k keeps exactly k at a tie", _probs_top_k_exactly_k, fb("next-token-probs", "top-k-drops-ties")),
    ("next-token-probs", "multiplied temperature", gx._probs_variant(temperature="multiply"),
     fb("next-token-probs", "temperature-multiplied")),
    ("next-token-probs", "nucleus without the crossing token", gx._probs_variant(top_p_rule="drops-crossing"),
     fb("next-token-probs", "top-p-drops-crossing-token")),
    ("next-token-loss", "log_softmax and gather", gx._loss_log_softmax, PASS),
    ("next-token-loss", "logsumexp", _loss_manual, PASS),
    ("next-token-loss", "mean of per-sequence means", _loss_per_sequence_mean, PASS),
    ("next-token-loss", "a loop", gx._loss_loop, PASS),
    ("next-token-loss", "a Python float", _loss_numpy_float, "a float"),
    ("next-token-loss", "no shift", gx._loss_variant("no-shift"), fb("next-token-loss", "no-shift")),
    ("next-token-loss", "the wrong way", gx._loss_variant("backwards"), fb("next-token-loss", "shifted-backwards")),
    ("next-token-loss", "bits", gx._loss_variant("bits"), fb("next-token-loss", "bits")),
    ("next-token-loss", "the sum", gx._loss_variant("sum"), fb("next-token-loss", "sum-not-mean")),
]


test_learner_answer_gets_the_right_verdict, test_every_exercise_has_a_battery = battery_tests(BATTERY, IDS)
