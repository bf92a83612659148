"""attention.py against torch's SDPA, plus properties and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course import ShapeError, causal_mask, padding_mask, scaled_dot_product_attention, softmax

TOL = dict(rtol=1e-12, atol=1e-12)


def _qkv(batch, T, S, d_k, d_v, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(*batch, T, d_k, generator=g, dtype=dtype)
    k = torch.randn(*batch, S, d_k, generator=g, dtype=dtype)
    v = torch.randn(*batch, S, d_v, generator=g, dtype=dtype)
    return q, k, v


def _torch_doc_reference(q, k, v, attn_mask=None, scale=None):
    """The reference implementation printed in torch's SDPA documentation (NaN on empty rows)."""
    L, S = q.size(-2), k.size(-2)
    scale_factor = 1 / math.sqrt(q.size(-1)) if scale is None else scale
    attn_bias = torch.zeros(L, S, dtype=q.dtype)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            attn_bias = attn_bias.masked_fill(attn_mask.logical_not(), float("-inf"))
        else:
            attn_bias = attn_mask + attn_bias
    w = torch.softmax(q @ k.transpose(-2, -1) * scale_factor + attn_bias, dim=-1)
    return w @ v, w


# ------------------------------------------------------------- torch agreement
@pytest.mark.parametrize("batch", [(), (3,), (2, 4)])
@pytest.mark.parametrize("T,S", [(5, 5), (3, 7), (6, 2), (1, 4)])
def test_matches_torch_sdpa_without_mask(batch, T, S):
    q, k, v = _qkv(batch, T, S, 8, 3)
    out, w = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), **TOL)
    torch.testing.assert_close(w, _torch_doc_reference(q, k, v)[1], **TOL)


@pytest.mark.parametrize("batch", [(), (3,), (2, 4)])
def test_matches_torch_with_boolean_mask(batch):
    q, k, v = _qkv(batch, 4, 6, 5, 2, seed=1)
    mask = torch.rand(*batch, 4, 6, generator=torch.Generator().manual_seed(2)) > 0.4
    mask[..., 0] = True  # every query sees at least one key
    out, _ = scaled_dot_product_attention(q, k, v, mask=mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), **TOL)


def test_matches_torch_with_float_mask_and_scale():
    q, k, v = _qkv((2,), 4, 6, 5, 2, seed=3)
    fmask = torch.randn(4, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    out, _ = scaled_dot_product_attention(q, k, v, mask=fmask, scale=0.37)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=fmask, scale=0.37)
    torch.testing.assert_close(out, ref, **TOL)


@pytest.mark.parametrize("T,S", [(4, 4), (3, 7), (7, 3)])
def test_causal_mask_matches_torch_is_causal(T, S):
    q, k, v = _qkv((2, 3), T, S, 8, 4, seed=5)
    out, w = scaled_dot_product_attention(q, k, v, mask=causal_mask(T, S))
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True), **TOL)
    assert torch.all(w[..., ~torch.as_tensor(causal_mask(T, S))] == 0)


def test_gradients_match_torch():
    q, k, v = (t.requires_grad_() for t in _qkv((2,), 4, 5, 6, 3, seed=6))
    q2, k2, v2 = (t.detach().clone().requires_grad_() for t in (q, k, v))
    mask = torch.as_tensor(causal_mask(4, 5))
    upstream = torch.randn(2, 4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(7))
    (scaled_dot_product_attention(q, k, v, mask=mask)[0] * upstream).sum().backward()
    (F.scaled_dot_product_attention(q2, k2, v2, attn_mask=mask) * upstream).sum().backward()
    for a, b in ((q, q2), (k, k2), (v, v2)):
        torch.testing.assert_close(a.grad, b.grad, **TOL)


