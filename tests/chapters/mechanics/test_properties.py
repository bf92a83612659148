"""Tests for attention_course.chapters.mechanics.properties: chapter 1's random-problem experiments.

References: float rounding bounds, deliberately broken attention functions (which
the measurements must catch), an angular test of whether the origin is inside a
hull, torch's own scaled_dot_product_attention and torch.distributions.Categorical (entropy).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attention_course.core.attention import scaled_dot_product_attention
from attention_course.chapters.mechanics.properties import (
    MISTAKES,
    fraction_in_hull,
    naive_attention,
    random_attention_problem,
    row_entropy,
    row_sum_errors,
    torch_agreement,
)


def test_random_problem_sizes_and_draw_order():
    rng = np.random.default_rng(3)
    sizes = set()
    for _ in range(300):
        q, k, v = random_attention_problem(rng, scale=1.0)
        T, d = q.shape
        S = k.shape[0]
        assert k.shape == (S, d) and v.shape == (S, 3)
        sizes.update((T, S, d))
    assert sizes == set(range(1, 12))  # every size from 1 to 11 occurs
    ref = np.random.default_rng(0)  # the documented order: three sizes, then q, k, v
    T, S, d = ref.integers(1, 12, size=3)
    q_ref = ref.normal(size=(T, d)) * 2.0
    q, _, _ = random_attention_problem(np.random.default_rng(0), scale=2.0)
    np.testing.assert_array_equal(q, q_ref)


def test_row_sums_within_the_rounding_bound():
    errors = row_sum_errors(np.random.default_rng(0), n_problems=300)
    # at most S + 2 = 13 roundings of at most eps each per row sum
    assert errors.worst["float64"] < 13 * np.finfo(np.float64).eps
    assert errors.worst["float32"] < 13 * np.finfo(np.float32).eps
    assert errors.min_weight >= 0


def test_row_sum_errors_catch_a_broken_softmax():
    def too_big(q, k, v):  # rows sum to 1.001
        out, w = scaled_dot_product_attention(q, k, v)
        return out, w * 1.001

    errors = row_sum_errors(np.random.default_rng(1), n_problems=20, dtypes=("float64",), attention=too_big)
    assert errors.worst["float64"] == pytest.approx(1e-3, rel=1e-9)

    errors = row_sum_errors(np.random.default_rng(2), n_problems=20, dtypes=("float32",),
                            log10_scale=(1.5, 2.0), attention=naive_attention)
    assert errors.worst["float32"] == np.inf


def test_naive_attention_is_attention_until_exp_overflows():
    """Against the package (float64, small logits, a batch), then where exp overflows: NaN, in q's precision."""
    rng = np.random.default_rng(3)
    q, k, v = rng.normal(size=(2, 4, 3)), rng.normal(size=(2, 5, 3)), rng.normal(size=(2, 5, 2))  # (B, T, d)...
    for got, want in zip(naive_attention(q, k, v), scaled_dot_product_attention(q, k, v)):
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)
    big = [a.astype(np.float32) * 10 for a in (q, k, v)]  # logits up to about 100 * |q.k|: past float32's e^88
    out, w = naive_attention(*big)
    assert w.dtype == np.float32 and np.isnan(w).any()
    assert not np.isnan(scaled_dot_product_attention(*big)[1]).any()  # the max-subtracted softmax copes


def test_each_mistake_is_its_torch_spelling():
    """The two wrong attentions are torch's SDPA with the scale 1/d_k, and with the boolean mask inverted."""
    g = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(2, 5, n, 4, generator=g, dtype=torch.float64) for n in (3, 6, 6))  # (B, h, T or S, 4)
    torch.testing.assert_close(MISTAKES["scale 1/d_k"](q, k, v)[0],
                               torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=1 / 4))
    allowed = torch.rand(3, 6, generator=g) > 0.5  # (T, S): what torch is told may attend
    allowed[:, 0] = True  # every query keeps a key
    for blocked in (~allowed, (~allowed).numpy()):  # the mistake reads True as blocked, for torch and numpy masks
        out = MISTAKES["mask True = blocked"](q, k, v, mask=blocked)[0]
        torch.testing.assert_close(out, torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=allowed))


