"""Chapter 7 exercises: run the memory experiment yourself, and build the window mask of a copy.

``hopfield-retrieval``: ``fn(X, queries, clean, beta) -> float``, the share of the n queries whose every
sign comes out right after one step :math:`\\xi \\leftarrow X \\operatorname{softmax}(\\beta X^\\top \\xi)`
(``beta=None``: the outer-product memory :math:`X X^\\top \\xi`).

``window-mask``: ``fn(T, w) -> (T, T) bool``, True where query t may read key s, ``0 <= t - s < w``
(``w=None``: the causal mask). The learner then trains the copy with it
(:func:`~attention_course.chapters.insight.window_sweep.window_copy_sweep`).
"""

from __future__ import annotations


import numpy as np
import torch

from ...exercises._core import Breach, Case, Exercise, in_place_rule, Mutant, output_rule, register, Rule
from .mixers import mixing_mask
from .memory import corrupt, retrieve, store_patterns

__all__ = ["EXERCISES"]


def _reference(X, queries, clean, beta):
    return float((np.sign(retrieve(X, queries, beta)) == clean).all(axis=0).mean())


def _case(d, M, n, flip, beta, seed):
    X = store_patterns(d, M, seed=seed)
    clean = X[:, np.arange(n) % M]
    return (X, corrupt(clean, flip, seed=seed + 1), clean, beta)


def _cases() -> list[Case]:
    return [
        Case("d=16, 8 patterns, beta=1", _case(16, 8, 40, 0.1, 1.0, 0)),
        Case("d=16, 64 patterns, beta=1 (some fail)", _case(16, 64, 60, 0.1, 1.0, 1)),
        Case("d=32, 128 patterns, beta=1/sqrt(32)", _case(32, 128, 60, 0.1, 32**-0.5, 2)),
        Case("d=16, 40 patterns, a small beta = 0.05 (soft weights)", _case(16, 40, 50, 0.1, 0.05, 3)),
        Case("d=16, 6 patterns, the outer-product memory (beta=None)", _case(16, 6, 40, 0.1, None, 4)),
        Case("one stored pattern", _case(16, 1, 10, 0.25, 1.0, 5)),
        Case("the outer-product memory with 4 patterns: some components come out exactly 0",
             _case(16, 4, 40, 0.1, None, 1)),
        Case("beta = 0: every pattern weighted equally", _case(16, 3, 30, 0.1, 0.0, 6)),
        Case("a large beta = 60: scores up to 960", _case(16, 8, 40, 0.1, 60.0, 7)),
    ]


def _softmax(z, axis):
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _update(X, q, beta, *, axis=0, scale="beta", steps=1, stable=True, none_as=None, zero_as_none=False):
    """One (or ``steps``) memory updates, with one knob per typical mistake. ``scale`` is how the scores are
    scaled: ``"beta"`` (right), ``"one"`` (beta ignored), ``"divided"`` (by beta), ``"sqrt-d"`` (beta / sqrt(d))
    or ``"linear"`` (the outer-product memory whatever beta is)."""
    if beta is None and none_as is not None:
        beta = none_as
    out = q
    for _ in range(steps):
        if beta is None or scale == "linear" or (zero_as_none and not beta):
            out = X @ (X.T @ out)  # (d, n): the outer-product memory
        else:
            s = X.T @ out  # (M, n)
            z = {"beta": lambda: beta * s, "one": lambda: s, "divided": lambda: s / beta,
                 "sqrt-d": lambda: beta * s / np.sqrt(X.shape[0])}[scale]()
            w = _softmax(z, axis) if stable else np.exp(z) / np.exp(z).sum(axis=axis, keepdims=True)
            out = X @ w  # (d, n)
        out = np.sign(out) if steps > 1 else out
    return out


def _share(out, clean, *, every=True, axis=0, zero_as=0.0):
    signs = np.where(out == 0, zero_as, np.sign(out))
    right = signs == clean  # (d, n)
    hit = right.all(axis=axis) if every else right.any(axis=axis)
    return float(hit.mean())


def _mutant(share=None, **update):
    def f(X, q, c, beta):
        return (share or _share)(_update(X, q, beta, **update), c)
    return f


def _mut_argmax(X, q, c, beta):
    if beta is None:
        return _reference(X, q, c, beta)
    return float((X[:, (X.T @ q).argmax(axis=0)] == c).all(axis=0).mean())


def _mut_query(X, q, c, beta):
    return float((np.sign(retrieve(X, q, beta)) == q).all(axis=0).mean())  # compared with the query


