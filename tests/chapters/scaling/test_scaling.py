"""chapters/scaling/measures.py: the variance argument, softmax saturation, the softmax Jacobian
and the variance of a BERT encoder's query-key products (its queries and keys are tested in
tests/models/test_queries_keys.py).

References used: torch.autograd (Jacobian), numpy.linalg (norms, eigenvalues), mpmath at 150
digits (norms of nearly one-hot rows) and torch.distributions.Categorical (entropy).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from attention_course import ShapeError
from attention_course.chapters.lowrank.baselines import loglog_slope
from attention_course.chapters.scaling.measures import (dot_product_variance, dot_variance_standard_error,
                                                        pair_logit_variance, resolve_scale, saturation_stats,
                                                        softmax_entropy, softmax_jacobian, softmax_jacobian_norm,
                                                        variance_vs_dim)

TOL = dict(rtol=1e-12, atol=1e-12)
logit_rows = arrays(
    np.float64,
    st.tuples(st.integers(1, 4), st.integers(1, 12)),
    elements=st.floats(-30, 30, allow_nan=False),
)


# ------------------------------------------------------------------ scale names
@pytest.mark.parametrize(
    "scale,expected", [("sqrt", 1 / 16), ("none", 1.0), ("mup", 1 / 256), (0.3, 0.3), (2, 2.0)]
)
def test_resolve_scale(scale, expected):
    assert resolve_scale(256, scale) == expected


@pytest.mark.parametrize("d_k", [0, -4, 2.5])
def test_bad_d_k_is_named(d_k):
    with pytest.raises(ValueError, match=rf"d_k={d_k}.*positive integer"):
        resolve_scale(d_k)


@pytest.mark.parametrize("scale", ["sqrtt", "SQRT", "1/d"])
def test_unknown_scale_name_is_named(scale):
    with pytest.raises(ValueError, match=rf"unknown scale '{scale}'.*'sqrt', 'none', 'mup'"):
        resolve_scale(64, scale)


@pytest.mark.parametrize("scale", [0.0, -1.0, float("inf")])
def test_non_positive_scale(scale):
    with pytest.raises(ValueError, match=r"scale=.*positive finite number"):
        resolve_scale(64, scale)


def test_sweeps_reject_bad_dimensions():
    with pytest.raises(ValueError, match=r"d_k=0"):
        variance_vs_dim([4, 0], n_samples=10)
    with pytest.raises(ValueError, match=r"d_k=-8"):
        saturation_stats([-8])
    with pytest.raises(ValueError, match=r"unknown scale 'root'"):
        saturation_stats([4], scale="root")
    with pytest.raises(ValueError, match=r"n_keys=0"):
        saturation_stats([4], n_keys=0)
    with pytest.raises(ValueError, match=r"threshold=1.5"):
        saturation_stats([4], threshold=1.5)
    with pytest.raises(ValueError, match=r"var_q=0"):
        variance_vs_dim([4], var_q=0)


# --------------------------------------------------------------------- variance
def test_dot_product_variance_matches_numpy_and_torch():
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(3, 50, 7)), rng.normal(loc=0.5, size=(3, 50, 7))
    expected = np.var(np.einsum("...d,...d->...", q, k))
    assert dot_product_variance(q, k) == pytest.approx(expected, rel=1e-13)
    got_t = dot_product_variance(torch.from_numpy(q), torch.from_numpy(k))
    assert got_t == pytest.approx(expected, rel=1e-13)


def test_dot_product_variance_shape_error():
    with pytest.raises(ShapeError, match=r"q has shape \(10, 4\) but k has shape \(10, 5\)"):
        dot_product_variance(np.zeros((10, 4)), np.zeros((10, 5)))


@pytest.mark.parametrize("scale", ["none", "sqrt", "mup"])
@pytest.mark.parametrize("var_q,var_k", [(1.0, 1.0), (2.0, 0.25)])
def test_variance_matches_theory_within_monte_carlo_error(scale, var_q, var_k):
    # Var(c q.k) = c^2 d_k var_q var_k. With Gaussian entries the estimate has relative
    # standard error sqrt((2 + 6/d_k)/N) (kurtosis of q.k is 3 + 6/d_k); 4 standard
    # errors is a two-sided 6e-5 false-alarm rate, and the seed is fixed.
    dims = [1, 4, 64, 512]
    r = variance_vs_dim(dims, n_samples=8000, var_q=var_q, var_k=var_k, scale=scale, seed=3)
    c = np.array([resolve_scale(d, scale) for d in dims])
    np.testing.assert_allclose(r.theory, c**2 * np.array(dims) * var_q * var_k, rtol=1e-15)
    assert np.all(np.abs(r.empirical - r.theory) < 4 * r.std_error)


def test_standard_error_formula_matches_the_spread_of_estimates():
    # 300 independent estimates at d_k = 2, N = 400: their spread should match the formula.
    estimates = [variance_vs_dim([2], n_samples=400, seed=s).empirical[0] for s in range(300)]
    predicted = 2.0 * dot_variance_standard_error(2, 400)
    # the sd of 300 draws is itself uncertain by about 1/sqrt(2*300) = 4%; allow 15%.
    assert np.std(estimates) == pytest.approx(predicted, rel=0.15)


def test_variance_grows_linearly_in_d_k():
    r = variance_vs_dim([1, 4, 16, 64, 256, 1024], n_samples=4000)
    assert loglog_slope(r.d_k, r.empirical) == pytest.approx(1.0, abs=0.03)
    r = variance_vs_dim([1, 4, 16, 64, 256, 1024], n_samples=4000, scale="sqrt")
    assert abs(loglog_slope(r.d_k, r.empirical)) < 0.03


# ---------------------------------------------------------------------- entropy
def test_entropy_matches_torch_categorical():
    x = torch.randn(5, 9, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 3
    for tau in (0.1, 1.0, 7.0):
        ref = torch.distributions.Categorical(logits=x / tau).entropy()
        torch.testing.assert_close(softmax_entropy(x, temperature=tau), ref, **TOL)
        np.testing.assert_allclose(softmax_entropy(x.numpy(), temperature=tau), ref.numpy(), **TOL)


def test_entropy_other_axis_and_saturated_rows():
    x = np.random.default_rng(1).normal(size=(6, 4))
    np.testing.assert_allclose(softmax_entropy(x, axis=0), softmax_entropy(x.T), **TOL)
    sat = np.array([[1000.0, 0.0, -1000.0], [0.0, 0.0, 0.0]])
    np.testing.assert_allclose(softmax_entropy(sat), [0.0, math.log(3)], **TOL)  # no NaN


def test_entropy_gradient_in_temperature():
    # dH/dtau = Var_p(x) / tau^3: a learnable temperature gets this gradient from autograd.
    x = torch.tensor([2.0, -1.0, 0.5, 3.0], dtype=torch.float64)
    tau = torch.tensor(1.7, dtype=torch.float64, requires_grad=True)
    softmax_entropy(x, temperature=tau).backward()
    p = torch.softmax(x / tau.detach(), dim=-1)
    var = (p * x**2).sum() - (p * x).sum() ** 2
    torch.testing.assert_close(tau.grad, var / tau.detach() ** 3, **TOL)


@pytest.mark.parametrize("tau", [0.0, -1.0])
def test_entropy_bad_temperature(tau):
    with pytest.raises(ValueError, match=rf"temperature={tau}"):
        softmax_entropy(np.zeros(3), temperature=tau)


@settings(max_examples=60, deadline=None)
@given(logit_rows, st.floats(-50, 50), st.floats(0.05, 20))
def test_entropy_properties(x, shift, tau):
    h = softmax_entropy(x, temperature=tau)
    assert np.all(h >= -1e-12) and np.all(h <= math.log(x.shape[-1]) + 1e-12)
    np.testing.assert_allclose(softmax_entropy(x + shift, temperature=tau), h, atol=1e-9)
    assert np.all(softmax_entropy(x, temperature=2 * tau) >= h - 1e-9)  # monotone in tau


# --------------------------------------------------------------------- Jacobian
def test_jacobian_matches_autograd():
    x = torch.randn(3, 7, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 2
    for row in x:
        auto = torch.autograd.functional.jacobian(lambda s: torch.softmax(s, dim=-1), row)
        p = torch.softmax(row, dim=-1)
        torch.testing.assert_close(softmax_jacobian(p), auto, **TOL)
        np.testing.assert_allclose(softmax_jacobian(p.numpy()), auto.numpy(), **TOL)
    batched = softmax_jacobian(torch.softmax(x, dim=-1))  # (3, 7, 7)
    assert batched.shape == (3, 7, 7)
    torch.testing.assert_close(batched[1], softmax_jacobian(torch.softmax(x[1], dim=-1)), **TOL)


def test_jacobian_does_not_modify_its_input():
    p = np.array([0.2, 0.3, 0.5])
    softmax_jacobian(p)
    softmax_jacobian_norm(p)
    np.testing.assert_array_equal(p, [0.2, 0.3, 0.5])


@settings(max_examples=60, deadline=None)
@given(logit_rows, st.floats(-100, 100))
def test_jacobian_properties(x, shift):
    p = torch.softmax(torch.from_numpy(x), dim=-1).numpy()
    J = softmax_jacobian(p)
    np.testing.assert_allclose(J.sum(axis=-1), 0.0, atol=1e-15)  # rows sum to 0
    np.testing.assert_array_equal(J, np.swapaxes(J, -1, -2))  # symmetric
    assert np.all(np.linalg.eigvalsh(J) >= -1e-15)  # positive semi-definite
    p_shift = torch.softmax(torch.from_numpy(x + shift), dim=-1).numpy()  # shift invariance
    np.testing.assert_allclose(softmax_jacobian(p_shift), J, atol=1e-13)
    np.testing.assert_allclose(softmax_jacobian_norm(p), np.linalg.norm(J, axis=(-2, -1)), **TOL)
    np.testing.assert_allclose(
        softmax_jacobian_norm(p, "spectral"), np.linalg.norm(J, ord=2, axis=(-2, -1)), **TOL
    )


def test_jacobian_norm_of_nearly_one_hot_rows_has_full_relative_accuracy():
    logits = [[40.0, 0.0, -3.0], [200.0, 1.0, 0.0, 0.5], [20.0, 19.0, 0.0]]
    mpmath.mp.dps = 150  # 1 - p_max is 1e-87 for the second row: needs > 87 digits
    for row in logits:
        e = [mpmath.exp(mpmath.mpf(v)) for v in row]
        p_mp = [v / sum(e) for v in e]
        fro = mpmath.sqrt(
            sum(
                ((p_mp[i] if i == j else 0) - p_mp[i] * p_mp[j]) ** 2
                for i in range(len(row)) for j in range(len(row))
            )
        )
        p = torch.softmax(torch.tensor(row, dtype=torch.float64), dim=-1).numpy()
        assert softmax_jacobian_norm(p) == pytest.approx(float(fro), rel=1e-12, abs=0)


def test_jacobian_norm_uniform_and_errors():
    S = 64
    assert softmax_jacobian_norm(np.full(S, 1 / S)) == pytest.approx(math.sqrt(S - 1) / S, rel=1e-13)
    with pytest.raises(ValueError, match="ord='nuc'"):
        softmax_jacobian_norm(np.full(3, 1 / 3), ord="nuc")


# ------------------------------------------------------------------- saturation
DIMS = [1, 4, 16, 64, 256, 1024]


@pytest.fixture(scope="module")
def unscaled():
    return saturation_stats(DIMS, scale="none", n_batches=8)


@pytest.fixture(scope="module")
def scaled():
    return saturation_stats(DIMS, scale="sqrt", n_batches=8)


def test_unscaled_saturation_is_monotone_in_d_k(unscaled):
    assert np.all(np.diff(unscaled.max_weight) > 0)
    assert np.all(np.diff(unscaled.entropy) < 0)
    assert np.all(np.diff(unscaled.frac_saturated) >= 0)
    assert unscaled.frac_saturated[-1] > 0.5 and unscaled.max_weight[-1] > 0.9
    assert np.all(np.diff(unscaled.jacobian_norm[2:]) < 0)  # from d_k = 16 on, gradients vanish


def test_scaled_saturation_does_not_depend_on_d_k(scaled, unscaled):
    assert np.ptp(scaled.max_weight) < 0.02 and np.all(scaled.frac_saturated == 0)
    assert np.ptp(scaled.entropy) < 0.1
    np.testing.assert_allclose(scaled.scale, 1 / np.sqrt(DIMS), rtol=1e-15)
    np.testing.assert_allclose(scaled.score_gradient_norm, scaled.scale * scaled.jacobian_norm)
    # d_k = 1: 1/sqrt(1) = 1 and the draws are shared, so both sweeps agree exactly there
    assert scaled.jacobian_norm[0] == unscaled.jacobian_norm[0]
    # the caveat: at small d_k the *unscaled* Jacobian is the larger one, at large d_k the smaller
    assert unscaled.jacobian_norm[1] > scaled.jacobian_norm[1]  # d_k = 4
    assert unscaled.jacobian_norm[-1] < 0.01 * scaled.jacobian_norm[-1]  # d_k = 1024


def test_saturation_stats_match_a_direct_computation():
    r = saturation_stats([8], scale="sqrt", n_keys=5, n_queries=3, n_batches=2, threshold=0.3, seed=7)
    rng = np.random.default_rng([7, 8])
    q = torch.from_numpy(rng.standard_normal((2, 3, 8)))
    k = torch.from_numpy(rng.standard_normal((2, 5, 8)))
    s = torch.einsum("btd,bsd->bts", q, k) / math.sqrt(8)
    p = torch.softmax(s, dim=-1).reshape(6, 5)
    jac = [torch.linalg.matrix_norm(torch.autograd.functional.jacobian(
        lambda z: torch.softmax(z, dim=-1), row)) for row in s.reshape(6, 5)]
    assert r.max_weight[0] == pytest.approx(p.max(-1).values.mean().item(), rel=1e-12)
    assert r.frac_saturated[0] == pytest.approx((p.max(-1).values > 0.3).double().mean().item())
    ent = torch.distributions.Categorical(probs=p).entropy().mean().item()
    assert r.entropy[0] == pytest.approx(ent, rel=1e-12)
    assert r.jacobian_norm[0] == pytest.approx(np.median(torch.stack(jac).numpy()), rel=1e-12)


# ------------------------------------------------------ a pretrained model


def test_pair_logit_variance_matches_a_loop_and_ignores_padding():
    rng = np.random.default_rng(3)
    q, k = rng.normal(1.0, 2.0, size=(2, 2, 5, 3)), rng.normal(size=(2, 2, 5, 3))
    valid = np.array([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]], bool)
    measured, theory = pair_logit_variance(q, k, valid)
    for head in range(2):
        pairs = [(b, i, j) for b in range(2) for i in range(5) for j in range(5) if valid[b, i] and valid[b, j]]
        dots = [q[b, head, i] @ k[b, head, j] for b, i, j in pairs]
        q_entries = np.concatenate([q[b, head, i] for b in range(2) for i in range(5) if valid[b, i]])
        k_entries = np.concatenate([k[b, head, i] for b in range(2) for i in range(5) if valid[b, i]])
        assert measured[head] == pytest.approx(np.var(dots), rel=1e-12)
        assert theory[head] == pytest.approx(3 * np.var(q_entries) * np.var(k_entries), rel=1e-12)
    q2 = q.copy()
    q2[1, :, 3:] = 1e6  # padding: must not matter
    np.testing.assert_array_equal(pair_logit_variance(q2, k, valid)[0], measured)
    torch_result = pair_logit_variance(torch.as_tensor(q), torch.as_tensor(k), torch.as_tensor(valid))
    np.testing.assert_allclose(torch_result, (measured, theory), rtol=1e-12)


def test_pair_logit_variance_detects_aligned_queries_and_keys():
    rng = np.random.default_rng(4)
    k = rng.normal(size=(20, 1, 16, 32))
    q = k + 0.5 * rng.normal(size=k.shape)  # q shares k's direction
    measured, theory = pair_logit_variance(q, k)
    assert measured[0] > 1.5 * theory[0]


def test_pair_logit_variance_shape_errors():
    q = np.zeros((2, 3, 4, 5))
    with pytest.raises(ShapeError, match=r"q has shape \(2, 3, 4, 5\) and k has shape \(2, 3, 4, 6\)"):
        pair_logit_variance(q, np.zeros((2, 3, 4, 6)))
    with pytest.raises(ShapeError, match=r"valid has shape \(2, 5\).*expected \(B, T\) = \(2, 4\)"):
        pair_logit_variance(q, q, np.ones((2, 5), bool))
