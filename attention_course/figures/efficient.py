"""Figures for chapter 3's efficient attention: what each method computes, and its benchmark.

:func:`plot_method_schematic` draws which query-key entries each method computes. The other
helpers take a result dict of :func:`attention_course.experiments.benchmarks.run_benchmarks`
(or the stored run, :func:`~attention_course.experiments.benchmarks.load_benchmarks`), labels
its axes, returns the :class:`matplotlib.figure.Figure` and changes no global matplotlib
state. Every method has one colour, :data:`METHOD_COLORS`, in all three figures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure

from .style import METHOD_COLORS, book_figure, method_color

__all__ = ["METHOD_COLORS", "method_color", "method_patterns", "plot_method_schematic", "plot_scaling",
           "plot_memory", "plot_frontier"]

_NOT_COMPUTED = "#F2F2F2"


def method_patterns(n: int = 12, window: int = 2, top_k: int = 3, proj: int = 4, landmarks: int = 3,
                    seed: int = 0) -> dict:
    r"""Which query-key scores each method computes, as boolean matrices (True = computed).

    ``exact``, ``local`` (:math:`|i - j| \le` ``window``), ``top-k`` (each row's ``top_k`` largest
    scores of a seeded Gaussian draw, chosen after computing them all, as a top-k kernel
    must unless it has an index), ``nystrom`` (every query against the ``landmarks`` landmark
    keys and every key against the landmark queries; a segment's landmark is drawn at its
    centre) have shape (n, n); ``linformer`` has shape (n, ``proj``): queries against
    ``proj`` projected keys; ``linear`` has shape (0, 0): no score is computed.

    Examples
    --------
    >>> p = method_patterns(n=6, window=1, top_k=2, proj=2, landmarks=2)
    >>> {name: int(m.sum()) for name, m in p.items()}
    {'exact': 36, 'local': 16, 'top-k': 12, 'linformer': 12, 'nystrom': 20, 'linear': 0}
    """
    i, j = np.indices((n, n))  # (n, n) query and key index
    scores = np.random.default_rng(seed).normal(size=(n, n))  # (n, n)
    top = np.zeros((n, n), bool)
    np.put_along_axis(top, np.argsort(-scores, axis=1)[:, :top_k], True, axis=1)
    centres = (np.arange(landmarks) + 0.5) * n // landmarks  # (landmarks,) segment centres
    marks = np.isin(np.arange(n), centres)  # (n,)
    return {"exact": np.ones((n, n), bool), "local": np.abs(i - j) <= window, "top-k": top,
            "linformer": np.ones((n, proj), bool), "nystrom": marks[None, :] | marks[:, None],
            "linear": np.zeros((0, 0), bool)}


@book_figure
def plot_method_schematic(n: int = 12, window: int = 2, top_k: int = 3, proj: int = 4,
                          landmarks: int = 3, seed: int = 0) -> Figure:
    """A grid per method: the query-key scores it computes (its colour) and skips (light grey).

    Parameters are those of :func:`method_patterns`. Each panel's x label counts the scores.

    Examples
    --------
    >>> fig = plot_method_schematic(n=6, window=1, top_k=2, proj=2, landmarks=2)
    >>> [ax.get_xlabel() for ax in fig.axes][:3]
    ['36 of 36', '16 of 36', '12 of 36']
    """
    pats = method_patterns(n, window, top_k, proj, landmarks, seed)
    titles = {"exact": ("exact", "exact (SDPA, chunked)"), "local": ("local", f"local window, w = {window}"),
              "top-k": ("top-k", f"top-k, k = {top_k}"), "linformer": ("linformer", f"Linformer, k = {proj}"),
              "nystrom": ("nystrom", f"Nyström, {landmarks} landmarks"),
              "linear": ("performer", "linear, Performer")}
    fig, axes = plt.subplots(2, 3, figsize=(7.0, 5.2), layout="constrained")
    for ax, (name, mask) in zip(axes.flat, pats.items()):
        color, title = titles[name]
        grid = np.zeros((n, n), bool) if name == "linear" else mask
        rgb = np.where(grid[..., None], to_rgb(method_color(color)), to_rgb(_NOT_COMPUTED))  # (n, cols, 3)
        ax.imshow(rgb, extent=(0, grid.shape[1], n, 0))
        for x in range(grid.shape[1] + 1):
            ax.axvline(x, color="white", lw=0.8)
        for y in range(n + 1):
            ax.axhline(y, color="white", lw=0.8)
        ax.set(xlim=(0, n), ylim=(n, 0), xticks=[], yticks=[], aspect="equal", title=title)
        ax.spines[:].set_visible(False)
        if name == "linformer":
            ax.text(proj + 0.6, n / 2, f"{proj} rows of EK,\neach a mix\nof all {n} keys", va="center")
            ax.set_xlabel(f"{mask.sum()} ({n} × {proj}), no n × n")
        elif name == "linear":
            ax.text(n / 2, n / 2, "no n × n scores:\n" r"$\phi(Q)\,[\phi(K)^\top V]$", ha="center", va="center",
                    bbox={"facecolor": "white", "edgecolor": method_color("linear"), "lw": 1.5})
            ax.set_xlabel(f"0 of {n * n}")
        else:
            ax.set_xlabel(f"{mask.sum()} of {n * n}")
    axes[0, 0].set_ylabel("query i")
    axes[1, 0].set_ylabel("query i")
    return fig


def _new_axes(ax: Optional[Axes], figsize: tuple) -> tuple[Figure, Axes]:
    if ax is None:
        return plt.subplots(figsize=figsize, layout="constrained")
    return ax.figure, ax


def _series(result: Mapping, name: str, key: str) -> list[tuple[int, float]]:
    """(n, value) pairs of one method, sorted by n, where the value is measured (not None, not 0)."""
    return sorted((r["n"], r[key]) for r in result["results"] if r["method"] == name and r[key])


@book_figure
def plot_scaling(result: Mapping, methods: Optional[Sequence[str]] = None, ax: Optional[Axes] = None) -> Figure:
    """Time against n on log-log axes, one line per method, with its fitted slopes in the legend.

    Exact methods are solid lines, approximations dashed. The slopes are those of the
    result's summary (fitted for ``n >= slope_n_min``; raw and load-normalised).

    Examples
    --------
    >>> res = {"results": [{"method": "naive", "n": n, "time_s": n**2 * 1e-9, "exact": True} for n in (256, 512)],
    ...        "summary": {"slopes": {"naive": 2.0}, "slopes_load_normalised": {"naive": 2.0}},
    ...        "config": {"d": 64}, "machine": {"torch_threads": 1}}
    >>> plot_scaling(res).axes[0].get_xscale()
    'log'
    """
    names = methods or ["naive", "sdpa", "chunked", "linear", "performer-256", "nystrom-128", "linformer-pool-256"]
    s = result["summary"]
    fig, ax = _new_axes(ax, (7.0, 4.6))
    for name in names:
        pts = _series(result, name, "time_s")
        if not pts:
            continue
        exact = next(r["exact"] for r in result["results"] if r["method"] == name)
        ax.loglog(*zip(*pts), "-" if exact else "--", marker="o", ms=3, color=method_color(name),
                  label=f"{name}: slope {s['slopes'].get(name, float('nan')):.2f} "
                        f"({s['slopes_load_normalised'].get(name, float('nan')):.2f})")
    ax.set(xlabel="sequence length n", ylabel="time per call (s)",
           title=f"Time vs n (d={result['config']['d']}, {result['machine']['torch_threads']} thread(s))")
    ax.legend(loc="upper left", title="slope (load-normalised)")
    return fig


@book_figure
def plot_memory(result: Mapping, methods: Sequence[str] = ("naive", "sdpa", "chunked", "linear", "nystrom-128"),
                ax: Optional[Axes] = None) -> Figure:
    """Peak memory (MiB) against n on log-log axes, one line per method.

    Examples
    --------
    >>> res = {"results": [{"method": "chunked", "n": n, "peak_bytes": 2**20 * n} for n in (256, 512)],
    ...        "config": {"memory_method": "rss"}}
    >>> plot_memory(res).axes[0].get_ylabel()
    'peak memory (MiB)'
    """
    fig, ax = _new_axes(ax, (6.4, 4.2))
    for name in methods:
        pts = _series(result, name, "peak_bytes")
        if pts:
            ns, peaks = zip(*pts)
            ax.loglog(ns, [p / 2**20 for p in peaks], marker="o", ms=3, color=method_color(name), label=name)
    how = {"rss": "measured peak RSS rise", "analytic": "largest intermediate (analytic)"}
    ax.set(xlabel="sequence length n", ylabel="peak memory (MiB)",
           title=f"Memory vs n: {how.get(result['config']['memory_method'], '')}")
    ax.legend()
    return fig


@book_figure
def plot_frontier(result: Mapping, distribution: str = "iid", ax: Optional[Axes] = None,
                  baselines: Optional[Mapping[str, float]] = None) -> Figure:
    """Time against relative error at the summary's frontier length, one line per family.

    Exact methods have no error: they are horizontal lines at their time. Each
    approximation's points are labelled with their parameter (features, landmarks,
    projected length); the dotted vertical line is the summary's error target.
    ``baselines`` (name -> relative error, e.g. uniform attention and outputting zeros)
    are drawn as dashed vertical lines: a method to their right is worse than a trivial answer.

    Examples
    --------
    >>> res = {"summary": {"frontier_n": 4096, "error_target": 0.1, "frontier": [
    ...     {"method": "sdpa", "family": "exact", "param": None, "time_s": 0.1, "error": {"iid": 0.0}},
    ...     {"method": "nystrom-32", "family": "nystrom", "param": 32, "time_s": 0.01, "error": {"iid": 0.5}}]}}
    >>> plot_frontier(res).axes[0].get_title()
    'Accuracy vs speed at n=4096'
    """
    s = result["summary"]
    fig, ax = _new_axes(ax, (7.0, 5.0))
    fams: dict = {}
    for p in s["frontier"]:
        fams.setdefault(p["family"], []).append(p)
    for fam, pts in fams.items():
        if fam == "exact":
            for p in pts:
                ax.axhline(p["time_s"], color=method_color(p["method"]), lw=1.2, label=f"{p['method']} (exact)")
            continue
        pts = sorted(pts, key=lambda p: p["param"] or 0)
        errs = [max(p["error"][distribution], 1e-8) for p in pts]  # a log axis cannot show 0
        ax.plot(errs, [p["time_s"] for p in pts], "o--", color=method_color(fam), label=fam)
        for p, err in zip(pts, errs):
            if p["param"]:
                ax.annotate(str(p["param"]), (err, p["time_s"]), xytext=(3, 3), textcoords="offset points", fontsize=9)
    ax.axvline(s["error_target"], color="0.3", lw=0.8, ls=":")
    for (name, err), color in zip((baselines or {}).items(), ("0.45", "0.7", "0.2")):
        ax.axvline(err, color=color, lw=1.5, ls="--", label=f"{name} (baseline)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set(xlabel=f"relative error vs exact ({distribution} inputs)", ylabel="time per call (s)",
           title=f"Accuracy vs speed at n={s['frontier_n']}")
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncols=3)
    return fig
