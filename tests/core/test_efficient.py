"""Tests for attention_course.core.efficient: exactness of chunked and windowed attention,
top-k and linear attention against their quadratic forms, the online softmax step, and
error messages."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.core.attention import ShapeError, causal_mask, scaled_dot_product_attention
from attention_course.core.efficient import (
    chunked_attention,
    elu_feature_map,
    linear_attention,
    linear_attention_quadratic,
    local_window_attention,
    online_softmax_step,
    topk_attention,
)

F64 = dict(dtype=torch.float64)
EXACT = dict(rtol=0.0, atol=1e-12)


def qkv(T, S, d=8, d_v=5, batch=(), seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    q = scale * torch.randn(*batch, T, d, generator=g, **F64)
    k = scale * torch.randn(*batch, S, d, generator=g, **F64)
    v = torch.randn(*batch, S, d_v, generator=g, **F64)
    return q, k, v


# ---------------------------------------------------------------- chunked, exact
@settings(max_examples=60, deadline=None)
@given(
    T=st.integers(1, 13), S=st.integers(1, 13), block=st.integers(1, 16),
    qblock=st.one_of(st.none(), st.integers(1, 16)), seed=st.integers(0, 10_000),
)
def test_chunked_equals_exact_any_block_size(T, S, block, qblock, seed):
    q, k, v = qkv(T, S, batch=(2,), seed=seed, scale=2.0)
    out = chunked_attention(q, k, v, block_size=block, query_block_size=qblock)
    torch.testing.assert_close(out, scaled_dot_product_attention(q, k, v)[0], **EXACT)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), **EXACT)


@settings(max_examples=60, deadline=None)
@given(
    T=st.integers(1, 11), S=st.integers(1, 11), block=st.integers(1, 12),
    p_keep=st.sampled_from([0.0, 0.3, 0.7, 1.0]), seed=st.integers(0, 10_000),
)
def test_chunked_with_boolean_mask_matches_our_convention(T, S, block, p_keep, seed):
    q, k, v = qkv(T, S, batch=(2, 3), seed=seed)
    mask = torch.rand(2, 1, T, S, generator=torch.Generator().manual_seed(seed)) < p_keep
    out = chunked_attention(q, k, v, mask=mask, block_size=block)
    ref = scaled_dot_product_attention(q, k, v, mask=mask)[0]
    torch.testing.assert_close(out, ref, **EXACT)
    empty = ~mask.any(dim=-1)  # (2, 1, T): queries with no allowed key
    assert torch.all(out.masked_select(empty[..., None].expand_as(out)) == 0)  # exactly 0, not NaN


def test_chunked_mask_agrees_with_torch_sdpa_where_rows_are_not_empty():
    q, k, v = qkv(6, 9, batch=(2,), seed=3)
    mask = torch.rand(2, 6, 9, generator=torch.Generator().manual_seed(1)) < 0.5
    mask[..., 0] = True  # every query may attend to key 0, so torch gives no NaN
    torch.testing.assert_close(
        chunked_attention(q, k, v, mask=mask, block_size=4),
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask), **EXACT)


def test_chunked_float_mask_and_broadcast_key_padding():
    q, k, v = qkv(5, 7, batch=(2, 3), seed=4)
    fmask = torch.randn(5, 7, generator=torch.Generator().manual_seed(2), **F64)
    torch.testing.assert_close(
        chunked_attention(q, k, v, mask=fmask, block_size=2),
        F.scaled_dot_product_attention(q, k, v, attn_mask=fmask), **EXACT)
    pad = torch.tensor([True] * 4 + [False] * 3).reshape(1, 1, 1, 7)  # (B, h, 1, S)
    torch.testing.assert_close(
        chunked_attention(q, k, v, mask=pad, block_size=3),
        scaled_dot_product_attention(q, k, v, mask=pad)[0], **EXACT)


@pytest.mark.parametrize("T,S", [(7, 7), (4, 9), (9, 4)])
@pytest.mark.parametrize("block,qblock", [(1, None), (3, 2), (16, 5)])
def test_chunked_causal_matches_torch_is_causal(T, S, block, qblock):
    q, k, v = qkv(T, S, batch=(2,), seed=T * S)
    out = chunked_attention(q, k, v, causal=True, block_size=block, query_block_size=qblock)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True), **EXACT)
    torch.testing.assert_close(out, scaled_dot_product_attention(q, k, v, mask=causal_mask(T, S))[0], **EXACT)


def test_chunked_custom_scale_large_logits_and_gradients():
    q, k, v = qkv(6, 10, seed=5, scale=30.0)  # logits in the hundreds: the running max matters
    q.requires_grad_(True), k.requires_grad_(True), v.requires_grad_(True)
    out = chunked_attention(q, k, v, scale=0.3, block_size=3)
    ref = F.scaled_dot_product_attention(q, k, v, scale=0.3)
    torch.testing.assert_close(out, ref, **EXACT)
    g_out = torch.autograd.grad(out.sum(), (q, k, v))
    g_ref = torch.autograd.grad(ref.sum(), (q, k, v))
    for a, b in zip(g_out, g_ref):
        torch.testing.assert_close(a, b, rtol=0.0, atol=1e-10)


def test_chunked_accepts_numpy_and_returns_numpy():
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    out = chunked_attention(q, k, v, block_size=2, mask=causal_mask(3, 5))
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, scaled_dot_product_attention(q, k, v, mask=causal_mask(3, 5))[0],
                               rtol=0, atol=1e-12)


# --------------------------------------------------------------- local / top-k
@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 12), window=st.integers(0, 14), block=st.integers(1, 8),
       causal=st.booleans(), seed=st.integers(0, 1000))
def test_local_window_matches_band_mask(n, window, block, causal, seed):
    q, k, v = qkv(n, n, seed=seed)
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    band = (np.abs(i - j) <= window) & ((j <= i) if causal else True)
    out = local_window_attention(q, k, v, window=window, causal=causal, block_size=block)
    torch.testing.assert_close(out, scaled_dot_product_attention(q, k, v, mask=band)[0], **EXACT)


def test_local_window_at_least_n_is_exact():
    q, k, v = qkv(20, 20, batch=(2,), seed=6)
    for window in (20, 50):
        torch.testing.assert_close(local_window_attention(q, k, v, window=window, block_size=6),
                                   F.scaled_dot_product_attention(q, k, v), **EXACT)


def test_topk_matches_reference_and_is_exact_at_S():
    q, k, v = qkv(6, 9, seed=7)
    scores = (q @ k.T / math.sqrt(8)).numpy()
    keep = np.zeros_like(scores, dtype=bool)
    np.put_along_axis(keep, np.argsort(-scores, axis=-1)[:, :3], True, axis=-1)  # 3 best keys per row
    torch.testing.assert_close(topk_attention(q, k, v, top_k=3),
                               scaled_dot_product_attention(q, k, v, mask=keep)[0], **EXACT)
    torch.testing.assert_close(topk_attention(q, k, v, top_k=9), F.scaled_dot_product_attention(q, k, v), **EXACT)


# ------------------------------------------------------------- linear attention
def test_linear_attention_associative_equals_quadratic():
    q, k, v = qkv(7, 11, batch=(2,), seed=8)
    out, w = linear_attention_quadratic(q, k, v)
    torch.testing.assert_close(linear_attention(q, k, v), out, **EXACT)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 7, **F64), **EXACT)  # rows sum to 1
    sim = elu_feature_map(q) @ elu_feature_map(k).transpose(-2, -1)  # independent check of the weights
    torch.testing.assert_close(w, sim / sim.sum(-1, keepdim=True), **EXACT)


@pytest.mark.parametrize("T,S", [(9, 9), (5, 9), (9, 5), (1, 1)])
def test_causal_running_sum_equals_quadratic_masked_form(T, S):
    q, k, v = qkv(T, S, batch=(3,), seed=T + 10 * S)
    ref, _ = linear_attention_quadratic(q, k, v, mask=causal_mask(T, S))
    torch.testing.assert_close(linear_attention(q, k, v, causal=True), ref, **EXACT)


# ---------------------------------------------------------------- bad input
def test_block_size_below_one_is_rejected_with_shapes():
    q, k, v = qkv(5, 7, batch=(2,))
    with pytest.raises(ValueError, match=r"block_size=0 for q \(2, 5, 8\), k \(2, 7, 8\), v \(2, 7, 5\)"):
        chunked_attention(q, k, v, block_size=0)
    with pytest.raises(ValueError, match=r"query_block_size=-1 .* expected an integer >= 1"):
        chunked_attention(q, k, v, query_block_size=-1)
    with pytest.raises(ValueError, match=r"block_size=0"):
        local_window_attention(q, k, v, window=2, block_size=0)


def test_too_many_keys_or_a_negative_window_are_rejected():
    q, k, v = qkv(5, 7)
    with pytest.raises(ValueError, match=r"top_k=8 .* <= 7"):
        topk_attention(q, k, v, top_k=8)
    with pytest.raises(ValueError, match=r"window=-1"):
        local_window_attention(q, k, v, window=-1)


def test_mismatched_shapes_name_the_shapes():
    q, k, v = qkv(5, 7)
    with pytest.raises(ShapeError, match=r"k has shape \(7, 6\) but q has shape \(5, 8\)"):
        chunked_attention(q, k[:, :6], v)
    with pytest.raises(ShapeError, match=r"v has shape \(6, 5\) but k has shape \(7, 8\)"):
        linear_attention(q, k, v[:6])
    with pytest.raises(ShapeError, match=r"mask has shape \(5, 6\) which does not broadcast .*\(5, 7\)"):
        chunked_attention(q, k, v, mask=torch.ones(5, 6, dtype=torch.bool))


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_online_softmax_steps_reproduce_attention(lib):
    q, k, v = qkv(5, 11, seed=14, scale=3.0)
    mask = torch.ones(5, 11, dtype=torch.bool)
    mask[2] = False  # one query with no key at all
    mask[3, :6] = False  # one whose first blocks are all masked
    scores = (q @ k.T / math.sqrt(8)).masked_fill(~mask, -math.inf)
    state = (torch.full((5,), -math.inf, **F64), torch.zeros(5, **F64), torch.zeros(5, 5, **F64))
    conv = (lambda t: t.numpy()) if lib == "numpy" else (lambda t: t)
    state = tuple(conv(t) for t in state)
    for s0 in range(0, 11, 4):
        state = online_softmax_step(*state, conv(scores[:, s0:s0 + 4]), conv(v[s0:s0 + 4]))
    m, l, acc = (torch.as_tensor(t) for t in state)
    out = acc / torch.where(l > 0, l, torch.ones_like(l))[:, None]
    torch.testing.assert_close(out, scaled_dot_product_attention(q, k, v, mask=mask)[0], **EXACT)
    assert m[2] == -math.inf and l[2] == 0 and torch.all(acc[2] == 0)
