"""Flagged sliders of chapter 3 (low-rank-real, efficient-attention; issue 19).

The numbers and flags come from the measure modules (``lowrank.baselines``, ``approximation_error``) and
the stored data from the chapter's ``runs`` module. Each figure's deciding numbers are checked
against an independent computation (the package's accuracy table, numpy's polyfit on the stored
length sweep), the flag against the line the verdict draws, and the HTML.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_course.chapters.lowrank import sliders as fl
from attention_course.chapters.lowrank import approximation_error as ae
from attention_course.chapters.lowrank.approximation_error import approximation_errors, benchmark_inputs
from attention_course.chapters.lowrank.spectra import crossover_beta, synthetic_attention, temperature_sweep
from page_spec import page_spec

# float64 throughout: round-off is ~1e-16 per operation; these bounds leave room for a few hundred
# accumulated operations.
TIGHT = 1e-10


def _first_for_good(ok) -> int | None:
    """First index from which every later entry of ``ok`` is True (written independently)."""
    ok = list(ok)
    for i in range(len(ok)):
        if all(ok[i:]):
            return i
    return None


# ------------------------------------------------------------------ efficient-attention
@pytest.fixture(scope="module")
def eff():
    return fl.load_structure_sweep()


@pytest.fixture(scope="module")
def eff_fig():
    """One built slider for the tests that read it (its HTML is a pure function of the object)."""
    return fl.efficient_structure_explorer()


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


def test_efficient_flags_against_the_trivial_answers(eff, eff_fig):
    errs = eff["errors"]
    nys, pool = errs["Nystrom, 32 landmarks"], errs["Linformer, mean-pool, k=32"]
    floor = [min(u, z) for u, z in zip(errs["uniform (mean of values)"], errs["zeros"])]
    # the verdict's evidence: on iid inputs zeros beat Nyström; on smooth inputs both low-rank methods win
    assert nys[0] > floor[0] and nys[-1] < floor[-1] and pool[-1] < floor[-1]
    flip = _first_for_good(max(a, b) < f for a, b, f in zip(nys, pool, floor))
    accurate = _first_for_good(max(a, b) < 0.1 for a, b in zip(nys, pool))
    fig = eff_fig
    assert fig.flip == flip and fig.flips[1][0] == accurate and 0 < flip < accurate
    assert ae.lowrank_beats_baselines(eff) == flip and ae.lowrank_beats_baselines(eff, target=0.1) == accurate
    assert ae.low_rank_methods(eff) == ["Linformer, mean-pool, k=32", "Nystrom, 32 landmarks"]
    spec = page_spec(fig)
    for i, frame in enumerate(spec["frames"]):
        bars = frame["data"][0]
        names = [m for m in errs if m not in ("uniform (mean of values)", "zeros")]
        np.testing.assert_allclose(bars["x"], [errs[m][i] for m in names], rtol=5e-4)  # 4 digits
        assert f"effective rank {eff['effective_rank'][i]:.1f}" in frame["readout"]


def test_efficient_html_and_bad_input(eff_fig):
    a = eff_fig.to_html()
    assert a == fl.efficient_structure_explorer().to_html()  # a second, independent build gives the same page
    assert a.count('data-verdict="efficient-attention"') == 2 and "beat both uniform attention and zeros" in a
    with pytest.raises(ValueError, match=r"t=1.5; expected a mixing weight in \[0, 1\]"):
        ae.mixed_inputs(8, 4, 1.5)
    with pytest.raises(ValueError, match="expected Nyström, mean-pooled Linformer"):
        ae.lowrank_beats_baselines({"errors": {"zeros": [1.0], "top-4 per query": [0.5]}})


@pytest.mark.parametrize("build", ["eff_fig"])
def test_figures_are_offline_small_and_captioned(request, build):
    html = request.getfixturevalue(build).to_html()
    assert len(html.encode()) < 1_000_000  # issue 19: a page's interactive data is at most about 1 MB
    assert "<script src" not in html and "http://" not in html and "https://" not in html  # nothing fetched
    assert 'class="ac-ix-fallback" src="data:image/png;base64,' in html and "<figcaption" in html


# ------------------------------------------------------------------ low-rank
def test_soft_logits_slider_flags_the_first_beta_that_fails_at_some_length():
    from attention_course.chapters.lowrank.verdict_measures import load_verdicts

    v = load_verdicts()
    betas = np.array(v["config"]["betas"])
    order = np.argsort(betas)
    # independent of the slider: the mean over seeds at every length, d_k = 32, in increasing beta
    means = np.array([np.mean(v["grid_by_n"][n]["error"], axis=0)[order] for n in ("256", "512", "1024")])
    first_fail = int(np.flatnonzero((means >= 0.1).any(axis=0))[0])
    fig = fl.soft_logits_explorer(v)
    assert fig.flip == first_fail and fig.verdict == "low-rank"
    assert sorted(betas)[first_fail - 1] == 0.1  # the box's beta* (grid_beta_star): the last beta that passes
    html = fig.to_html()
    assert html.count('data-verdict="low-rank"') == 1 and 'href="#claim-low-rank"' in html
    spec = page_spec(fig)
    for j, frame in enumerate(spec["frames"]):
        np.testing.assert_allclose(frame["data"][1]["y"], means[:, j], rtol=5e-4)  # 4 significant digits
    assert fig.labels[int(np.argmin(np.abs(np.sort(betas) - v["config"]["beta_trained"])))].endswith("(MiniLM)")


def test_the_lessons_temperature_slider_links_to_no_verdict():
    """It teaches: its mark is the crossover of two errors, which decides no claim on the lesson."""
    fig = fl.lowrank_explorer([0.2, 1.0, 4.0], n=16, d=8, k=4)
    for frame, beta in zip(page_spec(fig)["frames"], (0.2, 1.0, 4.0)):  # the readout gives the lesson's energy share
        A = synthetic_attention(16, 8, beta, 0)
        s = np.linalg.svd(A, compute_uv=False)
        share = s[0] ** 2 / np.sum(s**2)
        assert frame["readout"].startswith(f"β = {beta:g}: the first singular value holds {share:.1%} of the energy")
    assert fig.verdict == "" and "data-verdict" not in fig.to_html() and "#claim-" not in fig.to_html()
    # its crossover is the sweep's, and its flag the first frame whose numbers have crossed
    sweep = temperature_sweep([0.2, 1.0, 4.0], n=16, d=8, k=4, seed=0)
    assert fig.crossover == pytest.approx(crossover_beta(sweep), rel=1e-12)
    over = np.asarray(sweep["svd_error"]) > np.asarray(sweep["sparse_error"])
    assert fig.flip is not None and over[fig.flip] and not over[fig.flip - 1]
    assert 'data-verdict="low-rank"' in fl.lowrank_explorer([0.2, 1.0, 4.0], n=16, d=8, k=4, verdict="low-rank").to_html()
