"""chapters/insight/figures.py: the head kinds and the verdict bars render on Agg, fit the column
and draw what they are given."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from attention_course.course import claims as cl
import pytest

from attention_course.chapters.insight.figures import (
    KIND_COLORS,
    plot_head_kinds,
    plot_verdicts,
)
from attention_course.figures.style import MAX_WIDTH


def test_plot_head_kinds_places_each_head_at_its_scores_in_its_kind_colour():
    w = np.array([[0.9, 0.1, 0.5]])  # (L=1, H=3)
    o = np.array([[0.1, 0.8, 0.45]])
    labels = np.array([["content", "position", "sink"]])
    counts = {"content": [1, 2], "position": [1, 0], "sink": [1, 1], "mixed": [0, 0]}
    fig = plot_head_kinds(w, o, labels, counts, {"uniform": (0.0, 0.0)}, control=(w * 0 + 0.7, o * 0 + 0.1))
    ax, ax_c = fig.axes[:2]
    by_kind = {c.get_label(): c for c in ax.collections}
    for kind, (x, y) in (("content", (0.9, 0.1)), ("position", (0.1, 0.8)), ("sink", (0.5, 0.45))):
        np.testing.assert_allclose(by_kind[kind].get_offsets(), [[x, y]])
        assert tuple(by_kind[kind].get_facecolor()[0][:3]) == pytest.approx(
            tuple(int(KIND_COLORS[kind][i:i + 2], 16) / 255 for i in (1, 3, 5)))
    assert len(by_kind["head of a weight-shuffled model"].get_offsets()) == 3
    heights = np.array([p.get_height() for p in ax_c.patches]).reshape(4, 2)  # (kind, sentence)
    np.testing.assert_array_equal(heights, [[1, 2], [1, 0], [1, 1], [0, 0]])
    assert fig.get_size_inches()[0] <= MAX_WIDTH


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
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["holds", "when", "wrong"]
    assert ax.get_title() == "t"


def test_plot_verdicts_on_the_ledger_has_one_bar_per_section_and_verdict():
    fig = plot_verdicts(cl.CLAIMS, cl.SECTIONS, cl.VERDICTS)
    ax = fig.axes[0]
    assert len(ax.patches) == len(cl.SECTIONS) * len(cl.VERDICTS)
    assert sum(p.get_width() for p in ax.patches) == len(cl.CLAIMS)


def test_plot_asymmetry_lists_a_variant_missing_from_the_first_group_in_its_legend():
    from attention_course.chapters.insight.asymmetry_figures import plot_asymmetry

    acc = {("a", "u"): [1.0], ("b", "u"): [0.9], ("b", "s"): [0.5]}  # "s" only in the second group
    fig = plot_asymmetry(acc, [("task a", "a"), ("task b", "b")], [("untied", "u"), ("symmetric", "s")], 1 / 64)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["untied", "symmetric"]
