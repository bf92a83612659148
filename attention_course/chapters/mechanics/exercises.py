"""Chapter 1 exercises: softmax, attention, causal mask, one query by hand.

Each lists the learners' typical mistakes (mutants) with their feedback, and the rules its statement draws.
"""

from __future__ import annotations

import numpy as np
import torch

from ...core import attention as att
from ...exercises._core import Case, Exercise, in_place_rule, Mutant, output_rule, register, Rule, SCORE_TIPS

__all__ = ["EXERCISES"]


# ------------------------------------------------------------ stable softmax
def _softmax_cases() -> list[Case]:
    rng = np.random.default_rng(1)
    return [
        Case("random 3x5 logits", (rng.normal(size=(3, 5)),)),
        Case("a single vector", (rng.normal(size=6),)),
        Case("batch of shape (2, 3, 4)", (rng.normal(size=(2, 3, 4)),)),
        Case("logits near 1000", (np.array([[1000.0, 999.0, 998.0], [1.0, 2.0, 3.0]]),)),
        Case(
            "rows on very different scales",
            (np.array([[800.0, 799.0, 798.0], [-800.0, -801.0, -802.0]]),),
        ),
        Case("one logit per row", (np.array([[3.0], [-2.0]]),)),
        Case(  # shifting by the row minimum instead of the maximum still overflows here
            "rows spanning 1000", (np.array([[1000.0, 0.0, -1.0], [2.0, -1000.0, 0.0]]),),
        ),
        Case(  # shifting by the row mean leaves 1500 - 375 = 1125 in the exponent: it overflows
            "one logit 1500 above the rest", (np.array([[1500.0, 0.0, 0.0, 0.0], [0.0, 1.0, 2.0, 3.0]]),),
        ),
        Case(  # a masked score is -inf: its weight is exp(-inf) = 0; shifting by the row min or mean gives NaN
            "masked logits (-inf)", (np.array([[0.5, -np.inf, 1.5, -np.inf], [2.0, -np.inf, -np.inf, -np.inf]]),),
        ),
        Case("float32 logits", (rng.normal(size=(3, 4)).astype(np.float32),)),
        Case(  # exp(100) overflows float32 (its largest value is 3.4e38, about exp(88.7))
            "float32 logits near 100",
            (np.array([[100.0, 99.0, 98.0], [0.5, -0.5, 0.0]], dtype=np.float32),),
        ),
    ]


def _softmax_shifted_by(shift):
    """A softmax over the last axis whose exponent is ``x - shift(x)``: right only for the row maximum."""
    def f(x):
        e = np.exp(x - shift(x))
        return e / e.sum(axis=-1, keepdims=True)

    return f


def _softmax_axis0(x):
    z = np.exp(x - x.max(axis=0, keepdims=True))
    return z / z.sum(axis=0, keepdims=True)


