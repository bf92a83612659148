"""Tests for attention_course.lenses.rollout: attention rollout and attention flow (Abnar & Zuidema 2020)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.lenses import rollout as ro

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
        (lambda: ro.attention_flow(np.ones((1, 2, 2)), method="bfs"), r"method='bfs'"),
    ],
)
def test_errors_name_shapes(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("L, T", [(1, 3), (3, 5), (6, 2)])
def test_rollout_of_identity_is_identity(L, T):
    np.testing.assert_allclose(ro.attention_rollout(np.stack([np.eye(T)] * L)), np.eye(T), atol=1e-15)
    np.testing.assert_allclose(ro.attention_flow(np.stack([np.eye(T)] * L)), np.eye(T), atol=1e-15)


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


def _brute_min_cut(aug):
    """Min cut of the layered graph for every (output i, input j), by enumerating all cuts."""
    L, T, _ = aug.shape
    n = (L + 1) * T
    cap = np.zeros((n, n))
    for l in range(L):
        for i, j in itertools.product(range(T), repeat=2):
            cap[l * T + j, (l + 1) * T + i] = aug[l, i, j]
    out = np.zeros((T, T))
    for i, j in itertools.product(range(T), repeat=2):
        s, t = j, L * T + i
        others = [u for u in range(n) if u not in (s, t)]
        best = np.inf
        for side in itertools.product([0, 1], repeat=len(others)):
            in_s = np.zeros(n, bool)
            in_s[s] = True
            in_s[[u for u, b in zip(others, side) if b]] = True
            best = min(best, cap[in_s][:, ~in_s].sum())
        out[i, j] = best
    return out


def _brute_widest(aug):
    L, T, _ = aug.shape
    out = np.zeros((T, T))
    for i, j in itertools.product(range(T), repeat=2):
        for mid in itertools.product(range(T), repeat=L - 1):
            path = (j, *mid, i)  # positions at layers 0..L
            out[i, j] = max(out[i, j], min(aug[l, path[l + 1], path[l]] for l in range(L)))
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_attention_flow_equals_brute_force_min_cut(seed):
    rng = np.random.default_rng(seed)
    w = _stochastic(rng, 2, 3, 3)
    w[rng.random(w.shape) < 0.3] = 0.0  # sparse maps make the cuts non-trivial
    aug = 0.5 * w + 0.5 * np.eye(3)
    aug = aug / aug.sum(axis=-1, keepdims=True)
    flow = ro.attention_flow(w)
    np.testing.assert_allclose(flow, _brute_min_cut(aug), atol=1e-12)  # max-flow = min-cut
    widest = ro.attention_flow(w, method="widest")
    np.testing.assert_allclose(widest, _brute_widest(aug), atol=1e-15)
    assert np.all(widest <= flow + 1e-12) and np.all(flow <= 1 + 1e-12)


def test_max_flow_needs_reverse_edges():
    # s=0 -> {1, 2}; 1 -> {3, 4}; 2 -> 3 only; {3, 4} -> t=5, unit capacities. The first
    # BFS path 0-1-3-5 blocks 2; only pushing flow back along 3 -> 1 reaches the maximum 2.
    cap = np.zeros((6, 6))
    for u, w in [(0, 1), (0, 2), (1, 3), (1, 4), (2, 3), (3, 5), (4, 5)]:
        cap[u, w] = 1.0
    assert ro._max_flow(cap, 0, 5) == pytest.approx(2.0, abs=1e-12)


@pytest.mark.parametrize("seed", [4])
def test_attention_flow_three_layers_brute_force(seed):
    rng = np.random.default_rng(seed)
    w = _stochastic(rng, 3, 3, 3)
    w[rng.random(w.shape) < 0.4] = 0.0
    w[w.sum(axis=-1) == 0] = 1 / 3
    aug = 0.5 * w + 0.5 * np.eye(3)
    aug = aug / aug.sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(ro.attention_flow(w), _brute_min_cut(aug), atol=1e-12)


def test_widest_path_three_layers_brute_force():
    w = _stochastic(np.random.default_rng(5), 3, 4, 4)
    aug = (0.5 * w + 0.5 * np.eye(4)) / (0.5 * w + 0.5 * np.eye(4)).sum(-1, keepdims=True)
    np.testing.assert_allclose(ro.attention_flow(w, method="widest"), _brute_widest(aug), atol=1e-15)
