"""Tests for attention_course.chapters.kernels.learning: a learned width and a learned metric.

References: a grid search over the leave-one-out loss, torch.optim.Adam, and the
structure of the task (only x_0 matters). The trained results are deterministic
float64 runs; each threshold states the measured value and the margin it leaves.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_course.chapters.kernels.learning import _adam, fit_bandwidth, fit_metric
from attention_course.chapters.kernels.smoothing import mse, nadaraya_watson, sine_data, sparse_sine_data

TIGHT = dict(rtol=1e-12, atol=1e-12)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.numerics
def test_bandwidth_fit_finds_the_leave_one_out_minimum():
    data = sine_data(seed=0)
    x, y = data.x_train, data.y_train
    fit = fit_bandwidth(x, y, leave_one_out=True, steps=300, lr=0.05)
    assert abs(fit.w_history[-1] - fit.w_history[-51]) < 1e-4  # converged (moves 3e-6 over the last 50 steps)
    grid = np.linspace(0.5, 8.0, 751)  # step 0.01
    loo = [mse(nadaraya_watson(x, x, y, bandwidth=1 / w, leave_one_out=True)[0], y) for w in grid]
    # the grid's best point is within half a step (0.005) of the true minimum; 1e-3 more for the
    # unfinished convergence. Measured: |2.2721 - 2.27| = 0.002
    assert abs(fit.w - grid[int(np.argmin(loo))]) < 0.005 + 1e-3
    assert fit.w_history.shape == (301,) and fit.loss_history.shape == (300,)


@pytest.mark.numerics
def test_bandwidth_fit_without_loo_drifts():
    data = sine_data(seed=0)
    fit = fit_bandwidth(data.x_train, data.y_train, leave_one_out=False, steps=100, lr=0.1)
    assert np.all(np.diff(fit.w_history[20:]) > 0)  # still growing at the end (smallest step 0.03)
    assert fit.loss_history[-1] < fit.loss_history[0]
    loo = fit_bandwidth(data.x_train, data.y_train, leave_one_out=True, steps=100, lr=0.1)
    assert fit.w > 2 * loo.w  # measured 2.45 times


@pytest.mark.slow  # the first use of torch.optim imports torch._dynamo (seconds)
def test_written_out_adam_matches_torch_optim():
    A = torch.tensor([[3.0, 1.0], [1.0, 2.0]], dtype=torch.float64)

    def loss_fn(p):
        return (p @ A @ p) / 2 + torch.sin(p).sum()

    params, losses = _adam(loss_fn, torch.tensor([1.0, -2.0], dtype=torch.float64), steps=25, lr=0.1)
    p = torch.tensor([1.0, -2.0], dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([p], lr=0.1)
    for t in range(25):
        opt.zero_grad()
        loss = loss_fn(p)
        assert losses[t] == pytest.approx(loss.item(), rel=1e-12)
        loss.backward()
        opt.step()
        torch.testing.assert_close(params[t + 1], p.detach(), **TIGHT)


@pytest.mark.numerics
def test_metric_fit_finds_the_relevant_dimension():
    data = sparse_sine_data(n=100, seed=1)
    fit = fit_metric(data.x_train, data.y_train, steps=100, lr=0.1)
    norms = np.linalg.norm(fit.W, axis=0)
    assert np.argmax(norms) == 0 and norms[0] > 3 * norms[1:].max()  # measured 13 times
    before = mse(nadaraya_watson(data.x_test, data.x_train, data.y_train)[0], data.y_test)
    after = mse(nadaraya_watson(data.x_test @ fit.W.T, data.x_train @ fit.W.T, data.y_train)[0], data.y_test)
    assert after < before / 5  # measured 32 times lower


def test_metric_fit_starts_at_the_identity_and_needs_points():
    data = sparse_sine_data(n=20, d=3, seed=2)
    fit = fit_metric(data.x_train, data.y_train, steps=1, lr=0.0)  # lr 0: W stays at its start
    np.testing.assert_array_equal(fit.W, np.eye(3))
    expected = mse(nadaraya_watson(data.x_train, data.x_train, data.y_train, leave_one_out=True)[0], data.y_train)
    assert fit.loss_history[0] == pytest.approx(expected, rel=1e-12)
