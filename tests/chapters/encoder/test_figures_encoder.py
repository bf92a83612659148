"""Chapter 8's figures render on Agg, fit the book's column and label what they draw."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.figure import Figure

from attention_course.core._backend import ShapeError
from attention_course.figures.style import DPI, MAX_WIDTH
from attention_course.chapters.encoder import figures as bf


def _fits(fig):
    assert isinstance(fig, Figure) and fig.get_size_inches()[0] <= MAX_WIDTH and fig.dpi == DPI
    return fig


def test_gelus():
    fig = _fits(bf.plot_gelus())
    left, right = fig.axes
    assert [l.get_label() for l in left.get_lines()][:2] == ["exact (erf), BERT", "tanh approximation"]
    assert "4.7e-4 at |z| = 2.7" in [t.get_text() for t in right.texts]


def test_stream_size_and_layer_gaps():
    _fits(bf.plot_stream_size({"post-LN": [1, 1.1, 1.0], "pre-LN": [1, 3, 5]}))
    fig = _fits(bf.plot_layer_gaps({"float32": [1e-7, 2e-6, 2e-6], "float64": [1e-15, 3e-15, 4e-15]},
                                   bound=[1e-5, 3e-5, 5e-5], tolerance=1.8e-4))
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels[-1] == "one tolerance for every layer, 1.8e-04" and [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["emb.", "1", "2"]
    # the lesson's version: no per-layer estimate, the single number named as the estimate
    fig = _fits(bf.plot_layer_gaps({"ours": [1e-7, 2e-6, 2e-6], "tanh GELU": [1e-7, 1e-3, 2e-3]}, None, 1.8e-4,
                                   tolerance_label="float32 estimate"))
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == ["ours", "tanh GELU", "float32 estimate, 1.8e-04"]
    assert fig.axes[0].get_ylim()[0] == 1e-8


def test_search_outlines_each_best_match():
    sim = np.array([[0.9, 0.1, 0.2], [0.0, 0.3, 0.8]])
    fig = _fits(bf.plot_search(sim, ["q one", "q two"], ["a", "b", "a sentence far too long to fit as a tick label"]))
    ax = fig.axes[0]
    assert [(p.get_x(), p.get_y()) for p in ax.patches] == [(-0.5, -0.5), (0.5, 1.5)]
    assert ax.get_yticklabels()[2].get_text() == "a sentence far too long to fit as a tick\nlabel"  # wrapped, whole
    with pytest.raises(ShapeError, match=r"sim has shape \(2, 3\); expected \(queries, corpus\) = \(2, 2\)"):
        bf.plot_search(sim, ["q", "r"], ["a", "b"])


def test_dependence_leaves_exact_zeros_white():
    dep = np.tril(np.arange(1.0, 17.0).reshape(4, 4))
    fig = _fits(bf.plot_dependence({"causal": dep, "full": dep + 1}))
    image = fig.axes[0].get_images()[0].get_array()
    assert bool(image.mask[0, 1]) and not bool(image.mask[1, 0])


def test_rank_shares_draws_the_trained_line_over_the_scrambled_ones():
    fig = _fits(bf.plot_rank_shares([0.3, 0.4, 0.1], [[0.4, 0.3, 0.05], [0.41, 0.29, 0.04]], n=12))
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["scrambled layer matrices (3 seeds)", "MiniLM, trained"]
    assert len(ax.get_lines()) == 3 and "n = 12" in ax.get_title()


def test_encoder_plan_names_every_part_once_per_box():
    fig = _fits(bf.plot_encoder_plan(n_layers=6))
    texts = [t.get_text() for t in fig.axes[0].texts]
    for part in ("multi-head\nattention", "feed-forward\n(GELU)", "encoder layer\n× 6", "mean pooling,\nlength 1"):
        assert texts.count(part) == 1, part
    assert texts.count("LayerNorm") == 2 and texts.count("+") == 2  # post-LN: add, then normalise, twice
    assert fig.get_size_inches()[0] <= 5.5  # narrow, so its 10-pt text stays legible on a 390-px phone
