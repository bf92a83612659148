"""Chapter 6 exercises: the variance of q.k, a temperature-scaled entropy, the softmax Jacobian,
the gradient at the softmax with and without the scale, and through saturated rows.

* ``softmax-gradient``: ``fn(s, g, d_k) -> (unscaled, scaled, vanishes)`` for raw dot products
  ``s`` (N, S) and the loss gradient ``g`` (N, S) with respect to the attention weights: the
  Frobenius norms of the gradient at the softmax's input, ``p * (g - (p * g).sum(-1))`` with
  ``p = softmax(x)``, for ``x = s`` and ``x = s / sqrt(d_k)`` (floats), and whether the first is
  below a tenth of the second (a bool).
* ``saturated-gradient``: ``fn(p, g) -> (share, on_saturated, on_others, vanishes)`` for attention
  rows ``p`` (N, S) of the tiny transformer and the loss gradient ``g`` with respect to them: the
  share of rows whose largest weight exceeds 0.99, the mean row norm of ``p * (g - <p, g>)`` over
  those rows and over the others (NaN for an empty group), and whether the first is below a tenth
  of the second. The cases are the chapter's experiment: the model at initialisation, with and
  without the scale.

Each exercise lists the mistakes learners typically make (mutants) with the
feedback they get; ``tests/exercises/test_exercises.py`` checks that every mutant is
caught with its own message.
"""

from __future__ import annotations

import numpy as np
import torch

from ...core.attention import softmax
from . import measures as sc
from ...models.tasks import make_task
from ...models.tiny import ModelConfig, TinyTransformer
from ...models.training import masked_loss
from ...exercises._core import Case, Exercise, Mutant, register

__all__ = ["EXERCISES"]



# ---------------------------------------------------------- variance of q.k
def _variance_cases() -> list[Case]:
    rng = np.random.default_rng(61)
    return [
        Case("N=2000 samples, d_k=4", (rng.normal(size=(2000, 4)), rng.normal(size=(2000, 4)))),
        Case("N=2000 samples, d_k=64", (rng.normal(size=(2000, 64)), rng.normal(size=(2000, 64)))),
        Case("d_k=1", (rng.normal(size=(500, 1)), rng.normal(size=(500, 1)))),
        Case(
            "queries with mean 1 and keys with variance 4",
            (rng.normal(loc=1.0, size=(1000, 16)), rng.normal(scale=2.0, size=(1000, 16))),
        ),
        Case("only N=3 samples", (rng.normal(size=(3, 8)), rng.normal(size=(3, 8)))),
    ]


def _paired(q, k):
    return (q * k).sum(axis=-1)  # (N,) one dot product per sample


register(
    Exercise(
        id="dot-variance",
        title="Measure the variance of q . k",
        make_cases=_variance_cases,
        reference=lambda q, k: sc.dot_product_variance(q, k),
        mutants=(
            Mutant(
                "all-pairs", lambda q, k: np.var(q @ k.T),
                "you took every pair q_n . k_m (q @ k.T). Pair sample n of q with sample n "
                "of k only: s = (q * k).sum(axis=-1), one dot product per row.",
            ),
            Mutant(
                "std", lambda q, k: np.std(_paired(q, k)),
                "that is the standard deviation of q . k (it grows like sqrt(d_k)); "
                "the variance is its square.",
            ),
            Mutant(
                "no-mean", lambda q, k: np.mean(_paired(q, k) ** 2),
                "you averaged s**2 without subtracting the mean of s. The variance is "
                "mean((s - mean(s))**2); look at the case where the queries have mean 1.",
            ),
            Mutant(
                "ddof-1", lambda q, k: np.var(_paired(q, k), ddof=1),
                "you divided by N - 1 (ddof=1). This exercise uses the plain average over "
                "the N samples, like np.var's default (ddof=0).",
            ),
            Mutant(
                "scaled", lambda q, k: np.var(_paired(q, k) / np.sqrt(q.shape[-1])),
                "you divided the dot products by sqrt(d_k), which brings the variance to "
                "about 1. Measure the raw q . k here: its variance is what grows like d_k.",
            ),
        ),
        alternatives=(
            lambda q, k: float(
                torch.var(torch.einsum("nd,nd->n", torch.as_tensor(q), torch.as_tensor(k)), unbiased=False)
            ),
            lambda q, k: (
                lambda s: ((s - s.mean()) ** 2).mean()
            )(np.array([qn @ kn for qn, kn in zip(q, k)])),
        ),
    )
)


