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

from attention_course.chapters.kernels.qk_kernel import (  # noqa: E402
    canonical_gauge, gauge_locality, gauge_locality_by_head, locality_bins)


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


@pytest.mark.parametrize("causal", [False, True])
def test_gauge_locality_does_not_move_when_attention_does_not(causal):
    rng = np.random.default_rng(1)
    q, k = rng.normal(size=(3, 12, 8)), rng.normal(size=(3, 12, 8)) * rng.uniform(0.5, 2, (3, 12, 1))
    ref = gauge_locality(q, k, sinks=(0,), causal=causal)
    for qq, kk in ((2 * q, k / 2), (q / 2, 2 * k), (q, k + rng.normal(size=8))):
        other = gauge_locality(qq, kk, sinks=(0,), causal=causal)
        for m in ref:
            np.testing.assert_allclose(other[m], ref[m], atol=1e-9)
    perm = [2, 0, 1]  # permuting heads permutes the per-head numbers
    np.testing.assert_allclose(gauge_locality(q[perm], k[perm], sinks=(0,), causal=causal)["rank_corr"],
                               ref["rank_corr"][perm], atol=1e-12)
    # off the canonical gauge the distances, and so the number, move
    assert not np.allclose(gauge_locality(q, k, sinks=(0,), causal=causal, gauge=0.3)["rank_corr"], ref["rank_corr"])


def test_gauge_locality_is_scipys_spearman_on_one_encoder_head():
    rng = np.random.default_rng(2)
    q, k = rng.normal(size=(7, 4)), rng.normal(size=(7, 4))
    got = float(gauge_locality(q, k, sinks=(0, -1))["rank_corr"])
    qh, kh = canonical_gauge(q, k, range(1, 6))
    s = q @ k.T / 2.0
    w = np.exp(s - s.max(1, keepdims=True))
    w /= w.sum(1, keepdims=True)
    near = -np.linalg.norm(qh[:, None] - kh[None, 1:6], axis=-1)  # (7, 5) content keys 1..5
    expected = np.median([spearmanr(w[i, 1:6], near[i]).statistic for i in range(7)])
    assert abs(got - expected) < 1e-12


def test_the_baselines_can_fail():
    """Keys whose norms spread far more than their directions: the dot product follows the norm, not the distance."""
    rng = np.random.default_rng(3)
    k = rng.normal(size=(40, 16))
    k *= np.geomspace(0.2, 5, 40)[:, None]  # lengths stretched 25-fold
    loc = gauge_locality(rng.normal(size=(40, 16)), k)
    assert loc["rank_corr"] < 0.5  # not local in the canonical gauge
    assert abs(float(loc["shuffled_rank_corr"])) < 0.2  # shuffled weights: unrelated to distance


def test_causal_rows_see_only_earlier_keys_and_short_rows_are_skipped():
    rng = np.random.default_rng(4)
    q, k = rng.normal(size=(6, 3)), rng.normal(size=(6, 3))
    loc = gauge_locality(q, k, sinks=(0,), causal=True, min_keys=3)
    qh, kh = canonical_gauge(q, k, range(1, 6))
    s = np.where(np.tril(np.ones((6, 6), bool)), q @ k.T / np.sqrt(3), -np.inf)
    w = np.exp(s - s.max(1, keepdims=True))
    rows = [spearmanr(w[i, 1:i + 1], -np.linalg.norm(qh[i] - kh[1:i + 1], axis=-1)).statistic for i in (3, 4, 5)]
    assert abs(float(loc["rank_corr"]) - np.median(rows)) < 1e-12
    assert abs(float(loc["sink_share"]) - np.mean(w[:, 0] / w.sum(1))) < 1e-12


def test_gauge_locality_rejects_bad_input():
    with pytest.raises(ShapeError, match="expected the same shape"):
        gauge_locality(np.zeros((4, 3)), np.zeros((5, 3)))
    with pytest.raises(ShapeError, match="content keys"):
        gauge_locality(np.ones((3, 2)), np.ones((3, 2)), sinks=(0, -1))
    with pytest.raises(ValueError, match="model='BERT'"):
        gauge_locality_by_head([(np.zeros((1, 1, 5, 2)),) * 2], model="BERT")


def test_locality_bins_sum_to_one():
    rng = np.random.default_rng(5)
    loc = {m: rng.uniform(0, 1, 50) for m in ("rank_corr", "blind_rank_corr", "sink_share")}
    b = locality_bins(loc, 0.4, 0.6)
    assert abs(b["local"] + b["not local"] + b["sink head"] - 1) < 1e-12
