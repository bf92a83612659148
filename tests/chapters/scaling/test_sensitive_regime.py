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


# ------------------------------------------------------------------ the essay's definition: the flow band
from attention_course.chapters.scaling.sensitive_regime import (  # noqa: E402
    flow_band, gradient_vs_spread, largest_rows_in_band, passed_gradient)


def test_jg_is_the_vector_jacobian_product_autograd_computes():
    """The median |J g| of one row (n_rows=1) is torch's backward of softmax with upstream g."""
    s = [0.3, 2.0, 9.0]
    G = gradient_vs_spread(s, n_keys=12, n_rows=1, seed=3)
    z = np.random.default_rng(3).standard_normal((1, 12))
    g = torch.from_numpy(np.random.default_rng([3, 1]).standard_normal((1, 12)))
    for sg, got in zip(s, G):
        x = torch.tensor(sg * z, requires_grad=True)
        torch.softmax(x, -1).backward(g)
        assert math.isclose(got, float(x.grad.norm()), rel_tol=1e-9)  # a nearly one-hot row: g - p.g cancels


def test_flow_band_of_a_known_curve_and_a_curve_that_starts_inside():
    s = np.geomspace(0.01, 100, 2001)
    b = flow_band(s, np.exp(-np.log(s) ** 2 / 2), 0.5)  # half at log s = +-sqrt(2 ln 2)
    edge = math.exp(math.sqrt(2 * math.log(2)))
    assert math.isclose(b.lo, 1 / edge, rel_tol=1e-4) and math.isclose(b.hi, edge, rel_tol=1e-4)
    b0 = flow_band(s, 1 / (1 + s), 0.5)  # largest at the first point: the band starts at 0
    assert b0.lo == 0.0 and math.isclose(b0.hi, 1.0, rel_tol=0.03)  # 1/(1+s) = 1/2 at s = 1; log-linear between grid points


def test_flow_band_rejects_bad_input():
    s = np.geomspace(0.1, 10, 5)
    with pytest.raises(ValueError, match="0 < theta < 1"):
        flow_band(s, np.ones(5), 1.5)
    with pytest.raises(ValueError, match="widen the grid"):
        flow_band(s, np.arange(5.0))
    with pytest.raises(ValueError, match="measure='x'"):
        gradient_vs_spread([1.0], measure="x")


def test_the_unscaled_spread_fails_and_sigma_1_passes_at_16_keys():
    """The baseline can fail: sigma = 32 (d_k = 1024 unscaled) passes under 1% of the peak gradient."""
    s = np.geomspace(0.05, 50, 61)
    G = gradient_vs_spread(s, n_keys=16, n_rows=512)
    b = flow_band(s, G)
    assert b.lo <= 1 <= b.hi < 32
    assert np.interp(np.log(32), np.log(s), G) < 0.01 * G.max()


def test_passed_gradient_is_torchs_backward_and_names_bad_shapes():
    rng = np.random.default_rng(4)
    x, g = rng.normal(size=(3, 5, 7)) * 3, rng.normal(size=(3, 5, 7))  # (heads, T, S)
    xt = torch.tensor(x, requires_grad=True)
    torch.softmax(xt, -1).backward(torch.from_numpy(g))
    torch.testing.assert_close(torch.from_numpy(passed_gradient(x, g)), xt.grad, rtol=1e-12, atol=1e-15)
    with pytest.raises(ValueError, match=r"logits has shape \(3, 7\) and g \(3, 6\)"):
        passed_gradient(np.zeros((3, 7)), np.zeros((3, 6)))


