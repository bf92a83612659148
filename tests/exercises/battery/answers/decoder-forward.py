"""Battery for ex-decoder-forward: my_forward(weights, ids, cache) -> (logits (B,T,V), cache (L,2,B,h_kv,S+T,d_head)).

All correct answers accept both an empty cache (S = 0) and None for a fresh start (the statement says
"S = 0 for a fresh start"; the chapter's own ch.forward is also called without a cache).
"""
import math

import numpy as np
import torch
import torch.nn.functional as F

from attention_course.chapters.decoder import apply_rope, grouped_query_attention, rms_norm, swiglu


def _cached_len(cache):
    return 0 if cache is None else cache.shape[4]


def _heads(z, n, dh):
    B, T, _ = z.shape
    return z.view(B, T, n, dh).transpose(1, 2)


# ---------------------------------------------------------------- correct answers
def fwd_package_parts(weights, ids, cache):
    c = weights.config
    B, T = ids.shape
    S = _cached_len(cache)
    pos = torch.arange(S, S + T)
    x = weights.embed[ids]
    new_cache = []
    for l, layer in enumerate(weights.layers):
        xn = rms_norm(x, layer.attn_norm, c.eps)
        q = apply_rope(_heads(xn @ layer.W_q, c.n_heads, c.d_head), pos, c.rope_base)
        k = apply_rope(_heads(xn @ layer.W_k, c.n_kv_heads, c.d_head), pos, c.rope_base)
        v = _heads(xn @ layer.W_v, c.n_kv_heads, c.d_head)
        if S > 0:
            k = torch.cat([cache[l, 0], k], dim=2)
            v = torch.cat([cache[l, 1], v], dim=2)
        new_cache.append(torch.stack([k, v]))
        o = grouped_query_attention(q, k, v).transpose(1, 2).reshape(B, T, -1)
        x = x + o @ layer.W_o
        x = x + swiglu(rms_norm(x, layer.mlp_norm, c.eps), layer)
    logits = rms_norm(x, weights.final_norm, c.eps) @ weights.embed.T
    return logits, torch.stack(new_cache)


