"""chapters/scaling/figures.py: every figure of chapter 6 renders on Agg at the book's size.

Each test draws the figure from small measured inputs, renders it (``canvas.draw``) and
checks what the chapter relies on: the size fits the 7 in column, axes are labelled, the
colour of each scale is the chapter's, and a colour scale has its colour bar.
"""

from __future__ import annotations

from dataclasses import replace

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.colors import to_rgba

from attention_course import ShapeError
from attention_course.chapters.scaling.training import compare_scales, load_comparisons
from attention_course.chapters.scaling.backward_swap import BACKWARD
from attention_course.chapters.scaling.saturation_training import SATURATION
from attention_course.chapters.scaling.training_grid import run_grid
from attention_course.chapters.scaling.figures import (
    BACKWARD_COLOR,
    LESSON_WIDTH,
    PHONE_RC,
    SCALE_COLOR,
    plot_backward_swap,
    plot_full_comparison,
    plot_gradient_vs_spread,
    plot_jacobian,
    plot_minilm_scores,
    plot_saturation,
    plot_saturation_training,
    plot_scale_pair,
    plot_score_histograms,
    plot_score_variance,
    plot_training_watch,
)
from attention_course.chapters.scaling.saturated_rows import scale_pair
from attention_course.chapters.scaling.measures import saturation_stats, variance_vs_dim


def rendered(fig):
    fig.canvas.draw()
    width, height = fig.get_size_inches()
    assert width <= 7.0 and height <= 7.5  # the book's column is about 7 in at 150-200 dpi
    for ax in fig.axes:  # every y axis is labelled, or shares its scale with one that is
        labels = [a.get_ylabel() for a in ax.get_shared_y_axes().get_siblings(ax)]
        assert any(labels), f"axes {ax.get_title()!r} has no y label"
    plt.close(fig)
    return fig


def line_colors(ax):
    return [to_rgba(line.get_color()) for line in ax.get_lines()]


@pytest.fixture(scope="module")
def sat():
    return {s: saturation_stats([1, 4, 16, 64], scale=s, n_batches=2) for s in ("none", "sqrt", "mup")}


@pytest.fixture(scope="module")
def live():
    return compare_scales([8], ["sqrt", "none", "mup"], steps=12, d_model=8, eval_batch=8)


def test_score_variance_draws_the_law_and_the_scaled_scores():
    sweep = variance_vs_dim([1, 4, 16, 64], n_samples=300)
    fig = rendered(plot_score_variance(sweep))
    (ax,) = fig.axes
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    theory, raw, scaled = ax.get_lines()[0], *ax.containers  # the closed form, then the two error bars
    np.testing.assert_array_equal(theory.get_ydata(), sweep.theory)
    np.testing.assert_allclose(raw.lines[0].get_ydata(), sweep.empirical)
    np.testing.assert_allclose(scaled.lines[0].get_ydata(), sweep.empirical / sweep.d_k)


def lesson_figure(fig):
    """A lesson figure reads on a phone: LESSON_WIDTH wide, no text under PHONE_RC's tick size."""
    fig.canvas.draw()
    assert fig.get_size_inches()[0] == LESSON_WIDTH
    texts = [t for ax in fig.axes for t in (*ax.get_xticklabels(), *ax.get_yticklabels(), ax.xaxis.label,
                                              ax.yaxis.label, ax.title)]
    texts += [t for legend in [*fig.legends, *(ax.get_legend() for ax in fig.axes)] if legend
              for t in legend.get_texts()]
    small = {t.get_text() for t in texts if t.get_text() and t.get_fontsize() < PHONE_RC["xtick.labelsize"]}
    assert not small, small
    return rendered(fig)


def test_score_histograms_draw_the_raw_and_the_scaled_scores():
    rng = np.random.default_rng(0)
    scores = {4: rng.normal(0, 2, 400), 64: rng.normal(0, 8, 400)}
    fig = lesson_figure(plot_score_histograms(scores))
    top, bottom = fig.axes
    assert [t.get_text() for t in top.get_legend().get_texts()] == ["$d_k$ = 4", "$d_k$ = 64"]
    heights = [p.get_path().vertices[:, 1].max() for p in bottom.patches]  # density peaks, about 0.4 each
    assert all(0.2 < h < 0.7 for h in heights), heights  # divided by sqrt(d_k): one spread
    with pytest.raises(ValueError, match="scores is empty"):
        plot_score_histograms({})