def test_the_number_does_not_move_when_attention_does_not():
    """q -> aq with k -> k/a, one vector added to every key, permuted heads: the logits' softmax is unchanged."""
    rng = np.random.default_rng(0)
    q, k, c = rng.normal(size=(3, 8, 16)), rng.normal(size=(3, 20, 16)), rng.normal(size=16)  # (heads, T|S, d_k)
    g = rng.normal(size=(3, 8, 20))  # (heads, T, S) upstream gradient

    def jg(q, k, g=g):
        x = q @ np.swapaxes(k, -1, -2) / 4.0  # (heads, T, S)
        p = np.exp(x - x.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        return np.linalg.norm(p * (g - (p * g).sum(-1, keepdims=True)), axis=-1)  # (heads, T)
    ref = jg(q, k)
    np.testing.assert_allclose(jg(2.0 * q, k / 2.0), ref, rtol=1e-12)
    np.testing.assert_allclose(jg(q, k + c), ref, rtol=1e-9)
    perm = [2, 0, 1]
    np.testing.assert_allclose(jg(q[perm], k[perm], g[perm]), ref[perm], rtol=1e-12)


def test_the_sweep_of_rows_in_the_band():
    s = np.geomspace(0.05, 50, 61)
    curves = {S: gradient_vs_spread(s, n_keys=S, n_rows=256) for S in (16, 64, 256)}
    big = largest_rows_in_band(s, curves, [0.3, 0.5, 0.7])
    assert np.all(np.diff(big) <= 0)  # a stricter threshold never admits longer rows


# ------------------------------------------------------------------ the typical row against the uniform row
from attention_course.chapters.scaling.sensitive_regime import (  # noqa: E402
    flow_ratio, gradient_vs_spread, query_gradient_norms, typical_row_verdict)


def test_flow_ratio_is_one_for_the_uniform_row_and_uses_its_closed_form():
    assert flow_ratio([0.0], n_keys=32, n_rows=256)[0] == 1.0
    g = np.random.default_rng([0, 1]).standard_normal((256, 32))  # gradient_vs_spread's upstream gradients
    uniform = np.median(np.linalg.norm((g - g.mean(-1, keepdims=True)) / 32, axis=-1))  # $(g - \bar g)/S$
    assert abs(gradient_vs_spread([0.0], n_keys=32, n_rows=256)[0] - uniform) < 1e-15


def test_statistics_differ_where_the_tail_is_heavy():
    """At sigma = 32 the typical row is saturated but a few near-tied rows are not: median << mean < rms."""
    med, mean, rms = (flow_ratio([32.0], 64, 4096, stat=s)[0] for s in ("median", "mean", "rms"))
    assert med < 0.01 < 0.2 < mean < rms
    with pytest.raises(ValueError, match="stat='max'"):
        gradient_vs_spread([1.0], stat="max")


def test_typical_row_verdict_can_come_out_every_way():
    r1 = {16: 1.2, 64: 1.4, 256: 1.5}
    assert typical_row_verdict(r1, 0.001, 0.44) == "holds"
    assert typical_row_verdict(r1, 0.001, 0.44, theta=0.4) == "holds when typical"
    assert typical_row_verdict({16: 1.2, 64: 1.4, 256: 0.3}, 0.001, 0.1) == "holds when S"
    assert typical_row_verdict({16: 0.2, 64: 0.3, 256: 1.5}, 0.001, 0.1) == "wrong as stated"
    assert typical_row_verdict(r1, 0.6, 0.9) == "undecided"


def autograd_query_gradient_norms(d_k, S, rows, seed, scaled):
    """The reference: explicit Gaussian q, k and g, and the norm of dL/dq that torch's backward computes."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(rows, d_k, generator=gen, dtype=torch.float64, requires_grad=True)
    k = torch.randn(rows, S, d_k, generator=gen, dtype=torch.float64)
    g = torch.randn(rows, S, generator=gen, dtype=torch.float64)
    c = math.sqrt(d_k) if scaled else 1.0
    p = torch.softmax(torch.einsum("rd,rsd->rs", q, k) / c, -1)
    (p * g).sum().backward()
    return q.grad.norm(dim=-1).numpy()


@pytest.mark.parametrize("d_k, S, scaled", [(2, 5, True), (4, 3, False), (16, 5, True), (64, 8, False), (64, 8, True)])
def test_query_gradient_has_the_distribution_of_the_autograd_gradient(d_k, S, scaled):
    # the function samples the norm through a one-dimensional reduction; 20,000 explicit rows through torch's
    # backward must be indistinguishable from it (two-sample Kolmogorov-Smirnov). Dropping the 1/c factor, the
    # component along q, or using chi2 with d_k degrees of freedom for the rest each fail here.
    from scipy.stats import ks_2samp
    rows = 20_000
    got = query_gradient_norms(d_k, S, rows, seed=4, scaled=scaled)
    ref = autograd_query_gradient_norms(d_k, S, rows, seed=4, scaled=scaled)
    assert ks_2samp(got, ref).pvalue > 1e-3, (np.median(got), np.median(ref))
