"""Flagged slider of chapter 2 (learned-width, issue 19) and the self-weighted bandwidth fit behind it.

The numbers and the flag come from the lens ``kernels.learning`` and the stored data from the
chapter's ``runs`` module. The figure's deciding numbers are checked against an independent
computation (closed-form Nadaraya-Watson in numpy, the package's own fits), the flag against the
line the verdict draws, and the HTML.
"""

from __future__ import annotations

import statistics

import numpy as np
import pytest
import torch

from attention_course.chapters import kernels
from attention_course.chapters.kernels import sliders as fk
from attention_course.chapters.kernels import learning as kl
from attention_course.chapters.kernels import kernel_family as kf
from attention_course.chapters.kernels.learning import fit_bandwidth
from attention_course.chapters.kernels.smoothing import sine_data
from attention_course.chapters.kernels import self_weight as kernels_self_weight
from page_spec import page_spec

# float64 throughout: round-off is ~1e-16 per operation; these bounds leave room for a few hundred
# accumulated operations (sums over 40-256 terms, 300 Adam steps that contract or move by at most lr).
TIGHT = 1e-10


def _nw_numpy(x_query, x_train, y_train, w):
    """Gaussian Nadaraya-Watson with kernel exp(-((q - x) w)^2 / 2), written out in numpy."""
    K = np.exp(-0.5 * ((x_query[:, None] - x_train[None, :]) * w) ** 2)  # (T, S)
    return K @ y_train / K.sum(axis=1)


# ------------------------------------------------------------------ learned-width
@pytest.fixture(scope="module")
def lw():
    return fk.load_self_weight_sweep()


@pytest.fixture(scope="module")
def lw_fig():
    """One built slider for the tests that read it (its HTML is a pure function of the object)."""
    return fk.learned_width_explorer()


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
    """kernels_self_weight.self_weight_sweep is what wrote the file: one alpha and one draw, live."""
    live = kernels_self_weight.self_weight_sweep([lw["alpha"][0]], seed=lw["seed"], draws=lw["draws"][:1], **lw["fit"])
    assert live["w"][0] == pytest.approx(lw["w"][0], rel=1e-9)  # as above: another run of the same float64 fit
    assert live["draw_ratio"][0] == pytest.approx(lw["draw_ratio"][0], rel=1e-9)
    assert live["mse_best"] == pytest.approx(lw["mse_best"], rel=TIGHT)
    # np.geomspace is exp of a linspace of logs: numpy's vectorised exp/log differ by an ulp or two
    # between builds and CPUs, so the grid matches to a few ulps (8 eps), not bit for bit.
    np.testing.assert_allclose(live["w_grid"], lw["w_grid"], rtol=8 * np.finfo(float).eps, atol=0)


def test_learned_width_flag_is_where_the_good_range_ends(lw, lw_fig):
    fig = lw_fig
    limit = lw["mse_best"] * statistics.median(lw["draw_ratio"])  # the good range: the draws' median ratio
    inside = [m <= limit for m in lw["test_mse"]]
    assert inside[0] and not inside[-1]  # leave-one-out is a good width, self-included is not
    expected = inside.index(False)
    assert fig.flip == expected and all(inside[:expected])
    assert kl.learned_width_flip(lw) == expected and kl.good_range_limit(lw) == pytest.approx(limit, rel=1e-15)
    assert fig.labels[expected] == f"α = {lw['alpha'][expected]:g}"
    spec = page_spec(fig)
    for i, frame in enumerate(spec["frames"]):
        learned = frame["data"][3]  # the width learned at this alpha, on the test-error curve
        assert learned["x"][0] == pytest.approx(lw["w"][i], rel=5e-4)  # 4 significant digits
        assert learned["y"][0] == pytest.approx(lw["test_mse"][i], rel=5e-4)
        assert ("<b>outside</b>" in frame["readout"]) == (not inside[i])


def test_learned_width_html(lw_fig):
    a, b = lw_fig.to_html(), fk.learned_width_explorer().to_html()  # two independent builds
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


@pytest.mark.parametrize("build", ["lw_fig"])
def test_figures_are_offline_small_and_captioned(request, build):
    html = request.getfixturevalue(build).to_html()
    assert len(html.encode()) < 1_000_000  # issue 19: a page's interactive data is at most about 1 MB
    assert "<script src" not in html and "http://" not in html and "https://" not in html  # nothing fetched
    assert 'class="ac-ix-fallback" src="data:image/png;base64,' in html and "<figcaption" in html


# ------------------------------------------------------------------ learned-metric: the kernel family
@pytest.fixture(scope="module")
def fam():
    return kf.load_family_sweep()


@pytest.fixture(scope="module")
def fam_fig():
    return fk.kernel_family_explorer()


def test_family_at_t1_is_the_gaussian_metric_kernel():
    """softmax_j((Wq).(Wx_j) - |Wx_j|^2 / 2) is Gaussian Nadaraya-Watson on Wx: the query's own term cancels."""
    rng = np.random.default_rng(0)
    q, x, W = rng.normal(size=(7, 5)), rng.normal(size=(30, 5)), rng.normal(size=(5, 5))
    K = np.exp(-0.5 * (((q[:, None, :] - x[None, :, :]) @ W.T) ** 2).sum(-1))  # (7, 30), the Gaussian kernel
    y = rng.normal(size=30)
    np.testing.assert_allclose(kf.family_predict(q, x, y, W, 1.0), K @ y / K.sum(1), rtol=1e-12)


