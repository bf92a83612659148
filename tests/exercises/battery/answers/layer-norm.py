"""Blind battery for exercise `layer-norm` (my_layer_norm(x, gamma, beta, eps))."""
import numpy as np
import torch


# --------------------------------------------------------------------------- correct answers
def correct_1(x, gamma, beta, eps):
    """Style: torch mean / var(unbiased=False) with keepdim, sqrt(var + eps)."""
    mu = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, unbiased=False, keepdim=True)
    return gamma * (x - mu) / torch.sqrt(var + eps) + beta


def correct_2(x, gamma, beta, eps):
    """Style: two-pass centred variance from the squared deviations and torch.rsqrt."""
    centred = x - x.mean(-1, keepdim=True)
    var = (centred * centred).mean(-1, keepdim=True)
    return centred * torch.rsqrt(var + eps) * gamma + beta


def correct_3(x, gamma, beta, eps):
    """Style: explicit sums divided by d, via torch.var_mean(correction=0) for the statistics."""
    var, mu = torch.var_mean(x, dim=-1, correction=0, keepdim=True)
    return torch.addcmul(beta, gamma, (x - mu) / (var + eps).sqrt())


def correct_4(x, gamma, beta, eps):
    """Style: Python loop over the tokens of a (N, d) view, each normalised with plain sums, then reshaped back."""
    d = x.shape[-1]
    flat = x.reshape(-1, d)
    rows = []
    for row in flat:
        mu = row.sum() / d
        dev = row - mu
        var = (dev ** 2).sum() / d
        rows.append(gamma * dev / (var + eps) ** 0.5 + beta)
    if not rows:
        return torch.empty_like(x)
    return torch.stack(rows).reshape(x.shape)


def correct_5(x, gamma, beta, eps):
    """Style: einsum for the mean and the variance (contracting the feature axis with a 1/d vector)."""
    d = x.shape[-1]
    ones = torch.full((d,), 1.0 / d, dtype=x.dtype)
    mu = torch.einsum("...d,d->...", x, ones)[..., None]
    c = x - mu
    var = torch.einsum("...d,...d->...", c, c)[..., None] / d
    return torch.einsum("...d,d->...d", c / torch.sqrt(var + eps), gamma) + beta


def correct_6(x, gamma, beta, eps):
    """Style: torch.nn.functional.layer_norm (the statement does not forbid it)."""
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), gamma, beta, eps)


# --------------------------------------------------------------------------- wrong answers
def wrong_1(x, gamma, beta, eps):
    """Uses the unbiased variance (x.var divides by d - 1), torch's default."""
    return gamma * (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + eps) + beta


def wrong_2(x, gamma, beta, eps):
    """Adds eps outside the square root: (x - mean) / (std + eps)."""
    std = x.std(-1, unbiased=False, keepdim=True)
    return gamma * (x - x.mean(-1, keepdim=True)) / (std + eps) + beta


def wrong_3(x, gamma, beta, eps):
    """Leaves out eps entirely, so a constant token (variance 0) gives 0/0 = NaN."""
    mu = x.mean(-1, keepdim=True)
    return gamma * (x - mu) / x.std(-1, unbiased=False, keepdim=True) + beta


def wrong_4(x, gamma, beta, eps):
    """Normalises over all elements of x (global mean and variance) instead of per token over the last axis."""
    return gamma * (x - x.mean()) / torch.sqrt(x.var(unbiased=False) + eps) + beta


def wrong_5(x, gamma, beta, eps):
    """Normalises over the first axis (dim=0, across tokens/batch) instead of the last."""
    mu = x.mean(0, keepdim=True)
    var = x.var(0, unbiased=False, keepdim=True)
    return gamma * (x - mu) / torch.sqrt(var + eps) + beta


def wrong_6(x, gamma, beta, eps):
    """One-pass variance E[x^2] - E[x]^2, which cancels catastrophically for large values with a small spread."""
    mu = x.mean(-1, keepdim=True)
    var = (x * x).mean(-1, keepdim=True) - mu * mu
    return gamma * (x - mu) / torch.sqrt(var + eps) + beta


def wrong_7(x, gamma, beta, eps):
    """Forgets keepdim=True, so the (..., ) statistics broadcast against the wrong axis (or fail to broadcast)."""
    mu = x.mean(-1)
    var = x.var(-1, unbiased=False)
    return gamma * (x - mu) / torch.sqrt(var + eps) + beta


def wrong_8(x, gamma, beta, eps):
    """Swaps gamma and beta: beta * x_hat + gamma."""
    xhat = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps)
    return beta * xhat + gamma


def wrong_9(x, gamma, beta, eps):
    """Adds beta before scaling by gamma: gamma * (x_hat + beta)."""
    xhat = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps)
    return gamma * (xhat + beta)


