"""Battery for ex-grouped-attention: my_grouped_attention(q, k, v), q (B,h,T,d), k, v (B,h_kv,S,d), S >= T."""
import math

import numpy as np
import torch
import torch.nn.functional as F


def _bottom_right_keep(T, S, device=None):
    # query t sits at S - T + t and reads keys j <= S - T + t
    return torch.ones(T, S, dtype=torch.bool, device=device).tril(diagonal=S - T)


# ---------------------------------------------------------------- correct answers
def gqa_repeat_interleave(q, k, v):
    h, hkv = q.shape[1], k.shape[1]
    T, S, d = q.shape[2], k.shape[2], q.shape[3]
    k = k.repeat_interleave(h // hkv, dim=1)
    v = v.repeat_interleave(h // hkv, dim=1)
    s = q @ k.transpose(-2, -1) / math.sqrt(d)
    s = s.masked_fill(~_bottom_right_keep(T, S), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def gqa_group_einsum(q, k, v):
    B, h, T, d = q.shape
    hkv, S = k.shape[1], k.shape[2]
    g = h // hkv
    qg = q.reshape(B, hkv, g, T, d)  # heads i = kv * g + j: consecutive query heads share a kv head
    s = torch.einsum("bkgtd,bksd->bkgts", qg, k) * d ** -0.5
    t_pos = torch.arange(S - T, S)[:, None]
    j = torch.arange(S)[None, :]
    s = s.masked_fill(j > t_pos, float("-inf"))
    w = s.softmax(-1)
    return torch.einsum("bkgts,bksd->bkgtd", w, v).reshape(B, h, T, d)


def gqa_sdpa_explicit_mask(q, k, v):
    h, hkv = q.shape[1], k.shape[1]
    T, S = q.shape[2], k.shape[2]
    idx = torch.arange(h) // (h // hkv)
    mask = _bottom_right_keep(T, S)
    return F.scaled_dot_product_attention(q, k[:, idx], v[:, idx], attn_mask=mask)


def gqa_loops(q, k, v):
    B, h, T, d = q.shape
    hkv, S = k.shape[1], k.shape[2]
    out = torch.zeros_like(q)
    for b in range(B):
        for i in range(h):
            kv = i // (h // hkv)
            for t in range(T):
                last = S - T + t
                sc = (k[b, kv, : last + 1] @ q[b, i, t]) / math.sqrt(d)
                out[b, i, t] = torch.softmax(sc, dim=0) @ v[b, kv, : last + 1]
    return out


def gqa_additive_mask_expand(q, k, v):
    B, h, T, d = q.shape
    hkv, S = k.shape[1], k.shape[2]
    g = h // hkv
    k = k[:, :, None].expand(B, hkv, g, S, d).reshape(B, h, S, d)
    v = v[:, :, None].expand(B, hkv, g, S, d).reshape(B, h, S, d)
    mask = torch.full((T, S), float("-inf"), dtype=q.dtype).triu(S - T + 1)  # 0 where allowed
    s = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(d) + mask
    s = s - s.amax(-1, keepdim=True)
    e = s.exp()
    return (e / e.sum(-1, keepdim=True)) @ v


# ---------------------------------------------------------------- wrong answers
def gqa_repeat_tiles(q, k, v):
    h, hkv = q.shape[1], k.shape[1]
    T, S, d = q.shape[2], k.shape[2], q.shape[3]
    k = k.repeat(1, h // hkv, 1, 1)  # 0,1,2,0,1,2,... instead of 0,0,0,1,1,1,...
    v = v.repeat(1, h // hkv, 1, 1)
    s = q @ k.transpose(-2, -1) / math.sqrt(d)
    s = s.masked_fill(~_bottom_right_keep(T, S), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def gqa_top_left_mask(q, k, v):
    h, hkv = q.shape[1], k.shape[1]
    T, S, d = q.shape[2], k.shape[2], q.shape[3]
    k, v = k.repeat_interleave(h // hkv, 1), v.repeat_interleave(h // hkv, 1)
    s = q @ k.transpose(-2, -1) / math.sqrt(d)
    s = s.masked_fill(~torch.ones(T, S, dtype=torch.bool).tril(), float("-inf"))  # ignores the S - T offset
    return torch.softmax(s, dim=-1) @ v


def gqa_sdpa_is_causal(q, k, v):
    h, hkv = q.shape[1], k.shape[1]
    k, v = k.repeat_interleave(h // hkv, 1), v.repeat_interleave(h // hkv, 1)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)  # torch aligns the mask top-left


def gqa_no_mask(q, k, v):
    h, hkv = q.shape[1], k.shape[1]
    d = q.shape[3]
    k, v = k.repeat_interleave(h // hkv, 1), v.repeat_interleave(h // hkv, 1)
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d), dim=-1) @ v


def gqa_strict_mask(q, k, v):
    h, hkv = q.shape[1], k.shape[1]
    T, S, d = q.shape[2], k.shape[2], q.shape[3]
    k, v = k.repeat_interleave(h // hkv, 1), v.repeat_interleave(h // hkv, 1)
    keep = torch.ones(T, S, dtype=torch.bool).tril(S - T - 1)  # a query may not read its own key
    s = (q @ k.transpose(-2, -1) / math.sqrt(d)).masked_fill(~keep, float("-inf"))
    return torch.nan_to_num(torch.softmax(s, dim=-1)) @ v


def gqa_mask_one_late(q, k, v):
    h, hkv = q.shape[1], k.shape[1]
    T, S, d = q.shape[2], k.shape[2], q.shape[3]
    k, v = k.repeat_interleave(h // hkv, 1), v.repeat_interleave(h // hkv, 1)
    keep = torch.ones(T, S, dtype=torch.bool).tril(S - T + 1)  # also reads the next key
    s = (q @ k.transpose(-2, -1) / math.sqrt(d)).masked_fill(~keep, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def gqa_offset_sign_flipped(q, k, v):
    h, hkv = q.shape[1], k.shape[1]
    T, S, d = q.shape[2], k.shape[2], q.shape[3]
    k, v = k.repeat_interleave(h // hkv, 1), v.repeat_interleave(h // hkv, 1)
    keep = torch.ones(T, S, dtype=torch.bool).tril(T - S)  # offset with the wrong sign
    s = (q @ k.transpose(-2, -1) / math.sqrt(d)).masked_fill(~keep, float("-inf"))
    return torch.nan_to_num(torch.softmax(s, dim=-1)) @ v


def gqa_no_scale(q, k, v):
    h, hkv = q.shape[1], k.shape[1]
    T, S = q.shape[2], k.shape[2]
    k, v = k.repeat_interleave(h // hkv, 1), v.repeat_interleave(h // hkv, 1)
    s = (q @ k.transpose(-2, -1)).masked_fill(~_bottom_right_keep(T, S), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def gqa_scale_by_d(q, k, v):
    h, hkv = q.shape[1], k.shape[1]
    T, S, d = q.shape[2], k.shape[2], q.shape[3]
    k, v = k.repeat_interleave(h // hkv, 1), v.repeat_interleave(h // hkv, 1)
    s = (q @ k.transpose(-2, -1) / d).masked_fill(~_bottom_right_keep(T, S), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def gqa_softmax_over_queries(q, k, v):
    h, hkv = q.shape[1], k.shape[1]
    T, S, d = q.shape[2], k.shape[2], q.shape[3]
    k, v = k.repeat_interleave(h // hkv, 1), v.repeat_interleave(h // hkv, 1)
    s = (q @ k.transpose(-2, -1) / math.sqrt(d)).masked_fill(~_bottom_right_keep(T, S), float("-inf"))
    return torch.nan_to_num(torch.softmax(s, dim=-2)) @ v


def gqa_mask_with_zero(q, k, v):
    h, hkv = q.shape[1], k.shape[1]
    T, S, d = q.shape[2], k.shape[2], q.shape[3]
    k, v = k.repeat_interleave(h // hkv, 1), v.repeat_interleave(h // hkv, 1)
    s = (q @ k.transpose(-2, -1) / math.sqrt(d)).masked_fill(~_bottom_right_keep(T, S), 0.0)  # 0, not -inf
    return torch.softmax(s, dim=-1) @ v


def gqa_mask_after_softmax(q, k, v):
    h, hkv = q.shape[1], k.shape[1]
    T, S, d = q.shape[2], k.shape[2], q.shape[3]
    k, v = k.repeat_interleave(h // hkv, 1), v.repeat_interleave(h // hkv, 1)
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d), dim=-1)
    return (w * _bottom_right_keep(T, S)) @ v  # zeroed but not renormalised


def gqa_scales_q_in_place(q, k, v):
    h, hkv = q.shape[1], k.shape[1]
    T, S, d = q.shape[2], k.shape[2], q.shape[3]
    q /= math.sqrt(d)  # scales the caller's queries in place
    k, v = k.repeat_interleave(h // hkv, 1), v.repeat_interleave(h // hkv, 1)
    s = (q @ k.transpose(-2, -1)).masked_fill(~_bottom_right_keep(T, S), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def gqa_returns_numpy(q, k, v):
    return gqa_repeat_interleave(q, k, v).numpy()


def gqa_float32(q, k, v):
    return gqa_repeat_interleave(q.float(), k.float(), v.float())


def gqa_returns_b_t_h_d(q, k, v):
    return gqa_repeat_interleave(q, k, v).transpose(1, 2)  # heads and time swapped


ANSWERS = [
    ("gqa_repeat_interleave", gqa_repeat_interleave, "correct", "repeat_interleave, bottom-right tril mask"),
    ("gqa_group_einsum", gqa_group_einsum, "correct", "query heads reshaped into (h_kv, g) groups, einsum, index mask"),
    ("gqa_sdpa_explicit_mask", gqa_sdpa_explicit_mask, "correct", "F.scaled_dot_product_attention with an explicit bottom-right bool mask"),
    ("gqa_loops", gqa_loops, "correct", "loops over batch, heads and queries, slicing keys up to S-T+t"),
    ("gqa_additive_mask_expand", gqa_additive_mask_expand, "correct", "expand kv heads, additive -inf mask, manual stable softmax"),
    ("gqa_repeat_tiles", gqa_repeat_tiles, "wrong", "`repeat` (tile) instead of repeat_interleave"),
    ("gqa_top_left_mask", gqa_top_left_mask, "wrong", "top-left causal mask ignoring the S - T offset"),
    ("gqa_sdpa_is_causal", gqa_sdpa_is_causal, "wrong", "SDPA is_causal=True (top-left aligned when S > T)"),
    ("gqa_no_mask", gqa_no_mask, "wrong", "causal mask forgotten"),
    ("gqa_strict_mask", gqa_strict_mask, "wrong", "mask also hides the query's own position (off by one)"),
    ("gqa_mask_one_late", gqa_mask_one_late, "wrong", "mask lets each query read one key in its future (off by one)"),
    ("gqa_offset_sign_flipped", gqa_offset_sign_flipped, "wrong", "mask offset T - S instead of S - T"),
    ("gqa_no_scale", gqa_no_scale, "wrong", "1/sqrt(d) scale forgotten"),
    ("gqa_scale_by_d", gqa_scale_by_d, "wrong", "scores divided by d instead of sqrt(d)"),
    ("gqa_softmax_over_queries", gqa_softmax_over_queries, "wrong", "softmax over the query axis instead of the keys"),
    ("gqa_mask_with_zero", gqa_mask_with_zero, "wrong", "masked scores set to 0 instead of -inf"),
    ("gqa_mask_after_softmax", gqa_mask_after_softmax, "wrong", "mask applied after softmax without renormalising"),
    ("gqa_scales_q_in_place", gqa_scales_q_in_place, "wrong", "scales q in place (q /= sqrt(d) changes the caller's tensor)"),
    ("gqa_returns_numpy", gqa_returns_numpy, "wrong", "returns a numpy array"),
    ("gqa_float32", gqa_float32, "wrong", "computes in float32, returns float32 for float64 input"),
    ("gqa_returns_b_t_h_d", gqa_returns_b_t_h_d, "wrong", "returns (B, T, h, d): heads and time transposed"),
]
