"""Figures for chapter 1: attention heatmaps, masks and the convex hull of the values.

Each draws on the ``ax`` it is given (or a new figure) and returns the figure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ...core._backend import Array, to_numpy
from .hull import convex_hull
from ...figures.style import MASK_CMAP, MAX_WIDTH, book_figure, mask_legend, new_axes

__all__ = ["plot_heatmap", "plot_attention", "plot_masks", "plot_convex_hull", "plot_gaps"]

#: The smallest type (pt) of a figure that must read on a phone; cell annotations use it where they fit.
SMALLEST_PT = 10
#: Width (in) of chapter 1's one-panel figures that are not heatmaps: 10 pt reads at about 10 CSS px on a phone.
PHONE_WIDTH = 5.2
#: Inches per heatmap column at most: a 6 x 6 map is then 5.2 in wide, about 10 CSS px per 10 pt on a phone.
_CELL = 0.5


def _heatmap_size(rows: int, cols: int) -> tuple:
    """A figure size (in) for a labelled R x C heatmap with a colour bar, at most MAX_WIDTH wide."""
    cell = min(_CELL, (MAX_WIDTH - 2.2) / cols)  # inches per column; 2.2 in for labels and colour bar
    return (cell * cols + 2.2, min(0.82 * cell * rows + 1.4, 6.0))


def _annotation_size(cols: int, new_figure: bool):
    """SMALLEST_PT when a cell of a new figure is wide enough for "-0.00" at that size (0.45 in), else "small"."""
    return SMALLEST_PT if new_figure and _heatmap_size(1, cols)[0] - 2.2 >= 0.45 * cols else "small"


@book_figure
def plot_heatmap(matrix: Array, row_labels: Optional[Sequence[str]] = None,
                 col_labels: Optional[Sequence[str]] = None, ax: Optional[Axes] = None, title: str = "",
                 xlabel: str = "", ylabel: str = "", cmap: str = "viridis", vmin: Optional[float] = None,
                 vmax: Optional[float] = None, annotate: bool = True, fmt: str = "{:.2f}", colorbar_label: str = ""
                ) -> Figure:
    """Draw a matrix (R, C) as a labelled heatmap with a colour bar; ``annotate`` writes values up to 12 x 12."""
    m = to_numpy(matrix).astype(float)
    if m.ndim != 2:
        raise ValueError(f"matrix has shape {m.shape}; expected 2 dimensions (R, C)")
    size = _annotation_size(m.shape[1], ax is None)
    fig, ax = new_axes(ax, _heatmap_size(*m.shape))
    im = ax.imshow(m, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    cbar = fig.colorbar(im, ax=ax, shrink=0.9)
    if colorbar_label:
        cbar.set_label(colorbar_label)
    if row_labels is not None:
        ax.set_yticks(range(m.shape[0]), labels=list(row_labels))
    if col_labels is not None:
        ax.set_xticks(range(m.shape[1]), labels=list(col_labels), rotation=45, ha="right")
    if annotate and max(m.shape) <= 12:
        for (i, j), val in np.ndenumerate(m):
            r, g, b, _ = im.cmap(im.norm(val))  # colour of this cell
            dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.5  # perceived luminance
            ax.text(j, i, fmt.format(val), ha="center", va="center", fontsize=size,
                    color="white" if dark else "black")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    return fig


@book_figure
def plot_attention(weights: Array, query_labels: Optional[Sequence[str]] = None,
                   key_labels: Optional[Sequence[str]] = None, ax: Optional[Axes] = None,
                   title: str = "Attention weights", annotate: bool = True, vmax: Optional[float] = None
                  ) -> Figure:
    """Heatmap of an attention matrix (T, S): rows are queries, columns keys.

    ``key_labels`` defaults to ``query_labels`` for a square matrix; ``vmax`` defaults to the largest weight
    (the colour bar's label then says so).

    Examples
    --------
    >>> import numpy as np
    >>> fig = plot_attention(np.full((2, 3), 1 / 3), ["a", "b"], ["x", "y", "z"])
    >>> fig.axes[0].get_xlabel(), fig.axes[0].images[0].get_clim()
    ('key (attended to)', (0.0, 0.3333333333333333))
    >>> fig.axes[1].get_ylabel()
    'weight (colour scale 0 to the largest, 0.33)'
    """
    w = to_numpy(weights)
    if key_labels is None and query_labels is not None and w.shape[0] == w.shape[1]:
        key_labels = query_labels
    label = "weight"
    if vmax is None:
        vmax = float(w.max()) if w.size and w.max() > 0 else 1.0
        label = f"weight (colour scale 0 to the largest, {vmax:.2f})"
    return plot_heatmap(
        w, query_labels, key_labels, ax=ax, title=title,
        xlabel="key (attended to)", ylabel="query (attending)",
        cmap="viridis", vmin=0.0, vmax=vmax, annotate=annotate, colorbar_label=label,
    )



@book_figure
def plot_masks(masks: Mapping[str, Array], labels: Optional[Sequence[str] | Mapping[str, Sequence[str]]] = None, ncols: int = 3,
               legend: Sequence[str] = ("blocked", "may attend"), axis_labels: tuple[str, str] = ("key j", "query i")
              ) -> Figure:
    """Draw boolean masks (T, S), True = may attend, in a grid of at most ``ncols`` columns, with a two-colour legend.

    ``labels``: token labels, used where their number matches, or a mapping of mask name to its own.
    ``legend`` names False and True; ``axis_labels`` the columns and rows.

    Examples
    --------
    >>> import numpy as np
    >>> fig = plot_masks({"causal": np.tril(np.ones((3, 3), bool)), "all": np.ones((3, 3), bool)})
    >>> [t.get_text() for t in fig.axes[-1].get_legend().get_texts()]
    ['blocked', 'may attend']
    >>> float(fig.get_size_inches()[0]) <= 7.0
    True
    >>> fig = plot_masks({"R": np.eye(2, dtype=bool)}, axis_labels=("input j", "output i"))
    >>> fig.axes[0].get_xlabel(), fig.axes[0].get_ylabel()
    ('input j', 'output i')
    >>> fig = plot_masks({"pad": np.ones((2, 2), bool)}, labels={"pad": ["cat", "<pad>"]})
    >>> [t.get_text() for t in fig.axes[0].get_xticklabels()]
    ['cat', '<pad>']
    """
    n = len(masks)
    ncols = max(1, min(ncols, n))
    nrows = -(-n // ncols)
    panel = min(2.0, (MAX_WIDTH - 1.4) / ncols)  # inches; 1.4 in for the legend column (two panels: 5.4 in)
    fig, axes = plt.subplots(nrows, ncols + 1, figsize=(panel * ncols + 1.4, (panel + 0.5) * nrows),
                             layout="constrained", squeeze=False, width_ratios=[panel] * ncols + [1.2])
    for ax, (name, mask) in zip(axes[:, :ncols].flat, masks.items()):
        m = to_numpy(mask).astype(bool)
        names = labels.get(name) if isinstance(labels, Mapping) else labels
        ax.imshow(m, cmap=MASK_CMAP, vmin=0, vmax=1)
        ax.spines[:].set_visible(True)  # a frame, so that blocked cells at the edge stay visible
        ax.set_title(name)
        ax.set_xlabel(axis_labels[0])
        ax.set_ylabel(axis_labels[1])
        if names is not None and len(names) == m.shape[1]:
            ax.set_xticks(range(m.shape[1]), labels=list(names), rotation=45, ha="right")
        if names is not None and len(names) == m.shape[0]:
            ax.set_yticks(range(m.shape[0]), labels=list(names))
    for ax in list(axes[:, :ncols].flat)[n:]:
        ax.axis("off")
    for ax in axes[:, ncols]:
        ax.axis("off")
    mask_legend(axes[0, ncols], tuple(legend), loc="center left")
    return fig


@book_figure
def plot_convex_hull(values: Array, outputs: Array, value_labels: Optional[Sequence[str]] = None,
                     output_labels: Optional[Sequence[str]] = None, ax: Optional[Axes] = None,
                     title: str = "Outputs lie inside the convex hull of the values") -> Figure:
    """Plot 2-D values (S, 2), their convex hull, and attention outputs (T, 2)."""
    v, o = to_numpy(values), to_numpy(outputs)
    fig, ax = new_axes(ax, (4.8, 4.3))
    hull = convex_hull(v)
    closed = np.vstack([hull, hull[:1]])
    ax.fill(closed[:, 0], closed[:, 1], color="tab:blue", alpha=0.12, label="convex hull of values")
    ax.plot(closed[:, 0], closed[:, 1], color="tab:blue", lw=1)
    ax.scatter(v[:, 0], v[:, 1], s=60, color="tab:blue", zorder=3, label="values $v_j$")
    ax.scatter(o[:, 0], o[:, 1], s=70, marker="*", color="tab:red", zorder=4,
               label="outputs $o_i$")
    for labels, pts, color, dy in ((value_labels, v, "tab:blue", 6), (output_labels, o, "tab:red", -12)):
        if labels is not None:
            for lab, (x, y) in zip(labels, pts):
                ax.annotate(lab, (x, y), textcoords="offset points", xytext=(4, dy),
                            fontsize=SMALLEST_PT, color=color)
    ax.set_xlabel("value dimension 1")
    ax.set_ylabel("value dimension 2")
    ax.set_title(title)
    ax.legend(loc="best")
    ax.set_aspect("equal", adjustable="datalim")
    return fig


@book_figure
def plot_gaps(gaps: Mapping[str, Mapping[str, float]], tolerance: float, ax: Optional[Axes] = None,
              title: str = "Largest difference from PyTorch, per case") -> Figure:
    """Differences from a reference, one row per case and one marker per implementation, on a log scale.

    Parameters
    ----------
    gaps : mapping of implementation name to {case: max |difference|}, the same cases each; 0 drawn at the left edge
    tolerance : float, drawn as a dashed line

    Examples
    --------
    >>> fig = plot_gaps({"a": {"x": 0.0, "y": 1e-16}, "b": {"x": 0.5, "y": 1e-16}}, tolerance=1e-12)
    >>> [t.get_text() for t in fig.axes[0].get_yticklabels()], fig.axes[0].get_xscale()
    (['x', 'y'], 'log')
    """
    names = list(gaps)
    cases = list(gaps[names[0]])
    if any(list(g) != cases for g in gaps.values()):
        raise ValueError(f"every implementation needs the cases {cases}; got {[list(g) for g in gaps.values()]}")
    values = np.array([[gaps[n][c] for c in cases] for n in names], dtype=float)  # (implementations, cases)
    positive = values[values > 0]
    floor = 10.0 ** np.floor(np.log10(min(positive.min(), tolerance) / 10)) if positive.size else tolerance / 1e4
    fig, ax = new_axes(ax, (PHONE_WIDTH, 0.45 * len(cases) + 1.6))
    y = np.arange(len(cases))
    markers, colors = "os^Dv", ("#000000", "#D55E00", "#0072B2", "#009E73", "#CC79A7")
    for i, (name, row) in enumerate(zip(names, values)):
        offset = (i - (len(names) - 1) / 2) * 0.18
        ax.scatter(np.where(row > 0, row, floor), y + offset, marker=markers[i % 5], color=colors[i % 5],
                   s=45, label=name, zorder=3)
    ax.axvline(tolerance, color="0.4", ls="--", lw=1.2, label=f"threshold {tolerance:.0e}")
    ax.set_xscale("log")
    top = max(values.max(), tolerance) * 30
    ax.set_xlim(floor / 3, top)
    decades = np.arange(np.ceil(np.log10(floor)), np.log10(top))
    ax.set_xticks(10.0 ** decades[decades % 4 == 0])  # every fourth power of ten: 1e-16, 1e-12, ..., 1
    ax.set_yticks(y, labels=cases)
    ax.invert_yaxis()
    ax.set(xlabel="largest |difference|" + (" (0: at the left edge)" if (values == 0).any() else ""), title=title)
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncols=2, fontsize=SMALLEST_PT)
    return fig
