"""Tests for chapter 1's position encodings and its two teaching figures.

References: the sinusoidal formula written out entry by entry, the angle-addition identity
(a shift by k positions is one rotation per frequency pair), numpy's own dot products, and
the permutation identity Attn(PX) = P Attn(X) that added positions must break.
"""

from __future__ import annotations

import math

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from attention_course.chapters.mechanics.lookup_figures import (  # noqa: E402
    plot_position_similarity,
    plot_sinusoids,
    plot_soft_lookup,
)
from attention_course.chapters.mechanics.positions import cosine_similarity, sinusoidal_positions  # noqa: E402
from attention_course.core.attention import scaled_dot_product_attention  # noqa: E402


def test_sinusoidal_positions_match_the_formula_entry_by_entry():
    n, d = 7, 6
    P = sinusoidal_positions(n, d)
    for t in range(n):
        for i in range(d // 2):
            angle = t / 10000 ** (2 * i / d)
            assert P[t, 2 * i] == pytest.approx(math.sin(angle), abs=1e-15)
            assert P[t, 2 * i + 1] == pytest.approx(math.cos(angle), abs=1e-15)


def test_a_shift_is_the_same_rotation_everywhere():
    """p_{t+k} . p_{s+k} = p_t . p_s: the dot product of two positions depends only on their offset."""
    P = sinusoidal_positions(80, 16)
    G = P @ P.T  # (80, 80)
    for k in (1, 5, 17):
        assert np.allclose(G[k:, k:], G[:-k, :-k], rtol=0, atol=1e-12)
    assert np.allclose(np.diag(G), 8.0)  # d/2 pairs of sin^2 + cos^2


def test_sinusoidal_positions_reject_odd_widths():
    with pytest.raises(ValueError, match="even width"):
        sinusoidal_positions(4, 5)


def test_cosine_similarity_against_numpy():
    rng = np.random.default_rng(0)
    P = rng.normal(size=(9, 4))
    S = cosine_similarity(P)
    for s in range(9):
        for t in range(9):
            ref = P[s] @ P[t] / (np.linalg.norm(P[s]) * np.linalg.norm(P[t]))
            assert S[s, t] == pytest.approx(ref, abs=1e-14)
    with pytest.raises(ValueError, match="zero row"):
        cosine_similarity(np.zeros((2, 3)))


def test_added_positions_break_permutation_equivariance():
    rng = np.random.default_rng(1)
    X, W = rng.normal(size=(5, 8)), rng.normal(size=(3, 8, 4))
    perm = np.array([4, 2, 0, 1, 3])
    attn = lambda Z: scaled_dot_product_attention(Z @ W[0], Z @ W[1], Z @ W[2])[0]  # noqa: E731
    assert np.allclose(attn(X[perm]), attn(X)[perm], atol=1e-12)  # without positions: equivariant
    P = sinusoidal_positions(5, 8)
    assert not np.allclose(attn(X[perm] + P), (attn(X + P))[perm], atol=1e-3)  # with them: not


def test_teaching_figures_draw():
    keys = np.array([[1.2, 0.0], [0.5, 1.0], [-0.8, 0.6]])
    figs = [plot_soft_lookup(np.array([1.0, 0.5]), keys, keys + 1, ["a", "b", "c"]),
            plot_sinusoids(sinusoidal_positions(32, 32)),
            plot_position_similarity({"s": cosine_similarity(sinusoidal_positions(16, 8))})]
    assert all(f.axes for f in figs)
    for f in figs:
        plt.close(f)
    with pytest.raises(Exception, match="expected"):
        plot_soft_lookup(np.ones(2), keys, keys, ["a", "b"])