def _loop(X, queries, clean, beta):
    hits = 0
    for i in range(queries.shape[1]):
        s = X.T @ queries[:, i]  # (M,)
        if beta is None:
            out = X @ s
        else:
            w = np.exp(beta * s - (beta * s).max())
            out = X @ (w / w.sum())
        hits += bool(np.all(np.sign(out) == clean[:, i]))
    return hits / queries.shape[1]


def _torch(X, queries, clean, beta):
    Xt, q = torch.from_numpy(X), torch.from_numpy(queries)
    s = Xt.T @ q  # (M, n)
    out = Xt @ s if beta is None else Xt @ torch.softmax(beta * s, dim=0)
    return float((torch.sign(out) == torch.from_numpy(clean)).all(dim=0).double().mean())


def _hopfield_structure(got, expected, args) -> str | None:
    arr = np.asarray(got) if isinstance(got, np.ndarray) else None
    if arr is not None and arr.dtype == bool and arr.ndim == 1:
        return "That is one verdict per query: return their share, the mean over the n queries (a float)."
    return None


register(Exercise(
        id="hopfield-retrieval",
        title="Run the memory experiment: the share retrieved exactly",
        make_cases=_cases,
        reference=_reference,
        mutants=(
            Mutant("softmax-over-queries", _mutant(axis=1),
                   "the softmax must run over the M stored patterns (axis 0 of X.T @ queries, shape (M, n)), "
                   "so that each query's weights sum to 1; yours normalise across the queries."),
            Mutant("ignores-beta", _mutant(scale="one"),
                   "beta is the inverse temperature: multiply the scores X.T @ queries by beta before the softmax."),
            Mutant("divided-by-beta", _mutant(scale="divided"),
                   "you divided the scores by beta; beta is the inverse temperature: multiply, beta * (X.T @ queries)."),
            Mutant("extra-sqrt-d", _mutant(scale="sqrt-d"),
                   "you also divided the scores by sqrt(d); the update is X softmax(beta X^T xi), with beta alone "
                   "setting the temperature."),
            Mutant("share-of-bits", lambda X, q, c, beta: float((np.sign(retrieve(X, q, beta)) == c).mean()),
                   "that is the share of correct signs. A query counts as retrieved only when every one of its d "
                   "signs is right: use .all(axis=0) over the d rows, then the mean over the queries."),
            Mutant("any-sign", _mutant(share=lambda out, c: _share(out, c, every=False)),
                   "you counted a query as retrieved when any of its signs is right; it needs every one of its d "
                   "signs right: .all(axis=0), not .any(axis=0)."),
            Mutant("rows-not-queries", _mutant(share=lambda out, c: _share(out, c, axis=1)),
                   "you took .all() over the queries (axis 1), one verdict per feature; each query is a column: "
                   "take .all(axis=0) over its d signs, then the mean over the n queries."),
            Mutant("count-not-share", lambda X, q, c, beta: float((np.sign(retrieve(X, q, beta)) == c).all(axis=0).sum()),
                   "that is the number of queries retrieved; return their share, the count divided by n (a "
                   "float between 0 and 1)."),
            Mutant("no-sign", lambda X, q, c, beta: float((retrieve(X, q, beta) == c).all(axis=0).mean()),
                   "you compared the update itself with the stored patterns; take its signs first, "
                   "np.sign(X @ weights), then compare them with clean."),
            Mutant("zero-as-plus-one", _mutant(share=lambda out, c: _share(out, c, zero_as=1.0)),
                   "a component that comes out exactly 0 has no sign (np.sign gives 0) and counts as wrong; yours "
                   "counted it as +1."),
            Mutant("argmax", _mut_argmax,
                   "you returned the nearest stored pattern (an argmax). One softmax step mixes the patterns by "
                   "their weights, and at a small beta the mix can have wrong signs: compute X @ softmax(...)."),
            Mutant("always-linear", _mutant(scale="linear"),
                   "with a beta, the memory is softmax attention: X @ softmax(beta * X.T @ queries). Only beta=None "
                   "means the outer-product memory X @ (X.T @ queries)."),
            Mutant("none-as-beta-1", _mutant(none_as=1.0),
                   "beta=None means the outer-product memory, X @ (X.T @ queries), with no softmax; you ran the "
                   "softmax memory with beta = 1."),
            Mutant("zero-beta-as-none", _mutant(zero_as_none=True),
                   "beta = 0 is a softmax memory too, with every pattern weighted equally; only beta is None means "
                   "the outer-product memory: test `beta is None`, not `not beta`."),
            Mutant("several-steps", _mutant(steps=2),
                   "you ran the update more than once; the exercise asks for one step of attention, then the signs."),
            Mutant("softmax-not-shifted", _mutant(stable=False),
                   "your softmax overflows at a large beta (scores up to 960: exp overflows above 709, giving "
                   "inf / inf = NaN): subtract each column's maximum before exp."),
            Mutant("compared-with-query", _mut_query,
                   "compare the retrieved signs with `clean`, the stored patterns, not with the corrupted queries."),
        ),
        alternatives=(_loop, _torch),
        rules=(
            Rule("range", "at a small beta the softmax weights are soft, and one step is not the nearest pattern",
                 ("d=16, 40 patterns, a small beta = 0.05 (soft weights)",),
                 lambda X, q, c, beta: beta is not None and 0 < beta <= 0.05, ("argmax", "ignores-beta"),
                 quote="one step of softmax attention"),
            Rule("edge-size", "beta=None is the outer-product memory, X X^T",
                 ("d=16, 6 patterns, the outer-product memory (beta=None)",),
                 lambda X, q, c, beta: beta is None, ("compared-with-query", "none-as-beta-1"),
                 quote="when `beta` is `None`, the outer-product memory"),
            Rule("tie", "a component exactly 0 has no sign and counts as wrong",
                 ("the outer-product memory with 4 patterns: some components come out exactly 0",),
                 lambda X, q, c, beta: bool((retrieve(X, q, beta) == 0).any()), ("zero-as-plus-one",),
                 quote="A component that comes out exactly 0 has no sign and counts as wrong"),
            Rule("edge-size", "beta = 0 is a softmax with equal weights, not the outer product",
                 ("beta = 0: every pattern weighted equally",), lambda X, q, c, beta: beta == 0,
                 ("zero-beta-as-none",), quote="`beta` may be 0 (every pattern weighted equally)"),
            Rule("range", "a large beta: the softmax must not overflow",
                 ("a large beta = 60: scores up to 960",), lambda X, q, c, beta: beta is not None and
                 float(np.abs(beta * (X.T @ q)).max()) > 709, ("softmax-not-shifted",),
                 quote="at `beta = 60`, $\\beta X^\\top \\xi$ reaches 960"),
            Rule("threshold", "retrieved means every sign right, not most",
                 ("d=16, 64 patterns, beta=1 (some fail)",),
                 lambda X, q, c, beta: 0 < _reference(X, q, c, beta) < 1,
                 ("share-of-bits", "softmax-over-queries", "always-linear", "any-sign", "rows-not-queries"),
                 quote="the share of the $n$ queries whose every sign is right"),
            Rule("output", "a float between 0 and 1", ("d=16, 8 patterns, beta=1",), lambda *a: True,
                 quote="a float between 0 and 1",
                 breaches=(Breach("per-query", lambda X, q, c, beta: (np.sign(retrieve(X, q, beta)) == c).all(axis=0),
                                  "return their share"),
                           Breach("percentage", lambda X, q, c, beta: 100 * _reference(X, q, c, beta),
                                  "100 times the right value"))),
            in_place_rule("d=16, 8 patterns, beta=1", _loop, index=1),
        ),
        structure_hint=_hopfield_structure,
        framing=("Write `my_retrieval_share(X, queries, clean, beta)`", "`X` has shape `(d, M)`",
                 "Then call it at $d = 16$"),
        difficulty=1,
        minutes=20,
    ))


