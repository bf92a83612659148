"""Flagged slider of chapter 2 (learned-width, issue 19) and the self-weighted bandwidth fit behind it.

The numbers and the flag come from the lens ``kernels.learning`` and the stored data from the
chapter's ``runs`` module. The figure's deciding numbers are checked against an independent
computation (closed-form Nadaraya-Watson in numpy, the package's own fits), the flag against the
line the verdict draws, and the HTML.
"""

from __future__ import annotations

import json
import re
import statistics

import numpy as np
import pytest

from attention_course.chapters import kernels
from attention_course.chapters.kernels import sliders as fk
from attention_course.chapters.kernels import learning as kl
from attention_course.chapters.kernels.learning import fit_bandwidth
from attention_course.chapters.kernels.smoothing import sine_data

# float64 throughout: round-off is ~1e-16 per operation; these bounds leave room for a few hundred
# accumulated operations (sums over 40-256 terms, 300 Adam steps that contract or move by at most lr).
TIGHT = 1e-10


def _spec(fig) -> dict:
    m = re.search(rf'<script type="application/json" id="{fig.name}-data">(.*?)</script>', fig.to_html(), re.DOTALL)
    return json.loads(m.group(1).replace("<\\/", "</"))


def _nw_numpy(x_query, x_train, y_train, w):
    """Gaussian Nadaraya-Watson with kernel exp(-((q - x) w)^2 / 2), written out in numpy."""
    K = np.exp(-0.5 * ((x_query[:, None] - x_train[None, :]) * w) ** 2)  # (T, S)
    return K @ y_train / K.sum(axis=1)


# ------------------------------------------------------------------ learned-width
@pytest.fixture(scope="module")
def lw():
    return fk.load_self_weight_sweep()


def test_self_weight_ends_are_the_chapters_two_objectives():
    data = sine_data(seed=3)
    for alpha, loo in ((0.0, True), (1.0, False)):
        ours = fit_bandwidth(data.x_train, data.y_train, self_weight=alpha, steps=40)
        ref = fit_bandwidth(data.x_train, data.y_train, leave_one_out=loo, steps=40)
        np.testing.assert_allclose(ours.w_history, ref.w_history, rtol=TIGHT)
        np.testing.assert_allclose(ours.loss_history, ref.loss_history, rtol=TIGHT)


def test_self_weight_loss_is_the_written_out_estimate():
    data = sine_data(seed=0)
    x, y, alpha, w = data.x_train, data.y_train, 0.3, 2.0
    K = np.exp(-0.5 * ((x[:, None] - x[None, :]) * w) ** 2)  # (n, n), diagonal 1
    np.fill_diagonal(K, alpha)  # own weight alpha * kappa(x_i, x_i) = alpha
    expected = np.mean((K @ y / K.sum(1) - y) ** 2)
    fit = fit_bandwidth(x, y, self_weight=alpha, steps=1, w_init=w)
    assert fit.loss_history[0] == pytest.approx(expected, rel=TIGHT)


@pytest.mark.extended  # recomputes the shipped slider data
def test_stored_sweep_matches_the_fits(lw):
    data = sine_data(n=40, noise=1.0, seed=lw["seed"])
    for i in (0, 4, 10):  # both ends and the flag's neighbourhood; each fit takes about 0.1 s
        w = fit_bandwidth(data.x_train, data.y_train, self_weight=lw["alpha"][i], **lw["fit"]).w
        assert w == pytest.approx(lw["w"][i], rel=1e-9)  # stored on another run of the same float64 fit
    for w, m in zip(lw["w"], lw["test_mse"]):
        pred = _nw_numpy(data.x_test, data.x_train, data.y_train, w)
        assert np.mean((pred - data.y_test) ** 2) == pytest.approx(m, rel=TIGHT)
    grid = np.array([np.mean((_nw_numpy(data.x_test, data.x_train, data.y_train, w) - data.y_test) ** 2)
                     for w in lw["w_grid"]])
    assert lw["mse_best"] == pytest.approx(grid.min(), rel=TIGHT)
    # the chapter's verdict: leave-one-out w = 2.27 (test MSE 0.210), self-included w = 7.26 (0.490)
    assert lw["w"][0] == pytest.approx(2.27, abs=0.01) and lw["w"][-1] == pytest.approx(7.26, abs=0.01)
    assert np.all(np.diff(lw["w"]) > 0)  # the more a point sees itself, the narrower the learned kernel


