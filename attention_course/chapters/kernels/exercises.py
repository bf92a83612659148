"""Chapter 2 exercises: Nadaraya-Watson, the Gaussian-to-softmax identity, leave-one-out, a learned metric.

Each exercise lists the mistakes learners typically make (mutants) with the
feedback they get; ``tests/exercises/test_exercises.py`` checks that every mutant is
caught with its own message.
"""

from __future__ import annotations

import numpy as np
import torch

from ...core import attention as att
from . import smoothing as ker
from ...exercises._core import Case, Exercise, Mutant, register

__all__ = ["EXERCISES"]



def _has_nan(got, expected, args):
    if not np.all(np.isfinite(np.asarray(got, dtype=float))):
        return (
            "your result has NaN: far from every training point all kernel values underflow "
            "to 0 and you divide 0 by 0. Work with log-kernels and subtract each row's maximum "
            "(a softmax) before exp."
        )
    return None


def _gauss_weights(x_query, x_train, h):
    """Stable Gaussian weights for 1-D inputs, used by several mutants."""
    return att.softmax(-((x_query[:, None] - x_train[None, :]) ** 2) / (2 * h**2))  # (T, S)


# ------------------------------------------------------------ Nadaraya-Watson
def _nw_cases() -> list[Case]:
    rng = np.random.default_rng(20)
    x = np.sort(rng.uniform(0, 5, 8))
    return [
        Case("5 queries, 8 training points, h=1", (rng.uniform(0, 5, 5), x, rng.normal(size=8), 1.0)),
        Case("narrow kernel, h=0.3", (rng.uniform(0, 5, 6), x, rng.normal(size=8), 0.3)),
        Case("one training point", (rng.uniform(0, 5, 3), np.array([2.0]), np.array([1.5]), 0.7)),
        Case("queries at the training points, h=2", (x.copy(), x, rng.normal(size=8), 2.0)),
        Case("a query far from the data, h=0.1", (np.array([1.0, 12.0]), x, rng.normal(size=8), 0.1)),
    ]


def _nw_reference(x_query, x_train, y_train, h):
    return ker.nadaraya_watson(x_query, x_train, y_train, "gaussian", h)[0]


def _nw_with(log_k, normalise_axis=-1):
    def f(x_query, x_train, y_train, h):
        diff = x_query[:, None] - x_train[None, :]  # (T, S)
        w = att.softmax(log_k(diff, h), axis=normalise_axis)
        return w @ y_train

    return f


def _nw_unnormalised(x_query, x_train, y_train, h):
    return np.exp(-((x_query[:, None] - x_train[None, :]) ** 2) / (2 * h**2)) @ y_train


def _nw_naive(x_query, x_train, y_train, h):
    k = np.exp(-((x_query[:, None] - x_train[None, :]) ** 2) / (2 * h**2))
    return (k / k.sum(axis=-1, keepdims=True)) @ y_train


register(
    Exercise(
        id="nadaraya-watson",
        title="The Nadaraya-Watson estimator",
        make_cases=_nw_cases,
        reference=_nw_reference,
        mutants=(
            Mutant(
                "unnormalised", _nw_unnormalised,
                "you summed kernel-weighted targets without normalising: divide by the sum of "
                "the kernel values over the training points, so the weights sum to 1.",
            ),
            Mutant(
                "normalised-over-queries", _nw_with(lambda d, h: -(d**2) / (2 * h**2), normalise_axis=0),
                "your weights sum to 1 over the queries; each query needs its own distribution "
                "over the training points (normalise over the last axis of the (T, S) matrix).",
            ),
            Mutant(
                "bandwidth-as-w", _nw_with(lambda d, h: -((d * h) ** 2) / 2),
                "you multiplied the distance by h; h is a width, so divide: exp(-(x - x_j)^2 / (2 h^2)). "
                "(Multiplying is d2l's parametrisation w = 1/h.)",
            ),
            Mutant(
                "bandwidth-not-squared", _nw_with(lambda d, h: -(d**2) / (2 * h)),
                "close: the bandwidth must be squared too, exp(-(x - x_j)^2 / (2 h^2)).",
            ),
            Mutant(
                "no-half", _nw_with(lambda d, h: -(d**2) / h**2),
                "close: the Gaussian kernel has a factor 1/2, exp(-(x - x_j)^2 / (2 h^2)).",
            ),
            Mutant(
                "no-max-shift", _nw_naive,
                "right formula, but a query far from every training point gives 0/0 = NaN: all "
                "kernel values underflow. Subtract each row's largest log-kernel before exp "
                "(that is what a softmax does).",
            ),
        ),
        hints=(_has_nan,),
        alternatives=(
            lambda xq, xt, yt, h: torch.softmax(
                -((torch.as_tensor(xq)[:, None] - torch.as_tensor(xt)[None, :]) ** 2) / (2 * h**2), dim=-1
            ).numpy() @ yt,
            lambda xq, xt, yt, h: np.array([
                np.exp(lk - np.logaddexp.reduce(lk)) @ yt
                for lk in (-((xi - xt) ** 2) / (2 * h**2) for xi in xq)
            ]),
        ),
    )
)


