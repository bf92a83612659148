"""Chapter 2 exercises: Nadaraya-Watson, the Gaussian-to-softmax identity, leave-one-out, a learned metric.

Each lists the learners' typical mistakes (mutants) with their feedback, and the rules its statement draws.
"""

from __future__ import annotations

import numpy as np
import torch

from ...core import attention as att
from . import smoothing as ker
from ...exercises._core import Case, Exercise, in_place_rule, Mutant, output_rule, register, Rule, SCORE_TIPS

__all__ = ["EXERCISES"]



def _has_nan(got, expected, args):
    if not np.all(np.isfinite(np.asarray(got, dtype=float))):
        return (
            "your result has NaN: far from every training point all kernel values underflow "
            "to 0 and you divide 0 by 0. Work with log-kernels and subtract each row's maximum "
            "(a softmax) before exp."
        )
    return None


UNDERFLOW = np.sqrt(2 * 745.0)  # exp(-d^2 / (2 h^2)) is 0 in float64 once d / h exceeds this (38.6)


def _far(x_query, x_train, h) -> bool:
    """True when some query is so far from every training point that all its kernel values underflow."""
    return bool((np.abs(x_query[:, None] - x_train[None, :]).min(axis=1) / h).max() > UNDERFLOW)


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


def _nw_row_shifted_over_queries(x_query, x_train, y_train, h):
    log_k = -((x_query[:, None] - x_train[None, :]) ** 2) / (2 * h**2)  # (T, S)
    e = np.exp(log_k - log_k.max(axis=1, keepdims=True))  # (T, S), each row shifted by its own max
    return (e / e.sum(axis=0, keepdims=True)) @ y_train  # normalised over the queries (axis 0)


def _nw_shifted_unnormalised(x_query, x_train, y_train, h):
    log_k = -((x_query[:, None] - x_train[None, :]) ** 2) / (2 * h**2)  # (T, S)
    return np.exp(log_k - log_k.max(axis=1, keepdims=True)) @ y_train  # largest weight 1, rows not summed to 1


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
            Mutant("unnormalised", _nw_unnormalised,
                   "you summed kernel-weighted targets without normalising: divide by the sum of "
                   "the kernel values over the training points, so the weights sum to 1."),
            Mutant("normalised-over-queries", _nw_with(lambda d, h: -(d**2) / (2 * h**2), normalise_axis=0),
                   "your weights sum to 1 over the queries; each query needs its own distribution "
                   "over the training points (normalise over the last axis of the (T, S) matrix)."),
            Mutant("row-max-then-normalised-over-queries", _nw_row_shifted_over_queries,
                   "you normalised over the wrong axis: you divided by the sum down each column, over the queries. "
                   "Each query (a row of the (T, S) matrix) needs weights that sum to 1 over the training points: "
                   "sum with axis=1 (or -1), keepdims=True."),
            Mutant("max-shift-without-normalising", _nw_shifted_unnormalised,
                   "no normalisation: subtracting each row's maximum makes the largest weight 1, but the weights "
                   "must also sum to 1. Divide each row by its sum over the training points."),
            Mutant("bandwidth-as-w", _nw_with(lambda d, h: -((d * h) ** 2) / 2),
                   "you multiplied the distance by h; h is a width, so divide: exp(-(x - x_j)^2 / (2 h^2)). "
                   "(Multiplying is d2l's parametrisation w = 1/h.)"),
            Mutant("bandwidth-not-squared", _nw_with(lambda d, h: -(d**2) / (2 * h)),
                   "close: the bandwidth must be squared too, exp(-(x - x_j)^2 / (2 h^2))."),
            Mutant("divided-by-h", _nw_with(lambda d, h: -(d**2) / h),
                   "you divided the squared distance by h; the Gaussian kernel divides it by 2 h^2 (both the 2 "
                   "and the square are missing): exp(-(x - x_j)^2 / (2 h^2))."),
            Mutant("no-half", _nw_with(lambda d, h: -(d**2) / h**2),
                   "close: the Gaussian kernel has a factor 1/2, exp(-(x - x_j)^2 / (2 h^2))."),
            Mutant("abs-not-squared", _nw_with(lambda d, h: -np.abs(d) / (2 * h**2)),
                   "you used the distance |x - x_j| itself (a Laplace kernel); the Gaussian kernel squares it: "
                   "exp(-(x - x_j)^2 / (2 h^2))."),
            Mutant("plain-mean", lambda xq, xt, yt, h: np.full(len(xq), yt.mean()),
                   "that is the plain mean of the targets, the same for every query. Each query weights the "
                   "targets by its kernel values: nearer training points count more."),
            Mutant("no-max-shift", _nw_naive,
                   "right formula, but a query far from every training point gives 0/0 = NaN: all "
                   "kernel values underflow. Subtract each row's largest log-kernel before exp "
                   "(that is what a softmax does)."),
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
        rules=(
            Rule("range", "a query far from every training point (every kernel value underflows) still "
                 "gets a weighted average, that of the nearest points",
                 ("a query far from the data, h=0.1",), lambda xq, xt, yt, h: _far(xq, xt, h), ("no-max-shift",), quote='must still get the weighted average of the nearest points, not NaN'),
            Rule("edge-size", "one training point: every prediction is its target",
                 ("one training point",), lambda xq, xt, yt, h: len(xt) == 1, ("unnormalised",), quote='with a single training point every prediction is its target'),
            Rule("range", "bandwidths below and above 1: h is a width, exp(-(x - x_j)^2 / (2 h^2))",
                 ("narrow kernel, h=0.3", "queries at the training points, h=2"), lambda xq, xt, yt, h: h != 1,
                 ("bandwidth-as-w", "bandwidth-not-squared", "divided-by-h"), quote='Use the Gaussian kernel'),
            Rule("edge-size", "T != S: each query's weights are normalised over the S training points",
                 ("5 queries, 8 training points, h=1",), lambda xq, xt, yt, h: len(xq) != len(xt),
                 ("normalised-over-queries",), quote='$T$ may differ from $S$'),
            output_rule("a float64 array (T,)", "5 queries, 8 training points, h=1",
                        "the predictions, a float64 array of shape `(T,)`", _nw_reference, "float32", "list"),
            in_place_rule("5 queries, 8 training points, h=1", _nw_reference, index=1),
        ),
        framing=('Write `my_nadaraya_watson`',),
        difficulty=1,
        minutes=8,
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