# ------------------------------------------------- temperature-scaled entropy
def _entropy_cases() -> list[Case]:
    rng = np.random.default_rng(62)
    x = rng.normal(scale=2.0, size=(4, 6))
    return [
        Case("4x6 logits, temperature 1", (x, 1.0)),
        Case("the same logits, temperature 0.1 (sharp)", (x, 0.1)),
        Case("the same logits, temperature 10 (flat)", (x, 10.0)),
        Case("a single vector, temperature 2", (rng.normal(size=5), 2.0)),
        Case("a batch of shape (2, 3, 4), temperature 0.5", (rng.normal(size=(2, 3, 4)), 0.5)),
        Case("a saturated row and a uniform row", (np.array([[1000.0, 0.0, -1000.0], [0.0, 0.0, 0.0]]), 1.0)),
        Case(  # large but not saturated: an unstable exp gives inf / inf here, not a clean 0
            "logits near 1000, not saturated", (np.array([[1000.0, 999.0, 998.0], [-998.0, -999.0, -1000.0]]), 1.0),
        ),
    ]


def _entropy_with(transform, log=np.log):
    def f(x, temperature):
        p = softmax(transform(x, temperature), axis=-1)
        with np.errstate(all="ignore"):
            return -(p * log(np.where(p > 0, p, 1.0))).sum(axis=-1)

    return f


def _entropy_naive(x, temperature):
    p = softmax(x / temperature, axis=-1)
    with np.errstate(all="ignore"):
        return -(p * np.log(p)).sum(axis=-1)  # 0 * log 0 = NaN


def _entropy_nansum(x, temperature):
    e = np.exp(x / temperature)  # overflows to inf for logits near 1000
    p = e / e.sum(axis=-1, keepdims=True)
    with np.errstate(all="ignore"):
        return -np.nansum(p * np.log(p), axis=-1)  # hides the NaN as 0


def _has_nan(got, expected, args):
    if np.any(np.isnan(np.asarray(got, dtype=float))):
        return ("your result has NaN: a weight that underflows to 0 gives 0 * log 0 = NaN; "
                "count those terms as 0 or use the log-softmax")
    return None


register(
    Exercise(
        id="softmax-entropy",
        title="The entropy of a temperature-scaled softmax",
        make_cases=_entropy_cases,
        reference=lambda x, temperature: sc.softmax_entropy(x, temperature=temperature),
        mutants=(
            Mutant(
                "times-temperature", _entropy_with(lambda x, t: x * t),
                "you multiplied the logits by the temperature; divide them: "
                "softmax(x / temperature). A higher temperature should flatten the weights "
                "and raise the entropy.",
            ),
            Mutant(
                "ignores-temperature", _entropy_with(lambda x, t: x),
                "your result does not change with the temperature: divide the logits by it "
                "before the softmax.",
            ),
            Mutant(
                "log2", _entropy_with(lambda x, t: x / t, log=np.log2),
                "your entropy is in bits (log base 2); this course measures it in nats, "
                "with the natural logarithm np.log.",
            ),
            Mutant(
                "no-minus", lambda x, t: -_entropy_with(lambda x, t: x / t)(x, t),
                "your entropies are negative: H = -sum_j p_j log p_j. Don't forget the minus sign.",
            ),
            Mutant(
                "zero-log-zero", _entropy_naive,
                "NaN for the saturated row: a weight that underflows to 0 gives "
                "0 * log(0) = 0 * (-inf) = NaN. Such a term should count as 0: use "
                "np.where(p > 0, p * np.log(p), 0) or the log-softmax z - logsumexp(z).",
            ),
            Mutant(
                "unstable-nansum", _entropy_nansum,
                "for logits near 1000 you return 0 (or NaN): exp(1000) overflows to inf, inf / inf "
                "is NaN, and nansum (or np.where(p > 0, ...)) turns the NaN into 0, which only looks right "
                "for a saturated row. "
                "Subtract each row's maximum before exp (softmax(z) = softmax(z - max z)).",
            ),
        ),
        hints=(_has_nan,),
        alternatives=(
            lambda x, t: torch.distributions.Categorical(logits=torch.as_tensor(x) / t).entropy().numpy(),
            lambda x, t: (
                lambda logp: -(np.exp(logp) * logp).sum(axis=-1)
            )(x / t - np.logaddexp.reduce(x / t, axis=-1, keepdims=True)),
        ),
    )
)