@pytest.mark.extended
def test_stored_draw_ratio_matches_a_live_draw(lw):
    d = sine_data(n=40, noise=1.0, seed=lw["draws"][0])
    w = fit_bandwidth(d.x_train, d.y_train, leave_one_out=True, **lw["fit"]).w
    best = min(np.mean((_nw_numpy(d.x_test, d.x_train, d.y_train, g) - d.y_test) ** 2) for g in lw["w_grid"])
    ratio = np.mean((_nw_numpy(d.x_test, d.x_train, d.y_train, w) - d.y_test) ** 2) / best
    assert ratio == pytest.approx(lw["draw_ratio"][0], rel=1e-9)


@pytest.mark.extended
def test_experiment_reproduces_the_stored_sweep(lw):
    """kernels.self_weight_sweep is what wrote the file: one alpha and one draw, live."""
    live = kernels.self_weight_sweep([lw["alpha"][0]], seed=lw["seed"], draws=lw["draws"][:1], **lw["fit"])
    assert live["w"][0] == pytest.approx(lw["w"][0], rel=1e-9)  # as above: another run of the same float64 fit
    assert live["draw_ratio"][0] == pytest.approx(lw["draw_ratio"][0], rel=1e-9)
    assert live["mse_best"] == pytest.approx(lw["mse_best"], rel=TIGHT)
    # np.geomspace is exp of a linspace of logs: numpy's vectorised exp/log differ by an ulp or two
    # between builds and CPUs, so the grid matches to a few ulps (8 eps), not bit for bit.
    np.testing.assert_allclose(live["w_grid"], lw["w_grid"], rtol=8 * np.finfo(float).eps, atol=0)


def test_learned_width_flag_is_where_the_good_range_ends(lw):
    fig = fk.learned_width_explorer()
    limit = lw["mse_best"] * statistics.median(lw["draw_ratio"])  # the good range: the draws' median ratio
    inside = [m <= limit for m in lw["test_mse"]]
    assert inside[0] and not inside[-1]  # leave-one-out is a good width, self-included is not
    expected = inside.index(False)
    assert fig.flip == expected and all(inside[:expected])
    assert kl.learned_width_flip(lw) == expected and kl.good_range_limit(lw) == pytest.approx(limit, rel=1e-15)
    assert fig.labels[expected] == f"α = {lw['alpha'][expected]:g}"
    spec = _spec(fig)
    for i, frame in enumerate(spec["frames"]):
        learned = frame["data"][3]  # the width learned at this alpha, on the test-error curve
        assert learned["x"][0] == pytest.approx(lw["w"][i], rel=5e-4)  # 4 significant digits
        assert learned["y"][0] == pytest.approx(lw["test_mse"][i], rel=5e-4)
        assert ("<b>outside</b>" in frame["readout"]) == (not inside[i])


def test_learned_width_html():
    a, b = fk.learned_width_explorer().to_html(), fk.learned_width_explorer().to_html()
    assert a == b
    assert 'data-verdict="learned-width"' in a and 'href="#claim-learned-width"' in a
    assert "leaves the good range" in a and 'id="ix-kern-learned-width"' in a


def test_learned_width_bad_input():
    data = sine_data(seed=0)
    with pytest.raises(ValueError, match=r"self_weight=1.5; expected a number in \[0, 1\]"):
        fit_bandwidth(data.x_train, data.y_train, self_weight=1.5)
    with pytest.raises(ValueError, match=r"x has shape \(40,\) and y \(39,\)"):
        fit_bandwidth(data.x_train, data.y_train[:-1], self_weight=0.5)
    with pytest.raises(ValueError, match="no further draws"):
        kl.good_range_limit({"mse_best": 0.2, "draw_ratio": []})


@pytest.mark.parametrize("build", [fk.learned_width_explorer])
def test_figures_are_offline_small_and_captioned(build):
    html = build().to_html()
    assert len(html.encode()) < 1_000_000  # issue 19: a page's interactive data is at most about 1 MB
    assert "<script src" not in html and "http://" not in html and "https://" not in html  # nothing fetched
    assert 'class="ac-ix-fallback" src="data:image/png;base64,' in html and "<figcaption" in html
