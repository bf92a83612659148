"""Chapter 1's checks name the mistakes whose results have the wrong shape, and the masked-logit rule.

A newcomer's planted mistakes that got only "you returned shape (5,); expected (2,)": a tuple returned
in the order (weights, output), and one query's weights, or the weights times the keys, returned instead
of the output. Each is named; a wrong result of the same shape that is neither is not named.
"""

from __future__ import annotations

import numpy as np

from attention_course.exercises import evaluate


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _weights(q, k):
    return _softmax(q @ np.swapaxes(k, -2, -1) / np.sqrt(q.shape[-1]))  # (..., T, S)


def test_attention_returned_as_weights_then_output_is_named():
    result = evaluate("attention", lambda q, k, v: (_weights(q, k), _weights(q, k) @ v))
    assert not result.passed
    assert "You returned (weights, output)" in result.message, result.message


def test_attention_with_a_wrong_shape_of_another_kind_is_not_called_swapped():
    result = evaluate("attention", lambda q, k, v: (_weights(q, k) @ v, _weights(q, k)[..., :1]))
    assert not result.passed
    assert "(weights, output)" not in result.message, result.message


def _one_query_weights(q_i, k):
    return _softmax(k @ q_i / np.sqrt(q_i.shape[0]))  # (S,)


def test_one_query_returning_the_weights_is_named():
    result = evaluate("one-query", lambda q_i, k, v: _one_query_weights(q_i, k))
    assert not result.passed
    assert "These are the weights, one per key" in result.message, result.message


def test_one_query_averaging_the_keys_is_named():
    result = evaluate("one-query", lambda q_i, k, v: _one_query_weights(q_i, k) @ k)
    assert not result.passed
    assert "You averaged the keys (weights @ k)" in result.message, result.message


def test_one_query_unscaled_weights_are_not_called_the_weights():
    """One number per key, but not the softmax of the scaled scores: not named as the weights."""
    result = evaluate("one-query", lambda q_i, k, v: _softmax(k @ q_i))
    assert not result.passed
    assert "These are the weights" not in result.message and "averaged the keys" not in result.message


def test_a_softmax_that_shifts_by_the_row_mean_fails_on_masked_logits_only():
    """The -inf case is the one a mean shift cannot survive even without large logits."""
    def mean_shift_small_logits_ok(x):
        if np.isneginf(x).any():
            e = np.exp(x - x.mean(axis=-1, keepdims=True))  # -inf - (-inf) = NaN
            return e / e.sum(axis=-1, keepdims=True)
        return _softmax(x)

    with np.errstate(invalid="ignore"):
        result = evaluate("stable-softmax", mean_shift_small_logits_ok)
    assert not result.passed
    assert "a masked logit (-inf)" in result.message, result.message
    assert evaluate("stable-softmax", _softmax).passed


def test_one_query_with_an_unstable_softmax_is_named():
    """A newcomer's softmax without the shift by the largest score passed silently: no case had large scores."""
    def unstable(q_i, k, v):
        e = np.exp(k @ q_i / np.sqrt(q_i.shape[0]))  # (S,)
        return (e / e.sum()) @ v

    with np.errstate(over="ignore", invalid="ignore"):
        result = evaluate("one-query", unstable)
    assert not result.passed
    assert "overflow for scores near 1000" in result.message, result.message


def test_a_softmax_that_turns_masked_logits_finite_is_named():
    """A newcomer's np.nan_to_num(x - max, neginf=0.0) gave masked logits the top weight and got only a number."""
    def neginf_to_zero(x):
        e = np.exp(np.nan_to_num(x - x.max(axis=-1, keepdims=True), neginf=0.0))
        return e / e.sum(axis=-1, keepdims=True)

    def neginf_to_minus_one(x):  # another finite stand-in: not the exact mutant, caught by the hint
        z = x - x.max(axis=-1, keepdims=True)
        e = np.exp(np.where(np.isneginf(z), -1.0, z))
        return e / e.sum(axis=-1, keepdims=True)

    for wrong in (neginf_to_zero, neginf_to_minus_one):
        result = evaluate("stable-softmax", wrong)
        assert not result.passed
        assert "a masked logit (-inf) got a weight above 0" in result.message, result.message
        assert "nan_to_num" in result.message, result.message