# ------------------------------------------------------------ softmax Jacobian
def _jacobian_cases() -> list[Case]:
    rng = np.random.default_rng(63)
    return [
        Case("p over 4 keys", (softmax(rng.normal(size=4)),)),
        Case("a peaked p over 8 keys", (softmax(3.0 * rng.normal(size=8)),)),
        Case("uniform over 5 keys", (np.full(5, 0.2),)),
        Case("a one-hot p", (np.array([0.0, 1.0, 0.0]),)),
        Case("a single key", (np.array([1.0]),)),
    ]


def _rows_do_not_sum_to_zero(got, expected, args):
    sums = np.asarray(got, dtype=float).sum(axis=-1)
    if np.all(np.isfinite(sums)) and not np.allclose(sums, 0.0, atol=1e-8):
        return ("each row of the Jacobian should sum to 0: adding the same constant to every "
                "score leaves the softmax unchanged")
    return None


register(
    Exercise(
        id="softmax-jacobian",
        title="The softmax Jacobian in closed form",
        make_cases=_jacobian_cases,
        reference=lambda p: sc.softmax_jacobian(p),
        mutants=(
            Mutant(
                "diag-only", lambda p: np.diag(p),
                "you have diag(p) only: the off-diagonal entries -p_i p_j are missing "
                "(subtract np.outer(p, p)).",
            ),
            Mutant(
                "no-cross-terms", lambda p: np.diag(p * (1 - p)),
                "your diagonal p_i (1 - p_i) is right, but the off-diagonal entries are "
                "-p_i p_j, not 0: raising score j lowers every other probability.",
            ),
            Mutant(
                "flipped-sign", lambda p: np.outer(p, p) - np.diag(p),
                "your signs are flipped: J = diag(p) - p p^T, so the diagonal p_i (1 - p_i) "
                "is positive and the off-diagonal -p_i p_j is negative.",
            ),
            Mutant(
                "wrong-broadcast", lambda p: p * (np.eye(p.shape[0]) - p),
                "entry (i, j) should be p_i (delta_ij - p_j); yours is p_j (delta_ij - p_j), "
                "because p broadcasts over the last axis. Use p[:, None] for the row factor.",
            ),
        ),
        hints=(_rows_do_not_sum_to_zero,),
        alternatives=(
            lambda p: torch.autograd.functional.jacobian(
                lambda s: torch.softmax(s, dim=-1), torch.log(torch.as_tensor(p))
            ).numpy(),
            lambda p: np.einsum("i,ij->ij", p, np.eye(len(p))) - np.einsum("i,j->ij", p, p),
            lambda p: np.array([[p[i] * ((i == j) - p[j]) for j in range(len(p))] for i in range(len(p))]),
        ),
    )
)


# ------------------------------------------------ the gradient at the softmax
def _input_grad(x, g):
    p = softmax(x, axis=-1)  # (N, S), each row normalised over the S keys
    return p * (g - (p * g).sum(axis=-1, keepdims=True))  # dL/dx = p (g - <p, g>)   (N, S)


def _softmax_gradient_with(transform=lambda s, d: s / np.sqrt(d), backward=_input_grad, chain=False,
                           invert=False, swap=False):
    def fn(s, g, d_k):
        unscaled = float(np.linalg.norm(backward(s, g)))
        scaled = float(np.linalg.norm(backward(transform(s, d_k), g)))
        if chain:
            scaled /= np.sqrt(d_k)  # dL/ds for s before the scale: the chain-rule factor 1/sqrt(d_k)
        vanishes = unscaled < 0.1 * scaled
        if swap:
            unscaled, scaled = scaled, unscaled
        return unscaled, scaled, (not vanishes) if invert else vanishes
    return fn


def _softmax_gradient_cases() -> list[Case]:
    rng = np.random.default_rng(64)
    cases = []
    for d_k in (4, 64, 1024):
        q, k = rng.normal(size=(32, d_k)), rng.normal(size=(16, d_k))
        cases.append(Case(f"32 random queries, 16 keys, d_k={d_k}", (q @ k.T, rng.normal(size=(32, 16)), d_k)))
    peaked = 40.0 * np.eye(6) + rng.normal(size=(6, 6))  # each row: one key about 40 ahead of the rest
    cases.append(Case("every row saturated: one key 40 above the rest, d_k=256",
                      (peaked, rng.normal(size=(6, 6)), 256)))
    cases.append(Case("a single row of 3 equal scores, d_k=16", (np.zeros((1, 3)), np.array([[1.0, -2.0, 0.5]]), 16)))
    return cases


