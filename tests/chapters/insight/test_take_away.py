"""The lesson's take-away table (attention_course/chapters/insight/take_away.py) against the result files it merges."""

from __future__ import annotations

import numpy as np

from attention_course.chapters import insight as ch


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


def test_the_lesson_figure_draws_every_row_and_leaves_unrun_cells_grey():
    fig = ch.plot_take_away(ch.take_away_table())
    M = fig.axes[0].images[0].get_array()
    assert M.shape == (len(ch.TAKE_AWAY_ROWS), len(ch.TAKE_AWAY_TASKS))
    partner = [i for i, (_, v) in enumerate(ch.TAKE_AWAY_ROWS) if "scale learned" in v or v == "softmax attention"]
    assert not np.ma.getmaskarray(M)[partner, 2].any() and np.ma.getmaskarray(M)[:, 2].sum() == len(M) - 3
