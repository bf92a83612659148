"""Battery for ex-decoder-block: my_decoder_block(x, layer, config, positions), x (B, T, d), positions (T,).

The notebook cell binds `rms_norm`, `rope`, `grouped_attention` and `ch` (chapter 9's module) before the
learner's function; the authors' runner sets these module-level names. The defaults below only make the
file importable on its own (the package's parts).
"""
import math

import numpy as np
import torch
import torch.nn.functional as F

try:  # overwritten by the runner
    from attention_course.chapters import decoder as ch
    rms_norm, rope, grouped_attention = ch.rms_norm, ch.apply_rope, ch.grouped_query_attention
except Exception:  # pragma: no cover
    ch = rms_norm = rope = grouped_attention = None


def _qkv(xn, layer, config, positions):
    B, T, _ = xn.shape
    h, hkv, dh = config.n_heads, config.n_kv_heads, config.d_head
    q = (xn @ layer.W_q).view(B, T, h, dh).transpose(1, 2)
    k = (xn @ layer.W_k).view(B, T, hkv, dh).transpose(1, 2)
    v = (xn @ layer.W_v).view(B, T, hkv, dh).transpose(1, 2)
    return q, k, v


def _mlp(an, layer):
    return (F.silu(an @ layer.W_gate) * (an @ layer.W_up)) @ layer.W_down


# ---------------------------------------------------------------- correct answers
def block_with_parts(x, layer, config, positions):
    B, T, _ = x.shape
    xn = rms_norm(x, layer.attn_norm, config.eps)
    q, k, v = _qkv(xn, layer, config, positions)
    q, k = rope(q, positions, config.rope_base), rope(k, positions, config.rope_base)
    o = grouped_attention(q, k, v).transpose(1, 2).reshape(B, T, -1)
    a = x + o @ layer.W_o
    an = rms_norm(a, layer.mlp_norm, config.eps)
    return a + _mlp(an, layer)


def block_with_ch_swiglu(x, layer, config, positions):
    B, T, d = x.shape
    h, hkv, dh = config.n_heads, config.n_kv_heads, config.d_head
    xn = rms_norm(x, layer.attn_norm, config.eps)
    q = rope((xn @ layer.W_q).reshape(B, T, h, dh).permute(0, 2, 1, 3), positions, config.rope_base)
    k = rope((xn @ layer.W_k).reshape(B, T, hkv, dh).permute(0, 2, 1, 3), positions, config.rope_base)
    v = (xn @ layer.W_v).reshape(B, T, hkv, dh).permute(0, 2, 1, 3)
    o = grouped_attention(q, k, v).permute(0, 2, 1, 3).reshape(B, T, h * dh) @ layer.W_o
    a = x + o
    return a + ch.swiglu(rms_norm(a, layer.mlp_norm, config.eps), layer)


