"""Tests for topology_rule_table (learned-topology, unlike-gnns under the one sink treatment) and its stored run."""

from __future__ import annotations

import numpy as np
import pytest

from attention_course.chapters.graphs import gnn, topology_rule_table as tt, topology_rules
from attention_course.chapters.lowrank.baselines import HEAD_BINS
from attention_course.core._backend import ShapeError
from attention_course.models.pretrained import minilm_tokenizer


def _rows(rng, shape):
    x = rng.random(shape) + 1e-3
    return x / x.sum(axis=-1, keepdims=True)


def _cross_entropy(maps, table):
    return -np.mean([(A * np.log(table)).sum() for A in maps])


# ------------------------------------------------------------------ the matched fixed graph
def test_fixed_table_is_the_cross_entropy_minimum():
    """No other row-stochastic table, near or far, fits the maps better than their mean (Gibbs)."""
    rng = np.random.default_rng(0)
    maps = [_rows(rng, (2, 5, 5)) for _ in range(6)]
    best = tt.fixed_table(maps)[5]
    ce = _cross_entropy(maps, best)
    for scale in (1e-3, 0.1, 1.0):
        other = best + scale * _rows(rng, best.shape)
        other /= other.sum(axis=-1, keepdims=True)
        assert _cross_entropy(maps, other) > ce
    assert _cross_entropy(maps, maps[0]) > ce  # the first map (a wrong "fit") loses too


