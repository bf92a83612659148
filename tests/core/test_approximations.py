"""Tests for attention_course.core.approximations: the Performer estimator's statistics
(Lemma 2 of Choromanski et al. 2021), the exact limits of Nystrom and Linformer, seeding and
error messages."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attention_course.core.approximations import (
    linformer_attention,
    nystrom_attention,
    performer_attention,
    random_features,
)
from attention_course.core.attention import ShapeError

F64 = dict(dtype=torch.float64)
EXACT = dict(rtol=0.0, atol=1e-12)  # float64 round-off of a few sums of O(1) terms


def qkv(T, S, d=8, d_v=5, batch=(), seed=0, scale=1.0):
    """Seeded float64 q (..., T, d), k (..., S, d), v (..., S, d_v); q and k multiplied by ``scale``."""
    g = torch.Generator().manual_seed(seed)
    q, k = (scale * torch.randn(*batch, n, d, generator=g, **F64) for n in (T, S))
    return q, k, torch.randn(*batch, S, d_v, generator=g, **F64)


# ---------------------------------------------------------------- Performer
def positive_random_features(x, W):
    r"""FAVOR+'s positive random features :math:`\phi(x) = \frac{1}{\sqrt m}\exp(Wx - \|x\|^2/2)`, as
    ``performer_attention`` computes them (without its stabilising constants); ``W`` is (m, d)."""
    return torch.exp(x @ W.to(x.dtype).T - (x**2).sum(dim=-1, keepdim=True) / 2) / math.sqrt(W.shape[0])


def _lognormal_moments(x, y):
    """Raw moments E[Z^j], j = 1..4, of one feature's product Z = exp(w.(x+y) - (|x|^2+|y|^2)/2)."""
    c = math.exp(-(x @ x + y @ y) / 2)
    s2 = float((x + y) @ (x + y))  # w.(x+y) ~ N(0, |x+y|^2): Z is log-normal
    return [c**j * math.exp(j * j * s2 / 2) for j in range(1, 5)]


@pytest.mark.parametrize("x_scale", [0.3, 0.6])
def test_performer_estimator_unbiased_with_lemma2_variance(x_scale):
    """Monte Carlo over M iid features grouped into R estimators of m features each.

    Z = m phi_r(x) phi_r(y) is log-normal, so all its moments are known in closed form.
    The mean of N = R m draws has standard error sqrt(Var Z / N); the sample variance
    of the R group means (each with Var = Lemma 2's formula) has standard error
    sqrt((mu_4 - sigma^4) / R) up to O(1/R) terms, with mu_4 the group means' fourth
    central moment. We allow 5 standard errors: a false alarm has probability < 1e-6
    for a Gaussian, and the seed is fixed, so the test is deterministic.
    """
    d, m, R = 4, 8, 25_000
    x = x_scale * torch.tensor([1.0, -0.5, 0.25, 0.8], **F64)
    y = x_scale * torch.tensor([0.6, 0.9, -0.3, 0.1], **F64)
    W = random_features(m * R, d, orthogonal=False, seed=123)  # (m R, d) iid N(0, I)
    Z = (m * R) * positive_random_features(x[None], W)[0] * positive_random_features(y[None], W)[0]
    sm = math.exp(float(x @ y))
    m1, m2, m3, m4 = _lognormal_moments(x, y)
    var_z = m2 - m1**2
    assert abs(m1 - sm) < 1e-12 * sm  # closed form: E[Z] = SM(x, y)
    # unbiased: the mean of all draws
    assert abs(float(Z.mean()) - sm) < 5 * math.sqrt(var_z / Z.numel())
    # Lemma 2: Var of the m-feature estimator = exp(|x+y|^2) SM^2 (1 - exp(-|x+y|^2)) / m
    s2 = float((x + y) @ (x + y))
    lemma2 = math.exp(s2) * sm**2 * (1 - math.exp(-s2)) / m
    assert lemma2 == pytest.approx(var_z / m, rel=1e-12)
    est = Z.reshape(R, m).mean(dim=1)  # (R,) estimates, m features each
    # fourth central moment of a mean of m iid copies: (mu4_Z + 3 (m-1) var_z^2) / m^3
    mu4_z = m4 - 4 * m3 * m1 + 6 * m2 * m1**2 - 3 * m1**4
    mu4 = (mu4_z + 3 * (m - 1) * var_z**2) / m**3
    se_var = math.sqrt((mu4 - lemma2**2) / R)
    assert abs(float(est.var()) - lemma2) < 5 * se_var
    # and the log of one feature's product is exactly N(log c, |x+y|^2): a KS test at alpha = 0.001
    logz = np.sort(np.log(Z.numpy()))
    mu = -float(x @ x + y @ y) / 2
    cdf = 0.5 * (1 + np.array([math.erf((t - mu) / math.sqrt(2 * s2)) for t in logz[::10]]))
    n_ks = cdf.size
    emp = np.arange(1, n_ks + 1) / n_ks
    assert np.max(np.abs(emp - cdf)) < 1.95 / math.sqrt(n_ks)


