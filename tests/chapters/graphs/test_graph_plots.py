"""Smoke tests for attention_course.chapters.graphs.figures: each figure renders on Agg and says what it shows."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.patches import FancyArrowPatch

from attention_course.chapters.graphs import figures as gp
from attention_course.core._backend import ShapeError
from attention_course.chapters.graphs.collapse import rank_collapse, rank_one_part_curves


def _render(fig):
    fig.canvas.draw()  # raises if anything cannot be drawn
    return fig


def _arrows(ax):
    return [p for p in ax.patches if isinstance(p, FancyArrowPatch)]


@pytest.mark.parametrize("layout", ["arc", "circle"])
def test_attention_graph_draws_one_arrow_per_kept_edge(layout):
    w = np.random.default_rng(0).random((6, 6)) ** 4
    w /= w.sum(axis=1, keepdims=True)
    fig = _render(gp.plot_attention_graph(w, list("abcdef"), threshold=0.2, layout=layout, title="t"))
    ax = fig.axes[0]
    off_diagonal = w[~np.eye(6, dtype=bool)]
    assert len(_arrows(ax)) == int((off_diagonal > 0.2).sum())
    assert [t.get_text() for t in ax.texts if t.get_text() in "abcdef"] == list("abcdef")
    assert ax.get_title() == "t"
    bar = fig.axes[1]  # the colour bar: below a line of tokens, beside a circle
    assert "weight" in (bar.get_xlabel() if layout == "arc" else bar.get_ylabel())


def test_attention_graph_top_k_and_widths():
    w = np.array([[0.1, 0.5, 0.4], [0.3, 0.3, 0.4], [0.05, 0.9, 0.05]])
    ax = _render(gp.plot_attention_graph(w, threshold=0.0, top_k=1)).axes[0]
    arrows = _arrows(ax)
    assert len(arrows) == 3  # one strongest incoming edge per node
    widths = sorted(a.get_linewidth() for a in arrows)
    assert widths[-1] > widths[0]  # the 0.9 edge is drawn thickest
    w[1] = [0.2, 0.7, 0.1]  # node 1's strongest edge is its self loop: no arrow into it
    ax = _render(gp.plot_attention_graph(w, threshold=0.0, top_k=1)).axes[0]
    assert len(_arrows(ax)) == 2


def test_attention_graph_errors():
    with pytest.raises(ShapeError, match=r"shape \(2, 3\); expected a square"):
        gp.plot_attention_graph(np.ones((2, 3)))
    with pytest.raises(ShapeError, match=r"1 labels for weights of shape \(2, 2\)"):
        gp.plot_attention_graph(np.eye(2), ["a"])
    with pytest.raises(ValueError, match=r"layout='grid'"):
        gp.plot_attention_graph(np.eye(2), layout="grid")


def test_rank_collapse_plot_is_log_scale_with_a_line_per_curve():
    curves = {"pure": rank_collapse(n_layers=4, seed=0),
              "skip": rank_collapse(n_layers=4, seed=0, skip=True)}
    fig = _render(gp.plot_rank_collapse(curves))
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["pure", "skip"]
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), curves["pure"])
    assert "rank 1" in ax.get_ylabel() and ax.get_xlabel() == "layer"


def test_rank_one_parts_plot_shows_median_of_each_part():
    parts = {"skip": rank_one_part_curves(n_layers=4, seeds=range(3), skip=True)}  # (3, 5, 2)
    fig = _render(gp.plot_rank_one_parts(parts))
    spread_ax, shared_ax = fig.axes
    assert spread_ax.get_yscale() == shared_ax.get_yscale() == "log"
    np.testing.assert_allclose(spread_ax.get_lines()[0].get_ydata(), np.median(parts["skip"][..., 0], axis=0))
    np.testing.assert_allclose(shared_ax.get_lines()[0].get_ydata(), np.median(parts["skip"][..., 1], axis=0))
    assert "spread" in spread_ax.get_ylabel() and "shared" in shared_ax.get_ylabel()
    assert [t.get_text() for t in spread_ax.get_legend().get_texts()] == ["skip"]



def test_maps_log_shares_one_log_colour_scale():
    raw = np.full((4, 4), 0.25)
    sharp = np.eye(4) * 0.97 + 0.01
    fig = _render(gp.plot_maps_log({"raw": raw, "sharp": sharp}, list("abcd"), vmin=1e-3, title="pair"))
    assert [ax.get_title() for ax in fig.axes[:2]] == ["raw", "sharp"]
    images = [ax.get_images()[0] for ax in fig.axes[:2]]
    assert all(im.norm.vmin == 1e-3 and im.norm.vmax == 1.0 for im in images)
    np.testing.assert_allclose(images[1].get_array(), sharp)
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == list("abcd")
    assert fig.axes[2].get_yscale() == "log" and "log" in fig.axes[2].get_ylabel()
    with pytest.raises(ShapeError, match=r"map 'v' has shape \(4,\)"):
        gp.plot_maps_log({"v": np.ones(4)})
    with pytest.raises(ValueError, match="maps is empty"):
        gp.plot_maps_log({})


def test_head_grid_annotates_every_head_and_tops_the_scale():
    values = np.arange(12.0).reshape(3, 4) / 20  # (layers, heads)
    fig = _render(gp.plot_head_grid(values, label="miss", title="t", vmax=1.0))
    ax, cbar = fig.axes
    assert [t.get_text() for t in ax.texts][:3] == [".00", ".05", ".10"]
    assert len(ax.texts) == 12 and ax.get_title() == "t" and cbar.get_ylabel() == "miss"
    assert ax.images[0].get_clim() == (0.0, 1.0)
    assert fig.get_size_inches()[0] <= 7.0
    with pytest.raises(ShapeError, match=r"\(12,\)"):
        gp.plot_head_grid(values.ravel(), label="miss")


def test_probe_curves_draw_medians_bands_and_one_colour_per_readout():
    stacks = {"a": np.array([[1.0, 0.5, 0.2], [1.0, 0.7, 0.4]])}  # (seeds, layers)
    encoder = {"M, own": np.ones(4), "M, previous": np.linspace(0.2, 0.9, 4),
               "scrambled, own": np.ones(4), "scrambled, previous": np.full(4, 0.3)}
    fig = _render(gp.plot_probe_curves(stacks, [0, 2, 4], encoder, chance=0.1, title="t"))
    left, right = fig.axes
    np.testing.assert_allclose(left.get_lines()[0].get_ydata(), [1.0, 0.6, 0.3])  # the median of two seeds
    assert left.get_lines()[-1].get_ydata()[0] == 0.1  # the chance line
    lines = {line.get_label(): line for line in right.get_lines()}
    assert lines["M, own"].get_color() == lines["scrambled, own"].get_color()
    assert lines["M, own"].get_color() != lines["M, previous"].get_color()
    assert lines["scrambled, previous"].get_linestyle() == "--" and lines["M, own"].get_linestyle() == "-"
    assert fig.get_size_inches()[0] <= 7.0



def test_rank_collapse_label_is_the_lessons_formula_with_the_mean_token():
    label = _render(gp.plot_rank_collapse({"pure": np.array([1.0, 0.1])})).axes[0].get_ylabel()
    assert label.startswith("distance to rank 1") and r"\bar{x}" in label and r"\min" not in label
