"""Chapter 7 exercises: run the memory experiment yourself, and find the smallest window that solves a copy.

``hopfield-retrieval``: ``fn(X, queries, clean, beta) -> float``, the share of the n queries whose every
sign comes out right after one step :math:`\\xi \\leftarrow X \\operatorname{softmax}(\\beta X^\\top \\xi)`
(``beta=None``: the outer-product memory :math:`X X^\\top \\xi`).

``window-sweep``: ``fn(run, windows, margin) -> int``, the smallest window whose accuracy ``run(w)`` is at
least full attention's ``run(None)`` minus ``margin``, or 0; besides the tables, the check runs the copy
at gaps 2 and 3 itself (trained once per process).
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from ...exercises._core import Breach, Case, Exercise, Mutant, Rule, in_place_breach, register
from .ablations import window_copy_accuracy
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
            Rule("forbidden", "the inputs are not changed in place", ("d=16, 8 patterns, beta=1",), lambda *a: True,
                 quote="Do not change the inputs in place", breaches=(in_place_breach(_loop, index=1),)),
        ),
        structure_hint=_hopfield_structure,
        framing=("Write `my_retrieval_share(X, queries, clean, beta)`", "`X` has shape `(d, M)`",
                 "Then call it at $d = 16$"),
        difficulty=1,
        minutes=20,
    ))


# ------------------------------------------------------------------ window-sweep
def _window_reference(run, windows, margin):
    full = run(None)
    good = [w for w in windows if run(w) >= full - margin]
    return int(min(good)) if good else 0


class _Run:
    """A stand-in for ``run``: each window's accuracy (``None``: full attention) from ``accuracy``, with
    each call counted (each call of the real ``run`` trains a model, and the statement asks for one call per
    window: :func:`_run_twice` reports more). A window the case does not offer raises."""

    def __init__(self, accuracy, windows, label: str):
        self.accuracy, self.windows, self.label, self.calls = accuracy, tuple(windows), label, {}

    def __call__(self, w):
        key = None if w is None else int(w)
        if key is not None and key not in self.windows:
            raise ValueError(f"run({w!r}): {w!r} is not one of this case's windows {list(self.windows)}; sweep "
                             f"the windows you are given")
        self.calls[key] = self.calls.get(key, 0) + 1
        return float(self.accuracy(key))

    def __repr__(self) -> str:
        return f"run ({self.label})"


def _table_run(table: dict, full: float, label: str = "a table") -> _Run:
    """A stand-in for training: the accuracy of each window read from a table (full attention: ``full``)."""
    return _Run(lambda w: full if w is None else table[w], sorted(table), label)


@functools.lru_cache(maxsize=None)
def _trained_copy(window, gap: int) -> float:
    """The experiment the exercise asks for, each model trained once per process (about 0.2 s)."""
    return window_copy_accuracy(window, gap=gap)


#: The trained cases: (gap, windows in the order given). The check's reference runs first and
#: trains the models; the learner's calls then read the cache and cost nothing of its time limit.
TRAINED_GAPS = ((3, tuple(range(1, 7))), (2, (4, 1, 3, 2)))


def _window_conclusion(cases: list, expected: list) -> str:
    """After a pass: the rule also held on trained copies; the answer itself is left to the learner's run."""
    return (f"Your rule also finds the right window on {len(TRAINED_GAPS)} copies trained with different gaps. "
            f"Now run the experiment at gaps 1, 2 and 3 and compare its answers with your prediction.")