# ------------------------------------------------------------------ window-mask
def _window_reference(T, w):
    return mixing_mask(T, w).numpy()  # (T, T) bool


def _window_cases() -> list[Case]:
    return [Case(f"T={T}, w={w}", (T, w)) for T, w in ((6, 3), (5, 1), (4, None), (4, 4), (3, 10), (1, 1), (8, 2), (6, None))]


def _band(lo, hi_of_w, none_means_all: bool = False):
    """A mask True where lo <= t - s and t - s < hi_of_w(w) (w=None: t - s >= lo, or all True)."""
    def f(T, w):
        t = np.arange(T)
        behind = t[:, None] - t[None, :]  # (T, T): t - s
        if w is None:
            return np.ones((T, T), dtype=bool) if none_means_all else behind >= lo
        return (behind >= lo) & (behind < hi_of_w(w))
    return f


def _two_sided(T, w):
    t = np.arange(T)
    gap = np.abs(t[:, None] - t[None, :])  # (T, T): |t - s|
    return gap >= 0 if w is None else gap < w


def _explain_window_entry(index, expected, args):
    t, s = index
    w = args[1]
    if expected:
        return f"key {s} is {t - s} behind query {t}, inside a window of {w}" if w is not None else \
            f"key {s} is not after query {t}, so the causal mask lets it be read"
    if s > t:
        return f"key {s} is after query {t}: a window looks back only"
    return f"key {s} is {t - s} behind query {t}; a window of {w} reaches only {w - 1} back"


