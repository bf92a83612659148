"""chapters/heads/division.py: the two-offset task, the field losses and the per-head measurements."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_course.chapters.heads import circuits as C
from attention_course.chapters.heads import division as D
from attention_course.models.tiny import ModelConfig, TinyTransformer


def test_two_offset_targets_by_a_loop():
    task = D.TwoOffsetTask(seq_len=9, offsets=(2, 1), fields=4)
    x, y, m = task(3, seed=5)
    for b in range(3):
        for t in range(9):
            assert bool(m[b, t]) == (t >= 2)
            if t >= 2:
                assert int(y[b, t]) == 4 * (int(x[b, t - 2]) // 4) + int(x[b, t - 1]) % 4
    assert int(x.max()) < 16 and task.vocab_size == 16


@pytest.mark.parametrize("kwargs", [{"offsets": (1, 1)}, {"offsets": (0, 2)}, {"seq_len": 3, "offsets": (1, 3)},
                                    {"fields": 1}])
def test_two_offset_task_rejects_bad_settings(kwargs):
    with pytest.raises(ValueError, match="expected two different offsets"):
        D.TwoOffsetTask(**kwargs)


class _FixedLogits(torch.nn.Module):
    """A stand-in model that returns the same logits whatever the head mask."""

    def __init__(self, logits):
        super().__init__()
        self.logits = logits

    def forward(self, inputs, head_mask=None):
        return self.logits, []


def test_field_losses_are_the_marginal_cross_entropies():
    g = torch.Generator().manual_seed(0)
    task = D.TwoOffsetTask(seq_len=6, fields=3)
    batch = task(2, seed=1)
    logits = torch.randn(2, 6, 9, generator=g, dtype=torch.float64)
    got = D.field_losses(_FixedLogits(logits), batch, fields=3)
    p = torch.softmax(logits, -1).numpy()
    la, lb = [], []
    for b in range(2):
        for t in range(3, 6):  # the counted positions
            y = int(batch.targets[b, t])
            la.append(-np.log(sum(p[b, t, 3 * (y // 3) + j] for j in range(3))))
            lb.append(-np.log(sum(p[b, t, 3 * i + y % 3] for i in range(3))))
    np.testing.assert_allclose(got, [np.mean(la), np.mean(lb)], rtol=1e-12)


def test_field_losses_name_the_expected_shape():
    batch = D.TwoOffsetTask()(2, seed=0)
    with pytest.raises(Exception, match=r"expected \(B, T, 64\) for 8 fields"):
        D.field_losses(_FixedLogits(torch.zeros(2, 16, 10)), batch)


def _model(seed=0):
    return TinyTransformer(ModelConfig(n_layers=1, n_heads=4), seed=seed)


@pytest.mark.numerics
def test_gains_do_not_move_when_attention_does_not():
    """q -> a q with k -> k / a leaves attention, and so every gain and rise, where it was."""
    model, batch = _model(1), D.TwoOffsetTask()(64, seed=2)
    with torch.no_grad():  # give the heads distinct, non-trivial scores first
        model.W_q[0].mul_(4.0)
    before = D.keep_one_gains(model, batch), D.single_ablation_rises(model, batch)
    with torch.no_grad():
        model.W_q[0].mul_(3.0)
        model.W_k[0].div_(3.0)
    after = D.keep_one_gains(model, batch), D.single_ablation_rises(model, batch)
    # float32 forward passes: scores move by a few ulps of values of order 10
    for b, a in zip(before, after):
        np.testing.assert_allclose(a, b, atol=2e-5)


@pytest.mark.numerics
def test_permuting_the_heads_permutes_the_gains():
    model, batch = _model(2), D.TwoOffsetTask()(64, seed=3)
    with torch.no_grad():
        model.W_q[0].mul_(4.0)
    gains = D.keep_one_gains(model, batch)
    perm = torch.tensor([2, 0, 3, 1])
    with torch.no_grad():
        for W in (model.W_q, model.W_k, model.W_v, model.W_o):
            W[0].copy_(W[0][perm])
    np.testing.assert_allclose(D.keep_one_gains(model, batch), gains[perm.numpy()], atol=2e-5)


def test_carried_relations_table():
    cases = [
        (np.array([[2.0, 0.0], [0.0, 2.0], [0.0, 0.0]]), (0, 0, True)),   # one head per relation, one idle
        (np.array([[1.5, 1.5], [0.0, 2.0]]), (1, 0, False)),              # head 1 carries both
        (np.array([[2.0, 0.0], [2.0, 0.0]]), (0, 1, False)),              # nobody carries relation 2
        (np.array([[1.04, 0.0], [0.0, 1.04]]), (0, 0, True)),             # the threshold counts
    ]
    for gains, (n_both, uncarried, divided) in cases:
        r = D.carried_relations(gains, 1.04)
        assert (r["n_both"], r["uncarried"], r["divided"]) == (n_both, uncarried, divided), gains


def test_overlaps_ignore_a_basis_change_and_permute_with_the_heads():
    g = torch.Generator().manual_seed(4)
    W = [torch.randn(4, 32, 8, generator=g, dtype=torch.float64) for _ in range(3)]
    W_o = torch.randn(4, 8, 32, generator=g, dtype=torch.float64)
    base = C.model_head_overlaps(*W, W_o)
    R = torch.randn(8, 8, generator=g, dtype=torch.float64)  # a basis change inside every head
    moved = C.model_head_overlaps(*(w @ R for w in W), torch.linalg.inv(R) @ W_o)
    perm = [3, 1, 0, 2]
    permuted = C.model_head_overlaps(*(w[perm] for w in W), W_o[perm])
    for k in base:
        np.testing.assert_allclose(moved[k], base[k], atol=1e-10)
        np.testing.assert_allclose(permuted[k], base[k][np.ix_(perm, perm)], atol=1e-12)
    # against the definition: head 1 and head 2's query subspaces through numpy's SVD
    Q1, Q2 = (np.linalg.svd(W[0][i].numpy(), full_matrices=False)[0] for i in (0, 1))
    assert base["q"][0, 1] == pytest.approx((np.linalg.svd(Q1.T @ Q2, compute_uv=False) ** 2).mean(), abs=1e-12)
