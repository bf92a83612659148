"""chapters/heads/head_training.py: one run against train/evaluate_loss called directly; the command's JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attention_course.__main__ import main
from attention_course.chapters.heads import head_training as HT
from attention_course.models.tasks import make_task
from attention_course.models.tiny import ModelConfig, TinyTransformer
from attention_course.models.training import evaluate_loss, train


def test_run_one_matches_training_by_hand():
    r = HT.run_one(2, steps=6, seed=3, n_heads=2, d_k=8, every=3)
    model = TinyTransformer(ModelConfig(n_layers=2, n_heads=2, d_k=8), seed=3)
    hist = train(model, make_task("repeated_sequences"), steps=6, seed=3)
    # the same seeded computation on one thread: equal up to the 5 and 4 decimals the record keeps
    assert r["held_out"] == pytest.approx(evaluate_loss(model, make_task("repeated_sequences")), abs=1e-5)
    np.testing.assert_allclose(r["train_curve"], [hist[:3].mean(), hist[3:].mean()], atol=1e-4)
    assert (r["n_layers"], r["n_heads"], r["d_k"], r["steps"], r["seed"]) == (2, 2, 8, 6, 3)
    assert r["parameters"] == sum(p.numel() for p in model.parameters())


@pytest.mark.extended
def test_cli_writes_what_load_runs_reads(tmp_path):
    out = tmp_path / "runs.json"
    assert main(["heads-run", "--out", str(out), "--seeds", "0", "--steps", "4", "--heads", "2", "--head-seeds", "1",
                 "--head-steps", "4", "--division-seeds", "0", "--division-steps", "4", "--subspace-seeds", "0",
                 "--every", "2", "--quiet"]) == 0
    doc = HT.load_runs(out)
    assert [(r["n_layers"], r["seed"]) for r in doc["depth"]] == [(2, 0), (1, 0)]
    assert [(r["n_heads"], r["d_k"]) for r in doc["heads"]] == [(2, 16), (2, 32)]  # tied d/h, decoupled d
    assert [r["n_heads"] for r in doc["division"]] == [4, 1] and [r["seed"] for r in doc["subspaces"]] == [0]
    assert len(doc["subspaces"][0]["overlaps_init"]) == 2  # both layers of the induction model
    assert doc["meta"]["arguments"]["steps"] == 4 and "machine" in doc["meta"]


def test_one_study_is_rerun_and_the_others_kept(tmp_path):
    out = tmp_path / "runs.json"
    stored = HT.load_runs()
    (tmp_path / "runs.json").write_text(HT.STORED_RUN.read_text())
    assert main(["heads-run", "--out", str(out), "--study", "subspaces", "--subspace-seeds", "0", "--steps", "3",
                 "--every", "3", "--quiet"]) == 0
    doc = HT.load_runs(out)
    assert [(r["seed"], r["steps"]) for r in doc["subspaces"]] == [(0, 3)]
    for study in ("depth", "heads", "division"):
        assert doc[study] == stored[study]
        assert doc["meta"]["studies"].get(study) == stored["meta"].get("studies", {}).get(study)
    assert doc["meta"]["studies"]["subspaces"]["arguments"]["study"] == "subspaces"


def test_load_runs_rejects_other_schemas(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema_version": 2}))
    with pytest.raises(ValueError, match="schema_version=2; expected 1"):
        HT.load_runs(bad)


def test_converged_compares_the_last_two_windows():
    flat = np.r_[np.linspace(4.0, 0.1, 700), np.full(600, 0.1)]
    assert HT.converged(flat) and not HT.converged(np.linspace(4.0, 0.1, 1300))
    assert not HT.converged(np.full(599, 0.1))  # shorter than two windows: not judged converged
    assert HT.converged(np.r_[np.full(300, 0.125), np.full(300, 0.11)])  # 0.015 apart: within the tolerance
    assert not HT.converged(np.r_[np.full(300, 0.14), np.full(300, 0.11)])  # 0.03 apart: not yet
