"""Figures for chapter 3's images: how much of each head's attention stays in the query's neighbourhood."""

from __future__ import annotations

from typing import Optional

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ...figures.style import book_figure

__all__ = ["plot_neighbourhood_mass"]

_NEAR, _FAR, _UNTRAINED = "#0072B2", "#E69F00", "#BBBBBB"


def _head_dots(ax, x: float, values: np.ndarray, near: np.ndarray, untrained: bool, rng: np.random.Generator,
               jitter: float, size: float) -> None:
    """One layer's heads as dots jittered around ``x``: untrained grey, trained blue where near, orange otherwise."""
    xs = x + rng.uniform(-jitter, jitter, size=values.size)
    if untrained:
        ax.scatter(xs, values, s=size - 2, color=_UNTRAINED, zorder=2)
    else:
        ax.scatter(xs[~near], values[~near], s=size, color=_FAR, zorder=3)
        ax.scatter(xs[near], values[near], s=size, color=_NEAR, zorder=3)


@book_figure
def plot_neighbourhood_mass(doc: dict, alpha: Optional[float] = None, most: float = 0.5) -> Figure:
    """Each head's share of attention on the query's neighbourhood: on the image (left), in content (right).

    Trained heads are blue when *near* (above ``most`` and beyond the shuffle at ``alpha``), orange
    otherwise; untrained models' heads grey; dashed: uniform attention; dotted: ``most``.

    Examples
    --------
    >>> m = {"mass": [0.6, 0.4], "p_mass": [0.001, 0.5], "content_mass": [0.4, 0.45], "p_content_mass": [0.5, 0.5],
    ...      "mass_uniform": 0.39}
    >>> fig = plot_neighbourhood_mass({"alpha": 0.005, "runs": [{"layers": [m], "untrained": [m]}]})
    >>> [ax.get_title() for ax in fig.axes]
    ['on the image: 3 x 3 patches', 'in content: as many nearest patches']
    >>> plt.close(fig)
    """
    alpha = doc["alpha"] if alpha is None else alpha
    runs = doc["runs"]
    L = len(runs[0]["layers"])
    uniform = runs[0]["layers"][0]["mass_uniform"]
    fig, axes = plt.subplots(1, 2, figsize=(7.0, 3.3), layout="constrained", sharey=True)
    rng = np.random.default_rng(0)  # jitter only
    for ax, key, title in zip(axes, ("mass", "content_mass"),
                              ("on the image: 3 x 3 patches", "in content: as many nearest patches")):
        pkey = "p_" + key
        for l in range(L):
            for which, dx in (("untrained", -0.2), ("layers", 0.15)):
                v = np.array([x for r in runs for x in r[which][l][key]])
                p = np.array([x for r in runs for x in r[which][l][pkey]])
                _head_dots(ax, l + 1 + dx, v, (v > most) & (p < alpha), which == "untrained", rng,
                           jitter=0.08, size=16)
        ax.axhline(uniform, color="0.3", ls="--", lw=1)
        ax.axhline(most, color="0.3", ls=":", lw=1.2)
        ax.set(xlabel="layer", xticks=range(1, L + 1), xlim=(0.5, L + 0.5), title=title)
    axes[0].set_ylabel("share of the weight")
    handles = [Line2D([], [], marker="o", ls="", color=_NEAR, label="near"),
               Line2D([], [], marker="o", ls="", color=_FAR, label="not near"),
               Line2D([], [], marker="o", ls="", color=_UNTRAINED, label="untrained"),
               Line2D([], [], ls="--", color="0.3", label="uniform"),
               Line2D([], [], ls=":", color="0.3", label="half")]
    fig.legend(handles=handles, loc="outside lower center", ncol=5, fontsize=9)
    return fig
