"""Tests for attention_course.chapters.graphs.depth_study: one protocol, two models, and the ledger's decision."""

from __future__ import annotations

import tomllib

import numpy as np
import pytest

from attention_course.core._backend import ShapeError
from attention_course.chapters.graphs import depth_probe as dp, depth_study as ds
from attention_course.models.records import DATA_DIR

CLAIMS = DATA_DIR / "claims.toml"


def _row(F, last=0.6, scrambled=0.2):
    return {"F": F, "last": last, "scrambled_last": scrambled}


def test_every_label_and_every_verdict_is_reachable():
    kept, fades, undecided = (0.0, -0.02, 0.02), (-0.2, -0.25, -0.15), (-0.06, -0.08, -0.04)
    rows = {"A": {-1: _row(kept), 1: _row(fades), 2: _row(undecided), -2: _row(kept, last=0.23)}}
    assert ds.depth_labels(rows) == {"A": {-1: "kept", 1: "fades", 2: "undecided", -2: "lost"}}
    assert ds.depth_labels(rows, margin=0.1)["A"] == {-1: "kept", 1: "fades", 2: "kept", -2: "lost"}
    cases = [  # (labels, verdict, named)
        ({"A": {-1: "kept", 1: "kept"}, "B": {-1: "kept"}}, "holds", {}),
        ({"A": {-1: "kept", 1: "fades"}, "B": {-1: "fades", -2: "kept"}}, "holds when", {"A": [1], "B": [-1]}),
        ({"A": {-1: "lost", 1: "lost", 2: "kept"}, "B": {-1: "fades"}}, "wrong as stated", {"A": [-1, 1]}),
        ({"A": {-1: "kept"}, "B": {-1: "lost", -2: "lost"}}, "wrong as stated", {"B": [-1, -2]}),  # either model
        ({"A": {-1: "lost", 1: "lost", 2: "kept", -2: "fades"}}, "holds when", {"A": [-2]}),  # half lost is not most
        ({"A": {-1: "undecided", 1: "kept"}, "B": {-1: "lost", -2: "kept"}}, "undecided", {}),
    ]
    for labels, verdict, named in cases:
        assert ds.depth_verdict(labels) == (verdict, named), labels


def _planted_doc(held_best, cv_best, n_layers=7, M=40, n_read=8, seed=0):
    """A stored run whose held-out hits peak at ``held_best`` while its fitting sentences' cv peaks at ``cv_best``."""
    rng = np.random.default_rng(seed)
    level = np.full(n_layers, 0.5)
    level[held_best], level[-1] = 0.9, 0.4
    hits = rng.binomial(n_read, level[:, None], size=(n_layers, M))  # (L + 1, M)
    cv = np.full(n_layers, 0.5)
    cv[cv_best] = 0.95
    fit = {"hits": [hits.tolist()], "cv": [cv.tolist()], "ridge": [[1e-3] * n_layers]}
    scr = {"hits": [np.full((n_layers, M), 1).tolist()], "cv": [[0.1] * n_layers], "ridge": [[1.0] * n_layers]}
    entry = lambda f: {"layers": list(range(n_layers)), "offsets": [-1], "n_read": [n_read], "fits": {"1000": f}}
    return {"models": {"MiniLM": entry(fit), "MiniLM scrambled": entry(scr)}}, hits


def test_the_best_layer_is_the_fitting_sentences_not_the_held_out_ones():
    doc, hits = _planted_doc(held_best=1, cv_best=3)
    row = ds.depth_rows(doc, n_boot=500)["MiniLM"][-1]
    acc = hits.sum(axis=1) / (hits.shape[1] * 8)
    assert acc.argmax() == 1 and row["best"] == 3  # held out says 1; the fitting sentences say 3
    assert row["F"][0] == pytest.approx(acc[-1] - acc[3], abs=1e-12)
    assert row["F"][0] > acc[-1] - acc[1] + 0.3  # against layer 1 it would fade by far more
    assert ds.best_layer([0.99, 0.2, 0.5, 0.5]) == 2  # layer 0 is no candidate; ties: the earlier
    with pytest.raises(ShapeError, match=r"cv has shape \(1,\)"):
        ds.best_layer([0.5])


