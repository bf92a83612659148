"""Sliders of chapter 5 (learned-topology, l-hops, depth-keeps-information, unlike-gnns): each frame's
deciding number and each flag against an independent computation from the stored JSON, the
package or a closed form; the HTML; bad input.

The counts and flag rules live in the chapter's measure modules (``topology_rule``, ``propagation``,
``depth_probe``) and are checked here against the same independent computations; the stored
data's writers in the chapter's ``runs`` module."""

from __future__ import annotations

import json

import matplotlib.pyplot as plt
import numpy as np
import pytest

from attention_course.chapters import graphs
from attention_course.chapters.graphs.composition import STORED_RUN, load_runs, summarise
from attention_course.chapters.graphs import sliders as fg
from attention_course.chapters.graphs import depth_probe, topology_rule
from attention_course.chapters.graphs.propagation import (
    band_width,
    banded_mask,
    banded_stack_reach,
    hops_flip,
    receptive_field,
)
from attention_course.chapters.graphs import gnn as graphs_gnn
from attention_course.chapters.graphs import slider_data as graphs_slider_data
from attention_course.chapters.graphs import topology_rules as graphs_topology_rules
from page_spec import page_spec


def _raw(path) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _khop() -> tuple[dict, int]:
    """Chapter 5's k-hop summary and its number of nodes, as the chapter passes them to the slider."""
    doc = load_runs()
    return summarise(doc["runs"]), doc["settings"]["n_nodes"]


@pytest.fixture(scope="module")
def figures():
    figs = {"rule": fg.rule_mass_explorer(), "hops": fg.hops_explorer(*_khop()), "probe": fg.probe_depth_explorer(),
            "topkey": fg.top_key_explorer()}
    yield figs
    plt.close("all")


@pytest.mark.parametrize("key, verdict", [("rule", "learned-topology"), ("hops", "l-hops"),
                                          ("probe", "depth-keeps-information"), ("topkey", "unlike-gnns")])
def test_html_is_deterministic_and_links_its_verdict(figures, key, verdict, check_flagged_html):
    check_flagged_html(figures[key], verdict, max_bytes=400_000, every_frame=True)  # two such figures and the head explorer: < 1 MB


# ------------------------------------------------------------------ learned-topology
def test_rule_frames_count_the_heads_below_one_minus_mass(figures):
    miss, fig = np.array(_raw(fg.RULE_DATA)["miss"]), figures["rule"]
    spec = page_spec(fig)
    for label, frame in zip(fig.labels, spec["frames"]):
        m = float(label.split()[1])
        assert f"on {int((miss < 1 - m).sum())} of 72 heads" in frame["readout"]
        bars = frame["data"][0]
        assert bars["y"] == [float(f"{v:.4g}") for v in np.sort(miss)]


def test_rule_flag_is_where_the_median_miss_crosses_one_minus_mass(figures):
    miss, fig = np.array(_raw(fg.RULE_DATA)["miss"]), figures["rule"]
    masses = np.array([float(l.split()[1]) for l in fig.labels])
    # fewer than half of the 72 heads pass exactly when the 36th smallest miss is at or above 1 - m
    assert np.abs(miss[:, None] - (1 - masses)[None, :]).min() > 1e-6  # no miss on a grid line: no rounding tie
    assert fig.flip == int(np.flatnonzero(np.sort(miss)[35] >= 1 - masses)[0])
    assert topology_rule.rule_flip(miss, masses) == fig.flip
    assert topology_rule.placed_counts(miss, masses).tolist() == [int((miss < 1 - m).sum()) for m in masses]
    assert abs(np.median(miss) - 0.2) < 0.02 and masses[fig.flip] == 0.8  # the chapter's line, miss 0.2


@pytest.mark.extended
@pytest.mark.slow
def test_stored_rule_miss_matches_a_fresh_fit():
    raw = _raw(fg.RULE_DATA)
    fresh = graphs_topology_rules.rule_miss_data(raw["sentences"])
    # L-BFGS to a gradient tolerance of 1e-9 on float32 maps: misses agree far below 1e-3 across CPUs
    np.testing.assert_allclose(fresh["miss"], raw["miss"], atol=1e-3)
    np.testing.assert_allclose(fresh["uniform"], raw["uniform"], atol=1e-4)  # closed form, 4 decimals


def test_rule_explorer_rejects_bad_input():
    with pytest.raises(ValueError, match="expected the same"):
        fg.rule_mass_explorer(np.zeros(4), np.zeros(3))
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        fg.rule_mass_explorer(np.zeros(4), np.zeros(4), masses=[0.5, 1.0])


