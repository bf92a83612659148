"""heads.py: the low-rank bottleneck fit, head geometry against numpy/torch references, head roles."""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib.figure import Figure

from attention_course.lenses import heads as H
from attention_course.core import multihead as mh


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny problems: one thread is much faster on a busy machine
    yield
    torch.set_num_threads(threads)


def _softmax(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


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


# ------------------------------------------------------------ heads against the SVD
def test_form_singular_values_match_numpy_svd():
    rng = np.random.default_rng(0)
    W_q, W_k = rng.normal(size=(2, 24, 12))
    ref = np.linalg.svd(mh.head_bilinear_forms(W_q, W_k, 3), compute_uv=False)[:, :4]  # (3, 4)
    got = H.form_singular_values(W_q, W_k, 3)
    assert got.shape == (3, 4)
    np.testing.assert_allclose(got, ref, rtol=1e-10)
    got_t = H.form_singular_values(torch.as_tensor(W_q), torch.as_tensor(W_k), 3)
    np.testing.assert_allclose(got_t, ref, rtol=1e-10)


def test_form_singular_values_see_a_rank_deficient_head():
    rng = np.random.default_rng(1)
    W_q, W_k = rng.normal(size=(2, 16, 8))
    W_q[:, 5] = W_q[:, 4]  # head 1 (columns 4-7) now has rank 3
    s = H.form_singular_values(W_q, W_k, 2)
    assert (s > 1e-8 * s.max()).sum(1).tolist() == [4, 3]


def test_smallest_head_angles_match_multihead_principal_angles():
    W = np.random.default_rng(2).normal(size=(20, 12))
    ref = mh.head_subspace_angles(W, 4)[:, :, 0]  # (4, 4)
    got = H.smallest_head_angles(W, 4)
    off = ~np.eye(4, dtype=bool)
    np.testing.assert_allclose(got[off], ref[off], atol=1e-10)
    assert np.all(np.diag(got) == 0) and np.allclose(got, got.T)
    W_o = W.T  # rows as subspaces
    np.testing.assert_allclose(H.smallest_head_angles(W_o, 4, axis=0), got, atol=1e-10)


def test_orthogonal_heads_are_at_90_degrees():
    angles = np.degrees(H.smallest_head_angles(np.eye(8), 4))
    off = ~np.eye(4, dtype=bool)
    np.testing.assert_allclose(angles[off], 90.0, atol=1e-6)


def test_random_subspace_angles_follow_the_wachter_edge():
    """For random p-dim subspaces of R^n, cos^2 of the smallest angle -> 4 c (1 - c), c = p / n."""
    n, p = 2000, 100
    c = p / n
    edge = np.degrees(np.arccos(np.sqrt(4 * c * (1 - c))))  # 64.2 degrees
    med = np.degrees(np.median(H.random_subspace_angles(n, p, n_pairs=30, seed=0)))
    assert abs(med - edge) < 2.0
    assert np.allclose(H.random_subspace_angles(5, 3, n_pairs=4), 0, atol=1e-6)  # 3 + 3 > 5


def test_head_score_matrices_match_head_outputs_and_sdpa():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(6, 12))
    W_q, W_k, W_v = rng.normal(size=(3, 12, 12))
    b_q, b_k = rng.normal(size=(2, 12))
    S = H.head_score_matrices(x, W_q, W_k, 3, b_q, b_k)  # (3, 6, 6)
    _, w = mh.head_outputs(x[None], x[None], W_q, W_k, W_v, b_q, b_k, num_heads=3)
    np.testing.assert_allclose(_softmax(S), w[0], atol=1e-12)
    q = torch.as_tensor(x @ W_q + b_q).reshape(6, 3, 4).transpose(0, 1)
    k = torch.as_tensor(x @ W_k + b_k).reshape(6, 3, 4).transpose(0, 1)
    eye = torch.eye(6, dtype=torch.float64)
    ref = torch.stack([F.scaled_dot_product_attention(q[i], k[i], eye) for i in range(3)])
    np.testing.assert_allclose(_softmax(S), ref.numpy(), atol=1e-12)
    with pytest.raises(ValueError, match=r"x has shape \(6, 12\), W_q \(12, 12\), W_k \(12, 8\)"):
        H.head_score_matrices(x, W_q, W_k[:, :8], 3)


@settings(max_examples=25, deadline=None)
@given(h=st.integers(1, 4), T=st.integers(1, 6), seed=st.integers(0, 10_000))
def test_summed_scores_give_the_normalised_product(h, T, seed):
    s = np.random.default_rng(seed).normal(size=(h, T, T)) * 3
    c = H.combine_head_patterns(s)
    np.testing.assert_allclose(c["normalised_product"], c["softmax_of_sum"], atol=1e-12)
    for m in c.values():
        assert np.allclose(m.sum(-1), 1)
    if h == 1:
        np.testing.assert_allclose(c["mean_of_softmaxes"], c["softmax_of_sum"], atol=1e-12)