# ------------------------------------------------------ Gaussian = softmax + bias
def _identity_cases() -> list[Case]:
    rng = np.random.default_rng(21)

    def keys(S, d, spread):  # keys of unequal norm, so the bias matters
        return rng.normal(size=(S, d)) * rng.uniform(0.3, spread, size=(S, 1))

    return [
        Case("T=3, S=5, d=2, sigma=1", (rng.normal(size=(3, 2)), keys(5, 2, 2.0), rng.normal(size=(5, 2)), 1.0)),
        Case("T=4, S=6, d=3, sigma=0.5", (rng.normal(size=(4, 3)), keys(6, 3, 2.0), rng.normal(size=(6, 1)), 0.5)),
        Case("one query, d=8, sigma=2", (rng.normal(size=(1, 8)), keys(7, 8, 3.0), rng.normal(size=(7, 3)), 2.0)),
        Case("long vectors, sigma=0.3", (10 * rng.normal(size=(2, 4)), keys(5, 4, 10.0), rng.normal(size=(5, 2)), 0.3)),
        Case(  # scores near +-800: exp overflows for one query and underflows for the other
            "queries far from every key, sigma=0.5",
            (np.array([[40.0, 0.0], [-40.0, 0.0]]), rng.normal(size=(5, 2)) + [5.0, 0.0], rng.normal(size=(5, 3)), 0.5),
        ),
    ]


def _attn_bias(bias_fn, scale_fn=lambda q, s: 1.0 / s**2):
    def f(q, k, v, sigma):
        scores = q @ k.T * scale_fn(q, sigma) + bias_fn(k, sigma)[None, :]  # (T, S)
        return att.softmax(scores) @ v

    return f


register(
    Exercise(
        id="gaussian-as-softmax",
        title="Gaussian Nadaraya-Watson as softmax attention",
        make_cases=_identity_cases,
        reference=lambda q, k, v, sigma: ker.nadaraya_watson(q, k, v, "gaussian", sigma)[0],
        mutants=(
            Mutant(
                "no-bias", _attn_bias(lambda k, s: np.zeros(len(k))),
                "that is plain dot-product attention: the keys need the bias -|k_j|^2 / (2 sigma^2). "
                "(A term that depends only on the query, like |q|^2, cancels in the softmax, so it "
                "cannot replace it.)",
            ),
            Mutant(
                "bias-sign", _attn_bias(lambda k, s: (k**2).sum(-1) / (2 * s**2)),
                "the bias has the wrong sign: -|q - k|^2 = 2 q.k - |q|^2 - |k|^2, so long keys are "
                "penalised with -|k_j|^2 / (2 sigma^2).",
            ),
            Mutant(
                "bias-no-half", _attn_bias(lambda k, s: -(k**2).sum(-1) / s**2),
                "close: the bias is -|k_j|^2 / (2 sigma^2), with the factor 1/2.",
            ),
            Mutant(
                "sqrt-d-scale",
                _attn_bias(lambda k, s: -(k**2).sum(-1) / 2 / np.sqrt(k.shape[-1]),
                           scale_fn=lambda q, s: 1.0 / np.sqrt(q.shape[-1])),
                "you used the attention scale 1/sqrt(d); for a Gaussian of width sigma, both the "
                "scores and the bias are divided by sigma^2.",
            ),
        ),
        hints=(_has_nan,),
        alternatives=(
            lambda q, k, v, sigma: att.scaled_dot_product_attention(
                q, k, v, mask=-(k**2).sum(-1)[None, :] / (2 * sigma**2), scale=sigma**-2
            )[0],
            lambda q, k, v, sigma: torch.nn.functional.scaled_dot_product_attention(
                torch.as_tensor(q), torch.as_tensor(k), torch.as_tensor(v),
                attn_mask=-(torch.as_tensor(k) ** 2).sum(-1)[None, :] / (2 * sigma**2), scale=sigma**-2,
            ).numpy(),
            lambda q, k, v, sigma: att.softmax(
                -((q[:, None, :] - k[None, :, :]) ** 2).sum(-1) / (2 * sigma**2)
            ) @ v,
        ),
    )
)


# ------------------------------------------------------------- leave-one-out
def _loo_cases() -> list[Case]:
    rng = np.random.default_rng(22)
    data = ker.sine_data(n=20, seed=22)
    return [
        Case("n=10, h=0.5", (np.sort(rng.uniform(0, 5, 10)), rng.normal(size=10), 0.5)),
        Case("n=20 sine data, h=0.4", (data.x_train, data.y_train, 0.4)),
        Case("two points", (np.array([0.0, 1.0]), np.array([3.0, -1.0]), 1.0)),
        Case("a far-away point, h=0.1", (np.array([0.0, 0.2, 0.3, 9.0]), rng.normal(size=4), 0.1)),
        Case(  # a duplicate of x_i is another point: it stays in, with its own target
            "repeated x values", (np.array([0.0, 0.0, 1.0, 1.0, 1.0, 2.5]), rng.normal(size=6), 0.5),
        ),
    ]


