"""Tests for attention_course.chapters.kernels.input_locality: chapter 2's deciding number for softmax-kernel.

References: a Gaussian kernel on the inputs (local by construction: correlation 1), scipy's
Spearman correlation, and the invariances of attention itself: q -> a q with k -> k / a, and one
vector added to every key, leave every weight unchanged, so the number must not move, while the
query-key distances of qk_kernel do move.
"""

from __future__ import annotations

import numpy as np
import pytest

from attention_course.chapters.kernels.input_locality import input_distances, input_locality
from attention_course.chapters.kernels.qk_kernel import qk_locality
from attention_course.core._backend import ShapeError


def _softmax(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _layer(seed=0, T=12, d=16, d_k=4, heads=3):
    rng = np.random.default_rng(seed)
    h = rng.normal(size=(1, T, d))  # (layers, T, d)
    Wq, Wk = rng.normal(size=(heads, d, d_k)), rng.normal(size=(heads, d, d_k))
    q, k = h[:, None] @ Wq, h[:, None] @ Wk  # (1, heads, T, d_k)
    return h, q, k


def _weights(q, k):
    return _softmax(q @ np.swapaxes(k, -2, -1) / np.sqrt(q.shape[-1]))


def test_distances_against_numpy():
    h = np.random.default_rng(0).normal(size=(5, 3))
    D = input_distances(h)
    for i in range(5):
        for j in range(5):
            assert D[i, j] == pytest.approx(np.linalg.norm(h[i] - h[j]), abs=1e-14)


def test_rank_correlation_matches_scipy_per_query():
    from scipy.stats import spearmanr  # here, not at the top: scipy.stats takes 2 s to import at collection

    h, q, k = _layer()
    w = _weights(q, k)  # (1, 3, 12, 12)
    got = input_locality(w, h)["rank_corr"]  # (1, 3)
    D = input_distances(h)[0]
    for head in range(3):
        ref = np.median([spearmanr(w[0, head, i], -D[i]).statistic for i in range(12)])
        assert got[0, head] == pytest.approx(ref, abs=1e-12)


def test_a_gaussian_kernel_on_the_inputs_scores_one_and_random_weights_about_zero():
    h, _, _ = _layer(T=40)
    D = input_distances(h)  # (1, 40, 40)
    gauss = _softmax(-D**2 / 8)[:, None]  # (1, 1, 40, 40)
    assert input_locality(gauss, h)["rank_corr"][0, 0] == pytest.approx(1.0, abs=1e-12)
    rand = np.random.default_rng(5).dirichlet(np.ones(40), size=(1, 50, 40))  # 50 heads of random weights
    assert abs(np.median(input_locality(rand, h)["rank_corr"])) < 0.1


@pytest.mark.parametrize("a", [0.25, 0.5, 4.0])
def test_the_number_does_not_move_when_attention_does_not(a):
    """Rescaling q against k, or shifting every key, leaves the weights and so the measure unchanged."""
    h, q, k = _layer(seed=2)
    base = input_locality(_weights(q, k), h)
    shift = np.random.default_rng(9).normal(size=(1, 3, 1, 4)) * 3  # one vector per head, added to every key
    for q2, k2 in ((a * q, k / a), (q, k + shift)):
        w2 = _weights(q2, k2)
        assert np.allclose(w2, _weights(q, k), rtol=0, atol=1e-12)  # attention is unchanged...
        moved = input_locality(w2, h)
        for m in base:
            assert np.array_equal(moved[m], base[m])  # ...and so is the number


def test_the_query_key_distance_measure_does_move_under_the_same_change():
    """The reason for measuring in the input: locality in q-k space is not a property of attention."""
    h, q, k = _layer(seed=2, T=30)
    before = qk_locality(q, k)["nearest_wins"]
    after = qk_locality(4.0 * q, k / 4.0)["nearest_wins"]
    assert np.abs(after - before).max() > 0.1


def test_shapes_are_checked():
    with pytest.raises(ShapeError, match="expected"):
        input_locality(np.ones((1, 2, 5, 5)) / 5, np.ones((1, 4, 3)))
