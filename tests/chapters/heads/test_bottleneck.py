"""chapters/heads/bottleneck.py: the best single head of rank r for a target pattern, against closed forms."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attention_course.chapters.heads import bottleneck as H


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _softmax(s):
    return torch.softmax(torch.as_tensor(s, dtype=torch.float64), -1).numpy()  # torch's, as the reference


# ------------------------------------------------------------ targets and KL
def test_targets_are_row_stochastic():
    P = H.dirichlet_attention(16, seed=3)
    assert P.shape == (16, 16) and (P > 0).all() and np.allclose(P.sum(1), 1)
    Q = H.near_permutation(16, mass=0.9, seed=3)
    assert np.allclose(Q.sum(1), 1)
    assert sorted(Q.argmax(1).tolist()) == list(range(16))  # the heavy keys form a permutation
    assert np.allclose(Q.max(1), 0.9)


def test_near_permutation_rejects_bad_mass():
    with pytest.raises(ValueError, match="0 < mass < 1"):
        H.near_permutation(8, mass=1.0)


def test_row_kl_matches_torch_kl_div():
    rng = np.random.default_rng(0)
    P = rng.dirichlet(np.ones(7), size=5)
    L = rng.normal(size=(5, 7))
    ref = F.kl_div(torch.log_softmax(torch.as_tensor(L), -1), torch.as_tensor(P), reduction="batchmean")
    assert abs(H.row_kl(P, L) - ref.item()) < 1e-14


def test_row_kl_zero_entries_and_gradient():
    P = torch.tensor([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0]], dtype=torch.float64)
    L = torch.zeros(2, 3, dtype=torch.float64, requires_grad=True)
    kl = H.row_kl(P, L)
    assert torch.isfinite(kl) and abs(kl.item() - (np.log(3) + np.log(1.5)) / 2) < 1e-14
    kl.backward()
    assert torch.isfinite(L.grad).all()
    with pytest.raises(ValueError, match=r"P has shape \(2, 3\) and logits \(3, 2\)"):
        H.row_kl(P, torch.zeros(3, 2))


# ------------------------------------------------------------ the bottleneck fit
def test_rank_r_target_is_recovered_and_lower_rank_is_not():
    g = torch.Generator().manual_seed(0)
    q0, k0 = torch.randn(2, 10, 2, generator=g, dtype=torch.float64)
    P = torch.softmax(q0 @ k0.T, -1).numpy()  # a pattern that a rank-2 head produces
    assert H.fit_low_rank_attention(P, 2).kl < 1e-9
    assert H.fit_low_rank_attention(P, 1).kl > 1e-3


def test_exact_at_S_minus_1_and_uniform_at_0():
    P = H.dirichlet_attention(8, seed=1)
    assert H.fit_low_rank_attention(P, 7).kl < 1e-10  # row-centred log P has rank <= S - 1
    fit0 = H.fit_low_rank_attention(P, 0)
    assert abs(fit0.kl - (P * np.log(P * 8)).sum(1).mean()) < 1e-12  # KL to the uniform rows
    assert np.allclose(fit0.weights, 1 / 8)


def test_fit_is_no_worse_than_the_truncated_svd_start():
    P = H.dirichlet_attention(12, seed=2)
    C = np.log(P) - np.log(P).mean(1, keepdims=True)
    U, s, Vh = np.linalg.svd(C)
    for r in (1, 3, 6):
        start = H.row_kl(P, (U[:, :r] * s[:r]) @ Vh[:r])
        fit = H.fit_low_rank_attention(P, r)
        assert fit.kl <= start + 1e-12
        assert fit.q.shape == (12, r) and fit.k.shape == (12, r)
        assert np.allclose(fit.weights, _softmax(fit.q @ fit.k.T))
        assert abs(H.row_kl(P, fit.q @ fit.k.T) - fit.kl) < 1e-12


def test_fixed_input_head_reaches_the_same_pattern():
    """softmax(X W_Q W_K^T X^T) with X of full row rank: W_Q = X^+ Q reproduces the fit."""
    n, d, r = 8, 20, 2
    P = H.dirichlet_attention(n, seed=4)
    fit = H.fit_low_rank_attention(P, r)
    X = np.random.default_rng(5).normal(size=(n, d))
    W_q, W_k = np.linalg.pinv(X) @ fit.q, np.linalg.pinv(X) @ fit.k  # (d, r) each
    assert np.allclose(_softmax(X @ W_q @ W_k.T @ X.T), fit.weights, atol=1e-10)


def test_fit_is_deterministic_and_rectangular():
    P = H.dirichlet_attention(9, seed=6)[:5]  # T=5 queries, S=9 keys
    a, b = H.fit_low_rank_attention(P, 2, seed=1), H.fit_low_rank_attention(P, 2, seed=1)
    assert a.kl == b.kl and a.weights.shape == (5, 9)


def test_fit_errors():
    P = H.dirichlet_attention(4)
    with pytest.raises(ValueError, match=r"r=5 with P of shape \(4, 4\)"):
        H.fit_low_rank_attention(P, 5)
    with pytest.raises(ValueError, match="positive entries whose rows sum to 1"):
        H.fit_low_rank_attention(np.eye(4), 2)
    with pytest.raises(ValueError, match="rows sum to 1"):
        H.fit_low_rank_attention(P * 2, 2)
