"""chapters/heads/circuits.py: overlaps of heads' subspaces and OV maps, against numpy references."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_course.core._backend import ShapeError
from attention_course.chapters.heads import circuits as C


def _overlap_numpy(A, B):
    """Reference: orthonormal bases by numpy QR, cosines = singular values of Q_A^T Q_B."""
    cos = np.linalg.svd(np.linalg.qr(A)[0].T @ np.linalg.qr(B)[0], compute_uv=False)
    return float((cos**2).mean())


@pytest.mark.parametrize("n, p, q", [(10, 3, 3), (12, 2, 5), (7, 4, 1), (40, 8, 8)])
def test_overlap_matches_numpy_reference(n, p, q):
    rng = np.random.default_rng(n + p + q)
    A, B = rng.normal(size=(n, p)), rng.normal(size=(n, q))
    # float64 SVDs of well-conditioned n x p matrices: errors of a few eps on cos^2 <= 1
    np.testing.assert_allclose(float(C.subspace_overlap(A, B)), _overlap_numpy(A, B), atol=1e-12)


def test_overlap_known_values():
    e = np.eye(5)
    assert float(C.subspace_overlap(e[:, :2], e[:, 2:4])) == pytest.approx(0.0, abs=1e-15)  # orthogonal
    assert float(C.subspace_overlap(e[:, :2], e[:, :2] @ np.array([[2.0, 1], [0, 3]]))) == pytest.approx(1.0)
    assert float(C.subspace_overlap(e[:, :1], e[:, :3])) == pytest.approx(1.0)  # a line inside a space
    assert float(C.subspace_overlap(e[:, :1], (e[:, :1] + e[:, 1:2]))) == pytest.approx(0.5)  # 45 degrees


def test_head_overlaps_pairs_and_axes():
    rng = np.random.default_rng(3)
    W = rng.normal(size=(20, 12))  # 3 heads of width 4
    got = C.head_overlaps(W, 3)
    for i in range(3):
        for j in range(3):
            ref = _overlap_numpy(W[:, 4 * i:4 * i + 4], W[:, 4 * j:4 * j + 4])
            assert got[i, j] == pytest.approx(ref, abs=1e-12)
    np.testing.assert_allclose(C.head_overlaps(W.T, 3, axis=0), got, atol=1e-12)  # rows of W_o = columns


def test_random_overlaps_mean_is_p_over_n():
    r = C.random_overlaps(64, 8, n_pairs=500, seed=1)
    # one overlap has std about sqrt(2)/n = 0.022; the mean of 500 about 0.001: 0.005 is 5 sigma
    assert r.shape == (500,) and abs(float(r.mean()) - 8 / 64) < 0.005
    np.testing.assert_array_equal(r, C.random_overlaps(64, 8, n_pairs=500, seed=1))  # seeded


def test_ov_maps_against_a_loop_and_their_sum():
    rng = np.random.default_rng(4)
    W_v, W_o = rng.normal(size=(6, 8)), rng.normal(size=(8, 5))  # 4 heads of d_v = 2
    ov = C.head_ov_maps(W_v, W_o, 4)
    for i in range(4):
        np.testing.assert_allclose(ov[i], W_v[:, 2 * i:2 * i + 2] @ W_o[2 * i:2 * i + 2], atol=1e-12)
    np.testing.assert_allclose(ov.sum(0), W_v @ W_o, atol=1e-12)
    assert np.linalg.matrix_rank(ov[0]) == 2
    ov_t = C.head_ov_maps(torch.as_tensor(W_v), torch.as_tensor(W_o), 4)
    np.testing.assert_allclose(ov_t, ov, atol=1e-12)


def test_ov_maps_bad_shapes():
    with pytest.raises(ShapeError, match=r"W_v has shape \(6, 8\) and W_o has shape \(6, 5\)"):
        C.head_ov_maps(np.ones((6, 8)), np.ones((6, 5)), 4)


def test_reparametrise_ov_keeps_the_map_and_moves_the_weights():
    rng = np.random.default_rng(5)
    W_v, W_o, R = rng.normal(size=(6, 6)), rng.normal(size=(6, 4)), rng.normal(size=(2, 2))
    W_v2, W_o2 = C.reparametrise_ov(W_v, W_o, R, head=1, num_heads=3)
    np.testing.assert_allclose(W_v2[:, 2:4], W_v[:, 2:4] @ R, atol=1e-12)
    np.testing.assert_allclose(W_o2[2:4], np.linalg.solve(R, W_o[2:4]), atol=1e-12)  # R^-1 W_O^(i)
    np.testing.assert_array_equal(W_v2[:, :2], W_v[:, :2])  # other heads untouched
    np.testing.assert_array_equal(W_o2[4:], W_o[4:])
    np.testing.assert_allclose(W_v2 @ W_o2, W_v @ W_o, atol=1e-10)  # the layer's output map
    assert not np.allclose(W_v2, W_v)


def test_shuffled_overlaps_keep_orthonormal_directions_orthogonal():
    # 12 orthonormal directions: any regrouping into 3 heads of 4 gives disjoint, orthogonal subspaces
    W = np.linalg.qr(np.random.default_rng(7).normal(size=(20, 12)))[0]
    got = C.shuffled_head_overlaps(W, 3, n_draws=5, seed=0)
    assert got.shape == (5, 3, 3)
    np.testing.assert_allclose(got, np.broadcast_to(np.eye(3), (5, 3, 3)), atol=1e-12)


def test_shuffled_overlaps_regroup_and_are_seeded():
    W = np.random.default_rng(8).normal(size=(10, 6))  # 3 heads of 2 general columns
    a = C.shuffled_head_overlaps(W, 3, n_draws=6, seed=3)
    np.testing.assert_array_equal(a, C.shuffled_head_overlaps(W, 3, n_draws=6, seed=3))  # seeded
    assert not np.allclose(a, C.shuffled_head_overlaps(W, 3, n_draws=6, seed=4))
    np.testing.assert_allclose(C.shuffled_head_overlaps(W.T, 3, n_draws=6, seed=3, axis=0), a, atol=1e-12)
    fixed = C.head_overlaps(W, 3)
    assert not all(np.allclose(d, fixed) for d in a)  # the grouping changes


def test_matched_overlaps_isotropic_and_confined():
    r = C.matched_random_overlaps(np.eye(64), 8, n_pairs=500, seed=1)
    # isotropic V: the random_overlaps baseline, mean p/n; 0.005 is 5 standard errors (see above)
    assert r.shape == (500,) and abs(float(r.mean()) - 8 / 64) < 0.005
    V = np.zeros((30, 30))
    V[:4, :4] = np.random.default_rng(2).normal(size=(4, 4))  # all directions inside span(e0..e3)
    np.testing.assert_allclose(C.matched_random_overlaps(V, 4, n_pairs=10, seed=0), 1.0, atol=1e-10)
    W = np.random.default_rng(3).normal(size=(16, 24))
    np.testing.assert_allclose(C.matched_random_overlaps(W.T, 3, n_pairs=20, seed=5, axis=0),
                               C.matched_random_overlaps(W, 3, n_pairs=20, seed=5), atol=1e-12)
