"""The flagged slider of chapter 6 (variance-dk) and its lens.

The numbers come from :mod:`attention_course.chapters.scaling.correlated_scores`; each is checked
against an independent recomputation (the closed-form variance, a Bonferroni line, chapter 6's sweep).
"""

import math
from statistics import NormalDist

import numpy as np
import pytest

from attention_course.chapters.scaling import sliders as fs
from attention_course.chapters.scaling import correlated_scores as cs
from attention_course.chapters.scaling.measures import variance_vs_dim

N = 10000  # samples per width, as in chapter 6


@pytest.fixture(scope="module")
def corr():
    return fs.correlation_explorer(minilm_ratio=1.93)  # chapter 6's glued median ratio of MiniLM's heads


# ------------------------------------------------------------------ variance-dk
def test_independent_frame_is_chapter_6s_variance_sweep():
    dims = 2 ** np.arange(11)
    s0, = cs.correlated_dot_variance([0.0], n_samples=N)
    np.testing.assert_array_equal(s0.empirical, variance_vs_dim(dims, n_samples=N, scale="none", seed=0).empirical)


def test_measured_variance_follows_the_closed_form():
    dims = 2 ** np.arange(11)
    for c, s in zip(cs.CORRELATIONS, cs.correlated_dot_variance(cs.CORRELATIONS, n_samples=N)):
        # q.k given q is N(0, q'Sigma q), and E[(q'Sigma q)^2] <= 3 E[q'Sigma q]^2 (rank one is the worst),
        # so the kurtosis of q.k is <= 9 and the relative s.e. of a variance estimate <= sqrt(8 / N) = 0.028;
        # 5 s.e. over 99 estimates
        rel = s.empirical / (dims * (1 + (dims - 1) * c**2))
        assert np.abs(rel - 1).max() < 5 * math.sqrt(8 / N), c


def test_correlation_flag_is_where_independence_is_rejected(corr):
    dims = 2 ** np.arange(11)
    z_star = NormalDist().inv_cdf(1 - 0.01 / (2 * len(dims)))  # Bonferroni, 1% over 11 widths
    se = dims * np.sqrt((2 + 6 / dims) / N)  # chapter 6's standard error under independence
    corrs = [float(lab.split("= ")[1]) for lab in corr.labels]
    sweeps = cs.correlated_dot_variance(corrs, n_samples=N)
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
