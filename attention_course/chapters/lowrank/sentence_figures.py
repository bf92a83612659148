"""Figures for one of the essay's sentences: heads whose tokens focus on a few keys."""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ...figures.style import book_figure, method_color
from .baselines import HEAD_BINS
from .focus import bins_at

__all__ = ["plot_focus"]

_MODEL_COLORS = {"MiniLM": method_color("top-k"), "SmolLM2": method_color("linformer")}

@book_figure
def plot_focus(focus: Mapping, level: float = 0.5) -> Figure:
    """Top: each model's heads in three bins, as shares of all heads (focused, not focused, sink heads), and its
    scrambled copies. Bottom: the share of all heads that are focused, swept over k, the line theta and the sink
    threshold.

    Dashed: the most focused scrambled copy; each lower panel moves one cut-off from the deciding
    k = 3, 0.5, 0.5. ``focus``: the stored :func:`~attention_course.chapters.lowrank.focus.focus_models_study`.

    Examples
    --------
    >>> rec = {"focused": [[[3, 1]], [[0, 0]]], "decided": [[[4, 4]], [[4, 4]]], "sink_share": [0.1, 0.7]}
    >>> f = {"config": {"ks": [3], "thresholds": [0.5, 0.6], "k": 3, "threshold": 0.5},
    ...      "models": {"MiniLM": {"trained": rec, "scrambled": [rec]}}}
    >>> fig = plot_focus(f)
    >>> [t.get_text() for t in fig.axes[0].get_yticklabels()]
    ['MiniLM', 'MiniLM, W_Q, W_K scrambled']
    >>> [ax.get_xlabel() for ax in fig.axes[1:]]
    ['k (heaviest keys)', 'line θ (weight on them)', 'sink threshold']
    """
    fig = plt.figure(figsize=(6.8, 5.6), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=[1.0, 1.25])
    _draw_bins(top.subplots(), focus, level)
    axes = bottom.subplots(1, 3, sharey=True)
    _draw_sweeps(axes, focus, level)
    handles, labels = axes[0].get_legend_handles_labels()
    bottom.legend(handles, labels, loc="outside lower center", ncol=2, fontsize=8.5, frameon=False)
    return fig


def _draw_bins(ax, focus: Mapping, level: float) -> None:
    """Stacked bars of the three bins (shares of all heads), a trained model then the mean of its scrambled copies."""
    cfg = focus["config"]
    grid = dict(ks=cfg["ks"], thresholds=cfg["thresholds"], k=cfg["k"], threshold=cfg["threshold"])
    rows, labels = [], []
    for model, rec in focus["models"].items():
        rows.append(bins_at(rec["trained"], **grid))
        scr = [bins_at(s, **grid) for s in rec["scrambled"]]
        rows.append({b: float(np.mean([r[b] for r in scr])) for b in HEAD_BINS})  # mean over the copies
        labels += [model, f"{model}, W_Q, W_K scrambled"]
    colors = {"property": method_color("top-k"), "no property": "0.8", "sink": method_color("uniform")}
    names = {"property": "focused", "no property": "not focused", "sink": "sink heads"}
    left = np.zeros(len(rows))
    for b in HEAD_BINS:
        vals = np.array([r[b] for r in rows])
        ax.barh(range(len(rows)), vals, left=left, color=colors[b], label=names[b])
        for i, (x, v) in enumerate(zip(left, vals)):
            if v >= 0.06:
                ax.text(x + v / 2, i, f"{v:.2f}", ha="center", va="center", fontsize=9)
        left += vals
    ax.axvline(level, color="0.3", ls=":")
    ax.set_yticks(range(len(rows)), labels)
    ax.invert_yaxis()
    ax.set(xlim=(0, 1), xlabel="share of all heads (k = 3, line 0.5, sink threshold 0.5)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, 1.22), ncol=3, fontsize=9, frameon=False)


def _draw_sweeps(axes, focus: Mapping, level: float) -> None:
    """The focused share of all heads against k, the line and the sink threshold, one panel each."""

    cfg = focus["config"]
    grid = dict(ks=cfg["ks"], thresholds=cfg["thresholds"])
    sweeps = (("k", cfg["ks"], "k (heaviest keys)"), ("threshold", cfg["thresholds"], "line θ (weight on them)"),
              ("sink_threshold", [0.3, 0.4, 0.5, 0.6, 0.7], "sink threshold"))
    deciding = {"k": cfg["k"], "threshold": cfg["threshold"], "sink_threshold": 0.5}
    for ax, (name, xs, label) in zip(axes, sweeps):
        for model, rec in focus["models"].items():
            color = _MODEL_COLORS.get(model, "0.3")
            at = lambda counts, x: bins_at(counts, **{**deciding, name: x}, **grid)["property"]
            ax.plot(xs, [at(rec["trained"], x) for x in xs], "o-", ms=3.5, color=color, label=model)
            ax.plot(xs, [max(at(s, x) for s in rec["scrambled"]) for x in xs], "--", color=color, alpha=0.8,
                    label=f"{model}, W_Q, W_K scrambled")
        ax.axhline(level, color="0.3", ls=":")
        ax.axvline(deciding[name], color="0.6", lw=0.8)
        ax.set(xlabel=label, ylim=(0, 1))
    axes[0].set_ylabel("focused heads / all heads")
