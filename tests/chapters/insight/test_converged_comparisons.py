"""Chapter 7's learned-metric and softmax-vs-linear runs (convergence.py, converged_comparisons.py): the rule, the
pre-registered decisions, the invariances they rely on, and the shipped JSON against the ledger."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attention_course.chapters.insight import converged_comparisons as mr
from attention_course.chapters.insight.ablations import RecallTask
from attention_course.chapters.insight.convergence import ConvergenceRule, stop_reason
from attention_course.chapters.insight.ingredients import Score
from attention_course.chapters.insight.mixers import MixerModel, Variant, linear_weights, mixing_mask
from attention_course.chapters.insight.recall_tasks import previous_token, stacked_mqar
from attention_course.course.claims import by_id

RULE = ConvergenceRule()


@pytest.mark.parametrize("curve, expected", [
    ([0.1, 0.2, 0.995], None),  # 300 steps < min_steps, even at the target
    ([0.1, 0.2, 0.3, 0.99], "target"),  # exactly the target counts
    ([0.3, 0.305, 0.306, 0.309], "plateau"),  # +0.009 over the last 300 steps
    ([0.1, 0.2, 0.3, 0.31], None),  # +0.11: still rising
    ([0.5, 0.5, 0.5, 0.5, 0.5], "plateau"),
    ([0.02 * i for i in range(1, 13)], "max steps"),  # still rising at 1,200 steps
])
def test_stop_reason_follows_the_stated_rule(curve, expected):
    assert stop_reason(curve, RULE) == expected


def test_rule_rejects_a_window_off_the_check_grid():
    with pytest.raises(ValueError, match="multiples of check_every=100"):
        ConvergenceRule(window=250)


S = lambda m: Score(m, m, m, 3)  # noqa: E731


def _linear(soft, lin, pairs=(8, 16, 32, 64), widths=(16, 32, 64)):
    t = {}
    for n in pairs:
        for d in widths:
            t["softmax attention", n, d] = S(soft(n, d))
            t["linear attention", n, d] = S(lin(n, d))
    return t


@pytest.mark.parametrize("soft, lin, verdict", [
    (lambda n, d: 1.0, lambda n, d: 1.0 if n < d else 0.3, "holds when"),
    (lambda n, d: 1.0, lambda n, d: 0.5, "holds"),
    (lambda n, d: 1.0, lambda n, d: 0.97, "wrong as stated"),
    (lambda n, d: 0.5, lambda n, d: 0.1, "undecided"),  # softmax never reaches 0.9 where N >= d
    (lambda n, d: 1.0, lambda n, d: 0.92 if n < d else 0.3, "undecided"),  # small-N gap 0.08: between the bands
])
def test_decide_softmax_linear_applies_the_registered_thresholds(soft, lin, verdict):
    assert mr.decide_softmax_linear(_linear(soft, lin)) == verdict


def test_learned_scale_starts_at_one_over_sqrt_d_and_unsaturates_the_identity_metric():
    """Without the scale the identity metric's self-score is about |x|^2 / sqrt(d): the rows start one-hot."""
    x, _, _ = stacked_mqar(64, n_pairs=16, seed=3)
    diag = {}
    for scaled in (False, True):
        model = MixerModel(Variant(identity=True, learn_scale=scaled), seq_len=32, d_model=64, seed=0)
        with torch.no_grad():
            _, (A,) = model(x)  # (B, T, T)
        diag[scaled] = float(A.diagonal(dim1=1, dim2=2)[:, 1:].mean())
    assert math.isclose(float(model.log_scale.detach().exp()), 64 ** -0.5, rel_tol=1e-6)
    assert model.log_scale.requires_grad and not model.W_q.requires_grad
    assert diag[False] > 0.99 > 0.6 > diag[True]