def block_self_contained(x, layer, config, positions):
    """Everything inline (own RMSNorm, RoPE and attention), no module-level helpers."""
    B, T, d = x.shape
    h, hkv, dh = config.n_heads, config.n_kv_heads, config.d_head

    def norm(z, g):
        return z * torch.rsqrt(z.pow(2).mean(-1, keepdim=True) + config.eps) * g

    def turn(z):
        theta = config.rope_base ** (-torch.arange(0, dh, 2, dtype=torch.float64) / dh)
        ang = (positions.double()[:, None] * theta).to(z.dtype)
        z1, z2 = z[..., : dh // 2], z[..., dh // 2:]
        return torch.cat([z1 * ang.cos() - z2 * ang.sin(), z1 * ang.sin() + z2 * ang.cos()], -1)

    xn = norm(x, layer.attn_norm)
    q = turn(torch.einsum("btd,dhe->bhte", xn, layer.W_q.reshape(d, h, dh)))
    k = turn(torch.einsum("btd,dhe->bhte", xn, layer.W_k.reshape(d, hkv, dh)))
    v = torch.einsum("btd,dhe->bhte", xn, layer.W_v.reshape(d, hkv, dh))
    k, v = k.repeat_interleave(h // hkv, 1), v.repeat_interleave(h // hkv, 1)
    s = torch.einsum("bhte,bhse->bhts", q, k) / math.sqrt(dh)
    s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    o = torch.einsum("bhts,bhse->bthe", s.softmax(-1), v).reshape(B, T, h * dh)
    a = x + o @ layer.W_o
    an = norm(a, layer.mlp_norm)
    gate = an @ layer.W_gate
    return a + (gate * torch.sigmoid(gate) * (an @ layer.W_up)) @ layer.W_down


def block_two_steps(x, layer, config, positions):
    """Attention branch and MLP branch as two small inner functions; silu written out."""
    def attn_branch(z):
        zn = rms_norm(z, layer.attn_norm, config.eps)
        q, k, v = _qkv(zn, layer, config, positions)
        o = grouped_attention(rope(q, positions, config.rope_base), rope(k, positions, config.rope_base), v)
        return o.transpose(1, 2).flatten(2) @ layer.W_o

    def mlp_branch(z):
        zn = rms_norm(z, layer.mlp_norm, config.eps)
        g = zn @ layer.W_gate
        return ((g / (1 + torch.exp(-g))) * (zn @ layer.W_up)) @ layer.W_down

    a = x + attn_branch(x)
    return a + mlp_branch(a)


def block_package_parts_by_name(x, layer, config, positions):
    """Uses chapter 9's module functions directly (ch.rms_norm, ch.apply_rope, ch.grouped_query_attention)."""
    B, T, _ = x.shape
    xn = ch.rms_norm(x, layer.attn_norm, config.eps)
    q, k, v = _qkv(xn, layer, config, positions)
    q, k = ch.apply_rope(q, positions, config.rope_base), ch.apply_rope(k, positions, config.rope_base)
    a = x + ch.grouped_query_attention(q, k, v).transpose(1, 2).reshape(B, T, -1) @ layer.W_o
    return a + ch.swiglu(ch.rms_norm(a, layer.mlp_norm, config.eps), layer)


# ---------------------------------------------------------------- wrong answers
def _attn(xn, layer, config, positions, rope_v=False, rope_k=True, pos=None):
    B, T, _ = xn.shape
    pos = positions if pos is None else pos
    q, k, v = _qkv(xn, layer, config, positions)
    q = rope(q, pos, config.rope_base)
    if rope_k:
        k = rope(k, pos, config.rope_base)
    if rope_v:
        v = rope(v, pos, config.rope_base)
    return grouped_attention(q, k, v).transpose(1, 2).reshape(B, T, -1) @ layer.W_o


def block_post_norm(x, layer, config, positions):
    a = rms_norm(x + _attn(x, layer, config, positions), layer.attn_norm, config.eps)
    return rms_norm(a + _mlp(a, layer), layer.mlp_norm, config.eps)


def block_silu_on_up(x, layer, config, positions):
    a = x + _attn(rms_norm(x, layer.attn_norm, config.eps), layer, config, positions)
    an = rms_norm(a, layer.mlp_norm, config.eps)
    return a + ((an @ layer.W_gate) * F.silu(an @ layer.W_up)) @ layer.W_down


def block_attn_norm_twice(x, layer, config, positions):
    a = x + _attn(rms_norm(x, layer.attn_norm, config.eps), layer, config, positions)
    return a + _mlp(rms_norm(a, layer.attn_norm, config.eps), layer)  # mlp_norm never used


def block_residual_from_normed(x, layer, config, positions):
    xn = rms_norm(x, layer.attn_norm, config.eps)
    a = xn + _attn(xn, layer, config, positions)  # residual taken after the norm
    an = rms_norm(a, layer.mlp_norm, config.eps)
    return an + _mlp(an, layer)


def block_rope_on_values(x, layer, config, positions):
    a = x + _attn(rms_norm(x, layer.attn_norm, config.eps), layer, config, positions, rope_v=True)
    return a + _mlp(rms_norm(a, layer.mlp_norm, config.eps), layer)


def block_rope_only_queries(x, layer, config, positions):
    a = x + _attn(rms_norm(x, layer.attn_norm, config.eps), layer, config, positions, rope_k=False)
    return a + _mlp(rms_norm(a, layer.mlp_norm, config.eps), layer)


def block_ignores_positions(x, layer, config, positions):
    T = x.shape[1]
    a = x + _attn(rms_norm(x, layer.attn_norm, config.eps), layer, config, positions, pos=torch.arange(T))
    return a + _mlp(rms_norm(a, layer.mlp_norm, config.eps), layer)


def block_heads_split_without_transpose(x, layer, config, positions):
    B, T, _ = x.shape
    h, hkv, dh = config.n_heads, config.n_kv_heads, config.d_head
    xn = rms_norm(x, layer.attn_norm, config.eps)
    q = (xn @ layer.W_q).reshape(B, h, T, dh)  # reshaped straight to (B, h, T, dh)
    k = (xn @ layer.W_k).reshape(B, hkv, T, dh)
    v = (xn @ layer.W_v).reshape(B, hkv, T, dh)
    q, k = rope(q, positions, config.rope_base), rope(k, positions, config.rope_base)
    a = x + grouped_attention(q, k, v).reshape(B, T, h * dh) @ layer.W_o
    return a + _mlp(rms_norm(a, layer.mlp_norm, config.eps), layer)


def block_merge_heads_without_transpose(x, layer, config, positions):
    B, T, _ = x.shape
    xn = rms_norm(x, layer.attn_norm, config.eps)
    q, k, v = _qkv(xn, layer, config, positions)
    q, k = rope(q, positions, config.rope_base), rope(k, positions, config.rope_base)
    a = x + grouped_attention(q, k, v).reshape(B, T, -1) @ layer.W_o  # (B, h, T, dh) flattened as is
    return a + _mlp(rms_norm(a, layer.mlp_norm, config.eps), layer)


def block_forgets_w_o(x, layer, config, positions):
    B, T, _ = x.shape
    xn = rms_norm(x, layer.attn_norm, config.eps)
    q, k, v = _qkv(xn, layer, config, positions)
    q, k = rope(q, positions, config.rope_base), rope(k, positions, config.rope_base)
    a = x + grouped_attention(q, k, v).transpose(1, 2).reshape(B, T, -1)  # W_o forgotten
    return a + _mlp(rms_norm(a, layer.mlp_norm, config.eps), layer)


def block_parallel_mlp(x, layer, config, positions):
    a = x + _attn(rms_norm(x, layer.attn_norm, config.eps), layer, config, positions)
    return a + _mlp(rms_norm(x, layer.mlp_norm, config.eps), layer)  # MLP reads x, not a


def block_gelu(x, layer, config, positions):
    a = x + _attn(rms_norm(x, layer.attn_norm, config.eps), layer, config, positions)
    an = rms_norm(a, layer.mlp_norm, config.eps)
    return a + (F.gelu(an @ layer.W_gate) * (an @ layer.W_up)) @ layer.W_down


def block_hardcoded_eps(x, layer, config, positions):
    a = x + _attn(rms_norm(x, layer.attn_norm, 1e-6), layer, config, positions)
    return a + _mlp(rms_norm(a, layer.mlp_norm, 1e-6), layer)


def block_no_first_residual(x, layer, config, positions):
    a = _attn(rms_norm(x, layer.attn_norm, config.eps), layer, config, positions)  # x not added back
    return a + _mlp(rms_norm(a, layer.mlp_norm, config.eps), layer)


def block_in_place_residual(x, layer, config, positions):
    x += _attn(rms_norm(x, layer.attn_norm, config.eps), layer, config, positions)  # changes the caller's x
    x += _mlp(rms_norm(x, layer.mlp_norm, config.eps), layer)
    return x


def block_returns_numpy(x, layer, config, positions):
    return block_with_parts(x, layer, config, positions).detach().numpy()


ANSWERS = [
    ("block_with_parts", block_with_parts, "correct", "the parts the cell binds, F.silu"),
    ("block_with_ch_swiglu", block_with_ch_swiglu, "correct", "the parts plus ch.swiglu, permute/reshape"),
    ("block_self_contained", block_self_contained, "correct", "all inline with einsum (own norm, rope, attention)"),
    ("block_two_steps", block_two_steps, "correct", "two branch functions, silu as g / (1 + exp(-g))"),
    ("block_package_parts_by_name", block_package_parts_by_name, "correct", "chapter 9 module's own functions via ch"),
    ("block_post_norm", block_post_norm, "wrong", "post-norm: norms after the residual additions"),
    ("block_silu_on_up", block_silu_on_up, "wrong", "SiLU on the up projection instead of the gate"),
    ("block_attn_norm_twice", block_attn_norm_twice, "wrong", "attn_norm used for the MLP branch too (mlp_norm unused)"),
    ("block_residual_from_normed", block_residual_from_normed, "wrong", "residuals added to the normalised stream"),
    ("block_rope_on_values", block_rope_on_values, "wrong", "RoPE also applied to the values"),
    ("block_rope_only_queries", block_rope_only_queries, "wrong", "RoPE applied to the queries only, not the keys"),
    ("block_ignores_positions", block_ignores_positions, "wrong", "positions ignored: arange(T)"),
    ("block_heads_split_without_transpose", block_heads_split_without_transpose, "wrong",
     "(B, T, h*dh) reshaped straight to (B, h, T, dh) (heads mixed with time)"),
    ("block_merge_heads_without_transpose", block_merge_heads_without_transpose, "wrong",
     "heads merged by reshaping (B, h, T, dh) to (B, T, h*dh) without transposing"),
    ("block_forgets_w_o", block_forgets_w_o, "wrong", "output projection W_o forgotten"),
    ("block_parallel_mlp", block_parallel_mlp, "wrong", "MLP branch reads x instead of a (parallel block)"),
    ("block_gelu", block_gelu, "wrong", "GELU instead of SiLU in the gate"),
    ("block_hardcoded_eps", block_hardcoded_eps, "wrong", "eps hard-coded to 1e-6 instead of config.eps"),
    ("block_no_first_residual", block_no_first_residual, "wrong", "first residual x + ... forgotten"),
    ("block_in_place_residual", block_in_place_residual, "wrong", "residuals added in place with += (changes the caller's x)"),
    ("block_returns_numpy", block_returns_numpy, "wrong", "returns a numpy array"),
]
