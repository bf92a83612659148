"""The score arms of the re-registered asymmetric and metric-learned tests (asymmetry.py's Arm, ArmModel,
train_best; converged_comparisons.py's heads and frozen parts and their decisions)."""

from __future__ import annotations

import json

import pytest
import torch

from attention_course.chapters.insight import converged_comparisons as cc
from attention_course.chapters.insight.ablations import RecallTask, VALID_SEED, accuracy
from attention_course.chapters.insight.asymmetry import (CYCLIC_BUDGET, METRIC_BUDGET, Arm, ArmModel, best_check,
                                                         train_best)
from attention_course.chapters.insight.convergence import ConvergenceRule, stop_reason
from attention_course.chapters.insight.ingredients import Score
from attention_course.chapters.insight.mixers import MixerModel, Variant, signature
from attention_course.chapters.insight.recall_tasks import stacked_mqar

X = stacked_mqar(4, n_pairs=8, seed=3)[0]  # (4, 16, 2)


def head_scores(model: ArmModel, x: torch.Tensor) -> torch.Tensor:
    """Each head's raw score q^h_t . k^h_s before the softmax, (B, H, T, T), computed from the weights by hand."""
    e = model.E_K[x[..., 0]] + model.E_V[x[..., 1]] + model.P[:x.shape[1]]  # (B, T, d)
    H, d = model.arm.heads, model.d_model
    dh = d // H
    out = []
    for h in range(H):
        Wq = model.W_q[:, h * dh:(h + 1) * dh]  # (d, d_h)
        if model.arm.score == "signed":
            Wk = Wq * signature(dh)
        elif model.arm.score == "tied":
            Wk = Wq
        else:
            Wk = model.W_k[:, h * dh:(h + 1) * dh]
        out.append((e @ Wq) @ (e @ Wk).transpose(1, 2))  # (B, T, T)
    return torch.stack(out, dim=1)


@pytest.mark.parametrize("score", ["signed", "tied"])
@pytest.mark.parametrize("heads", [1, 2, 4])
def test_symmetric_arms_score_symmetrically_in_every_head(score, heads):
    S = head_scores(ArmModel(Arm(score, heads), 16, d_model=16, seed=1), X).detach()
    assert torch.allclose(S, S.transpose(-1, -2), atol=1e-5)
    U = head_scores(ArmModel(Arm("untied", heads), 16, d_model=16, seed=1), X).detach()
    assert not torch.allclose(U, U.transpose(-1, -2), atol=1e-3)  # the untied control is not


def test_signed_heads_are_indefinite_and_tied_heads_psd():
    m = ArmModel(Arm("signed", 2), 16, d_model=16, seed=0)
    for h in range(2):
        Wq = m.W_q.detach()[:, 8 * h:8 * (h + 1)]
        assert torch.linalg.eigvalsh((Wq * signature(8)) @ Wq.T).min() < -1e-3
        assert torch.linalg.eigvalsh(Wq @ Wq.T).min() > -1e-5