def _softmax_global_sum(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum()


def _softmax_unnormalised(x):
    return np.exp(x - x.max(axis=-1, keepdims=True))


def _softmax_neginf_to_zero(x):
    e = np.exp(np.nan_to_num(x - x.max(axis=-1, keepdims=True), neginf=0.0))  # -inf -> 0, so exp gives 1
    return e / e.sum(axis=-1, keepdims=True)


_MASKED_WEIGHT = ("a masked logit (-inf) got a weight above 0. After the shift it must stay -inf, "
                  "so that exp gives exactly 0: do not replace -inf by a finite number "
                  "(np.nan_to_num does, and so does np.where(np.isinf(z), 0, z))")


def _masked_logit_weighted(got, expected, args):
    x, g = np.asarray(args[0]), np.asarray(got, dtype=float)
    if g.shape == x.shape and np.isneginf(x).any() and np.all(np.isfinite(g)) and np.any(g[np.isneginf(x)] > 0):
        return _MASKED_WEIGHT
    return None


def _log_softmax(x):
    z = x - x.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


_LOG_PROBS = ("these are log-probabilities (a log-softmax): every entry is <= 0 and their "
              "exponentials sum to 1. Return the probabilities themselves, exp(z) / sum(exp(z))")


def _log_probabilities(got, expected, args):
    g = np.asarray(got, dtype=float)
    if np.all(g <= 0) and np.allclose(np.exp(g).sum(axis=-1), 1.0, atol=1e-5):
        return _LOG_PROBS
    return None


def _rows_do_not_sum_to_one(got, expected, args):
    sums = np.asarray(got, dtype=float).sum(axis=-1)
    if np.all(np.isfinite(sums)) and not np.allclose(sums, 1.0, atol=1e-6):
        return "rows do not sum to 1: did you normalise over the last axis?"
    return None


def _overflow(got, expected, args):
    if not np.all(np.isfinite(np.asarray(got, dtype=float))):
        return "your result has NaN or inf: subtract each row's maximum before exp"
    return None


register(
    Exercise(
        id="stable-softmax",
        title="A numerically stable softmax",
        make_cases=_softmax_cases,
        reference=lambda x: att.softmax(x, axis=-1),
        mutants=(
            Mutant("no-max-shift", _softmax_shifted_by(lambda x: 0),
                   "overflow for logits near 1000: exp(1000) is inf in floating point. "
                   "Subtract the row maximum first; softmax(x) = softmax(x - max(x))."),
            Mutant("min-shift", _softmax_shifted_by(lambda x: x.min(axis=-1, keepdims=True)),
                   "you subtracted each row's minimum, so the largest logit of a row spanning 1000 still "
                   "overflows (exp(1000) = inf), and a masked logit (-inf) makes the minimum -inf and the row NaN. "
                   "Subtract the row maximum: then every exponent is <= 0."),
            Mutant("mean-shift", _softmax_shifted_by(lambda x: x.mean(axis=-1, keepdims=True)),
                   "you subtracted each row's mean: a logit far above the others of its row (1500 against "
                   "zeros) still overflows, and a masked logit (-inf) makes the mean -inf and the row NaN. "
                   "Subtract the row MAXIMUM, so that every exponent is <= 0."),
            Mutant("axis-0", _softmax_axis0,
                   "rows do not sum to 1, columns do: did you normalise over axis 0? "
                   "Use axis=-1 (the last axis) for both the max and the sum."),
            Mutant("global-sum", _softmax_global_sum,
                   "the whole array sums to 1, but each row should: "
                   "sum over the last axis with keepdims=True."),
            Mutant("unnormalised", _softmax_unnormalised,
                   "these are exponentials, not probabilities: divide by each row's sum."),
            Mutant("log-softmax", _log_softmax, _LOG_PROBS + "."),
            Mutant("global-max", _softmax_shifted_by(lambda x: x.max()),
                   "you subtracted the maximum of the whole array; a row far below it "
                   "underflows to 0/0. Subtract each row's own maximum (keepdims=True)."),
            Mutant("neginf-to-zero", _softmax_neginf_to_zero, _MASKED_WEIGHT + "."),
        ),
        hints=(_overflow, _masked_logit_weighted, _log_probabilities, _rows_do_not_sum_to_one),
        alternatives=(
            lambda x: torch.softmax(torch.as_tensor(x), dim=-1).numpy(),
            lambda x: np.exp(x - np.logaddexp.reduce(x, axis=-1, keepdims=True)),
        ),
        rules=(
            Rule("range", "logits near 1000 must not overflow (exp overflows float64 above 709)",
                 ("logits near 1000", "rows on very different scales", "rows spanning 1000"),
                 lambda x: np.abs(x).max() > 709, ("no-max-shift",), quote='logits near 1000 in float64'),
            Rule("range", "float32 logits near 100 must not overflow (exp overflows float32 above 88.7)",
                 ("float32 logits near 100",), lambda x: x.dtype == np.float32 and x.max() > 88.7,
                 ("no-max-shift",), quote='near 100 in float32'),
            Rule("range", "a row spanning 1000: subtract its maximum, not its minimum",
                 ("rows spanning 1000",), lambda x: np.ptp(x, axis=-1).max() > 709, ("min-shift",), quote='where `np.exp` overflows'),
            Rule("range", "a logit 1500 above the rest of its row: subtract the maximum, not the mean",
                 ("one logit 1500 above the rest",),
                 lambda x: (x.max(axis=-1) - x.mean(axis=-1)).max() > 709, ("mean-shift", "min-shift"), quote='where `np.exp` overflows'),
            Rule("range", "rows on scales 1600 apart: each row subtracts its own maximum",
                 ("rows on very different scales",), lambda x: np.ptp(x.max(axis=-1)) > 745, ("global-max",), quote='rows on very different scales'),
            Rule("range", "a -inf logit (a masked score) gets weight 0; every row keeps a finite logit",
                 ("masked logits (-inf)",), lambda x: bool(np.isneginf(x).any() and np.isfinite(x).any(axis=-1).all()),
                 ("min-shift", "mean-shift", "neginf-to-zero"), quote='A logit of `-inf`, a masked score, gets weight 0'),
            Rule("edge-size", "one logit per row: every weight is 1",
                 ("one logit per row",), lambda x: x.shape[-1] == 1, ("global-sum", "axis-0", "log-softmax"), quote='a row with a single logit gives 1'),
            Rule("edge-size", "any number of axes: the softmax runs over the last one",
                 ("a single vector", "batch of shape (2, 3, 4)"), lambda x: x.ndim != 2, ("axis-0", "global-sum"), quote='of any shape (a vector, a matrix, a batch)'),
            output_rule("an array of x's shape, at x's precision or higher", 'random 3x5 logits',
                        "returns an array of the same shape in `x`'s dtype", lambda x: att.softmax(x, axis=-1),
                        'float32', 'list'),
            in_place_rule('random 3x5 logits', lambda x: att.softmax(x, axis=-1), quote='Do not change `x` in place'),
        ),
        framing=('Write `my_softmax(x)`',),
        difficulty=1,
        minutes=10,
    )
)


# ------------------------------------------------------ scaled dot-product
def _attention_cases() -> list[Case]:
    rng = np.random.default_rng(2)
    return [
        Case("T=4 queries, S=4 keys", (rng.normal(size=(4, 8)), rng.normal(size=(4, 8)), rng.normal(size=(4, 3)))),
        Case("T=3, S=5, d_k=4, d_v=2", (rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2)))),
        Case("one query", (rng.normal(size=(1, 6)), rng.normal(size=(7, 6)), rng.normal(size=(7, 3)))),
        Case(
            "batch of 2",
            (rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 3))),
        ),
        Case("d_k=64", (rng.normal(size=(3, 64)), rng.normal(size=(6, 64)), rng.normal(size=(6, 2)))),
        Case(
            "batch x heads: q (2, 3, 4, 5), k (2, 3, 6, 5)",
            (rng.normal(size=(2, 3, 4, 5)), rng.normal(size=(2, 3, 6, 5)), rng.normal(size=(2, 3, 6, 2))),
        ),
    ]


