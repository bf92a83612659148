"""Figure for chapter 5's composition run: held-out accuracy on k-hop pointer chasing against depth.

The numbers come from :mod:`attention_course.experiments.composition` (its ``summarise`` of
the stored JSON or of a live run); the helper labels its axes, returns the :class:`matplotlib.figure.Figure` and
changes no global matplotlib state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from .style import book_figure

__all__ = ["plot_composition"]


@book_figure
def plot_composition(summary: Mapping[tuple, Mapping[str, float]], chance: Optional[float] = None,
                     baselines: Optional[Mapping[str, float]] = None, title: str = "",
                     ax: Optional[Axes] = None) -> Figure:
    """Held-out accuracy against the number of layers L, one line per number of hops k.

    Markers are the mean over seeds, bars span the lowest to the highest seed.
    ``chance`` draws the guessing rate as a dashed line; ``baselines`` (label -> accuracy)
    draws further reference levels as dotted lines, e.g. ``{"follow one link": 0.0}``.

    Parameters
    ----------
    summary : mapping of (k, L) to dict
        Each value with ``mean``, ``min`` and ``max`` over seeds, as
        :func:`attention_course.experiments.composition.summarise` returns them.
    chance : float, optional
    baselines : mapping of str to float, optional
    title : str
    ax : matplotlib.axes.Axes, optional
        Draw into this axes instead of a new figure.

    Examples
    --------
    >>> cell = lambda a: {"mean": a, "min": a, "max": a}
    >>> summary = {(1, 1): cell(1.0), (1, 2): cell(1.0), (2, 1): cell(0.3), (2, 2): cell(0.9)}
    >>> fig = plot_composition(summary, chance=0.125, title="t")
    >>> fig.axes[0].get_xlabel(), [t.get_text() for t in fig.legends[0].get_texts()][:2]
    ('number of layers L', ['k = 1 hop', 'k = 2 hops'])
    """
    if not summary:
        raise ValueError("summary is empty; expected {(k, L): {'mean': ..., 'min': ..., 'max': ...}}")
    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(6.4, 4.4), layout="constrained")
    else:
        fig = ax.figure
    hops = sorted({k for k, _ in summary})
    layers = sorted({L for _, L in summary})
    colours = plt.get_cmap("viridis")(np.linspace(0.0, 0.85, len(hops)))
    offsets = np.linspace(-0.03, 0.03, len(hops)) if len(hops) > 1 else [0.0]  # keep bars apart
    handles = []  # in drawing order: the k lines first, then the reference levels
    for k, colour, dx, marker in zip(hops, colours, offsets, "osD^vp"):
        Ls = [L for L in layers if (k, L) in summary]
        s = [summary[k, L] for L in Ls]
        mean = np.array([v["mean"] for v in s])
        err = np.array([[v["mean"] - v["min"] for v in s], [v["max"] - v["mean"] for v in s]])
        handles.append(ax.errorbar(np.array(Ls) + dx, mean, yerr=err, color=colour, marker=marker, capsize=3, lw=1.6,
                    label=f"k = {k} hop" + ("s" if k > 1 else "")))
    if chance is not None:
        handles.append(ax.axhline(chance, color="0.45", ls="--", lw=1, label=f"guess, 1/n = {chance:.3g}"))
    for (name, level), ls in zip((baselines or {}).items(), (":", "-.", (0, (1, 3)))):
        handles.append(ax.axhline(level, color="0.3", ls=ls, lw=1, label=f"{name}: {level:.2g}"))
    ax.set_xticks(layers)
    ax.set_xlim(layers[0] - 0.3, layers[-1] + 0.3)
    ax.set_xlabel("number of layers L")
    ax.set_ylabel("held-out accuracy")
    ax.set_ylim(-0.03, 1.03)
    ax.grid(alpha=0.3)
    if own:
        fig.legend(handles=handles, loc="outside lower center", ncols=2)  # below the axes, inside the width
    else:
        ax.legend(handles=handles, loc="best")
    ax.set_title(title)
    return fig
