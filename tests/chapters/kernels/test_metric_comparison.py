"""Tests for attention_course.chapters.kernels.metric_comparison (chapter 2's learned-metric run).

References: a brute-force leave-one-out loop for the tuned bandwidth, attention written out with
numpy for the dot-product predictor, and torch's own gradients (the fit must lower its loss).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from attention_course.chapters.kernels.metric_comparison import (
    METRIC_RUN_DATA,
    DotAttentionFit,
    coordinate_weights,
    dot_attention_predict,
    fit_dot_attention,
    tuned_isotropic_sigma,
)
from attention_course.chapters.kernels.smoothing import sparse_sine_data


def _loo_mse_loop(x, y, sigma):
    err = 0.0
    for i in range(len(x)):
        others = [j for j in range(len(x)) if j != i]
        logk = np.array([-np.sum((x[i] - x[j]) ** 2) / (2 * sigma**2) for j in others])
        w = np.exp(logk - logk.max())
        err += (w @ y[others] / w.sum() - y[i]) ** 2
    return err / len(x)


def test_tuned_sigma_is_the_grid_argmin_of_a_brute_force_leave_one_out_loss():
    data = sparse_sine_data(n=40, seed=3)
    grid = np.geomspace(0.1, 3, 9)
    losses = [_loo_mse_loop(data.x_train, data.y_train, s) for s in grid]
    assert tuned_isotropic_sigma(data.x_train, data.y_train, grid) == pytest.approx(grid[int(np.argmin(losses))])


def test_dot_attention_predictor_is_softmax_attention_written_out():
    rng = np.random.default_rng(0)
    fit = DotAttentionFit(rng.normal(size=(5, 3)), rng.normal(size=(5, 3)), np.zeros(0))
    xq, x, y = rng.normal(size=(4, 5)), rng.normal(size=(7, 5)), rng.normal(size=7)
    s = (xq @ fit.W_q) @ (x @ fit.W_k).T / np.sqrt(3)
    w = np.exp(s - s.max(1, keepdims=True))
    w /= w.sum(1, keepdims=True)
    assert np.allclose(dot_attention_predict(xq, x, y, fit), w @ y, rtol=0, atol=1e-12)


def test_fit_lowers_the_leave_one_out_loss_and_is_seeded():
    data = sparse_sine_data(n=40, seed=0)
    a = fit_dot_attention(data.x_train, data.y_train, steps=30, seed=1)
    b = fit_dot_attention(data.x_train, data.y_train, steps=30, seed=1)
    assert a.loss_history[-1] < a.loss_history[0]
    assert np.array_equal(a.W_q, b.W_q)


def test_coordinate_weights_follow_their_definitions():
    M = np.arange(9.0).reshape(3, 3)
    assert np.allclose(coordinate_weights(M), np.linalg.norm(M, axis=0))
    assert np.allclose(coordinate_weights(M, "bilinear") ** 2, (M**2).sum(1) + (M**2).sum(0))
    with pytest.raises(ValueError, match="kind"):
        coordinate_weights(M, "other")


def test_the_stored_run_has_five_draws_with_their_settings():
    run = json.loads(METRIC_RUN_DATA.read_text())
    assert run["seeds"] == [0, 1, 2, 3, 4] and run["dot_steps"] == 1000 and run["metric_steps"] == 300
    assert all(len(run[k]) == 5 for k in ("mse_tuned", "mse_metric", "mse_dot", "dominance_dot"))
