"""What asymmetric scores buy (asymmetry.py, the signed variant of mixers.py, the asymmetric decision of
converged_comparisons.py): the score forms, the cyclic task, the bound behind it, the invariance, the rules."""

from __future__ import annotations

import math
from dataclasses import asdict

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.chapters.insight import converged_comparisons as cc
from attention_course.chapters.insight.asymmetry import CyclicRecallTask, cyclic_mqar, successor
from attention_course.chapters.insight.mixers import MixerModel, Variant, mixing_mask, signature
from attention_course.chapters.insight.ingredients import Score, accuracy_table

def score_form(model: MixerModel) -> torch.Tensor:
    """The bilinear form M of the model's score, q_t . k_s = x_t^T M x_s, (d, d): W_Q W_K^T, W_Q W_Q^T or W_Q D W_Q^T."""
    v, W_q = model.variant, model.W_q.detach()
    if v.signed:
        return (W_q * signature(model.d_model)) @ W_q.T  # (d, d)
    return W_q @ (W_q if v.tied else model.W_k.detach()).T  # (d, d)


SIGNED, TIED, UNTIED = Variant(signed=True, learn_scale=True), Variant(tied=True, learn_scale=True), \
    Variant(learn_scale=True)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), d=st.sampled_from([4, 8, 16, 64]))
def test_signed_form_is_symmetric_and_indefinite_and_tied_is_psd(seed, d):
    signed = score_form(MixerModel(SIGNED, seq_len=4, d_model=d, seed=seed)).double()
    tied = score_form(MixerModel(TIED, seq_len=4, d_model=d, seed=seed)).double()
    untied = score_form(MixerModel(UNTIED, seq_len=4, d_model=d, seed=seed)).double()
    torch.testing.assert_close(signed, signed.T, rtol=0, atol=1e-6)  # float32 products of d terms of size ~1/d
    torch.testing.assert_close(tied, tied.T, rtol=0, atol=1e-6)
    eig_s, eig_t = torch.linalg.eigvalsh(signed), torch.linalg.eigvalsh(tied)
    assert float(eig_s.min()) < -0.01 * float(eig_s.max()) < 0  # clearly indefinite
    W = MixerModel(SIGNED, seq_len=4, d_model=d, seed=seed).W_q.detach().double()
    exact = torch.linalg.eigvalsh((W * signature(d).double()) @ W.T)  # float64: Sylvester's inertia of D
    assert int((exact < 0).sum()) == d // 2
    assert float(eig_t.min()) > -1e-5  # PSD up to float32 round-off
    assert float((untied - untied.T).abs().max()) > 1e-3  # the untied form is not symmetric


