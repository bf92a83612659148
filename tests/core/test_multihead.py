"""Tests for attention_course.core.multihead against torch.nn.MultiheadAttention and closed forms."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torch.testing import assert_close

from attention_course import padding_mask
from attention_course.core.multihead import (
    MultiHeadAttention,
    from_torch,
    head_contributions,
    head_outputs,
    merge_heads,
    multi_head_attention,
    split_heads,
)

F64 = dict(dtype=torch.float64)
TOL = dict(atol=1e-12, rtol=1e-12)


def mask_from_torch(key_padding_mask=None, attn_mask=None, num_heads=None):
    """``nn.MultiheadAttention``'s masks in this package's convention, shape (B or 1, h or 1, T or 1, S) or None:
    booleans inverted (torch's ``True`` = masked out), float masks passed through, mixed bool/float -> float.
    A 3-D ``attn_mask`` is (B*num_heads, T, S)."""
    parts = []
    if key_padding_mask is not None:
        parts.append(key_padding_mask[:, None, None, :])  # (B, 1, 1, S)
    if attn_mask is not None:
        parts.append(attn_mask[None, None] if attn_mask.ndim == 2 else
                     attn_mask.reshape(-1, num_heads, *attn_mask.shape[1:]))  # (1, 1, T, S) or (B, h, T, S)
    if not parts:
        return None
    if all(p.dtype == torch.bool for p in parts):
        out = ~parts[0]
        for p in parts[1:]:
            out = out & ~p  # may attend only if no mask forbids it
        return out
    dtype = next(p.dtype for p in parts if p.dtype != torch.bool)
    floats = [torch.zeros(p.shape, dtype=dtype).masked_fill(p, float("-inf")) if p.dtype == torch.bool
              else p for p in parts]  # bool True = masked out -> -inf
    return sum(floats[1:], floats[0])


def _torch_mha(d, h, bias=True, seed=0):
    """A float64 torch reference in eval mode, with non-zero biases so they are tested too."""
    torch.manual_seed(seed)
    ref = nn.MultiheadAttention(d, h, bias=bias, batch_first=True, **F64).eval()
    if bias:
        with torch.no_grad():
            ref.in_proj_bias.normal_()
            ref.out_proj.bias.normal_()
    return ref


def _inputs(B, T, S, d, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, T, d, generator=g, **F64), torch.randn(B, S, d, generator=g, **F64)


# ------------------------------------------------------------------ split / merge
def test_split_heads_takes_contiguous_feature_blocks():
    x = torch.randn(2, 3, 12, **F64)
    s = split_heads(x, 4)  # (2, 4, 3, 3)
    assert s.shape == (2, 4, 3, 3)
    for i in range(4):
        assert torch.equal(s[:, i], x[..., 3 * i : 3 * (i + 1)])
    assert torch.equal(merge_heads(s), x)


def test_split_merge_numpy_matches_torch():
    x = np.random.default_rng(0).normal(size=(2, 5, 6))
    np.testing.assert_array_equal(split_heads(x, 3), split_heads(torch.from_numpy(x), 3).numpy())
    np.testing.assert_array_equal(merge_heads(split_heads(x, 3)), x)


# ------------------------------------------------------------------ torch reference
B, T, S, D, H = 3, 5, 7, 12, 3
KPM = torch.zeros(B, S, dtype=torch.bool)
KPM[0, 5:] = True  # torch convention: True = masked out
KPM[2, 2:] = True
ATTN = torch.triu(torch.ones(T, S, dtype=torch.bool), diagonal=3)  # never masks key 0


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize(
    "kpm, attn",
    [(None, None), (KPM, None), (None, ATTN), (KPM, ATTN)],
    ids=["no-mask", "key-padding", "attn-mask", "both"],
)
@pytest.mark.parametrize("cross", [False, True], ids=["self", "cross"])
def test_matches_torch_mha(bias, kpm, attn, cross):
    ref = _torch_mha(D, H, bias=bias)
    ours = from_torch(ref)
    x_q, x_kv = _inputs(B, T, S if cross else T, D)
    x_kv = x_kv if cross else x_q
    if not cross and attn is not None:
        attn = attn[:, :T]
    if not cross and kpm is not None:
        kpm = kpm[:, :T]
    out_ref, w_ref = ref(x_q, x_kv, x_kv, key_padding_mask=kpm, attn_mask=attn,
                         average_attn_weights=False)
    _, w_avg_ref = ref(x_q, x_kv, x_kv, key_padding_mask=kpm, attn_mask=attn)
    out, w = ours(x_q, x_kv, mask=mask_from_torch(kpm, attn))
    assert w.shape == (B, H, T, x_kv.shape[1])
    assert_close(out, out_ref, **TOL)
    assert_close(w, w_ref, **TOL)
    assert_close(w.mean(1), w_avg_ref, **TOL)


def test_float_attn_mask_and_3d_attn_mask():
    ref, (x_q, x_kv) = _torch_mha(D, H), _inputs(B, T, S, D)
    ours = from_torch(ref)
    g = torch.Generator().manual_seed(3)
    float_mask = torch.randn(T, S, generator=g, **F64)  # additive in both conventions
    kpm_float = torch.zeros(B, S, **F64).masked_fill(KPM, float("-inf"))  # torch wants one mask type
    out_ref, w_ref = ref(x_q, x_kv, x_kv, attn_mask=float_mask, key_padding_mask=kpm_float,
                         average_attn_weights=False)
    out, w = ours(x_q, x_kv, mask=mask_from_torch(KPM, float_mask))  # bool + float -> float
    assert_close(out, out_ref, **TOL)
    assert_close(w, w_ref, **TOL)
    per_head = torch.rand(B * H, T, S, generator=g) < 0.3  # (B*h, T, S), True = masked out
    per_head[..., 0] = False  # every query keeps a key
    out_ref, w_ref = ref(x_q, x_kv, x_kv, attn_mask=per_head, average_attn_weights=False)
    out, w = ours(x_q, x_kv, mask=mask_from_torch(attn_mask=per_head, num_heads=H))
    assert_close(out, out_ref, **TOL)
    assert_close(w, w_ref, **TOL)


def test_mask_conversion_inverts_torch_booleans():
    kpm = torch.tensor([[False, False, True], [False, True, True]])  # torch: True = ignore this key
    attn = torch.tensor([[False, True, True], [False, False, True]])  # torch: True = not allowed
    ours = mask_from_torch(kpm, attn)  # ours: True = may attend
    expected = torch.tensor(
        [[[[1, 0, 0], [1, 1, 0]]], [[[1, 0, 0], [1, 0, 0]]]], dtype=torch.bool
    )  # (B=2, 1, T=2, S=3)
    assert torch.equal(ours, expected)
    assert mask_from_torch() is None
    # Our padding_mask in our convention is exactly the converted torch key-padding mask.
    assert torch.equal(mask_from_torch(kpm)[:, 0], torch.from_numpy(padding_mask([2, 1], 3)))


def test_forgetting_the_conversion_gives_a_different_answer():
    ref, (x_q, x_kv) = _torch_mha(D, H), _inputs(B, T, S, D)
    out_ref, _ = ref(x_q, x_kv, x_kv, key_padding_mask=KPM)
    out_wrong, w_wrong = from_torch(ref)(x_q, x_kv, mask=KPM[:, None, :])  # torch mask, our convention
    assert (out_wrong - out_ref).abs().max() > 1e-2
    assert torch.all(w_wrong[0, :, :, :5] == 0)  # it attends to the padding instead of the words


def test_fully_masked_row_gives_zero_weights_and_bias_output():
    ours = from_torch(_torch_mha(D, H))
    x_q, x_kv = _inputs(1, 2, 3, D)
    mask = torch.tensor([[True, True, False], [False, False, False]])  # query 1 may attend to nothing
    out, w = ours(x_q, x_kv, mask=mask)
    assert torch.all(w[0, :, 1] == 0)
    assert_close(out[0, 1], ours.b_o.detach(), **TOL)
    assert_close(w[0, :, 0].sum(-1), torch.ones(H, **F64), **TOL)


def test_numpy_matches_torch():
    ours = from_torch(_torch_mha(D, H))
    x_q, x_kv = _inputs(B, T, S, D)
    names = ("W_q", "W_k", "W_v", "W_o", "b_q", "b_k", "b_v", "b_o")
    params = [getattr(ours, n).detach() for n in names]
    mask = padding_mask([7, 5, 2], S)  # (B, 1, S), True = may attend
    out_t, w_t = multi_head_attention(x_q, x_kv, *params, num_heads=H, mask=torch.from_numpy(mask))
    out_n, w_n = multi_head_attention(x_q.numpy(), x_kv.numpy(), *[p.numpy() for p in params],
                                      num_heads=H, mask=mask)
    assert isinstance(out_n, np.ndarray)
    np.testing.assert_allclose(out_n, out_t.numpy(), atol=1e-12, rtol=1e-12)
    np.testing.assert_allclose(w_n, w_t.numpy(), atol=1e-12, rtol=1e-12)
    assert np.all(w_n[2, :, :, 2:] == 0)


def test_gradients_agree_with_torch():
    ref = _torch_mha(D, H)
    ours = from_torch(ref)
    g = torch.Generator().manual_seed(5)
    x_q, x_kv = (t.requires_grad_() for t in _inputs(B, T, S, D))
    x_q2, x_kv2 = (t.detach().clone().requires_grad_() for t in (x_q, x_kv))
    probe_o = torch.randn(B, T, D, generator=g, **F64)  # random linear functionals of the outputs
    probe_w = torch.randn(B, H, T, S, generator=g, **F64)
    out_ref, w_ref = ref(x_q, x_kv, x_kv, key_padding_mask=KPM, average_attn_weights=False)
    ((out_ref * probe_o).sum() + (w_ref * probe_w).sum()).backward()
    out, w = ours(x_q2, x_kv2, mask=mask_from_torch(KPM))
    ((out * probe_o).sum() + (w * probe_w).sum()).backward()
    assert_close(x_q2.grad, x_q.grad, **TOL)
    assert_close(x_kv2.grad, x_kv.grad, **TOL)
    for i, name in enumerate(("W_q", "W_k", "W_v")):
        assert_close(getattr(ours, name).grad, ref.in_proj_weight.grad[i * D : (i + 1) * D].T, **TOL)
        b_grad = getattr(ours, "b" + name[1:]).grad
        assert_close(b_grad, ref.in_proj_bias.grad[i * D : (i + 1) * D], **TOL)
    assert_close(ours.W_o.grad, ref.out_proj.weight.grad.T, **TOL)
    assert_close(ours.b_o.grad, ref.out_proj.bias.grad, **TOL)


# ------------------------------------------------------------------ heads add up
def test_concat_then_W_o_equals_sum_over_heads():
    ours = from_torch(_torch_mha(D, H))
    x_q, x_kv = _inputs(B, T, S, D)
    out, _ = ours(x_q, x_kv)
    heads, _ = head_outputs(x_q, x_kv, ours.W_q, ours.W_k, ours.W_v, ours.b_q, ours.b_k, ours.b_v,
                            num_heads=H)
    contrib = head_contributions(heads, ours.W_o)  # (B, h, T, d_model)
    assert contrib.shape == (B, H, T, D)
    assert_close(contrib.sum(1) + ours.b_o, out, **TOL)
    # head i's contribution uses only rows i*d_v:(i+1)*d_v of W_o
    d_v = D // H
    assert_close(contrib[:, 1], heads[:, 1] @ ours.W_o[d_v : 2 * d_v], **TOL)


# ------------------------------------------------------------------ errors
def test_error_d_model_not_divisible():
    with pytest.raises(ValueError, match=r"d_model=10 is not divisible by num_heads=3"):
        MultiHeadAttention(10, 3)
    x = torch.randn(2, 4, 10, **F64)
    W = torch.randn(10, 10, **F64)
    with pytest.raises(ValueError, match=r"W_q has shape \(10, 10\).*num_heads=3"):
        multi_head_attention(x, x, W, W, W, W, num_heads=3)


@pytest.mark.parametrize(
    "x_q_shape, x_kv_shape, match",
    [
        ((4, 12), (2, 4, 12), r"x_q has shape \(4, 12\); expected 3 dimensions"),
        ((2, 4, 12), (2, 4, 8), r"W_k has shape \(12, 12\) but x_kv has shape \(2, 4, 8\)"),
        ((2, 4, 12), (3, 4, 12), r"x_q has shape \(2, 4, 12\) but x_kv has shape \(3, 4, 12\)"),
    ],
)
def test_error_wrong_input_shapes(x_q_shape, x_kv_shape, match):
    mha = MultiHeadAttention(12, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match=match):
        mha(torch.randn(*x_q_shape, **F64), torch.randn(*x_kv_shape, **F64))


def test_error_bad_mask_bias_and_weights():
    x = torch.randn(2, 4, 12, **F64)
    W = torch.randn(12, 12, **F64)
    with pytest.raises(ValueError, match=r"mask has shape \(4, 5\)"):
        multi_head_attention(x, x, W, W, W, W, num_heads=3, mask=torch.ones(4, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"b_v has shape \(11,\); expected \(12,\)"):
        multi_head_attention(x, x, W, W, W, W, None, None, torch.zeros(11, **F64), num_heads=3)
    with pytest.raises(ValueError, match=r"W_o has shape \(6, 12\) but W_v has shape \(12, 12\)"):
        multi_head_attention(x, x, W, W, W, W[:6], num_heads=3)
    with pytest.raises(ValueError, match=r"x has shape \(2, 4, 12\) and h=5"):
        split_heads(x, 5)
    with pytest.raises(ValueError, match="kdim = vdim = embed_dim"):
        from_torch(nn.MultiheadAttention(12, 3, kdim=6, vdim=6))


def test_module_is_seeded_and_self_attention_default():
    a, b = MultiHeadAttention(8, 2, seed=4), MultiHeadAttention(8, 2, seed=4)
    assert torch.equal(a.W_q, b.W_q) and not torch.equal(a.W_q, MultiHeadAttention(8, 2, seed=5).W_q)
    assert MultiHeadAttention(8, 2, bias=False).b_q is None
    x = torch.randn(2, 3, 8)
    assert torch.equal(a(x)[0], a(x, x)[0])


# ------------------------------------------------------------------ property test
@settings(max_examples=40, deadline=None)
@given(
    B=st.integers(1, 3), T=st.integers(1, 5), S=st.integers(1, 5), h=st.integers(1, 4),
    d_k=st.integers(1, 4), bias=st.booleans(), seed=st.integers(0, 2**16), use_mask=st.booleans(),
)  # fmt: skip
def test_property_matches_torch_over_shapes(B, T, S, h, d_k, bias, seed, use_mask):
    d = h * d_k
    ref = _torch_mha(d, h, bias=bias, seed=seed)
    x_q, x_kv = _inputs(B, T, S, d, seed=seed)
    kpm = None
    if use_mask:
        g = torch.Generator().manual_seed(seed)
        kpm = torch.rand(B, S, generator=g) < 0.5
        kpm[:, 0] = False  # keep one key per sequence: torch gives NaN for fully masked rows
    out_ref, w_ref = ref(x_q, x_kv, x_kv, key_padding_mask=kpm, average_attn_weights=False)
    out, w = from_torch(ref)(x_q, x_kv, mask=mask_from_torch(kpm))
    assert out.shape == (B, T, d) and w.shape == (B, h, T, S)
    assert_close(out, out_ref, **TOL)
    assert_close(w, w_ref, **TOL)
    assert torch.all(w >= 0)
    assert_close(w.sum(-1), torch.ones(B, h, T, **F64), **TOL)


# ------------------------------------------------------------------ scale, head mask, attention step
def test_scale_head_mask_and_attend_match_closed_forms():
    ours = from_torch(_torch_mha(D, H))
    x_q, x_kv = _inputs(B, T, S, D)
    W = (ours.W_q, ours.W_k, ours.W_v, ours.W_o, ours.b_q, ours.b_k, ours.b_v, ours.b_o)
    # scale: torch's SDPA per head with the same factor on the scores
    q, k, v = (split_heads(x @ M + b, H) for x, M, b in ((x_q, ours.W_q, ours.b_q), (x_kv, ours.W_k, ours.b_k),
                                                        (x_kv, ours.W_v, ours.b_v)))  # (B, h, T or S, d_k)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=0.7)  # (B, h, T, d_v)
    out, _ = multi_head_attention(x_q, x_kv, *W, num_heads=H, scale=0.7)
    assert_close(out, merge_heads(ref) @ ours.W_o + ours.b_o, **TOL)
    # head mask: the output is b_o plus the kept heads' contributions only
    heads, _ = head_outputs(x_q, x_kv, *W[:3], *W[4:7], num_heads=H)
    keep = torch.tensor([1.0, 0.0, 1.0])
    out, _ = multi_head_attention(x_q, x_kv, *W, num_heads=H, head_mask=keep)
    assert_close(out, head_contributions(heads, ours.W_o)[:, [0, 2]].sum(1) + ours.b_o, **TOL)
    # attend: the step that is passed is the one that runs, and its weights are returned
    seen = []

    def attend(q, k, v, mask=None, scale=None):
        seen.append((tuple(q.shape), tuple(k.shape), mask, scale))
        return torch.zeros_like(q[..., :1].expand(*q.shape[:-1], v.shape[-1])), torch.ones(1)

    out, w = multi_head_attention(x_q, x_kv, *W, num_heads=H, scale=0.5, attend=attend)
    assert seen == [((B, H, T, D // H), (B, H, S, D // H), None, 0.5)]
    assert_close(out, ours.b_o.expand(B, T, D), **TOL)
    assert torch.equal(w, torch.ones(1))


def test_error_bad_head_mask():
    x = torch.randn(2, 4, 12, **F64)
    W = torch.randn(12, 12, **F64)
    with pytest.raises(ValueError, match=r"head_mask has shape \(2,\); expected \(3,\)"):
        multi_head_attention(x, x, W, W, W, W, num_heads=3, head_mask=torch.ones(2))