def _loo_keeps_self(x, y, h):
    return _gauss_weights(x, x, h) @ y


def _loo_zero_after(x, y, h):
    w = _gauss_weights(x, x, h)
    return (w * (1 - np.eye(len(x)))) @ y


def _loo_skip_equal(x, y, h):
    log_k = np.where(x[:, None] == x[None, :], -np.inf, -((x[:, None] - x[None, :]) ** 2) / (2 * h**2))
    return att.softmax(log_k) @ y  # (n,), drops every point with the same x, not just i


register(
    Exercise(
        id="leave-one-out",
        title="Leave-one-out predictions",
        make_cases=_loo_cases,
        reference=lambda x, y, h: ker.nadaraya_watson(x, x, y, "gaussian", h, leave_one_out=True)[0],
        mutants=(
            Mutant(
                "keeps-self", _loo_keeps_self,
                "each point still sees its own target, which gets the largest weight: remove "
                "j = i before normalising (set its log-kernel to -inf, or its kernel value to 0).",
            ),
            Mutant(
                "zero-after-normalising", _loo_zero_after,
                "you zeroed the diagonal after normalising, so the remaining weights no longer "
                "sum to 1: remove point i first, then normalise.",
            ),
            Mutant(
                "skip-equal-values", _loo_skip_equal,
                "you left out every point whose x equals x[i]; leave out only point i itself "
                "(the diagonal j = i). Another point at the same x is a different sample, and its "
                "target counts.",
            ),
        ),
        hints=(_has_nan,),
        alternatives=(
            lambda x, y, h: np.array([
                ker.nadaraya_watson(x[i : i + 1], np.delete(x, i), np.delete(y, i), "gaussian", h)[0][0]
                for i in range(len(x))
            ]),
            lambda x, y, h: torch.softmax(
                (-((torch.as_tensor(x)[:, None] - torch.as_tensor(x)[None, :]) ** 2) / (2 * h**2))
                .fill_diagonal_(float("-inf")), dim=-1,
            ).numpy() @ y,
        ),
    )
)


# ------------------------------------------------------------- learned metric
def _metric_cases() -> list[Case]:
    rng = np.random.default_rng(23)
    return [
        Case("W = identity, d=2", (rng.normal(size=(3, 2)), rng.normal(size=(4, 2)), np.eye(2))),
        Case("diagonal W, d=3", (rng.normal(size=(3, 3)), rng.normal(size=(5, 3)), np.diag([3.0, 0.5, 0.0]))),
        Case("random W, d=4", (rng.normal(size=(4, 4)), rng.normal(size=(6, 4)), rng.normal(size=(4, 4)))),
        Case("one query, d=1", (rng.normal(size=(1, 1)), rng.normal(size=(4, 1)), np.array([[2.0]]))),
    ]


def _metric_with(dist2):
    def f(q, k, W):
        diff = q[:, None, :] - k[None, :, :]  # (T, S, d)
        return np.exp(dist2(diff, W))

    return f


register(
    Exercise(
        id="metric-kernel",
        title="A Gaussian kernel with a learned metric",
        make_cases=_metric_cases,
        reference=lambda q, k, W: ker.kernel_matrix(q @ W.T, k @ W.T, "gaussian", 1.0),
        mutants=(
            Mutant(
                "W-transposed", _metric_with(lambda d, W: -((d @ W) ** 2).sum(-1) / 2),
                "you applied W^T: with points stored as rows, W (q - k) is (q - k) @ W.T.",
            ),
            Mutant(
                "W-as-metric", _metric_with(lambda d, W: -np.einsum("tsi,ij,tsj->ts", d, W, d) / 2),
                "you used (q - k)^T W (q - k); the squared length of W (q - k) is "
                "(q - k)^T W^T W (q - k).",
            ),
            Mutant(
                "no-half", _metric_with(lambda d, W: -((d @ W.T) ** 2).sum(-1)),
                "close: the kernel is exp(-|W (q - k)|^2 / 2), with the factor 1/2.",
            ),
            Mutant(
                "not-squared", _metric_with(lambda d, W: -np.sqrt(((d @ W.T) ** 2).sum(-1)) / 2),
                "you used the length |W (q - k)|; the Gaussian uses its square.",
            ),
        ),
        alternatives=(
            lambda q, k, W: np.exp(-0.5 * np.einsum("tsi,tsi->ts", *(2 * [np.einsum("ij,tsj->tsi", W, q[:, None] - k[None])]))),
            lambda q, k, W: np.array([[np.exp(-0.5 * np.sum((W @ (qi - kj)) ** 2)) for kj in k] for qi in q]),
        ),
    )
)

EXERCISES = ("nadaraya-watson", "gaussian-as-softmax", "leave-one-out", "metric-kernel")
