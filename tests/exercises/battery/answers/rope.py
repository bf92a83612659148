"""Battery for ex-rope: my_rope(x, positions, base), x (..., T, d_head), positions (T,) ints, rotate-half."""
import numpy as np
import torch


def _angles(positions, base, d, dtype):
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)
    return (positions.to(torch.float64)[:, None] * theta[None, :]).to(dtype)  # (T, d/2)


# ---------------------------------------------------------------- correct answers
def rope_halves_cat(x, positions, base):
    d = x.shape[-1]
    a = _angles(positions, base, d, x.dtype)
    cos, sin = a.cos(), a.sin()
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def rope_rotate_half_form(x, positions, base):
    d = x.shape[-1]
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    freqs = torch.outer(positions.double(), inv_freq)  # (T, d/2)
    emb = torch.cat([freqs, freqs], dim=-1)  # (T, d)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    rot = torch.cat([-x2, x1], dim=-1)
    return x * emb.cos().to(x.dtype) + rot * emb.sin().to(x.dtype)


def rope_complex(x, positions, base):
    d = x.shape[-1]
    h = d // 2
    cdtype = torch.complex128 if x.dtype == torch.float64 else torch.complex64
    z = torch.complex(x[..., :h].contiguous(), x[..., h:].contiguous()).to(cdtype)  # pair i as x_i + i x_{i+h}
    a = _angles(positions, base, d, torch.float64)
    rot = torch.polar(torch.ones_like(a), a).to(cdtype)
    z = z * rot
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


def rope_loop_positions(x, positions, base):
    d = x.shape[-1]
    h = d // 2
    theta = torch.tensor([base ** (-2 * i / d) for i in range(h)], dtype=torch.float64)
    out = x.clone()
    for t in range(x.shape[-2]):
        m = int(positions[t])
        c, s = torch.cos(m * theta).to(x.dtype), torch.sin(m * theta).to(x.dtype)
        x1, x2 = x[..., t, :h], x[..., t, h:]
        out[..., t, :h] = x1 * c - x2 * s
        out[..., t, h:] = x1 * s + x2 * c
    return out


def rope_rotation_matrices(x, positions, base):
    d = x.shape[-1]
    h = d // 2
    a = _angles(positions, base, d, x.dtype)  # (T, h)
    c, s = a.cos(), a.sin()
    R = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)  # (T, h, 2, 2)
    pairs = torch.stack([x[..., :h], x[..., h:]], dim=-1)  # (..., T, h, 2)
    turned = torch.einsum("thij,...thj->...thi", R, pairs)
    return torch.cat([turned[..., 0], turned[..., 1]], dim=-1)


def rope_exp_log_freqs(x, positions, base):
    import math
    d = x.shape[-1]
    i = torch.arange(d // 2, dtype=torch.float64)
    theta = torch.exp(-2 * i / d * math.log(base))
    a = positions.to(torch.float64).unsqueeze(-1) * theta
    cos, sin = torch.cos(a).to(x.dtype), torch.sin(a).to(x.dtype)
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


# ---------------------------------------------------------------- wrong answers
def rope_interleaved_pairs(x, positions, base):
    d = x.shape[-1]
    a = _angles(positions, base, d, x.dtype)
    cos, sin = a.cos(), a.sin()
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x1 * cos - x2 * sin
    out[..., 1::2] = x1 * sin + x2 * cos
    return out


def rope_opposite_direction(x, positions, base):
    d = x.shape[-1]
    a = _angles(positions, base, d, x.dtype)
    cos, sin = a.cos(), a.sin()
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos + x2 * sin, -x1 * sin + x2 * cos], dim=-1)


def rope_ignores_positions(x, positions, base):
    d, T = x.shape[-1], x.shape[-2]
    a = _angles(torch.arange(T), base, d, x.dtype)
    cos, sin = a.cos(), a.sin()
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def rope_positions_restart_at_zero(x, positions, base):
    d = x.shape[-1]
    a = _angles(positions - positions[0], base, d, x.dtype)
    cos, sin = a.cos(), a.sin()
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def rope_exponent_i_over_d(x, positions, base):
    d = x.shape[-1]
    theta = base ** (-torch.arange(d // 2, dtype=torch.float64) / d)  # forgot the factor 2
    a = (positions.double()[:, None] * theta).to(x.dtype)
    cos, sin = a.cos(), a.sin()
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def rope_positive_exponent(x, positions, base):
    d = x.shape[-1]
    theta = base ** (torch.arange(0, d, 2, dtype=torch.float64) / d)  # minus sign forgotten
    a = (positions.double()[:, None] * theta).to(x.dtype)
    cos, sin = a.cos(), a.sin()
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def rope_sin_cos_swapped(x, positions, base):
    d = x.shape[-1]
    a = _angles(positions, base, d, x.dtype)
    cos, sin = a.cos(), a.sin()
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * sin - x2 * cos, x1 * cos + x2 * sin], dim=-1)


