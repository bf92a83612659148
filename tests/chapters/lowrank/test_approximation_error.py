"""Tests for attention_course.chapters.lowrank.approximation_error: the seeded inputs, the error table of
chapter 3 against independent computations and exact limits, and the chunked gaps."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_course.chapters.lowrank import approximation_error as ae


def test_benchmark_inputs_are_seeded_and_smooth():
    a, b = ae.benchmark_inputs(64, 8, "smooth", seed=3), ae.benchmark_inputs(64, 8, "smooth", seed=3)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    iid = ae.benchmark_inputs(256, 8, "iid", seed=0)[0][0, 0].double()
    smooth = ae.benchmark_inputs(256, 8, "smooth", seed=0)[0][0, 0].double()

    def lag1(x):  # mean correlation between neighbouring tokens
        return float(torch.nn.functional.cosine_similarity(x[1:], x[:-1], dim=-1).mean())

    assert lag1(smooth) > 0.9 and abs(lag1(iid)) < 0.1
    with pytest.raises(ValueError, match="distribution='gauss'; expected one of"):
        ae.benchmark_inputs(8, distribution="gauss")


def _numpy_attention(q, k, v):
    """Exact softmax attention in numpy float64: weights (n, n) and output (n, d_v)."""
    s = q @ k.T / np.sqrt(q.shape[-1])
    w = np.exp(s - s.max(axis=1, keepdims=True))
    w /= w.sum(axis=1, keepdims=True)
    return w, w @ v


def test_structure_and_linear_error_match_independent_numpy():
    n, d, budget = 32, 8, 8
    out = ae.approximation_errors(n=n, d=d, budget=budget, seed=1)
    q, k, v = (t[0, 0].numpy() for t in ae.benchmark_inputs(n, d, "iid", seed=1, dtype=torch.float64))
    for name, scale in (("iid", 1.0), ("iid-sharp", 2.0)):
        A, exact = _numpy_attention(scale * q, scale * k, v)
        s = np.linalg.svd(A, compute_uv=False)
        p = s / s.sum()
        s2 = np.sort(A, axis=1)[:, :-budget] ** 2  # the entries top-k drops
        ref = {"effective_rank": np.exp(-(p * np.log(p)).sum()),
               "rank_error": np.sqrt((s[budget:] ** 2).sum() / (s**2).sum()),
               "topk_error": np.sqrt(s2.sum() / (A**2).sum())}
        for key, val in ref.items():
            assert out["structure"][name][key] == pytest.approx(val, rel=1e-10), (name, key)
        phi = lambda x: np.where(x > 0, x + 1, np.exp(x))  # elu(x) + 1
        sim = phi(scale * q) @ phi(scale * k).T
        lin = sim @ v / sim.sum(axis=1, keepdims=True)
        err = np.linalg.norm(lin - exact) / np.linalg.norm(exact)
        assert out["errors"]["linear (elu+1)"][name] == pytest.approx(err, rel=1e-10)


def test_methods_are_exact_when_the_budget_covers_every_key():
    """budget = n: n landmarks, n segments of one key, n keys kept. In float64 the errors are
    round-off, amplified in Nystrom by the condition number of its (n, n) kernel's
    pseudo-inverse (measured 3e-14 at n = 16), so 1e-10 as for Nystrom in test_approximations."""
    errors = ae.approximation_errors(n=16, d=8, budget=16)["errors"]
    for name in ("Nystrom, 16 landmarks", "Linformer, mean-pool, k=16", "top-16 per query"):
        assert max(errors[name].values()) < 1e-10, name
    assert min(errors["local window, w=8"].values()) > 1e-3  # half-width 8 < 15: not exact


@pytest.mark.numerics
def test_chapter_claims_each_method_works_where_its_structure_is():
    """The chapter's verdict at n = 256, d = 64, budget 32: low-rank methods are accurate
    (error < 0.1) on smooth inputs, top-k on sharp ones, and nothing on plain iid inputs."""
    errors = ae.approximation_errors()["errors"]
    accurate = 0.1  # the error target of the chapter and of the benchmark's summary
    assert errors["Nystrom, 32 landmarks"]["smooth"] < accurate
    assert errors["Linformer, mean-pool, k=32"]["smooth"] < accurate
    assert errors["top-32 per query"]["iid-sharp"] < accurate < errors["Nystrom, 32 landmarks"]["iid-sharp"]
    assert min(e["iid"] for e in errors.values()) > accurate


def test_chunked_gaps_are_round_off():
    """Chunked attention is exact: the gaps are float64 round-off of sums of n terms of size
    at most 1 (weights) times |v| < 5, i.e. far below 1e-13 (eps = 2.2e-16)."""
    gaps = ae.chunked_gaps(n=256, d=16, blocks=(1, 7, 300), causal_block=32)
    assert list(gaps) == [1, 7, 300, "causal"]
    assert max(gaps.values()) < 1e-13
    assert gaps[1] > 0  # a block of one key rescales n times: round-off shows, so the gaps are measured
