"""Chapter 7 exercise: run the memory experiment yourself, one retrieval step and its exact-retrieval share.

``hopfield-retrieval``: ``fn(X, queries, clean, beta) -> float``. ``X`` (d, M) holds the stored +-1
patterns as columns, ``queries`` (d, n) the corrupted queries, ``clean`` (d, n) the patterns they
came from. One step of softmax attention, :math:`\\xi \\leftarrow X \\operatorname{softmax}(\\beta X^\\top \\xi)`
(the softmax over the M stored patterns), then ``sign``; the result is the share of the n queries whose
every sign comes out right. ``beta=None`` means the outer-product memory, :math:`X X^\\top \\xi`.
The learner then uses it to find the capacity at d = 16 and checks the chapter's conclusion.
"""

from __future__ import annotations

import numpy as np
import torch

from ...exercises._core import Case, Exercise, Mutant, Rule, register
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

EXERCISES = ("hopfield-retrieval",)
