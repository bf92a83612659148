"""Smoke tests of chapter 3's retest figures, rendered on Agg; values are read back from the artists."""

import numpy as np
from matplotlib.colors import to_rgba

from attention_course.chapters.lowrank import figures as lf
from attention_course.figures.style import method_color


def test_rank_vs_length_plots_the_median():
    rows = [{"n": 16, "effective_rank": [3.0, 4.0, 5.0]}, {"n": 64, "effective_rank": [9.0, 12.0, 20.0]}]
    ax = lf.plot_rank_vs_length(rows, 0.8).axes[0]
    med = next(ln for ln in ax.get_lines() if ln.get_label().startswith("median"))
    assert list(med.get_ydata()) == [4.0, 12.0]


def test_swap_plots_mean_over_rows_and_the_baseline():
    rows = [{"exact": 0.0, "uniform": 4.0, "rank_2": 3.0, "topk_2": 0.1},
            {"exact": 0.0, "uniform": 6.0, "rank_2": 1.0, "topk_2": 0.3}]
    ax = lf.plot_swap(rows, [2], "loss", "t", exact_key="exact", log=False).axes[0]
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    assert list(lines["rank-k truncation"].get_ydata()) == [2.0]
    assert np.allclose(lines["top-k weights per row"].get_ydata(), [0.2])
    assert list(lines["uniform attention (baseline)"].get_ydata()) == [5.0, 5.0]
    assert to_rgba(lines["rank-k truncation"].get_color()) == to_rgba(method_color("svd"))
    assert to_rgba(lines["top-k weights per row"].get_color()) == to_rgba(method_color("top-k"))


def test_recall_plots_one_line_per_memory_and_dimension():
    out = {"ns": [4, 8], "ds": [16, 32], "seeds": [0, 1], "softmax": [[[1, 1], [1, 0]], [[1, 1], [1, 1]]],
           "linear": [[[0, 1], [0, 0]]] * 2, "linear_identity": [[[1, 1], [0, 1]]] * 2}
    ax = lf.plot_recall(out).axes[0]
    assert len(ax.get_lines()) == 6
    soft16 = next(ln for ln in ax.get_lines() if ln.get_label() == "softmax attention, d = 16")
    assert list(soft16.get_ydata()) == [1.0, 0.5]
