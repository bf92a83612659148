"""Battery for ex-rms-norm: my_rms_norm(x, weight, eps), x (..., d), weight (d,)."""
import math

import numpy as np
import torch
import torch.nn.functional as F


# ---------------------------------------------------------------- correct answers
def rms_mean_sqrt(x, weight, eps):
    ms = x.pow(2).mean(dim=-1, keepdim=True)
    return x / torch.sqrt(ms + eps) * weight


def rms_rsqrt_sum(x, weight, eps):
    ms = (x * x).sum(-1, keepdim=True) / x.shape[-1]
    return weight * (x * torch.rsqrt(ms + eps))


def rms_torch_builtin(x, weight, eps):
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


def rms_einsum(x, weight, eps):
    d = x.shape[-1]
    ms = torch.einsum("...i,...i->...", x, x) / d
    return torch.einsum("...i,i->...i", x / torch.sqrt(ms + eps)[..., None], weight)


def rms_loop_rows(x, weight, eps):
    d = x.shape[-1]
    rows = x.reshape(-1, d)
    out = []
    for r in rows:
        out.append(r / math.sqrt(float((r ** 2).sum()) / d + eps) * weight)
    if not out:  # no token at all
        return x.clone()
    return torch.stack(out).reshape(x.shape)


def rms_vector_norm(x, weight, eps):
    d = x.shape[-1]
    nrm = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    return x / torch.sqrt(nrm ** 2 / d + eps) * weight


def rms_upcast_then_back(x, weight, eps):
    xd = x.to(torch.float64)
    y = xd / (xd.square().mean(-1, keepdim=True) + eps).sqrt() * weight.to(torch.float64)
    return y.to(x.dtype)


# ---------------------------------------------------------------- wrong answers
def rms_subtracts_mean(x, weight, eps):
    xc = x - x.mean(-1, keepdim=True)
    return xc / torch.sqrt(xc.pow(2).mean(-1, keepdim=True) + eps) * weight


def rms_eps_outside_sqrt(x, weight, eps):
    return x / (torch.sqrt(x.pow(2).mean(-1, keepdim=True)) + eps) * weight


def rms_no_eps(x, weight, eps):
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True)) * weight


def rms_sum_not_mean(x, weight, eps):
    return x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + eps) * weight


def rms_variance_instead_of_mean_square(x, weight, eps):
    return x / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + eps) * weight


def rms_global_statistic(x, weight, eps):
    return x / torch.sqrt(x.pow(2).mean() + eps) * weight


def rms_forgets_weight(x, weight, eps):
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def rms_weight_before_norm(x, weight, eps):
    y = x * weight
    return y / torch.sqrt(y.pow(2).mean(-1, keepdim=True) + eps)


def rms_divides_by_d_minus_1(x, weight, eps):
    return x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) / (x.shape[-1] - 1) + eps) * weight


def rms_mean_abs(x, weight, eps):
    return x / (x.abs().mean(-1, keepdim=True) + eps) * weight


def rms_returns_numpy(x, weight, eps):
    xn, wn = x.detach().numpy(), weight.detach().numpy()
    return xn / np.sqrt((xn ** 2).mean(-1, keepdims=True) + eps) * wn


def rms_in_place(x, weight, eps):
    x.div_(torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)).mul_(weight)
    return x


def rms_float32(x, weight, eps):
    xf = x.float()
    return xf / torch.sqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()


def rms_normalises_first_axis(x, weight, eps):
    return x / torch.sqrt(x.pow(2).mean(0, keepdim=True) + eps) * weight


ANSWERS = [
    ("rms_mean_sqrt", rms_mean_sqrt, "correct", "the notebook's two lines"),
    ("rms_rsqrt_sum", rms_rsqrt_sum, "correct", "rsqrt of sum/d"),
    ("rms_torch_builtin", rms_torch_builtin, "correct", "torch's F.rms_norm"),
    ("rms_einsum", rms_einsum, "correct", "einsum for the mean square and the gain"),
    ("rms_loop_rows", rms_loop_rows, "correct", "python loop over flattened tokens, math.sqrt"),
    ("rms_vector_norm", rms_vector_norm, "correct", "via torch.linalg.vector_norm, eps inside the root"),
    ("rms_upcast_then_back", rms_upcast_then_back, "correct", "computes in float64, casts back to x's dtype"),
    ("rms_subtracts_mean", rms_subtracts_mean, "wrong", "subtracts the mean (LayerNorm without beta)"),
    ("rms_eps_outside_sqrt", rms_eps_outside_sqrt, "wrong", "eps added outside the square root"),
    ("rms_no_eps", rms_no_eps, "wrong", "eps forgotten (zero token gives NaN)"),
    ("rms_sum_not_mean", rms_sum_not_mean, "wrong", "sum of squares instead of mean (no 1/d)"),
    ("rms_variance_instead_of_mean_square", rms_variance_instead_of_mean_square, "wrong",
     "divides by the standard deviation (centred) instead of the RMS"),
    ("rms_global_statistic", rms_global_statistic, "wrong", "one mean square over the whole tensor, not per token"),
    ("rms_forgets_weight", rms_forgets_weight, "wrong", "gain weight not applied"),
    ("rms_weight_before_norm", rms_weight_before_norm, "wrong", "multiplies by weight before normalising"),
    ("rms_divides_by_d_minus_1", rms_divides_by_d_minus_1, "wrong", "mean square over d-1 (unbiased) instead of d"),
    ("rms_mean_abs", rms_mean_abs, "wrong", "divides by the mean absolute value, not the root mean square"),
    ("rms_returns_numpy", rms_returns_numpy, "wrong", "returns a numpy array instead of a torch tensor"),
    ("rms_in_place", rms_in_place, "wrong", "normalises x in place (changes the caller's input)"),
    ("rms_float32", rms_float32, "wrong", "computes and returns float32 for float64 input (wrong dtype)"),
    ("rms_normalises_first_axis", rms_normalises_first_axis, "wrong", "mean square over axis 0 instead of the last axis"),
]
