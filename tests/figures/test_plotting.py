"""Plot helpers render on Agg, return a Figure, label their axes and leave global state alone."""

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

import attention_course as ac


def test_plot_attention_labels_and_colorbar():
    w = ac.softmax(np.random.default_rng(0).normal(size=(3, 4)))
    fig = ac.plot_attention(w, ["a", "b", "c"], ["w", "x", "y", "z"], title="T")
    assert isinstance(fig, Figure)
    ax, cax = fig.axes  # the heatmap and its colour bar
    assert ax.get_xlabel() == "key (attended to)" and ax.get_ylabel() == "query (attending)"
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b", "c"]
    assert cax.get_ylabel() == f"weight (colour scale 0 to the largest, {w.max():.2f})"
    assert ax.images[0].get_clim() == (0.0, w.max())  # the scale fits the data by default
    fig.canvas.draw()


def test_plot_attention_explicit_vmax_keeps_the_plain_label():
    fig = ac.plot_attention(np.full((2, 2), 0.5), ["a", "b"], vmax=1.0)
    assert fig.axes[1].get_ylabel() == "weight" and fig.axes[0].images[0].get_clim() == (0.0, 1.0)


def test_plot_attention_accepts_torch_and_existing_axes():
    fig, ax = plt.subplots()
    out = ac.plot_attention(torch.full((2, 2), 0.5), ["a", "b"], ax=ax)
    assert out is fig


def test_plot_heatmap_rejects_3d():
    with pytest.raises(ValueError, match=r"shape \(2, 2, 2\)"):
        ac.plot_heatmap(np.zeros((2, 2, 2)))


def test_plot_masks_and_hull_render():
    fig = ac.plot_masks({"causal": ac.causal_mask(4), "pad": ac.padding_mask([2], 4)[0].repeat(4, 0)})
    assert len(fig.axes) == 3  # two masks and the legend's column
    legend = fig.axes[-1].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["blocked", "may attend"]
    assert fig.get_size_inches()[0] <= 7.0
    rng = np.random.default_rng(1)
    v = rng.normal(size=(5, 2))
    fig = ac.plot_convex_hull(v, v.mean(0, keepdims=True), value_labels=list("abcde"))
    assert fig.axes[0].get_xlabel() == "value dimension 1"
    fig.canvas.draw()


def test_plot_masks_wraps_into_rows_within_the_column():
    masks = {f"m{i}": ac.causal_mask(5) for i in range(5)}
    fig = ac.plot_masks(masks, ncols=3)
    images = [ax for ax in fig.axes if ax.images]
    assert len(images) == 5 and fig.get_size_inches()[0] <= 7.0
    rows = sorted({round(ax.get_position().y0, 3) for ax in images})
    assert len(rows) == 2  # 3 + 2 panels
    assert images[0].images[0].cmap.name == "mask" and images[0].images[0].get_array().max() == 1
