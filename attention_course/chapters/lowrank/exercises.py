"""Chapter 3 exercises: effective rank, best rank-k, rank-k vs top-k, linear attention, online softmax.

Each exercise lists its typical mistakes (mutants) with their feedback, and its rules with the cases on them.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import torch

from ...core import efficient as eff
from . import spectra as lr
from . import baselines as lb
from ...exercises._core import Case, Exercise, in_place_rule, Mutant, output_rule, register, Rule

__all__ = ["EXERCISES"]



# ----------------------------------------------------------- effective rank
def _erank_cases() -> list[Case]:
    rng = np.random.default_rng(31)
    return [
        Case("random 6x6", (rng.normal(size=(6, 6)),)),
        Case("rectangular 4x7", (rng.normal(size=(4, 7)),)),
        Case("identity 5x5", (np.eye(5),)),
        Case("rank 1", (np.outer(rng.normal(size=5), rng.normal(size=5)),)),
        Case("singular: two zero singular values", (np.diag([3.0, 1.0, 0.5, 0.0, 0.0]),)),
        Case("attention matrix, beta = 2", (lr.synthetic_attention(n=16, d=4, beta=2.0, seed=3),)),
    ]


def _erank_with(p_fn, log=np.log, use_exp=True):
    def f(A):
        s = np.linalg.svd(A, compute_uv=False)
        p = p_fn(s)
        p = p[p > 0]
        h = -(p * log(p)).sum()
        return float(np.exp(h)) if use_exp else float(h)

    return f


def _erank_unfiltered(A):
    s = np.linalg.svd(A, compute_uv=False)
    p = s / s.sum()
    return float(np.exp(-(p * np.log(p)).sum()))  # 0 * log(0) = NaN


def _erank_nan_hint(got, expected, args):
    if np.isnan(np.asarray(got, dtype=float)).any():
        return "you got NaN: a zero singular value gives 0 * log(0). Count 0 log 0 as 0 (keep only p > 0)"
    return None


register(
    Exercise(
        id="effective-rank",
        title="Entropy effective rank",
        make_cases=_erank_cases,
        reference=lambda A: lr.effective_rank(A),
        mutants=(
            Mutant(
                "squared", _erank_with(lambda s: s**2 / (s**2).sum()),
                "you normalised the squared singular values (energies). Roy & Vetterli's effective "
                "rank uses p_i = sigma_i / sum_j sigma_j.",
            ),
            Mutant(
                "no-exp", _erank_with(lambda s: s / s.sum(), use_exp=False),
                "that is the entropy H of the spectrum; the effective rank is exp(H).",
            ),
            Mutant(
                "log2", _erank_with(lambda s: s / s.sum(), log=np.log2),
                "you mixed bases: with log2 in the entropy, the rank is 2**H. Use np.log with np.exp.",
            ),
            Mutant(
                "max-normalised", _erank_with(lambda s: s / s.max()),
                "p must be a probability distribution: divide the singular values by their sum, "
                "not by the largest one.",
            ),
            Mutant(
                "matrix-rank", lambda A: float(np.linalg.matrix_rank(A)),
                "that counts the nonzero singular values. The effective rank weighs them by size, "
                "through the entropy of p_i = sigma_i / sum_j sigma_j, so it is rarely an integer.",
            ),
            Mutant(
                "zero-log-zero", _erank_unfiltered,
                "you got NaN for a matrix with a zero singular value: there p log p is 0 * log(0) = "
                "0 * (-inf) = NaN. Count 0 log 0 as 0: keep only p > 0 before taking logs.",
            ),
        ),
        hints=(_erank_nan_hint,),
        alternatives=(
            lambda A: float(torch.exp(torch.special.entr(
                torch.linalg.svdvals(torch.as_tensor(A)) / torch.linalg.svdvals(torch.as_tensor(A)).sum()
            ).sum())),
            lambda A: float(np.exp(-sum(p * np.log(p) for p in
                                        np.linalg.svd(A, compute_uv=False) / np.linalg.svd(A, compute_uv=False).sum()
                                        if p > 0))),
        ),
        rtol=1e-6,
        rules=(
            Rule("range", "a zero singular value contributes 0 log 0 = 0",
                 ("singular: two zero singular values",), lambda A: np.linalg.svd(A, compute_uv=False).min() == 0,
                 ("zero-log-zero",), quote='A zero singular value contributes $0 \\log 0 = 0$'),
            Rule("edge-size", "the identity n x n has effective rank n, a rank-1 matrix 1",
                 ("identity 5x5", "rank 1"),
                 lambda A: np.array_equal(A, np.eye(len(A))) or np.linalg.matrix_rank(A) == 1, ("no-exp", "log2"), quote='the $n \\times n$ identity has effective rank $n$ and a rank-1 matrix has 1'),
            Rule("edge-size", "a rectangular matrix: min(R, C) singular values",
                 ("rectangular 4x7",), lambda A: A.shape[0] != A.shape[1], ("squared", "max-normalised"), quote='for a matrix `A` of shape `(R, C)`'),
            output_rule('a real float', 'random 6x6', 'as a (real) float', lambda A: lr.effective_rank(A),
                        'array-for-number'),
            in_place_rule('random 6x6', lambda A: lr.effective_rank(A)),
        ),
        framing=('Write `my_effective_rank(A)`', 'Compute its singular values', '`A` is never the all-zero matrix'),
        difficulty=1,
        minutes=8,
    )
)


# ------------------------------------------------------------- best rank k
def _rank_k_cases() -> list[Case]:
    rng = np.random.default_rng(32)
    return [
        Case("5x4, k=2", (rng.normal(size=(5, 4)), 2)),
        Case("3x6, k=1", (rng.normal(size=(3, 6)), 1)),
        Case("k=0", (rng.normal(size=(4, 4)), 0)),
        Case("k = full rank", (rng.normal(size=(4, 3)), 3)),
        Case("attention matrix 12x12, k=3", (lr.synthetic_attention(n=12, d=4, beta=1.0, seed=5), 3)),
    ]


def _rank_k_with(select):
    def f(A, k):
        U, s, Vh = np.linalg.svd(A, full_matrices=False)
        idx = select(len(s), k)
        return (U[:, idx] * s[idx]) @ Vh[idx]

    return f


def _vh_columns(got, expected, args) -> Optional[str]:
    """Advice for a result with min(R, C) columns where A has C: the columns Vh[:, :k] taken for its rows."""
    A, k = args
    shape = np.shape(got)
    if shape != np.shape(A) and shape == (A.shape[0], min(A.shape)):
        return ("numpy's svd returns Vh = V^T, whose ROWS are the right singular vectors: Vh[:, :k].T takes "
                "its first k columns instead, (k, min(R, C)), hence min(R, C) columns. Use the rows Vh[:k], (k, C).")
    return None


register(
    Exercise(
        id="best-rank-k",
        title="The best rank-k approximation",
        make_cases=_rank_k_cases,
        reference=lambda A, k: lr.best_rank_k(A, k),
        mutants=(
            Mutant(
                "smallest", _rank_k_with(lambda r, k: np.arange(r - k, r)),
                "you kept the k smallest singular values. numpy.linalg.svd returns them in "
                "decreasing order, so keep the first k: U[:, :k], s[:k], Vh[:k].",
            ),
            Mutant(
                "no-sigma",
                lambda A, k: (lambda U, s, Vh: U[:, :k] @ Vh[:k])(*np.linalg.svd(A, full_matrices=False)),
                "you dropped the singular values: A_k = U_k diag(s_k) V_k^T, so scale U's "
                "columns by s[:k] (U[:, :k] * s[:k]).",
            ),
            Mutant(
                "off-by-one", _rank_k_with(lambda r, k: np.arange(min(k + 1, r))),
                "off by one: keep exactly k singular values (s[:k]), not k + 1.",
            ),
            Mutant(
                "top-k-entries", lambda A, k: lr.topk_sparsify(A, k),
                "that keeps the k largest entries of each row: a sparse approximation, not a low-rank "
                "one. Use the SVD and keep the k largest singular values.",
            ),
            Mutant(
                "V-transposed",
                lambda A, k: (lambda U, s, Vh: (U[:, :k] * s[:k]) @ Vh.T[:k])(*np.linalg.svd(A)),
                "numpy's svd returns Vh = V^T, whose ROWS are the right singular vectors: use Vh[:k], "
                "not Vh.T[:k].",
            ),
            Mutant(
                "sigma-squared", lambda A, k: (lambda U, s, Vh: (U[:, :k] * s[:k] ** 2) @ Vh[:k])(
                    *np.linalg.svd(A, full_matrices=False)),
                "you squared the singular values: A_k = U_k diag(s_k) V_k^T uses them as they are.",
            ),
        ),
        alternatives=(
            lambda A, k: sum(
                (s_i * np.outer(u_i, v_i) for u_i, s_i, v_i in
                 zip(np.linalg.svd(A)[0].T[:k], np.linalg.svd(A)[1][:k], np.linalg.svd(A)[2][:k])),
                np.zeros_like(A),
            ),
            lambda A, k: (lambda U, s, Vh: (U[:, :k] @ torch.diag(s[:k]) @ Vh[:k]).numpy())(
                *torch.linalg.svd(torch.as_tensor(A), full_matrices=False)),
        ),
        atol=1e-10,
        hints=(lambda got, exp, args: "k = 0 keeps no singular value: the result is a matrix of zeros"
               if args[1] == 0 and np.any(np.asarray(got, dtype=float) != 0) else None,),
        rules=(
            Rule("edge-size", "k = 0 keeps nothing: a matrix of zeros",
                 ("k=0",), lambda A, k: k == 0, ("off-by-one",), quote='`k` runs from 0, which gives zeros'),
            Rule("edge-size", "k = the full rank gives A back",
                 ("k = full rank",), lambda A, k: k >= min(A.shape), ("no-sigma", "V-transposed", "sigma-squared"), quote='to $\\min(R, C)$, which gives `A` back'),
            Rule("edge-size", "rectangular A, R > C and R < C: the result has A's shape",
                 ("5x4, k=2", "3x6, k=1"), lambda A, k: A.shape[0] != A.shape[1], ("V-transposed", "smallest"), quote='(shape `(R, C)`)'),
            output_rule('a float64 array (R, C)', '5x4, k=2', 'float64 array of shape `(R, C)`',
                        lambda A, k: lr.best_rank_k(A, k), 'float32', 'list'),
            in_place_rule('5x4, k=2', lambda A, k: lr.best_rank_k(A, k)),
        ),
        structure_hint=_vh_columns,
        framing=('Write `my_best_rank_k(A, k)`',),
        difficulty=1,
        minutes=8,
    )
)


# ------------------------------------------------- rank-k vs top-k, fairly
def _rows(a: np.ndarray) -> np.ndarray:
    return a / a.sum(axis=1, keepdims=True)  # rows sum to 1; random jitter leaves no ties for top-k


def _rvt_cases() -> list[Case]:
    rng = np.random.default_rng(33)
    near_perm = _rows(np.eye(12)[rng.permutation(12)] + rng.uniform(0, 0.02, (12, 12)))  # each query: one key
    tied = np.array([[0.4, 0.2, 0.2, 0.1, 0.1],  # k = 2: one of the two 0.2 is kept
                     [0.1, 0.5, 0.2, 0.2, 0.0],
                     [0.3, 0.3, 0.3, 0.1, 0.0],  # three equal weights, two kept
                     [0.05, 0.05, 0.6, 0.25, 0.05],
                     [0.2, 0.1, 0.1, 0.1, 0.5]])
    scores = 1.5 * rng.normal(size=(10, 6))
    return [
        Case("soft synthetic head, beta = 0.2, k = 4", (lr.synthetic_attention(n=32, d=8, beta=0.2, seed=1), 4)),
        Case("synthetic head, beta = 1, k = 4", (lr.synthetic_attention(n=32, d=8, beta=1.0, seed=2), 4)),
        Case("sharp synthetic head, beta = 4, k = 2", (lr.synthetic_attention(n=24, d=8, beta=4.0, seed=3), 2)),
        Case("near-permutation 12x12, k = 1", (near_perm, 1)),
        Case("two-block head 16x16, k = 2", (_rows(np.kron(np.eye(2), np.ones((8, 8))) + rng.uniform(0, 0.05, (16, 16))), 2)),
        Case("k = 0: nothing kept", (lr.synthetic_attention(n=10, d=4, beta=1.0, seed=4), 0)),
        Case("T = 10 queries, S = 6 keys, k = 2", (_rows(np.exp(scores)), 2)),
        Case("T = 4 queries, S = 12 keys, k = 2", (_rows(np.exp(1.5 * rng.normal(size=(4, 12)))), 2)),
        Case("T = 12 queries, S = 4 keys, k = 2", (_rows(np.exp(1.5 * rng.normal(size=(12, 4)))), 2)),
        Case("tied weights at the k-th place, k = 2", (tied, 2)),
        Case("k = S = 8: everything kept, both errors 0", (lr.synthetic_attention(n=8, d=4, beta=1.0, seed=5), 8)),
    ]


def _keep_top(A, k, ties="exact"):
    """A with each row's k largest weights kept; ``ties="all"`` keeps every weight >= the k-th."""
    if ties == "all":
        if k == 0:
            return np.zeros_like(A)
        kth = -np.sort(-A, axis=1)[:, k - 1:k]  # (T, 1) the k-th largest weight of each row
        return np.where(A >= kth, A, 0.0)
    if ties == "minus-k":  # the k largest by A[:, -k:] of an ascending sort: all of them when k = 0
        idx = np.argsort(A, axis=1, kind="stable")[:, -k:]
    elif ties == "smallest":
        idx = np.argsort(A, axis=1, kind="stable")[:, :k]
    else:
        idx = np.argsort(-A, axis=1, kind="stable")[:, :k]
    out = np.zeros_like(A)
    np.put_along_axis(out, idx, np.take_along_axis(A, idx, axis=1), axis=1)
    return out


