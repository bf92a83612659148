"""The converged re-run of the asymmetric test (asymmetry.py's CONVERGED, best_plateau, steps_to) and the decisions
of the asymmetric and metric-learned tests as registered for it (converged_comparisons.py)."""

from __future__ import annotations

import json

import pytest

from attention_course.chapters.insight import converged_comparisons as cc
from attention_course.chapters.insight.asymmetry import CONVERGED, best_check, best_plateau, steps_to
from attention_course.chapters.insight.convergence import ConvergenceRule, stop_reason
from attention_course.chapters.insight.ingredients import Score

S_ = lambda m: Score(m, m, m, 3)  # noqa: E731


def test_converged_rule_is_the_registered_one():
    assert (CONVERGED.max_steps, CONVERGED.target, CONVERGED.min_steps) == (48000, 0.99, 400)
    assert (CONVERGED.min_gain, CONVERGED.window, CONVERGED.check_every) == (0.002, 12000, 100)


def test_a_noisy_last_check_does_not_stop_a_run_whose_best_still_rises():
    """stop_reason compares the last check with the one a window back, so a dip stops it; best_plateau must not."""
    rising = [0.5 + 0.0004 * i for i in range(121)] + [0.5]  # best +0.048 over the last 12,000 steps, last check dips
    assert stop_reason(rising, CONVERGED) == "plateau"  # the last-check rule would stop here
    assert best_plateau(rising, CONVERGED) is None


def test_best_plateau_stops_only_after_a_whole_window_without_gain():
    flat = [0.9] * 10 + [0.9009] * 120  # the best gains 0.0009 < 0.002 over the last 120 checks
    assert best_plateau(flat[:120], CONVERGED) is None  # 12,000 steps: the window has not passed
    assert best_plateau(flat[:121], CONVERGED) == "plateau"
    assert best_plateau([0.5] * 479, CONVERGED) == "plateau"
    assert best_plateau([0.5 + 0.0001 * i for i in range(480)], CONVERGED) == "max steps"  # +0.012 a window
    assert best_plateau([0.5, 0.7, 0.8, 0.995], CONVERGED) == "target"
    assert best_plateau([0.5, 0.995], CONVERGED) is None  # before step 400


def test_steps_to_reads_the_first_crossing():
    assert steps_to([0.5, 0.949, 0.95, 0.9]) == 300
    assert steps_to([0.5, 0.6], 0.95) is None


