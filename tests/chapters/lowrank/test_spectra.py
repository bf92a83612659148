"""Tests for attention_course.chapters.lowrank.spectra: ranks and errors against numpy.linalg.svd and closed
forms, Eckart-Young, the temperature sweep's claims, and exp of a rank-1 matrix."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.core._backend import ShapeError
from attention_course.core.attention import scaled_dot_product_attention
from attention_course.chapters.lowrank.spectra import (
    best_rank_k,
    crossover_beta,
    effective_rank,
    effective_rank_from_singular_values,
    exp_rank_demo,
    rank_k_error,
    singular_values,
    stable_rank,
    stable_rank_from_singular_values,
    synthetic_attention,
    temperature_sweep,
    topk_error,
    topk_sparsify,
)

shapes = st.tuples(st.integers(1, 9), st.integers(1, 9))


def rand(shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape)


# ------------------------------------------------------------------ spectra
def test_singular_values_match_numpy_and_torch_inputs():
    A = rand((2, 6, 4))
    np.testing.assert_allclose(singular_values(A), np.linalg.svd(A, compute_uv=False), rtol=0, atol=1e-13)
    np.testing.assert_allclose(singular_values(torch.as_tensor(A)), singular_values(A), rtol=0, atol=1e-13)


def test_effective_rank_closed_forms():
    s = np.array([4.0, 2.0, 1.0, 1.0])
    p = s / s.sum()
    assert effective_rank(np.diag(s)) == pytest.approx(math.exp(-(p * np.log(p)).sum()), rel=1e-14)
    assert effective_rank(np.eye(7)) == pytest.approx(7.0, rel=1e-14)
    assert effective_rank(np.outer(rand(5), rand(3, seed=1))) == pytest.approx(1.0, abs=1e-6)
    np.testing.assert_allclose(effective_rank(np.stack([np.eye(3), 2 * np.eye(3)])), [3.0, 3.0], rtol=1e-14)


@settings(max_examples=40, deadline=None)
@given(shape=shapes, seed=st.integers(0, 10_000), c=st.floats(0.01, 100.0))
def test_rank_measures_are_bounded_and_scale_invariant(shape, seed, c):
    A = rand(shape, seed)
    r = np.linalg.matrix_rank(A)
    er, sr = float(effective_rank(A)), float(stable_rank(A))
    assert 1 - 1e-9 <= sr <= er + 1e-9 and er <= r + 1e-9  # stable <= effective <= rank
    assert effective_rank(c * A) == pytest.approx(er, rel=1e-9)
    assert stable_rank(c * A) == pytest.approx(sr, rel=1e-9)


@pytest.mark.parametrize("shape", [(8, 5), (5, 5), (3, 9)])
def test_stable_rank_matches_numpy_norms(shape):
    A = rand(shape, seed=sum(shape))
    expected = np.linalg.norm(A, "fro") ** 2 / np.linalg.norm(A, 2) ** 2  # ||A||_F^2 / ||A||_2^2
    # float64 SVD of a small Gaussian matrix: singular values to a few eps relative
    assert stable_rank(A) == pytest.approx(expected, rel=1e-12)
    s = np.linalg.svd(A, compute_uv=False)
    assert stable_rank_from_singular_values(s) == pytest.approx(expected, rel=1e-12)
    assert stable_rank_from_singular_values(s[::-1]) == pytest.approx(expected, rel=1e-12)  # any order


def test_stable_rank_from_singular_values_extremes_and_bad_input():
    s = np.linalg.svd(np.outer([1.0, 2, 3], [4.0, 5]), compute_uv=False)
    assert float(stable_rank_from_singular_values(s)) == pytest.approx(1.0)  # rank 1
    assert float(stable_rank_from_singular_values(np.ones(7))) == pytest.approx(7.0)  # equal values: the rank
    np.testing.assert_array_equal(stable_rank_from_singular_values(torch.ones(2, 3)), [3.0, 3.0])
    with pytest.raises(ShapeError, match=r"s has shape \(0,\); expected \(\.\.\., k\) with k >= 1"):
        stable_rank_from_singular_values(np.zeros(0))
    with pytest.raises(ValueError, match=r"s of shape \(2, 2\) is \(or contains\) all zeros"):
        stable_rank_from_singular_values(np.array([[1.0, 0.5], [0.0, 0.0]]))


def test_effective_rank_from_singular_values_is_the_entropy_of_the_normalised_spectrum():
    A = np.random.default_rng(0).normal(size=(3, 6, 5))
    s = np.linalg.svd(A, compute_uv=False)  # (3, 5)
    p = s / s.sum(-1, keepdims=True)
    np.testing.assert_allclose(effective_rank_from_singular_values(s), np.exp(-(p * np.log(p)).sum(-1)), rtol=1e-12)
    np.testing.assert_allclose(effective_rank_from_singular_values(s[:, ::-1]), effective_rank(A), rtol=1e-12)
    assert float(effective_rank_from_singular_values(np.array([2.0, 0.0, 0.0]))) == 1.0  # 0 log 0 = 0
    with pytest.raises(ShapeError, match=r"s has shape \(0,\); expected \(\.\.\., k\) with k >= 1"):
        effective_rank_from_singular_values(np.zeros(0))
    with pytest.raises(ValueError, match=r"s of shape \(2, 2\) is \(or contains\) all zeros"):
        effective_rank_from_singular_values(np.array([[1.0, 0.5], [0.0, 0.0]]))


# ---------------------------------------------------------- best rank k (Eckart-Young)
@settings(max_examples=40, deadline=None)
@given(shape=shapes, seed=st.integers(0, 10_000), data=st.data())
def test_best_rank_k_matches_svd_truncation_and_closed_form(shape, seed, data):
    A = rand(shape, seed)
    k = data.draw(st.integers(0, min(shape)))
    U, s, Vh = np.linalg.svd(A)
    A_k = U[:, :k] @ np.diag(s[:k]) @ Vh[:k]
    np.testing.assert_allclose(best_rank_k(A, k), A_k, rtol=0, atol=1e-12)
    direct = np.linalg.norm(A - best_rank_k(A, k)) / np.linalg.norm(A)
    closed = math.sqrt((s[k:] ** 2).sum()) / np.linalg.norm(A, "fro")
    assert float(rank_k_error(A, k)) == pytest.approx(closed, abs=1e-12)
    assert direct == pytest.approx(closed, abs=1e-12)
    assert np.linalg.matrix_rank(best_rank_k(A, k)) == min(k, np.linalg.matrix_rank(A))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), k=st.integers(1, 4))
def test_eckart_young_no_rank_k_matrix_is_closer(seed, k):
    A = rand((7, 6), seed)
    rng = np.random.default_rng(seed + 1)
    B = rng.normal(size=(7, k)) @ rng.normal(size=(k, 6))  # a random rank-k competitor
    assert np.linalg.norm(A - B) >= np.linalg.norm(A - best_rank_k(A, k)) - 1e-12


def test_rank_k_error_works_on_stacks_and_torch():
    A = rand((3, 5, 5), seed=3)
    expected = [float(rank_k_error(a, 2)) for a in A]
    np.testing.assert_allclose(rank_k_error(A, 2), expected, rtol=1e-14)
    np.testing.assert_allclose(rank_k_error(torch.as_tensor(A), 2), expected, rtol=1e-14)


# ------------------------------------------------------------------ top-k sparse
def test_topk_sparsify_keeps_the_largest_entries_per_row():
    A = np.abs(rand((6, 9), seed=4))
    S = topk_sparsify(A, 3)
    assert np.all((S != 0).sum(axis=1) == 3)
    for row, srow in zip(A, S):
        kept = np.flatnonzero(srow)
        assert set(kept) == set(np.argsort(-row)[:3])
        np.testing.assert_array_equal(srow[kept], row[kept])
    np.testing.assert_array_equal(topk_sparsify(A, 9), A)
    assert float(topk_error(A, 9)) == 0.0 and float(topk_error(A, 0)) == 1.0


def test_topk_error_closed_form():
    A = np.array([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]])
    dropped = np.array([0.2, 0.1])  # k = 2 drops the smallest entry of each row
    expected = math.sqrt((dropped**2).sum() / (A**2).sum())
    assert float(topk_error(A, 2)) == pytest.approx(expected, rel=1e-14)


# --------------------------------------------------------- synthetic attention
def test_synthetic_attention_is_softmax_of_scaled_scores():
    n, d, beta = 12, 4, 2.5
    rng = np.random.default_rng(7)
    q, k = rng.normal(size=(n, d)), rng.normal(size=(n, d))
    _, weights = scaled_dot_product_attention(q, k, np.eye(n), scale=beta / math.sqrt(d))
    np.testing.assert_allclose(synthetic_attention(n, d, beta, seed=7), weights, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(synthetic_attention(n, d, beta, seed=7), synthetic_attention(n, d, beta, seed=7))


@pytest.fixture(scope="module")
def sweep():
    return temperature_sweep(np.linspace(0.2, 4.0, 20), n=256, d=32, k=16, seed=0)


def test_temperature_sweep_matches_course_targets(sweep):
    """COURSE.md: effective rank ~24 -> ~162; rank-16 SVD error 0.12 -> 0.80; top-16 sparse
    error 0.93 -> 0.02; they cross near beta = 1. Tolerances allow for a different seed."""
    er, svd, sparse = sweep["effective_rank"], sweep["svd_error"], sweep["sparse_error"]
    assert 21 < er[0] < 27 and er.max() > 140 and er[-1] > 5 * er[0]
    assert svd[0] == pytest.approx(0.12, abs=0.02) and svd[-1] == pytest.approx(0.80, abs=0.05)
    assert sparse[0] == pytest.approx(0.93, abs=0.02) and sparse[-1] == pytest.approx(0.02, abs=0.01)
    assert np.all(np.diff(svd) > 0) and np.all(np.diff(sparse) < 0)  # monotone in beta
    assert 0.8 < crossover_beta(sweep) < 1.3


def test_sweep_entries_match_the_single_matrix_functions(sweep):
    A = synthetic_attention(256, 32, float(sweep["beta"][5]), seed=0)
    assert sweep["effective_rank"][5] == pytest.approx(float(effective_rank(A)), rel=1e-12)
    assert sweep["svd_error"][5] == pytest.approx(float(rank_k_error(A, 16)), rel=1e-12)
    assert sweep["sparse_error"][5] == pytest.approx(float(topk_error(A, 16)), rel=1e-12)


def test_crossover_beta_interpolates_and_reports_no_crossing():
    base = {"beta": np.array([1.0, 2.0, 3.0])}
    assert crossover_beta({**base, "svd_error": np.array([0.1, 0.2, 0.6]),
                           "sparse_error": np.array([0.9, 0.4, 0.2])}) == pytest.approx(2 + 0.2 / 0.6)
    assert math.isnan(crossover_beta({**base, "svd_error": np.zeros(3), "sparse_error": np.ones(3)}))


# --------------------------------------------------------------- exp of rank 1
@pytest.mark.parametrize("n", [2, 5, 8])
def test_exp_of_rank_one_logits_is_full_rank(n):
    demo = exp_rank_demo(n=n, scale=4.0)
    assert demo["rank_logits"] == 1
    assert demo["rank_exp"] == n and demo["rank_softmax"] == n
    x = np.linspace(-1, 1, n)
    sign, _ = np.linalg.slogdet(np.exp(4.0 * np.outer(x, x)))  # e^{xy} is totally positive: det > 0
    assert sign == 1.0
    np.testing.assert_allclose(demo["softmax"].sum(axis=1), 1.0, rtol=1e-14)


# ---------------------------------------------------------------- bad input
def test_bad_inputs_name_shapes():
    with pytest.raises(ValueError, match=r"k=4 for A of shape \(3, 5\); expected an integer 0 <= k <= 3"):
        best_rank_k(rand((3, 5)), 4)
    with pytest.raises(ValueError, match=r"k=6 for A of shape \(3, 5\); expected an integer 0 <= k <= 5"):
        topk_sparsify(rand((3, 5)), 6)
    with pytest.raises(ValueError, match=r"shape \(4,\) and dtype float64; expected a float matrix"):
        effective_rank(rand(4))
    with pytest.raises(ValueError, match=r"dtype int64; expected a float matrix"):
        stable_rank(np.eye(3, dtype=np.int64))
    with pytest.raises(ValueError, match=r"A of shape \(2, 3, 3\) is \(or contains\) a zero matrix"):
        effective_rank(np.stack([np.eye(3), np.zeros((3, 3))]))
