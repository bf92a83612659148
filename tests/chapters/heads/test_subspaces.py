"""chapters/heads/subspaces.py: heads' blocks, bilinear forms and subspaces against numpy/torch references."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.core import multihead as mh
from attention_course.core._backend import ShapeError
from attention_course.chapters.heads import subspaces as H

F64 = dict(dtype=torch.float64)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _softmax(s):
    return torch.softmax(torch.as_tensor(s, dtype=torch.float64), -1).numpy()  # torch's, as the reference


# ------------------------------------------------------------ forms and reparametrisation
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_head_unchanged_under_W_q_R_and_W_k_R_inverse_transpose(seed):
    B, T, S, D, h = 3, 5, 7, 12, 3
    g = torch.Generator().manual_seed(seed)
    x_q, x_kv = torch.randn(B, T, D, generator=g, **F64), torch.randn(B, S, D, generator=g, **F64)
    W_q, W_k, Wv = torch.randn(3, D, D, generator=g, **F64) / D**0.5
    b_q, b_k, bv = torch.randn(3, D, generator=g, **F64)  # non-zero biases, so they are tested too
    rng = np.random.default_rng(seed)
    d_k = D // h
    R = torch.from_numpy(rng.normal(size=(d_k, d_k)) + 2 * np.eye(d_k))  # a random invertible matrix
    assert abs(torch.linalg.det(R)) > 1e-3
    W_q2, W_k2, b_q2, b_k2 = H.reparametrise_head(W_q, W_k, R, head=1, num_heads=h, b_q=b_q, b_k=b_k)
    assert (W_q2 - W_q).abs().max() > 0.1  # the parameters really changed...
    _, w = mh.head_outputs(x_q, x_kv, W_q, W_k, Wv, b_q, b_k, bv, num_heads=h)
    _, w2 = mh.head_outputs(x_q, x_kv, W_q2, W_k2, Wv, b_q2, b_k2, bv, num_heads=h)
    torch.testing.assert_close(w2, w, atol=1e-10, rtol=1e-10)  # ...but every head's weights did not
    forms, forms2 = H.head_bilinear_forms(W_q, W_k, h), H.head_bilinear_forms(W_q2, W_k2, h)
    torch.testing.assert_close(forms2, forms, atol=1e-10, rtol=1e-10)
    # scores of head 1 directly: (x W_q^1 + b_q^1)(x W_k^1 + b_k^1)^T
    cols = slice(d_k, 2 * d_k)

    def scores(Wq, Wk, bq, bk):
        return (x_q @ Wq[:, cols] + bq[cols]) @ (x_kv @ Wk[:, cols] + bk[cols]).transpose(1, 2)

    torch.testing.assert_close(scores(W_q2, W_k2, b_q2, b_k2), scores(W_q, W_k, b_q, b_k), atol=1e-10, rtol=1e-10)


def test_bilinear_forms_match_a_loop_and_have_rank_d_k():
    rng = np.random.default_rng(0)
    W_q, W_k = rng.normal(size=(12, 12)), rng.normal(size=(12, 12))
    M = H.head_bilinear_forms(W_q, W_k, 3)
    for i in range(3):
        c = slice(4 * i, 4 * i + 4)
        np.testing.assert_allclose(M[i], W_q[:, c] @ W_k[:, c].T, atol=1e-14)
    assert [np.linalg.matrix_rank(m) for m in M] == [4, 4, 4]  # rank d/h, not 1 and not d
    W_k[:, :2] = 0  # head 0 keeps only 2 key directions
    assert [np.linalg.matrix_rank(m) for m in H.head_bilinear_forms(W_q, W_k, 3)] == [2, 4, 4]
    assert H.split_head_weights(W_q, 3).shape == (3, 12, 4)
    np.testing.assert_array_equal(H.split_head_weights(W_q, 3)[1], W_q[:, 4:8])
    t = torch.as_tensor(W_q)
    assert torch.equal(H.split_head_weights(t, 3)[2], t[:, 8:])
    assert torch.equal(H.split_head_weights(t.T, 3, axis=0)[2], t.T[8:])


def test_reparametrise_head_rejects_a_bad_R_or_head():
    W = torch.randn(12, 12, **F64)
    with pytest.raises(ValueError, match=r"R has shape \(3, 3\) and head=0; expected \(4, 4\)"):
        H.reparametrise_head(W, W, torch.eye(3, **F64), head=0, num_heads=3)
    with pytest.raises(ValueError, match=r"head=3; expected \(4, 4\) and 0 <= head < 3"):
        H.reparametrise_head(W, W, torch.eye(4, **F64), head=3, num_heads=3)


def test_form_singular_values_match_numpy_svd():
    rng = np.random.default_rng(0)
    W_q, W_k = rng.normal(size=(2, 24, 12))
    ref = np.linalg.svd(H.head_bilinear_forms(W_q, W_k, 3), compute_uv=False)[:, :4]  # (3, 4)
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


# ------------------------------------------------------------ subspaces and principal angles
def test_principal_angles_closed_forms():
    t = 0.3
    A = np.eye(4)[:, :2]  # span(e1, e2)
    B = np.stack([np.eye(4)[0], math.cos(t) * np.eye(4)[1] + math.sin(t) * np.eye(4)[2]], axis=1)
    np.testing.assert_allclose(H.principal_angles(A, B), [0.0, t], atol=1e-15)
    np.testing.assert_allclose(H.principal_angles(A, np.eye(4)[:, 2:]), [math.pi / 2] * 2, atol=1e-15)
    Q = np.linalg.qr(np.random.default_rng(1).normal(size=(6, 6)))[0]
    np.testing.assert_allclose(H.principal_angles(A, A @ Q[:2, :2]), [0.0, 0.0], atol=1e-15)  # same span
    # a tiny angle is resolved (the sine branch), not lost to arccos rounding
    tiny = 1e-9
    C = np.stack([np.eye(4)[0], math.cos(tiny) * np.eye(4)[1] + math.sin(tiny) * np.eye(4)[2]], axis=1)
    np.testing.assert_allclose(H.principal_angles(A, C), [0.0, tiny], rtol=1e-6, atol=1e-20)
    # different dimensions: a line inside a plane
    np.testing.assert_allclose(H.principal_angles(A, np.eye(4)[:, [1]]), [0.0], atol=1e-15)


def test_principal_angles_against_cosines_from_svd():
    rng = np.random.default_rng(2)
    A, B = rng.normal(size=(10, 3)), rng.normal(size=(10, 4))
    QA, QB = np.linalg.qr(A)[0], np.linalg.qr(B)[0]  # independent route: QR bases
    cos = np.sort(np.linalg.svd(QA.T @ QB, compute_uv=False))[::-1]
    np.testing.assert_allclose(H.principal_angles(A, B), np.arccos(cos), atol=1e-12)


def test_head_subspace_angles_structure():
    rng = np.random.default_rng(3)
    W = rng.normal(size=(16, 8))
    W[8:, 0:2] = 0  # head 0 reads only input dimensions 0-7...
    W[:8, 4:6] = 0  # ...and head 2 only dimensions 8-15: orthogonal subspaces
    W[:, 2:4] = W[:, 0:2] @ rng.normal(size=(2, 2))  # head 1 spans the same plane as head 0
    ang = H.head_subspace_angles(W, 4)
    assert ang.shape == (4, 4, 2)
    np.testing.assert_allclose(ang[0, 1], 0.0, atol=1e-7)
    np.testing.assert_allclose(ang[0, 2], math.pi / 2, atol=1e-12)
    assert 0.05 < ang[0, 3].min() < math.pi / 2 - 0.05  # a random head: neither shared nor orthogonal
    np.testing.assert_allclose(ang, np.swapaxes(ang, 0, 1), atol=1e-12)
    np.testing.assert_allclose(ang[np.arange(4), np.arange(4)], 0.0, atol=1e-7)
    W_o = rng.normal(size=(8, 16))  # rows are what heads write
    assert H.head_subspace_angles(W_o, 4, axis=0).shape == (4, 4, 2)
    np.testing.assert_allclose(H.head_subspace_angles(W_o, 4, axis=0), H.head_subspace_angles(W_o.T, 4),
                               atol=1e-12)


def test_principal_angles_of_lines_match_atan2_even_when_tiny():
    """For two lines, theta = atan2(|a x b|, a . b): a closed form accurate at every angle."""
    for theta in (1e-12, 1e-6, 0.3, 1.2, np.pi / 2):
        a = np.array([[1.0], [0.0], [0.0]])
        b = np.array([[np.cos(theta)], [np.sin(theta)], [0.0]]) * 3.0  # the length does not matter
        ref = np.arctan2(np.linalg.norm(np.cross(a[:, 0], b[:, 0])), a[:, 0] @ b[:, 0])
        np.testing.assert_allclose(H.principal_angles(a, b), [ref], rtol=1e-9, atol=1e-15)


def test_principal_angles_broadcast_over_batches_like_a_loop():
    rng = np.random.default_rng(5)
    A, B = rng.normal(size=(4, 1, 9, 3)), rng.normal(size=(1, 5, 9, 2))
    got = H.principal_angles(A, B)
    assert got.shape == (4, 5, 2)
    for i in range(4):
        for j in range(5):
            # the same LAPACK routine batched or one at a time: equal to a few ulps
            np.testing.assert_allclose(got[i, j], H.principal_angles(A[i, 0], B[0, j]), rtol=1e-14, atol=1e-15)


def test_principal_angles_drop_null_directions_and_reject_mixed_ranks():
    A = np.eye(4)[:, :2]
    B = np.stack([np.eye(4)[0], 2 * np.eye(4)[0]], axis=1)  # rank 1: the line e1
    np.testing.assert_allclose(H.principal_angles(A, B), [0.0], atol=1e-15)
    with pytest.raises(ValueError, match=r"ranks \[1, 2\]"):
        H.principal_angles(np.stack([A, B]), A)
    with pytest.raises(ValueError, match=r"A has shape \(4, 2\) and B has shape \(3, 2\)"):
        H.principal_angles(A, np.eye(3)[:, :2])


@settings(max_examples=30, deadline=None)
@given(n=st.integers(2, 8), p=st.integers(1, 4), q=st.integers(1, 4), seed=st.integers(0, 10_000))
def test_property_principal_angles_are_symmetric_and_basis_free(n, p, q, seed):
    """Angles lie in [0, pi/2], do not depend on the order of A and B nor on the bases chosen."""
    p, q = min(p, n), min(q, n)
    rng = np.random.default_rng(seed)
    A, B = rng.normal(size=(n, p)), rng.normal(size=(n, q))
    theta = H.principal_angles(A, B)  # float64 SVDs of small Gaussian matrices: errors near 1e-14;
    assert theta.shape == (min(p, q),)  # the tolerances below leave room for an ill-conditioned draw
    assert np.all(theta >= 0) and np.all(theta <= np.pi / 2 + 1e-12) and np.all(np.diff(theta) >= -1e-12)
    np.testing.assert_allclose(H.principal_angles(B, A), theta, atol=1e-9)
    M = rng.normal(size=(p, p)) + 3 * np.eye(p)  # an invertible change of basis of span(A)
    np.testing.assert_allclose(H.principal_angles(A @ M, B), theta, atol=1e-8)
    if p + q > n:  # two subspaces whose dimensions add up to more than n share p + q - n directions
        np.testing.assert_allclose(theta[: p + q - n], 0.0, atol=1e-7)


def test_random_subspace_angles_are_the_smallest_angles_of_the_seeded_draws():
    g = torch.Generator().manual_seed(7)
    A, B = torch.randn(2, 3, 10, 2, generator=g, dtype=torch.float64).numpy()
    ref = [np.arccos(np.linalg.svd(np.linalg.qr(a)[0].T @ np.linalg.qr(b)[0], compute_uv=False)[0])
           for a, b in zip(A, B)]  # QR bases and arccos: an independent route
    np.testing.assert_allclose(H.random_subspace_angles(10, 2, n_pairs=3, seed=7), ref, atol=1e-10)


def test_smallest_head_angles_match_arccos_of_qr_bases():
    """Independent route: QR bases and arccos of the largest cosine (fine away from 0 degrees)."""
    W = np.random.default_rng(2).normal(size=(20, 12))
    Q = [np.linalg.qr(W[:, 3 * i:3 * i + 3])[0] for i in range(4)]
    ref = np.array([[np.arccos(min(np.linalg.svd(a.T @ b, compute_uv=False)[0], 1.0)) for b in Q] for a in Q])
    got = H.smallest_head_angles(W, 4)
    off = ~np.eye(4, dtype=bool)
    assert ref[off].min() > 0.1  # random heads: arccos is accurate here (error ~ eps / sin(angle))
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


# ------------------------------------------------------------ combining heads, parameter count
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
    assert H.total_variation(c["softmax_of_sum"], c["mean_of_softmaxes"]).mean() > 0.1
    with pytest.raises(ValueError, match=r"scores have shape \(8, 8\)"):
        H.combine_head_patterns(s[0])


def test_total_variation_closed_forms():
    P = np.array([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0], [0.7, 0.2, 0.1]])
    Q = np.array([[0.0, 0.5, 0.5], [1.0, 0.0, 0.0], [0.1, 0.2, 0.7]])
    tv = H.total_variation(P, Q)  # one distance per row
    np.testing.assert_allclose(tv, [0.5, 0.0, 0.6], rtol=0, atol=1e-15)  # 0.5 (0.6 + 0 + 0.6) in row 3
    assert H.total_variation(P[None], torch.as_tensor(Q)[None]).shape == (1, 3)  # batched, torch too
    assert float(H.total_variation([0.5, 0.5, 0.0], [0.0, 0.5, 0.5])) == 0.5  # one row, lists
    with pytest.raises(ShapeError, match=r"P has shape \(3, 3\) and Q \(3,\)"):
        H.total_variation(P, Q[0])


@pytest.mark.parametrize("d_model,h,bias", [(384, 12, True), (64, 8, False), (30, 5, True), (16, 1, True)])
def test_parameter_count_matches_torch(d_model, h, bias):
    ref = sum(p.numel() for p in torch.nn.MultiheadAttention(d_model, h, bias=bias).parameters())
    ours = sum(p.numel() for p in mh.MultiHeadAttention(d_model, h, bias=bias).parameters())
    assert H.mha_parameter_count(d_model, h, bias) == ref == ours


def test_parameter_count_rejects_indivisible_width():
    with pytest.raises(ValueError, match="d_model=10 is not divisible by num_heads=4"):
        H.mha_parameter_count(10, 4)