def test_cross_validation_never_sees_the_held_out_sentences():
    """Layer 1 reads the label on the fitting sentences only (noise on the held-out ones), layer 2 on all:
    the cross-validated accuracies, so the best layer, are the same whatever the held-out states are."""
    rng = np.random.default_rng(1)
    N, W, V, n_train = 70, 5, 4, 50
    ids = rng.integers(V, size=(N, W))
    ends = np.tile(np.arange(W), (N, 1))
    prev = np.eye(V)[np.roll(ids, 1, axis=1)]  # (N, W, V): each word's state holds the word before
    fitting_only = prev.copy()
    fitting_only[n_train:] = rng.normal(size=(N - n_train, W, V))
    noisy = prev + 1.2 * rng.normal(size=prev.shape)
    probes = dp.word_probes([fitting_only, noisy], ids, ends, n_train, offsets=(-1,), ridges=(1e-3,))
    acc = probes["hits"][0].sum(axis=1) / ((N - n_train) * (W - 1))  # (2,) held out
    assert probes["cv"][0, 0] == 1.0 > probes["cv"][0, 1] and acc[0] < acc[1]  # the two disagree
    swapped = prev.copy()
    swapped[n_train:] = noisy[n_train:]
    again = dp.word_probes([swapped, noisy], ids, ends, n_train, offsets=(-1,), ridges=(1e-3,))
    np.testing.assert_array_equal(again["cv"], probes["cv"])  # held-out states changed, cv did not
    assert 1 + probes["cv"][0, :].argmax() == 1


def test_word_probes_with_n_fit_score_the_same_held_out_sentences():
    rng = np.random.default_rng(2)
    ids = rng.integers(5, size=(60, 6))
    states = np.eye(5)[np.roll(ids, -1, axis=1)] + 0.7 * rng.normal(size=(60, 6, 5))  # the next word, noisy
    ends = np.tile(np.arange(6), (60, 1))
    small = dp.word_probes([states], ids, ends, 40, offsets=(1,), n_fit=10)
    full = dp.word_probes([states], ids, ends, 40, offsets=(1,))
    assert small["hits"].shape == full["hits"].shape == (1, 1, 20)
    flat = states[:, :5].reshape(-1, 5)  # the first 10 sentences fit, sentences 40-59 score
    keep = np.r_[0:10 * 5, 40 * 5:60 * 5]
    ref = dp.probe_accuracy(flat[keep], ids[:, 1:].reshape(-1)[keep], 10 * 5, ridge=small["ridge"][0, 0])
    assert small["hits"].sum() / (20 * 5) == pytest.approx(ref, abs=1e-12)
    with pytest.raises(ShapeError, match=r"n_fit=45"):
        dp.word_probes([states], ids, ends, 40, offsets=(1,), n_fit=45)


def test_the_eigendecomposition_gives_the_cholesky_solution_at_every_ridge():
    rng = np.random.default_rng(3)
    A = np.hstack([rng.normal(size=(200, 12)), np.ones((200, 1))])  # (n, d + 1)
    Y = np.eye(3)[rng.integers(3, size=200)]  # (n, C)
    B = rng.normal(size=(30, 13))
    gram = A.T @ A
    ridges = (1e-6, 1e-2, 1.0)
    got = dp._ridge_scores(dp._gram_eig(gram), A.T @ Y, B, ridges)
    scale = np.trace(gram) / 13
    for r, lam in enumerate(ridges):  # float64, condition number at most about 1e6 here: 1e-8 is ample
        want = B @ np.linalg.solve(gram + lam * scale * np.eye(13), A.T @ Y)
        np.testing.assert_allclose(got[r], want, rtol=1e-8, atol=1e-10)


def test_last_minus_best_at_a_given_layer():
    rng = np.random.default_rng(4)
    hits = rng.integers(0, 9, size=(5, 60))
    acc = hits.sum(axis=1) / (60 * 8)
    d, low, high = dp.last_minus_best(hits, 8, best=2)
    assert d == pytest.approx(acc[-1] - acc[2], abs=1e-12) and low <= d <= high
    with pytest.raises(ShapeError, match=r"best=5"):
        dp.last_minus_best(hits, 8, best=5)