def _attention_reference(q, k, v):
    return att.scaled_dot_product_attention(q, k, v)


def _swap(x):
    return np.swapaxes(x, -2, -1)


def _attn_with(scale_fn, axis=-1, after=False):
    def f(q, k, v):
        scores = q @ _swap(k) * (1.0 if after else scale_fn(q.shape[-1]))  # (..., T, S)
        w = att.softmax(scores, axis=axis) * (scale_fn(q.shape[-1]) if after else 1.0)
        return w @ v, w

    return f


def _swapped_pair(got, expected, args) -> str | None:
    """(weights, output) returned in the wrong order: both shapes swapped."""
    shapes = [tuple(np.shape(t)) for t in got] if isinstance(got, (tuple, list)) and len(got) == 2 else []
    out_shape, w_shape = (tuple(np.shape(t)) for t in expected)
    if shapes and out_shape != w_shape and shapes == [w_shape, out_shape]:
        return ("You returned (weights, output): return the tuple in the order (output, weights), "
                "the output (..., T, d_v) first.")
    return None


def _attn_scale_by_S(q, k, v):
    w = att.softmax(q @ _swap(k) / np.sqrt(k.shape[-2]))  # (..., T, S), scaled by the number of keys
    return w @ v, w


def _attn_scale_by_d_v(q, k, v):
    w = att.softmax(q @ _swap(k) / np.sqrt(v.shape[-1]))  # (..., T, S), the wrong size
    return w @ v, w


