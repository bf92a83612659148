"""Slider of chapter 4 (head-relations): each frame's head counts and the flag against an
independent computation from the stored JSON and MiniLM; the HTML; bad input.

The counts and the flag rule live in the lens ``roles`` and are checked here against the same
independent computations; the stored data's writer in the chapter's ``runs`` module."""

from __future__ import annotations

import json
import re

import matplotlib.pyplot as plt
import numpy as np
import pytest

from attention_course.chapters import heads
from attention_course.chapters.heads import roles
from attention_course.chapters.heads import agreement as heads_agreement
from attention_course.chapters.heads import roles as heads_roles
from attention_course.chapters.heads import sliders as heads_sliders


def _spec(fig) -> dict:
    m = re.search(rf'<script type="application/json" id="{fig.name}-data">(.*?)</script>', fig.to_html(), re.S)
    return json.loads(m.group(1).replace("<\\/", "</"))


def _raw(path) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def figures():
    figs = {"roles": heads.clear_job_explorer(), "agreement": heads.agreement_explorer()}
    yield figs
    plt.close("all")


@pytest.mark.parametrize("key, verdict", [("roles", "head-relations"), ("agreement", "agreement-head")])
def test_html_is_deterministic_and_links_its_verdict(figures, key, verdict, check_flagged_html):
    check_flagged_html(figures[key], verdict, max_bytes=400_000, every_frame=True)  # two such figures and the head explorer: < 1 MB


# ------------------------------------------------------------------ head-relations
def test_role_counts_per_frame_match_the_stored_scores(figures):
    raw = _raw(heads_roles.ROLES_DATA)
    spec, fig = _spec(figures["roles"]), figures["roles"]
    names = list(roles.RELATIONS + roles.PARKING)
    for label, frame in zip(fig.labels, spec["frames"]):
        t = float(label.split("= ")[1])
        bars = next(tr for tr in frame["data"] if tr.get("name") == "MiniLM heads")
        assert bars["y"] == [int((np.array(raw["scores"][r]) > t).sum()) for r in names]
        uniform = next(tr for tr in frame["data"] if tr.get("name") == "uniform attention")
        assert uniform["y"] == [72 if raw["chance"][r] > t else 0 for r in names]


def test_role_flag_sits_just_above_the_last_relation_head(figures):
    raw, fig = _raw(heads_roles.ROLES_DATA), figures["roles"]
    thresholds = np.array([float(l.split("= ")[1]) for l in fig.labels])
    top = max(max(np.ravel(raw["scores"][r])) for r in roles.RELATIONS)  # the clearest relational head
    assert fig.flip == int(np.searchsorted(thresholds, top))  # first threshold >= it: no head above
    scores = {r: np.array(raw["scores"][r]) for r in roles.RELATIONS}
    flips = roles.clear_job_flips(roles.clear_job_counts(scores, raw["chance"], thresholds), roles.RELATIONS)
    assert roles.last_relation_flip(flips, roles.RELATIONS)[1] == fig.flip  # the lens's rule, the same flag
    cls_top = max(np.ravel(raw["scores"]["[CLS]"]))
    note = "no [CLS] head clears t any more, as under uniform attention"
    assert (int(np.searchsorted(thresholds, cls_top)), note) in fig.flips


def test_stored_role_chance_levels_are_uniform_attention_on_the_texts():
    from attention_course.chapters.heads.roles import uniform_role_baselines
    from attention_course.models.pretrained import load_minilm
    raw = _raw(heads_roles.ROLES_DATA)
    tokenizer, _ = load_minilm()
    tokens = [tokenizer.convert_ids_to_tokens(tokenizer(t)["input_ids"]) for t in raw["texts"]]
    chance = uniform_role_baselines(tokens)
    for r, v in raw["chance"].items():
        assert abs(v - chance[r]) < 1e-6  # stored to 6 decimals


@pytest.mark.extended
@pytest.mark.slow
def test_stored_role_scores_match_minilm():
    raw = _raw(heads_roles.ROLES_DATA)
    fresh = heads_roles.role_scores_data(raw["texts"])
    for r, v in raw["scores"].items():
        # stored to 4 decimals (5e-5); float32 maps differ across CPUs by ~1e-6
        np.testing.assert_allclose(fresh["scores"][r], v, atol=1e-4)


def test_role_explorer_rejects_bad_input():
    with pytest.raises(ValueError, match="must increase"):
        heads.clear_job_explorer(thresholds=[0.5, 0.4])
    with pytest.raises(ValueError, match="expected at least one of"):
        heads.clear_job_explorer({"[CLS]": np.zeros((2, 2))}, {"[CLS]": 0.1})
    with pytest.raises(ValueError, match="non-empty 1-d"):
        roles.clear_job_counts({"[CLS]": np.zeros((2, 2))}, {"[CLS]": 0.1}, [])


