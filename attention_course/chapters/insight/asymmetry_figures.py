"""The figures of the asymmetry and metric tests: accuracy per task and arm, verdicts against their margin,
learning curves. Each returns the :class:`matplotlib.figure.Figure` and changes no global state."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ...figures.style import book_figure

__all__ = ["plot_asymmetry", "plot_verdict_sweep", "plot_learning_curves"]

#: One colour per arm (Okabe & Ito), in the order given: e.g. untied, symmetric indefinite, tied, a fourth.
SCORE_COLORS = ("#0072B2", "#009E73", "#D55E00", "#CC79A7")
#: The verdicts, bottom to top, on the sweep's vertical axis.
VERDICTS = ("wrong as stated", "undecided", "holds when", "holds")


@book_figure
def plot_asymmetry(accuracy: Mapping[tuple[str, str], Sequence[float]], tasks: Sequence[tuple[str, str]],
                   variants: Sequence[tuple[str, str]], chance: float,
                   untrained: Optional[Mapping[tuple[str, str], Sequence[float]]] = None,
                   bound: Optional[tuple[str, float]] = None, title: str = "") -> Figure:
    """Accuracy per task (groups) and variant (colours): each seed a dot, the mean a bar; chance dotted.

    Parameters
    ----------
    accuracy : mapping (task, variant) -> accuracy per seed
    tasks, variants : sequences of (label shown, key in ``accuracy``)
    chance : float
    untrained : mapping (task, variant) -> accuracy per seed at initialisation, optional (grey crosses)
    bound : (task key, value), optional
        The top-1 read-out bound, dashed over one task's group.

    Examples
    --------
    >>> acc = {(t, v): [1.0, 0.9] for t in ("a", "b") for v in ("u", "s")}
    >>> fig = plot_asymmetry(acc, [("task a", "a"), ("task b", "b")], [("untied", "u"), ("signed", "s")], 1 / 64,
    ...                      bound=("a", 0.75))
    >>> [t.get_text() for t in fig.axes[0].get_xticklabels()], fig.axes[0].get_ylabel()
    (['task a', 'task b'], 'held-out accuracy')
    """
    if len(variants) > len(SCORE_COLORS):
        raise ValueError(f"{len(variants)} variants; at most {len(SCORE_COLORS)} colours")
    fig, ax = plt.subplots(figsize=(7.0, 3.6), layout="constrained")
    width = 0.8 / len(variants)
    for j, ((label, v), colour) in enumerate(zip(variants, SCORE_COLORS)):
        first = next((i for i, (_, t) in enumerate(tasks) if (t, v) in accuracy), None)  # where its legend entry comes from
        for i, (_, t) in enumerate(tasks):
            if (t, v) not in accuracy:
                continue
            x = i - 0.4 + width * (j + 0.5)
            seeds = np.asarray(accuracy[t, v], dtype=float)
            ax.bar(x, seeds.mean(), width=width * 0.9, color=colour, alpha=0.35, label=label if i == first else None)
            ax.plot(np.full(seeds.size, x) + np.linspace(-0.25, 0.25, seeds.size) * width, seeds, "o", ms=4,
                    color=colour, mec="white", mew=0.5)
            if untrained is not None and (t, v) in untrained:
                ax.plot([x], [float(np.mean(untrained[t, v]))], "x", ms=6, color="0.3",
                        label="untrained" if (i, j) == (0, 0) else None)
    ax.axhline(chance, color="0.4", ls=":", lw=1.2)
    ax.text(len(tasks) - 0.45, chance + 0.02, "chance 1/64", color="0.3", fontsize=9, ha="right", va="bottom")
    if bound is not None:
        i = [t for _, t in tasks].index(bound[0])
        ax.plot([i - 0.45, i + 0.45], [bound[1], bound[1]], "--", color="0.2", lw=1.2)
        ax.text(i, bound[1] - 0.02, "top-1 read-out bound", color="0.2", fontsize=9, ha="center", va="top")
    ax.set_xticks(range(len(tasks)), [label for label, _ in tasks])
    ax.set(ylabel="held-out accuracy", ylim=(0, 1.05), title=title or None)
    fig.legend(loc="outside lower center", ncol=2)
    return fig


@book_figure
def plot_verdict_sweep(thresholds: Sequence[float], verdicts: Mapping[str, Sequence[str]], fixed_margin: float,
                       gaps: Optional[Mapping[str, float]] = None, title: str = "",
                       xlabel: str = "margin a gap must exceed", fixed_label: str = "margin fixed \nbefore the run ",
                       label_at: float = 1.0) -> Figure:
    """Each claim's verdict (a step line over :data:`VERDICTS`) against the margin that decides it (log axis).

    Parameters
    ----------
    thresholds : the margins tried, increasing
    verdicts : mapping claim -> its verdict at each threshold
    fixed_margin : the margin fixed before the run (a vertical dashed line)
    gaps : mapping label -> gap, optional: thin vertical lines where a measured gap lies
    xlabel : what the threshold is (e.g. a factor of steps instead of a margin)
    fixed_label, label_at : the dashed line's label and its height on the verdict axis (0 = wrong as stated)

    Examples
    --------
    >>> fig = plot_verdict_sweep([0.01, 0.1], {"a": ["holds", "holds when"]}, 0.05, gaps={"gap": 0.07})
    >>> [t.get_text() for t in fig.axes[0].get_yticklabels()][-1], fig.axes[0].get_xscale()
    ('holds', 'log')
    """
    fig, ax = plt.subplots(figsize=(7.0, 3.2), layout="constrained")
    for j, ((claim, vs), colour) in enumerate(zip(verdicts.items(), SCORE_COLORS)):
        y = [VERDICTS.index(v) + 0.08 * (j - (len(verdicts) - 1) / 2) for v in vs]  # small offset: lines stay apart
        ax.step(thresholds, y, where="post", color=colour, lw=2, label=claim)
        ax.plot(thresholds, y, "o", ms=4, color=colour)
    ax.axvline(fixed_margin, color="0.2", ls="--", lw=1.2)
    ax.text(fixed_margin, label_at, fixed_label, fontsize=8, color="0.2", va="center", ha="right")
    for label, g in (gaps or {}).items():
        if thresholds[0] <= g <= thresholds[-1]:
            ax.axvline(g, color="0.6", lw=0.8, ls=":")
            ax.text(g, -0.45, label, fontsize=8, color="0.4", rotation=90, ha="right", va="bottom")
    ax.set_xscale("log")
    ax.set_yticks(range(len(VERDICTS)), VERDICTS)
    ax.set(xlabel=xlabel, ylim=(-0.5, len(VERDICTS) - 0.5), title=title or None)
    fig.legend(loc="outside lower center", ncol=2)
    return fig


@book_figure
def plot_learning_curves(curves: Mapping[str, Sequence[Sequence[float]]], check_every: int = 100,
                         level: Optional[float] = None, title: str = "") -> Figure:
    """Validation accuracy against training steps (log axis), one colour per arm, one thin line per seed.

    Parameters
    ----------
    curves : mapping arm label -> per seed, the validation accuracy at each check
    check_every : steps between checks
    level : a dotted horizontal line (the accuracy whose first crossing measures speed), optional

    Examples
    --------
    >>> fig = plot_learning_curves({"untied": [[0.5, 0.99]], "symmetric": [[0.2, 0.4, 0.6], [0.3, 0.5, 0.7]]},
    ...                            level=0.95)
    >>> fig.axes[0].get_xscale(), len(fig.axes[0].lines)
    ('log', 4)
    """
    if len(curves) > len(SCORE_COLORS):
        raise ValueError(f"{len(curves)} arms; at most {len(SCORE_COLORS)} colours")
    fig, ax = plt.subplots(figsize=(7.0, 3.4), layout="constrained")
    for (label, seeds), colour in zip(curves.items(), SCORE_COLORS):
        for j, c in enumerate(seeds):
            steps = check_every * np.arange(1, len(c) + 1)
            ax.plot(steps, c, color=colour, lw=1.2, alpha=0.85, label=label if j == 0 else None)
    if level is not None:
        ax.axhline(level, color="0.4", ls=":", lw=1.2)
        last = max(len(c) for seeds in curves.values() for c in seeds) * check_every
        ax.text(last, level - 0.02, f"{level:.2f}", color="0.3", fontsize=9, va="top", ha="right")
    ax.set_xscale("log")
    ax.set(xlabel="training steps", ylabel="validation accuracy", ylim=(0, 1.02), title=title or None)
    fig.legend(loc="outside lower center", ncol=2)
    return fig