register(
    Exercise(
        id="attention",
        error_tips=SCORE_TIPS,
        structure_hint=_swapped_pair,
        title="Scaled dot-product attention",
        make_cases=_attention_cases,
        reference=_attention_reference,
        mutants=(
            Mutant("no-scale", _attn_with(lambda d: 1.0),
                   "your weights are softmax(q k^T) without the scale: divide the scores "
                   "by sqrt(d_k) before the softmax."),
            Mutant("scale-by-d", _attn_with(lambda d: 1.0 / d),
                   "you divided the scores by d_k; the scale is 1/sqrt(d_k)."),
            Mutant("softmax-over-queries", _attn_with(lambda d: d**-0.5, axis=-2),
                   "your weights' columns sum to 1: the softmax must normalise over the "
                   "keys, which is the last axis of the (T, S) score matrix."),
            Mutant("softmax-axis-1", _attn_with(lambda d: d**-0.5, axis=1),
                   "you normalised over axis 1, which is the key axis only for 2-D scores: with batch "
                   "axes, (B, T, S) or (B, h, T, S), the keys are the LAST axis. Use axis=-1."),
            Mutant("scale-by-d_v", _attn_scale_by_d_v,
                   "you scaled by 1/sqrt(d_v), the size of the values. The scale is 1/sqrt(d_k), the size "
                   "of the queries and keys whose dot products it tames: q.shape[-1]."),
            Mutant("scale-by-S", _attn_scale_by_S,
                   "you scaled by the number of keys, 1/sqrt(S); the scale is 1/sqrt(d_k), the size of each "
                   "query and key vector: q.shape[-1]."),
            Mutant("times-sqrt-d", _attn_with(lambda d: np.sqrt(d)),
                   "you multiplied the scores by sqrt(d_k); divide them: q k^T / sqrt(d_k)."),
            Mutant("scaled-after-softmax", _attn_with(lambda d: d**-0.5, after=True),
                   "you divided the weights by sqrt(d_k) after the softmax, so they no longer sum to 1. "
                   "The scale goes on the scores, before the softmax: softmax(q k^T / sqrt(d_k))."),
        ),
        hints=(
            lambda got, exp, args: _log_probabilities(got[1], exp[1], args),
            lambda got, exp, args: _rows_do_not_sum_to_one(got[1], exp[1], args),
        ),
        returns=("output", "weights"),
        rules=(
            Rule("edge-size", "T != S: the weights are (..., T, S), normalised over the S keys",
                 ("T=3, S=5, d_k=4, d_v=2", "one query"), lambda q, k, v: q.shape[-2] != k.shape[-2],
                 ("softmax-over-queries",), quote='$T$ may differ from $S$'),
            Rule("edge-size", "d_v != d_k: the scale is 1/sqrt(d_k)",
                 ("T=3, S=5, d_k=4, d_v=2", "d_k=64"), lambda q, k, v: q.shape[-1] != v.shape[-1],
                 ("scale-by-d_v",), quote='the scale uses $d_k$'),
            Rule("edge-size", "batch axes (none, a batch, batch and heads): the keys are the last axis",
                 ("batch of 2", "batch x heads: q (2, 3, 4, 5), k (2, 3, 6, 5)"), lambda q, k, v: q.ndim >= 3,
                 ("softmax-axis-1",), quote='where `...` is any number of batch axes'),
            output_rule("a tuple of two arrays, (..., T, d_v) and (..., T, S)", "T=4 queries, S=4 keys",
                        "Return the tuple `(output, weights)` of arrays in the inputs' precision",
                        _attention_reference, "float32", "tuple-as-list"),
            in_place_rule("T=4 queries, S=4 keys", _attention_reference),
        ),
        framing=('Write `my_attention(q, k, v)`',),
        difficulty=1,
        minutes=15,
        alternatives=(
            lambda q, k, v: (
                lambda w: (np.einsum("...ts,...sd->...td", w, v), w)
            )(att.softmax(np.einsum("...td,...sd->...ts", q, k) / np.sqrt(q.shape[-1]))),
            lambda q, k, v: tuple(
                t.numpy() for t in att.scaled_dot_product_attention(
                    torch.as_tensor(q), torch.as_tensor(k), torch.as_tensor(v)
                )
            ),
        ),
    )
)


