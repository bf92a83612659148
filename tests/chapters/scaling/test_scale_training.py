"""chapters/scaling/training.py: training the tiny transformer with each score scale.

References: the tiny model's own train_run, evaluate_loss, head_scores and qk_logits, run
independently of train_one/compare_scales; the JSON shipped with the package; and the
command line through ``python -m attention_course``.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from attention_course.core.attention import causal_mask
from attention_course.models.experiments import result_document, write_json
from attention_course.chapters.scaling.training import (
    SCALE_RUN,
    STORED_RUN,
    ScaleRun,
    compare_scales,
    load_comparisons,
    thin_comparison,
    train_one,
)
from attention_course.models.tasks import make_task
from attention_course.models.probes import head_scores
from attention_course.models.tiny import ModelConfig, TinyTransformer, qk_logits
from attention_course.models.training import evaluate_loss, train_run

SMALL = dict(steps=4, d_model=8, n_heads=1, eval_batch=16, batch_size=8)
pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny models: faster on a shared 2-core machine


@pytest.fixture(scope="module")
def comparison(one_torch_thread):
    return compare_scales([4, 16], ["sqrt", "none", "mup"], seed=2, **SMALL)


def test_compare_scales_shapes_and_factors(comparison):
    r = comparison
    assert r.d_k.tolist() == [4, 16] and r.scales == ("sqrt", "none", "mup")
    assert r.loss.shape == r.grad_norm_qk.shape == (2, 3, 4)
    assert r.max_weight.shape == (2, 3, 4, 2)
    assert r.eval_loss.shape == r.grad_norm_init.shape == (2, 3)
    for name in ("logit_std_init", "logit_std_final", "previous_token", "induction"):
        assert getattr(r, name).shape == (2, 3, 2)
    np.testing.assert_allclose(r.factor, [[1 / 2, 1, 1 / 4], [1 / 4, 1, 1 / 16]], rtol=1e-15)
    assert r.index(16, "mup") == (1, 2)
    with pytest.raises(KeyError, match=r"d_k=32.*not in d_k=\[4, 16\]"):
        r.index(32, "sqrt")


def test_compare_scales_reproduces_independent_training_runs(comparison):
    task = make_task("repeated_sequences")
    for i, d_k in enumerate([4, 16]):
        for j, scale in enumerate(["sqrt", "none", "mup"]):
            cfg = ModelConfig(d_model=8, n_heads=1, d_k=d_k, scale=scale)
            run = train_run(TinyTransformer(cfg, seed=2), task, steps=4, seed=2, lr=1e-2, batch_size=8)
            np.testing.assert_array_equal(comparison.loss[i, j], run.loss)
            expect = np.sqrt((run.grad_norm_q**2 + run.grad_norm_k**2).sum(axis=1))
            np.testing.assert_allclose(comparison.grad_norm_qk[i, j], expect, rtol=1e-12)
            assert comparison.grad_norm_qk_init[i, j] == expect[0]
            np.testing.assert_array_equal(comparison.max_weight[i, j], run.max_weight)


def test_initial_logit_spread_is_proportional_to_the_scale(comparison):
    # the same seed gives the same weights for every scale, and layer 0 sees the same
    # inputs, so there only the factor differs (layer 1's inputs depend on layer 0's attention)
    std = comparison.logit_std_init[..., 0]  # (d_k, scale), layer 0
    for i, d_k in enumerate([4, 16]):
        np.testing.assert_allclose(std[i, 1] / std[i, 0], math.sqrt(d_k), rtol=1e-5)
        np.testing.assert_allclose(std[i, 1] / std[i, 2], d_k, rtol=1e-5)
    std = comparison.logit_std_init
    assert np.all((0.5 < std[:, 0]) & (std[:, 0] < 2.0))  # Var(q.k / sqrt(d_k)) is about 1


def test_compare_scales_rejects_a_bad_scale_before_training():
    with pytest.raises(ValueError, match=r"unknown scale 'root'"):
        compare_scales([4], ["sqrt", "root"], **SMALL)
    for d_ks in ([4, 0], [4, 2.5]):
        with pytest.raises(ValueError, match=rf"d_k={d_ks[1]}.*positive integer"):
            compare_scales(d_ks, ["sqrt"], **SMALL)
    with pytest.raises(ValueError, match=r"d_ks=\[\] and scales=\['sqrt'\]; expected at least one of each"):
        compare_scales([], ["sqrt"], **SMALL)
    with pytest.raises(ValueError, match=r"d_ks=\[4\] and scales=\[\]"):
        compare_scales([4], [], **SMALL)


def test_thin_comparison_block_means(comparison):
    t = thin_comparison(comparison, 3)
    assert t.step.tolist() == [1.0, 3.0]  # blocks {0, 1, 2} and {3}
    np.testing.assert_allclose(t.loss[..., 0], comparison.loss[..., :3].mean(-1), rtol=1e-12)
    np.testing.assert_allclose(t.loss[..., 1], comparison.loss[..., 3], rtol=1e-12)
    np.testing.assert_allclose(t.max_weight[:, :, 1], comparison.max_weight[:, :, 3], rtol=1e-12)
    np.testing.assert_array_equal(t.grad_norm_qk_init, comparison.grad_norm_qk_init)
    with pytest.raises(ValueError, match=r"every=0; expected a positive integer"):
        thin_comparison(comparison, 0)


def test_save_and_load_round_trip(comparison, tmp_path):
    path = tmp_path / "c.json"
    write_json(result_document([comparison, comparison], {"machine": {"cores": 2}}), str(path))
    results, meta = load_comparisons(str(path))
    assert meta == {"machine": {"cores": 2}} and len(results) == 2
    r = results[1]
    assert r.scales == comparison.scales and r.settings == comparison.settings
    assert r.d_k.dtype.kind == "i" and r.d_k.tolist() == [4, 16]
    for name in ("loss", "grad_norm_qk", "max_weight", "eval_loss", "logit_std_final", "factor"):
        np.testing.assert_allclose(getattr(r, name), getattr(comparison, name), rtol=1e-3)
    path.write_text('{"schema_version": 2, "runs": []}')
    with pytest.raises(ValueError, match=r"schema_version=2; expected 1"):
        load_comparisons(str(path))


def test_command_line_writes_the_json(tmp_path):
    out = tmp_path / "run.json"
    from attention_course.__main__ import main

    status = main(["scaling-run", "--out", str(out), "--d-k", "4", "--scales", "sqrt", "none",
                   "--seeds", "0", "--steps", "3", "--n-heads", "1", "--every", "2"])
    results, stored = load_comparisons(str(out))
    assert status == 0 and stored["machine"]["cores"] >= 1 and stored["cpu_seconds"] >= 0
    assert stored["arguments"]["steps"] == 3 and stored["arguments"]["d_k"] == [4]
    (r,) = results
    assert r.scales == ("sqrt", "none") and r.loss.shape == (1, 2, 2)
    assert r.settings["steps"] == 3 and r.settings["n_heads"] == 1


def test_train_one_matches_the_models_own_measurements():
    task = make_task("repeated_sequences")
    run = train_one(8, "mup", steps=3, seed=1, d_model=8, eval_batch=16, batch_size=8)
    model = TinyTransformer(ModelConfig(d_model=8, n_heads=1, d_k=8, scale="mup"), seed=1)
    held_out = task(16, seed=12345).inputs
    allowed = torch.from_numpy(causal_mask(held_out.shape[1]))
    std0 = [float(s[..., allowed].std()) for s in qk_logits(model, held_out)]
    ref = train_run(model, task, steps=3, seed=1, lr=1e-2, batch_size=8)
    std1 = [float(s[..., allowed].std()) for s in qk_logits(model, held_out)]
    scores = head_scores(model, task, batch_size=16)
    assert isinstance(run, ScaleRun) and run.factor == 1 / 8
    np.testing.assert_array_equal(run.loss, ref.loss)
    assert run.grad_norm_init == ref.grad_norm[0]
    np.testing.assert_array_equal(run.logit_std_init, std0)
    np.testing.assert_array_equal(run.logit_std_final, std1)
    assert run.eval_loss == evaluate_loss(model, task, batch_size=16)
    np.testing.assert_array_equal(run.previous_token, scores["previous_token"].max(axis=1))
    np.testing.assert_array_equal(run.induction, scores["induction"].max(axis=1))


def test_compare_scales_prints_nothing(capsys):
    r = compare_scales([4, 8], ["sqrt", 0.5], seed=3, **SMALL)
    assert r.scales == ("sqrt", 0.5) and r.d_k.tolist() == [4, 8] and r.settings["seed"] == 3
    assert capsys.readouterr() == ("", "")  # the library prints nothing: no progress in a notebook's output


def test_the_shipped_run_loads_and_says_what_chapter_6_says():
    # the stored run was made with 3 seeds, d_k = 16, 64, 256 and 600 steps thinned to 10-step means
    results, meta = load_comparisons()
    assert Path(STORED_RUN).name == "scaling_training.json" and len(results) == 3
    for seed, r in enumerate(results):
        assert r.d_k.tolist() == [16, 64, 256] and r.scales == ("sqrt", "none", "mup")
        assert r.settings["seed"] == seed and r.settings["steps"] == 600 and r.loss.shape == (3, 3, 60)
        np.testing.assert_allclose(r.step, np.arange(4.5, 600, 10))
        np.testing.assert_allclose(r.factor[:, 0], 1 / np.sqrt([16, 64, 256]), rtol=1e-3)  # 4 digits stored
    assert meta["wall_seconds"] > meta["cpu_seconds"] > 0


def test_stored_run_is_reproduced_by_its_first_block():
    # seed 0 of the shipped run, d_k = 64 without the scale: its first 10 steps are the first block
    # of the stored curves (4 significant digits: at most 5e-4 relative); the step-0 gradients and
    # score spreads are stored to 4 digits too
    results, _ = load_comparisons()
    r = results[0]
    i, j = r.index(64, "none")
    cfg = {k: r.settings[k] for k in ("d_model", "n_heads", "n_layers", "lr", "batch_size", "eval_batch")}
    run = train_one(64, "none", steps=10, seed=r.settings["seed"], **cfg)
    np.testing.assert_allclose(run.loss.mean(), r.loss[i, j, 0], rtol=5e-4)
    np.testing.assert_allclose(run.grad_norm_qk.mean(), r.grad_norm_qk[i, j, 0], rtol=5e-4)
    np.testing.assert_allclose(run.max_weight.mean(0), r.max_weight[i, j, 0], rtol=5e-4)
    np.testing.assert_allclose(run.grad_norm_init, r.grad_norm_init[i, j], rtol=5e-4)
    np.testing.assert_allclose(run.logit_std_init, r.logit_std_init[i, j], rtol=5e-4)
    assert (SCALE_RUN.config.steps, SCALE_RUN.config.every, SCALE_RUN.config.seeds) == (r.settings["steps"], 10, (0, 1, 2))


def test_command_line_help_names_every_argument(capsys):
    from attention_course.__main__ import main

    with pytest.raises(SystemExit) as exit_:
        main(["scaling-run", "--help"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0
    for flag in ("--out", "--d-k", "--scales", "--seeds", "--steps", "--n-heads", "--lr", "--every"):
        assert flag in out