def fwd_self_contained(weights, ids, cache):
    """Own RMSNorm, RoPE and attention; cache concatenated even when empty."""
    c = weights.config
    B, T = ids.shape
    h, hkv, dh = c.n_heads, c.n_kv_heads, c.d_head
    dtype = weights.embed.dtype
    if cache is None:
        cache = torch.zeros(len(weights.layers), 2, B, hkv, 0, dh, dtype=dtype)
    S = cache.shape[4]
    pos = torch.arange(S, S + T, dtype=torch.float64)
    theta = c.rope_base ** (-torch.arange(0, dh, 2, dtype=torch.float64) / dh)
    ang = pos[:, None] * theta
    cos, sin = ang.cos().to(dtype), ang.sin().to(dtype)

    def norm(z, g):
        return z / torch.sqrt(z.pow(2).mean(-1, keepdim=True) + c.eps) * g

    def turn(z):
        z1, z2 = z[..., : dh // 2], z[..., dh // 2:]
        return torch.cat([z1 * cos - z2 * sin, z1 * sin + z2 * cos], -1)

    keep = torch.ones(T, S + T, dtype=torch.bool).tril(S)
    x = weights.embed[ids]
    layers_kv = []
    for l, L in enumerate(weights.layers):
        xn = norm(x, L.attn_norm)
        q = turn(_heads(xn @ L.W_q, h, dh))
        k = torch.cat([cache[l, 0], turn(_heads(xn @ L.W_k, hkv, dh))], dim=-2)
        v = torch.cat([cache[l, 1], _heads(xn @ L.W_v, hkv, dh)], dim=-2)
        layers_kv.append(torch.stack([k, v]))
        kk, vv = k.repeat_interleave(h // hkv, 1), v.repeat_interleave(h // hkv, 1)
        s = (q @ kk.transpose(-1, -2) / math.sqrt(dh)).masked_fill(~keep, float("-inf"))
        o = (s.softmax(-1) @ vv).transpose(1, 2).reshape(B, T, h * dh)
        a = x + o @ L.W_o
        an = norm(a, L.mlp_norm)
        x = a + (F.silu(an @ L.W_gate) * (an @ L.W_up)) @ L.W_down
    return norm(x, weights.final_norm) @ weights.embed.T, torch.stack(layers_kv)


def fwd_preallocated_cache(weights, ids, cache):
    """New cache allocated once at S + T and filled slice by slice."""
    c = weights.config
    B, T = ids.shape
    S = _cached_len(cache)
    L = len(weights.layers)
    dtype = weights.embed.dtype
    out_cache = torch.empty(L, 2, B, c.n_kv_heads, S + T, c.d_head, dtype=dtype)
    if S:
        out_cache[..., :S, :] = cache
    pos = torch.arange(S, S + T)
    x = weights.embed[ids]
    for l, layer in enumerate(weights.layers):
        xn = rms_norm(x, layer.attn_norm, c.eps)
        q = apply_rope(_heads(xn @ layer.W_q, c.n_heads, c.d_head), pos, c.rope_base)
        out_cache[l, 0, :, :, S:] = apply_rope(_heads(xn @ layer.W_k, c.n_kv_heads, c.d_head), pos, c.rope_base)
        out_cache[l, 1, :, :, S:] = _heads(xn @ layer.W_v, c.n_kv_heads, c.d_head)
        o = grouped_query_attention(q, out_cache[l, 0], out_cache[l, 1])
        x = x + o.transpose(1, 2).reshape(B, T, -1) @ layer.W_o
        x = x + swiglu(rms_norm(x, layer.mlp_norm, c.eps), layer)
    return rms_norm(x, weights.final_norm, c.eps) @ weights.embed.T, out_cache


def fwd_one_token_at_a_time(weights, ids, cache):
    """Feeds the T new tokens one by one through a one-token step (same result to round-off)."""
    logits = []
    for t in range(ids.shape[1]):
        lt, cache = fwd_package_parts(weights, ids[:, t:t + 1], cache)
        logits.append(lt)
    return torch.cat(logits, dim=1), cache


def fwd_einsum_projections(weights, ids, cache):
    """Projections with einsum on (d, heads, d_head) views; keys/values kept per layer in lists."""
    c = weights.config
    B, T = ids.shape
    h, hkv, dh = c.n_heads, c.n_kv_heads, c.d_head
    S = _cached_len(cache)
    pos = torch.arange(S, S + T)
    x = weights.embed[ids]
    ks, vs = [], []
    for l, L in enumerate(weights.layers):
        d = x.shape[-1]
        xn = rms_norm(x, L.attn_norm, c.eps)
        q = torch.einsum("btd,dne->bnte", xn, L.W_q.reshape(d, h, dh))
        k = torch.einsum("btd,dne->bnte", xn, L.W_k.reshape(d, hkv, dh))
        v = torch.einsum("btd,dne->bnte", xn, L.W_v.reshape(d, hkv, dh))
        q, k = apply_rope(q, pos, c.rope_base), apply_rope(k, pos, c.rope_base)
        if cache is not None and S:
            k, v = torch.cat((cache[l][0], k), -2), torch.cat((cache[l][1], v), -2)
        ks.append(k)
        vs.append(v)
        o = torch.einsum("bnte,nef->btf", grouped_query_attention(q, k, v), L.W_o.reshape(h, dh, -1))
        a = x + o
        x = a + swiglu(rms_norm(a, L.mlp_norm, c.eps), L)
    logits = torch.einsum("btd,vd->btv", rms_norm(x, weights.final_norm, c.eps), weights.embed)
    return logits, torch.stack([torch.stack(ks), torch.stack(vs)], dim=1)


# ---------------------------------------------------------------- wrong answers
def _generic(weights, ids, cache, *, pos_from_zero=False, final_norm=True, extend=True,
             store_unrotated=False, new_first=False, swap_kv=False, rerotate=False, last_only=False,
             scale_embed=False, cache_dtype=None, no_attn_residual=False, kv_axis_first=False):
    c = weights.config
    B, T = ids.shape
    S = _cached_len(cache)
    pos = torch.arange(T) if pos_from_zero else torch.arange(S, S + T)
    x = weights.embed[ids]
    if scale_embed:
        x = x * math.sqrt(x.shape[-1])
    new_cache = []
    for l, layer in enumerate(weights.layers):
        xn = rms_norm(x, layer.attn_norm, c.eps)
        q = apply_rope(_heads(xn @ layer.W_q, c.n_heads, c.d_head), pos, c.rope_base)
        k_raw = _heads(xn @ layer.W_k, c.n_kv_heads, c.d_head)
        v = _heads(xn @ layer.W_v, c.n_kv_heads, c.d_head)
        if rerotate:
            k_all = torch.cat([cache[l, 0], k_raw], 2) if S else k_raw
            k = apply_rope(k_all, torch.arange(S + T), c.rope_base)  # cached keys turned a second time
            v = torch.cat([cache[l, 1], v], 2) if S else v
            kc, vc = k, v
        else:
            k = apply_rope(k_raw, pos, c.rope_base)
            k_store = k_raw if store_unrotated else k
            if S:
                pair = (lambda old, new: torch.cat([new, old], 2)) if new_first else \
                       (lambda old, new: torch.cat([old, new], 2))
                k, v_all = pair(cache[l, 0], k), pair(cache[l, 1], v)
                kc, vc = pair(cache[l, 0], k_store), v_all
                v = v_all
            else:
                kc, vc = k_store, v
        new_cache.append(torch.stack([vc, kc]) if swap_kv else torch.stack([kc, vc]))
        o = grouped_query_attention(q, k, v).transpose(1, 2).reshape(B, T, -1) @ layer.W_o
        a = o if no_attn_residual else x + o
        x = a + swiglu(rms_norm(a, layer.mlp_norm, c.eps), layer)
    hL = rms_norm(x, weights.final_norm, c.eps) if final_norm else x
    logits = hL @ weights.embed.T
    if last_only:
        logits = logits[:, -1:]
    out_cache = torch.stack(new_cache) if extend else cache
    if kv_axis_first and extend:
        out_cache = torch.stack([torch.stack([kv[0] for kv in new_cache]), torch.stack([kv[1] for kv in new_cache])])
    if cache_dtype is not None:
        out_cache = out_cache.to(cache_dtype)
    return logits, out_cache


def fwd_positions_from_zero(weights, ids, cache):
    return _generic(weights, ids, cache, pos_from_zero=True)


def fwd_no_final_norm(weights, ids, cache):
    return _generic(weights, ids, cache, final_norm=False)


def fwd_cache_not_extended(weights, ids, cache):
    return _generic(weights, ids, cache, extend=False)


def fwd_cache_wrong_axis(weights, ids, cache):
    # extends along positions correctly but stacks the result as (2, L, ...): key/value axis first
    return _generic(weights, ids, cache, kv_axis_first=True)


def fwd_stores_unrotated_keys(weights, ids, cache):
    return _generic(weights, ids, cache, store_unrotated=True)


def fwd_new_keys_first(weights, ids, cache):
    return _generic(weights, ids, cache, new_first=True)


def fwd_keys_values_swapped(weights, ids, cache):
    return _generic(weights, ids, cache, swap_kv=True)


def fwd_rerotates_cached_keys(weights, ids, cache):
    return _generic(weights, ids, cache, rerotate=True)


def fwd_last_logits_only(weights, ids, cache):
    return _generic(weights, ids, cache, last_only=True)


def fwd_scaled_embeddings(weights, ids, cache):
    return _generic(weights, ids, cache, scale_embed=True)


def fwd_cache_float32(weights, ids, cache):
    return _generic(weights, ids, cache, cache_dtype=torch.float32)


def fwd_no_attention_residual(weights, ids, cache):
    return _generic(weights, ids, cache, no_attn_residual=True)


def fwd_top_left_mask(weights, ids, cache):
    """Own attention whose causal mask ignores the cached positions (tril over (T, S+T) without offset)."""
    c = weights.config
    B, T = ids.shape
    S = _cached_len(cache)
    h, hkv, dh = c.n_heads, c.n_kv_heads, c.d_head
    pos = torch.arange(S, S + T)
    x = weights.embed[ids]
    kvs = []
    for l, L in enumerate(weights.layers):
        xn = rms_norm(x, L.attn_norm, c.eps)
        q = apply_rope(_heads(xn @ L.W_q, h, dh), pos, c.rope_base)
        k = apply_rope(_heads(xn @ L.W_k, hkv, dh), pos, c.rope_base)
        v = _heads(xn @ L.W_v, hkv, dh)
        if S:
            k, v = torch.cat([cache[l, 0], k], 2), torch.cat([cache[l, 1], v], 2)
        kvs.append(torch.stack([k, v]))
        kk, vv = k.repeat_interleave(h // hkv, 1), v.repeat_interleave(h // hkv, 1)
        s = (q @ kk.transpose(-1, -2) / math.sqrt(dh)).masked_fill(
            ~torch.ones(T, S + T, dtype=torch.bool).tril(), float("-inf"))
        x = x + (s.softmax(-1) @ vv).transpose(1, 2).reshape(B, T, -1) @ L.W_o
        x = x + swiglu(rms_norm(x, L.mlp_norm, c.eps), L)
    return rms_norm(x, weights.final_norm, c.eps) @ weights.embed.T, torch.stack(kvs)


def fwd_returns_numpy_logits(weights, ids, cache):
    logits, new = fwd_package_parts(weights, ids, cache)
    return logits.detach().numpy(), new


ANSWERS = [
    ("fwd_package_parts", fwd_package_parts, "correct", "package's chapter-9 parts, torch.cat on the position axis"),
    ("fwd_self_contained", fwd_self_contained, "correct", "own norm/rope/attention, bottom-right mask, cat even when S=0"),
    ("fwd_preallocated_cache", fwd_preallocated_cache, "correct", "new cache preallocated at S+T and filled by slices"),
    ("fwd_one_token_at_a_time", fwd_one_token_at_a_time, "correct", "feeds the new tokens one at a time through the cache"),
    ("fwd_einsum_projections", fwd_einsum_projections, "correct", "einsum projections/head, lists of k and v stacked at the end"),
    ("fwd_positions_from_zero", fwd_positions_from_zero, "wrong", "new tokens at positions 0..T-1, ignoring the cache"),
    ("fwd_no_final_norm", fwd_no_final_norm, "wrong", "final RMSNorm forgotten before the tied head"),
    ("fwd_cache_not_extended", fwd_cache_not_extended, "wrong", "returns the old cache, not extended"),
    ("fwd_cache_wrong_axis", fwd_cache_wrong_axis, "wrong", "cache stacked as (2, L, B, h_kv, S+T, d_head): key/value and layer axes swapped"),
    ("fwd_stores_unrotated_keys", fwd_stores_unrotated_keys, "wrong", "stores the keys before RoPE in the cache"),
    ("fwd_new_keys_first", fwd_new_keys_first, "wrong", "new keys/values concatenated before the cached ones"),
    ("fwd_keys_values_swapped", fwd_keys_values_swapped, "wrong", "cache index 0 holds values and 1 keys"),
    ("fwd_rerotates_cached_keys", fwd_rerotates_cached_keys, "wrong", "RoPE applied again to the already-rotated cached keys"),
    ("fwd_last_logits_only", fwd_last_logits_only, "wrong", "returns only the last new token's logits (B, 1, V)"),
    ("fwd_scaled_embeddings", fwd_scaled_embeddings, "wrong", "embeddings multiplied by sqrt(d) (original Transformer habit)"),
    ("fwd_cache_float32", fwd_cache_float32, "wrong", "cache returned in float32 for float64 weights"),
    ("fwd_no_attention_residual", fwd_no_attention_residual, "wrong", "attention residual (x + ...) forgotten"),
    ("fwd_top_left_mask", fwd_top_left_mask, "wrong", "own causal mask aligned top-left, ignores the cached offset"),
    ("fwd_returns_numpy_logits", fwd_returns_numpy_logits, "wrong", "logits returned as a numpy array"),
]