def test_gradient_vs_spread_marks_each_spread_on_the_curve():
    sigmas = np.geomspace(0.1, 40, 9)
    through = np.linspace(0.1, 0.3, 9)
    fig = lesson_figure(plot_gradient_vs_spread(sigmas, through, {"scaled": 1.0, "unscaled, $d_k$ = 64": 8.0,
                                                                  "unscaled, $d_k$ = 1024": 32.0}))
    curve, *marks = fig.axes[0].get_lines()
    assert [m.get_xdata()[0] for m in marks] == [1.0, 8.0, 32.0]
    expected = np.exp(np.interp(np.log(8.0), np.log(sigmas), np.log(through)))
    assert marks[1].get_ydata()[0] == pytest.approx(expected)
    colors = [to_rgba(m.get_color()) for m in marks]
    assert colors[:2] == [to_rgba(SCALE_COLOR["sqrt"]), to_rgba(SCALE_COLOR["none"])]
    # the two unscaled widths are told apart by colour and by marker (a reader saw one red for both)
    assert len(set(colors)) == 3 and len({m.get_marker() for m in marks}) == 3
    assert not any(m.get_clip_on() for m in marks)  # a mark at the axis is drawn whole
    assert fig.axes[0].get_ylim()[0] < 0
    with pytest.raises(ShapeError, match=r"sigmas has shape \(9,\) and through \(8,\)"):
        plot_gradient_vs_spread(sigmas, through[:8])


def test_gradient_vs_spread_shades_the_sensitive_regime():
    sigmas = np.geomspace(0.1, 40, 9)
    fig = lesson_figure(plot_gradient_vs_spread(sigmas, np.linspace(0.1, 0.3, 9), {"scaled": 1.0}, band=(0.1, 12.0)))
    (span,) = fig.axes[0].patches
    assert (span.get_x(), span.get_x() + span.get_width()) == pytest.approx((0.1, 12.0))  # in data units
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["sensitive regime", "scaled"]
    with pytest.raises(ValueError, match=r"band=\(12.0, 1.0\) must be two spreads 0 < lo < hi"):
        plot_gradient_vs_spread(sigmas, np.linspace(0.1, 0.3, 9), band=(12.0, 1.0))


def test_training_watch_smooths_the_loss_and_shows_layer_one(live):
    fig = lesson_figure(plot_training_watch(live, window=4))
    loss, weight = fig.axes
    expected = np.convolve(live.loss[0, 1], np.ones(4) / 4, mode="valid")  # the unscaled model's
    np.testing.assert_allclose(loss.get_lines()[1].get_ydata(), expected, rtol=1e-12)
    np.testing.assert_array_equal(loss.get_lines()[1].get_xdata(), np.arange(3, 12))
    np.testing.assert_array_equal(weight.get_lines()[0].get_ydata(), live.max_weight[0, 0, :, 0])
    # the held-out loss the lesson quotes is on the figure: one dot per scale at the last step
    dots = [ln for ln in loss.get_lines() if ln.get_marker() == "o" and len(ln.get_xdata())]
    np.testing.assert_array_equal([d.get_ydata()[0] for d in dots], live.eval_loss[0])
    assert [d.get_xdata()[0] for d in dots] == [11] * len(live.scales) and loss.get_ylabel() == "loss (nats)"
    with pytest.raises(ValueError, match=r"d_k=\[4, 8\]; expected one width"):
        plot_training_watch(compare_scales([4, 8], ["sqrt"], steps=2, d_model=8, eval_batch=8))


def test_minilm_scores_has_a_colour_bar_per_layer():
    rng = np.random.default_rng(0)
    theory = rng.uniform(10, 20, (6, 12))
    fig = rendered(plot_minilm_scores(theory, 2 * theory, rng.normal(0, 10, 500), 32))
    assert fig.axes[0].get_title() == "72 heads, $d_k$ = 32"
    assert fig.axes[2].get_ylabel() == "layer"  # the colour bar
    np.testing.assert_array_equal(fig.axes[0].collections[0].get_array(), np.repeat(np.arange(1, 7), 12))
    with pytest.raises(ShapeError, match=r"theory has shape \(6, 12\) and measured \(6, 11\)"):
        plot_minilm_scores(theory, theory[:, :11], np.zeros(3), 32)


def test_saturation_draws_one_coloured_line_per_scale(sat):
    fig = rendered(plot_saturation(sat))
    assert line_colors(fig.axes[2]) == [to_rgba(SCALE_COLOR[s]) for s in sat]
    np.testing.assert_allclose(fig.axes[1].get_lines()[0].get_ydata(), sat["none"].max_weight)