def _rvt_with(centre="mean-row", norm="fro", top_mult=1, denom="centred", ties="exact", renormalise=False,
              compare=lambda r, e: r < e, rank_of="centred", top_of="A", power=1, tail=0, kept=False,
              budget="same-k"):
    def f(A, k):
        A = np.asarray(A, dtype=float)
        if centre == "mean-row":
            C = A - A.mean(axis=0, keepdims=True)
        elif centre == "row-mean":
            C = A - A.mean(axis=1, keepdims=True)
        else:
            C = A
        nrm = (lambda M: np.linalg.norm(M, 2)) if norm == "spectral" else np.linalg.norm
        D = nrm(C) if denom == "centred" else nrm(A)
        M = C if rank_of == "centred" else A
        U, s, Vh = np.linalg.svd(M, full_matrices=False)
        r = min(k + tail, len(s))  # tail = 1: one singular value too few dropped
        rank_err = nrm((U[:, :k] * s[:k]) @ Vh[:k] if kept else M - (U[:, :r] * s[:r]) @ Vh[:r]) / D
        if r >= min(M.shape) and not kept:
            rank_err = 0.0 * rank_err  # nothing left to drop: exactly 0, as the tail of the spectrum is
        X = A if top_of == "A" else C
        T, S = A.shape
        k_top = top_mult * k if budget == "same-k" else int(round(k * (T + S) / (2 * T)))  # 2 k_top T = k (T + S)
        top = _keep_top(X, min(k_top, X.shape[1]), ties)
        if renormalise:
            top = top / top.sum(axis=1, keepdims=True)
        top_err = nrm(top if kept else X - top) / D
        rank_err, top_err = rank_err**power, top_err**power
        return float(rank_err), float(top_err), bool(compare(rank_err, top_err))

    return f


