"""Tests for attention_course.chapters.graphs.gnn: GCN, GAT and GATv2 beside dot-product attention."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.chapters.graphs import gnn
from attention_course.core._backend import ShapeError

SETTINGS = settings(max_examples=40, deadline=None)


def test_gat_scores_match_explicit_formula():
    rng = np.random.default_rng(6)
    N, d_in, d_out = 5, 3, 4
    x = rng.normal(size=(N, d_in))
    W, a = rng.normal(size=(d_in, d_out)), rng.normal(size=2 * d_out)
    W2, a2 = rng.normal(size=(2 * d_in, d_out)), rng.normal(size=d_out)
    xt = torch.as_tensor(x)
    for i, j in itertools.product(range(N), repeat=2):
        cat = torch.cat([xt[i] @ torch.as_tensor(W), xt[j] @ torch.as_tensor(W)])
        e = F.leaky_relu(torch.as_tensor(a) @ cat, 0.2)
        assert abs(gnn.gat_scores(x, W, a)[i, j] - e.item()) < 1e-13
        e2 = torch.as_tensor(a2) @ F.leaky_relu(torch.cat([xt[i], xt[j]]) @ torch.as_tensor(W2), 0.2)
        assert abs(gnn.gatv2_scores(x, W2, a2)[i, j] - e2.item()) < 1e-13
    with pytest.raises(ShapeError, match=r"a has shape \(4,\).*expected a \(8,\)"):
        gnn.gat_scores(x, W, a[:4])


@SETTINGS
@given(N=st.integers(2, 8), d_in=st.integers(1, 5), d_out=st.integers(1, 5), seed=st.integers(0, 10**6))
def test_gat_ranking_is_static(N, d_in, d_out, seed):
    rng = np.random.default_rng(seed)
    e = gnn.gat_scores(rng.normal(size=(N, d_in)), rng.normal(size=(d_in, d_out)), rng.normal(size=2 * d_out))
    order = np.argsort(-e, axis=1, kind="stable")  # each query's ranking of the keys
    assert (order == order[0]).all()  # the same ranking for every query
    assert len(set(gnn.top_neighbour(e).tolist())) == 1


def test_dot_product_and_gatv2_rank_dynamically():
    s = gnn.ranking_comparison(n_nodes=6, d=4, seed=2)
    assert len(set(gnn.top_neighbour(s["gat"]).tolist())) == 1
    assert len(set(gnn.top_neighbour(s["dot-product"]).tolist())) > 1
    assert len(set(gnn.top_neighbour(s["gatv2"]).tolist())) > 1


def test_shared_top_fraction_counts_graphs_by_hand():
    frac = gnn.shared_top_fraction(20, n_nodes=5, d=3, seed=7)
    by_hand = {name: 0 for name in frac}
    for t in range(20):
        for name, e in gnn.ranking_comparison(5, 3, seed=7 + t).items():
            by_hand[name] += len(set(np.argmax(e, axis=1).tolist())) == 1
    assert frac == {name: c / 20 for name, c in by_hand.items()}
    assert frac["gat"] == 1.0 and frac["dot-product"] < 1.0


def test_top_neighbour_respects_mask():
    e = np.array([[5.0, 1.0, 0.0], [5.0, 1.0, 0.0], [5.0, 1.0, 0.0]])
    mask = np.array([[True, True, True], [False, True, True], [False, False, False]])
    np.testing.assert_array_equal(gnn.top_neighbour(e, mask), [0, 1, -1])
