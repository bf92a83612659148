"""Figures for chapter 3's images: a digit cut into patch tokens, and how far each head looks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

from ...core._backend import ShapeError
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
def plot_patch_attention(image: np.ndarray, weights: Sequence[np.ndarray], patch: int = 2, query: int = 5,
                         titles: Optional[Sequence[str]] = None, suptitle: Optional[str] = None) -> Figure:
    """The image cut into patches (left), then each given head's weights from patch ``query`` (one panel each).

    ``image``: (8, 8); ``weights``: attention maps (n, n) of that image; ``query`` (row-major over the
    grid) is outlined in every panel.

    Examples
    --------
    >>> A = np.full((16, 16), 1 / 16)
    >>> fig = plot_patch_attention(np.eye(8), [A], titles=["uniform"])
    >>> [ax.get_title() for ax in fig.axes[:2]]
    ['16 patches', 'uniform']
    >>> plt.close(fig)
    """
    image = np.asarray(image, dtype=float)
    g = image.shape[0] // patch
    if image.ndim != 2 or image.shape[0] != image.shape[1] or image.shape[0] % patch:
        raise ShapeError(f"image has shape {image.shape}; expected a square (H, H) with H divisible by {patch}")
    maps = [np.asarray(w, dtype=float) for w in weights]
    if any(w.shape != (g * g, g * g) for w in maps):
        raise ShapeError(f"weights have shapes {[w.shape for w in maps]}; expected ({g * g}, {g * g}) each")
    titles = list(titles) if titles is not None else [f"head {i + 1}" for i in range(len(maps))]
    fig, axes = plt.subplots(1, 1 + len(maps), figsize=(min(7.0, 1.9 * (1 + len(maps))), 2.4),
                             layout="constrained")
    r, c = divmod(query, g)
    ax = axes[0]
    ax.imshow(image, cmap="gray_r", vmin=0, vmax=image.max() or 1)
    for k in range(1, g):
        ax.axhline(k * patch - 0.5, color="#D55E00", lw=1)
        ax.axvline(k * patch - 0.5, color="#D55E00", lw=1)
    ax.set_title(f"{g * g} patches")
    im = None
    for ax, w, title in zip(axes[1:], maps, titles):
        im = ax.imshow(w[query].reshape(g, g), cmap="viridis", vmin=0, vmax=max(float(m[query].max()) for m in maps))
        ax.set_title(title)
    for ax, scale in zip(axes, [patch] + [1] * len(maps)):
        off = -0.5
        ax.add_patch(Rectangle((c * scale + off, r * scale + off), scale, scale, fill=False, ec="white", lw=3.5, zorder=5))
        ax.add_patch(Rectangle((c * scale + off, r * scale + off), scale, scale, fill=False, ec="#0072B2", lw=2, zorder=6))
        ax.set_xticks([])
        ax.set_yticks([])
    fig.colorbar(im, ax=axes[1:], shrink=0.85, label="weight")
    if suptitle:
        fig.suptitle(suptitle)
    return fig


@book_figure
def plot_attention_distance(doc: dict, alpha: Optional[float] = None) -> Figure:
    """Each head's mean attention distance (px), layer by layer, over seeds: near heads blue, others orange.

    ``doc`` is a :func:`~attention_course.chapters.lowrank.vision_locality.vision_run` document. Untrained
    models' heads are grey; the dashed line is uniform attention, and the grey bar spans the
    shuffled-geometry null's 1st percentile to its mean, per layer.

    Examples
    --------
    >>> run = {"seed": 0, "layers": [{"distance": [2.0, 4.0], "p_space": [0.001, 0.5], "p_content": [0.5, 0.5],
    ...        "null_mean": [4.0, 4.0], "null_p01": [3.5, 3.5]}],
    ...        "untrained": [{"distance": [4.0, 4.0], "p_space": [0.3, 0.6], "p_content": [0.5, 0.5]}]}
    >>> fig = plot_attention_distance({"alpha": 0.005, "uniform": 4.0, "runs": [run]})
    >>> ax = fig.axes[0]; ax.get_xlabel(), ax.get_ylabel()
    ('layer', 'mean attention distance (px)')
    >>> plt.close(fig)
    """
    alpha = doc["alpha"] if alpha is None else alpha
    runs = doc["runs"]
    L = len(runs[0]["layers"])
    fig, ax = plt.subplots(figsize=(6.0, 3.6), layout="constrained")
    rng = np.random.default_rng(0)  # jitter only
    for l in range(L):
        null_lo = np.mean([m for r in runs for m in r["layers"][l]["null_p01"]])
        null_mid = np.mean([m for r in runs for m in r["layers"][l]["null_mean"]])
        ax.add_patch(Rectangle((l + 1 - 0.38, null_lo), 0.76, null_mid - null_lo, color="0.88", zorder=0))
        for which, dx in (("untrained", -0.22), ("layers", 0.12)):
            d = np.array([x for r in runs for x in r[which][l]["distance"]])
            near = np.array([ps < alpha or pc < alpha for r in runs
                             for ps, pc in zip(r[which][l]["p_space"], r[which][l]["p_content"])])
            _head_dots(ax, l + 1 + dx, d, near, which == "untrained", rng, jitter=0.09, size=18)
    ax.axhline(doc["uniform"], color="0.3", ls="--", lw=1)
    ax.set(xlabel="layer", ylabel="mean attention distance (px)", xticks=range(1, L + 1),
           xlim=(0.4, L + 0.6), title=f"Every head of {len(runs)} trained models, and their untrained twins")
    handles = [Line2D([], [], marker="o", ls="", color=_NEAR, label="near (trained)"),
               Line2D([], [], marker="o", ls="", color=_FAR, label="not near (trained)"),
               Line2D([], [], marker="o", ls="", color=_UNTRAINED, label="untrained"),
               Line2D([], [], ls="--", color="0.3", label="uniform attention"),
               Rectangle((0, 0), 1, 1, color="0.88", label="shuffled geometry (1st pct. to mean)")]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=9)
    ax.set_ylim(bottom=0)
    return fig


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