# ------------------------------------------------------------------ agreement-head
def test_agreement_frames_match_the_stored_run(figures):
    stored = _raw(heads_agreement.AGREEMENT_PATH)
    raw = {"config": stored["config"], **stored["models"]["SmolLM2"]}  # the explorer's model
    spec, fig = _spec(figures["agreement"]), figures["agreement"]
    keys = [k for k, _, _ in heads_sliders.AGREEMENT_SETS]
    assert fig.labels == [lab for _, lab, _ in heads_sliders.AGREEMENT_SETS] and all(k in raw for k in keys)  # a frame per set
    for key, frame in zip(keys, spec["frames"]):
        sp = raw[key]["splits"]
        bars = frame["data"][0]
        by_name = dict(zip(bars["y"], bars["x"]))
        # recomputed from the raw hit strings: the held-out half of each split seed
        n = len(raw[key]["sentences"])
        verbs, subj = np.array(raw[key]["verb"]), np.array(raw[key]["subject"])
        shares, positions = [], []
        for seed, s in zip(raw["config"]["split_seeds"], sp):
            perm = np.random.default_rng(seed).permutation(n)
            pick, score = perm[: n // 2], perm[n // 2:]
            shares.append(np.mean([raw[key]["hits"][s["head"]][i] == "1" for i in score]))
            best = np.argmax([np.mean(subj[pick] == p) for p in range(1, 13)]) + 1  # the fixed position, picked
            positions.append(np.mean(subj[score] == best))
        assert abs(by_name["best head → subject"] - np.mean(shares)) < 5e-5  # the page keeps 4 decimals
        assert abs(by_name["fixed position"] - np.mean(positions)) < 5e-5
        assert f"{np.mean(shares):.3f}" in frame["readout"]
        if key == "plain":  # the subject is the only noun: both noun rules find it every time
            assert by_name["nearest noun"] == by_name["first noun"] == 1.0
        if key == "crossed":  # neither noun rule can find it
            assert by_name["nearest noun"] == by_name["first noun"] == 0.0
            assert (subj < verbs).all()


def test_agreement_flag_sits_where_the_head_stops_beating_position(figures):
    raw, fig = _raw(heads_agreement.AGREEMENT_PATH)["models"]["SmolLM2"], figures["agreement"]
    keys = [k for k, _, _ in heads_sliders.AGREEMENT_SETS]
    beats = []
    for key in keys:
        sp = raw[key]["splits"]
        head = np.mean([s["head_share"] for s in sp])
        pos = max(np.mean([s["offset_share"] for s in sp]), np.mean([s["position_share"] for s in sp]))
        beats.append(head >= 0.5 and head >= pos + 0.2)
    assert beats == [True, False, True]  # the plain and crossed sets; on the attractor set another head is picked
    assert fig.flip == 1 and fig.labels[fig.flip] == "1 noun between"
    readouts = [fr["readout"] for fr in _spec(fig)["frames"]]
    assert [("beats the position rules" in r) for r in readouts] == beats
    passes = [heads_agreement.set_decision(raw[key]["splits"])["passes"] for key in keys]
    assert passes == [False, False, True]  # only the crossed set hides the subject from the noun rules
    assert [("passes the rule against all four" in r) for r in readouts] == passes


def test_agreement_explorer_rejects_a_run_without_sets():
    with pytest.raises(ValueError, match="expected at least one of"):
        heads.agreement_explorer({"config": {}})


def _focus_record(focused_by_k):
    """A two-model focus run with one head each: ``focused_by_k[model]`` the trained head's focused rows (of 10) per k."""
    ks = list(range(1, len(next(iter(focused_by_k.values()))) + 1))
    def rec(rows):
        return {"focused": [[[r] for r in rows]], "decided": [[[10] for _ in rows]], "sink_share": [0.1]}
    return {"config": {"ks": ks, "thresholds": [0.5], "k": 2},
            "models": {m: {"trained": rec(rows), "scrambled": [rec([0] * len(rows))]} for m, rows in focused_by_k.items()}}


def test_the_focus_slider_flags_each_k_where_the_claims_verdict_changes():
    from attention_course.chapters.heads.sliders import focus_explorer
    from attention_course.chapters.lowrank.focus import verdicts_over_k

    # one head per model, focused when at least 6 of its 10 rows are: A from k = 2, B from k = 3
    run = _focus_record({"A": [0, 6, 6, 6], "B": [0, 0, 6, 6]})
    claim = [v["claim"] for v in verdicts_over_k(run)]
    assert claim == ["wrong as stated", "holds when", "holds", "holds"]  # at k = 2 the models differ
    fig = focus_explorer(run)
    assert [i for i, _ in fig.flips] == [1, 2] and fig.verdict == "few-relevant-positions" and fig.start == 1
    assert "holds when" in fig.frames[1]["readout"] and "(scrambled at most 0.000): holds;" in fig.frames[1]["readout"]