def _window_cases() -> list[Case]:
    step = {w: (1.0 if w > 3 else 1 / 64) for w in range(1, 9)}  # the copy at a gap of 3: solved from w = 4
    ramp = {w: min(1.0, w / 32) for w in (2, 4, 8, 16, 24, 32)}  # recall: accuracy follows the covered share
    bumpy = {1: 0.1, 2: 0.97, 3: 0.5, 4: 0.98, 5: 0.99}  # trained accuracies need not rise with the window
    cases = [
        ("the copy at a gap of 3, windows 1-8", step, 1.0, list(range(1, 9)), 0.05),
        ("windows in no order", step, 1.0, [8, 2, 6, 4, 5, 1], 0.05),
        ("recall: only the full length comes close", ramp, 0.99, [2, 4, 8, 16, 24, 32], 0.05),
        ("no window is enough (answer 0)", {2: 0.1, 4: 0.3, 8: 0.5}, 0.99, [2, 4, 8], 0.05),
        ("no window is enough, and the best is not the largest", {2: 0.36, 4: 0.5, 8: 0.4}, 0.99, [2, 4, 8], 0.05),
        ("exactly full minus the margin counts", {1: 0.5, 2: 0.75, 3: 1.0}, 1.0, [1, 2, 3], 0.25),
        ("full attention unlucky (0.6): compare with it, not with 1", {1: 0.02, 2: 0.58, 3: 0.6}, 0.6, [1, 2, 3], 0.05),
        ("the margin is absolute: 0.56 passes against 0.6 with margin 0.05", {1: 0.3, 2: 0.56, 3: 0.6}, 0.6,
         [1, 2, 3], 0.05),
        ("a window beats full attention", {1: 0.1, 2: 0.9, 3: 0.95}, 0.5, [1, 2, 3], 0.05),
        ("the smallest window already passes", {2: 0.97, 3: 1.0, 5: 1.0}, 1.0, [5, 3, 2], 0.05),
        ("a sweep that does not rise: 2 passes, 3 fails, 4 and 5 pass", bumpy, 0.99, [1, 2, 3, 4, 5], 0.05),
    ]
    return [Case(label, (_table_run(table, full, label), windows, margin)) for label, table, full, windows, margin
            in cases] + [
        Case(f"the trained copy at a gap of {gap}, windows {list(ws)}",
             (_Run(functools.partial(_trained_copy, gap=gap), ws, f"the trained copy at a gap of {gap}"), list(ws), 0.05))
        for gap, ws in TRAINED_GAPS]


def _accuracies(run, windows) -> dict:
    return {int(w): run(w) for w in windows}  # one call per window


def _smallest(good) -> int:
    return int(min(good)) if good else 0


def _largest(windows) -> int:
    return int(max(windows)) if windows else 0


def _w_threshold(passes, pick=_smallest):
    """A rule that keeps the windows ``passes(accuracy, full, margin)`` and returns the smallest (or ``pick``)."""
    def f(run, windows, margin):
        full, acc = run(None), _accuracies(run, windows)
        return pick([w for w, a in acc.items() if passes(a, full, margin)])
    return f


def _w_first_listed(run, windows, margin):
    full = run(None)
    return next((int(w) for w in windows if run(w) >= full - margin), 0)


def _w_best_window(run, windows, margin):
    acc = _accuracies(run, windows)
    best = max(acc.values())
    return _smallest([w for w, a in acc.items() if a >= best - margin])


def _w_largest_when_none(run, windows, margin):
    answer = _window_reference(run, windows, margin)
    return answer if answer else int(max(windows))


def _w_scan_down(run, windows, margin):
    """From the largest window down, stopping at the first that fails: right only if accuracy rises with w."""
    full, answer = run(None), 0
    for w in sorted(windows, reverse=True):
        if run(w) < full - margin:
            break
        answer = int(w)
    return answer


def _w_index(run, windows, margin):
    answer = _window_reference(run, windows, margin)
    return list(windows).index(answer) if answer else 0  # its position in the list, not the window


def _w_largest_as_full(run, windows, margin):
    acc = _accuracies(run, windows)
    full = acc[max(acc)]  # the largest window's accuracy in place of full attention's
    return _smallest([w for w, a in acc.items() if a >= full - margin])


def _w_skips_first(run, windows, margin):
    ws = sorted(windows)
    full = run(None)
    return next((int(w) for w in ws[1:] if run(w) >= full - margin), 0)


def _w_previous(run, windows, margin):
    ws, full, prev = sorted(windows), run(None), 0
    for w in ws:
        if run(w) >= full - margin:
            return int(prev) if prev else int(w)
        prev = w
    return 0


def _w_loop(run, windows, margin):
    full, answer = run(None), 0
    for w in sorted(windows):
        if run(w) >= full - margin:
            answer = int(w)
            break
    return answer


