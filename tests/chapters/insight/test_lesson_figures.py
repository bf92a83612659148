"""The lesson's memory picture, retrieval curves, shuffled heads, margin sweep and temperature slider
(chapters/insight/figures.py, sliders.py): each draws the numbers it is given, computed here again."""

from __future__ import annotations

import numpy as np
import pytest

from attention_course.chapters import insight as ch
from attention_course.figures.style import MAX_WIDTH
from page_spec import page_spec


@pytest.fixture(scope="module")
def memory():
    rng = np.random.default_rng(3)
    keys = np.where(rng.random((6, 16)) < 0.5, -1.0, 1.0)  # (M, d)
    values = np.where(rng.random((6, 3)) < 0.5, -1.0, 1.0)  # (M, d_v)
    query = keys[2].copy()
    query[[0, 5]] *= -1
    return keys, values, query


def test_lookup_bars_count_the_signs_each_key_shares_with_the_query(memory):
    keys, _, query = memory
    fig = ch.plot_lookup(keys, query, target=2)
    bars = [p.get_width() for p in fig.axes[1].patches]
    assert bars == [sum(int(a == b) for a, b in zip(k, query)) for k in keys]  # a loop, not the vectorised sum
    outlined = [p for p in fig.axes[0].patches]  # the flipped signs of the query
    assert sorted(round(p.get_x() + 0.5) for p in outlined) == [0, 5]
    assert fig.get_size_inches()[0] <= MAX_WIDTH


def test_lookup_names_a_query_of_the_wrong_length(memory):
    keys, _, query = memory
    with pytest.raises(ValueError, match=r"query \(15,\)"):
        ch.plot_lookup(keys, query[:15], target=2)


def test_temperature_slider_shows_the_softmax_weights_at_each_beta(memory):
    keys, values, query = memory
    betas = [0.0, 0.25, 1.0]
    fig = ch.temperature_explorer(keys, values, query, target=2, betas=betas)
    assert fig.labels == ["β = 0", "β = 0.25", "β = 1"] and fig.start == 1  # 1/sqrt(16) = 0.25
    assert fig.verdict == "" and fig.flip is None  # a slider that teaches carries no verdict flag
    scores = keys @ query
    for b, frame in zip(betas, page_spec(fig)["frames"]):
        w = np.exp(b * scores) / np.exp(b * scores).sum()  # no shift: small scores, float64
        assert frame["data"][0]["y"] == pytest.approx(w, abs=5e-5)  # the page keeps 4 digits
        assert f"{w[2]:.2f}" in frame["readout"]
    assert "do not all match" in page_spec(fig)["frames"][0]["readout"]  # beta = 0: the mean of all values
    assert "all match." in page_spec(fig)["frames"][2]["readout"]


def test_retrieval_curves_draw_the_shares_of_the_capacity_sweep():
    doc = ch.capacity_sweep(dims=(8,), max_log2=(3,), n_queries=20, seeds=(1,))
    sizes = doc["curves"]["outer product (linear)"]["8"]["sizes"]
    shares = ch.recall_shares(8, sizes, n_cues=20, seed=1)
    fig = ch.plot_retrieval(sizes, shares, d=8)
    lines = {ln.get_label(): ln for ln in fig.axes[0].get_lines() if not ln.get_label().startswith("_")}
    for name, curves in doc["curves"].items():  # the lesson's call computes what the sweep stores
        np.testing.assert_allclose(lines[name].get_ydata(), curves["8"]["accuracy"][0])
        np.testing.assert_array_equal(lines[name].get_xdata(), sizes)


def test_shuffled_heads_label_each_panel_with_its_own_words_and_draw_its_map():
    A = np.random.default_rng(0).random((1, 2, 3, 3))  # (L, H, m, m)
    A[:, 1] *= 0.3  # the second head spreads its weight: drawn on its own scale, 0 to 0.3
    B = A[:, :, ::-1, ::-1]
    fig = ch.plot_shuffled_heads([["a", "b", "c"], ["c", "b", "a"]], [A, B], {"first": (0, 0), "second": (0, 1)})
    assert len(fig.axes) == 6  # four panels, then one weight scale per head
    assert [ax.get_ylabel() for ax in fig.axes[4:]] == ["weight", "weight"]
    for r, head in enumerate((0, 1)):  # each head on its own scale, the same for its two panels
        top = np.ceil(max(A[0, head].max(), B[0, head].max()) * 10) / 10
        assert [fig.axes[2 * r + c].images[0].get_clim() for c in (0, 1)] == [(0.0, min(1.0, top))] * 2
    np.testing.assert_array_equal(fig.axes[3].images[0].get_array(), B[0, 1])
    assert [t.get_text() for t in fig.axes[3].get_yticklabels()] == ["c", "b", "a"]
    with pytest.raises(ValueError, match="the sentence and one shuffle"):
        ch.plot_shuffled_heads([["a"]], [A], {"first": (0, 0)})


def test_ingredients_without_spread_print_the_mean_only():
    t = {("r", "a"): ch.Score(0.9, 0.8, 1.0, 3)}
    texts = [x.get_text() for x in ch.plot_ingredients(t, [("A", "a")], [("recall", "r")], spread=False).axes[0].texts]
    assert texts == ["0.90"]
    texts = [x.get_text() for x in ch.plot_ingredients(t, [("A", "a")], [("recall", "r")]).axes[0].texts]
    assert texts == ["0.90\n0.80-1.00"]


def test_kind_sweep_draws_each_share_at_its_threshold_in_each_panel():
    fig = ch.plot_kind_sweep([("margin", [0.1, 0.2, 0.4], 0.2, {"MiniLM content": [0.4, 0.3, 0.2],
                                                                  "SmolLM2 position": [0.1, 0.1, 0.0]}),
                              ("sink line", [0.3, 0.5], 0.5, {"MiniLM content": [0.1, 0.3]})])
    for ax, (xs, ys) in zip(fig.axes, (([0.1, 0.2, 0.4], [0.4, 0.3, 0.2]), ([0.3, 0.5], [0.1, 0.3]))):
        lines = {ln.get_label(): ln for ln in ax.get_lines() if not ln.get_label().startswith("_")}
        assert list(lines["MiniLM content"].get_xdata()) == xs and list(lines["MiniLM content"].get_ydata()) == ys
    smol = next(ln for ln in fig.axes[0].get_lines() if ln.get_label() == "SmolLM2 position")
    assert smol.get_linestyle() == "--" and smol.get_color() == ch.figures.KIND_COLORS["position"]


def test_kind_shares_stack_each_models_bar_to_one():
    shares = {"A": {"content": 0.33, "position": 0.11, "sink": 0.51, "mixed": 0.05},
              "B": {"content": 1.0, "position": 0.0, "sink": 0.0, "mixed": 0.0}}
    fig = ch.plot_kind_shares(shares)
    bars = fig.axes[0].patches
    assert len(bars) == 8  # four kinds x two models
    ends = {}
    for b in bars:
        ends[round(b.get_y(), 6)] = max(ends.get(round(b.get_y(), 6), 0), b.get_x() + b.get_width())
    assert sorted(round(v, 9) for v in ends.values()) == [1.0, 1.0]
    assert [b.get_width() for b in bars[:2]] == [0.51, 0.0]  # the sink bins first, model by model
