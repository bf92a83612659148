"""Tests for attention_course.chapters.graphs.rollout: attention rollout (Abnar & Zuidema 2020)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.chapters.graphs import rollout as ro

SETTINGS = settings(max_examples=40, deadline=None)


def _stochastic(rng, *shape):
    """Random row-stochastic matrices (last axis sums to 1)."""
    w = rng.random(shape)
    return w / w.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: ro.attention_rollout(np.ones((2, 3, 4))), r"shape \(2, 3, 4\); expected \(L, T, T\)"),
        (lambda: ro.attention_rollout(np.ones((3, 3))), r"shape \(3, 3\); expected \(L, T, T\)"),
    ],
)
def test_errors_name_shapes(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("L, T", [(1, 3), (3, 5), (6, 2)])
def test_rollout_of_identity_is_identity(L, T):
    np.testing.assert_allclose(ro.attention_rollout(np.stack([np.eye(T)] * L)), np.eye(T), atol=1e-15)


@SETTINGS
@given(L=st.integers(1, 5), T=st.integers(1, 7), h=st.integers(1, 3), seed=st.integers(0, 10**6))
def test_rollout_rows_sum_to_one(L, T, h, seed):
    w = _stochastic(np.random.default_rng(seed), L, h, T, T)
    r = ro.attention_rollout(w)
    np.testing.assert_allclose(r.sum(axis=1), np.ones(T), atol=1e-12)
    assert np.all(r >= 0)
    np.testing.assert_allclose(r, ro.attention_rollout(w.mean(axis=1)), atol=1e-15)  # heads averaged


def test_rollout_matches_hand_product_in_layer_order():
    rng = np.random.default_rng(3)
    A1, A2, A3 = _stochastic(rng, 3, 4, 4)
    I = np.eye(4)
    expected = (0.5 * A3 + 0.5 * I) @ (0.5 * A2 + 0.5 * I) @ (0.5 * A1 + 0.5 * I)
    np.testing.assert_allclose(ro.attention_rollout(np.stack([A1, A2, A3])), expected, atol=1e-15)


def test_rollout_renormalises_a_fully_masked_row():
    w = _stochastic(np.random.default_rng(4), 2, 3, 3)
    w[:, 2] = 0.0  # query 2 attends to nothing (weights 0 by the package's rule)
    r = ro.attention_rollout(w)
    np.testing.assert_allclose(r.sum(axis=1), 1.0, atol=1e-15)
    np.testing.assert_allclose(r[2], [0.0, 0.0, 1.0], atol=1e-15)