def _rvt_explain(index, expected, args):
    rank_err, topk_err, _ = lb.rank_vs_topk(*args)
    if expected:
        return f"rank_error {rank_err:.6g} is below topk_error {topk_err:.6g}"
    if rank_err == topk_err:
        return f"the two errors are equal ({rank_err:.6g}), and rank_wins asks for rank_error < topk_error"
    return f"rank_error {rank_err:.6g} is not below topk_error {topk_err:.6g}"


def _rvt_hint(got, expected, args):
    A, k = args
    if np.allclose(got[:2], expected[:2], rtol=1e-6, atol=1e-9):
        return None
    if k == 0:
        return ("with k = 0 nothing is kept: rank_error is 1 (the whole of A_bar is lost) and topk_error "
                "is |A|_F / |A_bar|_F (every weight is dropped)")
    if k >= A.shape[1]:
        return ("with k = S everything is kept: both errors are 0 (and rank_wins is False, since 0 is not "
                "below 0)")
    if _tied_at_k(A, k) and np.isclose(got[0], expected[0], rtol=1e-6, atol=1e-9):
        return ("weights tie at the k-th place here: top_k keeps exactly k weights per row (which of the "
                "tied ones does not change the error), no more, no fewer")
    return None


def _tied_at_k(A, k) -> bool:
    desc = -np.sort(-A, axis=1)  # (T, S) each row's weights, largest first
    return 0 < k < A.shape[1] and bool((desc[:, k - 1] == desc[:, k]).any())


