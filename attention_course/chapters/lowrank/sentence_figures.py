"""Figures for two of the essay's sentences: trailing singular values removed, and focused tokens."""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ...figures.style import book_figure, method_color

__all__ = ["plot_focus"]

_REMOVALS = (("trailing", "trailing values", method_color("svd")), ("random", "same energy,\nrandom values", method_color("uniform")),
             ("leading", "same energy,\nleading values", method_color("linformer")))


@book_figure
def plot_trailing_costs(trailing: Mapping, level: float = 0.1) -> Figure:
    """Cost of each removal, as a share of uniform attention's cost, per model (one dot per seed or order).

    Parameters
    ----------
    trailing : the ``trailing`` part of the stored run
        (:func:`~attention_course.chapters.lowrank.trailing.trailing_study`)
    level : float, the dotted line (the cost the trailing values may have if they are noise)

    Examples
    --------
    >>> row = {"cost": {"trailing": 0.5, "random": 0.2, "leading": 0.1}}
    >>> fig = plot_trailing_costs({"tiny": [row], "minilm": [row], "config": {"n": 128, "keep": 0.9}})
    >>> [ax.get_title() for ax in fig.axes]
    ['induction model (loss)', 'MiniLM, n = 128 (output)']
    """
    cfg = trailing["config"]
    fig, axes = plt.subplots(1, 2, figsize=(6.8, 3.0), layout="constrained", sharey=True)
    for ax, key, title in ((axes[0], "tiny", "induction model (loss)"),
                           (axes[1], "minilm", f"MiniLM, n = {cfg['n']} (output)")):
        for i, (name, label, color) in enumerate(_REMOVALS):
            vals = np.array([r["cost"][name] for r in trailing[key]])
            ax.barh(i, vals.mean(), color=color, alpha=0.85, label=label)
            ax.plot(vals, np.full(len(vals), i), "o", ms=3.5, color="black")
        ax.axvline(level, color="0.3", ls=":")
        top = max(max(r["cost"][name] for r in trailing[key]) for name, _, _ in _REMOVALS)
        ax.set(title=title, xlabel="cost / uniform's cost", xlim=(0, 1.15 * max(top, level)))
        ax.set_yticks(range(len(_REMOVALS)), [label for _, label, _ in _REMOVALS])
    axes[0].invert_yaxis()
    fig.suptitle(f"Removing {1 - cfg['keep']:.0%} of each head's energy: which values matter?", fontsize=11.5)
    return fig


@book_figure
def plot_focus(focus: Mapping, level: float = 0.5) -> Figure:
    """Left: share of (head, query) pairs with at least half their weight on k keys, against k, with and
    without [CLS] and [SEP] as keys. Right: each head's focused share against its sink weight.

    Examples
    --------
    >>> f = {"by_k": {"1": {"words": 0.1, "any": 0.4}, "2": {"words": 0.2, "any": 0.6}},
    ...      "focused": [1.0, 5.0], "pairs": [10.0, 10.0], "sink": [0.9, 0.1], "config": {"k": 3}}
    >>> [ax.get_xlabel() for ax in plot_focus(f).axes]
    ['k (keys)', 'sink weight (on [CLS] and [SEP])']
    """
    ks = sorted(int(k) for k in focus["by_k"])
    fig, axes = plt.subplots(1, 2, figsize=(6.8, 3.0), layout="constrained")
    ax = axes[0]
    ax.plot(ks, [focus["by_k"][str(k)]["words"] for k in ks], "o-", color=method_color("top-k"), label="word keys only")
    ax.plot(ks, [focus["by_k"][str(k)]["any"] for k in ks], "s--", color=method_color("uniform"), label="sinks allowed")
    ax.axhline(level, color="0.3", ls=":")
    ax.axvline(focus["config"]["k"], color="0.6", lw=0.8)
    ax.set(xlabel="k (keys)", ylabel="share of pairs focused", ylim=(0, 1), title="half the weight on k keys")
    ax.legend(loc="lower right", fontsize=9)
    ax = axes[1]
    share = np.asarray(focus["focused"]) / np.asarray(focus["pairs"])
    ax.scatter(focus["sink"], share, s=14, alpha=0.7, color=method_color("top-k"))
    ax.axvline(0.5, color="0.6", lw=0.8)
    ax.axhline(level, color="0.3", ls=":")
    ax.set(xlabel="sink weight (on [CLS] and [SEP])", ylabel=f"share focused (k = {focus['config']['k']})",
           xlim=(0, 1), ylim=(0, 1), title="each of the 72 heads")
    return fig
