"""Smoke tests of chapter 3's retest figures, rendered on Agg; values are read back from the artists."""

from attention_course.chapters.lowrank import figures as lf


def test_recall_plots_one_line_per_memory_and_dimension():
    out = {"ns": [4, 8], "ds": [16, 32], "seeds": [0, 1], "softmax": [[[1, 1], [1, 0]], [[1, 1], [1, 1]]],
           "linear": [[[0, 1], [0, 0]]] * 2, "linear_identity": [[[1, 1], [0, 1]]] * 2}
    ax = lf.plot_recall(out).axes[0]
    assert len(ax.get_lines()) == 6
    soft16 = next(ln for ln in ax.get_lines() if ln.get_label() == "softmax attention, d = 16")
    assert list(soft16.get_ydata()) == [1.0, 0.5]
