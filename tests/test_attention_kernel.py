"""Tests for attention_course.lenses.attention_kernel: symmetry, PSD-ness and locality of kernels.

References: closed-form 2 x 2 matrices, numpy's general (non-symmetric) eigenvalue
routine, and a brute-force argmax over raw scores and distances.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course import ShapeError
from attention_course.lenses.attention_kernel import (
    eigenvalue_ratio,
    kernel_asymmetry,
    own_key_top_rate,
)
from attention_course.lenses.kernels import kernel_matrix


@pytest.mark.parametrize(
    "K, expected",
    [
        ([[1.0, 2.0], [2.0, 1.0]], 0.0),
        ([[1.0, 4.0], [0.0, 1.0]], 1.0),  # |4 - 0| / 4
        ([[2.0, 1.0], [0.5, 3.0]], 0.5 / 3.0),
    ],
)
def test_asymmetry_closed_forms(K, expected):
    assert kernel_asymmetry(np.array(K)) == pytest.approx(expected, rel=1e-15)


def test_tied_projections_give_a_symmetric_kernel_and_untied_do_not():
    rng = np.random.default_rng(0)
    X, W_q, W_k = rng.normal(size=(12, 4)), rng.normal(size=(4, 4)), rng.normal(size=(4, 4))
    assert kernel_asymmetry(kernel_matrix(X @ W_q, X @ W_q, "softmax", 1.5)) < 1e-15
    assert kernel_asymmetry(kernel_matrix(X @ W_q, X @ W_k, "softmax", 1.5)) > 0.1


@pytest.mark.parametrize("a, b", [(2.0, 1.0), (1.0, 2.0), (3.0, -0.5)])
def test_eigenvalue_ratio_closed_form(a, b):
    # [[a, b], [b, a]] has eigenvalues a - |b| and a + |b|
    assert eigenvalue_ratio(np.array([[a, b], [b, a]])) == pytest.approx((a - abs(b)) / (a + abs(b)), rel=1e-14)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(2, 12), seed=st.integers(0, 10_000))
def test_eigenvalue_ratio_matches_general_solver(n, seed):
    K = np.random.default_rng(seed).normal(size=(n, n))
    ev = np.sort(np.linalg.eigvals((K + K.T) / 2).real)  # a different LAPACK routine (geev)
    assert eigenvalue_ratio(K) == pytest.approx(ev[0] / ev[-1], rel=1e-9, abs=1e-12)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(2, 15), d=st.integers(1, 5), seed=st.integers(0, 10_000))
def test_gaussian_and_tied_softmax_gram_matrices_are_psd(n, d, seed):
    X = np.random.default_rng(seed).normal(size=(n, d))
    # PSD up to round-off: eigenvalue errors are about n eps times the largest eigenvalue
    for K in (kernel_matrix(X, X, "gaussian", 1.0), kernel_matrix(X, X, "softmax", 2.0)):
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


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_own_key_top_rate_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    keys = rng.normal(size=(30, 6)) * rng.uniform(0.5, 2.0, size=(30, 1))
    rates = own_key_top_rate(keys)
    for kind in ("gaussian", "dot", "unit"):
        assert rates[kind] == _own_key_rate_brute_force(keys, kind)
    assert rates["gaussian"] == 1.0 and rates["unit"] == 1.0 and rates["dot"] < 1.0


def test_own_key_top_rate_collinear_keys():
    # keys 1, 2, 3 times the same direction: under the dot product every query picks the longest key
    keys = np.outer([1.0, 2.0, 3.0], [0.6, 0.8])
    assert own_key_top_rate(keys) == {"gaussian": 1.0, "dot": pytest.approx(1 / 3), "unit": pytest.approx(1 / 3)}


def test_bad_shapes():
    with pytest.raises(ShapeError, match=r"K has shape \(2, 3\); expected a square Gram matrix"):
        kernel_asymmetry(np.zeros((2, 3)))
    with pytest.raises(ShapeError, match=r"K has shape \(4,\); expected a square"):
        eigenvalue_ratio(np.zeros(4))
    with pytest.raises(ShapeError, match=r"keys has shape \(5,\); expected \(n, d\)"):
        own_key_top_rate(np.zeros(5))