def test_numpy_and_torch_agree():
    q, k, v = _qkv((2,), 3, 5, 4, 2, seed=8)
    mask = causal_mask(3, 5)
    out_t, w_t = scaled_dot_product_attention(q, k, v, mask=mask)
    out_n, w_n = scaled_dot_product_attention(q.numpy(), k.numpy(), v.numpy(), mask=mask)
    assert isinstance(out_n, np.ndarray) and isinstance(out_t, torch.Tensor)
    np.testing.assert_allclose(out_n, out_t.numpy(), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(w_n, w_t.numpy(), rtol=1e-13, atol=1e-13)


# ------------------------------------------------------------ fully masked rows
def test_fully_masked_row_gives_zero_weights_and_output():
    q, k, v = _qkv((), 3, 4, 5, 2, seed=9)
    mask = torch.ones(3, 4, dtype=torch.bool)
    mask[1] = False
    for backend in (lambda t: t, lambda t: t.numpy()):
        out, w = scaled_dot_product_attention(backend(q), backend(k), backend(v), mask=backend(mask))
        assert np.all(np.asarray(w)[1] == 0) and np.all(np.asarray(out)[1] == 0)
        assert np.all(np.isfinite(np.asarray(out)))
    # torch's documented reference gives NaN there: our choice differs on purpose.
    assert torch.isnan(_torch_doc_reference(q, k, v, attn_mask=mask)[0][1]).all()
    # and torch's own kernel gives zeros, like us
    assert torch.all(F.scaled_dot_product_attention(q, k, v, attn_mask=mask)[1] == 0)


def test_fully_masked_row_has_finite_gradients():
    q, k, v = (t.requires_grad_() for t in _qkv((), 3, 4, 5, 2, seed=10))
    mask = torch.ones(3, 4, dtype=torch.bool)
    mask[0] = False
    scaled_dot_product_attention(q, k, v, mask=mask)[0].sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


# ---------------------------------------------------------------- softmax
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_finite_for_huge_logits(dtype):
    x = np.array([[1e4, -1e4, 0.0], [-1e4, -1e4 + 1, -1e4 + 2]], dtype=dtype)
    for arr in (x, torch.as_tensor(x)):
        p = np.asarray(softmax(arr))
        assert np.all(np.isfinite(p))
        np.testing.assert_allclose(p.sum(-1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(softmax(x)[0], [1.0, 0.0, 0.0])


def test_softmax_matches_torch_softmax_on_other_axes():
    x = np.random.default_rng(0).normal(size=(3, 4, 5))
    for axis in (0, 1, -1):
        np.testing.assert_allclose(softmax(x, axis=axis), torch.softmax(torch.as_tensor(x), dim=axis).numpy(), rtol=1e-13)


# ---------------------------------------------------------------- properties
shapes = st.tuples(
    st.lists(st.integers(1, 3), min_size=0, max_size=2),  # batch dims
    st.integers(1, 6),  # T (includes T = 1)
    st.integers(1, 6),  # S (independent of T)
    st.integers(1, 5),  # d_k
    st.integers(1, 4),  # d_v
    st.integers(0, 2**31 - 1),  # seed
    st.floats(0.01, 30.0),  # input scale
)


def _draw(batch, T, S, d_k, d_v, seed, scale):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(*batch, T, d_k)) * scale
    k = rng.normal(size=(*batch, S, d_k)) * scale
    v = rng.normal(size=(*batch, S, d_v))
    return q, k, v


@settings(max_examples=60, deadline=None)
@given(shapes)
def test_rows_are_distributions(params):
    q, k, v = _draw(*params)
    _, w = scaled_dot_product_attention(q, k, v)
    assert np.all(w >= 0)
    np.testing.assert_allclose(w.sum(-1), 1.0, rtol=1e-12)


@settings(max_examples=60, deadline=None)
@given(shapes)
def test_outputs_in_convex_hull_of_values(params):
    """For every direction u, min_j u.v_j <= u.o_i <= max_j u.v_j (supporting hyperplanes)."""
    q, k, v = _draw(*params)
    out, _ = scaled_dot_product_attention(q, k, v)
    u = np.random.default_rng(params[5]).normal(size=(16, v.shape[-1]))  # (16, d_v) directions
    proj_v = v @ u.T  # (..., S, 16)
    proj_o = out @ u.T  # (..., T, 16)
    lo = proj_v.min(axis=-2, keepdims=True)
    hi = proj_v.max(axis=-2, keepdims=True)
    assert np.all(proj_o >= lo - 1e-9) and np.all(proj_o <= hi + 1e-9)


@settings(max_examples=60, deadline=None)
@given(shapes, st.floats(-50, 50))
def test_softmax_shift_invariance(params, c):
    q, k, v = _draw(*params)
    x = q @ np.swapaxes(k, -1, -2)
    np.testing.assert_allclose(softmax(x + c), softmax(x), rtol=1e-9, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(shapes)
def test_permutation_equivariance(params):
    batch, T, S, d_k, d_v, seed, scale = params
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(*batch, T, 4)) * scale
    W_q, W_k, W_v = rng.normal(size=(3, 4, 4))
    perm = rng.permutation(T)
    out, _ = scaled_dot_product_attention(x @ W_q, x @ W_k, x @ W_v)
    out_p, _ = scaled_dot_product_attention(x[..., perm, :] @ W_q, x[..., perm, :] @ W_k, x[..., perm, :] @ W_v)
    np.testing.assert_allclose(out_p, out[..., perm, :], rtol=1e-10, atol=1e-10)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 8), st.integers(1, 8))
