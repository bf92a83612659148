"""Tests for attention_course.chapters.scaling.init_vs_step (chapter 6: gradient at the softmax, 2x2 run)."""

import numpy as np
import pytest
import torch

from attention_course.chapters.scaling.init_vs_step import (
    VARIANTS,
    load_causes,
    run_causes,
    score_gradient_norms,
    score_gradients,
    train_variant,
)
from attention_course.models.tasks import make_task
from attention_course.models.tiny import ModelConfig, TinyTransformer
from attention_course.models.training import train

TASK = make_task("repeated_sequences")


@pytest.mark.parametrize("scale", ["sqrt", "none"])
def test_score_gradient_rebuilds_the_W_q_gradient(scale):
    # chain rule: dL/dW_Q = c x^T (dL/ds) k, with x the block's input after LayerNorm;
    # autograd's W_q.grad is the trusted reference
    model = TinyTransformer(ModelConfig(d_k=16, n_heads=2, scale=scale), seed=1).double()
    inputs, targets, mask = TASK(6, seed=2)
    xs = []
    hooks = [model.ln[i].register_forward_hook(lambda m, a, out: xs.append(out.detach())) for i in range(2)]
    grads = score_gradients(model, inputs, targets, mask)
    for h in hooks:
        h.remove()
    c = model.config.score_scale
    for layer in range(2):
        x = xs[layer]  # (B, T, d_model)
        k = torch.einsum("btd,hdk->bhtk", x, model.W_k[layer].detach())  # (B, h, T, d_k)
        G = grads["score"][layer]  # (B, h, T, T)
        rebuilt = c * torch.einsum("btd,bhts,bhsk->hdk", x, G, k)  # (h, d_model, d_k)
        torch.testing.assert_close(rebuilt, grads["W_q"][layer], rtol=1e-10, atol=1e-14)  # float64 round-off
    assert model.W_q[0].grad is None  # the model's gradients are left unset


def test_score_gradient_is_zero_on_masked_keys():
    model = TinyTransformer(ModelConfig(d_k=8, n_heads=1), seed=0)
    G = score_gradients(model, *TASK(4, seed=0))["score"][0]  # (B, 1, T, T)
    upper = torch.triu(torch.ones(G.shape[-2:], dtype=torch.bool), diagonal=1)
    assert torch.all(G[..., upper] == 0)
    assert torch.allclose(G.sum(-1), torch.zeros(()), atol=1e-6)  # softmax backward: rows sum to 0


def test_norms_match_the_tensors():
    model = TinyTransformer(ModelConfig(d_k=8, n_heads=1), seed=0)
    batch = TASK(4, seed=0)
    norms, grads = score_gradient_norms(model, *batch), score_gradients(model, *batch)
    np.testing.assert_allclose(norms["score"], [float(g.norm()) for g in grads["score"]], rtol=1e-6)


def test_plain_variant_reproduces_train_bit_for_bit():
    run = train_variant(16, "none", steps=15, seed=3)
    model = TinyTransformer(ModelConfig(d_k=16, n_heads=1, scale="none"), seed=3)
    np.testing.assert_array_equal(run.loss, train(model, TASK, steps=15, seed=3, lr=1e-2))


def test_small_init_without_scale_starts_like_the_scaled_model():
    # W_Q / 8 with c = 1 gives the same scores as c = 1/8 (a power of two: exact), hence the same
    # gradient at the softmax; the W_Q gradient is x^T G k instead of (1/8) x^T G k: 8 times larger
    a = train_variant(64, *VARIANTS["scaled"], steps=1, seed=0, eval_batch=16)
    b = train_variant(64, *VARIANTS["unscaled, small W_Q init"], steps=1, seed=0, eval_batch=16)
    np.testing.assert_allclose(b.score_grad0, a.score_grad0, rtol=1e-5)
    np.testing.assert_allclose(b.wq_grad0, 8 * a.wq_grad0, rtol=1e-5)
    assert a.loss[0] == pytest.approx(b.loss[0], rel=1e-6)


def test_small_lr_changes_only_W_q_steps():
    a = train_variant(16, "none", steps=3, seed=0, eval_batch=8)
    b = train_variant(16, "none", q_lr=0.0, steps=3, seed=0, eval_batch=8)
    assert a.loss[0] == b.loss[0] and a.loss[2] != b.loss[2]


def test_bad_inputs():
    with pytest.raises(ValueError, match="steps=0"):
        train_variant(8, steps=0)
    with pytest.raises(ValueError, match="unknown variants"):
        run_causes([0], variants=["scaled", "tiny"])


def test_stored_run_has_every_variant_and_seed():
    r, meta = load_causes()
    assert r.variants == tuple(VARIANTS)
    assert r.eval_loss.shape == (len(VARIANTS), len(r.seeds)) and len(r.seeds) >= 3
    assert r.loss.shape[2] == r.settings["steps"] and "machine" in meta


def test_command_line_writes_what_load_causes_reads(tmp_path):
    import argparse

    from attention_course.chapters.scaling.init_vs_step import add_arguments, cli

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    out = tmp_path / "causes.json"
    assert cli(parser.parse_args(["--out", str(out), "--seeds", "0", "--steps", "2"])) == 0
    r, meta = load_causes(out)
    assert r.variants == tuple(VARIANTS) and r.loss.shape == (len(VARIANTS), 1, 2)
    assert meta["arguments"]["steps"] == 2
    with pytest.raises(SystemExit):
        parser.parse_args(["--steps", "many"])