def test_jacobian_marks_the_scaled_and_unscaled_spreads(sat):
    sigmas = np.geomspace(0.1, 40, 9)
    fig = rendered(plot_jacobian(sat, sigmas, np.linspace(0.1, 0.3, 9)))
    marks = fig.axes[1].get_lines()[1:]
    assert [m.get_xdata()[0] for m in marks] == [1.0, 8.0, 32.0]  # sigma = 1 and sqrt(64), sqrt(1024)
    assert [m.get_markerfacecolor() for m in marks][2] == "none"  # d_k = 1024 is beyond the panel's 64
    with pytest.raises(ShapeError, match=r"sigmas has shape \(9,\) and jacobian_norm \(8,\)"):
        plot_jacobian(sat, sigmas, np.ones(8))


def test_full_comparison_shows_mean_and_range_over_seeds():
    results, _ = load_comparisons()
    fig = rendered(plot_full_comparison(results))
    assert [ax.get_title() for ax in fig.axes[:3]] == ["$d_k$ = 16", "$d_k$ = 64", "$d_k$ = 256"]
    mean = fig.axes[1].get_lines()[1].get_ydata()  # d_k = 64, unscaled
    np.testing.assert_allclose(mean, np.mean([r.loss[1, 1] for r in results], axis=0))


def test_scale_pair_shares_one_colour_scale_up_to_the_largest_weight():
    rng = np.random.default_rng(0)
    scaled, unscaled = scale_pair(rng.normal(size=(5, 32)), rng.normal(size=(5, 32)))
    fig = plot_scale_pair(scaled, unscaled, list("abcde"), 32, title="a head")
    images = [ax.get_images()[0] for ax in fig.axes[:2]]
    vmax = max(scaled.max(), unscaled.max())
    assert [im.get_clim() for im in images] == [(0, vmax), (0, vmax)]
    np.testing.assert_array_equal(images[1].get_array(), unscaled)
    assert fig.axes[2].get_ylabel().startswith("attention weight")  # the shared colour bar
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == list("abcde")
    rendered(fig)
    with pytest.raises(ShapeError, match=r"expected \(4, 4\) for 4 tokens"):
        plot_scale_pair(scaled, unscaled, list("abcd"), 32)


def test_saturation_training_draws_each_variant_in_its_colour():
    grid = run_grid(replace(SATURATION.config, seeds=(0, 1), d_ks=(8,), variants=("scaled", "unscaled"), steps=4))
    fig = rendered(plot_saturation_training(grid, d_k=8))
    share = fig.axes[1].get_lines()  # one mean line per variant
    assert [to_rgba(line.get_color()) for line in share] == [to_rgba(SCALE_COLOR[s]) for s in ("sqrt", "none")]
    np.testing.assert_allclose(share[1].get_ydata(), grid.select(8, "unscaled")[1][:, :, 0, 0].mean(0))


def test_backward_swap_puts_each_run_on_its_row_in_its_backward_colour():
    grid = run_grid(replace(BACKWARD.config, seeds=(0, 1), d_ks=(8,), steps=2, motion_every=0,
                            variants=("unscaled", "unscaled, tempered backward")))
    fig = rendered(plot_backward_swap(grid))
    ax = fig.axes[0]
    dots = ax.collections  # one scatter per variant, top row first
    assert [to_rgba(d.get_facecolor()[0])[:3] for d in dots] == [to_rgba(BACKWARD_COLOR[k])[:3]
                                                                  for k in ("true", "tempered")]
    for d, loss, row in zip(dots, grid.eval_loss, (1, 0)):
        np.testing.assert_allclose(d.get_offsets()[:, 0], loss)  # x: the held-out loss of each seed
        np.testing.assert_allclose(d.get_offsets()[:, 1], row)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["unscaled", "unscaled, tempered backward"]


def test_scale_explorer_legend_sits_below_the_plot_clear_of_the_toolbar():
    # plotly's toolbar floats over the top right of the plot area: a legend above it was covered at 390 px
    from attention_course.chapters.scaling.sliders import scale_explorer
    layout = scale_explorer([4, 64], n=8).layout
    assert layout["legend"]["y"] < 0 and layout["legend"]["yanchor"] == "top"
    assert layout["margin"]["b"] >= 90  # room for the wrapped legend under the lower panel's axis title
