"""Tests for attention_course.chapters.graphs.propagation: masks as topology, message passing, receptive fields."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.core import attention as att
from attention_course.chapters.graphs import propagation as g
from attention_course.core._backend import ShapeError
from attention_course.chapters.graphs.collapse import init_stack_params

SETTINGS = settings(max_examples=40, deadline=None)


# ------------------------------------------------------------ graphs and masks
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


def test_example_topologies_are_the_chapters_five_graphs():
    T = 8
    masks = g.example_topologies(T, np.random.default_rng(0))
    assert list(masks) == ["complete", "causal", "banded, w = 1", "random + self loops", "node 2 isolated"]
    np.testing.assert_array_equal(masks["causal"], np.tril(np.ones((T, T), bool)))
    np.testing.assert_array_equal(masks["banded, w = 1"], g.banded_mask(T, 1))
    expected = (np.random.default_rng(0).random((T, T)) < 0.3) | np.eye(T, dtype=bool)  # the same draws
    np.testing.assert_array_equal(masks["random + self loops"], expected)
    isolated = masks["node 2 isolated"]
    assert not isolated[2].any()
    np.testing.assert_array_equal(np.delete(isolated, 2, axis=0), np.delete(expected, 2, axis=0))
    only_loops = g.example_topologies(T, np.random.default_rng(1), p_edge=0.0)["random + self loops"]
    np.testing.assert_array_equal(only_loops, np.eye(T, dtype=bool))


@pytest.mark.parametrize("name", ["complete", "causal", "banded, w = 1", "random + self loops"])
def test_message_passing_gap_is_the_difference_from_torch_sdpa(name):
    """No mask here has an empty row, so torch's SDPA is an independent reference; both
    sides are float64 sums of at most 8 terms of size < 10: round-off, far below 1e-13."""
    rng = np.random.default_rng(3)
    q, k, v = rng.normal(size=(8, 4)), rng.normal(size=(8, 4)), rng.normal(size=(8, 3))
    mask = g.example_topologies(8, np.random.default_rng(0))[name]
    gap = g.message_passing_gap(q, k, v, mask)
    out_mp, _ = g.message_passing(q, k, v, mask)
    ref = F.scaled_dot_product_attention(*(torch.as_tensor(t) for t in (q, k, v)), attn_mask=torch.as_tensor(mask))
    assert gap < 1e-13 and np.abs(out_mp - ref.numpy()).max() < 1e-13


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
    params = init_stack_params(d, n_layers, seed=10 + n_layers)
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
    params = init_stack_params(d, 2, seed=1)
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
    params = init_stack_params(d, 2, seed=1)
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
    support = _jacobian_support(x, init_stack_params(3, 1, seed=2), mask)
    assert not support[2].any()
    np.testing.assert_array_equal(support, g.receptive_field(mask, 1))


@pytest.mark.parametrize("T, w", [(12, 1), (12, 2), (7, 3)])
def test_band_width_is_layers_times_window_capped(T, w):
    for L in range(5):
        assert g.band_width(g.receptive_field(g.banded_mask(T, w), L)) == min(L * w, T - 1)
    assert g.band_width(np.zeros((3, 3), bool)) == -1
    assert g.band_width(np.eye(3, k=-2, dtype=bool)) == 2


def test_receptive_field_zero_layers_and_complete_graph():
    np.testing.assert_array_equal(g.receptive_field(g.banded_mask(4, 1), 0), np.eye(4, dtype=bool))
    assert g.receptive_field(g.topology_mask("complete", 6), 1).all()


# --------------------------------------------------------- chapter 5 exercises
# (references, mutants, stubs and alternatives are covered for every exercise
# in tests/exercises/test_exercises.py; this is the chapter-specific feedback)
from attention_course.exercises._core import evaluate


def test_message_passing_exercise_names_the_empty_neighbourhood():
    def no_empty_row_guard(q, k, v, mask):
        s = np.where(mask, q @ k.T / np.sqrt(q.shape[1]), -np.inf)
        e = np.exp(s - s.max(axis=1, keepdims=True))  # NaN on the lonely node's row
        return e / e.sum(axis=1, keepdims=True) @ v

    assert "no in-neighbours" in evaluate("message-passing-step", no_empty_row_guard).message


def test_receptive_field_exercise_turns_path_counts_into_booleans():
    """A matrix power of the 0/1 band counts paths: the feedback says to compare it with > 0
    (and not only the generic advice on booleans)."""
    from attention_course.exercises import evaluate

    def counts(T, window, n_layers):
        band = (np.abs(np.arange(T)[:, None] - np.arange(T)[None, :]) <= window).astype(np.int64)
        return np.linalg.matrix_power(band, n_layers)

    result = evaluate("banded-receptive-field", counts)
    assert result.status == "failed" and "counts the paths" in result.message and "`> 0`" in result.message
    assert "attn_mask" not in result.message  # chapter 1's advice on torch's masks is not this exercise's