def test_torch_agreement_catches_each_mistake_where_it_changes_the_computation():
    failing = {name: {case for case, gap in torch_agreement(seed=0, attention=wrong).items() if gap > 1e-3}
               for name, wrong in MISTAKES.items()}
    assert failing == {"scale 1/d_k": {"no mask", "boolean mask", "float mask", "causal, T != S"},
                       "mask True = blocked": {"boolean mask", "causal, T != S"}}
    passing = torch_agreement(seed=0, attention=MISTAKES["scale 1/d_k"])["scale = 0.3"]
    assert passing < 1e-12  # an explicit scale is kept: there the mistake changes nothing


def _origin_in_hull(points):
    """The origin is in the convex hull of 2-D points iff no open half-plane through it holds them all,
    i.e. iff no angular gap between consecutive points (seen from the origin) exceeds pi."""
    if np.any(np.all(np.isclose(points, 0.0), axis=1)):
        return True
    angles = np.sort(np.arctan2(points[:, 1], points[:, 0]))
    gaps = np.diff(np.concatenate([angles, angles[:1] + 2 * np.pi]))
    return gaps.max() <= np.pi


def test_fraction_in_hull_without_dropout_is_one():
    assert fraction_in_hull(np.random.default_rng(4), n_problems=100) == 1.0


def test_fraction_in_hull_with_a_masked_row_matches_the_origin_test():
    n = 200
    got = fraction_in_hull(np.random.default_rng(5), n_problems=n, mask_row=True)
    rng, total, outside = np.random.default_rng(5), 0, 0  # replay the documented draws
    for _ in range(n):
        T, S = rng.integers(3, 10, size=2)
        rng.normal(size=(T, 4)), rng.normal(size=(S, 4))
        v = rng.normal(size=(S, 2))
        total += T
        outside += not _origin_in_hull(v)  # only the masked row (output 0) can be outside
    assert 0 < outside < n
    assert got == pytest.approx(1 - outside / total, abs=1e-15)


def test_dropout_moves_outputs_out_and_rate_is_checked():
    assert fraction_in_hull(np.random.default_rng(6), n_problems=100, dropout=0.5) < 0.9
    for p in (-0.1, 1.0):
        with pytest.raises(ValueError, match=r"dropout=.*; expected a rate p with 0 <= p < 1"):
            fraction_in_hull(np.random.default_rng(0), dropout=p)


@pytest.mark.parametrize("seed", [0, 1])
def test_torch_agreement(seed):
    gaps = torch_agreement(seed=seed)
    assert list(gaps) == ["no mask", "boolean mask", "float mask", "causal, T != S", "scale = 0.3"]
    assert max(gaps.values()) < 1e-12  # float64 on O(1) outputs: about 1e-15 is round-off


def test_row_entropy_matches_torch_categorical_with_zeros():
    p = torch.from_numpy(np.random.default_rng(7).dirichlet(np.full(7, 0.5), size=(4, 3)))  # (4, 3, 7)
    p[0, 0] = torch.tensor([1.0, 0, 0, 0, 0, 0, 0])  # one-hot: 0
    p[1, 2, :3] = 0.0
    p[1, 2] /= p[1, 2].sum()  # zeros inside a row: 0 log 0 = 0
    ref = torch.distributions.Categorical(probs=p).entropy()  # (4, 3)
    # float64, 7 terms of size <= 1/e each: the sums agree to a few eps
    torch.testing.assert_close(row_entropy(p), ref, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(row_entropy(p.numpy()), ref.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(row_entropy(p.numpy().swapaxes(1, 2), axis=1), ref.numpy(),
                               rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(row_entropy(p.log().exp().numpy(), log_p=p.log().numpy()), ref.numpy(),
                               rtol=1e-12, atol=1e-14)  # a given log p is used (here log 0 = -inf, masked)
    h = row_entropy(np.array([[0, 1, 0]]))  # integers are read as float64
    assert h.dtype == np.float64 and h.tolist() == [0.0]


def test_row_entropy_gradient_is_finite_at_zero_weights():
    p = torch.tensor([0.5, 0.5, 0.0], dtype=torch.float64, requires_grad=True)
    row_entropy(p).backward()
    # dH/dp_j = -(log p_j + 1) where p_j > 0; the zero entry is masked: gradient 0, not NaN
    expected = torch.tensor([math.log(2) - 1, math.log(2) - 1, 0.0], dtype=torch.float64)
    torch.testing.assert_close(p.grad, expected)