def test_signed_scores_are_x_W_q_D_W_q_T_x_in_the_model():
    """The model's weights, recomputed from the form: softmax(s x M x^T / sqrt(d)), causal."""
    model = MixerModel(SIGNED, seq_len=8, d_model=16, seed=3)
    x = torch.randn(2, 8, 16, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        _, A = model.mix(x)  # (B, T, T)
        M = score_form(model)  # (d, d)
        scores = model.log_scale.exp() * (x @ M @ x.transpose(1, 2)) / math.sqrt(16)  # (B, T, T)
        ref = torch.softmax(scores.masked_fill(~mixing_mask(8), float("-inf")), dim=-1)  # rows over keys
    torch.testing.assert_close(A, ref, rtol=1e-5, atol=1e-6)
    assert signature(16).tolist() == [1.0] * 8 + [-1.0] * 8


def test_signed_refuses_to_be_combined_with_tied_or_identity():
    with pytest.raises(ValueError, match="signed sets W_K = W_Q D itself"):
        Variant(signed=True, tied=True)
    with pytest.raises(ValueError, match="signed sets W_K = W_Q D itself"):
        Variant(signed=True, identity=True)


@pytest.mark.parametrize("variant", [UNTIED, SIGNED, TIED], ids=["untied", "signed", "tied"])
def test_outputs_are_unchanged_by_q_times_a_and_k_over_a(variant):
    """Each variant as an untied model (W_K = its own W_K), then W_Q * 4, W_K / 4: the same logits, so the same accuracy."""
    task = CyclicRecallTask(kwargs={"n_pairs": 8, "cycle": 4})
    model = MixerModel(variant, task.seq_len, d_model=16, seed=1)
    x, _, _ = task(8, seed=5)
    untied = MixerModel(UNTIED, task.seq_len, d_model=16, seed=1)
    with torch.no_grad():
        before = model(x)[0]  # (B, T, 64)
        M = score_form(model)
        untied.W_k.copy_(torch.linalg.solve(untied.W_q, M).T)  # W_q W_k^T = M: the same scores, now untied
        same = untied(x)[0]
        untied.W_q.mul_(4.0)
        untied.W_k.div_(4.0)
        after = untied(x)[0]
    np.testing.assert_allclose(same.numpy(), before.numpy(), rtol=1e-4, atol=1e-4)  # float32 solve of a 16 x 16 system
    np.testing.assert_allclose(after.numpy(), same.numpy(), rtol=1e-5, atol=1e-5)  # float32 round-off of two rescalings
    assert torch.equal(after.argmax(-1), before.argmax(-1))  # so the accuracy cannot move


def test_signed_is_unchanged_when_the_learned_scale_absorbs_W_q_times_a():
    """q -> a q and k -> a k (W_Q -> a W_Q) with s -> s / a^2: the learnable scale makes the norm of W_Q irrelevant."""
    task = CyclicRecallTask(kwargs={"n_pairs": 8, "cycle": 4})
    model = MixerModel(SIGNED, task.seq_len, d_model=16, seed=2)
    x, _, _ = task(8, seed=6)
    with torch.no_grad():
        before = model(x)[0]
        model.W_q.mul_(3.0)
        model.log_scale.sub_(2 * math.log(3.0))
        after = model(x)[0]
    np.testing.assert_allclose(after.numpy(), before.numpy(), rtol=1e-5, atol=1e-5)


def test_successor_table_and_a_hand_made_cyclic_batch():
    assert successor(torch.arange(12), cycle=4).tolist() == [1, 2, 3, 0, 5, 6, 7, 4, 9, 10, 11, 8]
    assert successor(torch.arange(6), cycle=3).tolist() == [1, 2, 0, 4, 5, 3]
    # n_keys = n_pairs = 8: both cycles {0..3} and {4..7} are stored; check every target by a dictionary
    x, y, m = cyclic_mqar(3, n_pairs=8, n_keys=8, cycle=4, seed=4)
    for b in range(3):
        stored = {int(k): int(v) for k, v in x[b, :8].tolist()}
        assert sorted(stored) == list(range(8))
        for t in range(8, 16):
            a = int(x[b, t, 0])
            nxt = {0: 1, 1: 2, 2: 3, 3: 0, 4: 5, 5: 6, 6: 7, 7: 4}[a]
            assert int(y[b, t]) == stored[nxt] and int(x[b, t, 1]) == 64  # the blank value at the queries
    assert m[:, 8:].all() and not m[:, :8].any()


def test_every_query_has_its_successor_and_predecessor_in_context():
    x, y, m = cyclic_mqar(256, n_pairs=16, seed=0)
    keys, queried = x[:, :16, 0], x[:, 16:, 0]  # (B, 16), (B, 16)
    pred = queried - queried % 4 + (queried % 4 + 3) % 4  # (B, 16): the previous key of the cycle
    for nb in (successor(queried), pred):
        assert bool((nb[:, :, None] == keys[:, None, :]).any(-1).all())
    assert bool((torch.sort(queried, 1).values == torch.sort(keys, 1).values).all())  # every stored key queried once
    cycles = keys // 4  # (B, 16): the cycle of each stored key
    assert bool((torch.stack([(cycles == c[:, None]).sum(1) for c in cycles.T], 1) == 4).all())  # whole cycles: both
    # neighbours of every target, f(f(a)) and a, are stored as well


@pytest.mark.parametrize("kwargs", [dict(cycle=2), dict(n_pairs=10, cycle=4), dict(n_keys=62, cycle=4)])
def test_cyclic_rejects_sizes_that_break_whole_cycles(kwargs):
    with pytest.raises(ValueError, match="expected cycle >= 3 dividing both"):
        cyclic_mqar(1, **kwargs)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-5, 5), min_size=20, max_size=20))