def rope_rotate_half_no_minus(x, positions, base):
    d = x.shape[-1]
    a = _angles(positions, base, d, x.dtype)
    emb = torch.cat([a, a], -1)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    rot = torch.cat([x2, x1], dim=-1)  # rotate_half without the minus sign
    return x * emb.cos() + rot * emb.sin()


def rope_angles_not_duplicated(x, positions, base):
    d = x.shape[-1]
    # one angle per feature (d of them) instead of one per pair: theta_j = base^(-j/d), j = 0..d-1
    theta = base ** (-torch.arange(d, dtype=torch.float64) / d)
    a = (positions.double()[:, None] * theta).to(x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    rot = torch.cat([-x2, x1], dim=-1)
    return x * a.cos() + rot * a.sin()


def rope_in_place(x, positions, base):
    d = x.shape[-1]
    a = _angles(positions, base, d, x.dtype)
    cos, sin = a.cos(), a.sin()
    x1, x2 = x[..., : d // 2].clone(), x[..., d // 2:].clone()
    x[..., : d // 2] = x1 * cos - x2 * sin
    x[..., d // 2:] = x1 * sin + x2 * cos
    return x


def rope_returns_numpy(x, positions, base):
    d = x.shape[-1]
    xn, p = x.detach().numpy(), positions.numpy()
    a = p[:, None] * base ** (-np.arange(0, d, 2) / d)
    x1, x2 = xn[..., : d // 2], xn[..., d // 2:]
    return np.concatenate([x1 * np.cos(a) - x2 * np.sin(a), x1 * np.sin(a) + x2 * np.cos(a)], axis=-1)


def rope_float32(x, positions, base):
    d = x.shape[-1]
    xf = x.float()
    a = _angles(positions, base, d, torch.float32)
    cos, sin = a.cos(), a.sin()
    x1, x2 = xf[..., : d // 2], xf[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


ANSWERS = [
    ("rope_halves_cat", rope_halves_cat, "correct", "split halves, cat the turned pairs (step 2's rotate, batched)"),
    ("rope_rotate_half_form", rope_rotate_half_form, "correct", "x cos + rotate_half(x) sin with duplicated angles"),
    ("rope_complex", rope_complex, "correct", "pairs as complex numbers times exp(i m theta)"),
    ("rope_loop_positions", rope_loop_positions, "correct", "python loop over the T positions"),
    ("rope_rotation_matrices", rope_rotation_matrices, "correct", "explicit 2x2 rotation matrices with einsum"),
    ("rope_exp_log_freqs", rope_exp_log_freqs, "correct", "theta via exp(-2i/d log b), chunk"),
    ("rope_interleaved_pairs", rope_interleaved_pairs, "wrong", "rotates adjacent pairs (2i, 2i+1) instead of halves"),
    ("rope_opposite_direction", rope_opposite_direction, "wrong", "turns by -m theta (opposite direction)"),
    ("rope_ignores_positions", rope_ignores_positions, "wrong", "uses arange(T) instead of the given positions"),
    ("rope_positions_restart_at_zero", rope_positions_restart_at_zero, "wrong",
     "subtracts positions[0] so positions restart at 0 after a cache"),
    ("rope_exponent_i_over_d", rope_exponent_i_over_d, "wrong", "theta_i = b^(-i/d): factor 2 in the exponent forgotten"),
    ("rope_positive_exponent", rope_positive_exponent, "wrong", "theta_i = b^(+2i/d): minus sign forgotten"),
    ("rope_sin_cos_swapped", rope_sin_cos_swapped, "wrong", "sin and cos swapped"),
    ("rope_rotate_half_no_minus", rope_rotate_half_no_minus, "wrong", "rotate_half without the minus sign (not a rotation)"),
    ("rope_angles_not_duplicated", rope_angles_not_duplicated, "wrong",
     "one frequency per feature b^(-j/d), j<d, instead of the pair's shared angle"),
    ("rope_in_place", rope_in_place, "wrong", "writes the rotation into x in place"),
    ("rope_returns_numpy", rope_returns_numpy, "wrong", "returns a numpy array"),
    ("rope_float32", rope_float32, "wrong", "returns float32 for float64 input"),
]
