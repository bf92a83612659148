"""Chapter 3 on two models (issue 43): content-part measures, the pre-registered rules with their thresholds,
chapter 7's trained runs read as data, and the stored runs against their design (recomputed in the extended tier)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_course.chapters.lowrank import decisions as dc
from attention_course.chapters.lowrank import two_models as tm
from attention_course.chapters.lowrank.baselines import content_part
from attention_course.chapters.lowrank.head_properties import content_measures, mean_row_entropy
from attention_course.chapters.lowrank.trained_methods import decide_trained, load_trained_runs, trained_points


def _causal_maps(h: int, n: int, seed: int, scale: float = 2.0) -> np.ndarray:
    g = np.random.default_rng(seed)
    s = g.normal(size=(h, n, n)) * scale
    s[:, ~np.tri(n, dtype=bool)] = -np.inf
    a = np.exp(s - s.max(-1, keepdims=True))
    return a / a.sum(-1, keepdims=True)  # (h, n, n), causal rows


@pytest.mark.parametrize("sinks", [[0], [0, 11]])
def test_content_measures_against_a_direct_computation(sinks):
    A = _causal_maps(3, 12, seed=1) if sinks == [0] else np.random.default_rng(2).dirichlet(np.ones(12), size=(3, 12))
    m = content_measures(A, sinks, k=4)
    for h in range(3):
        part = content_part(A[h], sinks)
        C = part.weights[~part.sink_rows]  # causal: the first row (only the sink) is dropped
        s = np.linalg.svd(C, compute_uv=False)
        assert m["energy"][h] == pytest.approx((s[:4] ** 2).sum() / (s ** 2).sum(), rel=1e-12)
        assert m["rank_error"][h] == pytest.approx(np.linalg.norm(C - _rank_k(C, 4)) / np.linalg.norm(C), rel=1e-9)
        assert m["stable_rank"][h] == pytest.approx((s ** 2).sum() / s[0] ** 2, rel=1e-12)
        assert m["entropy"][h] == pytest.approx(float(mean_row_entropy(C)), rel=1e-12)
        assert m["rows"][h] == (11 if sinks == [0] else 12)
        assert m["sink_share"][h] == pytest.approx(A[h][:, sinks].sum(-1).mean(), rel=1e-12)


def _rank_k(C, k):
    U, s, Vt = np.linalg.svd(C, full_matrices=False)
    return (U[:, :k] * s[:k]) @ Vt[:k]


def test_content_measures_can_fail_and_pass():
    """A causal uniform map's content part spreads its energy (error well above 0.1 at rank 2); a map
    whose rows all pick the same content key is rank 1 (error 0)."""
    n = 40
    U = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]
    one = np.zeros((n, n)); one[:, 0] = 0.5; one[1:, 1] = 0.5; one[0, 0] = 1.0
    m = content_measures(np.stack([U, one]), [0], k=2)
    assert m["rank_error"][0] > 0.3 and m["rank_error"][1] < 1e-12


def test_lowrank_rule_with_thresholds():
    order = {"energy": [0.995, 0.95, 0.999, 0.97], "sink_share": [0.1, 0.2, 0.8, 0.45],
             "stable_rank": [1.0, 2.0, 1.0, 1.5], "effective_rank": [3.0, 40.0, 2.0, 10.0], "entropy": [0.5, 3.0, 0.1, 2.5]}
    rec = {"config": {"k": 32}, "orders": [order, order]}
    b = dc.lowrank_bins(rec)[0]
    assert (b["property"], b["no property"], b["sink"], b["non_sink_low"]) == (0.25, 0.5, 0.25, 1 / 3)
    assert dc.lowrank_bins(rec, sink_threshold=0.4)[0]["sink"] == 0.5
    assert dc.lowrank_bins(rec, energy=0.95)[0]["non_sink_low"] == 1.0
    assert dc.model_verdict(rec, energy=0.95) == "holds"
    assert dc.entropy_auc(rec) == 1.0 and dc.model_verdict(rec) == "holds when"  # entropy separates them perfectly
    assert dc.decide_low_rank_real({"a": rec, "b": rec}, energy=0.95) == ("holds", {"a": "holds", "b": "holds"})


def test_trailing_rule_can_come_out_every_way():
    rows = lambda t, r: [{"keep": 0.9, "cost": {"trailing": t, "random": r, "leading": 1.0}}]  # noqa: E731
    assert dc.decide_trailing({"a": rows(0.05, 0.5), "b": rows(0.02, 0.3)})[0] == "holds"
    assert dc.decide_trailing({"a": rows(0.05, 0.08), "b": rows(0.5, 0.3)})[0] == "wrong as stated"  # 0.05 > half of 0.08
    with pytest.raises(ValueError, match="no rows at keep=0.95"):
        dc.trailing_passes(rows(0.1, 0.2), 0.95)


def test_chapter_7s_runs_read_here_decide_efficient_attention():
    points = trained_points(load_trained_runs())
    assert len(points) == 12 and {p["d"] for p in points} == {16, 32, 64}
    assert sum(p["small"] for p in points) == 3 and sum(p["informative"] for p in points) == 3
    assert decide_trained(points) == "holds when"
    # the rule can fail: a linear attention that kept up at N >= d would make it wrong as stated
    kept_up = [dict(p, gap=0.0) if p["informative"] else p for p in points]
    assert decide_trained(kept_up) == "wrong as stated"


def test_smollm2_ids_follow_the_sentence_order():
    ids = tm.smollm2_ids(512, 0)
    assert ids.shape == (1, 512)
    assert not torch.equal(ids, tm.smollm2_ids(512, 1))
    with pytest.raises(ValueError, match="the text's SmolLM2 tokens"):
        tm.smollm2_ids(600)


def test_stored_heads_run_has_the_preregistered_design():
    doc = tm.load_two_models()
    models = doc["heads"]["models"]
    assert set(models) == {"MiniLM", "SmolLM2"}
    for name, heads in (("MiniLM", 72), ("SmolLM2", 270)):
        rec = models[name]
        assert (rec["config"]["n"], rec["config"]["k"], [o["order"] for o in rec["orders"]]) == (512, 32, [0, 1, 2, 3, 4])
        assert all(len(o["energy"]) == heads for o in rec["orders"])
        assert [g["n"] for g in rec["growth"]] == [16, 32, 64, 128, 256, 512]
        assert max(rec["invariance"].values()) < 1e-9
    assert models["SmolLM2"]["sinks"] == [0] and models["MiniLM"]["sinks"] == [0, 511]
    tr = doc["trailing"]
    assert (tr["config"]["n"], tr["config"]["orders"], tr["config"]["draws"], tr["config"]["keeps"]) == (
        128, [0, 1, 2, 3, 4], [0, 1, 2, 3, 4], [0.9, 0.95, 0.99])
    assert len(tr["rows"]) == 15


@pytest.mark.extended
@pytest.mark.numerics
def test_smollm2s_last_layer_and_one_trailing_order_recompute():
    """SmolLM2's last layer at n = 512 (shipped order) and its trailing removal in the shipped order, recomputed."""
    doc = tm.load_two_models()
    stored = doc["heads"]["models"]["SmolLM2"]["orders"][0]
    A = tm.model_maps("SmolLM2", 512, 0)[-9:]  # the last layer's 9 heads
    m = content_measures(A, [0], 32)
    np.testing.assert_allclose(m["energy"], stored["energy"][-9:], atol=1e-4)
    np.testing.assert_allclose(m["sink_share"], stored["sink_share"][-9:], atol=1e-4)
    live = tm.decoder_trailing_run({"orders": [0], "draws": [0], "keeps": [0.9]}, progress=False)["rows"][0]
    row = doc["trailing"]["rows"][0]
    for key in ("exact", "uniform", "trailing", "leading"):
        assert live[key] == pytest.approx(row[key], abs=1e-3)