register(
    Exercise(
        id="rank-vs-topk",
        title="Rank k against top k, fairly",
        make_cases=_rvt_cases,
        reference=lambda A, k: lb.rank_vs_topk(A, k),
        returns=("rank_error", "topk_error", "rank_wins"),
        explain=_rvt_explain,
        hints=(_rvt_hint,),
        mutants=(
            Mutant(
                "no-centre", _rvt_with(centre="none", denom="raw"),
                "you measured the error on A itself. A soft head is close to the uniform matrix, "
                "which has rank 1 and carries no information: remove the mean row first, "
                "A_bar = A - A.mean(axis=0), and divide both errors by the norm of A_bar.",
            ),
            Mutant(
                "row-mean", _rvt_with(centre="row-mean"),
                "you removed each row's own mean (or the mean of all entries), 1/S for every row of an "
                "attention matrix: that subtracts the uniform matrix, not the mean row. Average over the "
                "queries: A.mean(axis=0).",
            ),
            Mutant(
                "raw-denominator", _rvt_with(denom="raw"),
                "you divided by the norm of A. Divide both errors by the norm of the centred matrix "
                "A_bar, so that recovering only the uniform part scores about 1.",
            ),
            Mutant(
                "spectral", _rvt_with(norm="spectral"),
                "you used the spectral norm (the largest singular value). Measure both errors in the "
                "Frobenius norm, np.linalg.norm(M), the norm in which the SVD truncation is optimal for "
                "all singular values at once.",
            ),
            Mutant(
                "unequal-budget", _rvt_with(top_mult=2),
                "you kept 2k entries per row. Top-k stores a value and an index per kept entry, 2kT "
                "numbers, and rank k stores k(T + S): equal budgets at the same k when T = S.",
            ),
            Mutant(
                "budget-converted", _rvt_with(budget="converted"),
                "you gave top-k its own k, k (T + S) / (2T), to match rank k's storage when T != S; the exercise "
                "compares the two at the same k (the same budget when T = S): keep each row's k largest weights.",
            ),
            Mutant(
                "renormalised", _rvt_with(renormalise=True),
                "you renormalised the kept weights so that each row sums to 1 again. top_k(A) keeps each "
                "row's k largest weights as they are and sets the others to 0 (no renormalisation): the "
                "error measures the weight that was dropped.",
            ),
            Mutant(
                "minus-k-slice", _rvt_with(ties="minus-k"),
                "with k = 0 you kept every weight: a slice [:, -k:] is [:, -0:], the whole row. Keep "
                "nothing when k = 0, for example with np.argsort(-A, axis=1)[:, :k].",
            ),
            Mutant(
                "ties-kept", _rvt_with(ties="all"),
                "when weights tie at the k-th place you kept all of them (A >= the k-th largest), more "
                "than k per row. Keep exactly k (which of the tied ones does not change the error), for "
                "example np.argsort(-A, axis=1, kind='stable')[:, :k].",
            ),
            Mutant(
                "at-most", _rvt_with(compare=lambda r, e: r <= e),
                "when the two errors are equal (both 0 for k = S) rank does not win: rank_wins is "
                "rank_error < topk_error, strictly, not <=.",
            ),
            Mutant(
                "reversed", _rvt_with(compare=lambda r, e: r > e),
                "your two errors are right but rank_wins is reversed: it is True when rank_error is "
                "BELOW topk_error.",
            ),
            Mutant(
                "top-k-of-centred", _rvt_with(top_of="centred"),
                "you applied top-k to the centred matrix A_bar. Top-k sparsifies the attention matrix "
                "itself: keep the k largest weights of each row of A, and measure |A - top_k(A)|.",
            ),
            Mutant(
                "no-sqrt", _rvt_with(power=2),
                "your errors are squared: sum(s[k:] ** 2) / sum(s ** 2) is the share of ENERGY left out. The "
                "errors are ratios of Frobenius norms, the square roots of those sums.",
            ),
            Mutant(
                "singular-values-not-squared", lambda A, k: (lambda r, e, w: (lambda s: (
                    float(s[k:].sum() / s.sum()), e, bool(s[k:].sum() / s.sum() < e)))(
                    np.linalg.svd(A - A.mean(axis=0), compute_uv=False)))(*lb.rank_vs_topk(A, k)),
                "your rank-k error sums the singular values themselves (a nuclear-norm ratio). The "
                "Frobenius norm sums their squares: sqrt(sum(s[k:] ** 2)) / sqrt(sum(s ** 2)).",
            ),
            Mutant(
                "rank-off-by-one", _rvt_with(tail=1),
                "your rank-k error leaves out one singular value too many: the error of the best rank k "
                "is the tail sigma_{k+1}, sigma_{k+2}, ..., that is s[k:] (numpy counts from 0), not s[k + 1:].",
            ),
            Mutant(
                "kept-not-dropped", _rvt_with(kept=True),
                "you measured what each approximation KEEPS (|A_bar_k|, |top_k(A)|); the errors measure what "
                "it loses: |A_bar - A_bar_k| and |A - top_k(A)|, each divided by |A_bar|.",
            ),
            Mutant(
                "smallest-k", _rvt_with(ties="smallest"),
                "you kept each row's k SMALLEST weights: an ascending sort puts them first. Keep the k "
                "largest, np.argsort(-A, axis=1)[:, :k].",
            ),
            Mutant(
                "rank-k-of-A", _rvt_with(rank_of="A"),
                "you took the best rank k of A itself; centre first and approximate A_bar: the rank-k "
                "error is |A_bar - (A_bar)_k| / |A_bar|.",
            ),
        ),
        alternatives=(
            lambda A, k: (lambda C: (
                float(np.sqrt((np.linalg.svd(C, compute_uv=False)[k:] ** 2).sum()) / np.linalg.norm(C)),
                float(np.linalg.norm(A - lr.topk_sparsify(A, k)) / np.linalg.norm(C)),
                bool(np.sqrt((np.linalg.svd(C, compute_uv=False)[k:] ** 2).sum())
                     < np.linalg.norm(A - lr.topk_sparsify(A, k)))))(A - A.mean(axis=0)),
            lambda A, k: (lambda C, top: (lambda r, e: (r, e, r < e))(
                float(torch.linalg.svdvals(torch.as_tensor(C))[k:].norm() / np.linalg.norm(C)),
                float(np.linalg.norm(A - top) / np.linalg.norm(C))))(
                A - A.mean(axis=0), _keep_top(A, k)),
        ),
        rtol=1e-6,
        atol=1e-9,
        rules=(
            Rule("edge-size", "k = 0 keeps nothing: rank_error 1, top-k drops every weight",
                 ("k = 0: nothing kept",), lambda A, k: k == 0, ("minus-k-slice",), quote='`k` runs from 0 (rank error 1'),
            Rule("edge-size", "T != S: the same k for both, not a converted budget",
                 ("T = 4 queries, S = 12 keys, k = 2", "T = 12 queries, S = 4 keys, k = 2"),
                 lambda A, k: A.shape[0] != A.shape[1] and round(k * sum(A.shape) / (2 * A.shape[0])) != k,
                 ("budget-converted",), quote="Use the same `k` for both approximations, also when $T \\ne S$"),
            Rule("edge-size", "T != S: the mean row averages the T queries",
                 ("T = 10 queries, S = 6 keys, k = 2",), lambda A, k: A.shape[0] != A.shape[1], ("row-mean",), quote='$\\mu_j = \\frac1T\\sum_i A_{ij}$'),
            Rule("tie", "weights tied at the k-th place: keep exactly k of them",
                 ("tied weights at the k-th place, k = 2",), _tied_at_k, ("ties-kept",), quote='on a tie at the $k$-th place keep exactly $k$, any'),
            Rule("tie", "equal errors (k = S: both 0): rank_wins is False, rank_error < topk_error strictly",
                 ("k = S = 8: everything kept, both errors 0",), lambda A, k: k >= A.shape[1], ("at-most",), quote='`rank_wins = rank_error < topk_error` (strictly)'),
            output_rule('a tuple (float, float, bool)', 'soft synthetic head, beta = 0.2, k = 4',
                        'two floats and a bool', lambda A, k: lb.rank_vs_topk(A, k), 'tuple-as-list',
                        'float-for-bool'),
            in_place_rule('soft synthetic head, beta = 0.2, k = 4', lambda A, k: lb.rank_vs_topk(A, k)),
        ),
        framing=('Write `my_rank_vs_topk(A, k)`', 'Remove the mean row'),
        difficulty=3,
        minutes=30,
    )
)


