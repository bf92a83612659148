"""Tests for attention_course.chapters.graphs.topology: the effective graph of a head and shuffled sentences."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from attention_course.core._backend import ShapeError
from attention_course.chapters.graphs import topology


def _brute_force_keys(row, mass):
    # reference: the smallest subset (by size, then by weight) whose weight reaches mass of the row
    n = len(row)
    for k in range(1, n + 1):
        best = max(itertools.combinations(range(n), k), key=lambda s: row[list(s)].sum())
        if row[list(best)].sum() >= mass * row.sum():
            return frozenset(best)
    raise AssertionError("unreachable")


def test_effective_keys_match_brute_force():
    rng = np.random.default_rng(3)
    W = rng.dirichlet(np.full(7, 0.5), size=20)  # (20, 7), distinct weights almost surely
    for mass in (0.5, 0.8, 0.95):
        assert topology.effective_keys(W, mass) == [_brute_force_keys(r, mass) for r in W]
    assert topology.effective_keys(3.0 * W) == topology.effective_keys(W)  # measured against the row sum
    with pytest.raises(ShapeError, match=r"\(7,\)"):
        topology.effective_keys(W[0])


def test_chance_jaccard_matches_enumeration():
    n = 6
    fixed = frozenset(range(3))  # by symmetry any fixed 3-set gives the same expectation
    for b in range(1, n + 1):
        subsets = [frozenset(s) for s in itertools.combinations(range(n), b)]
        exact = np.mean([topology.jaccard(fixed, s) for s in subsets])
        assert topology.chance_jaccard(3, b, n) == pytest.approx(exact, rel=1e-12)
    with pytest.raises(ValueError, match="1..n=6"):
        topology.chance_jaccard(0, 2, 6)


def test_shuffle_overlap_tells_position_from_content():
    n = 8
    rng = np.random.default_rng(5)
    perms = [rng.permutation(n).tolist() for _ in range(4)]
    positional = (np.eye(n, k=-1) + np.eye(n, k=1))[None, None]  # both neighbours: (1, 1, n, n)
    content = np.zeros((n, n))
    content[:, 2] = 1.0  # every query reads word 2, wherever it stands
    content_maps = [content[None, None]] + [content[np.ix_(p, p)][None, None] for p in perms]
    w, o, _ = topology.shuffle_overlap(content_maps[0], content_maps[1:], perms)
    assert w[0, 0] == 1.0  # the same word every time
    w_pos, o_pos, c_pos = topology.shuffle_overlap(positional, [positional] * 4, perms)
    # interior queries keep offsets {-1, +1}; only the ends differ (offset sets {+1} or {-1})
    assert o_pos[0, 0] > 0.6 and w_pos[0, 0] < o_pos[0, 0]
    identity = topology.shuffle_overlap(positional, [positional], [list(range(n))])
    assert identity[0][0, 0] == identity[1][0, 0] == 1.0
    with pytest.raises(ShapeError, match="permutation of range"):
        topology.shuffle_overlap(positional, [positional], [[0] * n])
