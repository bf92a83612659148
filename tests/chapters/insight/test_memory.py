"""Associative memory (attention_course/chapters/insight/memory.py) against numpy references and closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from attention_course.chapters.insight import memory


def _softmax_loop(z):
    e = np.exp(z - z.max())
    return e / e.sum()


@given(st.integers(2, 12), st.integers(1, 9), st.floats(0.05, 3.0))
@settings(max_examples=25, deadline=None)
def test_softmax_retrieval_is_the_hopfield_update(d, M, beta):
    X = memory.store_patterns(d, M, seed=d + M)
    q = memory.corrupt(X[:, :1], 0.25, seed=1)
    expected = sum(w * X[:, j] for j, w in enumerate(_softmax_loop(beta * X.T @ q[:, 0])))
    np.testing.assert_allclose(memory.retrieve(X, q, beta)[:, 0], expected, rtol=1e-12, atol=1e-12)


def test_linear_retrieval_is_the_outer_product_memory():
    X = memory.store_patterns(10, 6, seed=0)
    q = memory.corrupt(X, 0.1, seed=0)
    W = sum(np.outer(X[:, j], X[:, j]) for j in range(6))  # Hopfield's sum of outer products
    np.testing.assert_allclose(memory.retrieve(X, q, None), W @ q, rtol=1e-12)


def test_a_large_beta_retrieves_the_nearest_pattern():
    X = memory.store_patterns(24, 40, seed=2)
    q = memory.corrupt(X, 0.3, seed=3)
    overlap = np.sort(X.T @ q, axis=0)  # (M, n)
    unique = overlap[-1] > overlap[-2]  # queries whose nearest pattern is not tied
    nearest = X[:, (X.T @ q).argmax(axis=0)]  # (d, n): largest overlap
    assert unique.sum() > 20
    np.testing.assert_array_equal(np.sign(memory.retrieve(X, q, beta=50.0))[:, unique], nearest[:, unique])


def test_shifting_every_score_leaves_retrieval_unchanged():
    # Adding c to every score of a query (a vector added to every key, dotted with the query) is a softmax shift.
    X = memory.store_patterns(16, 8, seed=0)
    q = memory.corrupt(X, 0.1, seed=1)
    z = X.T @ q
    w = np.exp(z - z.max(0)) / np.exp(z - z.max(0)).sum(0)
    w2 = np.exp(z + 7.0 - (z + 7.0).max(0)) / np.exp(z + 7.0 - (z + 7.0).max(0)).sum(0)
    np.testing.assert_allclose(X @ w, X @ w2, rtol=1e-12)
    np.testing.assert_allclose(memory.retrieve(X, q, 1.0), X @ w, rtol=1e-12)


def test_corrupt_flips_exactly_the_share_asked():
    X = memory.store_patterns(20, 30, seed=0)
    flipped = (memory.corrupt(X, 0.1, seed=4) != X).sum(axis=0)
    assert (flipped == 2).all()
    assert (memory.corrupt(X, 0.0) == X).all()


def test_capacity_is_the_largest_size_at_the_level():
    assert memory.capacity([1.0, 0.9, 0.89, 0.95], [1, 2, 4, 8], level=0.9) == 8
    assert memory.capacity([0.5, 0.2], [1, 2]) == 0


def test_the_laws_match_their_closed_forms():
    assert memory.outer_product_law(32) == pytest.approx(32 / (4 * math.log(32)))
    # no corruption: alpha = ln 2 / 2, so exp(alpha d) = 2^(d/2)
    assert memory.exponential_law(20, flip=0.0) == pytest.approx(2.0**10)
    x = 0.8
    alpha = 0.25 * ((1 + x) * math.log(1 + x) + (1 - x) * math.log(1 - x))
    assert memory.exponential_law(16, 0.1) == pytest.approx(math.exp(alpha * 16))


def test_a_single_pattern_is_always_retrieved_and_bad_shapes_are_named():
    assert memory.retrieval_accuracy(16, 1, beta=1.0) == 1.0
    assert memory.retrieval_accuracy(16, 1, beta=None) == 1.0
    with pytest.raises(ValueError, match=r"X has shape \(4, 2\) and queries \(5, 1\)"):
        memory.retrieve(np.ones((4, 2)), np.ones((5, 1)), 1.0)


def test_memory_cues_are_the_sweeps_cues():
    """A learner who builds the exercise's follow-up from memory_cues finds the capacities the lesson prints."""
    X, queries, clean = memory.memory_cues(16, 5, n_queries=12, seed=3)
    assert X.shape == (16, 5) and queries.shape == clean.shape == (16, 12)
    np.testing.assert_array_equal(clean, X[:, np.arange(12) % 5])  # the stored patterns in turn
    assert ((queries != clean).sum(axis=0) == 2).all()  # one sign in ten of 16, rounded: exactly 2
    sweep = memory.capacity_sweep(dims=(16,), max_log2=(8,), seeds=(0,))
    for name, rule in memory.MEMORIES.items():
        beta = None if rule is None else rule(16)
        sizes = [2**i for i in range(9)]
        shares = []
        for M in sizes:
            X, queries, clean = memory.memory_cues(16, M)
            shares.append(float((np.sign(memory.retrieve(X, queries, beta)) == clean).all(axis=0).mean()))
        assert memory.capacity(shares, sizes) == memory.capacity(sweep["curves"][name]["16"]["accuracy"][0], sizes)