def _speed_records(untied, signed, cap=48000):
    rule = {"check_every": 100, "max_steps": cap}
    curve = lambda n: [0.5] * (n // 100 - 1) + [0.96] if n else [0.5] * (cap // 100)  # noqa: E731
    return [{"task": cc.CYCLIC, "score": s, "heads": 1, "curves": [curve(n) for n in ns], "rule": rule,
             "stopped": ["target"] * len(ns)} for s, ns in (("untied", untied), ("signed", signed))]


def test_speed_ratio_counts_a_seed_that_never_gets_there_as_the_cap():
    assert cc.speed_ratio(_speed_records([400, 400], [20000, 0]), 1) == pytest.approx((20000 + 48000) / 2 / 400)


@pytest.mark.parametrize("r1, r2, verdict", [(60, 6, "holds"), (60, 1.2, "holds when"), (4.9, 60, "wrong as stated"),
                                              (5.0, 1.0, "holds when")])
def test_decide_speed_applies_the_registered_factor(r1, r2, verdict):
    assert cc.decide_speed({1: r1, 2: r2}) == verdict


def _heads(g1, g2, untied=1.0):
    t = {(cc.CYCLIC, "untied", h, False): S_(untied) for h in (1, 2)}
    t.update({(cc.CYCLIC, "signed", 1, False): S_(untied - g1), (cc.CYCLIC, "signed", 2, False): S_(untied - g2)})
    return t


@pytest.mark.parametrize("g1, g2, unconverged, verdict", [
    (0.06, 0.0, (), "holds when"), (0.06, 0.0, (1,), "undecided"), (0.04, 0.0, (1,), "wrong as stated"),
    (0.06, 0.06, (2,), "undecided"), (0.06, 0.06, (), "holds"),
])
def test_an_unconverged_gap_above_the_margin_is_undecided(g1, g2, unconverged, verdict):
    assert cc.decide_asymmetric_heads(_heads(g1, g2), unconverged=unconverged) == verdict


def test_unconverged_heads_reads_the_symmetric_arm_only():
    runs = [{"task": cc.CYCLIC, "score": "untied", "heads": 2, "stopped": ["max steps"]},
            {"task": cc.CYCLIC, "score": "signed", "heads": 1, "stopped": ["plateau", "target", "max steps"]}]
    assert cc.unconverged_heads(runs) == {1}


def _metric(frozen_best, learned_best, learned=0.99):
    t = {}
    for fr, best in ((True, frozen_best), (False, learned_best)):
        for task in (cc.PARTNER, cc.RECALL):
            t[task, "untied", 1, fr] = S_(learned)
            t[task, "identity", 1, fr] = S_(0.05 if fr else 0.999)  # a PSD metric never counts with learned inputs
            t[task, "fixed D", 1, fr] = S_(best)
            t[task, "frozen random", 1, fr] = S_(0.02)
    return t


@pytest.mark.parametrize("fb, lb, learned, verdict", [
    (0.1, 0.2, 0.99, "holds"), (0.1, 0.99, 0.99, "holds when the inputs are given"),
    (0.97, 0.2, 0.99, "holds when the embeddings learn"), (0.97, 0.97, 0.99, "wrong as stated"),
    (0.1, 0.1, 0.8, "undecided"),
])
def test_decide_metric_both_applies_the_registered_rule(fb, lb, learned, verdict):
    assert cc.decide_metric_both(_metric(fb, lb, learned)) == verdict


def test_arm_runs_take_the_converged_record_of_an_arm(tmp_path):
    new, old = tmp_path / "new.json", tmp_path / "old.json"
    rec = lambda s, acc: {"task": cc.CYCLIC, "score": s, "heads": 1, "frozen_inputs": False, "accuracy": acc}  # noqa
    new.write_text(json.dumps({"meta": {}, "runs": [rec("signed", [0.95])]}))
    old.write_text(json.dumps({"meta": {}, "runs": [rec("signed", [0.93]), rec("untied", [1.0])]}))
    runs = cc.arm_runs((new, old))
    assert [(r["score"], r["accuracy"]) for r in runs] == [("signed", [0.95]), ("untied", [1.0])]


def test_converged_grid_runs_the_longest_arms_first():
    grid = cc.converged_grid(cc.ComparisonConfig(part="converged"))
    assert [(s, h) for _, s, h, _ in grid] == [("signed", 1), ("signed", 2), ("tied", 1), ("tied", 2),
                                               ("untied", 1), ("untied", 2)]


# ------------------------------------------------------------------ the stored runs
def _stored(path):
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:  # pragma: no cover
        pytest.skip(f"{path.name} has not been written")


def test_stored_converged_runs_follow_their_rule():
    doc = _stored(cc.CONVERGED_FILE)
    assert set(doc) == {"meta", "runs"} and set(doc["meta"]) == {"arms"}
    keys = [(r["task"], r["score"], r["heads"], r["frozen_inputs"]) for r in doc["runs"] if not cc._is_variant(r)]
    grid = [tuple(g) for g in cc.converged_grid(cc.ComparisonConfig(part="converged"))]
    assert keys == [g for g in grid if g in keys] and len(set(keys)) == len(keys)
    names = [(r["task"], f"{cc.arm_label(r)} {r['heads']}") for r in doc["runs"]]
    assert len(set(names)) == len(names) and set(doc["meta"]["arms"]) == {n for _, n in names}
    for r in doc["runs"]:
        assert ConvergenceRule(**r["rule"]) == CONVERGED and r["seeds"] == [0, 1, 2] and len(r["accuracy"]) == 3
        meta = doc["meta"]["arms"][f"{cc.arm_label(r)} {r['heads']}"]
        assert "arms" not in meta and {"machine", "command", "arguments", "seeds", "wall_seconds"} <= set(meta)
        for steps, best, why, curve in zip(r["steps"], r["best_step"], r["stopped"], r["curves"]):
            assert steps == len(curve) * CONVERGED.check_every and best_plateau(curve) == why
            assert all(best_plateau(curve[:i]) is None for i in range(1, len(curve)))
            assert best == CONVERGED.check_every * (1 + best_check(curve))
        assert r["lr"] == max(map(float, r["sweep"]), key=lambda lr: (r["sweep"][str(lr)], -lr))


@pytest.mark.extended
def test_the_converged_part_writes_the_stored_structure(tmp_path, monkeypatch):
    """One arm with a short budget, then another merged into the same file: shaped like the stored one."""
    from attention_course.__main__ import main

    short = ConvergenceRule(check_every=5, min_steps=5, max_steps=10, window=5, valid_batch=16, plateau_from=20)
    monkeypatch.setattr(cc, "CONVERGED", short)
    out = tmp_path / "converged.json"
    for score in ("signed", "untied"):
        assert main(["insight-metric", "--part", "converged", "--scores", score, "--heads", "2", "--seeds", "0",
                     "--out", str(out), "--quiet"]) == 0
    assert main(["insight-metric", "--part", "converged", "--weights", "symmetric", "--heads", "2", "--seeds", "0",
                 "--out", str(out), "--quiet"]) == 0
    fresh = json.loads(out.read_text())
    assert [(r["score"], r["heads"]) for r in fresh["runs"]][:2] == [("signed", 2), ("untied", 2)]
    sym = "signed, symmetric weights, no mask 2"
    assert set(fresh["meta"]["arms"]) == {"signed 2", "untied 2", sym}
    for name, meta in fresh["meta"]["arms"].items():  # one level: each arm's meta is one run's, not a document
        assert "arms" not in meta and "machine" in meta, name
    assert [r["task"] for r in fresh["runs"][2:]] == [cc.CYCLIC, cc.RECALL, cc.PARTNER] or \
        {r["task"] for r in fresh["runs"][2:]} == {cc.CYCLIC, cc.RECALL, cc.PARTNER}
    assert all(r["weights"] == "symmetric" and r["causal"] is False for r in fresh["runs"][2:])
    stored = _stored(cc.CONVERGED_FILE)
    assert {k: type(v) for k, v in fresh["runs"][0].items()} == {k: type(v) for k, v in stored["runs"][0].items()}


# ------------------------------------------------------------------ asymmetric: directed weights
def _weights(sym1, sym2, row=0.97, other=1.0):
    t = {(k, cc.SYMMETRIC_WEIGHTS, h): S_(other) for k in (cc.PARTNER, cc.RECALL) for h in (1, 2)}
    t.update({(cc.CYCLIC, cc.ROW_WEIGHTS, h): S_(row) for h in (1, 2)})
    t.update({(cc.CYCLIC, cc.SYMMETRIC_WEIGHTS, 1): S_(sym1), (cc.CYCLIC, cc.SYMMETRIC_WEIGHTS, 2): S_(sym2)})
    return t


@pytest.mark.parametrize("sym1, sym2, row, other, unconverged, verdict", [
    (0.52, 0.51, 0.97, 1.0, (), "holds"),
    (0.52, 0.95, 0.97, 1.0, (), "holds when a single head"),
    (0.95, 0.51, 0.97, 1.0, (), "holds when several heads"),
    (0.93, 0.95, 0.97, 1.0, (), "wrong as stated"),       # gaps 0.04 and 0.02: at most the margin
    (0.92, 0.92, 0.97, 1.0, (), "wrong as stated"),       # gaps exactly 0.05 are not above it
    (0.52, 0.51, 0.85, 1.0, (), "undecided"),             # the control does not learn the task
    (0.52, 0.51, 0.97, 0.6, (), "undecided"),             # the symmetric normaliser cannot learn at all
    (0.52, 0.95, 0.97, 1.0, (1,), "undecided"),           # a gap from a run stopped at the cap
    (0.93, 0.95, 0.97, 1.0, (1, 2), "wrong as stated"),   # an unconverged arm within the margin still counts
])
def test_decide_directed_weights_reaches_every_outcome(sym1, sym2, row, other, unconverged, verdict):
    assert cc.decide_directed_weights(_weights(sym1, sym2, row, other), unconverged=unconverged) == verdict


def test_a_planted_inversion_does_not_hold():
    """The arms swapped (symmetric weights better than the control) must not read as the claim holding."""
    t = _weights(0.52, 0.51)
    swapped = dict(t)
    for h in (1, 2):
        swapped[cc.CYCLIC, cc.ROW_WEIGHTS, h] = t[cc.CYCLIC, cc.SYMMETRIC_WEIGHTS, h]
        swapped[cc.CYCLIC, cc.SYMMETRIC_WEIGHTS, h] = t[cc.CYCLIC, cc.ROW_WEIGHTS, h]
    swapped.update({(cc.CYCLIC, cc.ROW_WEIGHTS, h): S_(0.95) for h in (1, 2)})  # keep the control above 0.9
    assert cc.decide_directed_weights(t) == "holds"
    assert cc.decide_directed_weights(swapped) == "wrong as stated"


def test_the_margin_is_a_parameter():
    t = _weights(0.9, 0.9)  # gaps 0.07
    assert cc.decide_directed_weights(t, 0.05) == "holds" and cc.decide_directed_weights(t, 0.1) == "wrong as stated"


def test_an_arm_not_trained_leaves_the_claim_undecided():
    t = _weights(0.52, 0.51)
    del t[cc.CYCLIC, cc.SYMMETRIC_WEIGHTS, 1]
    assert cc.decide_directed_weights(t) == "undecided"
