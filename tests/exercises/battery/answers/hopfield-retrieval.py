"""Blind battery for exercise `hopfield-retrieval` (my_retrieval_share(X, queries, clean, beta)).

The statement does not name the array type; the chapter's experiment is "numpy, float64", so the
answers take numpy arrays (np.asarray also accepts CPU torch tensors) and return a Python float.
A zero in the retrieved vector counts as a wrong sign (np.sign(0) = 0 is neither +1 nor -1).
"""
import math

import numpy as np


def _softmax_cols(S):
    S = S - S.max(axis=0, keepdims=True)
    E = np.exp(S)
    return E / E.sum(axis=0, keepdims=True)


# --------------------------------------------------------------------------- correct answers
def correct_1(X, queries, clean, beta):
    """Style: vectorised numpy, column-wise stable softmax, np.all over the d signs, mean over queries."""
    X, Q, C = (np.asarray(a, dtype=float) for a in (X, queries, clean))
    if beta is None:
        new = X @ (X.T @ Q)
    else:
        new = X @ _softmax_cols(beta * (X.T @ Q))
    return float(np.mean(np.all(np.sign(new) == C, axis=0)))


def correct_2(X, queries, clean, beta):
    """Style: explicit loop over the n queries, one (M,) softmax per query."""
    X, Q, C = (np.asarray(a, dtype=float) for a in (X, queries, clean))
    n = Q.shape[1]
    hits = 0
    for j in range(n):
        xi = Q[:, j]
        s = X.T @ xi
        if beta is None:
            out = X @ s
        else:
            z = beta * s
            p = np.exp(z - z.max())
            out = X @ (p / p.sum())
        if np.array_equal(np.sign(out), C[:, j]):
            hits += 1
    return hits / n


def correct_3(X, queries, clean, beta):
    """Style: einsum with log-sum-exp normalisation of the (M, n) weights."""
    X, Q, C = (np.asarray(a, dtype=float) for a in (X, queries, clean))
    S = np.einsum("dm,dn->mn", X, Q)
    if beta is None:
        W = S
    else:
        Z = beta * S
        mx = Z.max(axis=0, keepdims=True)
        lse = mx + np.log(np.exp(Z - mx).sum(axis=0, keepdims=True))
        W = np.exp(Z - lse)
    out = np.einsum("dm,mn->dn", X, W)
    right = (np.sign(out) == C).sum(axis=0) == X.shape[0]
    return float(right.sum() / Q.shape[1])


def correct_4(X, queries, clean, beta):
    """Style: pure Python lists and math.exp (no numpy linear algebra), query by query."""
    X, Q, C = (np.asarray(a, dtype=float).tolist() for a in (X, queries, clean))
    d, M, n = len(X), len(X[0]), len(Q[0])
    ok = 0
    for j in range(n):
        s = [sum(X[i][m] * Q[i][j] for i in range(d)) for m in range(M)]
        if beta is None:
            w = s
        else:
            top = max(beta * v for v in s)
            e = [math.exp(beta * v - top) for v in s]
            tot = sum(e)
            w = [v / tot for v in e]
        good = True
        for i in range(d):
            y = sum(X[i][m] * w[m] for m in range(M))
            sign = (y > 0) - (y < 0)
            if sign != C[i][j]:
                good = False
                break
        ok += good
    return ok / n


def correct_5(X, queries, clean, beta):
    """Style: outer-product memory as an explicit d x d matrix X X^T; softmax via scipy-free exp of shifted scores along axis 0 with keepdims."""
    X, Q, C = (np.asarray(a, dtype=float) for a in (X, queries, clean))
    if beta is None:
        W = X @ X.T  # the whole memory is one d x d matrix
        new = W @ Q
    else:
        S = beta * X.T @ Q
        P = np.exp(S - S.max(0))
        new = X @ (P / P.sum(0))
    mismatches = np.count_nonzero(np.sign(new) != C, axis=0)
    return float(np.count_nonzero(mismatches == 0) / Q.shape[1])


# --------------------------------------------------------------------------- wrong answers
def _share(X, queries, clean, beta, *, axis=0, scale=1.0, divide=False, stable=True, iterate=1,
           none_as=None, per_sign=False, any_=False, target=None, zero_plus=False, no_sign=False):
    X, Q, C = (np.asarray(a, dtype=float) for a in (X, queries, clean))
    if beta is None and none_as is not None:
        beta = none_as
    xi = Q
    for _ in range(iterate):
        if beta is None:
            new = X @ (X.T @ xi)
        else:
            S = (X.T @ xi) / beta if divide else beta * (X.T @ xi)
            S = S * scale
            if stable:
                S = S - S.max(axis=axis, keepdims=True)
            E = np.exp(S)
            new = X @ (E / E.sum(axis=axis, keepdims=True))
        xi = np.where(new >= 0, 1.0, -1.0) if zero_plus else (new if no_sign else np.sign(new))
    ref = Q if target == "queries" else C
    right = xi == ref
    if per_sign:
        return float(right.mean())
    return float((right.any(axis=0) if any_ else right.all(axis=0)).mean())


def wrong_1(X, queries, clean, beta):
    """Takes the softmax over the n queries (axis 1) instead of over the M stored patterns."""
    return _share(X, queries, clean, beta, axis=1)