def _w_numpy(run, windows, margin):
    ws = np.sort(np.asarray(list(windows)))
    ok = np.array([run(int(w)) for w in ws]) >= run(None) - margin
    return int(ws[ok][0]) if ok.any() else 0


def _w_rerun_full(run, windows, margin):
    """Right answers, but run(None) trained again for every window."""
    for w in sorted(windows):
        if run(w) >= run(None) - margin:
            return int(w)
    return 0


def _run_twice(args) -> str | None:
    """The rule of use: run(None) once, each run(w) at most once (each call trains a model)."""
    run = args[0]
    again = {w: n for w, n in getattr(run, "calls", {}).items() if n > 1}
    if not again:
        return None
    w, n = next(iter(again.items()))
    return (f"your answers are right, but you called run({w!r}) {n} times: each call trains a model, so call "
            f"run(None) once and each run(w) at most once, and keep the values")


def _window_structure(got, expected, args) -> str | None:
    if got is None and expected == 0:
        return "When no window passes, the answer is 0, not None: return 0."
    if isinstance(got, float) and 0.0 <= got <= 1.0:
        return ("That looks like an accuracy: return the window itself, the w from windows (an int), or 0 if "
                "none passes.")
    return None


register(Exercise(
        id="window-sweep",
        title="Find the smallest window that solves the task",
        make_cases=_window_cases,
        reference=_window_reference,
        mutants=(
            Mutant("strict", _w_threshold(lambda a, full, m: a > full - m),
                   "a window whose accuracy is exactly full attention's minus the margin counts as solving "
                   "the task: use >=, not >."),
            Mutant("no-margin", _w_threshold(lambda a, full, m: a >= full),
                   "you left out the margin: a window passes when its accuracy is at least full attention's "
                   "MINUS the margin, run(w) >= run(None) - margin."),
            Mutant("margin-added", _w_threshold(lambda a, full, m: a >= full + m),
                   "you added the margin; a window passes when it loses at most the margin: "
                   "run(w) >= run(None) - margin."),
            Mutant("relative-margin", _w_threshold(lambda a, full, m: a >= full * (1 - m)),
                   "you applied the margin as a fraction of full attention's accuracy, full * (1 - margin); it is "
                   "an absolute amount of accuracy: run(w) >= run(None) - margin (0.55 passes against 0.6 with "
                   "a margin of 0.05)."),
            Mutant("absolute", _w_threshold(lambda a, full, m: a >= 1 - m),
                   "compare each window with full attention, run(None), not with a perfect score of 1: "
                   "the question is whether the window loses anything against all pairs."),
            Mutant("first-listed", _w_first_listed,
                   "you returned the first window that passes in the order given; the windows may come in any "
                   "order, and the question asks for the smallest one that passes."),
            Mutant("best-window", _w_best_window,
                   "you compared with the best window in the list, not with full attention, run(None): if no "
                   "window is enough, the best of them still passes that test."),
            Mutant("two-sided", _w_threshold(lambda a, full, m: abs(a - full) <= m),
                   "a window that scores more than full attention also solves the task: keep every window with "
                   "accuracy >= full - margin, not only those within the margin on both sides."),
            Mutant("last-failing", _w_threshold(lambda a, full, m: a < full - m, _largest),
                   "that is the largest window that fails; the answer is the smallest window that passes."),
            Mutant("window-before-the-answer", _w_previous,
                   "that is the window just before the answer in sorted order, the last one that fails below it; "
                   "return the smallest window that passes itself."),
            Mutant("largest", _w_threshold(lambda a, full, m: a >= full - m, _largest),
                   "that is the largest window that passes: return the smallest one."),
            Mutant("largest-when-none-passes", _w_largest_when_none,
                   "when no window passes you returned the largest window; the statement asks for 0 then."),
            Mutant("scan-down", _w_scan_down,
                   "you walked down from the largest window and stopped at the first that fails, which assumes "
                   "accuracy rises with the window; trained accuracies need not (2 may pass where 3 fails): test "
                   "every window and return the smallest that passes."),
            Mutant("index-not-window", _w_index,
                   "that is the position of the answer in the list windows, not the window: return the w itself "
                   "(windows may be 2, 4, 8, ..., in any order)."),
            Mutant("largest-window-as-full", _w_largest_as_full,
                   "you compared with the largest window's accuracy in place of full attention's; call run(None) "
                   "for full attention, which sees every position."),
            Mutant("smallest-window-skipped", _w_skips_first,
                   "you never tried the smallest window (a loop that starts at index 1): test every window."),
        ),
        alternatives=(_w_loop, _w_numpy),
        rules=(
            Rule("threshold", "accuracy exactly full attention's minus the margin counts",
                 ("exactly full minus the margin counts",),
                 lambda run, windows, margin: any(run.accuracy(w) == run.accuracy(None) - margin for w in windows),
                 ("strict",), quote="at least full attention's minus `margin`"),
            Rule("threshold", "the margin is measured from full attention, not from 1",
                 ("full attention unlucky (0.6): compare with it, not with 1",),
                 lambda run, windows, margin: run.accuracy(None) < 1 - margin, ("absolute", "no-margin"),
                 quote="whose accuracy is at least full attention's"),
            Rule("threshold", "the margin is an absolute amount of accuracy",
                 ("the margin is absolute: 0.56 passes against 0.6 with margin 0.05",),
                 lambda run, windows, margin: any(run.accuracy(None) - margin <= run.accuracy(w)
                                                  < run.accuracy(None) * (1 - margin) for w in windows),
                 ("relative-margin", "margin-added"),
                 quote="full attention's minus `margin`"),
            Rule("empty", "no window is enough: the answer is 0",
                 ("no window is enough (answer 0)", "no window is enough, and the best is not the largest"),
                 lambda run, windows, margin: all(run.accuracy(w) < run.accuracy(None) - margin for w in windows),
                 ("best-window", "last-failing", "largest-when-none-passes", "largest-window-as-full"),
                 quote="or `0` if none passes"),
            Rule("range", "a window may score above full attention",
                 ("a window beats full attention",),
                 lambda run, windows, margin: any(run.accuracy(w) > run.accuracy(None) + margin for w in windows),
                 ("two-sided",), quote="at least full attention's"),
            Rule("edge-size", "windows in any order",
                 ("windows in no order", "the smallest window already passes"),
                 lambda run, windows, margin: list(windows) != sorted(windows), ("first-listed", "smallest-window-skipped"),
                 quote="the smallest window in `windows`"),
            Rule("range", "accuracies need not rise with the window",
                 ("a sweep that does not rise: 2 passes, 3 fails, 4 and 5 pass",),
                 lambda run, windows, margin: any(run.accuracy(a) > run.accuracy(b) + margin
                                                  for a, b in zip(sorted(windows), sorted(windows)[1:])),
                 ("scan-down", "largest", "last-failing"), quote="the smallest window in `windows`"),
            Rule("output", "an int taken from windows, or 0",
                 ("recall: only the full length comes close",), lambda *a: True,
                 quote="as an `int` taken from `windows`",
                 breaches=(Breach("the-accuracy", lambda run, ws, m: (lambda full, acc: next(
                     (a for w, a in sorted(acc.items()) if a >= full - m), 0.0))(run(None), _accuracies(run, ws)),
                                  "That looks like an accuracy"),
                           Breach("none-when-none-passes", lambda run, ws, m: _w_loop(run, ws, m) or None,
                                  "return 0"))),
            Rule("forbidden", "run(None) once, run(w) at most once per window",
                 ("the copy at a gap of 3, windows 1-8",), lambda *a: True,
                 quote="call `run(None)` once and `run(w)` at most once per window",
                 breaches=(Breach("full-attention-rerun", _w_rerun_full, "each call trains a model"),)),
        ),
        structure_hint=_window_structure,
        usage=_run_twice,
        error_tips=(("empty sequence", " Tip: when no window passes the answer is 0: min(good, default=0)."),),
        framing=("A copy at a gap of", "Predict the smallest window that copies",
                 "Write `my_smallest_window(run, windows, margin)`", "`run(w)` trains softmax attention",
                 "Run it at each gap", "Does your prediction hold?"),
        difficulty=1,
        minutes=15,
        passed_note=_window_conclusion,
    ))

EXERCISES = ("hopfield-retrieval", "window-sweep")
