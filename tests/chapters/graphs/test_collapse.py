"""Tests for attention_course.chapters.graphs.collapse: attention stacks and rank collapse (Dong et al. 2021)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_course.chapters.graphs import collapse as depth
from attention_course.core._backend import ShapeError
from attention_course.chapters.graphs.propagation import banded_mask


def test_rank_one_residual_closed_form_and_minimiser():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(6, 4))
    r = depth.rank_one_residual(X)
    assert r == pytest.approx(np.sqrt(X.var(axis=0).sum() * 6) / np.linalg.norm(X), rel=1e-12)
    for _ in range(20):  # no other x does better than the mean row
        x = X.mean(axis=0) + 0.1 * rng.normal(size=4)
        assert np.linalg.norm(X - x[None, :]) / np.linalg.norm(X) > r
    assert depth.rank_one_residual(np.outer(np.ones(5), rng.normal(size=3))) < 1e-15


def test_pure_attention_collapses_and_skips_slow_it_down():
    pure = depth.rank_collapse(n_tokens=16, d_model=64, n_layers=5, seed=0)
    assert np.all(np.diff(pure[:5]) < 0)  # strictly decreasing until float64's floor
    assert pure[-1] < 1e-12
    assert pure[2] < pure[1] ** 2  # faster than geometric: doubly exponential
    skip = depth.rank_collapse(n_tokens=16, d_model=64, n_layers=12, seed=0, skip=True)
    assert skip[-1] > 1e-2 and skip[-1] > 1e8 * pure[-1]
    full = depth.rank_collapse(n_layers=12, seed=0, skip=True, mlp=True, layernorm=True)
    assert full[-1] > 1e-2


def test_with_skips_the_ratio_shrinks_exponentially():
    # 48 layers: the ratio keeps shrinking by a roughly constant factor per layer (the absolute
    # sizes behind it are tested in test_with_skips_the_spread_grows_and_the_shared_part_grows_faster)
    skip = depth.rank_collapse(n_layers=48, seed=0, skip=True)
    rates = (skip[24:] / skip[:-24]) ** (1 / 24)  # geometric mean factor over 24 layers
    assert np.all((rates > 0.5) & (rates < 0.9))
    assert skip[-1] < 1e-5
    # the factor is set by the attention branch's gain: a quarter of W_v nearly stops it
    gentle = depth.rank_collapse(n_layers=48, seed=0, skip=True, value_scale=0.25)
    assert (gentle[-1] / gentle[12]) ** (1 / 36) > 0.97


def test_rank_one_parts_against_projections():
    # independent reference: D and S are the norms of X projected off and onto the all-ones direction
    X = np.random.default_rng(11).normal(size=(7, 5)) + 3.0
    T = X.shape[0]
    P_shared = np.ones((T, T)) / T  # projection onto span(1), (T, T)
    D, S = depth.rank_one_parts(X)
    assert D == pytest.approx(np.linalg.norm((np.eye(T) - P_shared) @ X), rel=1e-12)
    assert S == pytest.approx(np.linalg.norm(P_shared @ X), rel=1e-12)
    assert D ** 2 + S ** 2 == pytest.approx(np.linalg.norm(X) ** 2, rel=1e-12)  # orthogonal parts
    assert depth.rank_one_residual(X) == pytest.approx(D / np.hypot(D, S), rel=1e-12)
    assert depth.rank_one_parts(torch.as_tensor(X)) == pytest.approx((D, S), rel=1e-12)
    with pytest.raises(ShapeError, match=r"\(7, 5, 1\)"):
        depth.rank_one_parts(X[..., None])


def test_with_skips_the_spread_grows_and_the_shared_part_grows_faster():
    parts = depth.rank_one_part_curves(n_layers=48, seeds=range(3), skip=True)  # (3, 49, 2)
    D, S = parts[..., 0], parts[..., 1]
    assert np.all(D[:, 48] > 2 * D[:, 0])  # nothing is lost: the spread grows on every seed
    growth = (S[:, 48] / S[:, 12]) ** (1 / 36)
    # E |x(I + W_v)|^2 = (1 + s^2) |x|^2 for W_v ~ N(0, s^2 / d): sqrt(2) at s = 1; over 36 layers
    # the seeds fall within 0.03 of it (measured 1.40-1.43 on 5 seeds), so 0.05 leaves a margin
    np.testing.assert_allclose(growth, np.sqrt(2), atol=0.05)
    # post-LN: LayerNorm pins |X| at sqrt(T d), so the spread itself collapses
    ln = depth.rank_one_part_curves(n_layers=48, seeds=range(3), skip=True, mlp=True, layernorm=True)
    np.testing.assert_allclose(np.hypot(ln[:, 1:, 0], ln[:, 1:, 1]), np.sqrt(16 * 64), rtol=1e-4)  # eps = 1e-5
    assert np.all(ln[:, 48, 0] < 1e-3 * ln[:, 0, 0])


def test_value_scale_multiplies_only_w_v():
    a = depth.init_stack_params(6, 2, seed=4, mlp=True)
    b = depth.init_stack_params(6, 2, seed=4, mlp=True, value_scale=0.5)
    for la, lb in zip(a, b):
        for name in la:
            factor = 0.5 if name == "W_v" else 1.0
            np.testing.assert_array_equal(lb[name], factor * la[name])
        assert la["W_q"].std() == pytest.approx(1 / np.sqrt(6), rel=0.5)  # N(0, 1/fan_in)


def test_attention_stack_numpy_and_torch_agree():
    x = np.random.default_rng(9).normal(size=(5, 8))
    params = depth.init_stack_params(8, 2, seed=3, mlp=True)
    mask = banded_mask(5, 1)
    for kw in ({}, {"skip": True, "mlp": True, "layernorm": True}):
        a = depth.attention_stack(x, params, mask, **kw)[-1]
        b = depth.attention_stack(torch.as_tensor(x), params, mask, **kw)[-1]
        torch.testing.assert_close(torch.as_tensor(a), b, rtol=0, atol=1e-13)
    # one pure layer by hand
    p = params[0]
    q, k, v = x @ p["W_q"], x @ p["W_k"], x @ p["W_v"]
    s = np.where(mask, q @ k.T / np.sqrt(8), -np.inf)
    w = np.exp(s - s.max(1, keepdims=True))
    w /= w.sum(1, keepdims=True)
    np.testing.assert_allclose(depth.attention_stack(x, params[:1], mask)[1], w @ v, atol=1e-13)
    with pytest.raises(ShapeError, match=r"x has shape \(5, 7\); expected \(T, 8\)"):
        depth.attention_stack(x[:, :7], params)


def test_rank_collapse_curves_are_medians_over_seeds():
    stacks = {"pure": {}, "skip": {"skip": True, "value_scale": 0.5}}
    curves = depth.rank_collapse_curves(stacks, n_tokens=6, d_model=8, n_layers=4, seeds=(0, 3, 5))
    assert list(curves) == ["pure", "skip"]
    for name, kw in stacks.items():
        runs = np.stack([depth.rank_collapse(6, 8, 4, seed=s, **kw) for s in (0, 3, 5)])  # (3, 5)
        np.testing.assert_array_equal(curves[name], np.sort(runs, axis=0)[1])  # the middle of three


def test_shrink_factor_is_the_geometric_mean_rate():
    r = 3.0 * 0.8 ** np.arange(20)
    assert depth.shrink_factor(r, 4, 19) == pytest.approx(0.8, rel=1e-14)
    assert depth.shrink_factor([1.0, 0.5, 0.125], 0, 2) == pytest.approx(np.sqrt(0.125), rel=1e-14)
    with pytest.raises(ValueError, match=r"a=5, b=5 for a curve of 20 layers; expected 0 <= a < b < 20"):
        depth.shrink_factor(r, 5, 5)
    with pytest.raises(ValueError, match=r"b=20"):
        depth.shrink_factor(r, 0, 20)