# ------------------------------------------------------------- causal mask
def _mask_cases() -> list[Case]:
    return [
        Case("T=S=4", (4, 4)),
        Case("T=S=1", (1, 1)),
        Case("T=3 queries, S=6 keys", (3, 6)),
        Case("T=5 queries, S=2 keys", (5, 2)),
    ]


def _explain_mask_entry(index, expected, args):
    i, j = index
    if expected:
        return f"query {i} may attend to key {j}, because {j} <= {i}"
    return f"key {j} is in query {i}'s future ({j} > {i}), so it must be masked out"


def _numbers_for_a_mask(got, expected, args):
    """Why a 0/1 number mask is wrong for attention (the engine has already said it wants booleans)."""
    kind = np.asarray(got.detach() if isinstance(got, torch.Tensor) else got).dtype.kind
    if kind in "iuf":
        return ("For a mask this matters: torch *adds* a 0/1 float attn_mask to the scores instead of "
                "blocking them.")
    return None


register(
    Exercise(
        id="causal-mask",
        title="A causal mask",
        make_cases=_mask_cases,
        reference=lambda T, S: att.causal_mask(T, S),
        mutants=(
            Mutant("upper", lambda T, S: np.triu(np.ones((T, S), dtype=bool)),
                   "your mask lets a position see the future: query i may attend to keys "
                   "j <= i, the lower triangle (np.tril)."),
            Mutant("strict", lambda T, S: np.tril(np.ones((T, S), dtype=bool), k=-1),
                   "each position must also attend to itself: include the diagonal (j <= i, not j < i)."),
            Mutant("inverted", lambda T, S: ~np.tril(np.ones((T, S), dtype=bool)),
                   "your mask is inverted: in this course True means 'may attend', so the "
                   "allowed keys j <= i are True."),
            Mutant("bottom-right", lambda T, S: np.tril(np.ones((T, S), dtype=bool), k=S - T),
                   "for T != S this course (like torch's is_causal=True) aligns the mask at "
                   "the top-left corner: entry (i, j) is True exactly when j <= i."),
            Mutant("one-too-many", lambda T, S: np.tril(np.ones((T, S), dtype=bool), k=1),
                   "your mask lets query i see key i + 1, one step into the future: True exactly when "
                   "j <= i (np.tril with k=0, the default)."),
            Mutant("all-true", lambda T, S: np.ones((T, S), dtype=bool),
                   "every entry is True, so nothing is masked: query i may attend only to keys j <= i."),
            Mutant("diagonal-only", lambda T, S: np.eye(T, S, dtype=bool),
                   "only the diagonal is True: query i may attend to every earlier key too, all j <= i "
                   "(the lower triangle, np.tril)."),
        ),
        explain=_explain_mask_entry,
        structure_hint=_numbers_for_a_mask,
        alternatives=(
            lambda T, S: np.array([[j <= i for j in range(S)] for i in range(T)]),
            lambda T, S: torch.ones(T, S, dtype=torch.bool).tril(),
        ),
        rules=(
            Rule("edge-size", "T != S: the mask is aligned at the top-left corner, (i, j) True when j <= i",
                 ("T=3 queries, S=6 keys", "T=5 queries, S=2 keys"), lambda T, S: T != S, ("bottom-right",), quote='For $T \\ne S$ the mask is aligned at the top-left corner'),
            Rule("threshold", "j <= i: the diagonal j = i is allowed, j = i + 1 is not",
                 ("T=S=4",), lambda T, S: min(T, S) >= 2, ("strict", "one-too-many", "diagonal-only"), quote='that is when `j <= i` (the diagonal included)'),
            Rule("edge-size", "T = S = 1: one query that sees its own key",
                 ("T=S=1",), lambda T, S: T == S == 1, ("strict", "inverted"), quote='$T = S = 1$ gives `[[True]]`'),
            output_rule('a boolean array (T, S), not 0/1 floats', 'T=S=4',
                        ('returning a boolean array (dtype `bool`) of shape `(T, S)`', 'A 0/1 float array is not a boolean mask'),
                        lambda T, S: att.causal_mask(T, S), 'float-for-bool', 'list'),
        ),
        framing=('Write `my_causal_mask(T, S)`',),
        difficulty=1,
        minutes=5,
    )
)


