"""The flagged slider of chapter 6 (variance-dk) and its lens.

The numbers come from :mod:`attention_course.chapters.scaling.correlated_scores`; each is checked
against an independent recomputation (the closed-form variance, a Bonferroni line, chapter 6's sweep).
"""

import json
import math
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pytest

from attention_course.chapters.scaling import sliders as fs
from attention_course.chapters.scaling.sensitive_regime import (half_maximum_band, jacobian_at, jacobian_floor,
                                                               jacobian_vs_spread)
from attention_course.chapters.scaling import correlated_scores as cs
from attention_course.chapters.scaling.measures import variance_vs_dim

N = 10000  # samples per width, as in chapter 6


@pytest.fixture(scope="module")
def corr():
    return fs.correlation_explorer(minilm_ratio=1.93)  # chapter 6's glued median ratio of MiniLM's heads


@pytest.fixture(scope="module")
def sweeps(corr):
    """``{c: sweep}`` at chapter 6's N for every correlation the tests below check, in one call.

    correlated_dot_variance draws its samples per d_k only (never per c) and derives each c's sweep
    from the same draws, so a c's sweep is the same whichever other c's share the call; one call
    saves drawing the 2 x 10,000 x 2,047 normals three more times.
    """
    cs_all = sorted({0.0, *cs.CORRELATIONS, *(float(lab.split("= ")[1]) for lab in corr.labels)})
    return dict(zip(cs_all, cs.correlated_dot_variance(cs_all, n_samples=N)))


# ------------------------------------------------------------------ variance-dk
def test_a_sweep_does_not_depend_on_the_other_correlations_in_its_call():
    """What the shared ``sweeps`` fixture relies on (exactly, on small draws)."""
    alone, = cs.correlated_dot_variance([0.3], d_ks=[4, 64], n_samples=2000)
    together = cs.correlated_dot_variance([0.0, 0.3, 0.01], d_ks=[4, 64], n_samples=2000)[1]
    np.testing.assert_array_equal(alone.empirical, together.empirical)


def test_independent_frame_is_chapter_6s_variance_sweep(sweeps):
    dims = 2 ** np.arange(11)
    s0 = sweeps[0.0]
    np.testing.assert_array_equal(s0.empirical, variance_vs_dim(dims, n_samples=N, scale="none", seed=0).empirical)


def test_measured_variance_follows_the_closed_form(sweeps):
    dims = 2 ** np.arange(11)
    for c, s in ((c, sweeps[c]) for c in cs.CORRELATIONS):
        # q.k given q is N(0, q'Sigma q), and E[(q'Sigma q)^2] <= 3 E[q'Sigma q]^2 (rank one is the worst),
        # so the kurtosis of q.k is <= 9 and the relative s.e. of a variance estimate <= sqrt(8 / N) = 0.028;
        # 5 s.e. over 99 estimates
        rel = s.empirical / (dims * (1 + (dims - 1) * c**2))
        assert np.abs(rel - 1).max() < 5 * math.sqrt(8 / N), c


def test_correlation_flag_is_where_independence_is_rejected(corr, sweeps):
    dims = 2 ** np.arange(11)
    z_star = NormalDist().inv_cdf(1 - 0.01 / (2 * len(dims)))  # Bonferroni, 1% over 11 widths
    se = dims * np.sqrt((2 + 6 / dims) / N)  # chapter 6's standard error under independence
    corrs = [float(lab.split("= ")[1]) for lab in corr.labels]
    sweeps = [sweeps[c] for c in corrs]
    max_z = [np.abs((s.empirical - dims) / se).max() for s in sweeps]
    expected = next(i for i, z in enumerate(max_z) if z > z_star)
    assert corr.flip == expected and corr.labels[corr.flip] == "c = 0.01"
    lens_z, lens_line, lens_first = cs.independence_rejected(sweeps)  # the lens's rule, against the one above
    assert lens_first == expected and abs(lens_line - z_star) < 1e-12
    np.testing.assert_allclose(lens_z, max_z, rtol=1e-12)  # the same float64 ratios
    assert max_z[0] < z_star  # at independence the chapter's 2.2 s.e. is inside the line
    assert f"<b>{max_z[corr.flip]:.1f}</b> standard errors" in corr.frames[corr.flip]["readout"]


def test_minilm_frame_reproduces_its_ratio(corr):
    (i, note), = corr.flips[1:]
    c = float(corr.labels[i].split("= ")[1])
    assert abs(1 + 31 * c**2 - 1.93) < 1e-3 * 31  # c is printed to 3 digits; d(ratio)/dc = 62 c ~ 11
    assert "MiniLM's median ratio 1.93" in note
    assert "(closed form 1.93)" in corr.frames[i]["readout"]


# ------------------------------------------------------------------ HTML
@pytest.mark.parametrize("name, verdict, note", [
    ("corr", "variance-dk", "the independence formula Var(q·k) = d_k is rejected"),
])
def test_html_is_deterministic_and_links_the_verdict(request, name, verdict, note, check_flagged_html):
    check_flagged_html(request.getfixturevalue(name), verdict, note=note)


