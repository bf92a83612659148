"""Figures of chapter 3's decisions drawn against their thresholds, for two models where there are two."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ...figures.style import book_figure, method_color, role_color
from .decisions import MOST_NON_SINK, lowrank_bins, near_shares, trailing_passes

__all__ = ["plot_lowrank_bins", "plot_growth", "plot_trailing_sweep", "plot_trained_gap", "plot_near_sweep"]

#: One colour per trained model across these figures.
MODEL_COLORS = {"MiniLM": method_color("linformer"), "SmolLM2": method_color("nystrom"),
                "induction model": method_color("performer")}
_BIN_COLORS = {"property": method_color("svd"), "no property": method_color("top-k"), "sink": role_color("[CLS]")}


@book_figure
def plot_lowrank_bins(models: Mapping[str, Mapping], energy: float = 0.99, sink_threshold: float = 0.5) -> Figure:
    """Left: every head's bin per model; middle and right: the non-sink heads' low-rank share against the
    energy share kept and against the sink threshold (mean over orders, the band their range).

    Examples
    --------
    >>> rec = {"config": {"k": 2, "n": 8}, "orders": [{"energy": [0.995, 0.9, 0.999], "sink_share": [0.1, 0.2, 0.8],
    ...        "stable_rank": [1.0, 3.0, 1.0], "effective_rank": [2.0, 9.0, 2.0]}]}
    >>> fig = plot_lowrank_bins({"MiniLM": rec, "SmolLM2": rec})
    >>> [ax.get_xlabel() for ax in fig.axes]
    ['', 'energy share kept by rank 2', 'sink threshold']
    """
    fig, axes = plt.subplots(1, 3, figsize=(6.9, 2.9), layout="constrained", gridspec_kw={"width_ratios": [0.8, 1, 1]})
    names = list(models)
    bottom = np.zeros(len(names))
    for b, label in (("property", "low-rank"), ("no property", "not low-rank"), ("sink", "sink head")):
        share = np.array([np.mean([o[b] for o in lowrank_bins(models[m], energy, sink_threshold)]) for m in names])
        axes[0].bar(names, share, bottom=bottom, color=_BIN_COLORS[b], label=label, width=0.6)
        bottom += share
    axes[0].set(ylabel="share of all heads", ylim=(0, 1))
    axes[0].legend(fontsize=8.5, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=1)
    sweeps = ((axes[1], np.round(np.arange(0.90, 0.9901, 0.01), 2), lambda m, x: lowrank_bins(m, x, sink_threshold), energy),
              (axes[2], np.round(np.arange(0.3, 0.7001, 0.05), 2), lambda m, x: lowrank_bins(m, energy, x), sink_threshold))
    for ax, xs, bins, chosen in sweeps:
        for m in names:
            s = np.array([[o["non_sink_low"] for o in bins(models[m], x)] for x in xs])  # (thresholds, orders)
            ax.plot(xs, s.mean(1), marker="o", ms=3, color=MODEL_COLORS.get(m, "0.3"), label=m)
            ax.fill_between(xs, s.min(1), s.max(1), color=MODEL_COLORS.get(m, "0.3"), alpha=0.2, lw=0)
        ax.axhline(MOST_NON_SINK, color="0.3", ls=":", lw=1)
        ax.axvline(chosen, color="0.5", ls="--", lw=0.8)
        ax.set_ylim(0, 1)
    k = next(iter(models.values()))["config"]["k"]
    axes[1].set(xlabel=f"energy share kept by rank {k}", ylabel="low-rank share of non-sink heads")
    axes[2].set(xlabel="sink threshold")
    axes[1].legend(fontsize=8.5, loc="upper right")
    return fig


@book_figure
def plot_growth(models: Mapping[str, Mapping], k: int = 32) -> Figure:
    """Each model's per-head effective rank against n: the median head and the middle half, with n and rank ``k``.

    Examples
    --------
    >>> rec = {"growth": [{"n": 16, "effective_rank": [3.0, 4.0]}, {"n": 64, "effective_rank": [9.0, 12.0]}]}
    >>> plot_growth({"MiniLM": rec}).axes[0].get_xlabel()
    'sequence length n (tokens)'
    """
    fig, ax = plt.subplots(figsize=(5.6, 3.3), layout="constrained")
    for name, rec in models.items():
        n = np.array([r["n"] for r in rec["growth"]], dtype=float)
        q = np.array([np.percentile(r["effective_rank"], [25, 50, 75]) for r in rec["growth"]])  # (lengths, 3)
        color = MODEL_COLORS.get(name, "0.3")
        ax.fill_between(n, q[:, 0], q[:, 2], color=color, alpha=0.2, lw=0)
        ax.plot(n, q[:, 1], "o-", color=color, ms=4, label=f"{name}: median head")
    ax.plot(n, n, ":", color="0.4", label="effective rank = n")
    ax.axhline(k, ls="--", color=method_color("svd"), lw=1, label=f"rank {k}")
    ax.set(xscale="log", yscale="log", xlabel="sequence length n (tokens)", ylabel="effective rank")
    ax.set_xticks(n, [f"{v:g}" for v in n])
    ax.minorticks_off()
    ax.legend(fontsize=9)
    return fig


@book_figure
def plot_trailing_sweep(models: Mapping[str, Sequence[Mapping]], level: float = 0.1) -> Figure:
    """Per model, each removal's cost over uniform attention's against the energy share kept (mean over seeds or orders).

    Examples
    --------
    >>> rows = [{"keep": k, "cost": {"trailing": 0.3, "random": 0.2, "leading": 0.5}} for k in (0.9, 0.99)]
    >>> fig = plot_trailing_sweep({"MiniLM": rows, "SmolLM2": rows})
    >>> [ax.get_title() for ax in fig.axes]
    ['MiniLM', 'SmolLM2']
    """
    fig, axes = plt.subplots(1, len(models), figsize=(2.3 * len(models), 2.8), layout="constrained", sharey=True,
                             squeeze=False)
    styles = (("trailing", "trailing values", method_color("svd"), "o"), ("random", "same energy, random", method_color("uniform"), "s"),
              ("leading", "same energy, leading", method_color("linformer"), "^"))
    for ax, (name, rows) in zip(axes[0], models.items()):
        keeps = sorted({r["keep"] for r in rows})
        for key, label, color, marker in styles:
            ax.plot(keeps, [trailing_passes(rows, k)[key] for k in keeps], marker=marker, color=color, label=label)
        ax.axhline(level, color="0.3", ls=":", lw=1)
        ax.set(title=name, xlabel="energy share kept", yscale="log", xticks=keeps)
        ax.tick_params(axis="x", labelsize=8.5)
    axes[0, 0].set_ylabel("cost / uniform attention's")
    axes[0, -1].legend(fontsize=8, loc="lower left")
    return fig


@book_figure
def plot_trained_gap(points: Sequence[Mapping]) -> Figure:
    """Softmax minus linear attention's held-out recall against pairs per dimension N / d, one colour per width.

    Hollow markers: softmax itself below 0.9 (not informative). Dotted lines: the rule's 0.05 and 0.1.

    Examples
    --------
    >>> fig = plot_trained_gap([{"n": 8, "d": 32, "ratio": 0.25, "gap": 0.01, "softmax": 1.0}])
    >>> fig.axes[0].get_xlabel()
    'pairs per dimension, N / d'
    """
    fig, ax = plt.subplots(figsize=(5.2, 3.0), layout="constrained")
    widths = sorted({p["d"] for p in points})
    colors = [method_color(m) for m in ("linear", "performer", "nystrom", "linformer")]
    for d, color in zip(widths, colors):
        pts = [p for p in points if p["d"] == d]
        ax.plot([p["ratio"] for p in pts], [p["gap"] for p in pts], color=color, lw=1, alpha=0.7)
        for p in pts:
            ax.plot(p["ratio"], p["gap"], "o", ms=6, color=color, mfc=color if p["softmax"] >= 0.9 else "white")
        ax.plot([], [], "o", color=color, label=f"d = {d}")
    for y in (0.05, 0.1):
        ax.axhline(y, color="0.3", ls=":", lw=1)
    for x in (0.25, 1.0):
        ax.axvline(x, color="0.5", ls="--", lw=0.8)
    ax.set(xscale="log", xlabel="pairs per dimension, N / d", ylabel="softmax − linear recall")
    ax.set_xticks([0.125, 0.25, 0.5, 1, 2, 4], ["1/8", "1/4", "1/2", "1", "2", "4"])
    ax.legend(fontsize=9, loc="upper left")
    return fig


@book_figure
def plot_near_sweep(docs: Mapping[str, Mapping], chosen: float = 0.5) -> Figure:
    """The share of near heads per layer (trained; untrained dashed) against the share of the weight that counts as most.

    Examples
    --------
    >>> layer = {"mass": [0.6], "p_mass": [0.001], "content_mass": [0.2], "p_content_mass": [0.5]}
    >>> doc = {"alpha": 0.005, "runs": [{"layers": [layer, layer], "untrained": [layer, layer]}]}
    >>> fig = plot_near_sweep({"8 x 8 grid": doc})
    >>> fig.axes[0].get_xlabel()
    'share of the weight that counts as most'
    """
    fig, axes = plt.subplots(1, len(docs), figsize=(3.3 * len(docs), 2.8), layout="constrained", sharey=True,
                             squeeze=False)
    xs = np.round(np.arange(0.3, 0.7001, 0.05), 2)
    for ax, (title, doc) in zip(axes[0], docs.items()):
        layers = len(doc["runs"][0]["layers"])
        for layer, color in zip(range(layers), (method_color("linformer"), method_color("nystrom"), method_color("performer"))):
            ax.plot(xs, [near_shares(doc, x)[layer] for x in xs], marker="o", ms=3, color=color, label=f"layer {layer + 1}")
            ax.plot(xs, [near_shares(doc, x, which="untrained")[layer] for x in xs], ls="--", color=color, lw=1)
        ax.axhline(0.5, color="0.3", ls=":", lw=1)
        ax.axvline(chosen, color="0.5", ls="--", lw=0.8)
        ax.set(title=title, xlabel="share of the weight that counts as most", ylim=(0, 1))
    axes[0, 0].set_ylabel("share of heads near")
    axes[0, 0].legend(fontsize=8.5)
    return fig