# ----------------------------------------------------------- one query by hand
def _one_query_cases() -> list[Case]:
    rng = np.random.default_rng(3)
    return [
        Case("d_k=4, S=5, d_v=2", (rng.normal(size=4), rng.normal(size=(5, 4)), rng.normal(size=(5, 2)))),
        Case("one key", (rng.normal(size=3), rng.normal(size=(1, 3)), rng.normal(size=(1, 4)))),
        Case("d_k=16, S=8, d_v=3", (rng.normal(size=16), rng.normal(size=(8, 16)), rng.normal(size=(8, 3)))),
        Case(  # scores 1000, 998 and 996: exp(1000) is inf in float64, so an unshifted softmax gives inf / inf = NaN
            "scores near 1000", (np.full(4, 10.0), np.array([[50.0] * 4, [49.9] * 4, [49.8] * 4]), rng.normal(size=(3, 2))),
        ),
    ]


def _one_query_reference(q_i, k, v):
    out, _ = att.scaled_dot_product_attention(q_i[None, :], k, v)
    return out[0]


def _one_query_with(scale=lambda q_i, v: np.sqrt(q_i.shape[0]), normalise=True):
    def f(q_i, k, v):
        scores = k @ q_i / scale(q_i, v)  # (S,)
        e = np.exp(scores - scores.max())
        return (e / e.sum() if normalise else np.exp(scores)) @ v  # (d_v,)

    return f


def _one_query_weights(q_i, k):
    return att.softmax(k @ q_i / np.sqrt(q_i.shape[0]))  # (S,)


def _one_query_structure(got, expected, args) -> str | None:
    """A result of the wrong shape that is a known intermediate: the weights, or the weights times the keys."""
    q_i, k, v = args
    g = np.asarray(got, dtype=float) if np.ndim(got) == 1 else None
    w = _one_query_weights(q_i, k)  # (S,)
    if g is not None and g.shape == w.shape and np.allclose(g, w, rtol=1e-6, atol=1e-9):
        return ("These are the weights, one per key. The output is their weighted sum of the values, "
                "sum_j w_j v_j (weights @ v), of shape (d_v,).")
    if g is not None and g.shape == (k.shape[1],) and np.allclose(g, w @ k, rtol=1e-6, atol=1e-9):
        return ("You averaged the keys (weights @ k): the keys only decide the weights; the output "
                "averages the values, weights @ v, of shape (d_v,).")
    return None


def _one_query_unstable(q_i, k, v):
    e = np.exp(k @ q_i / np.sqrt(q_i.shape[0]))  # (S,), no shift by the largest score: overflows near 1000
    return (e / e.sum()) @ v  # (d_v,)