def _attn_bias_unstable(q, k, v, sigma):
    e = np.exp(q @ k.T / sigma**2 - (k**2).sum(-1)[None, :] / (2 * sigma**2))  # (T, S), overflows far away
    return e / e.sum(axis=-1, keepdims=True) @ v


def _scores(q, k, v, sigma):
    return q @ k.T / sigma**2 - (k**2).sum(-1)[None, :] / (2 * sigma**2)  # (T, S)


register(
    Exercise(
        id="gaussian-as-softmax",
        error_tips=SCORE_TIPS,
        title="Gaussian Nadaraya-Watson as softmax attention",
        make_cases=_identity_cases,
        reference=_nw_reference,
        mutants=(
            Mutant("no-bias", _attn_bias(lambda k, s: np.zeros(len(k))),
                   "that is plain dot-product attention: the keys need the bias -|k_j|^2 / (2 sigma^2). "
                   "(A term that depends only on the query, like |q|^2, cancels in the softmax, so it "
                   "cannot replace it.)"),
            Mutant("bias-sign", _attn_bias(lambda k, s: (k**2).sum(-1) / (2 * s**2)),
                   "the bias has the wrong sign: -|q - k|^2 = 2 q.k - |q|^2 - |k|^2, so long keys are "
                   "penalised with -|k_j|^2 / (2 sigma^2)."),
            Mutant("bias-no-half", _attn_bias(lambda k, s: -(k**2).sum(-1) / s**2),
                   "close: the bias is -|k_j|^2 / (2 sigma^2), with the factor 1/2."),
            Mutant("sqrt-d-scale",
                   _attn_bias(lambda k, s: -(k**2).sum(-1) / 2 / np.sqrt(k.shape[-1]),
                              scale_fn=lambda q, s: 1.0 / np.sqrt(q.shape[-1])),
                   "you used the attention scale 1/sqrt(d); for a Gaussian of width sigma, both the "
                   "scores and the bias are divided by sigma^2."),
            Mutant("sigma-not-squared", _attn_bias(lambda k, s: -(k**2).sum(-1) / (2 * s), scale_fn=lambda q, s: 1.0 / s),
                   "close: sigma must be squared, scores q.k / sigma^2 and bias -|k_j|^2 / (2 sigma^2)."),
            Mutant("scores-halved", _attn_bias(lambda k, s: -(k**2).sum(-1) / (2 * s**2), scale_fn=lambda q, s: 0.5 / s**2),
                   "your scores are q.k / (2 sigma^2); the 1/2 belongs to the squared norms only: "
                   "-|q - k|^2 / (2 sigma^2) = q.k / sigma^2 - |k|^2 / (2 sigma^2) - |q|^2 / (2 sigma^2)."),
            Mutant("bias-without-sigma", _attn_bias(lambda k, s: -(k**2).sum(-1) / 2),
                   "your bias -|k_j|^2 / 2 misses the width: it is -|k_j|^2 / (2 sigma^2), scaled like the scores."),
            Mutant("no-max-shift", _attn_bias_unstable,
                   "right formula, but for queries far from every key exp of the scores overflows (inf / inf = "
                   "NaN) or underflows (0 / 0 = NaN): subtract each row's largest score before exp, as a "
                   "softmax does."),
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
        rules=(
            Rule("range", "queries far from every key (scores near +-800) must not overflow",
                 ("queries far from every key, sigma=0.5",),
                 lambda q, k, v, sigma: np.abs(_scores(q, k, v, sigma)).max() > 709, ("no-max-shift",), quote='where the scores reach $\\pm 800$'),
            Rule("range", "keys of unequal length: the bias -|k_j|^2 / (2 sigma^2) decides",
                 ("T=3, S=5, d=2, sigma=1", "long vectors, sigma=0.3"),
                 lambda q, k, v, sigma: np.ptp(np.linalg.norm(k, axis=-1)) > 0.5, ("no-bias", "bias-sign"), quote='The keys have different lengths, so the bias matters'),
            Rule("range", "widths other than 1: scores and bias are both divided by sigma^2",
                 ("T=4, S=6, d=3, sigma=0.5", "one query, d=8, sigma=2"), lambda q, k, v, sigma: sigma != 1,
                 ("sigma-not-squared", "bias-without-sigma"), quote='$\\sigma$ need not be 1'),
            output_rule("a float64 array (T, d_v)", "T=3, S=5, d=2, sigma=1",
                        "Return the output, a float64 array of shape `(T, d_v)`", _nw_reference, "float32", "list"),
            in_place_rule("T=3, S=5, d=2, sigma=1", _nw_reference, index=1),
        ),
        framing=('Write `my_gaussian_attention`', 'Compute Gaussian Nadaraya-Watson **as attention**'),
        difficulty=2,
        minutes=20,
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


def _loo_reference(x, y, h):
    return ker.nadaraya_watson(x, x, y, "gaussian", h, leave_one_out=True)[0]


def _loo_keeps_self(x, y, h):
    return _gauss_weights(x, x, h) @ y


def _loo_zero_after(x, y, h):
    w = _gauss_weights(x, x, h)
    return (w * (1 - np.eye(len(x)))) @ y


def _loo_with(log_k):
    def f(x, y, h):
        lk = log_k(x[:, None] - x[None, :], h)  # (n, n)
        np.fill_diagonal(lk, -np.inf)  # point i left out
        return att.softmax(lk) @ y

    return f


def _loo_unstable(x, y, h):
    k = np.exp(-((x[:, None] - x[None, :]) ** 2) / (2 * h**2)) * (1 - np.eye(len(x)))  # (n, n)
    return k @ y / k.sum(axis=-1)  # 0 / 0 for a point far from the others


def _loo_far(x, y, h) -> bool:
    d = np.abs(x[:, None] - x[None, :]) + np.diag(np.full(len(x), np.inf))  # (n, n), i itself excluded
    return bool((d.min(axis=1) / h).max() > UNDERFLOW)


def _loo_skip_equal(x, y, h):
    log_k = np.where(x[:, None] == x[None, :], -np.inf, -((x[:, None] - x[None, :]) ** 2) / (2 * h**2))
    return att.softmax(log_k) @ y  # (n,), drops every point with the same x, not just i


register(
    Exercise(
        id="leave-one-out",
        title="Leave-one-out predictions",
        make_cases=_loo_cases,
        reference=_loo_reference,
        mutants=(
            Mutant("keeps-self", _loo_keeps_self,
                   "each point still sees its own target, which gets the largest weight: remove "
                   "j = i before normalising (set its log-kernel to -inf, or its kernel value to 0)."),
            Mutant("zero-after-normalising", _loo_zero_after,
                   "you zeroed the diagonal after normalising, so the remaining weights no longer "
                   "sum to 1: remove point i first, then normalise."),
            Mutant("skip-equal-values", _loo_skip_equal,
                   "you left out every point whose x equals x[i]; leave out only point i itself "
                   "(the diagonal j = i). Another point at the same x is a different sample, and its "
                   "target counts."),
            Mutant("no-max-shift", _loo_unstable,
                   "right idea, but a point far from all the others gets 0 / 0 = NaN: its kernel values "
                   "all underflow. Work with log-kernels, set the diagonal to -inf and subtract each row's "
                   "maximum before exp (a softmax)."),
            Mutant("bandwidth-not-squared", _loo_with(lambda d, h: -(d**2) / (2 * h)),
                   "close: the bandwidth must be squared too, exp(-(x_i - x_j)^2 / (2 h^2))."),
            Mutant("no-half", _loo_with(lambda d, h: -(d**2) / h**2),
                   "close: the Gaussian kernel has a factor 1/2, exp(-(x_i - x_j)^2 / (2 h^2))."),
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
        rules=(
            Rule("tie", "two points at the same x: only point i itself is left out",
                 ("repeated x values",), lambda x, y, h: len(set(x.tolist())) < len(x), ("skip-equal-values",), quote='Two points may share an x value; only point `i` itself is left out'),
            Rule("edge-size", "two points: each is predicted by the other's target alone",
                 ("two points",), lambda x, y, h: len(x) == 2, ("keeps-self", "zero-after-normalising"), quote="With two points each is predicted by the other's target"),
            Rule("range", "a point far from all the others (its kernel values underflow) still gets its "
                 "nearest neighbours' average",
                 ("a far-away point, h=0.1",), _loo_far, ("no-max-shift",), quote="a point far from all the others, whose kernel values underflow, gets its nearest neighbours' average, not NaN"),
            output_rule("a float64 array (n,)", "n=10, h=0.5",
                        "the predictions, a float64 array of shape `(n,)`", _loo_reference, "float32", "list"),
            in_place_rule("n=10, h=0.5", _loo_reference, index=1),
        ),
        framing=('Write `my_leave_one_out(x, y, bandwidth)`',),
        difficulty=2,
        minutes=10,
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


def _metric_reference(q, k, W):
    return ker.kernel_matrix(q @ W.T, k @ W.T, "gaussian", 1.0)


def _metric_row_normalised(q, k, W):
    diff = q[:, None, :] - k[None, :, :]  # (T, S, d)
    kern = np.exp(-((diff @ W.T) ** 2).sum(-1) / 2)  # (T, S)
    return kern / kern.sum(axis=1, keepdims=True)  # rows sum to 1, like softmax weights


def _rows_sum_to_one(got, expected, args):
    """A kernel matrix whose rows sum to 1 has been normalised like attention weights."""
    g = np.asarray(got, dtype=float)
    if g.ndim == 2 and g.shape[1] > 1 and np.allclose(g.sum(axis=1), 1.0, rtol=1e-9, atol=1e-12):
        return _ROW_NORMALISED
    return None


_ROW_NORMALISED = ("your rows sum to 1: this is the kernel itself, not normalised weights. Return "
                   "exp(-|W (q_i - k_j)|^2 / 2) without dividing by the row sums (an entry is 1 where q_i = k_j).")


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
        reference=_metric_reference,
        mutants=(
            Mutant("W-transposed", _metric_with(lambda d, W: -((d @ W) ** 2).sum(-1) / 2),
                   "you applied W^T: with points stored as rows, W (q - k) is (q - k) @ W.T."),
            Mutant("W-as-metric", _metric_with(lambda d, W: -np.einsum("tsi,ij,tsj->ts", d, W, d) / 2),
                   "you used (q - k)^T W (q - k); the squared length of W (q - k) is "
                   "(q - k)^T W^T W (q - k)."),
            Mutant("no-half", _metric_with(lambda d, W: -((d @ W.T) ** 2).sum(-1)),
                   "close: the kernel is exp(-|W (q - k)|^2 / 2), with the factor 1/2."),
            Mutant("not-squared", _metric_with(lambda d, W: -np.sqrt(((d @ W.T) ** 2).sum(-1)) / 2),
                   "you used the length |W (q - k)|; the Gaussian uses its square."),
            Mutant("query-only-projected",
                   lambda q, k, W: np.exp(-(((q @ W.T)[:, None, :] - k[None, :, :]) ** 2).sum(-1) / 2),
                   "you projected the queries but not the keys: the metric is |W (q - k)| = |W q - W k|, "
                   "so both go through W."),
            Mutant("dot-product", lambda q, k, W: np.exp((q @ W.T) @ (k @ W.T).T),
                   "you used the dot product (W q_i) . (W k_j), attention's score; this kernel uses the distance "
                   "between the projected points, exp(-|W q_i - W k_j|^2 / 2), so it is largest (1) where q_i = k_j."),
            Mutant("row-normalised", _metric_row_normalised, _ROW_NORMALISED),
            Mutant("no-minus", _metric_with(lambda d, W: ((d @ W.T) ** 2).sum(-1) / 2),
                   "your kernel grows with the distance: it is exp(-|W (q - k)|^2 / 2), with a minus sign, "
                   "so its values lie in (0, 1]."),
        ),
        hints=(_rows_sum_to_one,),
        alternatives=(
            lambda q, k, W: np.exp(-0.5 * np.einsum("tsi,tsi->ts", *(2 * [np.einsum("ij,tsj->tsi", W, q[:, None] - k[None])]))),
            lambda q, k, W: np.array([[np.exp(-0.5 * np.sum((W @ (qi - kj)) ** 2)) for kj in k] for qi in q]),
        ),
        rules=(
            Rule("range", "a W that is not symmetric: W (q - k) is (q - k) @ W.T",
                 ("random W, d=4",), lambda q, k, W: not np.allclose(W, W.T), ("W-transposed", "W-as-metric"), quote='`W` need not be symmetric or invertible'),
            Rule("edge-size", "a singular W: a direction W ignores does not count",
                 ("diagonal W, d=3",), lambda q, k, W: abs(np.linalg.det(W)) < 1e-12,
                 ("query-only-projected", "W-as-metric"), quote='`W` need not be symmetric or invertible'),
            Rule("edge-size", "W = identity: the plain Gaussian kernel exp(-|q - k|^2 / 2)",
                 ("W = identity, d=2",), lambda q, k, W: np.array_equal(W, np.eye(len(W))), ("no-half", "not-squared"), quote='Return the float64 `(T, S)` matrix with entries'),
            Rule("edge-size", "d = 1 and one query",
                 ("one query, d=1",), lambda q, k, W: q.shape == (1, 1), ("not-squared", "no-minus"), quote='for `q` of shape `(T, d)`'),
            output_rule("a float64 array (T, S)", "W = identity, d=2",
                        "Return the float64 `(T, S)` matrix with entries", _metric_reference, "float32", "list"),
            in_place_rule("W = identity, d=2", _metric_reference, index=2),
        ),
        framing=('Write `my_metric_kernel(q, k, W)`',),
        difficulty=1,
        minutes=8,
    )
)

EXERCISES = ("nadaraya-watson", "gaussian-as-softmax", "leave-one-out", "metric-kernel")
