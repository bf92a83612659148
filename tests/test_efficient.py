"""Tests for attention_course.core.efficient: exactness of the exact methods, the Performer
estimator's statistics (Lemma 2 of Choromanski et al. 2021), and error messages."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.core.attention import ShapeError, causal_mask, scaled_dot_product_attention
from attention_course.core.efficient import (
    chunked_attention,
    elu_feature_map,
    linear_attention,
    linear_attention_quadratic,
    linformer_attention,
    local_window_attention,
    nystrom_attention,
    online_softmax_step,
    performer_attention,
    positive_random_features,
    random_features,
    topk_attention,
)

F64 = dict(dtype=torch.float64)
EXACT = dict(rtol=0.0, atol=1e-12)


def qkv(T, S, d=8, d_v=5, batch=(), seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    q = scale * torch.randn(*batch, T, d, generator=g, **F64)
    k = scale * torch.randn(*batch, S, d, generator=g, **F64)
    v = torch.randn(*batch, S, d_v, generator=g, **F64)
    return q, k, v


# ---------------------------------------------------------------- chunked, exact
@settings(max_examples=60, deadline=None)
@given(
    T=st.integers(1, 13), S=st.integers(1, 13), block=st.integers(1, 16),
    qblock=st.one_of(st.none(), st.integers(1, 16)), seed=st.integers(0, 10_000),
)
def test_chunked_equals_exact_any_block_size(T, S, block, qblock, seed):
    q, k, v = qkv(T, S, batch=(2,), seed=seed, scale=2.0)
    out = chunked_attention(q, k, v, block_size=block, query_block_size=qblock)
    torch.testing.assert_close(out, scaled_dot_product_attention(q, k, v)[0], **EXACT)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), **EXACT)


@settings(max_examples=60, deadline=None)
@given(
    T=st.integers(1, 11), S=st.integers(1, 11), block=st.integers(1, 12),
    p_keep=st.sampled_from([0.0, 0.3, 0.7, 1.0]), seed=st.integers(0, 10_000),
)
def test_chunked_with_boolean_mask_matches_our_convention(T, S, block, p_keep, seed):
    q, k, v = qkv(T, S, batch=(2, 3), seed=seed)
    mask = torch.rand(2, 1, T, S, generator=torch.Generator().manual_seed(seed)) < p_keep
    out = chunked_attention(q, k, v, mask=mask, block_size=block)
    ref = scaled_dot_product_attention(q, k, v, mask=mask)[0]
    torch.testing.assert_close(out, ref, **EXACT)
    empty = ~mask.any(dim=-1)  # (2, 1, T): queries with no allowed key
    assert torch.all(out.masked_select(empty[..., None].expand_as(out)) == 0)  # exactly 0, not NaN


def test_chunked_mask_agrees_with_torch_sdpa_where_rows_are_not_empty():
    q, k, v = qkv(6, 9, batch=(2,), seed=3)
    mask = torch.rand(2, 6, 9, generator=torch.Generator().manual_seed(1)) < 0.5
    mask[..., 0] = True  # every query may attend to key 0, so torch gives no NaN
    torch.testing.assert_close(
        chunked_attention(q, k, v, mask=mask, block_size=4),
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask), **EXACT)


def test_chunked_float_mask_and_broadcast_key_padding():
    q, k, v = qkv(5, 7, batch=(2, 3), seed=4)
    fmask = torch.randn(5, 7, generator=torch.Generator().manual_seed(2), **F64)
    torch.testing.assert_close(
        chunked_attention(q, k, v, mask=fmask, block_size=2),
        F.scaled_dot_product_attention(q, k, v, attn_mask=fmask), **EXACT)
    pad = torch.tensor([True] * 4 + [False] * 3).reshape(1, 1, 1, 7)  # (B, h, 1, S)
    torch.testing.assert_close(
        chunked_attention(q, k, v, mask=pad, block_size=3),
        scaled_dot_product_attention(q, k, v, mask=pad)[0], **EXACT)


@pytest.mark.parametrize("T,S", [(7, 7), (4, 9), (9, 4)])
@pytest.mark.parametrize("block,qblock", [(1, None), (3, 2), (16, 5)])
def test_chunked_causal_matches_torch_is_causal(T, S, block, qblock):
    q, k, v = qkv(T, S, batch=(2,), seed=T * S)
    out = chunked_attention(q, k, v, causal=True, block_size=block, query_block_size=qblock)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True), **EXACT)
    torch.testing.assert_close(out, scaled_dot_product_attention(q, k, v, mask=causal_mask(T, S))[0], **EXACT)


def test_chunked_custom_scale_large_logits_and_gradients():
    q, k, v = qkv(6, 10, seed=5, scale=30.0)  # logits in the hundreds: the running max matters
    q.requires_grad_(True), k.requires_grad_(True), v.requires_grad_(True)
    out = chunked_attention(q, k, v, scale=0.3, block_size=3)
    ref = F.scaled_dot_product_attention(q, k, v, scale=0.3)
    torch.testing.assert_close(out, ref, **EXACT)
    g_out = torch.autograd.grad(out.sum(), (q, k, v))
    g_ref = torch.autograd.grad(ref.sum(), (q, k, v))
    for a, b in zip(g_out, g_ref):
        torch.testing.assert_close(a, b, rtol=0.0, atol=1e-10)


def test_chunked_accepts_numpy_and_returns_numpy():
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    out = chunked_attention(q, k, v, block_size=2, mask=causal_mask(3, 5))
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, scaled_dot_product_attention(q, k, v, mask=causal_mask(3, 5))[0],
                               rtol=0, atol=1e-12)


# --------------------------------------------------------------- local / top-k
@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 12), window=st.integers(0, 14), block=st.integers(1, 8),
       causal=st.booleans(), seed=st.integers(0, 1000))
def test_local_window_matches_band_mask(n, window, block, causal, seed):
    q, k, v = qkv(n, n, seed=seed)
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    band = (np.abs(i - j) <= window) & ((j <= i) if causal else True)
    out = local_window_attention(q, k, v, window=window, causal=causal, block_size=block)
    torch.testing.assert_close(out, scaled_dot_product_attention(q, k, v, mask=band)[0], **EXACT)


def test_local_window_at_least_n_is_exact():
    q, k, v = qkv(20, 20, batch=(2,), seed=6)
    for window in (20, 50):
        torch.testing.assert_close(local_window_attention(q, k, v, window=window, block_size=6),
                                   F.scaled_dot_product_attention(q, k, v), **EXACT)


def test_topk_matches_reference_and_is_exact_at_S():
    q, k, v = qkv(6, 9, seed=7)
    scores = (q @ k.T / math.sqrt(8)).numpy()
    keep = np.zeros_like(scores, dtype=bool)
    np.put_along_axis(keep, np.argsort(-scores, axis=-1)[:, :3], True, axis=-1)  # 3 best keys per row
    torch.testing.assert_close(topk_attention(q, k, v, top_k=3),
                               scaled_dot_product_attention(q, k, v, mask=keep)[0], **EXACT)
    torch.testing.assert_close(topk_attention(q, k, v, top_k=9), F.scaled_dot_product_attention(q, k, v), **EXACT)


# ------------------------------------------------------------- linear attention
def test_linear_attention_associative_equals_quadratic():
    q, k, v = qkv(7, 11, batch=(2,), seed=8)
    out, w = linear_attention_quadratic(q, k, v)
    torch.testing.assert_close(linear_attention(q, k, v), out, **EXACT)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 7, **F64), **EXACT)  # rows sum to 1
    sim = elu_feature_map(q) @ elu_feature_map(k).transpose(-2, -1)  # independent check of the weights
    torch.testing.assert_close(w, sim / sim.sum(-1, keepdim=True), **EXACT)


@pytest.mark.parametrize("T,S", [(9, 9), (5, 9), (9, 5), (1, 1)])
def test_causal_running_sum_equals_quadratic_masked_form(T, S):
    q, k, v = qkv(T, S, batch=(3,), seed=T + 10 * S)
    ref, _ = linear_attention_quadratic(q, k, v, mask=causal_mask(T, S))
    torch.testing.assert_close(linear_attention(q, k, v, causal=True), ref, **EXACT)


# ---------------------------------------------------------------- Performer
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
    assert err[1] < 0.05 and err[1] < err[0] / 4  # error ~ 1/sqrt(m): 16x the features, 1/4 the error


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
def test_block_size_below_one_is_rejected_with_shapes():
    q, k, v = qkv(5, 7, batch=(2,))
    with pytest.raises(ValueError, match=r"block_size=0 for q \(2, 5, 8\), k \(2, 7, 8\), v \(2, 7, 5\)"):
        chunked_attention(q, k, v, block_size=0)
    with pytest.raises(ValueError, match=r"query_block_size=-1 .* expected an integer >= 1"):
        chunked_attention(q, k, v, query_block_size=-1)
    with pytest.raises(ValueError, match=r"block_size=0"):
        local_window_attention(q, k, v, window=2, block_size=0)


def test_too_many_landmarks_features_or_keys_are_rejected():
    q, k, v = qkv(5, 7)
    with pytest.raises(ValueError, match=r"num_landmarks=6 for q \(5, 8\), k \(7, 8\).* <= 5"):
        nystrom_attention(q, k, v, num_landmarks=6)
    with pytest.raises(ValueError, match=r"proj_dim=8 for .*k \(7, 8\).* <= 7"):
        linformer_attention(q, k, v, proj_dim=8)
    with pytest.raises(ValueError, match=r"top_k=8 .* <= 7"):
        topk_attention(q, k, v, top_k=8)
    with pytest.raises(ValueError, match=r"num_features=0"):
        performer_attention(q, k, v, num_features=0)
    with pytest.raises(ValueError, match=r"window=-1"):
        local_window_attention(q, k, v, window=-1)


def test_mismatched_shapes_name_the_shapes():
    q, k, v = qkv(5, 7)
    with pytest.raises(ShapeError, match=r"k has shape \(7, 6\) but q has shape \(5, 8\)"):
        chunked_attention(q, k[:, :6], v)
    with pytest.raises(ShapeError, match=r"v has shape \(6, 5\) but k has shape \(7, 8\)"):
        linear_attention(q, k, v[:6])
    with pytest.raises(ShapeError, match=r"mask has shape \(5, 6\) which does not broadcast .*\(5, 7\)"):
        chunked_attention(q, k, v, mask=torch.ones(5, 6, dtype=torch.bool))
    with pytest.raises(ShapeError, match=r"E has shape \(3, 6\) but k has shape \(7, 8\); expected \(3, 7\)"):
        linformer_attention(q, k, v, proj_dim=3, E=torch.ones(3, 6, **F64))
    with pytest.raises(ShapeError, match=r"x has shape \(2, 3\) but W has shape \(4, 5\)"):
        positive_random_features(torch.ones(2, 3), torch.ones(4, 5))


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_online_softmax_steps_reproduce_attention(lib):
    q, k, v = qkv(5, 11, seed=14, scale=3.0)
    mask = torch.ones(5, 11, dtype=torch.bool)
    mask[2] = False  # one query with no key at all
    mask[3, :6] = False  # one whose first blocks are all masked
    scores = (q @ k.T / math.sqrt(8)).masked_fill(~mask, -math.inf)
    state = (torch.full((5,), -math.inf, **F64), torch.zeros(5, **F64), torch.zeros(5, 5, **F64))
    conv = (lambda t: t.numpy()) if lib == "numpy" else (lambda t: t)
    state = tuple(conv(t) for t in state)
    for s0 in range(0, 11, 4):
        state = online_softmax_step(*state, conv(scores[:, s0:s0 + 4]), conv(v[s0:s0 + 4]))
    m, l, acc = (torch.as_tensor(t) for t in state)
    out = acc / torch.where(l > 0, l, torch.ones_like(l))[:, None]
    torch.testing.assert_close(out, scaled_dot_product_attention(q, k, v, mask=mask)[0], **EXACT)
    assert m[2] == -math.inf and l[2] == 0 and torch.all(acc[2] == 0)