def _one_query_argmax(q_i, k, v):
    return v[np.argmax(k @ q_i)]  # hard attention: only the best key's value


register(
    Exercise(
        id="one-query",
        title="One query's output, by hand",
        structure_hint=_one_query_structure,
        make_cases=_one_query_cases,
        reference=_one_query_reference,
        mutants=(
            Mutant("no-scale", lambda q_i, k, v: att.softmax(k @ q_i) @ v,
                   "close, but the scores need the 1/sqrt(d_k) scale before the softmax."),
            Mutant("plain-mean", lambda q_i, k, v: v.mean(axis=0),
                   "that is the plain average of the values; the weights should depend on how "
                   "well q_i matches each key (softmax of the scaled dot products)."),
            Mutant("scale-by-d", _one_query_with(scale=lambda q_i, v: q_i.shape[0]),
                   "you divided the scores by d_k; the scale is 1/sqrt(d_k)."),
            Mutant("scale-by-d_v", _one_query_with(scale=lambda q_i, v: np.sqrt(v.shape[1])),
                   "you scaled by 1/sqrt(d_v), the size of the values; the scale is 1/sqrt(d_k), the size of q_i."),
            Mutant("unnormalised", _one_query_with(normalise=False),
                   "your weights exp(score) do not sum to 1: divide each by their sum over the keys "
                   "(with one key, its weight must be exactly 1)."),
            Mutant("no-softmax", lambda q_i, k, v: (k @ q_i / np.sqrt(q_i.shape[0])) @ v,
                   "you weighted the values by the raw scores. Turn the scores into weights first: a softmax "
                   "over the keys, so that they are positive and sum to 1."),
            Mutant("no-max-shift", _one_query_unstable,
                   "overflow for scores near 1000: exp(1000) is inf in floating point, and inf / inf is NaN. "
                   "Subtract the largest score before exp (the stable softmax of the first exercise)."),
            Mutant("argmax", _one_query_argmax,
                   "you returned the value of the best-matching key only (hard attention). Attention "
                   "averages every value, weighted by the softmax of the scaled scores."),
        ),
        alternatives=(
            lambda q_i, k, v: att.softmax(k @ q_i / np.sqrt(q_i.shape[0])) @ v,
            lambda q_i, k, v: torch.nn.functional.scaled_dot_product_attention(
                torch.as_tensor(q_i)[None], torch.as_tensor(k), torch.as_tensor(v)
            )[0].numpy(),
        ),
        rules=(
            Rule("edge-size", "one key: its weight is 1 and the output is its value",
                 ("one key",), lambda q_i, k, v: k.shape[0] == 1, ("unnormalised",), quote='with a single key its weight is 1'),
            Rule("range", "scores near 1000 must not overflow (exp overflows float64 above 709)",
                 ("scores near 1000",), lambda q_i, k, v: np.abs(k @ q_i / np.sqrt(q_i.shape[0])).max() > 709,
                 ("no-max-shift",), quote='Scores may be near 1000, where `np.exp` overflows'),
            Rule("edge-size", "d_k != d_v: the scale uses d_k, the size of q_i",
                 ("d_k=4, S=5, d_v=2", "d_k=16, S=8, d_v=3"), lambda q_i, k, v: q_i.shape[0] != v.shape[1],
                 ("scale-by-d_v",), quote='($d_k$ is the size of `q_i`, which may differ from $d_v$)'),
            output_rule("a float64 array (d_v,)", "d_k=4, S=5, d_v=2", "a float64 array of shape `(d_v,)`",
                        _one_query_reference, "float32", "list"),
            in_place_rule("d_k=4, S=5, d_v=2", _one_query_reference, index=1),
        ),
        framing=('Write `my_one_query(q_i, k, v)`', 'Use a loop or a sum'),
        difficulty=1,
        minutes=10,
    )
)

EXERCISES = ("stable-softmax", "one-query", "attention", "causal-mask")
