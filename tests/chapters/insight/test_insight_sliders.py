"""Chapter 7's flagged sliders for metric-learned and softmax-over-linear, against the stored runs."""

from __future__ import annotations

import json
import re
from fractions import Fraction

import pytest

from attention_course.chapters import insight as ch
from attention_course.course.claims import by_id
from attention_course.chapters.insight import sliders as ch_sliders


@pytest.fixture(scope="module")
def metric_table():
    t = ch.accuracy_table(ch.load_metric()["runs"])
    t.update(ch.accuracy_table(ch.load_partner()["runs"]))
    return t


@pytest.fixture(scope="module")
def linear_table():
    return ch.linear_table(ch.merged_linear(ch.load_linear()["runs"], ch.load_long()["runs"]))


def _spec(fig) -> dict:
    return json.loads(re.search(r'<script type="application/json"[^>]*>(.*?)</script>', fig.to_html(), re.S).group(1))


def test_metric_flag_is_the_first_task_where_the_fixed_metric_falls_behind(metric_table, check_flagged_html):
    fig = ch.metric_explorer(metric_table)
    gaps = [metric_table[t, a].mean - metric_table[t, b].mean for _, t, (a, b) in ch_sliders.METRIC_TASKS]
    assert [g > ch_sliders.METRIC_MARGIN for g in gaps] == [False, False, True]  # the stored runs: only partner recall
    assert fig.flip == 2 and fig.labels[fig.flip] == "partner recall"
    assert ch.decide_metric_learned(metric_table) == "holds when"  # the earlier rule, with learned embeddings
    html, _ = check_flagged_html(fig, "metric-learned")
    for (label, t, pair), frame in zip(ch_sliders.METRIC_TASKS, _spec(fig)["frames"]):
        assert frame["data"][0]["y"] == pytest.approx([metric_table[t, v].mean for v in pair], abs=5e-5)  # the page keeps 4 digits
        assert f"{metric_table[t, pair[0]].mean:.2f}" in frame["readout"]


def test_pairs_flag_is_the_ratio_from_which_linear_falls_behind_everywhere(linear_table, check_flagged_html):
    fig = ch.pairs_explorer(linear_table, ch.PAIRS, ch.WIDTHS)
    ratios = sorted({Fraction(n, d) for n in ch.PAIRS for d in ch.WIDTHS})
    assert fig.labels == [f"N/d = {r}" for r in ratios]
    cut = ch.ratio_threshold(linear_table)
    assert cut == 1.0 and fig.labels[fig.flip] == "N/d = 1"  # the verdict's condition: as many pairs as dimensions
    assert by_id("softmax-over-linear").verdict == "holds when" == ch.decide_softmax_linear(linear_table)
    check_flagged_html(fig, "softmax-over-linear", max_bytes=1_000_000)
    for r, frame in zip(ratios, _spec(fig)["frames"]):
        points = [(n, d) for d in ch.WIDTHS for n in ch.PAIRS if Fraction(n, d) == r]
        soft, lin = frame["data"]
        assert soft["y"] == pytest.approx([linear_table["softmax attention", n, d].mean for n, d in points], abs=5e-5)
        assert lin["y"] == pytest.approx([linear_table["linear attention", n, d].mean for n, d in points], abs=5e-5)


def test_a_table_where_linear_never_falls_behind_has_no_flag():
    S = lambda m: ch.Score(m, m, m, 2)  # noqa: E731
    t = {(mixer, n, 16): S(0.99) for mixer in ("softmax attention", "linear attention") for n in (4, 16)}
    assert ch.pairs_explorer(t, pairs=(4, 16), widths=(16,)).flip is None
