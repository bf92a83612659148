"""Flagged sliders of chapters 2 and 3 (issue 19): learned-width, low-rank-real, efficient-attention.

The numbers and flags come from the lenses (``kernel_learning``, ``lowrank_baselines``,
``approximation_error``) and the stored data from the chapters' ``runs`` modules.

Each figure's deciding numbers are checked against an independent computation (closed-form
Nadaraya-Watson in numpy, the package's own fits and accuracy table, numpy's polyfit on the
stored length sweep), the flag against the line the verdict draws, and the HTML.
"""

from __future__ import annotations

import json
import re
import statistics

import numpy as np
import pytest
import torch

from attention_course.chapters import kernels
from attention_course.chapters.kernels import sliders as fk
from attention_course.chapters.lowrank import sliders as fl
from attention_course.chapters.lowrank import approximation_error as ae
from attention_course.chapters.kernels import learning as kl
from attention_course.chapters.lowrank import baselines as lb
from attention_course.chapters.lowrank.approximation_error import approximation_errors, benchmark_inputs
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


def _first_for_good(ok) -> int | None:
    """First index from which every later entry of ``ok`` is True (written independently)."""
    ok = list(ok)
    for i in range(len(ok)):
        if all(ok[i:]):
            return i
    return None


# ------------------------------------------------------------------ learned-width (chapter 2)
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


# ------------------------------------------------------------------ low-rank-real (chapter 3)
def test_layer_slopes_match_polyfit():
    length = fl.load_length_sweep()
    ns = np.log([r["n"] for r in length])
    erank = np.array([r["effective_rank"] for r in length]).reshape(len(length), 6, 12)
    expected = np.array([[np.polyfit(ns, np.log(erank[:, l, h]), 1)[0] for h in range(12)] for l in range(6)])
    per_head, per_layer = lb.layer_slopes(length)
    np.testing.assert_allclose(per_head, expected, rtol=TIGHT)
    np.testing.assert_allclose(per_layer, np.median(expected, axis=1), rtol=TIGHT)
    # the chapter's printed slopes (cell "by layer, from the stored run"), to their 2 decimals
    np.testing.assert_allclose(per_layer, [0.84, 1.05, 1.06, 0.99, 0.70, 0.63], atol=0.005)


def test_rank_flag_splits_layers_5_and_6_from_1_to_4():
    _, slopes = lb.layer_slopes(fl.load_length_sweep())
    fig = fl.rank_length_explorer()
    # the verdict's line: layers 5 and 6 grow more slowly than every one of layers 1 to 4
    assert max(slopes[4:]) < min(slopes[:4]) and not max(slopes[3:]) < min(slopes[:3])
    assert fig.flip == 4 and fig.labels[fig.flip] == "layer 5"
    spec = _spec(fig)
    erank = np.array([r["effective_rank"] for r in fl.load_length_sweep()]).reshape(-1, 6, 12)
    for l, frame in enumerate(spec["frames"]):
        median = next(t for t in frame["data"] if t.get("name") == "median head")
        np.testing.assert_allclose(median["y"], np.median(erank[:, l], axis=1), rtol=5e-4)  # 4 digits
        assert f"{slopes[l]:.2f}" in frame["readout"]


@pytest.mark.parametrize("slopes, split", [([1.0, 0.5], 1), ([0.5, 1.0], None), ([0.9, 1.0, 0.95, 0.2], 3), ([1.0, 0.9, 0.95, 0.2], 1),
                                           ([2.0, 1.0, 3.0], None)])
def test_slope_split_table(slopes, split):
    brute = next((l for l in range(1, len(slopes)) if all(a > b for a in slopes[:l] for b in slopes[l:])), None)
    assert lb.slope_split(slopes) == split == brute


def test_rank_html_and_bad_input():
    a = fl.rank_length_explorer().to_html()
    assert a == fl.rank_length_explorer().to_html()
    assert 'data-verdict="low-rank-real"' in a and "grows more slowly with n" in a
    with pytest.raises(ValueError, match=r"shape \(2, 5\); expected \(lengths, layers \* heads\)"):
        lb.layer_slopes([{"n": 16, "effective_rank": [1.0] * 5}, {"n": 32, "effective_rank": [2.0] * 5}])


# ------------------------------------------------------------------ efficient-attention (chapter 3)
@pytest.fixture(scope="module")
def eff():
    return fl.load_structure_sweep()