def test_softmax_accuracy_is_unchanged_by_q_times_a_and_k_over_a():
    task = RecallTask("stacked_mqar", {"n_pairs": 4})
    model = MixerModel(Variant(learn_scale=True), task.seq_len, d_model=16, seed=1)
    x, _, _ = task(8, seed=5)
    with torch.no_grad():
        before = model(x)[0]  # (B, T, 64)
        model.W_q.mul_(4.0)
        model.W_k.div_(4.0)
        after = model(x)[0]
    np.testing.assert_allclose(after.numpy(), before.numpy(), rtol=1e-5, atol=1e-5)  # float32 round-off of two rescalings
    assert torch.equal(after.argmax(-1), before.argmax(-1))  # so the accuracy cannot move


def test_linear_weights_are_unchanged_by_scaling_the_features():
    g = torch.Generator().manual_seed(0)
    fq, fk = torch.rand(2, 5, 3, generator=g, dtype=torch.float64), torch.rand(2, 5, 3, generator=g, dtype=torch.float64)
    allowed = mixing_mask(5)
    ref = torch.einsum("btd,bsd->bts", fq, fk) * allowed
    np.testing.assert_allclose(linear_weights(fq, fk, allowed).numpy(), (ref / ref.sum(-1, keepdim=True)).numpy(), rtol=1e-12)
    np.testing.assert_allclose(linear_weights(3.0 * fq, fk / 7.0, allowed).numpy(), linear_weights(fq, fk, allowed).numpy(),
                               rtol=1e-12)


def test_lagged_copy_targets_and_window_reach():
    x, y, m = previous_token(3, length=9, seed=2, lag=3)
    assert bool((y[:, 3:] == x[:, :-3, 0]).all()) and int(m.sum()) == 3 * 6
    allowed = mixing_mask(9, window=4)
    assert all(bool(allowed[t, t - 3]) for t in range(3, 9)) and not mixing_mask(9, window=3)[5, 2]
    with pytest.raises(ValueError, match="expected 1 <= lag < length"):
        previous_token(1, length=3, lag=3)


def test_grids():
    assert len(mr.linear_grid()) == 4 * 3 * 2
    assert {v for _, v, _ in mr.metric_grid()} == set(mr.METRIC_VARIANTS)


@pytest.fixture(scope="module")
def stored():
    try:
        return mr.load_metric(), mr.load_linear()
    except FileNotFoundError:  # pragma: no cover
        pytest.skip("insight-metric has not been run")


def test_stored_runs_follow_their_rule(stored):
    for r in stored[0]["runs"] + stored[1]["runs"]:
        rule = ConvergenceRule(**r["rule"])
        for steps, why, curve in zip(r["steps"], r["stopped"], r["curves"]):
            assert steps == len(curve) * rule.check_every
            assert stop_reason(curve, rule) == why
            assert all(stop_reason(curve[:i], rule) is None for i in range(1, len(curve)))


@pytest.mark.extended
@pytest.mark.numerics
def test_one_stored_metric_record_is_reproduced(stored):
    r = next(x for x in stored[0]["runs"] if x["task"] == mr.COPY and x["variant"] == "W_Q = W_K = I, self masked")
    again = mr.run_metric_job(r["task"], r["variant"], r["d_model"], seeds=tuple(r["seeds"][:1]))
    assert again["lr"] == r["lr"] and again["steps"][0] == r["steps"][0]
    assert abs(again["accuracy"][0] - r["accuracy"][0]) < 0.02


# ------------------------------------------------------------------ partner recall and the longer budget
def test_partner_targets_are_the_value_stored_under_the_partner_key():
    from attention_course.chapters.insight.recall_tasks import partner_mqar
    x, y, m = partner_mqar(16, n_pairs=8, seed=4)
    for b in range(16):
        stored = {int(k): int(v) for k, v in x[b, :8].tolist()}
        assert set(stored) == {k ^ 1 for k in stored}  # both members of every partner pair are stored
        for t in range(8, 16):
            a = int(x[b, t, 0])
            partner = a + 1 if a % 2 == 0 else a - 1  # f(2i) = 2i + 1, f(2i + 1) = 2i
            assert int(y[b, t]) == stored[partner] and bool(m[b, t])
    with pytest.raises(ValueError, match="expected even"):
        partner_mqar(1, n_pairs=3)


