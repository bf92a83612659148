"""Smoke tests for attention_course.chapters.lowrank.figures: each benchmark figure renders on Agg,
draws the run's numbers, and gives every method its one colour."""

from __future__ import annotations

import pytest
from matplotlib.colors import to_rgba

from attention_course.chapters.lowrank import benchmarks as bm
from attention_course.chapters.lowrank import figures as fe


@pytest.fixture(scope="module")
def tiny():
    return bm.run_benchmarks(ns=[16, 64], d=8, quick=True, repeats=1, matmul_n=64)


def _render(fig):
    fig.canvas.draw()  # raises if anything cannot be drawn
    ax = fig.axes[0]
    assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()
    assert fig.get_figwidth() <= 7.0  # the book's column
    return ax


def test_method_color_is_one_per_family():
    assert fe.method_color("performer-64") == fe.method_color("performer-256") == fe.METHOD_COLORS["performer"]
    assert fe.method_color("linformer-pool-64") != fe.method_color("linformer-64")
    assert len(set(fe.METHOD_COLORS.values())) == len(fe.METHOD_COLORS)
    with pytest.raises(ValueError, match=r"method 'flash' has no colour"):
        fe.method_color("flash")


def test_scaling_draws_each_method_in_its_colour(tiny):
    ax = _render(fe.plot_scaling(tiny, methods=["naive", "chunked", "linear"]))
    lines = {ln.get_label().split(":")[0]: ln for ln in ax.get_lines()}
    assert set(lines) == {"naive", "chunked", "linear"}
    for name, ln in lines.items():
        assert to_rgba(ln.get_color()) == to_rgba(fe.method_color(name))
        times = [r["time_s"] for r in tiny["results"] if r["method"] == name]
        assert list(ln.get_ydata()) == times
    assert lines["naive"].get_linestyle() == "-" and lines["linear"].get_linestyle() == "--"


def test_memory_plots_mebibytes(tiny):
    ax = _render(fe.plot_memory(tiny))
    ln = next(ln for ln in ax.get_lines() if ln.get_label() == "naive")
    peaks = [r["peak_bytes"] / 2**20 for r in tiny["results"] if r["method"] == "naive"]
    assert list(ln.get_ydata()) == peaks


