"""Tests for attention_course.chapters.kernels.qk_kernel: locality of a head in its own query-key space.

References: per-row loops over queries and keys in plain Python/numpy, Spearman's
rank-difference formula and least squares (numpy.linalg.lstsq) for the variance shares.
The queries and keys themselves are tested in tests/models/test_queries_keys.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course import ShapeError
from attention_course.chapters.kernels.qk_kernel import (
    MEASURES,
    key_norm_ratio,
    qk_locality,
)


def _spearman(a, b):
    n = len(a)
    ra = {i: r for r, i in enumerate(sorted(range(n), key=lambda i: a[i]))}
    rb = {i: r for r, i in enumerate(sorted(range(n), key=lambda i: b[i]))}
    return 1 - 6 * sum((ra[i] - rb[i]) ** 2 for i in range(n)) / (n * (n * n - 1))


def _share(y, x):
    """R^2 of least squares of row-centred y on row-centred x (no intercept), pooled over rows."""
    yc, xc = (m - m.mean(1, keepdims=True) for m in (y, x))
    coef, *_ = np.linalg.lstsq(xc.reshape(-1, 1), yc.reshape(-1), rcond=None)
    return 1 - ((yc.reshape(-1) - coef[0] * xc.reshape(-1)) ** 2).sum() / (yc**2).sum()


def _reference(q, k):
    """Every measure of one head by loops over the queries and keys."""
    T, d = q.shape
    S = len(k)
    scores = np.array([[q[i] @ k[j] / np.sqrt(d) for j in range(S)] for i in range(T)])
    dist = np.array([[np.linalg.norm(q[i] - k[j]) for j in range(S)] for i in range(T)])
    weights = np.exp(scores) / np.exp(scores).sum(1, keepdims=True)
    blind = weights.mean(0)  # (S,)
    norms = np.linalg.norm(k, axis=1)
    return {
        "rank_corr": np.median([_spearman(scores[i], -dist[i]) for i in range(T)]),
        "nearest_wins": np.mean([np.argmax(scores[i]) == np.argmin(dist[i]) for i in range(T)]),
        "blind_rank_corr": np.median([_spearman(blind, -dist[i]) for i in range(T)]),
        "blind_nearest_wins": np.mean([np.argmax(blind) == np.argmin(dist[i]) for i in range(T)]),
        "chance": 1 / S,
        "distance_share": _share(scores, -dist**2),
        "norm_share": _share(scores, np.tile(norms**2, (T, 1))),
        "norm_ratio": norms.max() / norms.min(),
    }


@settings(max_examples=25, deadline=None)
@given(T=st.integers(1, 6), S=st.integers(2, 9), d=st.integers(1, 5), seed=st.integers(0, 10_000))
def test_qk_locality_matches_loops(T, S, d, seed):
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(T, d)), rng.normal(size=(S, d)) * rng.uniform(0.5, 2.0, size=(S, 1))
    got, want = qk_locality(q, k), _reference(q, k)
    assert set(got) == set(MEASURES)
    for m in MEASURES:  # float64 sums of at most 54 terms of size ~10: round-off far below 1e-9
        assert float(got[m]) == pytest.approx(want[m], abs=1e-9), m


def test_leading_axes_are_heads():
    rng = np.random.default_rng(1)
    q, k = rng.normal(size=(2, 3, 5, 4)), rng.normal(size=(2, 3, 7, 4))
    loc = qk_locality(q, k)
    for layer in range(2):
        for head in range(3):
            one = qk_locality(q[layer, head], k[layer, head])
            for m in MEASURES:
                assert loc[m][layer, head] == pytest.approx(float(one[m]), abs=1e-12)


def test_equal_key_norms_give_a_gaussian_kernel():
    # ||k|| fixed: q.k = (|q|^2 + r^2 - |q - k|^2) / 2, so the scores are the distance term plus a constant
    rng = np.random.default_rng(2)
    k = rng.normal(size=(4, 10, 6))
    k *= 3.0 / np.linalg.norm(k, axis=-1, keepdims=True)
    loc = qk_locality(rng.normal(size=(4, 8, 6)), k)
    np.testing.assert_allclose(loc["rank_corr"], 1.0, atol=1e-12)
    np.testing.assert_allclose(loc["nearest_wins"], 1.0)
    np.testing.assert_allclose(loc["distance_share"], 1.0, atol=1e-12)
    np.testing.assert_allclose(loc["norm_share"], 0.0)
    np.testing.assert_allclose(loc["norm_ratio"], 1.0, atol=1e-12)


def test_long_keys_win_over_near_ones():
    # keys j*u for j = 1..5, query u: the nearest key is k_1 but k_5 has the largest score
    u = np.array([1.0, 0.0])
    k = np.arange(1, 6)[:, None] * u  # (5, 2)
    loc = qk_locality(u[None], k)
    assert loc["nearest_wins"] == 0.0 and loc["norm_ratio"] == pytest.approx(5.0)
    assert loc["rank_corr"] == pytest.approx(-1.0)  # the score grows with j, the nearness falls with j


def test_key_norm_ratio():
    k = np.array([[[3.0, 4.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 2.0]]])  # norms (5, 1) and (1, 2)
    np.testing.assert_allclose(key_norm_ratio(k), [5.0, 2.0])


def test_bad_inputs():
    with pytest.raises(ShapeError, match=r"q has shape \(3, 4\) and k has shape \(5, 3\); expected"):
        qk_locality(np.zeros((3, 4)), np.zeros((5, 3)))
    with pytest.raises(ShapeError, match=r"k has shape \(2, 1, 4\); expected \(\.\.\., T, d\) and \(\.\.\., S, d\)"):
        qk_locality(np.zeros((2, 3, 4)), np.zeros((2, 1, 4)))
    with pytest.raises(ShapeError, match=r"k has shape \(4,\); expected \(\.\.\., S, d\)"):
        key_norm_ratio(np.zeros(4))


# ------------------------------------------------------------------ locality in the canonical gauge
from scipy.stats import spearmanr  # noqa: E402

from attention_course.chapters.kernels.qk_kernel import canonical_gauge  # noqa: E402


def test_canonical_gauge_centres_the_keys_and_balances_the_norms():
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(2, 9, 5)) * 3, rng.normal(size=(2, 9, 5)) + 4
    qh, kh = canonical_gauge(q, k, range(1, 9))
    np.testing.assert_allclose(kh[:, 1:].mean(1), 0, atol=1e-12)
    rms = lambda x: np.sqrt((x**2).sum(-1).mean(-1))  # noqa: E731
    np.testing.assert_allclose(rms(qh), rms(kh[:, 1:]), rtol=1e-12)
    # the scores change by a constant per row only: every weight is kept
    s, sh = q @ np.swapaxes(k, -1, -2), qh @ np.swapaxes(kh, -1, -2)
    d = s - sh
    np.testing.assert_allclose(d - d[..., :1], 0, atol=1e-10)


# ------------------------------------------------------------------ the identity and its baselines
from attention_course.chapters.kernels.qk_kernel import (  # noqa: E402
    additive_scores, dot_product_factors, free_score_tables, gauge_sweep, key_sphere_spread)


def test_factors_are_exact_for_a_head_and_approximate_for_a_free_table():
    rng = np.random.default_rng(10)
    q, k = rng.normal(size=(2, 40, 6)), rng.normal(size=(2, 40, 6))
    L = q @ np.swapaxes(k, -1, -2)
    qt, kt = dot_product_factors(L, 6)
    np.testing.assert_allclose(qt @ np.swapaxes(kt, -1, -2), L - L.mean(-1, keepdims=True), atol=1e-10)
    F = free_score_tables(L, seed=0)
    np.testing.assert_allclose(F.std(axis=(-2, -1)), L.std(axis=(-2, -1)), rtol=0.1)  # spread matched
    qf, kf = dot_product_factors(F, 6)
    assert np.linalg.norm(qf @ np.swapaxes(kf, -1, -2) - F) > 0.5 * np.linalg.norm(F)
    with pytest.raises(ShapeError, match=r"d=7; expected"):
        dot_product_factors(np.zeros((5, 6)), 7)


def test_every_dot_product_head_is_local_at_large_a_and_a_free_table_is_not():
    rng = np.random.default_rng(11)
    T, d = 60, 4
    q, k = rng.normal(size=(3, T, d)), rng.normal(size=(3, T, d)) * rng.uniform(0.3, 3, (3, T, 1))  # unequal norms
    L = q @ np.swapaxes(k, -1, -2) / 2.0
    head = gauge_sweep(*dot_product_factors(L, d), [0.25, 1024.0], scores=L, sinks=(0,), min_keys=2 * d + 2)
    assert np.all(head["rank_corr"][:, 1] > 1 - 1e-9)  # the identity
    assert np.all(head["rank_corr"][:, 0] < 0.99)  # at a small gauge the key norms overrule the distance
    c = rng.normal(size=d)  # q -> 2q, k -> k/2 (and the reverse) with one vector added to every key: no weight changes, nor rho
    for a in (2.0, 0.5):
        L2 = a * q @ np.swapaxes(k / a + c, -1, -2) / 2.0
        moved = gauge_sweep(*dot_product_factors(L2, d), [0.25, 1024.0], scores=L2, sinks=(0,), min_keys=2 * d + 2)
        np.testing.assert_allclose(moved["rank_corr"], head["rank_corr"], atol=1e-9)
    perm = [2, 0, 1]  # rho permutes with the heads
    Lp = L[perm]
    permuted = gauge_sweep(*dot_product_factors(Lp, d), [0.25, 1024.0], scores=Lp, sinks=(0,), min_keys=2 * d + 2)
    np.testing.assert_allclose(permuted["rank_corr"], head["rank_corr"][perm], atol=1e-12)
    F = free_score_tables(L, seed=1)
    free = gauge_sweep(*dot_product_factors(F, d), [1024.0], scores=F, sinks=(0,), min_keys=2 * d + 2)
    assert np.all(free["rank_corr"] < 0.9)  # the baseline fails it
    A = additive_scores(rng.normal(size=(T, 64)), 3, width=128)  # inputs of many more dimensions than d
    add = gauge_sweep(*dot_product_factors(A, d), [1024.0], scores=A, sinks=(0,), min_keys=2 * d + 2)
    assert np.all(add["rank_corr"] < 0.95)


def test_gauge_sweep_is_scipys_spearman_and_does_not_move_when_attention_does_not():
    rng = np.random.default_rng(12)
    q, k = rng.normal(size=(9, 3)), rng.normal(size=(9, 3)) * 2
    got = gauge_sweep(q, k, [0.7], sinks=(0, -1))["rank_corr"][0]
    qh, kh = canonical_gauge(q, k, range(1, 8))
    s = q @ k.T / np.sqrt(3)
    near = -np.linalg.norm(0.7 * qh[:, None] - kh[None, 1:8] / 0.7, axis=-1)  # (9, 7)
    assert abs(got - np.median([spearmanr(s[i, 1:8], near[i]).statistic for i in range(9)])) < 1e-12
    for qq, kk in ((2 * q, k / 2), (q, k + rng.normal(size=3))):
        assert abs(gauge_sweep(qq, kk, [0.7], sinks=(0, -1))["rank_corr"][0] - got) < 1e-9


def test_key_sphere_spread_is_zero_on_a_sphere_and_free_of_the_gauge():
    rng = np.random.default_rng(13)
    u = rng.normal(size=(30, 4))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    assert key_sphere_spread(3 * u - 7.0, range(30)) < 1e-10
    k = rng.normal(size=(2, 200, 8)) * rng.uniform(0.5, 2, (2, 200, 1))
    ref = key_sphere_spread(k, range(200))
    np.testing.assert_allclose(key_sphere_spread(k / 3 + rng.normal(size=8), range(200)), ref, rtol=1e-9)
    assert np.all(ref > 0.3)
    with pytest.raises(ShapeError, match="more than d \\+ 1 keys"):
        key_sphere_spread(rng.normal(size=(9, 8)), range(9))