register(
    Exercise(
        id="softmax-gradient",
        title="Does the gradient vanish at the softmax?",
        make_cases=_softmax_gradient_cases,
        reference=_softmax_gradient_with(),
        mutants=(
            Mutant(
                "chain-factor", _softmax_gradient_with(chain=True),
                "your scaled gradient is 1/sqrt(d_k) times too small: you measured it with respect to the raw "
                "dot products s, so it carries the scale's own chain-rule factor. Measure both at the softmax's "
                "input x (x = s without the scale, x = s / sqrt(d_k) with it).",
            ),
            Mutant(
                "no-subtract", _softmax_gradient_with(backward=lambda x, g: softmax(x, axis=-1) * g),
                "you computed p * g. The softmax's backward pass also subtracts each row's <p, g>: "
                "dL/dx = p * (g - (p * g).sum(-1, keepdims=True)), because raising one score lowers the others.",
            ),
            Mutant(
                "scale-by-d", _softmax_gradient_with(transform=lambda s, d: s / d),
                "you divided the scores by d_k; the scale of the formula is 1/sqrt(d_k).",
            ),
            Mutant(
                "wrong-axis", _softmax_gradient_with(backward=lambda x, g: (lambda p: p * (
                    g - (p * g).sum(axis=0, keepdims=True)))(softmax(x, axis=0))),
                "your softmax normalises over the queries (axis 0). Each row (one query) is a distribution "
                "over the keys: normalise over the last axis.",
            ),
            Mutant(
                "swapped", _softmax_gradient_with(swap=True),
                "your two norms are swapped: return the unscaled one (x = s) first, then the scaled one.",
            ),
            Mutant(
                "conclusion-inverted", _softmax_gradient_with(invert=True),
                "your norms are right but the conclusion is upside down: vanishes is True when the unscaled "
                "gradient is BELOW a tenth of the scaled one.",
            ),
        ),
        alternatives=(
            lambda s, g, d_k: (lambda u, c: (u, c, u < 0.1 * c))(*(
                float(torch.linalg.vector_norm(torch.autograd.grad(
                    torch.softmax(x, -1), x, torch.as_tensor(g))[0]))
                for x in (torch.tensor(s, requires_grad=True), (torch.tensor(s) / d_k**0.5).requires_grad_()))),
            lambda s, g, d_k: (lambda u, c: (u, c, bool(u / c < 0.1)))(*(
                float(np.sqrt(sum(float(np.sum((sc.softmax_jacobian(softmax(row, axis=-1)).T @ gr) ** 2))
                                  for row, gr in zip(x, g))))
                for x in (s, s / np.sqrt(d_k)))),
        ),
    )
)


# ----------------------------------------- the gradient through saturated rows
THRESHOLD = 0.99  # a row is saturated when its largest weight exceeds this (chapter 6)