# ---------------------------------------------------------------- the stored run and the ledger

def _entry():
    return next(c for c in tomllib.loads(CLAIMS.read_text())["claim"] if c["id"] == "depth-keeps-information")


def test_the_stored_run_follows_the_registered_design():
    doc = ds.load_depth_probe()
    c = doc["config"]
    assert (c["n_sentences"], c["n_train"], c["fit_sizes"], c["folds"]) == (1120, 1000, [120, 360, 1000], 5)
    assert c["ridges"] == [10.0 ** k for k in range(-6, 1)] and c["scramble_seed"] == 0 and c["seed"] == 0
    shapes = {"MiniLM": (4, 7), "SmolLM2": (2, 31)}
    for name, m in doc["models"].items():
        offsets, layers = shapes[name.split(" ")[0]]
        assert m["offsets"] == list(ds.OFFSETS[name.split(" ")[0]]) and m["layers"] == list(range(layers))
        assert m["split_words"] == 0 and m["n_read"] == [10 - abs(o) for o in m["offsets"]]
        for fit in m["fits"].values():
            assert np.shape(fit["hits"]) == (offsets, layers, 120) and np.shape(fit["cv"]) == (offsets, layers)
            assert set(np.ravel(fit["ridge"])) <= set(c["ridges"])
    assert doc["meta"]["wall_seconds"] <= 15 * 60  # the design's time budget, on 2 cores


def test_the_ledger_verdict_is_what_the_rule_gives_on_the_stored_run():
    """The verdict, the finding's models, and the numbers the box quotes (evidence.json) are the stored run's."""
    import json

    rows = ds.depth_rows(ds.load_depth_probe())
    labels = ds.depth_labels(rows, 0.05)
    verdict, named = ds.depth_verdict(labels)
    entry = _entry()
    assert entry["verdict"] == verdict
    for model, by in labels.items():
        if model in named:  # a named model: the finding says its neighbours fade, and all of them are named
            assert f"{model}'s neighbours fade" in entry["finding"] and named[model] == list(by), (model, by)
        elif set(by.values()) == {"undecided"}:
            assert f"{model}'s undecided" in entry["finding"], (model, by)
    quoted = json.loads((DATA_DIR / "evidence.json").read_text())["depth-keeps-information"]
    short, keys = {"MiniLM": "mini", "SmolLM2": "smol"}, {-2: "m2", -1: "m1", 1: "p1", 2: "p2"}
    for model, by in rows.items():
        for o, r in by.items():
            k = f"{short[model]}_{keys[o]}"
            assert quoted[f"dk_best_{k}"] == r["best"]
            assert [quoted[f"dk_{v}_{k}"] for v in ("F", "lo", "hi")] == pytest.approx(r["F"], abs=5e-4)  # 3 decimals
            assert quoted[f"dk_D_{k}"] == pytest.approx(r["D"][0], abs=5e-4)


@pytest.mark.extended
def test_the_stored_probes_are_what_the_run_computes():
    """Both models on every sentence, fitted on the first 120, at layers 0, 1 and the last."""
    doc = ds.load_depth_probe()
    fresh = ds.depth_probe_record(ds.DepthProbeConfig(fit_sizes=(120,), layers=(0, 1, -1)))
    for name, m in doc["models"].items():
        f = fresh[name]
        assert f["n_read"] == m["n_read"] and f["layers"] == [0, 1, len(m["layers"]) - 1]
        stored = np.asarray(m["fits"]["120"]["hits"])[:, f["layers"]]  # (offsets, 3, 120)
        got = np.asarray(f["fits"]["120"]["hits"])
        # float32 states, through up to 30 layers, and a ridge whose fold scores tie within a word or two may be
        # chosen differently: a few of each offset's 120 x 8-9 held-out words may flip (at most 2% of them)
        assert np.abs(got.sum(axis=2) - stored.sum(axis=2)).max() <= 0.02 * 120 * 9, name
        np.testing.assert_allclose(f["fits"]["120"]["cv"], np.asarray(m["fits"]["120"]["cv"])[:, f["layers"]],
                                   atol=0.02)
