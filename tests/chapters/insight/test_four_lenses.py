"""One head through four lenses (attention_course/chapters/insight/four_lenses.py), against numpy references."""

from __future__ import annotations

import numpy as np
import pytest

from attention_course import ShapeError
from attention_course.chapters.heads.subspaces import principal_angles, random_subspace_angles
from attention_course.chapters.insight.four_lenses import head_lenses


@pytest.fixture
def setup():
    rng = np.random.default_rng(3)
    maps = rng.dirichlet(np.full(6, 0.5), size=(2, 3, 6))  # (L=2, h=3, n=6, n=6), rows sum to 1
    W_q = rng.normal(size=(9, 9))  # d = 9, three heads of d_k = 3
    return maps, list("abcdef"), W_q


def test_spectrum_and_effective_rank_match_numpy(setup):
    maps, tokens, W_q = setup
    lens = head_lenses(maps, tokens, W_q, layer=1, head=2, k=2)
    for i in range(3):
        s = np.linalg.svd(maps[1, i], compute_uv=False)
        np.testing.assert_allclose(lens.singular_values[i], s / s[0], rtol=1e-10)
        p = s / s.sum()
        np.testing.assert_allclose(lens.effective_rank[i], np.exp(-(p * np.log(p)).sum()), rtol=1e-10)
    s = np.linalg.svd(maps[1, 2], compute_uv=False)
    assert lens.rank_k_error == pytest.approx(np.sqrt((s[2:] ** 2).sum() / (s ** 2).sum()), rel=1e-10)


def test_angles_are_smallest_principal_angles_between_query_subspaces(setup):
    maps, tokens, W_q = setup
    lens = head_lenses(maps, tokens, W_q, layer=0, head=1)
    for j in range(3):
        expected = np.degrees(principal_angles(W_q[:, 3:6], W_q[:, 3 * j:3 * j + 3]).min())
        assert lens.angles[j] == pytest.approx(expected, abs=1e-6)
    assert lens.angles[1] == pytest.approx(0.0, abs=1e-6)
    baseline = np.degrees(np.median(random_subspace_angles(9, 3, n_pairs=66, seed=0)))
    assert lens.random_angle == pytest.approx(baseline)  # the same baseline as chapter 4


def test_edges_and_weights(setup):
    maps, tokens, W_q = setup
    lens = head_lenses(maps, tokens, W_q, layer=1, head=0, threshold=0.25)
    np.testing.assert_array_equal(lens.weights, maps[1, 0])
    assert lens.n_edges == int((maps[1, 0] > 0.25).sum())


@pytest.mark.parametrize("change, error, match", [
    ("maps3d", ShapeError, r"maps must have shape \(L, h, n, n\); got \(3, 6, 6\)"),
    ("tokens", ShapeError, r"5 tokens for attention maps over n = 6"),
    ("layer", ValueError, r"\(layer, head\) = \(2, 0\) is outside maps of shape \(2, 3, 6, 6\)"),
    ("W_q", ShapeError, r"W_q must be \(d, d\) with d divisible by h = 3; got \(9, 8\)"),
])
def test_bad_input_names_the_shapes(setup, change, error, match):
    maps, tokens, W_q = setup
    args = dict(maps=maps, tokens=tokens, W_q=W_q, layer=0, head=0)
    args.update({"maps3d": {"maps": maps[0]}, "tokens": {"tokens": tokens[:5]}, "layer": {"layer": 2},
                 "W_q": {"W_q": W_q[:, :8]}}[change])
    with pytest.raises(error, match=match):
        head_lenses(**args)
