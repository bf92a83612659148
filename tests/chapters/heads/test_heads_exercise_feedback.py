"""Chapter 4's checks name two newcomers' mistakes: a count that grows with the heads, a neighbouring head.

A second newcomer gave every head its own d_model x d_model query, key and value projections (one W_O
for all) and got only "your result is 5457408 but should be 591360". The check now says the count grows
with the number of heads and that each head's projections are d_model x d_k; so does any count whose
surplus is (num_heads - 1) times a few d_model x d_model matrices and biases. A wrong count that does not
grow with the heads is not told so.
"""

from __future__ import annotations

import pytest

from attention_course.exercises import evaluate

GROWS = "your count grows with the number of heads"


def _right(d, h, b):
    return 4 * d * d + (4 * d if b else 0)


@pytest.mark.parametrize("label,fn", [
    # the newcomer's answer: h full d x d projections for Q, K and V, one W_O, four biases
    ("full Q, K, V per head", lambda d, h, b: h * 3 * d * d + d * d + (4 * d if b else 0)),
    ("full Q, K, V per head, and their biases", lambda d, h, b: h * 3 * (d * d + (d if b else 0)) + d * d + (d if b else 0)),
    ("full Q and K per head only", lambda d, h, b: h * 2 * d * d + 2 * d * d + (4 * d if b else 0)),
    ("all four per head, biases once", lambda d, h, b: h * 4 * d * d + (4 * d if b else 0)),
])
def test_a_count_that_grows_with_the_heads_is_named(label, fn):
    result = evaluate("mha-param-count", lambda d, h, b: int(fn(d, h, b)))
    assert not result.passed
    assert GROWS in result.message.lower(), (label, result.message)
    assert "d_model x d_k" in result.message, (label, result.message)


def test_a_wrong_count_that_does_not_grow_with_the_heads_is_not_told_so():
    result = evaluate("mha-param-count", lambda d, h, b: _right(d, h, b) + 7)
    assert not result.passed
    assert GROWS not in result.message.lower(), result.message


def _ablate_head(heads, W_o, head):
    """Zero head ``head`` of a copy, merge the heads and project: the right answer to head-ablation."""
    B, h, T, d_v = heads.shape
    kept = heads.copy()
    kept[:, head] = 0.0
    return kept.transpose(0, 2, 1, 3).reshape(B, T, h * d_v) @ W_o


@pytest.mark.parametrize("label,shift,says", [
    # a newcomer switched off head + 1 and got only the case and an entry, "(off by 1, a relative 2.9)"
    ("the head after", +1, "head `head` + 1"),
    ("the head before", -1, "head `head` - 1"),
])
def test_switching_off_a_neighbouring_head_is_named_as_off_by_one(label, shift, says):
    result = evaluate("head-ablation", lambda heads, W_o, head: _ablate_head(heads, W_o, (head + shift) % heads.shape[1]))
    assert not result.passed
    assert "off by one" in result.message and says in result.message, (label, result.message)


def test_the_right_ablation_passes():
    assert evaluate("head-ablation", _ablate_head).passed