def test_fixed_table_matches_a_numerical_fit():
    """The table equals what gradient descent on free logits (softmax rows) converges to."""
    import torch

    rng = np.random.default_rng(6)
    maps = [_rows(rng, (2, 4, 4)) ** 3 for _ in range(5)]
    maps = [m / m.sum(axis=-1, keepdims=True) for m in maps]
    A = torch.tensor(np.array(maps))  # (N, H, n, n)
    theta = torch.zeros(2, 4, 4, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([theta], max_iter=500, tolerance_grad=1e-12, tolerance_change=1e-15,
                            line_search_fn="strong_wolfe")
    def closure():
        opt.zero_grad()
        loss = -(A * torch.log_softmax(theta, dim=-1)).sum() / len(maps)
        loss.backward()
        return loss
    opt.step(closure)
    np.testing.assert_allclose(tt.fixed_table(maps)[4], torch.softmax(theta, -1).detach().numpy(), atol=1e-6)


def test_fixed_table_keeps_lengths_apart():
    t = tt.fixed_table([np.eye(3)[None], np.eye(2)[None], np.eye(2)[::-1][None]])
    assert sorted(t) == [2, 3]
    np.testing.assert_allclose(t[2][0], np.full((2, 2), 0.5))
    with pytest.raises(ShapeError):
        tt.table_miss({4: np.eye(4)[None]}, [np.eye(3)[None]])


def test_table_miss_against_a_loop():
    rng = np.random.default_rng(1)
    table, maps = {4: _rows(rng, (3, 4, 4))}, [_rows(rng, (3, 4, 4)) for _ in range(3)]
    ref = np.zeros(3)
    for A in maps:
        for h in range(3):
            ref[h] += np.mean([0.5 * sum(abs(A[h, i, j] - table[4][h, i, j]) for j in range(4)) for i in range(4)])
    np.testing.assert_allclose(tt.table_miss(table, maps), ref / 3, atol=1e-12)


def test_a_fixed_head_is_missed_by_nothing_and_a_content_head_is():
    """A head with one graph for every input: miss 0; one whose top key follows a token: miss > 0.2."""
    fixed = [np.eye(5)[None] for _ in range(4)]
    assert tt.table_miss(tt.fixed_table(fixed[:2]), fixed[2:])[0] == 0
    rng = np.random.default_rng(2)
    moving = [np.eye(5)[rng.permutation(5)][None] for _ in range(40)]  # a different graph per input
    assert tt.table_miss(tt.fixed_table(moving[:30]), moving[30:])[0] > 0.5


# ------------------------------------------------------------------ content parts and top keys
def test_content_maps_against_a_loop():
    rng = np.random.default_rng(3)
    A = _rows(rng, (2, 6, 6))
    C = tt.content_maps(A, [0, -1])
    assert C.shape == (2, 4, 4)
    for h in range(2):
        for r, i in enumerate(range(1, 5)):
            np.testing.assert_allclose(C[h, r], A[h, i, 1:5] / A[h, i, 1:5].sum())


def test_content_maps_causal_parked_row_is_uniform_over_what_it_sees():
    A = np.tril(np.ones((4, 4)))
    A[:, 0] = 1.0
    A[1:, 1:] = 0
    A[3] = [0.2, 0.2, 0.2, 0.4]  # the only row with content weight
    C = tt.content_maps(A, [0], causal=True)
    np.testing.assert_allclose(C, [[1, 0, 0], [0.5, 0.5, 0], [0.25, 0.25, 0.5]])


def test_top_key_share_matches_shared_top_key_on_kept_rows():
    rng = np.random.default_rng(4)
    C = _rows(rng, (5, 7, 7))
    np.testing.assert_allclose(tt.top_key_share(C), gnn.shared_top_key(C))
    np.testing.assert_allclose(tt.top_key_share(C, skip=2), gnn.shared_top_key(C[:, 2:]))


def test_bins_are_shares_of_all_heads():
    sweep = tt.bin_sweep(np.array([0.1, 0.3, 0.5, 0.9]), np.array([0.0, 0.0, 0.0, 0.7]), [0.05, 0.2, 0.4, 0.6])
    np.testing.assert_allclose(sweep.sum(axis=1), 1)
    assert sweep[:, 2].tolist() == [0.25] * 4  # the sink head stays a sink whatever the line
    assert sweep[:, 0].tolist() == [0.75, 0.5, 0.25, 0.0]  # the 0.9 head is a sink, not counted as property


def test_template_halves_share_no_word_and_give_one_token_per_word():
    fit, held = tt.template_halves(20, 10, seed=0)
    assert not set(" ".join(fit).replace(".", "").split()) & set(" ".join(held).replace(".", "").split())
    lengths = {len(minilm_tokenizer()(s)["input_ids"]) for s in fit + held}
    assert lengths == {13}  # [CLS], ten words, the full stop, [SEP]
    assert tt.template_halves(20, 10, seed=0) == (fit, held)


def test_verdict_rules_can_fail():
    assert tt.topology_verdict({"property": 0.2, "no property": 0.3, "sink": 0.5}) == "wrong as stated"
    assert tt.topology_verdict({"property": 0.6, "no property": 0.4, "sink": 0.0}) == "holds"
    assert tt.static_verdict({"property": 0.5, "no property": 0.5, "sink": 0.0}) == "holds when"


def test_scaling_queries_and_keys_leaves_the_maps_and_bins():
    """q -> 3q, k -> k/3 gives MiniLM's maps (float32 round-off), so the same bins at every line."""
    texts = tt.template_halves(2, 1, seed=5)[0]
    plain, scaled = (topology_rules.model_head_maps(m, texts) for m in ("MiniLM", "invariance"))
    assert max(np.abs(a - b).max() for a, b in zip(plain, scaled)) < 1e-4
    wrong = topology_rules.model_head_maps("scrambled", texts)
    assert max(np.abs(a - b).max() for a, b in zip(plain, wrong)) > 0.1  # the comparison can fail


# ------------------------------------------------------------------ the stored run
def test_stored_matched_run_structure():
    doc = topology_rules.load_matched()
    assert doc["config"] == {"n_fit": 60, "n_held": 30, "seed": 0}
    fit, held = tt.template_halves(60, 30, seed=0)
    assert doc["sentences"] == {"fit": fit, "held": held}
    heads = {"MiniLM": 72, "scrambled": 72, "invariance": 72, "SmolLM2": 270}
    assert set(doc["models"]) == set(heads)
    for model, H in heads.items():
        rec = doc["models"][model]
        for key in ("sink", "miss", "fit_miss", "uniform", "top_share"):
            v = np.array(rec[key])
            assert v.shape == (H,) and v.min() >= 0 and v.max() <= 1, (model, key)
    assert doc["models"]["invariance"]["max_map_gap"] < 1e-4
    for key in ("sink", "miss", "top_share"):
        np.testing.assert_allclose(doc["models"]["invariance"][key], doc["models"]["MiniLM"][key], atol=2e-4)
    assert list(HEAD_BINS) == ["property", "no property", "sink"]


@pytest.mark.extended  # recomputes the stored MiniLM and scrambled records (seconds)
def test_matched_run_reproduces():
    doc = topology_rules.load_matched()
    config = topology_rules.MatchedConfig(models=("MiniLM", "scrambled"))
    for model in config.models:
        rec = topology_rules._matched_one(config, model)
        for key in ("sink", "miss", "fit_miss", "uniform", "top_share"):
            np.testing.assert_allclose(rec[key], doc["models"][model][key], atol=2e-3)