# ------------------------------------------------------------------ bad input
def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="0 <= c < 1"):
        cs.correlated_dot_variance([-0.1], d_ks=[4], n_samples=10)
    with pytest.raises(ValueError, match="starting at 0"):
        fs.correlation_explorer([0.1, 0.2], d_ks=[4], n_samples=10)
    with pytest.raises(ValueError, match="ratio >= 1"):
        cs.minilm_correlation(0.8)
    with pytest.raises(ValueError, match="n_tests=0"):
        cs.bonferroni_z(0)


# ------------------------------------------------------------------ sensitive-regime: the number of keys
def _median_jacobian_explicit(S: int, sigmas, n_rows: int = 1024, seed: int = 0) -> np.ndarray:
    """Median ||diag(p) - p p^T||_F over the same draws, with the S x S matrix written out (numpy.linalg)."""
    z = np.random.default_rng(seed).standard_normal((n_rows, S))  # (rows, S), the draws jacobian_vs_spread makes
    out = []
    for s in sigmas:
        x = s * z
        p = np.exp(x - x.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)  # (rows, S)
        J = p[:, :, None] * np.eye(S)[None] - p[:, :, None] * p[:, None, :]  # (rows, S, S)
        out.append(np.median(np.linalg.norm(J, axis=(1, 2))))
    return np.array(out)


@pytest.fixture(scope="module")
def keys():
    return fs.keys_explorer(n_keys=(16, 20, 24))


def test_keys_frames_follow_the_jacobian_and_the_flip_is_where_sigma_1_leaves_the_band(keys):
    sig = np.asarray(fs.SPREADS)
    fig = keys
    assert fig.labels[fig.flip] == "20 keys" and fig.verdict == ""  # a band, not the claim's verdict
    for S, frame in zip((16, 20, 24), fig.frames):
        J = _median_jacobian_explicit(S, sig)
        # closed form = explicit; near one-hot, sum p^2 - 2 sum p^3 + (sum p^2)^2 cancels terms of order 1 down to
        # ||J||^2, so its square root carries an absolute error of about sqrt(1e-16 * S) < 1e-7
        np.testing.assert_allclose(frame["data"][1]["y"], J, rtol=1e-9, atol=1e-7)
        y = J - math.sqrt(S - 1) / S  # above the uniform floor
        half = y.max() / 2
        i = int(np.argmax(y))
        a = np.flatnonzero(y[:i] < half)[-1]  # last spread below half before the peak
        lo = math.exp(np.interp(half, [y[a], y[a + 1]], np.log(sig[a:a + 2])))  # log-linear, as the chapter
        assert f"from σ = {lo:.2f}" in frame["readout"]
        # where sigma = 1 lies against the band, with no verdict word (the verdict box decides on another reading)
        expected = "inside" if lo <= 1 else "below"
        assert f"σ = 1 lies <b>{expected}</b> the band" in frame["readout"] and "holds" not in frame["readout"]
    assert [lab for lab in fig.labels if "σ = 1 lies <b>inside" in fig.frames[fig.labels.index(lab)]["readout"]] == ["16 keys"]


@pytest.mark.extended  # recomputes the chapter's three curves (about 4 s alone)
def test_keys_explorer_at_16_64_256_keys_is_the_chapters_bands():
    """The evidence page's bands, computed as the page does: 64 keys on 4,096 rows, 16 and 256 on 1,024."""
    sigmas = np.geomspace(0.05, 50, 61)
    fig = fs.keys_explorer(n_keys=(16, 64, 256))
    for frame, S in zip(fig.frames, (16, 64, 256)):
        J = jacobian_vs_spread(sigmas, n_keys=S, n_rows=4096 if S == 64 else 1024, seed=0)
        band = half_maximum_band(sigmas, J, jacobian_floor(S))
        assert f"from σ = {band.lo:.2f} to {band.hi:.2f}" in frame["readout"]
    assert fig.labels[fig.flip] == "64 keys" and "4,096 rows" in fig.frames[1]["readout"]


# ------------------------------------------------------------------ gradient-vanishes: the starting size of W_Q
def test_start_scale_frames_are_the_stored_runs():
    data = Path(fs.__file__).parents[2] / "data"
    raw = {}
    for name in ("scale_backward_rows.json", "scale_backward_start.json"):
        res = json.loads((data / name).read_text())["result"]
        for v, loss, (_, q_init, _, back, _) in zip(res["variants"], res["eval_loss"],
                                                     [res["settings"]["definitions"][v] for v in res["variants"]]):
            if back == "saturated":
                raw[0.125 if q_init == "sqrt" else float(q_init)] = loss  # "sqrt": 1/sqrt(64)
    r = fs.start_scale_runs()
    assert r["factor"] == sorted(raw) == [0.125, 0.25, 0.5, 0.707, 0.85, 1.0] and r["d_k"] == 64
    for a, loss in zip(r["factor"], r["eval_loss"]):
        np.testing.assert_array_equal(loss, raw[a])