def test_a_psd_score_cannot_prefer_the_partner_for_both_members():
    """Cauchy-Schwarz: <Wa, Wb> <= max(|Wa|^2, |Wb|^2), so tied W_Q = W_K ranks a partner first for at most one member."""
    g = torch.Generator().manual_seed(0)
    for _ in range(200):
        W = torch.randn(8, 8, generator=g, dtype=torch.float64)
        a, b = torch.randn(2, 8, generator=g, dtype=torch.float64) @ W.T  # W x_a, W x_b
        assert not (a @ b > a @ a and a @ b > b @ b)


def test_long_rule_waits_for_step_2000_before_a_plateau_stop():
    flat = [0.06] * 19
    assert all(stop_reason(flat[:i], mr.LONG_RULE) is None for i in range(1, 20))
    assert stop_reason(flat + [0.06], mr.LONG_RULE) == "plateau"
    assert stop_reason([0.06] * 12 + [0.995], mr.LONG_RULE) == "target"
    assert stop_reason([0.01 * i for i in range(1, 41)], mr.LONG_RULE) == "max steps"


def test_ratio_threshold_reads_the_gap_over_n_over_d():
    t = _linear(lambda n, d: 1.0, lambda n, d: 1.0 if n < d else 0.3)
    assert mr.ratio_threshold(t) == 1.0
    t = _linear(lambda n, d: 1.0, lambda n, d: 1.0 if 2 * n < d else 0.3)
    assert mr.ratio_threshold(t) == 0.5


@pytest.fixture(scope="module")
def stored_new():
    try:
        return mr.load_partner(), mr.load_long()
    except FileNotFoundError:  # pragma: no cover
        pytest.skip("insight-metric --part partner / --long has not been run")


def test_stored_partner_and_long_runs_decide_the_ledger(stored, stored_new):
    metric, linear = stored
    partner, long = stored_new
    merged = mr.merged_linear(linear["runs"], long["runs"])
    assert mr.decide_softmax_linear(mr.linear_table(merged)) == by_id("softmax-over-linear").verdict
    planned = [tuple(g) for g in long["planned"]]
    assert planned[:len(long["runs"])] == [(r["task"], r["variant"], r["d_model"]) for r in long["runs"]]
    assert planned == [tuple(g) for g in mr.long_grid(linear["runs"])]
    for r in partner["runs"] + long["runs"]:
        rule = ConvergenceRule(**r["rule"])
        for steps, why, curve in zip(r["steps"], r["stopped"], r["curves"]):
            assert steps == len(curve) * rule.check_every and stop_reason(curve, rule) == why
            assert all(stop_reason(curve[:i], rule) is None for i in range(1, len(curve)))
    assert all(r["rule"]["max_steps"] == 4000 and r["rule"]["plateau_from"] == 2000 for r in long["runs"])


def test_long_part_by_width_keeps_the_other_widths_records(tmp_path, monkeypatch):
    """`--part linear --long --widths 16`, then `--widths 32`: the second call keeps the first's records."""
    from attention_course.__main__ import main

    runs = [{"variant": m, "n_pairs": n, "d_model": d, "stopped": ["target"], "accuracy": [0.5]}
            for d in (16, 32) for n in (32, 64) for m in ("softmax attention", "linear attention")]
    monkeypatch.setattr(mr, "load_linear", lambda path=None: {"meta": {}, "runs": runs})
    monkeypatch.setattr(mr, "run_metric_job", lambda t, v, d, seeds, rule=None: {
        "task": t, "variant": v, "d_model": d, "n_pairs": mr._task(t).kwargs["n_pairs"], "accuracy": [1.0]})
    out = tmp_path / "long.json"
    for widths in ("16", "32"):
        assert main(["insight-metric", "--part", "linear", "--long", "--widths", widths, "--pairs", "32", "64",
                     "--out", str(out), "--quiet"]) == 0
    stored, expected = mr.load_long(out), mr.long_grid(runs)  # N > d at both widths
    assert {d for _, _, d in expected} == {16, 32}
    assert sorted((r["task"], r["variant"], r["d_model"]) for r in stored["runs"]) == sorted(expected)
    assert sorted(map(tuple, stored["planned"])) == sorted(expected)
