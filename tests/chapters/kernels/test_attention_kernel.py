"""Tests for attention_course.chapters.kernels.attention_kernel: symmetry, PSD-ness and locality of kernels.

References: closed-form 2 x 2 matrices, numpy's general (non-symmetric) eigenvalue
routine, a brute-force argmax over raw scores and distances, and Spearman's
rank-difference formula 1 - 6 sum d^2 / (n (n^2 - 1)) with ranks from Python's sorted().
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course import ShapeError
from attention_course.chapters.kernels.attention_kernel import locality_over_draws, rank_correlation
from attention_course.chapters.kernels.smoothing import kernel_matrix


def eigenvalue_ratio(K):
    """Smallest over largest eigenvalue of the symmetric part of K: below 0 (beyond round-off) = not PSD."""
    ev = np.linalg.eigvalsh((K + K.T) / 2)  # ascending
    return ev[0] / ev[-1]


def test_tied_projections_give_a_symmetric_kernel_and_untied_do_not():
    rng = np.random.default_rng(0)
    X, W_q, W_k = rng.normal(size=(12, 4)), rng.normal(size=(4, 4)), rng.normal(size=(4, 4))
    for W, symmetric in ((W_q, True), (W_k, False)):
        K = kernel_matrix(X @ W_q, X @ W, "dot", 1.5)
        assert (np.abs(K - K.T).max() / np.abs(K).max() < 1e-15) == symmetric


@settings(max_examples=30, deadline=None)
@given(n=st.integers(2, 15), d=st.integers(1, 5), seed=st.integers(0, 10_000))
def test_gaussian_and_tied_softmax_gram_matrices_are_psd(n, d, seed):
    X = np.random.default_rng(seed).normal(size=(n, d))
    # PSD up to round-off: eigenvalue errors are about n eps times the largest eigenvalue
    for K in (kernel_matrix(X, X, "gaussian", 1.0), kernel_matrix(X, X, "dot", 2.0)):
        assert eigenvalue_ratio(K) > -n * 1e-14


def _own_key_rate_brute_force(keys, kind):
    n = keys.shape[0]
    hits = 0
    for i in range(n):
        if kind == "gaussian":
            best = np.argmin([np.sum((keys[i] - keys[j]) ** 2) for j in range(n)])
        else:
            k = keys / np.linalg.norm(keys, axis=-1, keepdims=True) if kind == "unit" else keys
            best = np.argmax([k[i] @ k[j] for j in range(n)])  # softmax is monotone: argmax of the scores
        hits += best == i
    return hits / n


def test_boxcar_and_epanechnikov_are_not_psd():
    # Both are smoothing kernels, yet on 40 points of [0, 5] (the chapter's layout) their Gram
    # matrices have negative eigenvalues of order 0.1 of the largest, far beyond round-off (1e-14):
    # a negative eigenvalue cannot be what separates attention from a smoothing kernel.
    x = np.random.default_rng(0).uniform(0, 5, size=40)
    for kernel in ("boxcar", "epanechnikov"):
        ev = np.sort(np.linalg.eigvals(kernel_matrix(x, x, kernel, 0.4)).real)  # general solver (geev)
        assert ev[0] / ev[-1] < -0.01
        assert eigenvalue_ratio(kernel_matrix(x, x, kernel, 0.4)) == pytest.approx(ev[0] / ev[-1], rel=1e-9)


def _spearman_reference(a, b):
    """Spearman's rho by the rank-difference formula, ranks from sorted() (no ties)."""
    n = len(a)
    rank_a = {i: r for r, i in enumerate(sorted(range(n), key=lambda i: a[i]))}
    rank_b = {i: r for r, i in enumerate(sorted(range(n), key=lambda i: b[i]))}
    return 1 - 6 * sum((rank_a[i] - rank_b[i]) ** 2 for i in range(n)) / (n * (n * n - 1))


