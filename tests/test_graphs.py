"""Tests for attention_course.graphs: attention as message passing on a graph."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course import attention as att
from attention_course import graphs as g
from attention_course._backend import ShapeError

SETTINGS = settings(max_examples=40, deadline=None)


def _stochastic(rng, *shape):
    """Random row-stochastic matrices (last axis sums to 1)."""
    w = rng.random(shape)
    return w / w.sum(axis=-1, keepdims=True)


# ------------------------------------------------------------ graphs and masks
def test_adjacency_convention_row_is_receiver():
    w = np.array([[0.7, 0.3, 0.0], [0.0, 0.0, 1.0], [0.05, 0.5, 0.45]])
    A = g.attention_adjacency(w, threshold=0.1)
    np.testing.assert_array_equal(A, [[0.7, 0.3, 0.0], [0.0, 0.0, 1.0], [0.0, 0.5, 0.45]])
    edges = g.attention_edges(A)
    # (source j, target i, weight A[i, j]): node 2 sends its message to node 1 with weight 1
    assert (2, 1, 1.0) in edges and (1, 0, 0.3) in edges
    assert len(edges) == 5
    assert all(A[i, j] == wgt for j, i, wgt in edges)


def test_banded_mask_table():
    expected = np.array(
        [[1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 1], [0, 1, 1, 1, 1], [0, 0, 1, 1, 1]], bool
    )
    np.testing.assert_array_equal(g.banded_mask(5, 2), expected)
    np.testing.assert_array_equal(g.banded_mask(5, 2, causal=True), np.tril(expected))
    np.testing.assert_array_equal(g.banded_mask(4, 0), np.eye(4, dtype=bool))


def test_topology_masks():
    np.testing.assert_array_equal(g.topology_mask("complete", 3), np.ones((3, 3), bool))
    np.testing.assert_array_equal(g.topology_mask("causal", 4), np.tril(np.ones((4, 4), bool)))
    band = np.abs(np.subtract.outer(range(6), range(6))) <= 1
    np.testing.assert_array_equal(g.topology_mask("banded", 6, window=1), band)
    A = np.array([[0, 2.0, 0], [0, 0, 0], [1, 1, 0]])
    m = g.topology_mask("adjacency", 3, adjacency=A)
    assert m.dtype == np.bool_
    np.testing.assert_array_equal(m, A != 0)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: g.banded_mask(5, -1), r"window=-1; expected an integer window >= 0"),
        (lambda: g.banded_mask(0, 1), r"T=0; expected a positive integer"),
        (lambda: g.topology_mask("banded", 5), r"needs a window"),
        (lambda: g.topology_mask("star", 5), r"kind='star'"),
        (lambda: g.topology_mask("adjacency", 4, adjacency=np.ones((3, 3))), r"shape \(3, 3\) but T=4"),
        (
            lambda: g.topology_mask("adjacency", 3, adjacency=np.ones((3, 2))),
            r"shape \(3, 2\); expected a square",
        ),
        (lambda: g.receptive_field(np.ones((3, 4), bool), 2), r"mask has shape \(3, 4\)"),
        (lambda: g.receptive_field(np.ones((3, 3), bool), -1), r"n_layers=-1"),
        (lambda: g.attention_rollout(np.ones((2, 3, 4))), r"shape \(2, 3, 4\); expected \(L, T, T\)"),
        (lambda: g.attention_rollout(np.ones((3, 3))), r"shape \(3, 3\); expected \(L, T, T\)"),
        (lambda: g.attention_flow(np.ones((1, 2, 2)), method="bfs"), r"method='bfs'"),
        (lambda: g.rank_one_residual(np.ones(4)), r"x has shape \(4,\)"),
    ],
)
def test_errors_name_shapes(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_message_passing_shape_errors():
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(4, 3)), rng.normal(size=(5, 3)), rng.normal(size=(5, 2))
    with pytest.raises(ShapeError, match=r"k \(5, 2\)"):
        g.message_passing(q, k[:, :2], v, np.ones((4, 5), bool))
    with pytest.raises(ShapeError, match=r"v \(4, 2\)"):
        g.message_passing(q, k, v[:4], np.ones((4, 5), bool))
    with pytest.raises(ShapeError, match=r"mask has shape \(4, 4\).*expected bool \(4, 5\)"):
        g.message_passing(q, k, v, np.ones((4, 4), bool))
    with pytest.raises(ShapeError, match=r"dtype float64"):
        g.message_passing(q, k, v, np.ones((4, 5)))


# ------------------------------------------------------------- message passing
def _masks(T, rng):
    adj = rng.random((T, T)) < 0.4
    adj_empty_row = adj.copy()
    adj_empty_row[1] = False  # node 1 receives no message: output 0, like the package
    return {
        "complete": g.topology_mask("complete", T),
        "causal": g.topology_mask("causal", T),
        "banded": g.banded_mask(T, 1),
        "causal-banded": g.banded_mask(T, 2, causal=True),
        "adjacency+self": adj | np.eye(T, dtype=bool),
        "adjacency-empty-row": adj_empty_row,
    }


MASK_NAMES = ["complete", "causal", "banded", "causal-banded", "adjacency+self", "adjacency-empty-row"]


@pytest.mark.parametrize("name", MASK_NAMES)
def test_gnn_form_equals_attention(name):
    rng = np.random.default_rng(1)
    T, d_k, d_v = 7, 5, 3
    mask = _masks(T, rng)[name]
    q, k, v = rng.normal(size=(T, d_k)), rng.normal(size=(T, d_k)), rng.normal(size=(T, d_v))
    out, alpha = g.message_passing(q, k, v, mask)
    ref_out, ref_w = att.scaled_dot_product_attention(q, k, v, mask=mask)
    np.testing.assert_allclose(out, ref_out, rtol=0, atol=1e-12)
    np.testing.assert_allclose(alpha, ref_w, rtol=0, atol=1e-12)
    if mask.any(axis=1).all():  # torch's reference agrees where no row is fully masked
        t = [torch.as_tensor(a) for a in (q, k, v)]
        ref = F.scaled_dot_product_attention(*t, attn_mask=torch.as_tensor(mask))
        torch.testing.assert_close(torch.as_tensor(out), ref, rtol=0, atol=1e-12)
    assert np.all(alpha[~mask] == 0)


@SETTINGS
@given(T=st.integers(1, 8), S=st.integers(1, 8), d=st.integers(1, 6), seed=st.integers(0, 10**6))
def test_gnn_form_equals_attention_property(T, S, d, seed):
    rng = np.random.default_rng(seed)
    q, k, v = rng.normal(size=(T, d)), rng.normal(size=(S, d)), rng.normal(size=(S, 2))
    mask = rng.random((T, S)) < 0.6
    out, alpha = g.message_passing(q, k, v, mask)
    ref_out, ref_w = att.scaled_dot_product_attention(q, k, v, mask=mask)
    np.testing.assert_allclose(out, ref_out, rtol=0, atol=1e-12)
    np.testing.assert_allclose(alpha.sum(axis=1), mask.any(axis=1).astype(float), atol=1e-12)


def test_message_passing_custom_score_is_a_gaussian_kernel():
    rng = np.random.default_rng(2)
    q, k, v = rng.normal(size=(5, 3)), rng.normal(size=(5, 3)), rng.normal(size=(5, 2))
    mask = g.banded_mask(5, 1)
    out, alpha = g.message_passing(q, k, v, mask, score=lambda a, b: -((a - b) ** 2).sum(-1) / 2)
    d2 = ((q[:, None, :] - k[None, :, :]) ** 2).sum(-1)  # (T, S) squared distances
    w = np.where(mask, np.exp(-d2 / 2), 0.0)
    w = w / w.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(alpha, w, atol=1e-13)
    np.testing.assert_allclose(out, w @ v, atol=1e-13)


# ------------------------------------------------------------ receptive field
def _jacobian_support(x, params, mask, skip=False):
    """Which inputs each output of our masked stack depends on, from autograd (float64)."""

    def stack(z):
        for p in params:
            W = {n: torch.as_tensor(w) for n, w in p.items()}
            q, k, v = z @ W["W_q"], z @ W["W_k"], z @ W["W_v"]
            h, _ = att.scaled_dot_product_attention(q, k, v, mask=torch.as_tensor(mask))
            z = z + h if skip else h
        return z

    J = torch.autograd.functional.jacobian(stack, torch.as_tensor(x))  # (T, d, T, d)
    return (J.abs().amax(dim=(1, 3)) > 0).numpy()


@pytest.mark.parametrize(
    "kind, window", [("banded", 1), ("banded", 2), ("causal", None), ("causal-banded", 1)]
)
@pytest.mark.parametrize("n_layers", [1, 2, 3])
def test_receptive_field_equals_jacobian_support(kind, window, n_layers):
    T, d = 8, 3
    mask = g.topology_mask(kind, T, window=window)
    x = np.random.default_rng(n_layers).normal(size=(T, d))
    params = g.init_stack_params(d, n_layers, seed=10 + n_layers)
    R = g.receptive_field(mask, n_layers)
    np.testing.assert_array_equal(_jacobian_support(x, params, mask), R)
    np.testing.assert_array_equal(_jacobian_support(x, params, mask, skip=True), R)
    np.testing.assert_array_equal(g.receptive_field(mask, n_layers, skip=True), R)
    np.testing.assert_array_equal(g.dependency_support(x, params, mask), R)
    # closed forms: a band of width L*w, or the lower triangle (one layer already reaches all j <= i)
    offset = np.subtract.outer(np.arange(T), np.arange(T))  # i - j
    if kind == "banded":
        np.testing.assert_array_equal(R, np.abs(offset) <= n_layers * window)
    elif kind == "causal":
        np.testing.assert_array_equal(R, offset >= 0)
    else:
        np.testing.assert_array_equal(R, (offset >= 0) & (offset <= n_layers * window))


def test_receptive_field_the_identity_comes_from_the_query():
    # a ring without self loops, two in-neighbours each: the query adds node i itself
    T, d = 6, 3
    ring = np.roll(np.eye(T, dtype=bool), 1, axis=1) | np.roll(np.eye(T, dtype=bool), -1, axis=1)
    x = np.random.default_rng(0).normal(size=(T, d))
    params = g.init_stack_params(d, 2, seed=1)
    support = _jacobian_support(x, params, ring)
    A_plus_I = (ring | np.eye(T, dtype=bool)).astype(int)
    np.testing.assert_array_equal(support, np.linalg.matrix_power(A_plus_I, 2) > 0)
    np.testing.assert_array_equal(support, g.receptive_field(ring, 2))
    assert not np.array_equal(support, np.linalg.matrix_power(ring.astype(int), 2) > 0)


def test_receptive_field_single_neighbour_ignores_the_query():
    # each node hears only its right neighbour: softmax over one key is 1, the query is lost
    T, d = 5, 3
    shift = np.roll(np.eye(T, dtype=bool), 1, axis=1)
    x = np.random.default_rng(0).normal(size=(T, d))
    params = g.init_stack_params(d, 2, seed=1)
    support = _jacobian_support(x, params, shift)
    np.testing.assert_array_equal(support, np.linalg.matrix_power(shift.astype(int), 2) > 0)
    np.testing.assert_array_equal(support, g.receptive_field(shift, 2))
    # with a skip connection the node keeps itself again: (A + I)^L
    A_plus_I = (shift | np.eye(T, dtype=bool)).astype(int)
    skip_support = _jacobian_support(x, params, shift, skip=True)
    np.testing.assert_array_equal(skip_support, np.linalg.matrix_power(A_plus_I, 2) > 0)
    np.testing.assert_array_equal(skip_support, g.receptive_field(shift, 2, skip=True))


def test_receptive_field_empty_row_depends_on_nothing():
    mask = g.banded_mask(4, 1)
    mask[2] = False  # node 2 receives no message: output 0
    x = np.random.default_rng(1).normal(size=(4, 3))
    support = _jacobian_support(x, g.init_stack_params(3, 1, seed=2), mask)
    assert not support[2].any()
    np.testing.assert_array_equal(support, g.receptive_field(mask, 1))


def test_receptive_field_zero_layers_and_complete_graph():
    np.testing.assert_array_equal(g.receptive_field(g.banded_mask(4, 1), 0), np.eye(4, dtype=bool))
    assert g.receptive_field(g.topology_mask("complete", 6), 1).all()


# --------------------------------------------------------- rollout and flow
@pytest.mark.parametrize("L, T", [(1, 3), (3, 5), (6, 2)])
def test_rollout_of_identity_is_identity(L, T):
    np.testing.assert_allclose(g.attention_rollout(np.stack([np.eye(T)] * L)), np.eye(T), atol=1e-15)
    np.testing.assert_allclose(g.attention_flow(np.stack([np.eye(T)] * L)), np.eye(T), atol=1e-15)


@SETTINGS
@given(L=st.integers(1, 5), T=st.integers(1, 7), h=st.integers(1, 3), seed=st.integers(0, 10**6))
def test_rollout_rows_sum_to_one(L, T, h, seed):
    w = _stochastic(np.random.default_rng(seed), L, h, T, T)
    r = g.attention_rollout(w)
    np.testing.assert_allclose(r.sum(axis=1), np.ones(T), atol=1e-12)
    assert np.all(r >= 0)
    np.testing.assert_allclose(r, g.attention_rollout(w.mean(axis=1)), atol=1e-15)  # heads averaged


def test_rollout_matches_hand_product_in_layer_order():
    rng = np.random.default_rng(3)
    A1, A2, A3 = _stochastic(rng, 3, 4, 4)
    I = np.eye(4)
    expected = (0.5 * A3 + 0.5 * I) @ (0.5 * A2 + 0.5 * I) @ (0.5 * A1 + 0.5 * I)
    np.testing.assert_allclose(g.attention_rollout(np.stack([A1, A2, A3])), expected, atol=1e-15)


def test_rollout_renormalises_a_fully_masked_row():
    w = _stochastic(np.random.default_rng(4), 2, 3, 3)
    w[:, 2] = 0.0  # query 2 attends to nothing (weights 0 by the package's rule)
    r = g.attention_rollout(w)
    np.testing.assert_allclose(r.sum(axis=1), 1.0, atol=1e-15)
    np.testing.assert_allclose(r[2], [0.0, 0.0, 1.0], atol=1e-15)


def _brute_min_cut(aug):
    """Min cut of the layered graph for every (output i, input j), by enumerating all cuts."""
    L, T, _ = aug.shape
    n = (L + 1) * T
    cap = np.zeros((n, n))
    for l in range(L):
        for i, j in itertools.product(range(T), repeat=2):
            cap[l * T + j, (l + 1) * T + i] = aug[l, i, j]
    out = np.zeros((T, T))
    for i, j in itertools.product(range(T), repeat=2):
        s, t = j, L * T + i
        others = [u for u in range(n) if u not in (s, t)]
        best = np.inf
        for side in itertools.product([0, 1], repeat=len(others)):
            in_s = np.zeros(n, bool)
            in_s[s] = True
            in_s[[u for u, b in zip(others, side) if b]] = True
            best = min(best, cap[in_s][:, ~in_s].sum())
        out[i, j] = best
    return out


def _brute_widest(aug):
    L, T, _ = aug.shape
    out = np.zeros((T, T))
    for i, j in itertools.product(range(T), repeat=2):
        for mid in itertools.product(range(T), repeat=L - 1):
            path = (j, *mid, i)  # positions at layers 0..L
            out[i, j] = max(out[i, j], min(aug[l, path[l + 1], path[l]] for l in range(L)))
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_attention_flow_equals_brute_force_min_cut(seed):
    rng = np.random.default_rng(seed)
    w = _stochastic(rng, 2, 3, 3)
    w[rng.random(w.shape) < 0.3] = 0.0  # sparse maps make the cuts non-trivial
    aug = 0.5 * w + 0.5 * np.eye(3)
    aug = aug / aug.sum(axis=-1, keepdims=True)
    flow = g.attention_flow(w)
    np.testing.assert_allclose(flow, _brute_min_cut(aug), atol=1e-12)  # max-flow = min-cut
    widest = g.attention_flow(w, method="widest")
    np.testing.assert_allclose(widest, _brute_widest(aug), atol=1e-15)
    assert np.all(widest <= flow + 1e-12) and np.all(flow <= 1 + 1e-12)


def test_max_flow_needs_reverse_edges():
    # s=0 -> {1, 2}; 1 -> {3, 4}; 2 -> 3 only; {3, 4} -> t=5, unit capacities. The first
    # BFS path 0-1-3-5 blocks 2; only pushing flow back along 3 -> 1 reaches the maximum 2.
    cap = np.zeros((6, 6))
    for u, w in [(0, 1), (0, 2), (1, 3), (1, 4), (2, 3), (3, 5), (4, 5)]:
        cap[u, w] = 1.0
    assert g._max_flow(cap, 0, 5) == pytest.approx(2.0, abs=1e-12)


@pytest.mark.parametrize("seed", [4])
def test_attention_flow_three_layers_brute_force(seed):
    rng = np.random.default_rng(seed)
    w = _stochastic(rng, 3, 3, 3)
    w[rng.random(w.shape) < 0.4] = 0.0
    w[w.sum(axis=-1) == 0] = 1 / 3
    aug = 0.5 * w + 0.5 * np.eye(3)
    aug = aug / aug.sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(g.attention_flow(w), _brute_min_cut(aug), atol=1e-12)


def test_widest_path_three_layers_brute_force():
    w = _stochastic(np.random.default_rng(5), 3, 4, 4)
    aug = (0.5 * w + 0.5 * np.eye(4)) / (0.5 * w + 0.5 * np.eye(4)).sum(-1, keepdims=True)
    np.testing.assert_allclose(g.attention_flow(w, method="widest"), _brute_widest(aug), atol=1e-15)


# ------------------------------------------------------------- GCN and GAT
def test_gcn_hand_computation_on_a_path():
    A = np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], float)  # path 0 - 1 - 2
    s6 = 1 / np.sqrt(6)  # degrees of A + I are 2, 3, 2
    expected = np.array([[1 / 2, s6, 0], [s6, 1 / 3, s6], [0, s6, 1 / 2]])
    np.testing.assert_allclose(g.gcn_normalise(A), expected, atol=1e-15)
    x = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]])
    W = np.array([[1.0], [-1.0]])
    # x W = [1, -1, 0]; row 1: s6*1 + (1/3)*(-1) + s6*0
    np.testing.assert_allclose(g.gcn_layer(x, A, W)[:, 0], [0.5 - s6, s6 - 1 / 3, -s6], atol=1e-15)
    with pytest.raises(ShapeError, match=r"x has shape \(2, 2\).*graph has 3 nodes"):
        g.gcn_layer(x[:2], A, W)


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
        assert abs(g.gat_scores(x, W, a)[i, j] - e.item()) < 1e-13
        e2 = torch.as_tensor(a2) @ F.leaky_relu(torch.cat([xt[i], xt[j]]) @ torch.as_tensor(W2), 0.2)
        assert abs(g.gatv2_scores(x, W2, a2)[i, j] - e2.item()) < 1e-13
    with pytest.raises(ShapeError, match=r"a has shape \(4,\).*expected a \(8,\)"):
        g.gat_scores(x, W, a[:4])


def test_gat_layer_normalises_over_in_neighbours():
    rng = np.random.default_rng(7)
    x, W, a = rng.normal(size=(6, 3)), rng.normal(size=(3, 2)), rng.normal(size=4)
    mask = g.banded_mask(6, 1)
    out, alpha = g.gat_layer(x, W, a, mask)
    np.testing.assert_allclose(alpha.sum(axis=1), 1.0, atol=1e-14)
    assert np.all(alpha[~mask] == 0)
    np.testing.assert_allclose(out, alpha @ (x @ W), atol=1e-14)
    out2, alpha2 = g.gatv2_layer(x, rng.normal(size=(6, 2)), rng.normal(size=2), mask)
    assert out2.shape == (6, 2) and np.all(alpha2[~mask] == 0)


@SETTINGS
@given(N=st.integers(2, 8), d_in=st.integers(1, 5), d_out=st.integers(1, 5), seed=st.integers(0, 10**6))
def test_gat_ranking_is_static(N, d_in, d_out, seed):
    rng = np.random.default_rng(seed)
    e = g.gat_scores(rng.normal(size=(N, d_in)), rng.normal(size=(d_in, d_out)), rng.normal(size=2 * d_out))
    order = np.argsort(-e, axis=1, kind="stable")  # each query's ranking of the keys
    assert (order == order[0]).all()  # the same ranking for every query
    assert len(set(g.top_neighbour(e).tolist())) == 1


def test_dot_product_and_gatv2_rank_dynamically():
    s = g.ranking_comparison(n_nodes=6, d=4, seed=2)
    assert len(set(g.top_neighbour(s["gat"]).tolist())) == 1
    assert len(set(g.top_neighbour(s["dot-product"]).tolist())) > 1
    assert len(set(g.top_neighbour(s["gatv2"]).tolist())) > 1


def test_top_neighbour_respects_mask():
    e = np.array([[5.0, 1.0, 0.0], [5.0, 1.0, 0.0], [5.0, 1.0, 0.0]])
    mask = np.array([[True, True, True], [False, True, True], [False, False, False]])
    np.testing.assert_array_equal(g.top_neighbour(e, mask), [0, 1, -1])


# --------------------------------------------------------- rank collapse
def test_rank_one_residual_closed_form_and_minimiser():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(6, 4))
    r = g.rank_one_residual(X)
    assert r == pytest.approx(np.sqrt(X.var(axis=0).sum() * 6) / np.linalg.norm(X), rel=1e-12)
    for _ in range(20):  # no other x does better than the mean row
        x = X.mean(axis=0) + 0.1 * rng.normal(size=4)
        assert np.linalg.norm(X - x[None, :]) / np.linalg.norm(X) > r
    assert g.rank_one_residual(np.outer(np.ones(5), rng.normal(size=3))) < 1e-15


def test_pure_attention_collapses_and_skips_do_not():
    pure = g.rank_collapse(n_tokens=16, d_model=64, n_layers=5, seed=0)
    assert np.all(np.diff(pure[:5]) < 0)  # strictly decreasing until float64's floor
    assert pure[-1] < 1e-12
    assert pure[2] < pure[1] ** 2  # faster than geometric: doubly exponential
    skip = g.rank_collapse(n_tokens=16, d_model=64, n_layers=12, seed=0, skip=True)
    assert skip[-1] > 1e-2 and skip[-1] > 1e8 * pure[-1]
    full = g.rank_collapse(n_layers=12, seed=0, skip=True, mlp=True, layernorm=True)
    assert full[-1] > 1e-2


def test_attention_stack_numpy_and_torch_agree():
    x = np.random.default_rng(9).normal(size=(5, 8))
    params = g.init_stack_params(8, 2, seed=3, mlp=True)
    mask = g.banded_mask(5, 1)
    for kw in ({}, {"skip": True, "mlp": True, "layernorm": True}):
        a = g.attention_stack(x, params, mask, **kw)[-1]
        b = g.attention_stack(torch.as_tensor(x), params, mask, **kw)[-1]
        torch.testing.assert_close(torch.as_tensor(a), b, rtol=0, atol=1e-13)
    # one pure layer by hand
    p = params[0]
    q, k, v = x @ p["W_q"], x @ p["W_k"], x @ p["W_v"]
    s = np.where(mask, q @ k.T / np.sqrt(8), -np.inf)
    w = np.exp(s - s.max(1, keepdims=True))
    w /= w.sum(1, keepdims=True)
    np.testing.assert_allclose(g.attention_stack(x, params[:1], mask)[1], w @ v, atol=1e-13)
    with pytest.raises(ShapeError, match=r"x has shape \(5, 7\); expected \(T, 8\)"):
        g.attention_stack(x[:, :7], params)


# --------------------------------------------------------- chapter 5 exercises
# (references, mutants, stubs and alternatives are covered for every exercise
# in tests/test_exercises.py; this is the chapter-specific feedback)
from attention_course.exercises._core import evaluate  # noqa: E402


def test_message_passing_exercise_names_the_empty_neighbourhood():
    def no_empty_row_guard(q, k, v, mask):
        s = np.where(mask, q @ k.T / np.sqrt(q.shape[1]), -np.inf)
        e = np.exp(s - s.max(axis=1, keepdims=True))  # NaN on the lonely node's row
        return e / e.sum(axis=1, keepdims=True) @ v

    assert "no in-neighbours" in evaluate("message-passing-step", no_empty_row_guard).message
