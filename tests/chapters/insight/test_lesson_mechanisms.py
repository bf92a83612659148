"""What the lesson of chapter 7 says trained models do, checked on models trained here.

The lesson explains three results of its take-away table by what the trained weights do:
tied W_Q = W_K still recalls because a question's weight goes to the stored pair (whose vector is
longer than the question's own), not to itself; the fixed metric W_Q = W_K = I is a coin flip on
partner recall because a key and its partner get the same embedding, so a question weighs both
stored positions alike; and linear attention holds 16 pairs at width 64 because its learned key
features are nearly orthogonal, unlike random +-1 patterns. Each test trains one small model with the
settings of the runs the lesson draws (seed 0) and asserts the mechanism with a margin.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_course.chapters.insight.ablations import RecallTask, train_variant
from attention_course.chapters.insight.mixers import Variant

N = 16  # pairs, as in the lesson
pytestmark = [pytest.mark.extended, pytest.mark.numerics]  # about 40 s: outside make test's 4-minute budget


def _embedded(model, inputs: torch.Tensor) -> torch.Tensor:
    """x_t = E_K[key] + E_V[value] + P[t], (B, T, d)."""
    return model.E_K[inputs[..., 0]] + model.E_V[inputs[..., 1]] + model.P[:inputs.shape[1]]


def _slot(keys: torch.Tensor, wanted: torch.Tensor) -> torch.Tensor:
    """Index of ``wanted`` (B,) among the stored ``keys`` (B, N): (B,)."""
    return (keys == wanted[:, None]).float().argmax(dim=1)


def test_tied_recall_puts_the_questions_weight_on_the_longer_stored_pair():
    torch.set_num_threads(1)
    task = RecallTask("stacked_mqar", {"n_pairs": N})
    model, _ = train_variant(Variant(tied=True), task, steps=300, lr=3e-3, seed=0)  # the ablation grid's lr
    x = task(256, seed=12345).inputs  # (B, 2N, 2)
    rows = torch.arange(len(x))
    with torch.no_grad():
        _, (A,) = model(x)  # (B, 2N, 2N), rows over keys
        q = _embedded(model, x) @ model.W_q  # (B, 2N, d); tied: k = q
    on_stored, on_itself, q_len, s_len, beats = [], [], [], [], []
    for t in range(N, 2 * N):
        j = _slot(x[:, :N, 0], x[:, t, 0])  # (B,): where the question's key was stored
        on_stored.append(A[rows, t, j])
        on_itself.append(A[:, t, t])
        q_len.append(q[:, t].norm(dim=-1))
        s_len.append(q[rows, j].norm(dim=-1))
        beats.append((q[:, t] * q[rows, j]).sum(-1) > (q[:, t] * q[:, t]).sum(-1))
    assert float(torch.stack(on_stored).mean()) > 0.9  # "nearly all of the question's weight"; 0.99 measured
    assert float(torch.stack(on_itself).mean()) < 0.05  # not to its own blank; 0.004 measured
    assert float(torch.stack(s_len).mean()) > 1.3 * float(torch.stack(q_len).mean())  # 23 against 12 measured
    assert float(torch.stack(beats).float().mean()) > 0.9  # q_t . q_s > q_t . q_t


def test_the_identity_metric_on_partner_recall_is_a_coin_flip_between_key_and_partner():
    torch.set_num_threads(1)
    task = RecallTask("partner_mqar", {"n_pairs": N})
    variant = Variant(identity=True, learn_scale=True)  # the lesson's "W_Q = W_K = I, scale learned"
    model, _ = train_variant(variant, task, steps=800, lr=3e-3, seed=0)  # the stored runs pass 0.49 by step 700
    batch = task(256, seed=12345)
    x = batch.inputs
    rows = torch.arange(len(x))
    with torch.no_grad():
        logits, (A,) = model(x)
    keys, values, answer = x[:, :N, 0], x[:, :N, 1], logits.argmax(dim=-1)
    own_w, mate_w, own_hit, mate_hit = [], [], [], []
    for t in range(N, 2 * N):
        j_own, j_mate = _slot(keys, x[:, t, 0]), _slot(keys, x[:, t, 0] ^ 1)
        own_w.append(A[rows, t, j_own])
        mate_w.append(A[rows, t, j_mate])
        own_hit.append(answer[:, t] == values[rows, j_own])
        mate_hit.append(answer[:, t] == values[rows, j_mate])
    own_w, mate_w = float(torch.stack(own_w).mean()), float(torch.stack(mate_w).mean())
    assert abs(own_w - mate_w) < 0.2 * mate_w  # "weighs both stored positions alike"; 0.201 and 0.201 measured
    for hits in (own_hit, mate_hit):  # "answers with either value": about half each (0.51 measured)
        assert 0.4 < float(torch.stack(hits).float().mean()) < 0.6
    E = model.E_K.detach()
    cosine = torch.nn.functional.cosine_similarity(E[0::2], E[1::2]).mean()  # key 2i against its partner 2i + 1
    assert float(cosine) > 0.9  # "the same embedding"; 1.000 measured


def test_linear_attention_learns_nearly_orthogonal_key_features_unlike_random_signs():
    torch.set_num_threads(1)
    task = RecallTask("stacked_mqar", {"n_pairs": N})
    model, _ = train_variant(Variant(mixer="linear"), task, steps=300, lr=1e-2, seed=0)  # the ablation grid's lr
    x = task(256, seed=12345).inputs
    with torch.no_grad():
        k = _embedded(model, x[:, :N]) @ model.W_k  # (B, N, d): the stored keys
        phi = torch.nn.functional.elu(k) + 1  # (B, N, d): linear attention's positive features
        phi = phi / phi.norm(dim=-1, keepdim=True)
        cos = phi @ phi.transpose(1, 2)  # (B, N, N)
    learned = float(cos[:, ~torch.eye(N, dtype=torch.bool)].mean())
    signs = np.random.default_rng(0).choice([-1.0, 1.0], size=(10_000, 2, 16))  # pairs of random +-1 patterns, d = 16
    random_overlap = float(np.abs((signs[:, 0] * signs[:, 1]).mean(axis=1)).mean())  # about 0.2
    assert learned < 0.1 < random_overlap  # 0.05 measured against 0.20