# ------------------------------------------------------------------ l-hops
def test_hops_frames_show_the_stored_runs_and_the_closed_form_reach(figures):
    runs, fig = _raw(STORED_RUN)["runs"], figures["hops"]
    spec = page_spec(fig)
    for L, frame in zip(range(1, 5), spec["frames"]):
        reach = np.array(frame["data"][0]["z"], dtype=bool)
        assert np.array_equal(reach, receptive_field(banded_mask(16, 2), L))  # support of (A + I)^L
        bars = frame["data"][1]["y"]
        for k in range(1, 5):
            acc = [r["accuracy"] for r in runs if r["hops"] == k and r["n_layers"] == L]
            assert bars[k - 1] == (float(f"{np.mean(acc):.4g}") if acc else None)  # untrained pairs: no bar


def test_hops_flag_is_the_fewest_layers_that_learn_two_hops(figures):
    runs, fig = _raw(STORED_RUN)["runs"], figures["hops"]
    ok = [L for L in range(1, 5) if all(r["accuracy"] >= 0.9 for r in runs if r["hops"] == 2 and r["n_layers"] == L)
          and any(r["hops"] == 2 and r["n_layers"] == L for r in runs)]
    assert fig.labels[fig.flip] == f"L = {ok[0]}" == "L = 2"
    assert hops_flip(_khop()[0], [1, 2, 3, 4]) == ok[0] - 1  # the lens's rule on the summary
    assert "not tested" in fig.flips[0][1]


def test_hops_explorer_rejects_bad_input():
    one = {(1, 1): {"mean": 1.0, "min": 1.0, "max": 1.0}}
    with pytest.raises(ValueError, match="n_nodes"):
        fg.hops_explorer(one, n_nodes=None)
    with pytest.raises(ValueError, match="window"):
        fg.hops_explorer(one, 8, window=16)
    with pytest.raises(ValueError, match="window"):
        banded_stack_reach(T=4, window=4)


def test_banded_reach_is_the_closed_form():
    for L, D in enumerate(banded_stack_reach(T=12, window=1, max_layers=3), start=1):
        assert np.array_equal(D, receptive_field(banded_mask(12, 1), L)) and band_width(D) == L


# ------------------------------------------------------------------ depth-keeps-information
def test_probe_readouts_give_the_stored_medians(figures):
    raw, fig = _raw(fg.PROBE_DATA), figures["probe"]
    for L, frame in zip(raw["layers"], page_spec(fig)["frames"]):
        for name, acc in raw["stacks"].items():
            assert f"{name} {np.median(np.array(acc)[:, L]):.2f}" in frame["readout"]
        if L <= 6:  # MiniLM's word probes: row 1 reads the previous word, row 2 the next (embeddings, layers 1-6)
            assert f"previous word {raw['minilm']['MiniLM'][1][L]:.2f}" in frame["readout"]
            assert f"next word {raw['minilm']['MiniLM'][2][L]:.2f}" in frame["readout"]


def test_probe_flags_are_where_each_random_stack_falls_to_guessing(figures):
    raw, fig = _raw(fg.PROBE_DATA), figures["probe"]
    p, n = raw["chance"], raw["n_test_tokens"]
    line = p + 2 * np.sqrt(p * (1 - p) / n)  # two binomial standard errors above guessing
    first = {k: int(np.argmax(np.median(np.array(v), axis=0) <= line)) for k, v in raw["stacks"].items()
             if "no exchange" not in k}
    assert sorted(i for i, _ in fig.flips) == sorted(first.values())
    assert depth_probe.guessing_line(p, n) == pytest.approx(line, rel=1e-15)
    assert {k: depth_probe.guess_depth(np.array(raw["stacks"][k]), p, n) for k in first} == first
    assert fig.flip == max(first.values())
    assert first["pure attention"] <= 2 and 10 <= first["+ skip"] <= 24  # the finding: two layers; about twenty
    noex = np.array(raw["stacks"]["+ skip, no exchange"])
    assert (np.median(noex, axis=0) > line).all()  # the stack without exchange never falls


@pytest.mark.extended
def test_stored_probe_stacks_match_a_fresh_run():
    raw = _raw(fg.PROBE_DATA)
    fresh = depth_probe.stack_probe_curves(graphs_slider_data.PROBE_STACKS, raw["layers"], n_seq=100, n_train=75, seeds=[0],
                               mask={"+ skip, no exchange": np.eye(16, dtype=bool)})
    for name, acc in fresh.items():
        # float64 throughout; one token of 400 is 0.0025, so a last-bit tie could move one token at most
        np.testing.assert_allclose(acc[0], raw["stacks"][name][0], atol=0.0026)


