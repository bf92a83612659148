"""The lesson's take-away table (attention_course/chapters/insight/take_away.py) against the result files it merges."""

from __future__ import annotations

from attention_course.chapters import insight as ch
from attention_course.chapters.insight import take_away as ch_take_away


def test_every_lesson_cell_comes_from_its_own_run():
    table = ch.take_away_table()
    grid = ch.accuracy_table(ch.load_ablations()["runs"])
    metric = ch.accuracy_table(ch.load_metric()["runs"])
    partner = ch.accuracy_table(ch.load_partner()["runs"])
    R, C = ch.ingredients.RECALL, ch.ingredients.COPY
    assert table[C, "tied"] == grid[C, "tied"]  # the fixed-scale tied head, from the ablation grid
    assert table[C, "tied W_Q = W_K, scale learned"] == metric[C, "tied W_Q = W_K"]
    assert table[R, "W_Q = W_K = I, scale learned"] == metric[R, "W_Q = W_K = I"]
    assert table[ch.PARTNER, "softmax attention"] == partner[ch.PARTNER, "learned W_Q, W_K"]
    assert (ch.PARTNER, "tied") not in table  # partner recall was run with the learned scale only: grey


def test_the_lesson_figure_draws_a_bar_per_trained_cell_and_marks_the_recall_only_rows():
    table = ch.take_away_table()
    fig = ch.plot_take_away(table)
    ax = fig.axes[0]
    cells = [(task, v) for _, v in ch_take_away.TAKE_AWAY_ROWS for _, task in ch_take_away.TAKE_AWAY_TASKS]
    trained = [c for c in cells if c in table]
    widths = sorted(round(p.get_width(), 6) for p in ax.patches)
    assert widths == sorted(round(table[c].mean, 6) for c in trained)  # every bar is a trained cell's mean
    untrained = [t for t in ax.texts if t.get_text() == "recall only"]
    assert len(untrained) == len(cells) - len(trained) > 0
    assert [t.get_text() for t in ax.get_yticklabels()] == [r for r, _ in ch_take_away.TAKE_AWAY_ROWS]


def test_the_partner_numbers_the_lesson_prints_are_the_partner_runs():
    table = ch.take_away_table()
    partner = ch.accuracy_table(ch.load_partner()["runs"])
    rows = (("softmax attention", "learned W_Q, W_K"), ("tied W_Q = W_K, scale learned", "tied W_Q = W_K"),
            ("W_Q = W_K = I, scale learned", "W_Q = W_K = I"))
    means = [round(table[ch.PARTNER, lesson].mean, 6) for lesson, _ in rows]
    assert means == [round(partner[ch.PARTNER, run].mean, 6) for _, run in rows]
    assert means[0] > 0.9 and max(means[1:]) < 0.6  # learned finds the partner; tied and fixed about half
