"""The agreement figure: the best head, picked on half the sentences, against position-only rules."""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ...figures.style import book_figure, role_color

__all__ = ["plot_agreement"]


@book_figure
def plot_agreement(run: Mapping, level: float = 0.5) -> Figure:
    """Held-out share of verbs whose heaviest word key is the subject: the selected head, the best
    fixed offset and fixed position, and (attractor sentences) the head's share on the attractor;
    bars are means over the random splits, dots single splits.

    Examples
    --------
    >>> sp = {"head": 0, "head_share": 0.9, "offset_share": 0.3, "position_share": 0.3, "other_share": 0.1}
    >>> fig = plot_agreement({"plain": {"splits": [sp]}, "attractor": {"splits": [sp]}})
    >>> [ax.get_title() for ax in fig.axes]
    ['no noun between', 'an attractor noun between']
    """
    bars = (("head_share", "best head", role_color("previous token")), ("offset_share", "fixed offset", role_color("other")),
            ("position_share", "fixed position", role_color("punctuation")), ("other_share", "head → attractor", role_color("[SEP]")))
    fig, axes = plt.subplots(1, 2, figsize=(6.8, 2.9), layout="constrained", sharex=True)
    for ax, key, title in ((axes[0], "plain", "no noun between"), (axes[1], "attractor", "an attractor noun between")):
        splits = run[key]["splits"]
        shown = [b for b in bars if b[0] in splits[0]]
        for i, (field, label, color) in enumerate(shown):
            vals = np.array([s[field] for s in splits])
            ax.barh(i, vals.mean(), color=color, alpha=0.85)
            ax.plot(vals, np.full(len(vals), i), "o", ms=3.5, color="black")
        ax.axvline(level, color="0.3", ls=":")
        ax.set_yticks(range(len(shown)), [label for _, label, _ in shown])
        ax.invert_yaxis()
        ax.set(title=title, xlim=(0, 1), xlabel="held-out share of verbs")
    fig.suptitle("From the verb, is the heaviest word the subject?", fontsize=11.5)
    return fig
