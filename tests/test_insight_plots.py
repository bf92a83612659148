"""figures/insight.py: the four-lens figure and the verdict bars render on Agg and draw what they are given."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from attention_course.course import claims as cl
from attention_course.figures.insight import plot_head_lenses, plot_verdicts
from attention_course.lenses.insight import head_lenses


def test_plot_head_lenses_has_the_four_lenses_labelled():
    rng = np.random.default_rng(3)
    maps = rng.dirichlet(np.full(6, 0.5), size=(2, 3, 6))  # (L=2, h=3, n=6, n=6)
    fig = plot_head_lenses(head_lenses(maps, list("abcdef"), rng.normal(size=(9, 9)), 0, 0), title="synthetic")
    fig.canvas.draw()
    titles = " ".join(ax.get_title() for ax in fig.axes)
    for word in ("Kernel smoothing", "Low rank", "Subspaces", "Message passing"):
        assert word in titles
    assert fig.get_suptitle() == "synthetic"


def test_plot_verdicts_counts_each_section_and_verdict():
    claims = [SimpleNamespace(section=s, verdict=v) for s, v in
              [(1, "holds"), (1, "holds"), (2, "wrong"), (3, "when"), (1, "wrong")]]
    fig = plot_verdicts(claims, {1: "A", 2: "B", 3: "C"}, ("holds", "when", "wrong"),
                        colours=("g", "y", "r"), title="t")
    fig.canvas.draw()
    ax = fig.axes[0]
    widths = np.array([p.get_width() for p in ax.patches]).reshape(3, 3)  # (verdict, section)
    np.testing.assert_array_equal(widths, [[2, 0, 0], [0, 0, 1], [1, 1, 0]])
    assert [t.get_text() for t in ax.get_yticklabels()] == ["1. A", "2. B", "3. C"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["holds", "when", "wrong"]
    assert ax.get_title() == "t"


def test_plot_verdicts_on_the_ledger_has_one_bar_per_section_and_verdict():
    fig = plot_verdicts(cl.CLAIMS, cl.SECTIONS, cl.VERDICTS)
    ax = fig.axes[0]
    assert len(ax.patches) == len(cl.SECTIONS) * len(cl.VERDICTS)
    assert sum(p.get_width() for p in ax.patches) == len(cl.CLAIMS)
