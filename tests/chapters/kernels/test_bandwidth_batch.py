"""fit_bandwidths fits several data sets at once; each fit must be the one fit_bandwidth makes alone."""
import numpy as np
import pytest
import torch

from attention_course.chapters.kernels.learning import fit_bandwidth, fit_bandwidths
from attention_course.chapters.kernels.smoothing import nadaraya_watson, sine_data
from attention_course.core._backend import ShapeError


def _reference_fit(x, y, leave_one_out, steps, lr):
    """The fit written against the chapter's estimator and torch.optim.Adam, one data set at a time."""
    x_t, y_t = (torch.as_tensor(a, dtype=torch.float64) for a in (x, y))
    w = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([w], lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        pred, _ = nadaraya_watson(x_t * w, x_t * w, y_t, leave_one_out=leave_one_out)  # (n,)
        ((pred - y_t) ** 2).mean().backward()
        opt.step()
    return abs(w.item())


@pytest.mark.parametrize("leave_one_out", [True, False])
def test_each_batched_fit_is_its_own_fit(leave_one_out):
    sets = [sine_data(n=20, noise=1.0, seed=s) for s in (1, 2, 3)]
    fits = fit_bandwidths([d.x_train for d in sets], [d.y_train for d in sets], leave_one_out, steps=30, lr=0.05)
    for d, f in zip(sets, fits):
        alone = fit_bandwidth(d.x_train, d.y_train, leave_one_out, steps=30, lr=0.05)
        np.testing.assert_array_equal(f.w_history, alone.w_history)  # one code path: bit for bit
        # against torch.optim.Adam on the estimator itself: float64 round-off over 30 steps, far below 1e-10
        assert abs(f.w - _reference_fit(d.x_train, d.y_train, leave_one_out, 30, 0.05)) < 1e-10
    assert len({f.w for f in fits}) == 3  # the sets do not share a width


def test_a_set_does_not_move_the_others():
    sets = [sine_data(n=20, seed=s) for s in (4, 5)]
    pair = fit_bandwidths([d.x_train for d in sets], [d.y_train for d in sets], steps=20)
    alone = fit_bandwidths([sets[1].x_train], [sets[1].y_train], steps=20)[0]
    np.testing.assert_allclose(pair[1].w_history, alone.w_history, rtol=0, atol=1e-14)


def test_bad_input_names_the_shapes():
    d = sine_data(n=20, seed=0)
    with pytest.raises(ShapeError, match=r"\(20,\).*\(19,\)|\(19,\).*\(20,\)"):
        fit_bandwidths([d.x_train, d.x_train[:-1]], [d.y_train, d.y_train[:-1]])
    with pytest.raises(ValueError, match="same number"):
        fit_bandwidths([d.x_train], [])