@pytest.mark.parametrize("score", ["untied", "signed", "tied", "identity", "fixed D"])
@pytest.mark.parametrize("heads", [1, 2])
def test_the_weights_the_model_uses_are_the_softmax_of_the_hand_made_scores(score, heads):
    m = ArmModel(Arm(score, heads), 16, d_model=16, seed=2)
    S = head_scores(m, X) * m.log_scale.exp()[None, :, None, None] / ((16 // heads) ** 0.5)
    mask = torch.ones(16, 16).tril().bool()
    A = torch.softmax(S.masked_fill(~mask, float("-inf")), dim=-1).mean(dim=1)  # (B, T, T)
    assert torch.allclose(m(X)[1][0], A, atol=1e-5)


@pytest.mark.parametrize("heads", [1, 2])
def test_the_symmetric_weights_arm_uses_symmetric_weights_of_the_hand_made_scores(heads):
    """W_K = W_Q D, no mask, A = E / sqrt(r_i r_j) per head: the weights the model uses, computed by hand."""
    m = ArmModel(Arm("signed", heads, weights="symmetric", causal=False), 16, d_model=16, seed=2)
    S = head_scores(m, X) * m.log_scale.exp()[None, :, None, None] / ((16 // heads) ** 0.5)  # (B, H, T, T)
    E = S.exp()
    r = E.sum(-1)  # (B, H, T)
    A = (E / torch.sqrt(r[..., :, None] * r[..., None, :])).mean(dim=1)  # (B, T, T)
    used = m(X)[1][0]
    assert torch.allclose(used, A, atol=1e-5) and torch.allclose(used, used.transpose(1, 2), atol=1e-6)
    assert (used.sum(-1) - 1).abs().max() > 1e-3  # not row-normalised
    control = ArmModel(Arm("signed", heads, causal=False), 16, d_model=16, seed=2)
    W = control(X)[1][0]
    assert torch.allclose(W, torch.softmax(S, dim=-1).mean(dim=1), atol=1e-5)  # the control: row softmax, no mask
    assert not torch.allclose(W, W.transpose(1, 2), atol=1e-3)


def test_a_symmetric_weights_arm_with_a_causal_mask_is_refused():
    with pytest.raises(ValueError, match="causal=True"):
        Arm("signed", weights="symmetric")


def test_a_key_only_score_ignores_values_and_positions():
    m = ArmModel(Arm("signed", 1, score_input="key"), 16, d_model=16, seed=3)
    x2 = X.clone()
    x2[..., 1] = (x2[..., 1] + 1) % 64  # other values, same keys
    A1, A2 = m(X)[1][0], m(x2)[1][0]
    assert torch.allclose(A1, A2, atol=1e-6)
    whole = ArmModel(Arm("signed", 1), 16, d_model=16, seed=3)
    assert not torch.allclose(whole(X)[1][0], whole(x2)[1][0], atol=1e-4)


def test_one_untied_head_is_the_learn_scale_mixer_model():
    base = MixerModel(Variant(learn_scale=True), 16, d_model=16, seed=5)
    arm = ArmModel(Arm(), 16, d_model=16, seed=5)
    assert torch.allclose(arm(X)[0], base(X)[0], atol=1e-5)


def test_splitting_into_heads_keeps_the_score_parameters():
    def n_score(m):
        return sum(p.numel() for n, p in m.named_parameters() if n in ("W_q", "W_k") and p.requires_grad)
    for score, per in (("signed", 1), ("untied", 2)):
        assert {n_score(ArmModel(Arm(score, h), 16, d_model=64)) for h in (1, 2)} == {per * 64 * 64}


@pytest.mark.parametrize("arm, frozen", [
    (Arm("identity"), ("W_q", "W_k")), (Arm("fixed D"), ("W_q", "W_k")), (Arm("frozen random"), ("W_q", "W_k")),
    (Arm("untied", frozen_inputs=True), ("E_K", "E_V", "P")),
    (Arm("frozen random", frozen_inputs=True), ("W_q", "W_k", "E_K", "E_V", "P")),
])
def test_frozen_parts_do_not_move_in_training_and_the_rest_does(arm, frozen):
    task = RecallTask("stacked_mqar", {"n_pairs": 4})
    rule = ConvergenceRule(check_every=5, min_steps=5, max_steps=10, window=5, valid_batch=16, plateau_from=20)
    before = ArmModel(arm, task.seq_len, d_model=16, seed=0).state_dict()
    after = train_best(arm, task, lr=1e-2, d_model=16, rule=rule)[0].state_dict()
    for name in frozen:
        assert torch.equal(before[name], after[name]), name
    assert not torch.equal(before["W_v"], after["W_v"])
    if arm.score == "fixed D":
        assert torch.equal(after["W_q"], torch.eye(16)) and torch.equal(after["W_k"], torch.diag(signature(16)))


def test_train_best_returns_the_model_of_the_best_check():
    """With a learning rate so large that training falls off, the model kept is the best check's, not the last."""
    task = RecallTask("stacked_mqar", {"n_pairs": 4})
    rule = ConvergenceRule(check_every=10, min_steps=10, max_steps=60, window=10, valid_batch=64, plateau_from=100)
    # Whether a run at so large a rate ends below its best check is chaotic in float32 (lr 1.0 rose
    # again by step 60 on torch 2.13; on one AMD EPYC run seed 0 at lr 3.0 ended on a tie with its
    # first check): take the first seed whose last check is below its best, so the test can tell
    # the best check's model from the last one.
    for seed in range(8):
        model, r = train_best(Arm(), task, lr=3.0, seed=seed, d_model=16, rule=rule)
        if r["curve"][-1] < max(r["curve"]):
            break
    else:
        pytest.fail("no seed in 0-7 ended below its best check at lr 3.0")
    assert r["steps"] == 60 and r["stopped"] == "max steps"
    assert round(accuracy(model, task, batch_size=64, seed=VALID_SEED), 4) == max(r["curve"])
    assert r["best_step"] == 10 * (1 + best_check(r["curve"]))


def test_budgets_never_stop_on_a_plateau():
    flat = [0.5] * (CYCLIC_BUDGET.max_steps // 100 - 1)
    assert stop_reason(flat, CYCLIC_BUDGET) is None
    assert stop_reason(flat + [0.5], CYCLIC_BUDGET) == "max steps"
    assert stop_reason([0.1, 0.5, 0.6, 0.5], METRIC_BUDGET) is None
    assert stop_reason([0.1, 0.5, 0.6, 0.995], METRIC_BUDGET) == "target"


def test_outputs_are_unchanged_by_q_times_a_and_k_over_a():
    """The untied arm at two heads: W_Q -> a W_Q, W_K -> W_K / a leaves the output unchanged."""
    m = ArmModel(Arm("untied", 2), 16, d_model=16, seed=4)
    out = m(X)[0]
    with torch.no_grad():
        m.W_q.mul_(3.0)
        m.W_k.div_(3.0)
    assert torch.allclose(m(X)[0], out, atol=1e-4)


S_ = lambda m: Score(m, m, m, 3)  # noqa: E731


def _heads(g1, g2, untied=1.0):
    t = {(cc.CYCLIC, "untied", h, False): S_(untied) for h in (1, 2)}
    t.update({(cc.CYCLIC, "signed", 1, False): S_(untied - g1), (cc.CYCLIC, "signed", 2, False): S_(untied - g2)})
    return t


@pytest.mark.parametrize("g1, g2, untied, verdict", [
    (0.3, 0.3, 1.0, "holds"), (0.06, 0.0, 1.0, "holds when"), (0.04, 0.0, 1.0, "wrong as stated"),
    (0.045, 0.049, 1.0, "wrong as stated"), (0.0, 0.2, 1.0, "undecided"), (0.3, 0.3, 0.85, "undecided"),
])
def test_decide_asymmetric_heads_applies_the_registered_rule(g1, g2, untied, verdict):
    assert cc.decide_asymmetric_heads(_heads(g1, g2, untied)) == verdict


def test_grids_of_the_parts():
    assert {(h, s) for _, s, h, _ in cc.heads_grid()} == {(1, "untied"), (1, "signed"), (2, "untied"), (2, "signed")}
    g = cc.frozen_grid()
    assert {(t, s, f) for t, s, _, f in g} == {(t, s, f) for t in (cc.PARTNER, cc.RECALL)
                                               for s in ("untied", *cc.FIXED) for f in (True, False)}


# ------------------------------------------------------------------ the stored runs
def _stored(path):
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:  # pragma: no cover
        pytest.skip(f"{path.name} has not been written")


@pytest.mark.parametrize("path, rule, grid", [
    (cc.HEADS_FILE, CYCLIC_BUDGET, cc.heads_grid()), (cc.HEADS_TIED_FILE, CYCLIC_BUDGET, cc.heads_grid(("tied",))),
    (cc.HEADS_OTHER_FILE, CYCLIC_BUDGET, cc.heads_grid(tasks=(cc.PARTNER, cc.RECALL))),
    (cc.FROZEN_FILE, METRIC_BUDGET, cc.frozen_grid()),
], ids=["heads", "heads-tied", "heads-other", "frozen"])
def test_stored_arm_runs_follow_their_budget(path, rule, grid):
    doc = _stored(path)
    assert [(r["task"], r["score"], r["heads"], r["frozen_inputs"]) for r in doc["runs"]] == [tuple(g) for g in grid]
    for r in doc["runs"]:
        assert ConvergenceRule(**r["rule"]) == rule and r["seeds"] == [0, 1, 2] and len(r["accuracy"]) == 3
        for steps, best, why, curve in zip(r["steps"], r["best_step"], r["stopped"], r["curves"]):
            assert steps == len(curve) * rule.check_every and stop_reason(curve, rule) == why
            assert all(stop_reason(curve[:i], rule) is None for i in range(1, len(curve)))
            assert best == rule.check_every * (1 + best_check(curve))
        assert r["lr"] == max(map(float, r["sweep"]), key=lambda lr: (r["sweep"][str(lr)], -lr))


def test_stored_arm_runs_decide_the_ledger():
    from attention_course.course.claims import by_id

    try:
        t = cc.arm_table(cc.arm_runs())
    except FileNotFoundError:  # pragma: no cover
        pytest.skip("the heads and frozen parts have not all been run")
    weights = cc.variant_runs()  # the registered deciding pair scores key embeddings only
    rule = cc.decide_directed_weights(cc.variant_table(weights), symmetric=cc.SYMMETRIC_KEYS, control=cc.UNTIED_KEYS,
                                      unconverged=cc.unconverged_weights(weights, cc.SYMMETRIC_KEYS))
    verdict = by_id("asymmetric").verdict  # exact: a ledger "holds" must not pass for the rule's "holds when ..."
    assert rule == verdict or (verdict == "holds when" and rule.startswith("holds when ")), rule
    rule, claim = cc.decide_metric_both(t), by_id("metric-learned")
    assert rule == claim.verdict or (claim.verdict == "holds when" and rule.startswith("holds when ")), rule


@pytest.mark.extended
@pytest.mark.numerics
def test_one_stored_two_head_record_is_reproduced():
    r = next(x for x in _stored(cc.HEADS_FILE)["runs"] if x["score"] == "signed" and x["heads"] == 2)
    again = cc.run_arm_job(r["task"], r["score"], r["heads"], r["frozen_inputs"], seeds=(0,))
    assert again["lr"] == r["lr"] and again["steps"][0] == r["steps"][0]
    assert abs(again["accuracy"][0] - r["accuracy"][0]) < 0.02


@pytest.mark.extended
def test_the_arm_parts_write_the_stored_structure(tmp_path, monkeypatch):
    """Each arm part with one configuration and a short budget writes a file shaped like the stored one."""
    from dataclasses import replace as swap

    from attention_course.__main__ import main

    short = ConvergenceRule(check_every=5, min_steps=5, max_steps=10, window=5, valid_batch=16, plateau_from=20)
    monkeypatch.setattr(cc, "CYCLIC_BUDGET", short)
    monkeypatch.setattr(cc, "METRIC_BUDGET", swap(short, max_steps=15))
    monkeypatch.setattr(cc, "heads_grid", lambda scores=("untied", "signed"), tasks=(cc.CYCLIC,):
                        [(tasks[0], scores[-1], 2, False)])
    monkeypatch.setattr(cc, "frozen_grid", lambda: [(cc.PARTNER, "fixed D", 1, True)])
    for path, part in ((cc.HEADS_FILE, "heads"), (cc.HEADS_TIED_FILE, "heads-tied"),
                       (cc.HEADS_OTHER_FILE, "heads-other"), (cc.FROZEN_FILE, "frozen")):
        out = tmp_path / path.name
        assert main(["insight-metric", "--part", part, "--seeds", "0", "--out", str(out), "--quiet"]) == 0
        stored, fresh = json.loads(path.read_text()), json.loads(out.read_text())
        assert set(fresh) == set(stored) and set(fresh["meta"]) == set(stored["meta"]), part
        assert {k: type(v) for k, v in fresh["runs"][0].items()} == {k: type(v) for k, v in stored["runs"][0].items()}
