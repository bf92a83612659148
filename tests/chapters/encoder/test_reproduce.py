"""reproduce.py: the float32 bound (closed form), the per-layer gaps, and where two encoders first part."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attention_course.core._backend import ShapeError
from attention_course.chapters.encoder.reproduce import (
    UNIT_ROUNDOFF_FLOAT32, Departure, first_departure, float32_bound, layer_bounds, layer_gaps,
)

pytestmark = pytest.mark.numerics  # the float32 dot-product test depends on the CPU's kernels


def test_unit_roundoff_is_half_float32s_epsilon():
    assert UNIT_ROUNDOFF_FLOAT32 == np.finfo(np.float32).eps / 2 == 2.0**-24


def test_float32_bound_closed_form():
    assert float32_bound(11.0, 7, 1536) == 7 * math.sqrt(1536) * 2.0**-24 * 11.0
    assert float32_bound(0.0, 1, 1) == 0.0
    with pytest.raises(ValueError, match="depth=0"):
        float32_bound(1.0, 0, 10)


def test_float32_bound_covers_a_float32_dot_product():
    """The sqrt(n) u |terms| rule against float64, for sums of n random products (the rule's premise)."""
    g = torch.Generator().manual_seed(0)
    for n in (16, 384, 1536):
        a, b = torch.randn(200, n, generator=g), torch.randn(200, n, generator=g)
        err = ((a * b).sum(-1).double() - (a.double() * b.double()).sum(-1)).abs()
        size = (a.double() * b.double()).abs().max(dim=-1).values  # the size of the terms
        assert (err <= float32_bound(1.0, 1, n) * size * 4).all()  # a random walk of n errors, 4 sigma


def test_layer_bounds_use_each_layers_size_and_depth():
    ref = torch.zeros(3, 2, 2, 4, dtype=torch.float64)
    ref[0, 0, 0, 0], ref[1, 1, 0, 1], ref[2, 1, 1, 2] = 2.0, 5.0, 100.0  # the 100 is padding
    b = layer_bounds(ref, n=4, attention_mask=torch.tensor([[1, 1], [1, 0]]))
    np.testing.assert_allclose(b / (2 * 2.0**-24), [1 * 2.0, 2 * 5.0, 0.0])


def test_layer_gaps_and_first_departure():
    ref = torch.zeros(4, 2, 3, 5, dtype=torch.float64)
    ours = ref.clone()
    ours[3, 0, 0, 1] = 1.0  # a late, large gap
    ours[2, 1, 1, 4] = 1e-3  # the first gap above the bound: layer 2, sequence 1, position 1
    ours[1, 0, 2, 0] = 1e-6  # below the bound
    np.testing.assert_allclose(layer_gaps(ours, ref), [0.0, 1e-6, 1e-3, 1.0])
    assert first_departure(ours, ref, None, bound=1e-4) == Departure(2, 1, 1, 1e-3, False)
    assert first_departure(ours, ref, None, bound=[1e-4, 1e-4, 1e-2, 1e-2]) == Departure(3, 0, 0, 1.0, False)
    assert first_departure(ours, ref, None, bound=10.0) is None


def test_first_departure_searches_real_tokens_before_padding_and_catches_nan():
    ref = torch.zeros(2, 1, 3, 2, dtype=torch.float64)
    ours = ref.clone()
    ours[0, 0, 2] = 7.0  # position 2 is padding
    am = torch.tensor([[1, 1, 0]])
    assert first_departure(ours, ref, am, bound=1e-4) == Departure(0, 0, 2, 7.0, True)
    ours[1, 0, 1, 0] = float("nan")
    dep = first_departure(ours, ref, am, bound=1e-4)
    assert (dep.layer, dep.position, dep.padding) == (1, 1, False)


def test_shape_errors_name_both_shapes():
    with pytest.raises(ShapeError, match=r"ours has shape \(2, 1, 3, 2\) and reference has shape \(2, 1, 3, 3\)"):
        layer_gaps(torch.zeros(2, 1, 3, 2), torch.zeros(2, 1, 3, 3))
    with pytest.raises(ShapeError, match=r"attention_mask has shape \(1, 2\); expected \(B, T\) = \(1, 3\)"):
        layer_gaps(torch.zeros(2, 1, 3, 2), torch.zeros(2, 1, 3, 2), torch.ones(1, 2))
