"""sensitive_regime.py: the softmax Jacobian's norm in closed form, and its half-maximum band."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.chapters.scaling.measures import softmax_jacobian_norm
from attention_course.chapters.scaling.sensitive_regime import (
    half_maximum_band, jacobian_floor, jacobian_norm_rows, jacobian_vs_spread)


def test_closed_form_matches_autograd_and_the_full_matrix():
    x = torch.randn(5, 7, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 3
    for row in x:
        J = torch.autograd.functional.jacobian(lambda s: torch.softmax(s, -1), row)  # (7, 7)
        assert math.isclose(float(jacobian_norm_rows(row.numpy()[None])[0]), float(torch.linalg.norm(J)), rel_tol=1e-12)
    p = torch.softmax(x, -1).numpy()
    np.testing.assert_allclose(jacobian_norm_rows(x.numpy()), softmax_jacobian_norm(p), rtol=1e-12)


def test_floor_is_the_uniform_rows_norm_and_a_shift_changes_nothing():
    for S in (1, 2, 16, 64):
        assert math.isclose(float(jacobian_norm_rows(np.zeros((1, S)))[0]), jacobian_floor(S), rel_tol=1e-12, abs_tol=1e-15)
    x = np.random.default_rng(1).normal(size=(10, 64)) * 4
    np.testing.assert_allclose(jacobian_norm_rows(x + 123.0), jacobian_norm_rows(x), rtol=1e-10)  # softmax is shift-invariant
    assert np.all(np.isfinite(jacobian_norm_rows(x * 1e4)))  # huge logits: no overflow


def test_band_of_a_known_curve():
    s = np.geomspace(0.01, 100, 2001)
    floor = 0.1
    y = floor + np.exp(-np.log(s) ** 2 / 2)  # half height above the floor at log s = +-sqrt(2 ln 2)
    b = half_maximum_band(s, y, floor)
    edge = math.exp(math.sqrt(2 * math.log(2)))
    assert math.isclose(b.lo, 1 / edge, rel_tol=1e-4) and math.isclose(b.hi, edge, rel_tol=1e-4)
    assert math.isclose(b.peak, 1.0, rel_tol=1e-2)


def test_band_rejects_bad_curves():
    s = np.geomspace(0.1, 10, 5)
    with pytest.raises(ValueError, match="increasing"):
        half_maximum_band(s[::-1], np.ones(5), 0.0)
    with pytest.raises(ValueError, match="both sides"):
        half_maximum_band(s, np.arange(5.0), 0.0)  # still rising at the end of the grid


def test_spread_curve_starts_at_the_floor_and_ends_at_zero():
    J = jacobian_vs_spread([1e-4, 1e3], n_keys=32, n_rows=256)
    assert math.isclose(J[0], jacobian_floor(32), rel_tol=1e-3) and J[1] < 1e-6
    J_qk = jacobian_vs_spread([1e-4, 1.0], n_keys=32, n_rows=256, d_k=16)
    assert math.isclose(J_qk[0], jacobian_floor(32), rel_tol=1e-3) and J_qk[1] > J_qk[0]


@given(st.integers(2, 64), st.floats(5.0, 40.0), st.integers(0, 2**31 - 1))
@settings(max_examples=60, deadline=None)
def test_nearly_one_hot_rows_keep_their_relative_accuracy(S, gap, seed):
    """One logit `gap` above the rest: ||J||_F is about sqrt(2) * (1 - p_max), as small as 1e-17.
    Against the explicit matrix diag(p) - p p^T in extended precision (np.longdouble, its diagonal
    p_i (1 - p_i) with 1 - p_i summed from the others), the closed form holds to 1e-12 relative; the
    shorter p2 - 2 p3 + p2^2 loses every digit there."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=S)
    x[0] = x.max() + gap
    z = (x - x.max()).astype(np.longdouble)
    p = np.exp(z) / np.exp(z).sum()  # (S,)
    others = np.array([p[np.arange(S) != i].sum() for i in range(S)])  # (S,) 1 - p_i without cancelling
    J = -np.outer(p, p)  # (S, S)
    J[np.diag_indices(S)] = p * others  # diag(p) - p p^T, each entry accurate to its own size
    want = float(np.sqrt((J * J).sum()))
    got = float(jacobian_norm_rows(x[None])[0])
    assert math.isclose(got, want, rel_tol=1e-12), (got, want)