def test_start_scale_flag_is_where_the_ledgers_rule_flips():
    ev = json.loads((Path(fs.__file__).parents[2] / "data" / "evidence.json").read_text())["gradient-vanishes"]
    r = fs.start_scale_runs()
    n_ok = [sum(x < 1.0 for x in loss) for loss in r["eval_loss"]]  # seeds below 1 nat (chance ln 64 = 4.16)
    assert n_ok[0] == ev["bw_rows_init_n_ok"] and n_ok[-1] == ev["bw_rows_none_n_ok"]  # the verdict's two starts
    fig = fs.start_scale_explorer(r)
    expected = next(i for i, n in enumerate(n_ok) if n < 4)  # the rule: small where at least 4 of 5 train
    assert fig.flip == expected and all(n >= 4 for n in n_ok[:expected])
    for n, frame in zip(n_ok, fig.frames):
        assert f"{n} of 5 seeds train" in frame["readout"]


# The keys slider is checked on the 16, 20, 24 keys figure the test above checks frame by frame: it has
# the 16 and 20 keys frames a (16, 20) figure would have, and its flag at the same frame (20 keys).
def test_keys_slider_describes_the_band_without_a_verdict(keys):
    html = keys.to_html()
    assert "data-verdict" not in html and "#claim-sensitive-regime" not in html and "holds" not in html
    assert "σ = 1 now lies below the sensitive band" in html


@pytest.mark.parametrize("build, verdict, note", [
    (fs.start_scale_explorer, "gradient-vanishes", "seeds train: the scores no longer start small"),
])
def test_new_sliders_link_their_verdicts(request, build, verdict, note, check_flagged_html):
    fig = request.getfixturevalue(build) if isinstance(build, str) else build()
    html, _ = check_flagged_html(fig, verdict, note=note, max_bytes=1_000_000)
    assert 'class="ac-ix-fallback" src="data:image/png;base64,' in html


def test_new_slider_rules_reject_bad_input():
    with pytest.raises(ValueError, match="expected equal 1-d shapes"):
        jacobian_at([1.0, 2.0], [0.1])


def test_scale_explorer_reads_out_the_rows_the_lesson_and_saturation_stats_measure():
    """The lesson's slider, its prose (saturation_stats' rows) and the evidence page give one number per width."""
    from attention_course.chapters.scaling.measures import saturation_stats

    fig = fs.width_explorer([4, 64], n=16, n_batches=8)
    evidence = fs.scale_explorer([4, 64], n=16, n_batches=8)  # the evidence page's slider: the same rows
    assert [f["readout"] for f in fig.frames] == [f["readout"] for f in evidence.frames]
    for scale, word in (("none", "unscaled"), ("sqrt", "scaled")):
        st = saturation_stats([4, 64], scale=scale, n_keys=16, n_queries=16, n_batches=8)
        for i in range(2):
            readout = fig.frames[i]["readout"]
            assert f"{st.frac_saturated[i]:.0%} {word}" in readout
            assert f"{st.jacobian_norm[i]:.2g} {word}" in readout


def test_width_explorer_static_image_draws_the_two_panels_the_lesson_describes():
    """Without plotly the lesson's slider shows its opening frame's panels: scores above, largest weights below."""
    fig = fs.width_explorer([4, 64, 256], n=16, n_batches=4, start=256)
    top, bottom = fig.fallback.axes
    assert fig.labels[fig.start] == "d_k = 256" and fig.flip is None and fig.verdict == ""
    rng = np.random.default_rng([0, 256])
    q, k = rng.standard_normal((4, 16, 256)), rng.standard_normal((4, 16, 256))
    raw = (q @ k.transpose(0, 2, 1))[0]  # (T, S): the first batch, unscaled
    heights = [p.get_height() for p in top.patches]
    assert sum(heights) == 2 * raw.ravel()[::4].size  # both histograms, every fourth score as in the slider
    assert bottom.get_xlabel() == "largest weight in the row" and sum(p.get_height() for p in bottom.patches) == 32
    with pytest.raises(ValueError, match=r"start=5 is not one of the widths"):
        fs.width_explorer([4, 64], n=4, n_batches=1, start=5)


def test_width_explorer_draws_the_scales_in_the_lesson_figures_colours():
    from matplotlib.colors import to_hex

    from attention_course.chapters.scaling.figures import SCALE_COLOR
    fig = fs.width_explorer([4, 64], n=4, n_batches=1, start=64)
    want = {"unscaled": to_hex(SCALE_COLOR["none"]), "scaled": to_hex(SCALE_COLOR["sqrt"])}
    for trace in fig.frames[0]["data"]:
        assert trace["marker"]["color"] == want[trace["name"].split(" ")[0].rstrip(":")]
