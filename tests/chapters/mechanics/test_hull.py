"""Convex hull helpers against brute force and closed-form cases."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course import convex_hull, in_convex_hull


def _brute_force_hull_vertices(p):
    """A point is a hull vertex if some edge through it has every other point on one side."""
    verts = set()
    for i, j in itertools.permutations(range(len(p)), 2):
        d = p[j] - p[i]
        cross = d[0] * (p[:, 1] - p[i, 1]) - d[1] * (p[:, 0] - p[i, 0])
        if np.all(cross >= -1e-12) and not np.allclose(p[i], p[j]):
            others = np.delete(np.arange(len(p)), [i, j])
            on_line = [k for k in others if abs(cross[k]) < 1e-12 and 0 < (p[k] - p[i]) @ d < d @ d]
            if not on_line:
                verts.update({tuple(p[i]), tuple(p[j])})
    return verts


@settings(max_examples=50, deadline=None)
@given(st.integers(3, 12), st.integers(0, 10_000))
def test_hull_matches_brute_force(n, seed):
    p = np.random.default_rng(seed).normal(size=(n, 2))
    assert set(map(tuple, convex_hull(p))) == _brute_force_hull_vertices(p)


@settings(max_examples=50, deadline=None)
@given(st.integers(3, 10), st.integers(0, 10_000))
def test_convex_combinations_are_inside_and_far_points_outside(n, seed):
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(n, 2))
    w = rng.dirichlet(np.ones(n), size=20)  # (20, n) convex weights
    assert in_convex_hull(w @ v, v).all()
    far = v.mean(0) + 100 * rng.normal(size=(5, 2))
    assert not in_convex_hull(far, v).any()


def test_bad_shapes():
    with pytest.raises(ValueError, match=r"points has shape \(3, 3\)"):
        convex_hull(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="need 3 or more"):
        in_convex_hull(np.zeros((1, 2)), np.array([[0.0, 0.0], [1.0, 1.0]]))
