"""Figures for chapter 3's fair retest: rank against length, function under replacement, recall.

Each helper takes the stored run of :mod:`attention_course.experiments.lowrank_function`
(or a part of it), labels its axes, returns the :class:`matplotlib.figure.Figure` and
changes no global matplotlib state. Sized for the book's 688-px column.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import NullFormatter

from .style import book_figure, method_color

__all__ = ["plot_rank_vs_length", "plot_swap", "plot_recall"]


@book_figure
def plot_rank_vs_length(length: Sequence[Mapping], slope: float) -> Figure:
    """Median (and quartiles) of MiniLM's per-head effective rank against ``n``, with ``n`` itself.

    Parameters
    ----------
    length : list of dict
        The ``length`` rows of the stored run: ``n`` and per-head ``effective_rank`` lists.
    slope : float
        The fitted log-log slope, shown in the legend.

    Examples
    --------
    >>> rows = [{"n": 16, "effective_rank": [3.0, 4.0]}, {"n": 64, "effective_rank": [9.0, 12.0]}]
    >>> plot_rank_vs_length(rows, 0.8).axes[0].get_xlabel()
    'sequence length n (tokens)'
    """
    n = np.array([r["n"] for r in length], dtype=float)
    q = np.array([np.percentile(r["effective_rank"], [25, 50, 75]) for r in length])  # (len(n), 3)
    fig, ax = plt.subplots(figsize=(6.5, 4.0), layout="constrained")
    ax.fill_between(n, q[:, 0], q[:, 2], color="C0", alpha=0.25, label="heads: 25th-75th percentile")
    ax.plot(n, q[:, 1], "o-", color="C0", label=f"median head (log-log slope {slope:.2f})")
    ax.plot(n, n, ":", color="0.4", label="effective rank = n")
    ax.plot(n, np.full_like(n, 8.0), "--", color=method_color("svd"), label="rank 8")
    ax.set(xscale="log", yscale="log", xlabel="sequence length n (tokens)", ylabel="effective rank",
           title="all-MiniLM-L6-v2: effective rank grows with n")
    ax.set_xticks(n, [f"{v:g}" for v in n])  # the measured lengths, not 3x10^1-style minor labels
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.legend()
    return fig


@book_figure
def plot_swap(rows: Sequence[Mapping], ks: Sequence[int], ylabel: str, title: str,
              exact_key: str = "", log: bool = True) -> Figure:
    """A model's loss (or output change) with every head replaced by rank-k, top-k or uniform weights.

    Parameters
    ----------
    rows : list of dict
        One dict per seed (or input) with keys ``rank_{k}``, ``topk_{k}``, ``uniform`` and,
        if ``exact_key``, the unmodified model's value; the mean over rows is plotted and
        the min-max range shaded.
    ks : sequence of int
        The budgets; rank k and top-k store about the same number of values (2 k n).
    ylabel, title : str
    exact_key : str
        Key of the unmodified model's value (drawn as a line), or ``""``.
    log : bool
        Log scale on the y axis.

    Examples
    --------
    >>> rows = [{"exact": 0.01, "uniform": 4.0, "rank_2": 3.0, "topk_2": 0.1, "rank_8": 1.0, "topk_8": 0.02}]
    >>> plot_swap(rows, [2, 8], "loss", "t", exact_key="exact").axes[0].get_ylabel()
    'loss'
    """
    fig, ax = plt.subplots(figsize=(6.5, 4.0), layout="constrained")
    for name, color, label in (("rank", method_color("svd"), "rank-k truncation"),
                               ("topk", method_color("top-k"), "top-k weights per row")):
        vals = np.array([[r[f"{name}_{k}"] for k in ks] for r in rows])  # (rows, len(ks))
        ax.plot(ks, vals.mean(axis=0), "o-", color=color, label=label)
        ax.fill_between(ks, vals.min(axis=0), vals.max(axis=0), color=color, alpha=0.2)
    ax.axhline(np.mean([r["uniform"] for r in rows]), color=method_color("uniform"), ls="--",
               label="uniform attention (baseline)")
    if exact_key:
        ax.axhline(np.mean([r[exact_key] for r in rows]), color=method_color("exact"), lw=0.8, label="unmodified model")
    ax.set(xscale="log", xlabel="k (rank, or weights kept per row)", ylabel=ylabel, title=title)
    ax.set_xticks(list(ks), [str(k) for k in ks])
    if log:
        ax.set_yscale("log")
    ax.legend()
    return fig


@book_figure
def plot_recall(recall: Mapping) -> Figure:
    """Recall accuracy against the number of stored pairs, softmax vs linear memories, per key dimension.

    Parameters
    ----------
    recall : dict
        A :func:`~attention_course.lenses.recall.recall_sweep` result.

    Examples
    --------
    >>> out = {"ns": [4, 8], "ds": [16], "seeds": [0], "softmax": [[[1.0], [1.0]]],
    ...        "linear": [[[0.5], [0.2]]], "linear_identity": [[[1.0], [0.9]]]}
    >>> len(plot_recall(out).axes[0].get_lines())
    3
    """
    ns = np.array(recall["ns"], dtype=float)
    fig, ax = plt.subplots(figsize=(6.5, 4.6), layout="constrained")
    styles = {"softmax": ("-", "softmax attention"), "linear_identity": ("--", "linear memory, identity features"),
              "linear": (":", "linear attention, elu+1")}
    for i, d in enumerate(recall["ds"]):
        for name, (ls, label) in styles.items():
            acc = np.asarray(recall[name][i]).mean(axis=-1)  # (len(ns),), mean over seeds
            ax.plot(ns, acc, ls, marker="o", ms=3, color=f"C{i}", label=f"{label}, d = {d}")
    ax.set(xscale="log", xlabel="stored key-value pairs n", ylabel="recall accuracy",
           title="Query with a stored key: is its own value\nthe nearest output?", ylim=(-0.02, 1.02))
    # two short legends (line style = memory, colour = key dimension) instead of one per line
    kinds = [Line2D([], [], color="0.3", ls=ls, label=label) for ls, label in styles.values()]
    dims = [Line2D([], [], color=f"C{i}", marker="o", ms=3, label=f"d = {d}") for i, d in enumerate(recall["ds"])]
    fig.legend(handles=kinds + dims, loc="outside lower center", ncols=2)
    return fig
