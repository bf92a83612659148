"""Chapter 7 exercises: run the memory experiment yourself, and find the smallest window that solves a copy.

``hopfield-retrieval``: ``fn(X, queries, clean, beta) -> float``. ``X`` (d, M) holds the stored +-1
patterns as columns, ``queries`` (d, n) the corrupted queries, ``clean`` (d, n) the patterns they
came from. One step of softmax attention, :math:`\\xi \\leftarrow X \\operatorname{softmax}(\\beta X^\\top \\xi)`
(the softmax over the M stored patterns), then ``sign``; the result is the share of the n queries whose
every sign comes out right. ``beta=None`` means the outer-product memory, :math:`X X^\\top \\xi`.
The learner then uses it to find the capacity at d = 16 and checks the chapter's conclusion.

``window-sweep``: ``fn(run, windows, margin) -> int``. ``run(w)`` is the held-out accuracy of softmax
attention restricted to a causal window of ``w`` positions (``run(None)``: full attention); the result
is the smallest window in ``windows`` whose accuracy is at least full attention's minus ``margin``, or 0
when none is. The learner then runs it on the copy at a gap (:func:`~attention_course.chapters.insight.ablations.window_copy_accuracy`)
and compares the answer with the gap. Beside the tables, the check runs that experiment itself (the
copy at gaps 2 and 3, trained once per process, about 2 s), so the learner's rule is also tested on
the trained accuracies and the feedback states the conclusion: the smallest window is the gap plus one.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from ...exercises._core import Case, Exercise, Mutant, Rule, register
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
    ]


def _softmax(z, axis):
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _mut_axis(X, q, c, beta):
    w = _softmax((1.0 if beta is None else beta) * (X.T @ q), axis=1)  # over the queries, not the patterns
    return float((np.sign(X @ w) == c).all(axis=0).mean()) if beta is not None else _reference(X, q, c, beta)


def _mut_no_beta(X, q, c, beta):
    return _reference(X, q, c, None if beta is None else 1.0)


def _mut_bits(X, q, c, beta):
    return float((np.sign(retrieve(X, q, beta)) == c).mean())


def _mut_argmax(X, q, c, beta):
    if beta is None:
        return _reference(X, q, c, beta)
    return float((X[:, (X.T @ q).argmax(axis=0)] == c).all(axis=0).mean())


def _mut_linear(X, q, c, beta):
    return _reference(X, q, c, None)


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


register(Exercise(
        id="hopfield-retrieval",
        title="Run the memory experiment: the share retrieved exactly",
        make_cases=_cases,
        reference=_reference,
        mutants=(
            Mutant("softmax-over-queries", _mut_axis,
                   "the softmax must run over the M stored patterns (axis 0 of X.T @ queries, shape (M, n)), "
                   "so that each query's weights sum to 1; yours normalise across the queries."),
            Mutant("ignores-beta", _mut_no_beta,
                   "beta is the inverse temperature: multiply the scores X.T @ queries by beta before the softmax."),
            Mutant("share-of-bits", _mut_bits,
                   "that is the share of correct signs. A query counts as retrieved only when every one of its d "
                   "signs is right: use .all(axis=0) over the d rows, then the mean over the queries."),
            Mutant("argmax", _mut_argmax,
                   "you returned the nearest stored pattern (an argmax). One softmax step mixes the patterns by "
                   "their weights, and at a small beta the mix can have wrong signs: compute X @ softmax(...)."),
            Mutant("always-linear", _mut_linear,
                   "with a beta, the memory is softmax attention: X @ softmax(beta * X.T @ queries). Only beta=None "
                   "means the outer-product memory X @ (X.T @ queries)."),
            Mutant("compared-with-query", _mut_query,
                   "compare the retrieved signs with `clean`, the stored patterns, not with the corrupted queries."),
        ),
        alternatives=(_loop, _torch),
        rules=(
            Rule("range", "at a small beta the softmax weights are soft, and one step is not the nearest pattern",
                 ("d=16, 40 patterns, a small beta = 0.05 (soft weights)",),
                 lambda X, q, c, beta: beta is not None and beta <= 0.05, ("argmax", "ignores-beta")),
            Rule("edge-size", "beta=None is the outer-product memory, X X^T",
                 ("d=16, 6 patterns, the outer-product memory (beta=None)",),
                 lambda X, q, c, beta: beta is None, ("compared-with-query",)),
            Rule("threshold", "retrieved means every sign right, not most",
                 ("d=16, 64 patterns, beta=1 (some fail)",),
                 lambda X, q, c, beta: 0 < _reference(X, q, c, beta) < 1,
                 ("share-of-bits", "softmax-over-queries", "always-linear")),
        ),
        difficulty=1,
        minutes=10,
    ))


# ------------------------------------------------------------------ window-sweep
def _window_reference(run, windows, margin):
    full = run(None)
    good = [w for w in windows if run(w) >= full - margin]
    return int(min(good)) if good else 0


def _table_run(table: dict, full: float):
    """A stand-in for training: the accuracy of each window read from a table (full attention: ``full``)."""
    def run(w):
        return full if w is None else float(table[w])
    return run


@functools.lru_cache(maxsize=None)
def _trained_copy(window, gap: int) -> float:
    """The experiment the exercise asks for, each model trained once per process (about 0.2 s)."""
    return window_copy_accuracy(window, gap=gap)


#: The trained cases: (gap, windows in the order given). The check's reference runs first and
#: trains the models; the learner's calls then read the cache and cost nothing of its time limit.
TRAINED_GAPS = ((3, tuple(range(1, 7))), (2, (4, 1, 3, 2)))


def _window_conclusion(cases: list, expected: list) -> str:
    """What the trained cases show: the smallest window that copies is one more than the gap."""
    found = [f"{w} at a gap of {gap}" for (gap, _), w in zip(TRAINED_GAPS, expected[-len(TRAINED_GAPS):])]
    return (f"On the trained copies your rule finds {' and '.join(found)}: a causal window of w positions "
            f"holds the query and the w - 1 before it, so it can copy the token `gap` back only when w > gap.")


def _window_cases() -> list[Case]:
    step = {w: (1.0 if w > 3 else 1 / 64) for w in range(1, 9)}  # the copy at a gap of 3: solved from w = 4
    ramp = {w: min(1.0, w / 32) for w in (2, 4, 8, 16, 24, 32)}  # recall: accuracy follows the covered share
    return [
        Case("the copy at a gap of 3, windows 1-8", (_table_run(step, 1.0), list(range(1, 9)), 0.05)),
        Case("windows in no order", (_table_run(step, 1.0), [8, 2, 6, 4, 5, 1], 0.05)),
        Case("recall: only the full length comes close", (_table_run(ramp, 0.99), [2, 4, 8, 16, 24, 32], 0.05)),
        Case("no window is enough (answer 0)", (_table_run({2: 0.1, 4: 0.3, 8: 0.5}, 0.99), [2, 4, 8], 0.05)),
        Case("exactly full minus the margin counts", (_table_run({1: 0.5, 2: 0.75, 3: 1.0}, 1.0), [1, 2, 3], 0.25)),
        Case("full attention unlucky (0.6): compare with it, not with 1",
             (_table_run({1: 0.02, 2: 0.58, 3: 0.6}, 0.6), [1, 2, 3], 0.05)),
        Case("a window beats full attention", (_table_run({1: 0.1, 2: 0.9, 3: 0.95}, 0.5), [1, 2, 3], 0.05)),
    ] + [Case(f"the trained copy at a gap of {gap}, windows {list(ws)}",
              (functools.partial(_trained_copy, gap=gap), list(ws), 0.05)) for gap, ws in TRAINED_GAPS]


def _w_strict(run, windows, margin):
    full = run(None)
    good = [w for w in windows if run(w) > full - margin]
    return int(min(good)) if good else 0


def _w_absolute(run, windows, margin):
    good = [w for w in windows if run(w) >= 1 - margin]
    return int(min(good)) if good else 0


def _w_first_listed(run, windows, margin):
    full = run(None)
    return next((int(w) for w in windows if run(w) >= full - margin), 0)


def _w_best_window(run, windows, margin):
    best = max(run(w) for w in windows)
    good = [w for w in windows if run(w) >= best - margin]
    return int(min(good)) if good else 0


def _w_two_sided(run, windows, margin):
    full = run(None)
    good = [w for w in windows if abs(run(w) - full) <= margin]
    return int(min(good)) if good else 0


def _w_last_failing(run, windows, margin):
    full = run(None)
    bad = [w for w in windows if run(w) < full - margin]
    return int(max(bad)) if bad else 0


def _w_largest(run, windows, margin):
    full = run(None)
    good = [w for w in windows if run(w) >= full - margin]
    return int(max(good)) if good else 0


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


register(Exercise(
        id="window-sweep",
        title="Find the smallest window that solves the task",
        make_cases=_window_cases,
        reference=_window_reference,
        mutants=(
            Mutant("strict", _w_strict,
                   "a window whose accuracy is exactly full attention's minus the margin counts as solving "
                   "the task: use >=, not >."),
            Mutant("absolute", _w_absolute,
                   "compare each window with full attention, run(None), not with a perfect score of 1: "
                   "the question is whether the window loses anything against all pairs."),
            Mutant("first-listed", _w_first_listed,
                   "you returned the first window that passes in the order given; the windows may come in any "
                   "order, and the question asks for the smallest one that passes."),
            Mutant("best-window", _w_best_window,
                   "you compared with the best window in the list, not with full attention, run(None): if no "
                   "window is enough, the best of them still passes that test."),
            Mutant("two-sided", _w_two_sided,
                   "a window that scores more than full attention also solves the task: keep every window with "
                   "accuracy >= full - margin, not only those within the margin on both sides."),
            Mutant("last-failing", _w_last_failing,
                   "that is the largest window that fails; the answer is the smallest window that passes."),
            Mutant("largest", _w_largest,
                   "that is the largest window that passes (every window longer than the answer passes too): "
                   "return the smallest one."),
        ),
        alternatives=(_w_loop, _w_numpy),
        rules=(
            Rule("threshold", "accuracy exactly full attention's minus the margin counts",
                 ("exactly full minus the margin counts",),
                 lambda run, windows, margin: any(run(w) == run(None) - margin for w in windows), ("strict",)),
            Rule("threshold", "the margin is measured from full attention, not from 1",
                 ("full attention unlucky (0.6): compare with it, not with 1",),
                 lambda run, windows, margin: run(None) < 1 - margin, ("absolute",)),
            Rule("empty", "no window is enough: the answer is 0",
                 ("no window is enough (answer 0)",),
                 lambda run, windows, margin: all(run(w) < run(None) - margin for w in windows),
                 ("best-window", "last-failing")),
            Rule("range", "a window may score above full attention",
                 ("a window beats full attention",),
                 lambda run, windows, margin: any(run(w) > run(None) + margin for w in windows), ("two-sided",)),
            Rule("edge-size", "windows in any order",
                 ("windows in no order",),
                 lambda run, windows, margin: list(windows) != sorted(windows), ("first-listed",)),
        ),
        difficulty=1,
        minutes=10,
        passed_note=_window_conclusion,
    ))

EXERCISES = ("hopfield-retrieval", "window-sweep")