def _numbers_for_window(got, expected, args):
    kind = np.asarray(got.detach() if isinstance(got, torch.Tensor) else got).dtype.kind
    if kind in "iuf":
        return "A mask is booleans, True where query t may read key s, not 0/1 numbers."
    return None


register(Exercise(
        id="window-mask",
        title="Find the smallest window",
        make_cases=_window_cases,
        reference=_window_reference,
        mutants=(
            Mutant("one-too-wide", _band(0, lambda w: w + 1),
                   "your window reads w + 1 positions: it is the query itself and the w - 1 positions before "
                   "it, 0 <= t - s < w (not <= w)."),
            Mutant("one-too-narrow", _band(0, lambda w: w - 1),
                   "your window reads only w - 1 positions: the query itself is one of the w, so keep "
                   "0 <= t - s < w."),
            Mutant("without-itself", _band(1, lambda w: w + 1),
                   "each position also reads itself: the window is the query and the w - 1 positions "
                   "before it, t - s from 0 to w - 1."),
            Mutant("two-sided", _two_sided,
                   "your window also reads positions after the query: it looks back only, 0 <= t - s "
                   "(s <= t), as well as t - s < w."),
            Mutant("forward", lambda T, w: _band(0, lambda w: w)(T, w).T,
                   "your window reads forward, keys s >= t: rows are queries t and columns keys s, and the "
                   "window covers the query and the keys before it, 0 <= t - s < w."),
            Mutant("inverted", lambda T, w: ~_window_reference(T, w),
                   "your mask is inverted: True means 'may read', so the window's own positions are True."),
            Mutant("none-means-all", _band(0, lambda w: w, none_means_all=True),
                   "with w = None there is no window, but the mask is still causal: True where s <= t, "
                   "not everywhere."),
        ),
        explain=_explain_window_entry,
        structure_hint=_numbers_for_window,
        alternatives=(
            lambda T, w: np.array([[0 <= t - s < (w or T + 1) for s in range(T)] for t in range(T)]),
            lambda T, w: mixing_mask(T, w),
            lambda T, w: np.tril(np.ones((T, T), dtype=bool)) & ~np.tril(np.ones((T, T), dtype=bool), -(w or T + 1)),
        ),
        rules=(
            Rule("threshold", "t - s < w: the query and the w - 1 positions before it",
                 ("T=6, w=3", "T=8, w=2"), lambda T, w: w is not None and 1 < w < T,
                 ("one-too-wide", "one-too-narrow", "without-itself"), quote="that is when `0 <= t - s < w`"),
            Rule("edge-size", "w = 1: each position reads only itself",
                 ("T=5, w=1", "T=1, w=1"), lambda T, w: w == 1, ("without-itself", "one-too-narrow"),
                 quote="`w = 1` lets each position read only itself"),
            Rule("edge-size", "w = None: the causal mask alone",
                 ("T=4, w=None",), lambda T, w: w is None, ("none-means-all",),
                 quote="`w = None` means no window, the causal mask alone"),
            Rule("edge-size", "a window as long as T or longer is the causal mask",
                 ("T=4, w=4", "T=3, w=10"), lambda T, w: w is not None and w >= T, ("two-sided", "forward"),
                 quote="a window as long as `T` or longer is the causal mask too"),
            Rule("range", "causal: a window looks back only, s <= t",
                 ("T=6, w=3",), lambda T, w: T > 1, ("two-sided", "forward", "inverted"),
                 quote="the query itself and the $w - 1$ positions before it"),
            output_rule("a boolean array (T, T)", "T=6, w=3", "returning a boolean array of shape `(T, T)`",
                        _window_reference, "float-for-bool", "list"),
        ),
        framing=("A copy at a gap of", "lets each position read itself and the", "Predict the smallest window that copies",
                 "write `my_window_mask(T, w)`",
                 "`ch.window_copy_sweep(my_window_mask)`", "Does your prediction hold?"),
        difficulty=1,
        minutes=15,
    ))

EXERCISES = ("hopfield-retrieval", "window-mask")
