"""The variance law on real-shaped inputs at initialisation: init_spread against a loop, the law's slopes on
independent inputs, and the band's exponents against a scan."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attention_course.chapters.scaling.init_spread import InitSpread, band_exponents, init_spread, spread_slopes


def test_init_spread_is_the_loop_over_rows_and_keys():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 7, 12))
    valid = np.ones((2, 7), bool)
    valid[1, 5:] = False  # padding in the second sequence
    r = init_spread(x, valid, [3, 8], seeds=[4])
    for b, d in enumerate([3, 8]):
        W_q, W_k = np.random.default_rng([4, d]).normal(scale=1 / math.sqrt(12), size=(2, 12, d))
        rows = []
        for s in range(2):
            n = int(valid[s].sum())
            for i in range(n):
                scores = [float(x[s, i] @ W_q @ (x[s, j] @ W_k)) for j in range(n)]
                rows.append(np.std(scores))
        assert r.unscaled[0, b] == pytest.approx(np.median(rows), rel=1e-12)
        assert r.scaled[0, b] == pytest.approx(np.median(rows) / math.sqrt(d), rel=1e-12)


def test_independent_inputs_follow_the_law():
    """Independent inputs: the unscaled spread grows like sqrt(d_k) and the scaled one does not grow."""
    x = np.random.default_rng(0).normal(size=(4, 40, 128))
    r = init_spread(x, None, [8, 32, 128, 512], seeds=[0, 1])
    unscaled, scaled = spread_slopes(r)
    assert np.all(np.abs(unscaled - 0.5) < 0.05) and np.all(np.abs(scaled) < 0.05)


def test_the_slopes_see_a_spread_that_grows():
    dims = np.array([8, 64, 512])
    grows = InitSpread(dims, np.stack([dims ** 1.0, dims ** 0.5]), np.stack([dims ** 0.5, dims ** 0.0]))
    unscaled, scaled = spread_slopes(grows)
    np.testing.assert_allclose(unscaled, [1.0, 0.5]) and np.testing.assert_allclose(scaled, [0.5, 0.0])


@pytest.mark.parametrize("median,d_k,band", [(7.56, 32, 3.0), (13.2, 64, 3.0), (2.0, 16, 1.5)])
def test_band_exponents_match_a_scan(median, d_k, band):
    lo, hi = band_exponents(median, d_k, band)
    p = np.linspace(-1, 2, 30001)
    inside = p[(median / d_k ** p >= 1 / band) & (median / d_k ** p <= band)]
    assert lo == pytest.approx(inside.min(), abs=2e-4) and hi == pytest.approx(inside.max(), abs=2e-4)


def test_bad_input_is_named():
    with pytest.raises(Exception, match=r"x has shape \(3, 4\); expected \(B, T, D\)"):
        init_spread(np.zeros((3, 4)), None, [2], [0])
    with pytest.raises(ValueError, match="need a positive median"):
        band_exponents(0.0, 32)