def test_mean_of_softmaxes_differs_from_softmax_of_sum():
    s = np.random.default_rng(4).normal(size=(4, 8, 8)) * 2
    c = H.combine_head_patterns(s)
    assert H.total_variation(c["softmax_of_sum"], c["mean_of_softmaxes"]) > 0.1
    with pytest.raises(ValueError, match=r"scores have shape \(8, 8\)"):
        H.combine_head_patterns(s[0])


def test_total_variation_closed_forms():
    P = np.array([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]])
    Q = np.array([[0.0, 0.5, 0.5], [1.0, 0.0, 0.0]])
    assert H.total_variation(P, Q) == 0.25  # (0.5 + 0) / 2
    with pytest.raises(ValueError, match=r"P has shape \(2, 3\) and Q \(3,\)"):
        H.total_variation(P, Q[0])


@pytest.mark.parametrize("d_model,h,bias", [(384, 12, True), (64, 8, False), (30, 5, True), (16, 1, True)])
def test_parameter_count_matches_torch(d_model, h, bias):
    ref = sum(p.numel() for p in torch.nn.MultiheadAttention(d_model, h, bias=bias).parameters())
    ours = sum(p.numel() for p in mh.MultiHeadAttention(d_model, h, bias=bias).parameters())
    assert H.mha_parameter_count(d_model, h, bias) == ref == ours


def test_parameter_count_rejects_indivisible_width():
    with pytest.raises(ValueError, match="d_model=10 is not divisible by num_heads=4"):
        H.mha_parameter_count(10, 4)


# ------------------------------------------------------------ head roles
TOKS = ["[CLS]", "the", "cat", ",", "sat", ".", "[SEP]"]


def _maps(n, *patterns):
    return np.stack([np.stack(patterns)])  # (1, H, n, n)


def test_role_scores_on_hand_made_heads():
    n = len(TOKS)
    prev, nxt = np.eye(n, k=-1), np.eye(n, k=1)
    prev[0, 0] = nxt[-1, -1] = 1.0
    cls = np.zeros((n, n))
    cls[:, 0] = 1.0
    uniform = np.full((n, n), 1 / n)
    s = H.head_role_scores(_maps(n, prev, nxt, cls, uniform), TOKS)
    assert s["previous token"][0].tolist() == [1.0, 0.0, 0.2, 1 / n]  # word 1 of cls reads i - 1 = [CLS]
    assert s["next token"][0, 1] == 1.0 and s["[CLS]"][0, 2] == 1.0
    np.testing.assert_allclose(s["broad"][0], [0, 0, 0, 1], atol=1e-12)
    # words 1..5 of prev read [CLS], the, cat, ',', sat: one of five is punctuation
    assert abs(s["punctuation"][0, 0] - 1 / 5) < 1e-12
    assert H.top_heads(s)["[CLS]"] == (0, 2, 1.0)


def test_uniform_attention_scores_its_baselines_over_several_texts():
    texts = [TOKS, ["[CLS]", "a", "!", "b", "c", "d", "e", "?", "[SEP]"], ["[CLS]", "x", "[SEP]"]]
    maps = [np.full((2, 3, len(t), len(t)), 1 / len(t)) for t in texts]
    s = H.head_role_scores(maps, texts)
    base = H.uniform_role_baselines(texts)
    for role in H.ROLES:
        assert s[role].shape == (2, 3)
        np.testing.assert_allclose(s[role], base[role], atol=1e-12)


def test_role_scores_errors():
    with pytest.raises(ValueError, match=r"maps have shape \(1, 1, 6, 6\) for 7 tokens"):
        H.head_role_scores(np.ones((1, 1, 6, 6)) / 6, TOKS)
    with pytest.raises(ValueError, match="start with \\[CLS\\] and end with \\[SEP\\]"):
        H.head_role_scores(np.ones((1, 1, 3, 3)) / 3, ["a", "b", "c"])


# ------------------------------------------------------------ figures (smoke tests on Agg)
def test_plots_render_and_return_figures():
    assert matplotlib.get_backend().lower() == "agg"
    figs = [
        H.plot_bottleneck([1, 2, 4], {"dense": [0.3, 0.2, 0.0], "perm": [1.0, 0.1, 0.01]}, title="t"),
        H.plot_form_spectra(np.linspace(3, 1, 16), np.ones((4, 4)), title="t"),
        H.plot_head_gallery({"a": (np.eye(3), ["x", "y", "z"]), "b": (np.eye(3), None)}, ncols=3),
        H.plot_role_scores({r: np.zeros((2, 3)) for r in H.ROLES}),
    ]
    for fig in figs:
        assert isinstance(fig, Figure)
    assert figs[0].axes[0].get_yscale() == "log"
    assert figs[2].axes[0].get_xlabel() == "key (attended to)"
    assert len(figs[3].axes) == len(H.ROLES) + 1  # one heatmap per role + a shared colour bar
    for fig in figs:
        matplotlib.pyplot.close(fig)