def test_probe_explorer_rejects_bad_input():
    with pytest.raises(ValueError, match=r"expected \(seeds, depths\)"):
        depth_probe.guess_depth(np.zeros(3), 0.2, 100)
    d = fg.load_probe_data()
    d["layers"] = d["layers"][:3]
    with pytest.raises(ValueError, match="depths; expected 3"):
        fg.probe_depth_explorer(d)


# ------------------------------------------------------------------ unlike-gnns
def _top_key_medians() -> tuple[np.ndarray, np.ndarray]:
    raw = _raw(fg.TOP_KEY_DATA)
    return np.median(np.array(raw["shares"]), axis=0), np.median(np.array(raw["shares_words"]), axis=0)


def test_top_key_frames_count_the_heads_at_or_above_the_line(figures):
    shares, words = _top_key_medians()
    fig = figures["topkey"]
    assert shares.shape == (72,) and len(_raw(fg.TOP_KEY_DATA)["shares"]) == 4  # 72 heads, four sentences
    for label, frame in zip(fig.labels, page_spec(fig)["frames"]):
        t = float(label.split()[1])
        assert f"{int((shares >= t - 1e-9).sum())} of 72 heads are" in frame["readout"]
        assert f"{int((words >= t - 1e-9).sum())} on the words alone" in frame["readout"]
        assert frame["data"][0]["y"] == [float(f"{v:.4g}") for v in np.sort(shares)[::-1]]


def test_top_key_flag_is_where_fewer_than_half_the_heads_are_static(figures):
    shares, _ = _top_key_medians()
    fig = figures["topkey"]
    lines = np.array([float(l.split()[1]) for l in fig.labels])
    assert lines[0] == 0.5 and lines[-1] == 0.95 and fig.labels[fig.start] == "line 0.75"  # the ledger's line
    # fewer than half of 72 pass exactly when the 36th largest share is below the line
    assert fig.flip == int(np.flatnonzero(np.sort(shares)[::-1][35] < lines - 1e-9)[0])
    assert graphs_gnn.static_flip(shares, lines) == fig.flip
    assert (shares >= 0.75).sum() >= 36  # with [CLS] and [SEP] as keys most heads are static-like (47 of 72 measured)
    assert "fewer than half" in fig.flips[0][1]


def test_static_count_moves_with_no_reparametrisation_of_attention():
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(2, 3, 7, 4))  # (heads, T, d_k)
    w = lambda q, k: np.exp(q @ k.swapaxes(-1, -2)) / np.exp(q @ k.swapaxes(-1, -2)).sum(-1, keepdims=True)
    base = graphs_gnn.shared_top_key(w(q, k))  # (3,)
    for moved in (w(2.5 * q, k / 2.5), w(q, k + rng.normal(size=4)), w(q[::-1], k[::-1])):
        shares = graphs_gnn.shared_top_key(moved)
        assert sorted(shares) == pytest.approx(sorted(base))  # same weights (or heads permuted): same shares
        assert graphs_gnn.static_counts(shares, [0.3, 0.5]).tolist() == graphs_gnn.static_counts(base, [0.3, 0.5]).tolist()


def test_top_key_explorer_rejects_bad_input():
    with pytest.raises(ValueError, match="expected the same"):
        fg.top_key_explorer(np.zeros(4), np.zeros(3))
    with pytest.raises(ValueError, match=r"in \(0, 1\]"):
        fg.top_key_explorer(np.zeros(4), np.zeros(4), lines=[0.0, 0.5])


@pytest.mark.extended
@pytest.mark.numerics
def test_stored_top_key_shares_match_minilm():
    raw = _raw(fg.TOP_KEY_DATA)
    fresh = graphs_slider_data.top_key_data(raw["sentences"])
    # float32 inference: an argmax could flip only on a near-tie, moving one share by 1/T (T >= 12)
    assert np.abs(np.array(fresh["shares"]) - np.array(raw["shares"])).max() < 0.09
    assert np.abs(np.array(fresh["shares"]) - np.array(raw["shares"])).mean() < 0.01


def test_minilm_head_explorer_offers_every_head_and_opens_at_the_lessons():
    from attention_course.chapters.graphs.sliders import minilm_head_explorer

    fig = minilm_head_explorer(start=(5, 11))
    assert len(fig.labels) == 72 and fig.labels[fig.start] == "layer 6, head 12"
    assert minilm_head_explorer(start=(0, 0)).start == 0
