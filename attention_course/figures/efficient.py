"""Figures for chapter 3's benchmark: time and memory against n, and the accuracy-speed frontier.

Each helper takes a result dict of :func:`attention_course.experiments.benchmarks.run_benchmarks`
(or the stored run, :func:`~attention_course.experiments.benchmarks.load_benchmarks`), labels
its axes, returns the :class:`matplotlib.figure.Figure` and changes no global matplotlib
state. Every method has one colour, :data:`METHOD_COLORS`, in all three figures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

__all__ = ["METHOD_COLORS", "method_color", "plot_scaling", "plot_memory", "plot_frontier"]

# One colour per method (a family's configurations, e.g. performer-64 and performer-256, share it).
METHOD_COLORS = {
    "naive": "C7", "sdpa": "C0", "chunked": "C1",  # exact
    "linear": "C4", "performer": "C2", "nystrom": "C3", "linformer": "C5", "linformer-pool": "C6",
}


def method_color(name: str) -> str:
    """The colour of a benchmark method or family: ``"nystrom-128"`` -> ``METHOD_COLORS["nystrom"]``.

    Examples
    --------
    >>> method_color("linformer-pool-256"), method_color("sdpa")
    ('C6', 'C0')
    """
    family = name.rpartition("-")[0] if name[-1].isdigit() else name
    if family not in METHOD_COLORS:
        raise ValueError(f"method {name!r} has no colour; expected one of {sorted(METHOD_COLORS)} "
                         f"or one of them followed by -<int>")
    return METHOD_COLORS[family]


def _new_axes(ax: Optional[Axes], figsize: tuple) -> tuple[Figure, Axes]:
    if ax is None:
        return plt.subplots(figsize=figsize, layout="constrained")
    return ax.figure, ax


def _series(result: Mapping, name: str, key: str) -> list[tuple[int, float]]:
    """(n, value) pairs of one method, sorted by n, where the value is measured (not None, not 0)."""
    return sorted((r["n"], r[key]) for r in result["results"] if r["method"] == name and r[key])


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
    ax.legend(fontsize=9, frameon=False, loc="upper left", title="slope (load-normalised)", title_fontsize=9)
    return fig


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
    ax.legend(fontsize=9, frameon=False)
    return fig


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
                ax.annotate(str(p["param"]), (err, p["time_s"]), fontsize=8, xytext=(3, 3), textcoords="offset points")
    ax.axvline(s["error_target"], color="0.3", lw=0.8, ls=":")
    for (name, err), color in zip((baselines or {}).items(), ("0.45", "0.7", "0.2")):
        ax.axvline(err, color=color, lw=1.5, ls="--", label=f"{name} (baseline)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set(xlabel=f"relative error vs exact ({distribution} inputs)", ylabel="time per call (s)",
           title=f"Accuracy vs speed at n={s['frontier_n']}")
    fig.legend(*ax.get_legend_handles_labels(), fontsize=9, frameon=False, loc="outside lower center", ncols=4)
    return fig
