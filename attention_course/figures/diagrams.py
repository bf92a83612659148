"""Schematic figures: the attention formula step by step (chapter 1) and the induction circuit (chapter 4).

One unit of length is one matrix entry, so the shapes on the page are the shapes in the formula.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, Rectangle

from ..core._backend import Array, to_numpy
from .style import MAX_WIDTH, ROLE_COLORS, book_figure, role_color

__all__ = ["plot_qkv_diagram", "plot_induction_circuit", "INDUCTION_COLOR"]

#: Colour of an induction head: :data:`~.style.ROLE_COLORS` has no "induction" role (yet), so black.
INDUCTION_COLOR = ROLE_COLORS.get("induction", "#000000")

# Light fills for the matrices of the formula (Okabe & Ito hues, as in the style module).
_FILL = {"X": "#DDDDDD", "Q": "#9CCBEA", "K": "#F3CF7F", "V": "#8FD3BD", "S": "#E8B7D3",
         "A": "#E8B7D3", "O": "#8FD3BD"}


def _matrix(ax: Axes, x: float, y: float, rows: int, cols: int, key: str, name: str, shape: str) -> None:
    """A ``rows x cols`` box of cells with its lower-left corner at (x, y), a name above, a shape below."""
    ax.add_patch(Rectangle((x, y), cols, rows, facecolor=_FILL[key], edgecolor="0.25", lw=1.2))
    for i in range(1, rows):  # faint lines: one row per position
        ax.plot([x, x + cols], [y + i, y + i], color="white", lw=0.7)
    for j in range(1, cols):
        ax.plot([x + j, x + j], [y, y + rows], color="white", lw=0.7)
    ax.text(x + cols / 2, y + rows + 0.6, name, ha="center", va="bottom")
    ax.text(x + cols / 2, y - 0.6, shape, ha="center", va="top", fontsize=_SMALLEST_PT, color="0.25")


def _arrow(ax: Axes, start: tuple, end: tuple, label: str = "", color: str = "0.2",
           connection: str = "arc3", label_at: Optional[tuple] = None, **text) -> None:
    """An arrow from ``start`` to ``end`` (data units) with an optional label at ``label_at`` (or its middle)."""
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=14, color=color, lw=1.4,
                                 connectionstyle=connection, shrinkA=2, shrinkB=2))
    if label:
        at = label_at or ((start[0] + end[0]) / 2, (start[1] + end[1]) / 2 + 0.5)
        ax.text(*at, label, ha=text.pop("ha", "center"), va=text.pop("va", "bottom"), color=color, **text)


#: The smallest type (pt) in a diagram: about 10 CSS px on a 390-px phone at the diagram's width.
_SMALLEST_PT = 10
#: The Q/K/V diagram's width (in): three columns of boxes, narrow enough to read on a phone.
_QKV_WIDTH = 5.2


@book_figure
def plot_qkv_diagram(n: int = 6, d: int = 8, d_k: int = 4, d_v: int = 2, title: str = "") -> Figure:
    r"""Scaled dot-product attention step by step, each matrix drawn to scale.

    .. math:: X \to Q = XW_Q,\ K = XW_K,\ V = XW_V \to S = QK^\top/\sqrt{d_k}
              \to A = \operatorname{softmax}(S) \to O = AV

    Each box is labelled with its formula and shape; three columns, at most 5.2 in wide.

    Parameters
    ----------
    n, d, d_k, d_v : int
        Number of positions, model width, query/key width and value width (the sizes drawn).

    Examples
    --------
    >>> fig = plot_qkv_diagram(n=6, d=8, d_k=4, d_v=2)
    >>> float(fig.get_size_inches()[0]) <= 5.2
    True
    >>> sorted(float(r.get_width()) for r in fig.axes[0].patches if isinstance(r, Rectangle))  # d_v, d_k, n, d
    [2.0, 2.0, 4.0, 4.0, 6.0, 6.0, 8.0]
    """
    if min(n, d, d_k, d_v) < 1:
        raise ValueError(f"sizes must be positive; got n={n}, d={d}, d_k={d_k}, d_v={d_v}")
    gap, arrow = 5.0, 5.0  # vertical space between stacked boxes (a name above, a shape below), room for an arrow
    y_v, y_k = 0.0, n + gap  # column 2, bottom up: V, K, Q; column 3 beside them: O, A, S
    y_q = y_k + n + gap
    top = y_q + n
    x_qkv = d + arrow
    x_out = x_qkv + max(d_k, d_v) + arrow + 1.5
    width = x_out + max(n, d_v) + 0.5  # the last column; the softmax label takes 4.5 more
    unit = min(0.2, (_QKV_WIDTH - 0.2) / (width + 5.0))  # inches per matrix entry
    fig, ax = plt.subplots(figsize=(unit * (width + 5.0) + 0.2, unit * (top + 4.5) + 0.2), layout="constrained")
    _matrix(ax, 0, y_k, n, d, "X", "$X$", rf"$n \times d$ = {n} × {d}")
    for key, y, cols in (("Q", y_q, d_k), ("K", y_k, d_k), ("V", y_v, d_v)):
        _matrix(ax, x_qkv, y, n, cols, key, rf"${key} = XW_{key}$",
                rf"$n \times d_{{{'v' if key == 'V' else 'k'}}}$ = {n} × {cols}")
        mid = (d + arrow / 2, (y_k + y) / 2 + n / 2)  # the arrow's middle
        _arrow(ax, (d, y_k + n / 2), (x_qkv, y + n / 2), rf"$W_{key}$",
               label_at=(mid[0] - 0.4, mid[1]) if key != "K" else (mid[0], mid[1] + 0.4),
               ha="right" if key != "K" else "center", va="center" if key != "K" else "bottom")
    _matrix(ax, x_out, y_q, n, n, "S", r"$S = QK^\top/\sqrt{d_k}$", rf"$n \times n$ = {n} × {n}")
    _matrix(ax, x_out, y_k, n, n, "A", r"$A = \mathrm{softmax}(S)$", "$n \\times n$,\nrows sum to 1")
    x_o = x_out + (n - d_v) / 2
    _matrix(ax, x_o, y_v, n, d_v, "O", "$O = AV$", rf"$n \times d_v$ = {n} × {d_v}")
    _arrow(ax, (x_qkv + d_k, y_q + n / 2), (x_out, y_q + n / 2))  # Q -> S
    _arrow(ax, (x_qkv + d_k, y_k + n / 2), (x_out, y_q + 1.0))  # K -> S
    _arrow(ax, (x_out + n, y_q), (x_out + n, y_k + n), "softmax\nof each\nrow", connection="arc3,rad=-0.6",
           label_at=(x_out + n + 1.6, y_k + n + gap / 2), ha="left", va="center", fontsize=_SMALLEST_PT)
    _arrow(ax, (x_out + n, y_k + 1.0), (x_o + d_v, y_v + n / 2), connection="arc3,rad=-0.45")  # A -> O
    _arrow(ax, (x_qkv + d_v, y_v + n / 2), (x_o, y_v + n / 2), "values", label_at=((x_qkv + d_v + x_o) / 2, y_v + n / 2 + 0.4),
           fontsize=_SMALLEST_PT)
    ax.set_xlim(-0.5, width + 4.5)
    ax.set_ylim(-2.5, top + 2.5)
    ax.set_aspect("equal")
    ax.axis("off")
    if title:
        ax.set_title(title)
    return fig


def _circuit(ax: Axes) -> None:
    """The induction circuit on "12 40 7 33 ... 12": layer-1 arcs below the tokens, the layer-2 arc above."""
    tokens = ["12", "40", "7", "33", "…", "12"]
    prev, ind = role_color("previous token"), INDUCTION_COLOR
    xs = np.arange(len(tokens), dtype=float) * 1.6
    for x, tok in zip(xs, tokens):
        ax.add_patch(Rectangle((x - 0.45, -0.4), 0.9, 0.8, facecolor="#F2F2F2", edgecolor="0.3"))
        ax.text(x, 0, tok, ha="center", va="center", fontsize="large")
    for i in range(1, len(tokens)):  # layer 1: every position looks at the one before it
        strong = i == 1
        ax.add_patch(FancyArrowPatch((xs[i], -0.45), (xs[i - 1], -0.45), connectionstyle="arc3,rad=-0.6",
                                     arrowstyle="-|>", mutation_scale=12, color=prev, lw=2.2 if strong else 0.9,
                                     alpha=1.0 if strong else 0.45, shrinkA=1, shrinkB=1))
    ax.text(xs[1], -1.55, "40's position now holds\n“the token before me is 12”", ha="center", va="top",
            color=prev, fontsize="small")
    ax.text(xs[0] - 0.8, -0.9, "layer 1:\nprevious-token head", ha="right", va="center", color=prev)
    ax.add_patch(FancyArrowPatch((xs[-1], 0.45), (xs[1], 0.45), connectionstyle="arc3,rad=0.35",
                                 arrowstyle="-|>", mutation_scale=14, color=ind, lw=2.2, shrinkA=1, shrinkB=1))
    ax.text((xs[1] + xs[-1]) / 2, 1.75, "current 12 matches “before me is 12” at 40: attend to 40, copy 40",
            ha="center", va="bottom", color=ind, fontsize="small")
    ax.text(xs[0] - 0.8, 1.1, "layer 2:\ninduction head", ha="right", va="center", color=ind)
    x_out = xs[-1] + 1.9
    ax.add_patch(FancyArrowPatch((xs[-1] + 0.5, 0), (x_out - 0.5, 0), arrowstyle="-|>", mutation_scale=14,
                                 color=ind, lw=1.6))
    ax.add_patch(Rectangle((x_out - 0.45, -0.4), 0.9, 0.8, facecolor="white", edgecolor=ind, lw=1.6, ls="--"))
    ax.text(x_out, 0, "40", ha="center", va="center", fontsize="large", color=ind)
    ax.text(x_out, -0.6, "predicted\nnext token", ha="center", va="top", fontsize="small", color=ind)
    ax.set_xlim(xs[0] - 4.6, x_out + 1.2)
    ax.set_ylim(-2.7, 2.4)
    ax.axis("off")


@book_figure
def plot_induction_circuit(prev_weights: Optional[Array] = None, induction_weights: Optional[Array] = None,
                           period: Optional[int] = None, heads: Sequence[int] = (0, 0), title: str = "") -> Figure:
    """The two-head induction circuit: a schematic, and beside it the trained heads' weights.

    The schematic follows "12 40 7 33 ... 12": a previous-token head, then an induction head
    that copies 40.

    Parameters
    ----------
    prev_weights, induction_weights : array (T, T), optional
        The two heads' weights on one sequence that repeats; without them only the schematic.
    period : int, optional
        The repeat period ``p``; the schematic's two arcs are circled, and position ``p`` dashed.
    heads : (int, int)
        The two heads' indices (from 0), for the panel titles.

    Examples
    --------
    >>> T, p = 12, 5
    >>> prev = np.eye(T, k=-1); prev[0, 0] = 1.0
    >>> ind = np.eye(T, k=-(p - 1)); ind[: p - 1, 0] = 1.0
    >>> fig = plot_induction_circuit(prev, ind, period=p, heads=(1, 2))
    >>> [ax.get_title() for ax in fig.axes[1:3]]
    ['layer 1, head 2: previous token', 'layer 2, head 3: induction']
    >>> float(fig.get_size_inches()[0]) <= 7.0
    True
    """
    if prev_weights is None or induction_weights is None:
        fig, ax = plt.subplots(figsize=(MAX_WIDTH, 2.6), layout="constrained")
        _circuit(ax)
        if title:
            fig.suptitle(title)
        return fig
    maps = [np.asarray(to_numpy(w), dtype=float) for w in (prev_weights, induction_weights)]
    if maps[0].shape != maps[1].shape or maps[0].ndim != 2 or maps[0].shape[0] != maps[0].shape[1]:
        raise ValueError(f"prev_weights {maps[0].shape} and induction_weights {maps[1].shape} must be one (T, T) shape")
    T = maps[0].shape[0]
    if period is not None and not 1 < period < T:
        raise ValueError(f"period {period} must be between 2 and T - 1 = {T - 1}")
    fig = plt.figure(figsize=(MAX_WIDTH, 5.6), layout="constrained")
    axes = fig.subplot_mosaic([["circuit", "circuit"], ["prev", "ind"]], height_ratios=[0.62, 1.0])
    _circuit(axes["circuit"])
    vmax = float(max(m.max() for m in maps))
    names = (f"layer 1, head {heads[0] + 1}: previous token", f"layer 2, head {heads[1] + 1}: induction")
    colors = (role_color("previous token"), INDUCTION_COLOR)
    cells = ((1, 0), (period, 1)) if period is not None else (None, None)
    for key, m, name, color, cell in zip(("prev", "ind"), maps, names, colors, cells):
        ax = axes[key]
        im = ax.imshow(m, cmap="viridis", vmin=0.0, vmax=vmax)
        ax.set_title(name, color=color)
        ax.set_xlabel("key position")
        ax.set_ylabel("query position")
        ticks = range(0, T, 5)
        ax.set_xticks(ticks)
        ax.set_yticks(ticks)
        if cell is not None:
            ax.axhline(period - 0.5, color="white", lw=0.8, ls="--")
            ax.axvline(period - 0.5, color="white", lw=0.8, ls="--")
            ax.plot(cell[1], cell[0], "o", ms=18, mfc="none", mec="white", mew=2.5)  # the schematic's arc
    fig.colorbar(im, ax=[axes["prev"], axes["ind"]], shrink=0.85, label="attention weight")  # one scale, both maps
    if title:
        fig.suptitle(title)
    return fig
