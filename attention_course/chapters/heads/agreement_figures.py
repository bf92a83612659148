"""The agreement figure: the best head, picked on half the sentences, against position and noun rules."""

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
    fixed offset and fixed position, the noun rules (nearest noun before the verb, first noun) and
    the head's share on the other nouns; one panel per sentence set in ``run``; bars are means over
    the random splits, dots single splits.

    Examples
    --------
    >>> sp = {"head": 0, "head_share": 0.9, "offset_share": 0.3, "position_share": 0.3, "other_share": 0.1}
    >>> fig = plot_agreement({"plain": {"splits": [sp]}, "attractor": {"splits": [sp]}})
    >>> [ax.get_title() for ax in fig.axes]
    ['no noun between', 'a noun of the other number between']
    """
    bars = (("head_share", "best head", role_color("previous token")), ("offset_share", "fixed offset", role_color("other")),
            ("position_share", "fixed position", role_color("punctuation")),
            ("nearest_share", "nearest noun", role_color("next token")), ("first_share", "first noun", role_color("[CLS]")),
            ("other_share", "head → nearest other noun", role_color("[SEP]")),
            ("first_other_share", "head → first noun", role_color("[SEP]")))
    panels = [p for p in (("plain", "no noun between"), ("attractor", "a noun of the other number between"),
                          ("crossed", "subject neither the first nor the nearest noun")) if p[0] in run]
    fig, axes = plt.subplots(len(panels), 1, figsize=(6.8, 1.0 + 1.9 * len(panels)), layout="constrained",
                             sharex=True, squeeze=False)
    for ax, (key, title) in zip(axes[:, 0], panels):
        splits = run[key]["splits"]
        shown = [b for b in bars if b[0] in splits[0]]
        for i, (field, label, color) in enumerate(shown):
            vals = np.array([s[field] for s in splits])
            ax.barh(i, vals.mean(), color=color, alpha=0.85)
            ax.plot(vals, np.full(len(vals), i), "o", ms=3.5, color="black")
        ax.axvline(level, color="0.3", ls=":")
        ax.set_yticks(range(len(shown)), [label for _, label, _ in shown])
        ax.invert_yaxis()
        ax.set(title=title, xlim=(0, 1))
    axes[-1, 0].set_xlabel("held-out share of verbs")
    fig.suptitle("From the verb, is the heaviest word the subject?", fontsize=11.5)
    return fig
