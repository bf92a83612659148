"""attention_distance: the mean attention distance, its uniform and shuffled-geometry baselines, against loops."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from attention_course.chapters.lowrank import attention_distance as ad
from attention_course.chapters.lowrank.vision import patch_centres
from attention_course.core._backend import ShapeError

D = ad.grid_distances(patch_centres(2))  # (16, 16) pixels between 2×2 patch centres


def _random_maps(B=3, h=2, n=16, seed=0):
    rng = np.random.default_rng(seed)
    s = rng.normal(size=(B, h, n, n)) * 2
    w = np.exp(s - s.max(-1, keepdims=True))
    return w / w.sum(-1, keepdims=True)  # (B, h, n, n), rows sum to 1


def test_grid_distances_against_a_loop():
    c = patch_centres(2)
    for i, j in itertools.product(range(16), repeat=2):
        assert D[i, j] == pytest.approx(np.hypot(*(c[i] - c[j])), abs=1e-12)
    assert D[0, 1] == 2.0 and D[0, 5] == pytest.approx(2 * np.sqrt(2))  # neighbours on the grid, 2 px apart


def test_mean_attention_distance_against_a_loop_for_shared_and_per_image_distances():
    A = _random_maps()
    B, h, n, _ = A.shape
    C = np.random.default_rng(1).uniform(size=(B, n, n))
    want_d = [sum(A[b, k, i, j] * D[i, j] for b in range(B) for i in range(n) for j in range(n)) / (B * n)
              for k in range(h)]
    want_c = [sum(A[b, k, i, j] * C[b, i, j] for b in range(B) for i in range(n) for j in range(n)) / (B * n)
              for k in range(h)]
    np.testing.assert_allclose(ad.mean_attention_distance(A, D), want_d, rtol=1e-12)
    np.testing.assert_allclose(ad.mean_attention_distance(A, C), want_c, rtol=1e-12)


def test_uniform_attention_gives_the_uniform_distance_and_self_attention_gives_zero():
    n = 16
    uniform = np.full((2, 1, n, n), 1 / n)
    assert ad.mean_attention_distance(uniform, D)[0] == pytest.approx(ad.uniform_distance(D), rel=1e-12)
    # closed form by brute force over the 4 × 4 grid with 2-px spacing
    cells = [(2 * r, 2 * c) for r in range(4) for c in range(4)]
    brute = np.mean([np.hypot(a[0] - b[0], a[1] - b[1]) for a in cells for b in cells])
    assert ad.uniform_distance(D) == pytest.approx(brute, rel=1e-12)
    assert ad.mean_attention_distance(np.eye(n)[None, None], D)[0] == 0.0


def test_shuffled_null_of_uniform_attention_is_the_uniform_distance_for_every_permutation():
    n = 16
    null = ad.shuffled_distances(np.full((1, 1, n, n), 1 / n), D, n_perm=50, seed=3)
    np.testing.assert_allclose(null, ad.uniform_distance(D), rtol=1e-12)


def test_the_shared_and_the_per_image_paths_of_the_null_agree():
    A = _random_maps(B=2)
    per_image = np.broadcast_to(D, (2, 16, 16)).copy()
    np.testing.assert_allclose(ad.shuffled_distances(A, D, 40, seed=5), ad.shuffled_distances(A, per_image, 40, seed=5),
                               rtol=1e-12)


def test_a_neighbour_head_is_local_and_a_self_head_is_not_evidence_of_locality():
    n, K = 16, 500
    right = np.zeros((1, 1, n, n))  # every query looks at the patch to its right (or left, on the edge)
    for i in range(n):
        r, c = divmod(i, 4)
        right[0, 0, i, r * 4 + (c + 1 if c < 3 else c - 1)] = 1.0
    d = ad.mean_attention_distance(right, D)
    assert d[0] == pytest.approx(2.0)
    assert ad.locality_pvalue(d, ad.shuffled_distances(right, D, K))[0] == pytest.approx(1 / (K + 1))
    self_head = np.eye(n)[None, None]  # distance 0, but the joint shuffle keeps the diagonal: no evidence
    p_self = ad.locality_pvalue(ad.mean_attention_distance(self_head, D), ad.shuffled_distances(self_head, D, K))
    assert p_self[0] == 1.0


def test_locality_pvalue_is_uniform_for_maps_blind_to_geometry():
    """Random maps are local at p < 0.05 about 5% of the time: the test's false-positive rate is its level."""
    A = _random_maps(B=1, h=200, seed=7)
    p = ad.locality_pvalue(ad.mean_attention_distance(A, D), ad.shuffled_distances(A, D, 200, seed=8))
    assert 0.0 <= np.mean(p < 0.05) <= 0.12  # binomial(200, 0.05): mean 10, sd 3.1; 0.12 is 4.5 sd above


def test_neighbourhood_against_a_loop_and_its_uniform_share():
    N = ad.neighbourhood(patch_centres(2), 2)
    for i, j in itertools.product(range(16), repeat=2):
        (ri, ci), (rj, cj) = divmod(i, 4), divmod(j, 4)
        assert N[i, j] == float(abs(ri - rj) <= 1 and abs(ci - cj) <= 1)
    assert ad.uniform_distance(N) == pytest.approx((4 * 4 + 8 * 6 + 4 * 9) / 16 / 16)  # 0.390625
    assert ad.mean_attention_distance(np.eye(16)[None, None], N)[0] == 1.0  # itself is in its neighbourhood


def test_content_neighbourhood_picks_the_nearest_contents_and_the_query_itself():
    rng = np.random.default_rng(0)
    patches = rng.uniform(size=(3, 16, 4))
    patches[0, 3] = patches[0, 7]  # a tie at distance 0
    sizes = ad.neighbourhood(patch_centres(2), 2).sum(axis=1)
    CN = ad.content_neighbourhood(patches, sizes)
    C = ad.content_distances(patches)
    np.testing.assert_array_equal(CN.sum(-1), np.broadcast_to(sizes, (3, 16)))
    assert (np.einsum("bii->bi", CN) == 1).all()
    for b, i in itertools.product(range(3), range(16)):
        inside, outside = C[b, i][CN[b, i] == 1], C[b, i][CN[b, i] == 0]
        assert inside.max() <= outside.min() + 1e-12  # the nearest ones, whatever the ties


def test_errors_name_the_shapes():
    with pytest.raises(ShapeError, match=r"weights have shape \(16, 16\); expected \(B, h, n, n\)"):
        ad.mean_attention_distance(np.eye(16), D)
    with pytest.raises(ShapeError, match=r"distances have shape \(4, 4\)"):
        ad.mean_attention_distance(np.eye(16)[None, None], np.eye(4))
    with pytest.raises(ShapeError, match=r"null has shape \(3,\)"):
        ad.locality_pvalue(np.zeros(2), np.zeros(3))


def test_shuffled_per_image_distances_equal_the_plain_loop():
    """The batched per-image null gives, permutation by permutation, mean_attention_distance of the relabelled D."""
    rng = np.random.default_rng(3)
    A = rng.random((5, 3, 9, 9)); A /= A.sum(-1, keepdims=True)
    D = rng.random((5, 9, 9))
    fast = ad.shuffled_distances(A, D, n_perm=23, seed=4)
    rng_p = np.random.default_rng(4)  # the permutations shuffled_distances draws with seed=4
    plain = np.stack([ad.mean_attention_distance(A, D[:, p][:, :, p]) for p in (rng_p.permutation(9) for _ in range(23))])
    np.testing.assert_allclose(fast, plain, rtol=1e-13, atol=0)