# -------------------------------------------------------- linear attention
def _linear_cases() -> list[Case]:
    rng = np.random.default_rng(33)

    def feats(*shape):
        return np.exp(rng.normal(size=shape) * 0.5)  # positive features, like elu + 1

    return [
        Case("T=S=6, r=4, d_v=3", (feats(6, 4), feats(6, 4), rng.normal(size=(6, 3)))),
        Case("T=3, S=8", (feats(3, 5), feats(8, 5), rng.normal(size=(8, 2)))),
        Case("one query", (feats(1, 4), feats(7, 4), rng.normal(size=(7, 3)))),
        Case("one feature (r=1)", (feats(5, 1), feats(5, 1), rng.normal(size=(5, 2)))),
        Case("r=32 > n", (feats(4, 32), feats(4, 32), rng.normal(size=(4, 2)))),
        _huge_case(),
    ]


# T = S = 6 million: a T x S float64 matrix would take 2.9e14 bytes (262 TiB), more than a
# 48-bit address space holds, so forming it fails at once (MemoryError in numpy, a
# RuntimeError in torch) even where the system overcommits memory; and O(T S) work of
# 3.6e13 steps cannot finish within the time limit. The inputs are read-only broadcast views
# of one row (a few bytes), so every query's output is v's row: O_t = (q.k) v / (q.k) = v.
# The associative answer takes 0.1 to 0.5 s (on a loaded 2-core machine) and about 150 MB.
# The price: a per-query Python loop, linear but slow, also runs out of time here.
HUGE_N = 6_000_000
_FIRST = ("Compute phi(K)^T V, an (r, d_v) matrix, and sum_s phi(k_s), an (r,) vector, first, with "
          "matrix products; then each query needs only phi(q_t) times those.")