@settings(max_examples=30, deadline=None)
@given(T=st.integers(1, 5), S=st.integers(2, 12), seed=st.integers(0, 10_000))
def test_rank_correlation_matches_formula(T, S, seed):
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=(T, S)), rng.normal(size=(T, S))
    expected = [_spearman_reference(a[i], b[i]) for i in range(T)]
    np.testing.assert_allclose(rank_correlation(a, b), expected, rtol=1e-12, atol=1e-12)


def test_rank_correlation_is_invariant_to_monotone_maps():
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(4, 9)), rng.normal(size=(4, 9))
    np.testing.assert_allclose(rank_correlation(np.exp(a), b**3), rank_correlation(a, b), rtol=1e-15)
    np.testing.assert_allclose(rank_correlation(a, -a), -1.0, rtol=1e-15)


def test_locality_over_draws_matches_brute_force():
    n, d, draws, seed, spread = 25, 5, 4, 7, (0.5, 2.0)
    loc = locality_over_draws(n, d, draws, seed=seed, norm_range=spread)
    for s in range(draws):  # regenerate each draw by the documented recipe
        gen = np.random.default_rng((seed, s))
        keys = gen.normal(size=(n, d)) * gen.uniform(*spread, size=(n, 1))
        for kind in ("gaussian", "dot", "unit"):
            assert loc["own_key"][kind][s] == _own_key_rate_brute_force(keys, kind)
        dist = np.array([[np.linalg.norm(a - b) for b in keys] for a in keys])
        dot = keys @ keys.T
        rho = np.mean([_spearman_reference(dot[i], -dist[i]) for i in range(n)])
        assert loc["rank_corr"]["dot"][s] == pytest.approx(rho, abs=1e-12)
    # a radial kernel: weight is a decreasing function of distance, so both measures are exactly 1
    assert loc["own_key"]["gaussian"].min() == 1.0 and loc["rank_corr"]["gaussian"].min() == pytest.approx(1.0)
    assert loc["rank_corr"]["unit"].min() == pytest.approx(1.0)  # |u - v|^2 = 2 - 2 u.v for unit keys


def test_random_scores_give_chance():
    # random scores: the own key wins with probability 1/n; the mean of 200 draws of 10 queries each
    # has standard deviation sqrt(0.1 * 0.9 / 2000) = 0.0067, so 4 of them is 0.027. The rank
    # correlation of n = 10 independent values has sd 1/3 per query: 1/3/sqrt(2000) = 0.0075.
    loc = locality_over_draws(n=10, d=3, draws=200, seed=0)
    assert abs(loc["own_key"]["random"].mean() - 0.1) < 0.027
    assert abs(loc["rank_corr"]["random"].mean()) < 4 * 0.0075


def test_bad_shapes():
    with pytest.raises(ShapeError, match=r"a has shape \(2, 3\) and b \(3, 2\); expected the same shape"):
        rank_correlation(np.zeros((2, 3)), np.zeros((3, 2)))
    with pytest.raises(ValueError, match="n=1, d=2, draws=3; expected n >= 2"):
        locality_over_draws(1, 2, 3)


def test_rank_correlation_keeps_leading_axes():
    rng = np.random.default_rng(5)
    a, b = rng.normal(size=(2, 3, 4, 6)), rng.normal(size=(2, 3, 4, 6))
    got = rank_correlation(a, b)
    assert got.shape == (2, 3, 4)
    for i in range(2):
        for j in range(3):
            np.testing.assert_array_equal(got[i, j], rank_correlation(a[i, j], b[i, j]))


def test_locality_over_draws_reports_the_key_norm_spread():
    n, d, spread = 30, 6, (0.5, 2.0)
    loc = locality_over_draws(n, d, 3, seed=4, norm_range=spread)
    for s in range(3):  # regenerate each draw by the documented recipe
        gen = np.random.default_rng((4, s))
        norms = np.linalg.norm(gen.normal(size=(n, d)) * gen.uniform(*spread, size=(n, 1)), axis=1)
        assert loc["norm_ratio"]["keys"][s] == pytest.approx(norms.max() / norms.min(), rel=1e-14)