def test_a_symmetric_score_orders_at_most_three_of_four_successors(entries):
    """The bound behind the task: S symmetric (4 x 4) plus a term c(b) of the stored key alone."""
    S = np.zeros((4, 4))
    S[np.triu_indices(4)] = entries[:10]
    S = S + np.triu(S, 1).T  # symmetric
    c = np.array(entries[10:14])
    right = [(S[a] + c)[(a + 1) % 4] > np.delete(S[a] + c, (a + 1) % 4).max() for a in range(4)]
    assert sum(right) <= 3


def test_an_asymmetric_score_orders_all_four():
    """The bound is not vacuous: the cyclic shift matrix, which is not symmetric, puts every successor first."""
    S = np.roll(np.eye(4), 1, axis=1)  # S[a, a + 1] = 1
    assert all(S[a].argmax() == (a + 1) % 4 for a in range(4))


S_ = lambda m: Score(m, m, m, 3)  # noqa: E731


@pytest.mark.parametrize("tied, signed, clause", [
    (0.5, 0.99, "then only with an indefinite metric"),
    (0.5, 0.9, "then only with untied W_Q, W_K"),
    (0.96, 0.5, ""),
])
def test_weights_clause_applies_the_registered_thresholds(tied, signed, clause):
    t = {(cc.PARTNER, "learned W_Q, W_K"): S_(1.0), (cc.PARTNER, "tied W_Q = W_K"): S_(tied),
         (cc.PARTNER, cc.SIGNED): S_(signed)}
    assert cc.weights_clause(t) == clause


def test_grids_of_the_new_parts():
    assert {t for t, _, _ in cc.signed_grid()} == {cc.RECALL, cc.PARTNER, cc.COPY}


# ------------------------------------------------------------------ the stored runs against the ledger
@pytest.fixture(scope="module")
def runs():
    try:
        return [*cc.load_metric()["runs"], *cc.load_partner()["runs"], *cc.load_signed()["runs"]]
    except FileNotFoundError:  # pragma: no cover
        pytest.skip("insight-metric --part signed has not been run")


def test_stored_runs_follow_their_rule(runs):
    """The earlier runs the page still reports (partner recall, the copy, W_K = W_Q D beside them): the plateau rule."""
    from attention_course.chapters.insight.convergence import ConvergenceRule, stop_reason

    t = accuracy_table(runs)
    assert cc.weights_clause(t) == "then only with an indefinite metric"  # tied fails partner recall, W_K = W_Q D not
    for r in [r for r in runs if r["variant"] == cc.SIGNED]:
        rule = ConvergenceRule(**r["rule"])
        assert r["rule"] == asdict(ConvergenceRule()) and r["seeds"] == [0, 1, 2]  # the matched rule and seeds
        for steps, why, curve in zip(r["steps"], r["stopped"], r["curves"]):
            assert steps == len(curve) * rule.check_every and stop_reason(curve, rule) == why


@pytest.mark.extended
@pytest.mark.numerics
def test_one_stored_signed_record_is_reproduced(runs):
    r = next(x for x in runs if x["task"] == cc.PARTNER and x["variant"] == cc.SIGNED)
    again = cc.run_metric_job(r["task"], r["variant"], r["d_model"], seeds=(0,))
    assert again["lr"] == r["lr"] and again["steps"][0] == r["steps"][0]
    assert abs(again["accuracy"][0] - r["accuracy"][0]) < 0.02
