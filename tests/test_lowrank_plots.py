"""Smoke tests for attention_course.figures.lowrank: each figure renders on Agg and shows its data."""

from __future__ import annotations

import numpy as np
import pytest

from attention_course.lenses import lowrank as lr
from attention_course.figures import lowrank as lp
from attention_course.core._backend import ShapeError


def _render(fig):
    fig.canvas.draw()  # raises if anything cannot be drawn
    return fig


def test_temperature_sweep_plots_the_sweep_and_marks_the_crossing():
    sweep = lr.temperature_sweep([0.2, 1.0, 3.0], n=32, d=8, k=4)
    fig = _render(lp.plot_temperature_sweep(sweep, k=4))
    assert len(fig.axes) == 2
    assert all(ax.get_xlabel() and ax.get_ylabel() and ax.get_title() for ax in fig.axes)
    ranks, errors = fig.axes
    np.testing.assert_array_equal(ranks.get_lines()[0].get_ydata(), sweep["effective_rank"])
    np.testing.assert_array_equal(errors.get_lines()[1].get_ydata(), sweep["sparse_error"])
    cross = [ln for ln in errors.get_lines() if len(set(ln.get_xdata())) == 1]  # the vertical line
    assert len(cross) == 1 and cross[0].get_xdata()[0] == pytest.approx(lr.crossover_beta(sweep))
    with pytest.raises(ShapeError, match=r"sweep\['beta'\] has shape \(\); expected \(n_betas,\)"):
        lp.plot_temperature_sweep({**sweep, "beta": np.float64(1.0)})


def test_exp_rank_plots_three_normalised_spectra():
    demo = lr.exp_rank_demo(n=6, scale=4.0)
    ax = _render(lp.plot_exp_rank(demo)).axes[0]
    lines = [ln for ln in ax.get_lines() if len(ln.get_xdata()) == 6]
    assert len(lines) == 3
    exp_line = lines[1]
    np.testing.assert_allclose(exp_line.get_ydata(), demo["singular_values"] / demo["singular_values"][0])
    assert lines[0].get_ydata()[1] < 1e-12  # the logits have rank 1
    assert "rank 6" in " ".join(t.get_text() for t in ax.get_legend().get_texts())


def test_cumulative_spectra_one_line_per_layer_and_heatmap_at_k():
    rng = np.random.default_rng(0)
    s2 = np.sort(rng.random((3, 4, 10)), axis=-1)[..., ::-1]  # (L, H, K) decreasing energies
    c = np.cumsum(s2, axis=-1) / s2.sum(axis=-1, keepdims=True)
    fig = _render(lp.plot_cumulative_spectra(c, k_mark=3, title="t"))
    ax1, ax2 = fig.axes[:2]
    means = [ln for ln in ax1.get_lines() if len(ln.get_xdata()) == 10]
    assert len(means) == 3
    np.testing.assert_allclose(means[1].get_ydata(), c[1].mean(axis=0))
    np.testing.assert_allclose(ax2.images[0].get_array(), c[:, :, 2])
    assert len(fig.axes) == 3  # colour bar


def test_cumulative_spectra_rejects_bad_input():
    with pytest.raises(ShapeError, match=r"cumulative has shape \(3, 4\)"):
        lp.plot_cumulative_spectra(np.ones((3, 4)))
    with pytest.raises(ValueError, match="k_mark=5"):
        lp.plot_cumulative_spectra(np.ones((1, 2, 4)), k_mark=5)


def test_head_ranks_mean_line_and_ceiling():
    r = np.arange(12.0).reshape(3, 4) + 1
    fig = _render(lp.plot_head_ranks(r, n_tokens=20))
    ax1, ax2 = fig.axes[:2]
    mean_line = next(ln for ln in ax1.get_lines() if len(ln.get_xdata()) == 3)
    np.testing.assert_allclose(mean_line.get_ydata(), r.mean(axis=1))
    assert any(np.allclose(ln.get_ydata(), 20) for ln in ax1.get_lines())
    np.testing.assert_allclose(ax2.images[0].get_array(), r)


def test_lowrank_vs_sparse_places_each_head():
    re = np.array([[0.1, 0.2], [0.3, 0.05]])
    te = np.array([[0.4, 0.1], [0.2, 0.6]])
    sweep = lr.temperature_sweep([0.5, 1.0, 2.0], n=16, d=4, k=4)
    fig = _render(lp.plot_lowrank_vs_sparse(re, te, k=4, reference=sweep))
    ax = fig.axes[0]
    offsets = ax.collections[-1].get_offsets()
    np.testing.assert_allclose(offsets, np.c_[te.ravel(), re.ravel()])
    curve = next(ln for ln in ax.get_lines() if len(ln.get_xdata()) == 3)
    np.testing.assert_allclose(curve.get_xdata(), sweep["sparse_error"])
    assert ax.get_ylabel() == "best rank-4 error (SVD)"


def test_lowrank_vs_sparse_rejects_mismatched_shapes():
    with pytest.raises(ShapeError, match=r"rank_err has shape \(2, 2\) but topk_err has shape \(2, 3\)"):
        lp.plot_lowrank_vs_sparse(np.ones((2, 2)), np.ones((2, 3)), k=1)


def test_method_errors_bars_floor_and_empty():
    errs = {"exact-ish": {"iid": 0.0, "smooth": 1e-3}, "approx": {"iid": 0.5, "smooth": 2.0}}
    ax = _render(lp.plot_method_errors(errs, floor=1e-12)).axes[0]
    widths = sorted(p.get_width() for p in ax.patches)
    np.testing.assert_allclose(widths, [1e-12, 1e-3, 0.5, 2.0])
    assert [t.get_text() for t in ax.get_yticklabels()] == ["exact-ish", "approx"]
    with pytest.raises(ValueError, match="errors is empty"):
        lp.plot_method_errors({})
