"""Smoke tests for attention_course.chapters.lowrank.figures: each figure renders on Agg and shows its data."""

from __future__ import annotations

import numpy as np
import pytest

from attention_course.chapters.lowrank import spectra as lr
from attention_course.chapters.lowrank import figures as lp
from attention_course.core._backend import ShapeError
from attention_course.figures.style import method_color
from matplotlib.colors import to_rgba


def _render(fig):
    fig.canvas.draw()  # raises if anything cannot be drawn
    return fig


def test_attention_matrices_share_one_log_scale_and_show_the_approximations():
    rng = np.random.default_rng(1)
    A = rng.random((10, 10)) ** 4
    A /= A.sum(axis=1, keepdims=True)  # (10, 10) rows sum to 1
    B = np.full((10, 10), 0.1)
    fig = _render(lp.plot_attention_matrices({"a": A, "b": B}, k=2, crop=6))
    panels = fig.axes[:6]
    assert fig.get_figwidth() <= 7.0
    # trusted references, computed here with numpy: the SVD truncation and each row's 2 largest weights
    U, s, Vt = np.linalg.svd(A)
    rank2 = (U[:, :2] * s[:2]) @ Vt[:2]
    top2 = np.where(A >= np.sort(A, axis=1)[:, [-2]], A, 0.0)
    vmin = panels[0].images[0].norm.vmin
    for ax, want in zip(panels[:3], (A, rank2, top2)):
        np.testing.assert_allclose(ax.images[0].get_array(), np.clip(want[:6, :6], vmin, None))
    norms = {(ax.images[0].norm.vmin, ax.images[0].norm.vmax) for ax in panels}
    assert len(norms) == 1  # one colour scale for all six panels
    vmax = max(A[:6, :6].max(), rank2[:6, :6].max(), B.max())
    assert list(norms)[0] == pytest.approx((vmax * 1e-4, vmax))  # fitted to the largest weight shown
    err = np.linalg.norm(A - rank2) / np.linalg.norm(A)
    assert panels[1].texts[0].get_text() == f"error {err:.2f}"
    assert panels[5].texts[0].get_text() == "error 0.89"  # top 2 of 10 equal weights drops sqrt(8/10) of the norm
    with pytest.raises(ValueError, match="matrices is empty"):
        lp.plot_attention_matrices({})


def test_method_family_maps_the_accuracy_table_labels():
    labels = ["linear (elu+1)", "Performer, 256 features", "Linformer, Gaussian E, k=32",
              "Linformer, mean-pool, k=32", "Nystrom, 32 landmarks", "local window, w=16",
              "top-32 per query", "uniform (mean of values)"]
    assert [lp.method_family(label) for label in labels] == [
        "linear", "performer", "linformer", "linformer-pool", "nystrom", "local", "top-k", "uniform"]
    with pytest.raises(ValueError, match="no method family for 'flash'"):
        lp.method_family("flash")


def test_method_errors_one_panel_per_input_bars_in_method_colours():
    errs = {"Nystrom, 4 landmarks": {"iid": 0.0, "smooth": 1e-3}, "top-4 per query": {"iid": 0.5, "smooth": 2.0},
            "uniform (mean of values)": {"iid": 0.9, "smooth": 1.0}, "zeros": {"iid": 1.0, "smooth": 1.0}}
    fig = _render(lp.plot_method_errors(errs))
    iid, smooth = fig.axes[:2]
    assert [ax.get_title() for ax in (iid, smooth)] == ["iid inputs", "smooth inputs"]
    assert [t.get_text() for t in iid.get_yticklabels()] == ["Nystrom, 4 landmarks", "top-4 per query"]
    np.testing.assert_allclose([p.get_width() for p in smooth.patches], [1e-3, 2.0])
    left = iid.get_xlim()[0]
    assert iid.patches[0].get_width() == left < 1e-3  # an error of 0 is drawn at the left edge
    assert [to_rgba(p.get_facecolor()) for p in iid.patches] == [
        to_rgba(method_color("nystrom")), to_rgba(method_color("top-k"))]
    baselines = {ln.get_label(): ln.get_xdata()[0] for ln in iid.get_lines() if "baseline" in ln.get_label()}
    assert baselines == {"baseline: uniform, mean of values": 0.9, "baseline: zeros": 1.0}
    with pytest.raises(ValueError, match="errors has no method besides the baselines"):
        lp.plot_method_errors({"zeros": {"iid": 1.0}})