def wrong_10(x, gamma, beta, eps):
    """Centres x in place (x -= mean), modifying the caller's tensor."""
    x -= x.mean(-1, keepdim=True)
    var = (x ** 2).mean(-1, keepdim=True)
    return gamma * x / torch.sqrt(var + eps) + beta


def wrong_11(x, gamma, beta, eps):
    """Ignores the eps argument and uses torch.nn.LayerNorm's default 1e-5."""
    mu = x.mean(-1, keepdim=True)
    var = x.var(-1, unbiased=False, keepdim=True)
    return gamma * (x - mu) / torch.sqrt(var + 1e-5) + beta


def wrong_12(x, gamma, beta, eps):
    """Clamps the variance at eps (max(var, eps)) instead of adding eps, wrong for tiny variances."""
    mu = x.mean(-1, keepdim=True)
    var = x.var(-1, unbiased=False, keepdim=True).clamp(min=eps)
    return gamma * (x - mu) / torch.sqrt(var) + beta


def wrong_13(x, gamma, beta, eps):
    """Casts to float32 'for speed', so float64 inputs come back as float32 with float32 round-off."""
    x = x.float()
    mu = x.mean(-1, keepdim=True)
    var = x.var(-1, unbiased=False, keepdim=True)
    return gamma.float() * (x - mu) / torch.sqrt(var + eps) + beta.float()


def wrong_14(x, gamma, beta, eps):
    """Computes in numpy and returns a numpy array instead of a torch tensor."""
    a = np.asarray(x.detach().cpu())
    mu = a.mean(-1, keepdims=True)
    var = a.var(-1, keepdims=True)
    return np.asarray(gamma) * (a - mu) / np.sqrt(var + eps) + np.asarray(beta)


def wrong_15(x, gamma, beta, eps):
    """Hard-codes dim=2, assuming a (B, T, d) input, instead of the last axis of any (..., d) input."""
    mu = x.mean(2, keepdim=True)
    var = x.var(2, unbiased=False, keepdim=True)
    return gamma * (x - mu) / torch.sqrt(var + eps) + beta


def wrong_16(x, gamma, beta, eps):
    """Divides by the variance instead of the standard deviation (forgets the square root)."""
    mu = x.mean(-1, keepdim=True)
    var = x.var(-1, unbiased=False, keepdim=True)
    return gamma * (x - mu) / (var + eps) + beta


def wrong_17(x, gamma, beta, eps):
    """Squeezes the result, dropping size-1 axes such as a single token's."""
    return correct_1(x, gamma, beta, eps).squeeze()


ANSWERS = [
    ("correct_1", correct_1, "correct", "mean / var(unbiased=False), keepdim, sqrt(var + eps)"),
    ("correct_2", correct_2, "correct", "centred squares, rsqrt"),
    ("correct_3", correct_3, "correct", "torch.var_mean(correction=0), addcmul"),
    ("correct_4", correct_4, "correct", "Python loop over tokens with explicit sums"),
    ("correct_5", correct_5, "correct", "einsum for statistics and gain"),
    ("correct_6", correct_6, "correct", "F.layer_norm built-in (not forbidden by the statement)"),
    ("wrong_1", wrong_1, "wrong", "unbiased variance (d - 1)"),
    ("wrong_2", wrong_2, "wrong", "eps outside the square root"),
    ("wrong_3", wrong_3, "wrong", "no eps (NaN on a constant token)"),
    ("wrong_4", wrong_4, "wrong", "global statistics over all elements"),
    ("wrong_5", wrong_5, "wrong", "statistics over dim 0"),
    ("wrong_6", wrong_6, "wrong", "one-pass E[x^2]-E[x]^2 variance (cancellation for large values)"),
    ("wrong_7", wrong_7, "wrong", "no keepdim (broadcast against the wrong axis)"),
    ("wrong_8", wrong_8, "wrong", "gamma and beta swapped"),
    ("wrong_9", wrong_9, "wrong", "beta added before gamma scales"),
    ("wrong_10", wrong_10, "wrong", "centres x in place, mutating the input"),
    ("wrong_11", wrong_11, "wrong", "eps argument ignored, 1e-5 hard-coded"),
    ("wrong_12", wrong_12, "wrong", "variance clamped at eps instead of var + eps"),
    ("wrong_13", wrong_13, "wrong", "casts to float32 (dtype and precision lost)"),
    ("wrong_14", wrong_14, "wrong", "returns a numpy array instead of a torch tensor"),
    ("wrong_15", wrong_15, "wrong", "hard-coded dim=2 instead of the last axis"),
    ("wrong_16", wrong_16, "wrong", "divides by the variance, not its square root"),
    ("wrong_17", wrong_17, "wrong", "squeezes size-1 axes out of the result"),
]
