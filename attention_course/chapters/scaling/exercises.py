"""Chapter 6 exercises: the variance of q.k, a temperature-scaled entropy, the softmax Jacobian,
the gradient at the softmax with and without the scale (``softmax-gradient``), and through
saturated rows (``saturated-gradient``).

Each exercise lists typical mistakes (mutants) with their feedback, and the rules its statement draws
with the cases that land on them (checked by ``tests/exercises/``).
"""

from __future__ import annotations

import numpy as np
import torch

from ...core.attention import softmax
from . import measures as sc
from ...models.tasks import make_task
from ...models.tiny import ModelConfig, TinyTransformer
from ...models.training import masked_loss
from ...exercises._core import Case, Exercise, in_place_rule, Mutant, output_rule, RATIO_TIPS, register, Rule

__all__ = ["EXERCISES"]



# ---------------------------------------------------------- variance of q.k
def _variance_cases() -> list[Case]:
    rng = np.random.default_rng(61)
    return [
        Case("N=2000 samples, d_k=4", (rng.normal(size=(2000, 4)), rng.normal(size=(2000, 4)))),
        Case("N=2000 samples, d_k=64", (rng.normal(size=(2000, 64)), rng.normal(size=(2000, 64)))),
        Case("d_k=1", (rng.normal(size=(500, 1)), rng.normal(size=(500, 1)))),
        Case("queries with mean 1 and keys with variance 4",
             (rng.normal(loc=1.0, size=(1000, 16)), rng.normal(scale=2.0, size=(1000, 16)))),
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
            Mutant("all-pairs", lambda q, k: np.var(q @ k.T),
                   "you took every pair q_n . k_m (q @ k.T). Pair sample n of q with sample n "
                   "of k only: s = (q * k).sum(axis=-1), one dot product per row."),
            Mutant("std", lambda q, k: np.std(_paired(q, k)),
                   "that is the standard deviation of q . k (it grows like sqrt(d_k)); "
                   "the variance is its square."),
            Mutant("no-mean", lambda q, k: np.mean(_paired(q, k) ** 2),
                   "you averaged s**2 without subtracting the mean of s. The variance is "
                   "mean((s - mean(s))**2); look at the case where the queries have mean 1."),
            Mutant("ddof-1", lambda q, k: np.var(_paired(q, k), ddof=1),
                   "you divided by N - 1 (ddof=1). This exercise uses the plain average over "
                   "the N samples, like np.var's default (ddof=0)."),
            Mutant("elementwise", lambda q, k: np.var(q * k),
                   "you took the variance of every product q_nd k_nd; the dot product sums them first: "
                   "s = (q * k).sum(axis=-1), one number per sample, then np.var(s)."),
            Mutant("scaled", lambda q, k: np.var(_paired(q, k) / np.sqrt(q.shape[-1])),
                   "you divided the dot products by sqrt(d_k), which brings the variance to "
                   "about 1. Measure the raw q . k here: its variance is what grows like d_k."),
        ),
        alternatives=(
            lambda q, k: float(
                torch.var(torch.einsum("nd,nd->n", torch.as_tensor(q), torch.as_tensor(k)), unbiased=False)),
            lambda q, k: (lambda s: ((s - s.mean()) ** 2).mean())(np.array([qn @ kn for qn, kn in zip(q, k)])),
        ),
        rules=(
            Rule("range", "queries with a nonzero mean: subtract the mean of the dot products",
                 ("queries with mean 1 and keys with variance 4",), lambda q, k: abs(q.mean()) > 0.5,
                 ("no-mean",), quote='the queries may have a nonzero mean'),
            Rule("edge-size", "a few samples (N = 3): divide by N, not N - 1",
                 ("only N=3 samples",), lambda q, k: len(q) < 10, ("ddof-1",), quote='dividing by $N$, like `np.var`'),
            Rule("edge-size", "d_k = 1: the variance of a product of two numbers",
                 ("d_k=1",), lambda q, k: q.shape[1] == 1, ("std", "all-pairs"), quote='for `q` and `k` of shape `(N, d_k)`'),
            Rule("range", "d_k = 64: the raw dot products, unscaled",
                 ("N=2000 samples, d_k=64",), lambda q, k: q.shape[1] > 1, ("scaled", "std"), quote='take the $N$ dot products'),
            output_rule('a float', 'N=2000 samples, d_k=4', '(a float', lambda q, k: sc.dot_product_variance(q, k),
                        'array-for-number'),
            in_place_rule('N=2000 samples, d_k=4', lambda q, k: sc.dot_product_variance(q, k)),
        ),
        framing=('Write `my_dot_variance(q, k)`', 'On Gaussian inputs it should'),
        difficulty=1,
        minutes=5,
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
            Mutant("times-temperature", _entropy_with(lambda x, t: x * t),
                   "you multiplied the logits by the temperature; divide them: "
                   "softmax(x / temperature). A higher temperature should flatten the weights "
                   "and raise the entropy."),
            Mutant("ignores-temperature", _entropy_with(lambda x, t: x),
                   "your result does not change with the temperature: divide the logits by it "
                   "before the softmax."),
            Mutant("log2", _entropy_with(lambda x, t: x / t, log=np.log2),
                   "your entropy is in bits (log base 2); this course measures it in nats, "
                   "with the natural logarithm np.log."),
            Mutant("no-minus", lambda x, t: -_entropy_with(lambda x, t: x / t)(x, t),
                   "your entropies are negative: H = -sum_j p_j log p_j. Don't forget the minus sign."),
            Mutant("zero-log-zero", _entropy_naive,
                   "NaN for the saturated row: a weight that underflows to 0 gives "
                   "0 * log(0) = 0 * (-inf) = NaN. Such a term should count as 0: use "
                   "np.where(p > 0, p * np.log(p), 0) or the log-softmax z - logsumexp(z)."),
            Mutant("unstable-nansum", _entropy_nansum,
                   "for logits near 1000 you return 0 (or NaN): exp(1000) overflows to inf, inf / inf "
                   "is NaN, and nansum (or np.where(p > 0, ...)) turns the NaN into 0, which only looks right "
                   "for a saturated row. "
                   "Subtract each row's maximum before exp (softmax(z) = softmax(z - max z))."),
        ),
        hints=(_has_nan,),
        alternatives=(
            lambda x, t: torch.distributions.Categorical(logits=torch.as_tensor(x) / t).entropy().numpy(),
            lambda x, t: (lambda logp: -(np.exp(logp) * logp).sum(axis=-1))(
                x / t - np.logaddexp.reduce(x / t, axis=-1, keepdims=True)),
        ),
        rules=(
            Rule("range", "a saturated row (weights that underflow to 0) has entropy 0, not NaN",
                 ("a saturated row and a uniform row",), lambda x, t: np.ptp(x / t, axis=-1).max() > 745,
                 ("zero-log-zero",), quote='A saturated row must give 0, not NaN'),
            Rule("range", "logits near 1000 must not overflow",
                 ("logits near 1000, not saturated",), lambda x, t: np.abs(x / t).max() > 709, ("unstable-nansum",), quote='logits near 1000 must not overflow'),
            Rule("range", "temperatures below and above 1: softmax(x / temperature)",
                 ("the same logits, temperature 0.1 (sharp)", "the same logits, temperature 10 (flat)"),
                 lambda x, t: t != 1, ("times-temperature", "ignores-temperature"), quote='$\\operatorname{softmax}(x/\\tau)$'),
            Rule("edge-size", "a uniform row of S logits has entropy log S (nats)",
                 ("a saturated row and a uniform row",), lambda x, t: bool((np.ptp(x, axis=-1) == 0).any()),
                 ("log2", "no-minus"), quote='a uniform row of $S$ logits gives $\\log S$'),
            output_rule('a float64 array of shape x.shape[:-1]', '4x6 logits, temperature 1',
                        'a float64 array of shape `x.shape[:-1]`',
                        lambda x, temperature: sc.softmax_entropy(x, temperature=temperature), 'float32', 'list'),
            in_place_rule('4x6 logits, temperature 1',
                          lambda x, temperature: sc.softmax_entropy(x, temperature=temperature),
                          quote='Do not change `x` in place'),
        ),
        framing=('Write `my_softmax_entropy(x, temperature)`', 'Dividing by $\\sqrt{d_k}$ is a temperature',
                 'The temperature is a positive number and the logits are finite',
                 "Start as the lesson's `softmax` does"),
        difficulty=2,
        minutes=15,
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
            Mutant("diag-only", lambda p: np.diag(p),
                   "you have diag(p) only: the off-diagonal entries -p_i p_j are missing "
                   "(subtract np.outer(p, p))."),
            Mutant("no-cross-terms", lambda p: np.diag(p * (1 - p)),
                   "your diagonal p_i (1 - p_i) is right, but the off-diagonal entries are "
                   "-p_i p_j, not 0: raising score j lowers every other probability."),
            Mutant("flipped-sign", lambda p: np.outer(p, p) - np.diag(p),
                   "your signs are flipped: J = diag(p) - p p^T, so the diagonal p_i (1 - p_i) "
                   "is positive and the off-diagonal -p_i p_j is negative."),
            Mutant("wrong-broadcast", lambda p: p * (np.eye(p.shape[0]) - p),
                   "entry (i, j) should be p_i (delta_ij - p_j); yours is p_j (delta_ij - p_j), "
                   "because p broadcasts over the last axis. Use p[:, None] for the row factor."),
            Mutant("outer-one-minus", lambda p: np.outer(p, 1 - p),
                   "you used p_i (1 - p_j) for every entry; that is right on the diagonal only. Off the "
                   "diagonal the entry is -p_i p_j: J = diag(p) - p p^T."),
            Mutant("minus-inner", lambda p: np.diag(p) - p @ p,
                   "you subtracted p @ p, which for a vector is the single number sum_j p_j^2 (the inner "
                   "product), from every entry. The matrix p p^T with entries p_i p_j is the outer product: "
                   "np.outer(p, p), or p[:, None] * p[None, :]."),
            Mutant("identity-minus-outer", lambda p: np.eye(len(p)) - np.outer(p, p),
                   "the diagonal part is diag(p), not the identity: J = diag(p) - p p^T, so J_ii = p_i (1 - p_i)."),
        ),
        hints=(_rows_do_not_sum_to_zero,),
        alternatives=(
            lambda p: torch.autograd.functional.jacobian(
                lambda s: torch.softmax(s, dim=-1), torch.log(torch.as_tensor(p))).numpy(),
            lambda p: np.einsum("i,ij->ij", p, np.eye(len(p))) - np.einsum("i,j->ij", p, p),
            lambda p: np.array([[p[i] * ((i == j) - p[j]) for j in range(len(p))] for i in range(len(p))]),
        ),
        rules=(
            Rule("edge-size", "a single key: J = [[0]]",
                 ("a single key",), lambda p: len(p) == 1, ("diag-only",), quote='A single key gives `[[0.]]`'),
            Rule("range", "a one-hot p: J is all zeros",
                 ("a one-hot p",), lambda p: p.max() == 1.0, ("diag-only", "identity-minus-outer", "outer-one-minus"), quote='check on a one-hot `p` that it is all zeros'),
            Rule("range", "unequal weights: entry (i, j) has the row factor p_i",
                 ("p over 4 keys", "a peaked p over 8 keys"), lambda p: np.ptp(p) > 0, ("wrong-broadcast", "minus-inner"), quote='$J_{ij} = \\partial p_i / \\partial s_j = p_i(\\delta_{ij} - p_j)$'),
            output_rule('a float64 array (S, S)', 'p over 4 keys', 'float64 `(S, S)` matrix',
                        lambda p: sc.softmax_jacobian(p), 'float32', 'list'),
            in_place_rule('p over 4 keys', lambda p: sc.softmax_jacobian(p), quote='Do not change `p` in place'),
        ),
        framing=('Write `my_softmax_jacobian(p)`',),
        difficulty=1,
        minutes=5,
    )
)