@pytest.mark.extended  # recomputes the shipped slider data
def test_structure_sweep_ends_are_the_chapters_table(eff):
    c = eff["config"]
    table = approximation_errors(n=c["n"], d=c["d"], budget=c["budget"], seed=c["seed"])
    for name, errs in eff["errors"].items():
        assert errs[0] == pytest.approx(table["errors"][name]["iid"], rel=1e-9)
        assert errs[-1] == pytest.approx(table["errors"][name]["smooth"], rel=1e-9)
    assert eff["effective_rank"][0] == pytest.approx(table["structure"]["iid"]["effective_rank"], rel=TIGHT)
    assert eff["rank_error"][-1] == pytest.approx(table["structure"]["smooth"]["rank_error"], rel=1e-8)


@pytest.mark.extended  # recomputes the shipped slider data
def test_structure_sweep_middle_matches_a_live_run(eff):
    c, i = eff["config"], eff["t"].index(0.8)
    live = ae.structure_sweep([0.8], n=c["n"], d=c["d"], budget=c["budget"], seed=c["seed"])
    for name in eff["errors"]:
        # Nyström's pseudo-inverse can amplify round-off by its condition number: 1e-6, not 1e-10
        assert live["errors"][name][0] == pytest.approx(eff["errors"][name][i], rel=1e-6), name


def test_mixed_inputs_keep_unit_variance():
    q, _, v = ae.mixed_inputs(256, 64, 0.5)
    iid = benchmark_inputs(256, 64, "iid", seed=1, dtype=torch.float64)
    smooth = benchmark_inputs(256, 64, "smooth", seed=1, dtype=torch.float64)
    torch.testing.assert_close(q, np.sqrt(0.5) * (iid[0] + smooth[0]), rtol=0, atol=1e-15)
    # 16384 entries: the sample variance's standard error is about sqrt(2 / 16384) = 0.011
    assert abs(float(v.var()) - 1) < 0.06


def test_efficient_flags_against_the_trivial_answers(eff):
    errs = eff["errors"]
    nys, pool = errs["Nystrom, 32 landmarks"], errs["Linformer, mean-pool, k=32"]
    floor = [min(u, z) for u, z in zip(errs["uniform (mean of values)"], errs["zeros"])]
    # the verdict's evidence: on iid inputs zeros beat Nyström; on smooth inputs both low-rank methods win
    assert nys[0] > floor[0] and nys[-1] < floor[-1] and pool[-1] < floor[-1]
    flip = _first_for_good(max(a, b) < f for a, b, f in zip(nys, pool, floor))
    accurate = _first_for_good(max(a, b) < 0.1 for a, b in zip(nys, pool))
    fig = fl.efficient_structure_explorer()
    assert fig.flip == flip and fig.flips[1][0] == accurate and 0 < flip < accurate
    assert ae.lowrank_beats_baselines(eff) == flip and ae.lowrank_beats_baselines(eff, target=0.1) == accurate
    assert ae.low_rank_methods(eff) == ["Linformer, mean-pool, k=32", "Nystrom, 32 landmarks"]
    spec = _spec(fig)
    for i, frame in enumerate(spec["frames"]):
        bars = frame["data"][0]
        names = [m for m in errs if m not in ("uniform (mean of values)", "zeros")]
        np.testing.assert_allclose(bars["x"], [errs[m][i] for m in names], rtol=5e-4)  # 4 digits
        assert f"effective rank {eff['effective_rank'][i]:.1f}" in frame["readout"]


def test_efficient_html_and_bad_input():
    a = fl.efficient_structure_explorer().to_html()
    assert a == fl.efficient_structure_explorer().to_html()
    assert a.count('data-verdict="efficient-attention"') == 2 and "beat both uniform attention and zeros" in a
    with pytest.raises(ValueError, match=r"t=1.5; expected a mixing weight in \[0, 1\]"):
        ae.mixed_inputs(8, 4, 1.5)
    with pytest.raises(ValueError, match="expected Nyström, mean-pooled Linformer"):
        ae.lowrank_beats_baselines({"errors": {"zeros": [1.0], "top-4 per query": [0.5]}})


@pytest.mark.parametrize("build", [fk.learned_width_explorer, fl.rank_length_explorer, fl.efficient_structure_explorer])
def test_figures_are_offline_small_and_captioned(build):
    html = build().to_html()
    assert len(html.encode()) < 1_000_000  # issue 19: a page's interactive data is at most about 1 MB
    assert "<script src" not in html and "http://" not in html and "https://" not in html  # nothing fetched
    assert 'class="ac-ix-fallback" src="data:image/png;base64,' in html and "<figcaption" in html