def _model_rows(d_k: int, scale: str, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Layer 0 of the chapter's tiny transformer at initialisation: rows t >= 1 of p and of dL/dp."""
    model = TinyTransformer(ModelConfig(d_k=d_k, n_heads=1, scale=scale), seed=seed)
    inputs, targets, mask = make_task("repeated_sequences")(8, seed=7)
    logits, weights = model(inputs)  # (8, 28, 64), 2 x (8, 1, 28, 28)
    weights[0].retain_grad()
    masked_loss(logits, targets, mask).backward()
    T = weights[0].shape[-1]
    p = weights[0][:, 0, 1:].detach().reshape(-1, T).double().numpy()  # (8 * 27, 28): query 0 sees one key
    p = p / p.sum(axis=-1, keepdims=True)  # float32 rows summed to 1 within 1e-7; now within 1e-16
    g = weights[0].grad[:, 0, 1:].reshape(-1, T).double().numpy()  # dL/dp, the same rows
    return p, g / np.abs(g).max()  # rescaled so its largest entry is 1: only ratios matter


def _saturated_gradient_cases() -> list[Case]:
    cases = [Case(f"the tiny transformer at initialisation, layer 0, d_k={d}, {name}", _model_rows(d, s))
             for d, s, name in ((64, "none", "no scale"), (64, "sqrt", "with 1/sqrt(d_k)"), (16, "none", "no scale"),
                                (256, "none", "no scale"))]
    p = np.array([[1.0, 0.0, 0.0], [1 / 3, 1 / 3, 1 / 3]])  # one one-hot row, one uniform row
    cases.append(Case("two rows by hand: one one-hot, one uniform", (p, np.array([[1.0, -2.0, 0.5]] * 2))))
    return cases


def _saturated_gradient_with(backward=lambda p, g: p * (g - (p * g).sum(-1, keepdims=True)),
                             size=lambda dx: np.linalg.norm(dx, axis=-1), group="mean", empty=float("nan"),
                             swap=False, invert=False):
    def fn(p, g):
        dx = backward(p, g)  # (N, S): dL/dx at the softmax's input, row by row
        sat = p.max(axis=-1) > THRESHOLD  # (N,)
        if group == "frobenius":
            pool = lambda rows: float(np.linalg.norm(dx[rows])) if rows.any() else empty  # noqa: E731
        else:
            norms = size(dx)  # (N,)
            pool = lambda rows: float(norms[rows].mean()) if rows.any() else empty  # noqa: E731
        on_sat, on_other = pool(sat), pool(~sat)
        vanishes = bool(on_sat < 0.1 * on_other)
        if swap:
            on_sat, on_other = on_other, on_sat
        return float(sat.mean()), on_sat, on_other, (not vanishes) if invert else vanishes
    return fn


register(
    Exercise(
        id="saturated-gradient",
        title="The gradient through saturated rows",
        make_cases=_saturated_gradient_cases,
        reference=_saturated_gradient_with(),
        # g is rescaled to a largest entry of 1 and a saturated row's gradient is ~1e-4 of it: float64
        # cancellation in g - <p, g> (error ~S * 1e-16) is ~1e-10 of it; 1e-7 leaves a margin
        rtol=1e-7,
        atol=1e-14,
        mutants=(
            Mutant(
                "no-subtract", _saturated_gradient_with(backward=lambda p, g: p * g),
                "you computed p * g. The softmax's backward pass also subtracts each row's <p, g>: "
                "dL/dx = p * (g - (p * g).sum(-1, keepdims=True)).",
            ),
            Mutant(
                "row-sum", _saturated_gradient_with(size=lambda dx: dx.sum(axis=-1)),
                "you summed each row of dL/dx. That sum is always 0 (adding the same number to every score of "
                "a row changes no weight), so it cannot measure size: take each row's norm, "
                "np.linalg.norm(dx, axis=-1).",
            ),
            Mutant(
                "pooled-norm", _saturated_gradient_with(group="frobenius"),
                "you took one norm over all the saturated rows together (and over all the others). That grows "
                "with the number of rows in the group; average the rows' norms instead, so that the two groups "
                "compare row for row.",
            ),
            Mutant(
                "empty-zero", _saturated_gradient_with(empty=0.0),
                "with no saturated rows (the scaled model) you returned 0 for their mean gradient, which reads as "
                "a gradient that vanished. There is nothing to average: return float('nan').",
            ),
            Mutant(
                "swapped", _saturated_gradient_with(swap=True),
                "your two means are swapped: return the saturated rows' mean first, then the other rows'.",
            ),
            Mutant(
                "conclusion-inverted", _saturated_gradient_with(invert=True),
                "your numbers are right but the conclusion is upside down: vanishes is True when the saturated "
                "rows' mean gradient is BELOW a tenth of the other rows'.",
            ),
        ),
        alternatives=(
            lambda p, g: (lambda sat, n: (
                float(sat.mean()), *(float(n[r].mean()) if r.any() else float("nan") for r in (sat, ~sat)),
                bool(sat.any() and (~sat).any() and n[sat].mean() < 0.1 * n[~sat].mean())))(
                p.max(-1) > 0.99,  # J^T g row by row, with J = diag(p) - p p^T
                np.array([np.linalg.norm(sc.softmax_jacobian(pr).T @ gr) for pr, gr in zip(p, g)])),
            lambda p, g: (lambda n, sat: (
                float(np.count_nonzero(sat)) / len(sat),
                float(np.nanmean(np.where(sat, n, np.nan))) if sat.any() else float("nan"),
                float(np.nanmean(np.where(sat, np.nan, n))) if (~sat).any() else float("nan"),
                bool(sat.any() and (~sat).any() and np.nanmean(np.where(sat, n, np.nan))
                     < 0.1 * np.nanmean(np.where(sat, np.nan, n)))))(
                np.sqrt(np.einsum("ns,ns->n", *(2 * [p * g - p * np.einsum("ns,ns->n", p, g)[:, None]]))),
                np.amax(p, axis=1) > 0.99),
        ),
    )
)

EXERCISES = ("dot-variance", "softmax-entropy", "softmax-jacobian", "softmax-gradient", "saturated-gradient")