def test_orthogonal_features_reduce_the_variance():
    """Orthogonal features (Theorem 2 of the paper) stay unbiased and beat Lemma 2's iid variance.

    R independent blocks of m = d orthogonal features give R estimates. The margin is
    5 standard errors of the sample variance, estimated from the sample's fourth
    central moment (at this setting, the variance ratio is about 0.8 +- 0.01).
    """
    d, R = 16, 10_000
    g = torch.Generator().manual_seed(0)
    x, y = 0.2 * torch.randn(d, generator=g, **F64), 0.2 * torch.randn(d, generator=g, **F64)
    W = random_features(d * R, d, orthogonal=True, seed=0)  # R blocks of d orthogonal rows
    prod = positive_random_features(x[None], W)[0] * positive_random_features(y[None], W)[0]
    est = R * prod.reshape(R, d).sum(dim=1)  # (R,) estimates with m = d features each
    sm, s2 = math.exp(float(x @ y)), float((x + y) @ (x + y))
    lemma2 = math.exp(s2) * sm**2 * (1 - math.exp(-s2)) / d  # the iid variance
    c = est - est.mean()
    se_var = math.sqrt(float((c**4).mean() - (c**2).mean() ** 2) / R)
    assert abs(float(est.mean()) - sm) < 5 * math.sqrt(lemma2 / R)  # still unbiased
    assert float(est.var()) + 5 * se_var < lemma2


def test_performer_stabilisers_cancel_exactly():
    q, k, v = qkv(6, 9, d=4, seed=9, scale=0.7)
    W = random_features(32, 4, orthogonal=True, seed=5)
    root = 4 ** -0.25  # sqrt(1 / sqrt(d))
    phi_q, phi_k = positive_random_features(q * root, W), positive_random_features(k * root, W)
    sim = phi_q @ phi_k.T  # (T, S) unbiased estimate of exp(q.k / sqrt(d))
    ref = (sim / sim.sum(-1, keepdim=True)) @ v
    torch.testing.assert_close(performer_attention(q, k, v, num_features=32, seed=5), ref, **EXACT)


def test_performer_converges_to_softmax_attention():
    q, k, v = qkv(16, 16, d=4, seed=10, scale=0.5)
    exact = F.scaled_dot_product_attention(q, k, v)
    err = [float((performer_attention(q, k, v, num_features=m, seed=1) - exact).norm() / exact.norm())
           for m in (16, 4096)]
    # error ~ 1/sqrt(m): 256x the features predict 1/16 the error; one seed and one input
    # measure about 1/8 (0.174 -> 0.021), so we ask for 1/4 and below 0.05: a margin of 2
    assert err[1] < 0.05 and err[1] < err[0] / 4


def test_random_features_rows_are_standard_normal():
    W = random_features(4000, 5, orthogonal=True, seed=1)
    np.testing.assert_allclose(W.T @ W / 4000, np.eye(5), atol=0.1)  # E[w w^T] = I
    assert torch.allclose(W[:5] @ W[:5].T, torch.diag((W[:5] ** 2).sum(1)), atol=1e-12)
    assert not torch.equal(random_features(8, 5, seed=1), random_features(8, 5, seed=2))
    assert torch.equal(random_features(8, 5, seed=1), random_features(8, 5, seed=1))


# ------------------------------------------------------ Nystrom and Linformer
@pytest.mark.parametrize("n", [1, 8, 32])
def test_nystrom_with_every_token_as_landmark_is_exact(n):
    q, k, v = qkv(n, n, batch=(2,), seed=n)
    torch.testing.assert_close(nystrom_attention(q, k, v, num_landmarks=n),
                               F.scaled_dot_product_attention(q, k, v), rtol=0.0, atol=1e-10)


def test_nystrom_uneven_segments_and_error_falls_with_landmarks():
    q, k, v = qkv(30, 30, seed=11, scale=0.5)
    exact = F.scaled_dot_product_attention(q, k, v)
    errs = [float((nystrom_attention(q, k, v, m) - exact).norm() / exact.norm()) for m in (7, 30)]
    assert errs[1] < 1e-10 < errs[0]


def test_linformer_with_identity_projection_is_exact():
    q, k, v = qkv(6, 9, seed=12)
    eye = torch.eye(9, **F64)
    torch.testing.assert_close(linformer_attention(q, k, v, proj_dim=9, E=eye),
                               F.scaled_dot_product_attention(q, k, v), **EXACT)
    proj = linformer_attention(q, k, v, proj_dim=3, seed=0, projection="mean")
    means = (torch.stack([k[0:3].mean(0), k[3:6].mean(0), k[6:9].mean(0)]),
             torch.stack([v[0:3].mean(0), v[3:6].mean(0), v[6:9].mean(0)]))
    torch.testing.assert_close(proj, F.scaled_dot_product_attention(q, *means), **EXACT)


def test_linformer_is_seeded():
    q, k, v = qkv(5, 16, seed=13)
    a, b = (linformer_attention(q, k, v, proj_dim=4, seed=s) for s in (0, 0))
    assert torch.equal(a, b)
    assert not torch.equal(a, linformer_attention(q, k, v, proj_dim=4, seed=1))


# ---------------------------------------------------------------- bad input
def test_too_many_landmarks_features_or_projections_are_rejected():
    q, k, v = qkv(5, 7)
    with pytest.raises(ValueError, match=r"num_landmarks=6 for q \(5, 8\), k \(7, 8\).* <= 5"):
        nystrom_attention(q, k, v, num_landmarks=6)
    with pytest.raises(ValueError, match=r"proj_dim=8 for .*k \(7, 8\).* <= 7"):
        linformer_attention(q, k, v, proj_dim=8)
    with pytest.raises(ValueError, match=r"num_features=0"):
        performer_attention(q, k, v, num_features=0)
    with pytest.raises(ValueError, match=r"projection='svd'; expected 'gaussian' or 'mean'"):
        linformer_attention(q, k, v, proj_dim=3, projection="svd")


def test_mismatched_projections_and_features_name_the_shapes():
    q, k, v = qkv(5, 7)
    with pytest.raises(ShapeError, match=r"E has shape \(3, 6\) but k has shape \(7, 8\); expected \(3, 7\)"):
        linformer_attention(q, k, v, proj_dim=3, E=torch.ones(3, 6, **F64))