# ------------------------------------------------ the gradient at the softmax
def _input_grad(x, g):
    p = softmax(x, axis=-1)  # (N, S), each row normalised over the S keys
    return p * (g - (p * g).sum(axis=-1, keepdims=True))  # dL/dx = p (g - <p, g>)   (N, S)


def _unstable_input_grad(x, g):
    e = np.exp(x)  # overflows to inf for scores above 709
    p = e / e.sum(axis=-1, keepdims=True)
    return p * (g - (p * g).sum(axis=-1, keepdims=True))


def _softmax_gradient_with(transform=lambda s, d: s / np.sqrt(d), backward=_input_grad, chain=False,
                           invert=False, swap=False, size=np.linalg.norm,
                           vanish=lambda u, c: u < 0.1 * c):
    def fn(s, g, d_k):
        unscaled = float(size(backward(s, g)))
        scaled = float(size(backward(transform(s, d_k), g)))
        if chain:
            scaled /= np.sqrt(d_k)  # dL/ds for s before the scale: the chain-rule factor 1/sqrt(d_k)
        vanishes = bool(vanish(unscaled, scaled))
        if swap:
            unscaled, scaled = scaled, unscaled
        return unscaled, scaled, (not vanishes) if invert else vanishes
    return fn


def _gradient_ratio(s, g, d_k) -> float:
    unscaled, scaled, _ = _softmax_gradient_with()(s, g, d_k)
    return unscaled / scaled


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
    # The verdict's threshold from both sides: the unscaled norm is 0.072 and 0.13 times the scaled one
    # (so a threshold a decade off, 0.01 or 1, or the squared norms, give another verdict), with the loss
    # gradient 100 times larger and 1000 times smaller (so an absolute threshold, unscaled < 0.1, does too).
    rng = np.random.default_rng(65)
    base, g = rng.normal(size=(8, 6)), rng.normal(size=(8, 6))  # (8, 6) scores and loss gradient
    cases.append(Case("just below a tenth (ratio 0.072), a large loss gradient, d_k=64", (10.0 * base, 100.0 * g, 64)))
    cases.append(Case("just above a tenth (ratio 0.13), a small loss gradient, d_k=64", (8.0 * base, 1e-3 * g, 64)))
    cases.append(Case("one key per row: both gradients are 0, d_k=16", (rng.normal(size=(4, 1)), rng.normal(size=(4, 1)), 16)))
    cases.append(Case("d_k=1: the scale changes nothing", (3.0 * rng.normal(size=(5, 4)), rng.normal(size=(5, 4)), 1)))
    cases.append(Case("scores near 1000, d_k=1024",  # exp(1000) overflows; s / 32 is near 31
                      (1000.0 + 3.0 * rng.normal(size=(4, 5)), rng.normal(size=(4, 5)), 1024)))
    return cases