def wrong_2(X, queries, clean, beta):
    """Treats beta=None as beta=1 (softmax) instead of switching to the outer-product memory."""
    return _share(X, queries, clean, beta, none_as=1.0)


def wrong_3(X, queries, clean, beta):
    """Tests `if not beta`, so beta = 0 falls into the outer-product branch instead of the (uniform) softmax."""
    return _share(X, queries, clean, None if not beta else beta)


def wrong_4(X, queries, clean, beta):
    """Returns the share of correct signs over all d*n entries instead of the share of queries with every sign right."""
    return _share(X, queries, clean, beta, per_sign=True)


def wrong_5(X, queries, clean, beta):
    """Counts a query as retrieved when any sign is right (np.any) instead of every sign."""
    return _share(X, queries, clean, beta, any_=True)


def wrong_6(X, queries, clean, beta):
    """Compares the retrieved signs with the corrupted queries instead of the clean stored patterns."""
    return _share(X, queries, clean, beta, target="queries")


def wrong_7(X, queries, clean, beta):
    """Returns the number of retrieved queries instead of their share."""
    X, Q, C = (np.asarray(a, dtype=float) for a in (X, queries, clean))
    return _share(X, Q, C, beta) * Q.shape[1]


def wrong_8(X, queries, clean, beta):
    """Returns the per-query boolean array instead of the share (a scalar)."""
    X, Q, C = (np.asarray(a, dtype=float) for a in (X, queries, clean))
    new = X @ (X.T @ Q) if beta is None else X @ _softmax_cols(beta * (X.T @ Q))
    return np.all(np.sign(new) == C, axis=0)


def wrong_9(X, queries, clean, beta):
    """Forgets to take signs: compares the continuous update with the +-1 pattern."""
    return _share(X, queries, clean, beta, no_sign=True)


def wrong_10(X, queries, clean, beta):
    """Divides the scores by beta (a temperature) instead of multiplying by it."""
    return _share(X, queries, clean, beta, divide=True)


def wrong_11(X, queries, clean, beta):
    """Adds attention's 1/sqrt(d) on top of beta: softmax(beta X^T xi / sqrt(d))."""
    d = np.asarray(X).shape[0]
    return _share(X, queries, clean, beta, scale=1.0 / math.sqrt(d))


def wrong_12(X, queries, clean, beta):
    """Iterates the update several times (towards a fixed point) instead of applying one step."""
    return _share(X, queries, clean, beta, iterate=5)


def wrong_13(X, queries, clean, beta):
    """Softmax without subtracting the maximum: exp overflows (inf/inf = NaN) for large beta."""
    return _share(X, queries, clean, beta, stable=False)


def wrong_14(X, queries, clean, beta):
    """Maps a zero component to +1 (np.where(v >= 0, 1, -1)), counting an undecided tie as a right sign."""
    return _share(X, queries, clean, beta, zero_plus=True)


def wrong_15(X, queries, clean, beta):
    """Returns the share as a percentage (0-100) instead of a fraction."""
    return 100.0 * _share(X, queries, clean, beta)


def wrong_16(X, queries, clean, beta):
    """Applies np.all over axis 1 (each feature across the n queries) instead of axis 0 (each query's d signs)."""
    X, Q, C = (np.asarray(a, dtype=float) for a in (X, queries, clean))
    new = X @ (X.T @ Q) if beta is None else X @ _softmax_cols(beta * (X.T @ Q))
    return float(np.mean(np.all(np.sign(new) == C, axis=1)))


ANSWERS = [
    ("correct_1", correct_1, "correct", "vectorised numpy, stable column softmax"),
    ("correct_2", correct_2, "correct", "loop over queries"),
    ("correct_3", correct_3, "correct", "einsum with log-sum-exp"),
    ("correct_4", correct_4, "correct", "pure Python lists and math.exp"),
    ("correct_5", correct_5, "correct", "explicit d x d outer-product matrix, count_nonzero"),
    ("wrong_1", wrong_1, "wrong", "softmax over the queries axis instead of the M patterns"),
    ("wrong_2", wrong_2, "wrong", "beta=None treated as beta=1"),
    ("wrong_3", wrong_3, "wrong", "`if not beta`: beta=0 treated as the outer product"),
    ("wrong_4", wrong_4, "wrong", "share of correct signs instead of share of exact queries"),
    ("wrong_5", wrong_5, "wrong", "any sign right instead of every sign"),
    ("wrong_6", wrong_6, "wrong", "compared with the corrupted queries instead of clean"),
    ("wrong_7", wrong_7, "wrong", "count instead of share"),
    ("wrong_8", wrong_8, "wrong", "per-query boolean array instead of a scalar"),
    ("wrong_9", wrong_9, "wrong", "no sign taken"),
    ("wrong_10", wrong_10, "wrong", "scores divided by beta"),
    ("wrong_11", wrong_11, "wrong", "extra 1/sqrt(d) scaling"),
    ("wrong_12", wrong_12, "wrong", "several update steps instead of one"),
    ("wrong_13", wrong_13, "wrong", "unstable softmax (overflow for large beta)"),
    ("wrong_14", wrong_14, "wrong", "sign of 0 taken as +1"),
    ("wrong_15", wrong_15, "wrong", "percentage instead of fraction"),
    ("wrong_16", wrong_16, "wrong", "all() over the wrong axis (per feature row instead of per query column)"),
]