def test_family_peaks_at_q_over_t():
    """For t > 0 the score q k - t k^2 / 2 (one coordinate, W = 1) is largest at k = q / t: at the query only for t = 1."""
    k = torch.linspace(-4, 4, 8001, dtype=torch.float64)[:, None]  # (8001, 1)
    for t in (1.0, 0.8, 0.5):
        s = kf.family_scores(torch.tensor([[1.2]], dtype=torch.float64), k, t)[0]  # (8001,)
        assert float(k[int(s.argmax()), 0]) == pytest.approx(1.2 / t, abs=1e-3)


def test_stored_family_at_t1_is_the_ledgers_learned_metric(fam):
    run = kernels.load_metric_run()  # learned_metric.json: the claim's data
    assert fam["t"][0] == 1.0 and fam["seeds"] == run["seeds"] and fam["steps"] == run["metric_steps"]
    np.testing.assert_allclose(fam["mse"][0], run["mse_metric"], rtol=1e-8)  # the same float64 fit, another code path
    np.testing.assert_allclose(fam["dominance"][0], run["dominance_metric"], rtol=1e-8)
    np.testing.assert_allclose(fam["mse_tuned"], run["mse_tuned"], rtol=1e-12)


def test_kernel_family_flag_is_where_the_ledgers_rule_fails(fam, fam_fig):
    run = kernels.load_metric_run()
    imp = np.array(fam["mse_tuned"])[None] / np.array(fam["mse"])  # (P, 5)
    ok = ((imp >= 3) & (np.array(fam["dominance"]) >= 3)).sum(1) >= 4  # the rule: 3 times, in 4 of 5 draws
    dot_ok = ((np.array(run["mse_tuned"]) / np.array(run["mse_dot"]) >= 3) & (np.array(run["dominance_dot"]) >= 3)).sum() >= 4
    assert ok[0] and not ok[-1] and not dot_ok  # Gaussian passes; the dot product and attention's W_Q, W_K fail
    assert list(ok) == fam["passes"]
    fig = fam_fig
    expected = int(np.argmin(ok))
    assert fig.flip == expected and fig.labels[-1] == "attention's W_Q, W_K" and len(fig.frames) == len(ok) + 1
    for i, frame in enumerate(fig.frames):
        assert (("<b>passes</b>" in frame["readout"]) == (list(ok) + [dot_ok])[i])


@pytest.mark.extended  # recomputes the flag's two neighbouring frames of the shipped sweep (about 20 s)
def test_stored_family_sweep_matches_the_fits(fam):
    i = fam["passes"].index(False)
    live = kf.family_sweep([fam["t"][i - 1], fam["t"][i]], seeds=fam["seeds"], dot_steps=1)
    np.testing.assert_allclose(live["mse"], fam["mse"][i - 1:i + 1], rtol=1e-8)
    assert live["passes"] == [True, False]


def test_kernel_family_html(check_flagged_html, fam_fig):
    check_flagged_html(fam_fig, "learned-metric", note="cannot peak at the query",
                       max_bytes=1_000_000)
    with pytest.raises(ValueError, match=r"t=1.5; expected a key-norm penalty in \[0, 1\]"):
        kf.fit_family(np.zeros((3, 2)), np.zeros(3), 1.5)


def test_bandwidth_slider_flags_the_width_the_lesson_sweep_finds_best():
    """The slider's flagged w and the lesson's sweep (81 widths, Fig. 2.3) name the same best width when
    rounded to the slider's grid, so the prose (glued from the sweep) and the slider agree."""
    from attention_course.chapters.kernels.sliders import bandwidth_explorer
    from attention_course.chapters.kernels.smoothing import mse_by_bandwidth, sine_data

    fig = bandwidth_explorer()
    ws = np.array([float(lab.split("=")[1]) for lab in fig.labels])
    data = sine_data(n=40, noise=1.0, seed=0)
    w_grid = np.geomspace(0.1, 100, 81)
    w_best = w_grid[np.argmin(mse_by_bandwidth(data.x_test, data.x_train, data.y_train, data.y_test, w_grid))]
    assert fig.flip == int(np.argmin(np.abs(np.log(ws / w_best))))
    assert "against the true curve" in fig.frames[fig.flip]["readout"]


def test_the_lesson_prediction_keeps_its_answer_without_the_verdict_link():
    from attention_course.chapters.kernels.sliders import without_verdict_link
    from attention_course.figures.predictions import prediction

    box = prediction("ix-predict-kern")
    bare = without_verdict_link(box)
    assert "See the verdict" in box.answer_html and "<a " not in bare.answer_html
    assert bare.answer_html and box.answer_html.startswith(bare.answer_html)
    assert (bare.question, bare.correct, list(bare.choices)) == (box.question, box.correct, list(box.choices))
