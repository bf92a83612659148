"""Chapter 7's flagged sliders for metric-learned and softmax-over-linear, against the stored runs."""

from __future__ import annotations

import re
from fractions import Fraction

import pytest

from attention_course.chapters import insight as ch
from attention_course.course.claims import by_id
from attention_course.chapters.insight import sliders as ch_sliders
from page_spec import page_spec


@pytest.fixture(scope="module")
def metric_table():
    t = ch.accuracy_table(ch.load_metric()["runs"])
    t.update(ch.accuracy_table(ch.load_partner()["runs"]))
    return t


@pytest.fixture(scope="module")
def linear_table():
    return ch.linear_table(ch.merged_linear(ch.load_linear()["runs"], ch.load_long()["runs"]))


def test_metric_flag_is_the_first_task_where_the_fixed_metric_falls_behind(metric_table, check_flagged_html):
    fig = ch.metric_explorer(metric_table)
    gaps = [metric_table[t, a].mean - metric_table[t, b].mean for _, t, (a, b) in ch_sliders.METRIC_TASKS]
    assert [g > ch_sliders.METRIC_MARGIN for g in gaps] == [False, False, True]  # the stored runs: only partner recall
    assert fig.flip == 2 and fig.labels[fig.flip] == "partner recall"
    html, _ = check_flagged_html(fig, "metric-learned")
    for (label, t, pair), frame in zip(ch_sliders.METRIC_TASKS, page_spec(fig)["frames"]):
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
    for r, frame in zip(ratios, page_spec(fig)["frames"]):
        points = [(n, d) for d in ch.WIDTHS for n in ch.PAIRS if Fraction(n, d) == r]
        soft, lin = frame["data"]
        assert soft["y"] == pytest.approx([linear_table["softmax attention", n, d].mean for n, d in points], abs=5e-5)
        assert lin["y"] == pytest.approx([linear_table["linear attention", n, d].mean for n, d in points], abs=5e-5)


def test_a_table_where_linear_never_falls_behind_has_no_flag():
    S = lambda m: ch.Score(m, m, m, 2)  # noqa: E731
    t = {(mixer, n, 16): S(0.99) for mixer in ("softmax attention", "linear attention") for n in (4, 16)}
    assert ch.pairs_explorer(t, pairs=(4, 16), widths=(16,)).flip is None


def test_content_flags_sit_where_a_models_verdict_changes(check_flagged_html):
    """content-not-position: the margin slider over the stored run flags each margin where MiniLM's or
    SmolLM2's verdict turns, computed here from the rule margin by margin."""
    cp = ch.load_content_position()
    scores = {m: ch.stored_scores(cp, m) for m in ("MiniLM", "SmolLM2")}
    margins = [0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    scores["scrambled"] = ch.stored_scores(cp, "scrambled")  # drawn beside, never flagged
    fig = ch.content_explorer(scores, margins, beside=["scrambled"])
    del scores["scrambled"]
    verdicts = {m: [ch.content_verdict(sc.shares(margin_tol=g)) for g in margins] for m, sc in scores.items()}
    assert verdicts["MiniLM"][margins.index(0.2)] == by_id("content-not-position").verdict == "holds when"
    changes = sorted({i for v in verdicts.values() for i in range(1, len(margins)) if v[i] != v[i - 1]})
    assert changes and fig.flip == changes[0] and fig.labels[fig.start] == "margin 0.2"
    html, note = check_flagged_html(fig, "content-not-position", every_frame=True)
    flags = re.findall(r'data-flip="(\d+)" data-verdict="content-not-position"', html)
    assert sorted(int(i) for i in flags) == sorted(i for v in verdicts.values() for i in range(1, len(margins))
                                                   if v[i] != v[i - 1])  # one flag per change of a flagged model
    for g, frame in zip(margins, page_spec(fig)["frames"]):
        mini = scores["MiniLM"].shares(margin_tol=g)
        assert frame["data"][1]["x"][0] == pytest.approx(mini["content"], abs=5e-5)  # the content bar, MiniLM
        assert f"content {mini['content']:.2f}" in frame["readout"]