def _gradient_explain(index, expected, args):
    unscaled, scaled, _ = _softmax_gradient_with()(*args)
    if expected:
        return f"unscaled {unscaled:.6g} is below a tenth of scaled {scaled:.6g} (a ratio of {unscaled / scaled:.3g})"
    if unscaled == scaled == 0:
        return "both norms are 0, and 0 is not below a tenth of 0"
    return f"unscaled {unscaled:.6g} is not below a tenth of scaled {scaled:.6g} (a ratio of {unscaled / scaled:.3g})"


register(
    Exercise(
        id="softmax-gradient",
        error_tips=RATIO_TIPS,
        title="Does the gradient vanish at the softmax?",
        make_cases=_softmax_gradient_cases,
        reference=_softmax_gradient_with(),
        mutants=(
            Mutant("chain-factor", _softmax_gradient_with(chain=True),
                   "your scaled gradient is 1/sqrt(d_k) times too small: you measured it with respect to the raw "
                   "dot products s, so it carries the scale's own chain-rule factor. Measure both at the softmax's "
                   "input x (x = s without the scale, x = s / sqrt(d_k) with it)."),
            Mutant("no-subtract", _softmax_gradient_with(backward=lambda x, g: softmax(x, axis=-1) * g),
                   "you computed p * g. The softmax's backward pass also subtracts each row's <p, g>: "
                   "dL/dx = p * (g - (p * g).sum(-1, keepdims=True)), because raising one score lowers the others."),
            Mutant("scale-by-d", _softmax_gradient_with(transform=lambda s, d: s / d),
                   "you divided the scores by d_k; the scale of the formula is 1/sqrt(d_k)."),
            Mutant("wrong-axis", _softmax_gradient_with(backward=lambda x, g: (lambda p: p * (
                       g - (p * g).sum(axis=0, keepdims=True)))(softmax(x, axis=0))),
                   "your softmax normalises over the queries (axis 0). Each row (one query) is a distribution "
                   "over the keys: normalise over the last axis."),
            Mutant("swapped", _softmax_gradient_with(swap=True),
                   "your two norms are swapped: return the unscaled one (x = s) first, then the scaled one."),
            Mutant("conclusion-inverted", _softmax_gradient_with(invert=True),
                   "your norms are right but the conclusion is upside down: vanishes is True when the unscaled "
                   "gradient is BELOW a tenth of the scaled one."),
            Mutant("no-max-shift", _softmax_gradient_with(backward=_unstable_input_grad),
                   "for scores near 1000 your softmax overflows: exp(1000) is inf and inf / inf is NaN. "
                   "Subtract each row's maximum before exp (softmax(x) = softmax(x - max x))."),
            Mutant("at-most-a-tenth", _softmax_gradient_with(vanish=lambda u, c: u <= 0.1 * c),
                   "with one key per row both norms are 0, and 0 is not BELOW a tenth of 0: vanishes is "
                   "unscaled < 0.1 * scaled, strictly, not <=."),
            Mutant("a-hundredth", _softmax_gradient_with(vanish=lambda u, c: u < 0.01 * c),
                   "your threshold is a decade too small: vanishes when the unscaled norm is below a TENTH of "
                   "the scaled one, unscaled < 0.1 * scaled (a ratio of 0.07 vanishes)."),
            Mutant("absolute-threshold", _softmax_gradient_with(vanish=lambda u, c: u < 0.1),
                   "you compared the unscaled norm with 0.1 itself. The test is relative: below a tenth of the "
                   "SCALED norm, unscaled < 0.1 * scaled, whatever the size of the loss gradient g."),
            Mutant("squared-norms", _softmax_gradient_with(vanish=lambda u, c: u**2 < 0.1 * c**2),
                   "you compared squared norms: unscaled^2 < 0.1 scaled^2 is a ratio of 0.32, not 0.1. "
                   "Compare the norms themselves: unscaled < 0.1 * scaled."),
            Mutant("below-the-scaled", _softmax_gradient_with(vanish=lambda u, c: u < c),
                   "you asked whether the unscaled norm is below the scaled one; the test is below a TENTH "
                   "of it: unscaled < 0.1 * scaled."),
            Mutant("diagonal-only", _softmax_gradient_with(backward=lambda x, g: (lambda p: p * (1 - p) * g)(
                       softmax(x, axis=-1))),
                   "you used only the diagonal of the softmax's Jacobian, p_i (1 - p_i) g_i. The off-diagonal "
                   "entries -p_i p_j count too: dL/dx = p * (g - (p * g).sum(-1, keepdims=True))."),
            Mutant("mean-not-weighted", _softmax_gradient_with(backward=lambda x, g: (lambda p: p * (
                       g - g.mean(axis=-1, keepdims=True)))(softmax(x, axis=-1))),
                   "you subtracted the plain mean of g; the softmax's backward pass subtracts the WEIGHTED "
                   "mean <p, g> = (p * g).sum(-1, keepdims=True): dL/dx = p * (g - <p, g>)."),
            Mutant("times-sqrt-d", _softmax_gradient_with(transform=lambda s, d: s * np.sqrt(d)),
                   "you multiplied the scores by sqrt(d_k); the scaled softmax sees x = s / sqrt(d_k)."),
            Mutant("squared-returned", _softmax_gradient_with(size=lambda dx: np.linalg.norm(dx) ** 2),
                   "you returned squared norms (the sum of squared entries); return the Frobenius norms "
                   "themselves, np.linalg.norm(dx), the square roots."),
            Mutant("roles-swapped", _softmax_gradient_with(vanish=lambda u, c: c < 0.1 * u),
                   "you asked whether the SCALED norm is below a tenth of the unscaled one. The gradient "
                   "vanishes without the scale: unscaled < 0.1 * scaled."),
            Mutant("mean-row-norm", _softmax_gradient_with(size=lambda dx: np.linalg.norm(dx, axis=-1).mean()),
                   "you averaged the rows' norms. Return the Frobenius norm of the whole (N, S) gradient, "
                   "np.linalg.norm(dx): the square root of the sum of all its squared entries."),
        ),
        returns=("unscaled", "scaled", "vanishes"),
        explain=_gradient_explain,
        rules=(
            Rule("threshold", "a ratio just below a tenth vanishes, with a loss gradient far above 0.1",
                 ("just below a tenth (ratio 0.072), a large loss gradient, d_k=64",),
                 lambda s, g, d: 0.05 < _gradient_ratio(s, g, d) < 0.1 and np.abs(g).max() > 10,
                 ("a-hundredth", "absolute-threshold"), quote='the strict `unscaled < 0.1 * scaled`'),
            Rule("threshold", "a ratio just above a tenth does not vanish, with a loss gradient far below 0.1",
                 ("just above a tenth (ratio 0.13), a small loss gradient, d_k=64",),
                 lambda s, g, d: 0.1 < _gradient_ratio(s, g, d) < 0.3 and np.abs(g).max() < 0.01,
                 ("absolute-threshold", "squared-norms", "below-the-scaled"), quote='the strict `unscaled < 0.1 * scaled`'),
            Rule("tie", "both norms 0 (one key per row): 0 is not below a tenth of 0, vanishes is False",
                 ("one key per row: both gradients are 0, d_k=16",), lambda s, g, d: s.shape[1] == 1,
                 ("at-most-a-tenth",), quote='with one key per row both norms are 0, and `vanishes` is `False`'),
            Rule("edge-size", "d_k = 1: both norms are equal, nothing vanishes",
                 ("d_k=1: the scale changes nothing",), lambda s, g, d: d == 1, ("conclusion-inverted",), quote='The check tries $d_k$ = 4, 64 and 1024'),
            Rule("range", "scores near 1000 must not overflow",
                 ("scores near 1000, d_k=1024",), lambda s, g, d: s.max() > 709, ("no-max-shift",), quote='Scores may be near 1000'),
            output_rule('a tuple (float, float, bool)', '32 random queries, 16 keys, d_k=4', 'two floats and a bool',
                        _softmax_gradient_with(), 'tuple-as-list', 'float-for-bool'),
            in_place_rule('32 random queries, 16 keys, d_k=4', _softmax_gradient_with()),
        ),
        framing=('Write `my_softmax_gradient(s, g, d_k)`', '`s`, of shape `(N, S)`', 'Through $p = '),
        difficulty=2,
        minutes=20,
        alternatives=(
            lambda s, g, d_k: (lambda u, c: (u, c, u < 0.1 * c))(*(
                float(torch.linalg.vector_norm(torch.autograd.grad(
                    torch.softmax(x, -1), x, torch.as_tensor(g))[0]))
                for x in (torch.tensor(s, requires_grad=True), (torch.tensor(s) / d_k**0.5).requires_grad_()))),
            lambda s, g, d_k: (lambda u, c: (u, c, bool(u < c / 10)))(*(
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
    cases = [Case(f"the tiny transformer at initialisation, layer 1, d_k={d}, {name}", _model_rows(d, s))
             for d, s, name in ((64, "none", "no scale"), (64, "sqrt", "with 1/sqrt(d_k)"), (16, "none", "no scale"),
                                (256, "none", "no scale"))]
    p = np.array([[1.0, 0.0, 0.0], [1 / 3, 1 / 3, 1 / 3]])  # one one-hot row, one uniform row
    cases.append(Case("two rows by hand: one one-hot, one uniform", (p, np.array([[1.0, -2.0, 0.5]] * 2))))
    rng = np.random.default_rng(66)
    g = rng.normal(size=(6, 3))  # (6, 3) a loss gradient for rows written by hand

    def rows(e):  # three saturated rows and three rows with two weights e: their gradient ratio falls with e
        return np.array([[0.992, 0.005, 0.003]] * 3 + [[1 - 2 * e, e, e]] * 3)

    # The verdict's threshold from both sides: the saturated rows' mean is 0.074 and 0.14 times the others'
    # (so a threshold a decade off, 0.01 or 1, or squared norms, give another verdict), with the loss
    # gradient 100 times larger and 1000 times smaller (so an absolute threshold, on_saturated < 0.1, does too).
    cases.append(Case("just below a tenth (ratio 0.074), a large loss gradient", (rows(0.06), 100.0 * g)))
    cases.append(Case("just above a tenth (ratio 0.14), a small loss gradient", (rows(0.03), 1e-3 * g)))
    at_mark = np.array([[0.99, 0.01, 0.0], [0.995, 0.004, 0.001], [0.4, 0.35, 0.25]])  # 0.99 does not exceed 0.99
    cases.append(Case("a largest weight of exactly 0.99 (not saturated)", (at_mark, g[:3])))
    cases.append(Case("every row saturated: no other rows", (np.array([[0.995, 0.005, 0.0], [0.001, 0.998, 0.001]]), g[:2])))
    cases.append(Case("a zero loss gradient: both means are 0", (rows(0.2), np.zeros((6, 3)))))
    return cases


def _saturated_gradient_with(backward=lambda p, g: p * (g - (p * g).sum(-1, keepdims=True)),
                             size=lambda dx: np.linalg.norm(dx, axis=-1), group="mean", empty=float("nan"),
                             swap=False, invert=False, saturated=lambda top: top > THRESHOLD,
                             vanish=lambda a, b: a < 0.1 * b, share=lambda sat: float(sat.mean()),
                             others_all=False):
    def fn(p, g):
        dx = backward(p, g)  # (N, S): dL/dx at the softmax's input, row by row
        sat = saturated(p.max(axis=-1))  # (N,)
        if group == "frobenius":
            pool = lambda rows: float(np.linalg.norm(dx[rows])) if rows.any() else empty  # noqa: E731
        else:
            norms = size(dx)  # (N,)
            reduce = np.sum if group == "sum" else np.mean
            pool = lambda rows: float(reduce(norms[rows])) if rows.any() else empty  # noqa: E731
        on_sat, on_other = pool(sat), pool(np.ones_like(sat) if others_all else ~sat)
        vanishes = bool(vanish(on_sat, on_other))
        if swap:
            on_sat, on_other = on_other, on_sat
        return share(sat), on_sat, on_other, (not vanishes) if invert else vanishes
    return fn


def _saturated_ratio(p, g) -> float:
    _, on_sat, on_other, _ = _saturated_gradient_with()(p, g)
    return on_sat / on_other


def _empty_group_hint(got, expected, args):
    for name, g, e in zip(("on_saturated", "on_others"), got[1:3], expected[1:3]):
        if np.isnan(e) and not np.isnan(float(g)):
            return (f"here no row falls in {name}'s group, so it has no mean: return float('nan') for it "
                    f"(and vanishes False), not {float(g):g}")
    return None


def _saturated_explain(index, expected, args):
    share, on_sat, on_other, _ = _saturated_gradient_with()(*args)
    if expected:
        return f"on_saturated {on_sat:.6g} is below a tenth of on_others {on_other:.6g}"
    if np.isnan(on_sat) or np.isnan(on_other):
        return "one group has no rows, so there is nothing to compare: vanishes is False"
    if on_sat == on_other == 0:
        return "both means are 0, and 0 is not below a tenth of 0"
    return f"on_saturated {on_sat:.6g} is not below a tenth of on_others {on_other:.6g}"


register(
    Exercise(
        id="saturated-gradient",
        error_tips=RATIO_TIPS,
        title="The gradient through saturated rows",
        make_cases=_saturated_gradient_cases,
        reference=_saturated_gradient_with(),
        # g is rescaled to a largest entry of 1 and a saturated row's gradient is ~1e-4 of it: float64
        # cancellation in g - <p, g> (error ~S * 1e-16) is ~1e-10 of it; 1e-7 leaves a margin
        rtol=1e-7,
        atol=1e-14,
        mutants=(
            Mutant("no-subtract", _saturated_gradient_with(backward=lambda p, g: p * g),
                   "you computed p * g. The softmax's backward pass also subtracts each row's <p, g>: "
                   "dL/dx = p * (g - (p * g).sum(-1, keepdims=True))."),
            Mutant("row-sum", _saturated_gradient_with(size=lambda dx: dx.sum(axis=-1)),
                   "you summed each row of dL/dx. That sum is always 0 (adding the same number to every score of "
                   "a row changes no weight), so it cannot measure size: take each row's norm, "
                   "np.linalg.norm(dx, axis=-1)."),
            Mutant("pooled-norm", _saturated_gradient_with(group="frobenius"),
                   "you took one norm over all the saturated rows together (and over all the others). That grows "
                   "with the number of rows in the group; average the rows' norms instead, so that the two groups "
                   "compare row for row."),
            Mutant("empty-zero", _saturated_gradient_with(empty=0.0),
                   "with no saturated rows (the scaled model) you returned 0 for their mean gradient, which reads as "
                   "a gradient that vanished. There is nothing to average: return float('nan')."),
            Mutant("swapped", _saturated_gradient_with(swap=True),
                   "your two means are swapped: return the saturated rows' mean first, then the other rows'."),
            Mutant("conclusion-inverted", _saturated_gradient_with(invert=True),
                   "your numbers are right but the conclusion is upside down: vanishes is True when the saturated "
                   "rows' mean gradient is BELOW a tenth of the other rows'."),
            Mutant("at-least-0.99", _saturated_gradient_with(saturated=lambda top: top >= THRESHOLD),
                   "a row is saturated when its largest weight EXCEEDS 0.99, strictly: p.max(axis=-1) > 0.99, "
                   "so a row whose largest weight is exactly 0.99 is not."),
            Mutant("absolute-threshold", _saturated_gradient_with(vanish=lambda a, b: a < 0.1),
                   "you compared the saturated rows' mean with 0.1 itself. The test is relative: below a tenth "
                   "of the OTHER rows' mean, on_saturated < 0.1 * on_others, whatever the size of g."),
            Mutant("a-hundredth", _saturated_gradient_with(vanish=lambda a, b: a < 0.01 * b),
                   "your threshold is a decade too small: vanishes when the saturated rows' mean is below a "
                   "TENTH of the others', on_saturated < 0.1 * on_others."),
            Mutant("below-the-others", _saturated_gradient_with(vanish=lambda a, b: a < b),
                   "you asked whether the saturated rows' mean is below the others'; the test is below a TENTH "
                   "of it: on_saturated < 0.1 * on_others."),
            Mutant("at-most-a-tenth", _saturated_gradient_with(vanish=lambda a, b: a <= 0.1 * b),
                   "with a zero loss gradient both means are 0, and 0 is not BELOW a tenth of 0: vanishes is "
                   "on_saturated < 0.1 * on_others, strictly, not <=."),
            Mutant("roles-swapped", _saturated_gradient_with(vanish=lambda a, b: b < 0.1 * a),
                   "you asked whether the OTHER rows' mean is below a tenth of the saturated rows'. The "
                   "gradient vanishes through the saturated rows: on_saturated < 0.1 * on_others."),
            Mutant("softmax-of-p", _saturated_gradient_with(backward=lambda p, g: (lambda q: q * (
                       g - (q * g).sum(-1, keepdims=True)))(softmax(p, axis=-1))),
                   "p already holds the attention weights: use them as they are in p * (g - <p, g>); "
                   "softmax(p) is another, much flatter, distribution."),
            Mutant("mean-not-weighted", _saturated_gradient_with(backward=lambda p, g: p * (g - g.mean(-1, keepdims=True))),
                   "you subtracted the plain mean of each row of g; the softmax's backward pass subtracts the "
                   "WEIGHTED mean <p, g> = (p * g).sum(-1, keepdims=True): dL/dx = p * (g - <p, g>)."),
            Mutant("squared-norms", _saturated_gradient_with(size=lambda dx: (dx**2).sum(axis=-1)),
                   "you averaged the rows' SQUARED norms; average the norms themselves, "
                   "np.linalg.norm(dx, axis=-1)."),
            Mutant("others-are-all", _saturated_gradient_with(others_all=True),
                   "your second mean runs over every row; on_others is the mean over the rows that are NOT "
                   "saturated (p.max(axis=-1) <= 0.99)."),
            Mutant("count-not-share", _saturated_gradient_with(share=lambda sat: float(sat.sum())),
                   "you returned the NUMBER of saturated rows; share is their fraction of all N rows, "
                   "sat.mean() (a number between 0 and 1)."),
            Mutant("summed-norms", _saturated_gradient_with(group="sum"),
                   "you summed the rows' norms in each group; take their mean, so that a group of many rows "
                   "and a group of few compare row for row."),
        ),
        returns=("share", "on_saturated", "on_others", "vanishes"),
        explain=_saturated_explain,
        hints=(_empty_group_hint,),
        rules=(
            Rule("threshold", "a largest weight of exactly 0.99 is not saturated (it must exceed 0.99)",
                 ("a largest weight of exactly 0.99 (not saturated)",),
                 lambda p, g: bool((p.max(axis=-1) == THRESHOLD).any()), ("at-least-0.99",), quote='strictly above 0.99'),
            Rule("empty", "a group with no rows: its mean is NaN and vanishes is False",
                 ("every row saturated: no other rows", "the tiny transformer at initialisation, layer 1, d_k=64, with 1/sqrt(d_k)"),
                 lambda p, g: len(set((p.max(axis=-1) > THRESHOLD).tolist())) == 1, ("empty-zero",), quote='`float("nan")` for an empty group'),
            Rule("threshold", "a ratio just below a tenth vanishes, with gradients far above 0.1",
                 ("just below a tenth (ratio 0.074), a large loss gradient",),
                 lambda p, g: 0.05 < _saturated_ratio(p, g) < 0.1 and np.abs(g).max() > 10,
                 ("absolute-threshold", "a-hundredth"), quote='the strict `on_saturated < 0.1 * on_others`'),
            Rule("threshold", "a ratio just above a tenth does not vanish, with gradients far below 0.1",
                 ("just above a tenth (ratio 0.14), a small loss gradient",),
                 lambda p, g: 0.1 < _saturated_ratio(p, g) < 0.3 and np.abs(g).max() < 0.01,
                 ("absolute-threshold", "below-the-others"), quote='the strict `on_saturated < 0.1 * on_others`'),
            Rule("tie", "both means 0 (a zero loss gradient): 0 is not below a tenth of 0, vanishes is False",
                 ("a zero loss gradient: both means are 0",), lambda p, g: not g.any(), ("at-most-a-tenth",), quote='`False` when a group is empty or both means are 0'),
            output_rule('a tuple (float, float, float, bool)',
                        'the tiny transformer at initialisation, layer 1, d_k=64, no scale', 'three floats and a bool',
                        _saturated_gradient_with(), 'tuple-as-list', 'float-for-bool'),
            in_place_rule('the tiny transformer at initialisation, layer 1, d_k=64, no scale',
                          _saturated_gradient_with()),
        ),
        framing=('Run the deciding measurement yourself', 'Write `my_saturated_gradient(p, g)`', 'The check feeds it'),
        difficulty=2,
        minutes=25,
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