TOO_BIG = ("this builds the T x S matrix phi(Q) phi(K)^T: on the case with T = S = 6 million it would "
           "take 262 TiB. " + _FIRST)
TOO_SLOW = ("your function did not finish in time on the case with T = S = 6 million: O(T S) work (a "
            "loop over queries that touches every key, a T x S einsum) cannot, and a Python loop over 6 "
            "million queries or keys is too slow as well. " + _FIRST)


def _huge_case() -> Case:
    def row(*values):
        return np.broadcast_to(np.array([values]), (HUGE_N, len(values)))  # read-only, (n, len)

    return Case("T = S = 6 million (no T x S matrix fits in memory)", (row(1.5), row(2.0), row(3.0)),
                budget=TOO_BIG, slow=TOO_SLOW, expected=row(3.0))


def _softmax_rows(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _linear_reference(phi_q, phi_k, v):
    return eff.linear_attention(phi_q, phi_k, v, feature_map=lambda x: x)


register(
    Exercise(
        id="linear-attention",
        title="Linear attention through associativity",
        make_cases=_linear_cases,
        reference=_linear_reference,
        mutants=(
            Mutant(
                "no-normaliser", lambda pq, pk, v: pq @ (pk.T @ v),
                "you forgot the normaliser: divide each query's row by phi(q_t) . sum_s phi(k_s), "
                "so the weights of each query sum to 1.",
            ),
            Mutant(
                "softmax", lambda pq, pk, v: eff.linear_attention_quadratic(
                    pq, pk, v, feature_map=lambda x: np.exp(x) if isinstance(x, np.ndarray) else torch.exp(x))[0],
                "that puts an exp (a softmax) on top of the features. Linear attention uses the "
                "features' dot products phi(q).phi(k) directly as weights.",
            ),
            Mutant(
                "softmax-of-scores", lambda pq, pk, v: _softmax_rows(pq @ pk.T) @ v,
                "you took a softmax of the feature dot products phi(q_t) . phi(k_s). Linear attention "
                "uses them directly as weights, divided by their sum over the keys: no exp.",
            ),
            Mutant(
                "global-normaliser", lambda pq, pk, v: pq @ (pk.T @ v) / (pq @ pk.sum(axis=0)).sum(),
                "you divided by one number for all queries; each query t needs its own "
                "normaliser phi(q_t) . sum_s phi(k_s).",
            ),
            Mutant(
                "mean-numerator", lambda pq, pk, v: pq @ (pk.T @ v / len(pk)) / (pq @ pk.sum(axis=0))[:, None],
                "you averaged phi(k_s) v_s^T over the keys in the numerator but summed phi(k_s) in the "
                "denominator: use sums in both (or means in both), so each query's weights sum to 1.",
            ),
            Mutant(
                "count-normaliser", lambda pq, pk, v: pq @ (pk.T @ v) / len(pk),
                "you divided by the number of keys S: that averages the values only if every weight "
                "phi(q_t) . phi(k_s) were 1. Each query's weights must sum to 1, so divide by its own "
                "normaliser phi(q_t) . sum_s phi(k_s), a (T,) vector, [:, None].",
            ),
            Mutant(
                "per-feature-normaliser", lambda pq, pk, v: pq @ ((pk.T @ v) / pk.sum(axis=0)[:, None]),
                "you divided each feature's row of phi(K)^T V by that feature's sum before multiplying by "
                "phi(q_t). The normaliser is one number per query, phi(q_t) . sum_s phi(k_s): divide the "
                "(T, d_v) numerator by the (T,) denominator, [:, None].",
            ),
        ),
        alternatives=(
            lambda pq, pk, v: (
                lambda q, k, v: (q @ (k.T @ v) / (q @ k.sum(0))[:, None]).numpy()
            )(*(torch.as_tensor(a) for a in (pq, pk, v))),
            lambda pq, pk, v: np.einsum("tr,sr,sd->td", pq, pk, v, optimize=True)
            / np.einsum("tr,sr->t", pq, pk, optimize=True)[:, None],
            lambda pq, pk, v: np.einsum("tr,rd->td", pq, np.einsum("sr,sd->rd", pk, v))
            / np.einsum("tr,r->t", pq, pk.sum(axis=0))[:, None],
        ),
        rules=(
            Rule("range", "T = S = 6 million: no T x S matrix fits in memory, and a Python loop over the "
                 "keys or the queries does not finish within the check's 10 s",
                 (_huge_case().label,), lambda pq, pk, v: len(pq) >= 10**6, (), quote='with millions of queries and keys no such matrix fits in memory'),
            Rule("edge-size", "T != S: each query's normaliser sums over the S keys",
                 ("T=3, S=8", "one query"), lambda pq, pk, v: len(pq) != len(pk),
                 ("global-normaliser", "mean-numerator", "count-normaliser"), quote='$T$ may differ from $S$'),
            Rule("edge-size", "one feature (r = 1) and more features than keys (r > n)",
                 ("one feature (r=1)", "r=32 > n"), lambda pq, pk, v: pq.shape[1] == 1 or pq.shape[1] > len(pk),
                 ("per-feature-normaliser", "no-normaliser"), quote='positive features `phi_q` of shape'),
            output_rule('a float64 array (T, d_v)', 'T=S=6, r=4, d_v=3', 'a float64 array of shape `(T, d_v)`',
                        _linear_reference, 'float32', 'list'),
            in_place_rule('T=S=6, r=4, d_v=3', _linear_reference, index=2),
        ),
        framing=('Write `my_linear_attention`', 'Compute $\\phi(K)^\\top V$ first'),
        # A (T,) normaliser left without its [:, None] fails to broadcast against the (T, d_v) numerator.
        error_tips=(("could not be broadcast", " Tip: divide the (T, d_v) numerator by the (T,) normaliser "
                     "as normaliser[:, None] (or keep the summed axis with keepdims=True), so that the "
                     "shapes line up."),),
        difficulty=1,
        minutes=5,
    )
)


# ------------------------------------------------------ online softmax step
def _online_cases() -> list[Case]:
    rng = np.random.default_rng(34)
    T, B, d_v = 3, 4, 2

    def state(m):
        return (np.asarray(m, dtype=float), rng.uniform(0.5, 2.0, size=T), rng.normal(size=(T, d_v)))

    return [
        Case("first block (m = -inf, l = 0, acc = 0)",
             (np.full(T, -np.inf), np.zeros(T), np.zeros((T, d_v)), rng.normal(size=(T, B)), rng.normal(size=(B, d_v)))),
        Case("new block has a larger max", (*state([0.0, -1.0, 0.5]), 3.0 + rng.normal(size=(T, B)), rng.normal(size=(B, d_v)))),
        Case("new block has a smaller max", (*state([4.0, 5.0, 3.0]), rng.normal(size=(T, B)), rng.normal(size=(B, d_v)))),
        Case("logits near 1000", (*state([1000.0, 999.0, 1001.0]), 1000.0 + rng.normal(size=(T, B)), rng.normal(size=(B, d_v)))),
        Case("a masked key (-inf score)",
             (*state([0.5, 0.2, 0.1]), np.where(np.arange(B) == 1, -np.inf, rng.normal(size=(T, B))), rng.normal(size=(B, d_v)))),
        Case("query 0 has seen only masked keys (m = -inf, a block of -inf)",
             (np.array([-np.inf, -np.inf, 0.5]), np.array([0.0, 0.0, 1.2]), np.array([[0.0, 0.0], [0.0, 0.0], [0.3, -0.7]]),
              np.where(np.arange(T)[:, None] == 1, rng.normal(size=(T, B)), -np.inf), rng.normal(size=(B, d_v)))),
    ]


def _step_with(use_running_max=True, rescale_l=True, rescale_acc=True, flip=False):
    def f(m, l, acc, scores, v_blk):
        blk = scores.max(axis=-1)
        m_new = np.maximum(m, blk) if use_running_max else blk
        alpha = np.exp((m_new - m) if flip else (m - m_new))
        p = np.exp(scores - m_new[:, None])
        l_new = (alpha if rescale_l else 1.0) * l + p.sum(axis=-1)
        acc_new = (alpha[:, None] if rescale_acc else 1.0) * acc + p @ v_blk
        return m_new, l_new, acc_new

    return f


def _fully_masked(m, scores) -> np.ndarray:
    """(T,) the rows that have seen no finite score, in the running state or in this block."""
    return np.isneginf(m) & np.isneginf(scores).all(axis=1)


def _overflow_hint(got, expected, args):
    m, _, _, scores, _ = args
    bad = ~np.isfinite(np.asarray(got[1], dtype=float))  # (T,) rows of l that are NaN or inf
    if bad.any() and _fully_masked(m, scores)[bad].all():
        return ("a row that has seen only masked keys (m = -inf and a block of -inf) gave NaN: "
                "exp(-inf - (-inf)) is NaN. Such a row keeps m = -inf, l = 0, acc = 0")
    if not all(np.all(np.isfinite(np.asarray(g, dtype=float))) for g in got[1:]):  # l and acc
        return "your running sum or output has NaN or inf: exponentiate scores - m_new (the running max), never the raw scores"
    return None


def _step_in_place(m, l, acc, scores, v_blk):
    """Updates the running state in place, as a kernel does, and returns it."""
    m_new = np.maximum(m, scores.max(axis=1))  # (T,)
    shift = np.where(np.isneginf(m_new), 0.0, m_new)  # (T,) a row with no finite score yet: 0
    alpha = np.exp(m - shift)  # (T,) computed before m is overwritten
    p = np.exp(scores - shift[:, None])  # (T, B)
    l *= alpha
    l += p.sum(axis=1)
    acc *= alpha[:, None]
    acc += p @ v_blk
    m[...] = m_new
    return m, l, acc


register(
    Exercise(
        id="online-softmax-step",
        title="One step of the online softmax",
        make_cases=_online_cases,
        reference=lambda m, l, acc, scores, v_blk: eff.online_softmax_step(m, l, acc, scores, v_blk),
        mutants=(
            Mutant(
                "no-rescale", _step_with(rescale_l=False, rescale_acc=False),
                "when the max grows, the old sum and accumulator were computed against the old max: "
                "multiply both by exp(m_old - m_new) before adding the new block.",
            ),
            Mutant(
                "rescale-l-only", _step_with(rescale_acc=False),
                "you rescaled the running sum l but not the accumulated output acc; both need the "
                "factor exp(m_old - m_new).",
            ),
            Mutant(
                "block-max", _step_with(use_running_max=False),
                "the new max must be the running max, max(m_old, block max), not the block's own max; "
                "otherwise a small block after a large one overflows the rescale factor.",
            ),
            Mutant(
                "no-max-shift",
                lambda m, l, acc, s, v: (np.maximum(m, s.max(axis=-1)), l + np.exp(s).sum(axis=-1), acc + np.exp(s) @ v),
                "l and acc must be kept relative to the running max: add exp(scores - m_new), and "
                "rescale the old l and acc by exp(m_old - m_new). Raw exp(scores) overflows for "
                "logits near 1000 and does not match the m you return.",
            ),
            Mutant(
                "nan-when-fully-masked", _step_with(),
                "a row that has seen only masked keys (m = -inf and a block of -inf scores) gave NaN: "
                "there m_new is -inf and exp(m - m_new) = exp(-inf - (-inf)) is NaN. Nothing has been seen "
                "yet, so the row keeps m = -inf, l = 0 and acc = 0: subtract 0 instead of m_new where "
                "m_new is -inf (np.where(np.isneginf(m_new), 0.0, m_new)).",
            ),
            Mutant(
                "flipped-rescale", _step_with(flip=True),
                "the rescale factor is exp(m_old - m_new), which is at most 1; you used its inverse.",
            ),
        ),
        hints=(_overflow_hint,),
        returns=("m", "l", "acc"),
        rules=(
            Rule("edge-size", "the first block starts from m = -inf, l = 0, acc = 0",
                 ("first block (m = -inf, l = 0, acc = 0)",), lambda m, l, acc, s, v: bool(np.isneginf(m).all()),
                 ("flipped-rescale",), quote='The first block starts from'),
            Rule("range", "a block with a larger max: the old l and acc are rescaled by exp(m_old - m_new)",
                 ("new block has a larger max",), lambda m, l, acc, s, v: bool((s.max(axis=1) > m).all()),
                 ("no-rescale", "rescale-l-only", "flipped-rescale"), quote="A block's maximum may be above or below the running one"),
            Rule("range", "a block with a smaller max: the running max stays",
                 ("new block has a smaller max",), lambda m, l, acc, s, v: bool((s.max(axis=1) < m).all()),
                 ("block-max",), quote="A block's maximum may be above or below the running one"),
            Rule("range", "logits near 1000 must not overflow",
                 ("logits near 1000",), lambda m, l, acc, s, v: s.max() > 709, ("no-max-shift",), quote='scores may be near 1000'),
            Rule("range", "a masked key (score -inf) adds nothing",
                 ("a masked key (-inf score)",), lambda m, l, acc, s, v: bool(np.isneginf(s).any()),
                 ("no-rescale",), quote='a masked key scores `-inf`'),
            Rule("empty", "a row that has seen only masked keys keeps m = -inf, l = 0, acc = 0 (no NaN)",
                 ("query 0 has seen only masked keys (m = -inf, a block of -inf)",),
                 lambda m, l, acc, s, v: bool(_fully_masked(m, s).any()), ("nan-when-fully-masked",),
                 quote='A row that has seen only masked keys so far'),
            output_rule('a tuple (m, l, acc) of float64 arrays', 'first block (m = -inf, l = 0, acc = 0)',
                        'a tuple of float64 arrays of the same shapes',
                        lambda m, l, acc, scores, v_blk: eff.online_softmax_step(m, l, acc, scores, v_blk), 'float32',
                        'tuple-as-list'),
            in_place_rule('first block (m = -inf, l = 0, acc = 0)',
                          lambda m, l, acc, scores, v_blk: eff.online_softmax_step(m, l, acc, scores, v_blk), index=3,
                          quote='do not change `scores` or `v_blk`'),
        ),
        framing=('Chunked attention keeps', 'Write `my_online_softmax_step`', 'You may update `m`, `l` and `acc` in place if you return them'),
        # 2/3: the lesson collapses chunked_attention's code, so the step is written from the prose, edge cases included.
        difficulty=2,
        minutes=24,  # blind learners took 22, 24 and 25 (the fully masked row costs a failed run)
        in_place_ok=(0, 1, 2),  # m, l, acc: a real kernel updates its running state in place
        alternatives=(
            _step_in_place,
            lambda m, l, acc, s, v: tuple(t.numpy() for t in eff.online_softmax_step(
                *(torch.as_tensor(x) for x in (m, l, acc, s, v)))),
            lambda m, l, acc, s, v: (
                lambda m_new, c: (
                    m_new,
                    np.exp(m - c) * l + np.exp(s - c[:, None]).sum(axis=1),
                    np.exp(m - c)[:, None] * acc + np.exp(s - c[:, None]) @ v,
                )
            )(np.maximum(m, s.max(axis=1)), np.where(np.isneginf(np.maximum(m, s.max(axis=1))), 0.0, np.maximum(m, s.max(axis=1)))),
        ),
    )
)

EXERCISES = ("effective-rank", "best-rank-k", "rank-vs-topk", "linear-attention", "online-softmax-step")
