"""Chapter 4's parameter count names a count that grows with the number of heads.

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
