"""Chapter 2's figures render on Agg, fit the book's column, and label what they show."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from attention_course import ShapeError
from attention_course.chapters.kernels import figures as kf
from attention_course.figures.style import DPI, MAX_WIDTH, RC
from attention_course.chapters.kernels.learning import fit_bandwidth
from attention_course.chapters.kernels.smoothing import (
    mse_by_bandwidth,
    nadaraya_watson,
    sine_data,
    sparse_sine_data,
)


@pytest.fixture(scope="module")
def data():
    return sine_data(n=20, seed=0)


def _check_page(fig: Figure, n_colorbars: int = 0) -> None:
    """At most 7 in wide, at the book's DPI; every plotting axes has a title, axis labels and the book's fonts."""
    assert isinstance(fig, Figure)
    assert fig.get_figwidth() <= MAX_WIDTH and fig.dpi == DPI
    fig.canvas.draw()
    colorbars = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert len(colorbars) == n_colorbars
    for cb in colorbars:
        assert cb.get_ylabel() == "weight (colours: 0 to the largest)"
    for ax in fig.axes:
        if ax in colorbars:
            continue
        assert ax.get_title() and ax.get_xlabel()
        assert ax.title.get_fontsize() == RC["axes.titlesize"]
        assert all(t.get_fontsize() >= 10 for t in ax.get_xticklabels())
        legend = ax.get_legend()
        assert legend is None or all(t.get_fontsize() >= 9 for t in legend.get_texts())  # never below 9 pt
    for legend in fig.legends:
        assert all(t.get_fontsize() >= 9 for t in legend.get_texts())


def test_bandwidth_fits(data):
    w_values = (0.3, 3.0, 30.0)
    preds = {w: nadaraya_watson(data.x_test, data.x_train, data.y_train, bandwidth=1 / w)[0] for w in w_values}
    grid = np.geomspace(0.1, 100, 7)
    sweep = mse_by_bandwidth(data.x_test, data.x_train, data.y_train, data.y_test, grid)
    fig = kf.plot_bandwidth_fits(data, preds, grid, sweep, seed_median=np.array([0.8, 0.2, 0.7]))
    _check_page(fig)
    assert fig.axes[3].get_xscale() == "log" and fig.axes[3].get_ylabel() == "test MSE"
    with pytest.raises(ShapeError, match=r"sweep has shape \(6,\) but w_grid \(7,\)"):
        kf.plot_bandwidth_fits(data, preds, grid, sweep[:6])


def test_bandwidth_objectives(data):
    fits = [fit_bandwidth(data.x_train, data.y_train, leave_one_out=loo, steps=4) for loo in (True, False)]
    grid = np.array([0.5, 1.0, 2.0])
    objectives = {"leave_one_out": grid, "self_included": grid[::-1], "test": grid + 1}
    fig = kf.plot_bandwidth_objectives(grid, objectives, *fits)
    _check_page(fig)
    assert len(fig.axes[1].get_lines()) == 2  # the two w histories
    with pytest.raises(KeyError, match=r"objectives lacks \['test'\]"):
        kf.plot_bandwidth_objectives(grid, {"leave_one_out": grid, "self_included": grid}, *fits)


def test_learned_metric():
    d = sparse_sine_data(n=30, d=4, n_test=40, seed=0)
    W = np.diag([4.0, 0.2, 0.1, 0.1])
    fig = kf.plot_learned_metric(W, d.x_test, d.y_test, 0 * d.y_test, d.y_test)
    _check_page(fig)
    heights = [p.get_height() for p in fig.axes[0].patches]
    np.testing.assert_allclose(heights, [4.0, 0.2, 0.1, 0.1])  # the bars are the column norms of W
    with pytest.raises(ShapeError, match=r"W has shape \(4, 4\) and x_test \(40, 3\)"):
        kf.plot_learned_metric(W, d.x_test[:, :3], d.y_test, d.y_test, d.y_test)


def test_weights_on_keys():
    pts = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [2.0, 2.0]])
    weights = {"a": np.array([0.4, 0.3, 0.2, 0.1]), "b": np.array([0.1, 0.1, 0.1, 0.7])}
    fig = kf.plot_weights_on_keys(pts, weights)
    _check_page(fig, n_colorbars=1)
    assert fig.axes[1].get_title().endswith("largest weight 0.70, on k3")
    with pytest.raises(ShapeError, match=r"points has shape \(4, 3\); expected \(S, 2\)"):
        kf.plot_weights_on_keys(np.zeros((4, 3)), weights)


def test_locality():
    from attention_course.chapters.kernels.attention_kernel import locality_over_draws

    results = {"d = 4": locality_over_draws(12, 4, 3, seed=0), "d = 16": locality_over_draws(12, 16, 3, seed=0)}
    fig = kf.plot_locality(results, n=12)
    _check_page(fig)
    bars = fig.axes[0].containers  # one errorbar container per kernel
    assert len(bars) == 4 and len(fig.legends[0].get_texts()) == 5  # four kernels and the chance line
    # the plotted Gaussian means are the measured ones (1 for a radial kernel)
    np.testing.assert_allclose(np.asarray(bars[0].lines[0].get_ydata(), dtype=float), [1.0, 1.0])
    assert fig.axes[0].lines[-1].get_ydata()[0] == pytest.approx(1 / 12)  # the chance line
    with pytest.raises(ValueError, match=r"results\['x'\] has measures \['own_key'\]"):
        kf.plot_locality({"x": {"own_key": {}}}, n=12)
