"""Tests for the measures behind chapter 5's four retested verdicts (issue 26).

shared_top_key (unlike-gnns), encoder_probe restricted to words (depth-keeps-information), the rules of
topology_rule.RULES (learned-topology) and the matched pointer-chasing runs (l-hops).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from attention_course.chapters.graphs import depth_probe, gnn, head_budget, topology_rule as tr, topology_rules
from attention_course.models.experiments import read_json
from attention_course.core.attention import scaled_dot_product_attention
from attention_course.core._backend import ShapeError


# ------------------------------------------------------------------ shared_top_key (unlike-gnns)
def _weights(q, k):
    return scaled_dot_product_attention(q, k, np.zeros((k.shape[-2], 1)))[1]  # (..., T, S)


def test_shared_top_key_is_one_for_gat_on_every_graph():
    rng = np.random.default_rng(0)
    for _ in range(20):
        x, W, a = rng.normal(size=(7, 4)), rng.normal(size=(4, 4)), rng.normal(size=8)
        e = gnn.gat_scores(x, W, a)  # (7, 7): static ranking, the same for every receiver
        assert gnn.shared_top_key(e[None]) == pytest.approx([1.0])


def test_shared_top_key_counts_by_hand():
    top = np.array([0, 0, 2, 1, 0])  # each query's top key
    w = np.eye(3)[top] * 0.8 + 0.1  # (5, 3), rows' argmax = top
    assert gnn.shared_top_key(w[None]).tolist() == [0.6]


def test_shared_top_key_does_not_move_when_attention_does_not():
    rng = np.random.default_rng(1)
    q, k = rng.normal(size=(2, 12, 9, 8))  # (heads, T, d_k)
    base = gnn.shared_top_key(_weights(q, k))
    scaled = gnn.shared_top_key(_weights(3.7 * q, k / 3.7))  # q -> a q, k -> k / a
    shifted = gnn.shared_top_key(_weights(q, k + rng.normal(size=8)))  # one vector added to every key
    perm = rng.permutation(12)
    permuted = gnn.shared_top_key(_weights(q[perm], k[perm]))  # heads permuted
    np.testing.assert_array_equal(scaled, base)
    np.testing.assert_array_equal(shifted, base)
    np.testing.assert_array_equal(permuted, base[perm])
    assert np.sum(base >= 0.75) == np.sum(permuted >= 0.75)  # the chapter's count


def test_shared_top_key_names_the_shape():
    with pytest.raises(ShapeError, match=r"expected \(\.\.\., T, S\)"):
        gnn.shared_top_key(np.ones(3))


# ------------------------------------------------------------------ word probes (depth-keeps-information)
def test_word_probe_reads_only_where_both_positions_are_words():
    rng = np.random.default_rng(0)
    ids = rng.integers(6, size=(40, 8))  # (N, n): [CLS]-like at 0, words 1..5, 6 and 7 not words
    ids[:, 6] = 99  # a full stop at 6: if it were read, the +1 probe of word 5 would score 1
    onehot = np.eye(100)[ids]  # (N, n, 100)
    states = np.concatenate([onehot, np.roll(onehot, -1, axis=1)], axis=-1)  # own and next token
    acc = depth_probe.encoder_probe([states], ids, n_train=30, offsets=(1, -1), words=range(1, 6))
    assert acc[0, 0] == 1.0  # the next word is in the state
    assert acc[1, 0] < 0.5  # the previous one is not (random labels of 6: about 1/6)
    acc_all = depth_probe.encoder_probe([states], ids, n_train=30, offsets=(1,))
    assert acc_all[0, 0] == 1.0  # without `words` positions 1..n-2, the full stop included


def test_word_probe_matches_probe_accuracy_on_the_same_rows():
    rng = np.random.default_rng(2)
    ids = rng.integers(5, size=(30, 7))
    h = rng.normal(size=(30, 7, 6))
    acc = depth_probe.encoder_probe([h], ids, n_train=20, offsets=(-2,), words=range(1, 6))
    pos = np.arange(3, 6)  # i with i and i - 2 in 1..5
    want = depth_probe.probe_accuracy(h[:, pos].reshape(-1, 6), ids[:, pos - 2].reshape(-1), 20 * 3)
    assert acc[0, 0] == want


# ------------------------------------------------------------------ rules (learned-topology)
def test_the_rules_differ_in_what_they_see():
    ids = [[5, 6, 7, 8, 9], [8, 5, 9, 7, 6]]  # a sentence and a shuffle of it
    partner = {5: 7, 6: 9, 7: 5, 8: 6, 9: 8}  # each word reads a fixed partner word, wherever it stands
    maps = []
    for seq in ids:
        A = np.full((5, 5), 0.02)
        for i, t in enumerate(seq):
            A[i, seq.index(partner[t])] = 0.92
        maps.append(A[None])  # (1 head, 5, 5)
    pair = tr.fit_fixed_rule(maps[:1], ids[:1], parts=tr.RULES["query token x key token + offset"])
    fixed = tr.fit_fixed_rule(maps[:1], ids[:1], parts=tr.RULES["position + offset"])
    assert tr.rule_miss(pair, maps[1:], ids[1:])[0] < 0.2  # the token pairs carry over (its offsets do not)
    assert tr.rule_miss(fixed, maps[1:], ids[1:])[0] > 0.5  # a fixed graph does not


def test_rule_parts_are_checked():
    with pytest.raises(ValueError, match="parts"):
        tr.fit_fixed_rule([np.eye(3)[None]], [[1, 2, 3]], parts=("query",))


def test_the_default_rule_is_the_key_token_position_offset_rule():
    maps, ids = [np.full((1, 4, 4), 0.25)], [[1, 2, 3, 4]]
    a = tr.fit_fixed_rule(maps, ids)
    b = tr.fit_fixed_rule(maps, ids, parts=tr.RULES["key token + position + offset"])
    np.testing.assert_array_equal(a.theta, b.theta)


# ------------------------------------------------------------------ matched runs (l-hops)
def test_one_layer_of_2h_heads_and_two_of_h_have_the_same_attention_weights():
    from attention_course.models.tiny import ModelConfig, TinyTransformer

    def count(L, h):
        m = TinyTransformer(ModelConfig(vocab_size=72, max_len=9, d_model=64, n_heads=h, n_layers=L, d_k=16), seed=0)
        return sum(p.numel() for p in m.parameters())
    assert count(2, 2) - count(1, 4) == 128  # one more LayerNorm (64 + 64); attention alike: 4 x 64 x 64


def test_converged_follows_the_preregistered_rule():
    run = {"checks": [0, 1000, 2000, 3000], "check_accuracy": [0.1, 0.3, 0.4, 0.45]}
    assert not head_budget.converged({**run, "check_loss": [2.0, 1.6, 1.45, 1.27]})  # fell 12% in 1,000 steps
    assert head_budget.converged({**run, "check_loss": [2.0, 1.6, 1.30, 1.27]})  # fell 2%
    assert head_budget.converged({**run, "check_accuracy": [0, 0, 0, 0.99], "check_loss": [2, 1, 0.1, 0.01]})


def test_stored_matched_run_is_the_preregistered_grid():
    doc = read_json(head_budget.MATCHED_RUN, schema_version=1)
    cells = {(r["n_nodes"], r["n_layers"], r["n_heads"], r["seed"]) for r in doc["runs"]}
    want = {(n, L, h, s) for n, L, h in head_budget.MATCHED_GRID for s in (0, 1)} | {(n, L, h, 0) for n, L, h in head_budget.MATCHED_EXTRA}
    assert cells == want
    for r in doc["runs"]:
        assert r["steps"] <= doc["settings"]["max_steps"] and len(r["checks"]) == len(r["check_loss"])


@pytest.mark.extended
def test_matched_run_recomputes_one_cell():
    doc = read_json(head_budget.MATCHED_RUN, schema_version=1)
    stored = next(r for r in doc["runs"] if (r["n_layers"], r["n_heads"], r["seed"]) == (2, 2, 0))
    again = head_budget.run_matched(8, 2, 2, seed=0, max_steps=doc["settings"]["max_steps"])
    assert again["steps"] == stored["steps"]
    assert abs(again["accuracy"] - stored["accuracy"]) < 0.02  # a trained result: CPU kernels may differ


@pytest.mark.extended
def test_topology_rules_recompute():
    doc = topology_rules.load_rules()
    again = topology_rules.rules_data(doc["sentences"])
    for name, miss in doc["rules"].items():
        np.testing.assert_allclose(again["rules"][name], miss, atol=2e-3)  # L-BFGS in float64, stopped at max_iter