def test_causal_mask_zeroes_upper_triangle(T, S):
    q, k, v = _draw((), T, S, 3, 2, T * 10 + S, 3.0)
    _, w = scaled_dot_product_attention(q, k, v, mask=causal_mask(T, S))
    assert np.all(w[np.triu_indices(T, k=1, m=S)] == 0)
    np.testing.assert_allclose(w.sum(-1), 1.0)  # top-left alignment: every query sees key 0


def test_padding_mask():
    m = padding_mask([3, 1, 4], 4)
    assert m.shape == (3, 1, 4)
    assert m[0, 0].tolist() == [True, True, True, False]
    q, k, v = _qkv((3,), 2, 4, 3, 2, seed=11)
    _, w = scaled_dot_product_attention(q, k, v, mask=m)
    assert torch.all(w[1, :, 1:] == 0)


# ---------------------------------------------------------------- bad input
def test_mismatched_dk_names_both_shapes():
    q, k, v = np.zeros((2, 7, 64)), np.zeros((2, 7, 32)), np.zeros((2, 7, 5))
    with pytest.raises(ShapeError, match=r"k has shape \(2, 7, 32\).*q has shape \(2, 7, 64\).*d_k=64"):
        scaled_dot_product_attention(q, k, v)


def test_mismatched_S_between_k_and_v():
    with pytest.raises(ValueError, match=r"v has shape \(5, 2\) but k has shape \(6, 4\) \(S=6"):
        scaled_dot_product_attention(np.zeros((3, 4)), np.zeros((6, 4)), np.zeros((5, 2)))


def test_wrong_mask_shape():
    with pytest.raises(ValueError, match=r"mask has shape \(3, 5\).*\(3, 6\).*T=3 queries and S=6 keys"):
        scaled_dot_product_attention(np.zeros((3, 4)), np.zeros((6, 4)), np.zeros((6, 2)), mask=np.ones((3, 5), bool))


@pytest.mark.parametrize("bad", ["q", "k", "v"])
def test_integer_dtype_rejected(bad):
    arrays = {"q": np.zeros((3, 4)), "k": np.zeros((5, 4)), "v": np.zeros((5, 2))}
    arrays[bad] = arrays[bad].astype(int)
    with pytest.raises(ValueError, match=rf"{bad} has integer/boolean dtype int64 and shape"):
        scaled_dot_product_attention(**arrays)


def test_integer_mask_rejected():
    with pytest.raises(ValueError, match=r"mask has dtype int64 and shape \(3, 6\)"):
        scaled_dot_product_attention(np.zeros((3, 4)), np.zeros((6, 4)), np.zeros((6, 2)), mask=np.ones((3, 6), int))


def test_mixed_numpy_and_torch_rejected():
    with pytest.raises(ValueError, match="all be numpy arrays or all be torch tensors"):
        scaled_dot_product_attention(np.zeros((3, 4)), torch.zeros(5, 4), np.zeros((5, 2)))


def test_one_dimensional_input_rejected():
    with pytest.raises(ValueError, match=r"q has shape \(4,\); expected at least 2 dimensions"):
        scaled_dot_product_attention(np.zeros(4), np.zeros((5, 4)), np.zeros((5, 2)))


def test_batch_dims_that_do_not_broadcast():
    with pytest.raises(ValueError, match=r"batch dimensions of q \(2, 3, 4\), k \(3, 5, 4\)"):
        scaled_dot_product_attention(np.zeros((2, 3, 4)), np.zeros((3, 5, 4)), np.zeros((3, 5, 2)))


@pytest.mark.parametrize("lengths,S,match", [([5], 4, "between 0 and S=4"), ([-1], 4, "between 0 and S=4"), ([[1, 2]], 4, "1-D sequence")])
def test_padding_mask_bad_lengths(lengths, S, match):
    with pytest.raises(ValueError, match=match):
        padding_mask(lengths, S)


@pytest.mark.parametrize("T,S", [(0, 3), (2, -1), (1.5, 2)])
def test_causal_mask_bad_lengths(T, S):
    with pytest.raises(ValueError, match="expected a positive integer length"):
        causal_mask(T, S)
