"""Figures for chapter 4: the multi-head path, the bottleneck, heads' spectra, galleries, roles, ablations.

Each takes numbers the chapter has computed and returns a :class:`matplotlib.figure.Figure`.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Optional

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, Rectangle

from ...core._backend import Array, to_numpy
from ..mechanics.figures import plot_heatmap
from ...figures.style import MAX_WIDTH, ROLE_COLORS, book_figure, role_color

__all__ = [
    "plot_multihead_path", "plot_bottleneck", "plot_form_spectra", "plot_head_gallery", "plot_role_scores", "plot_relation_gains", "plot_sorted_role_scores",
]  # fmt: skip


#: One colour per head in the diagrams (Okabe & Ito: blue, orange, green, purple, vermilion, sky).
HEAD_COLORS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9")


def _blocks(ax: Axes, x: float, y: float, rows: int, widths: Sequence[int], colors: Sequence[str],
            z: float = 1.0) -> None:
    """A ``rows``-tall box at (x, y) of side-by-side blocks ``widths`` wide, drawn between ``z`` and ``z + 0.3``."""
    left, right = x, x + sum(widths)
    ax.add_patch(Rectangle((left, y), right - left, rows, facecolor="white", edgecolor="none", zorder=z))
    for w, c in zip(widths, colors):
        ax.add_patch(Rectangle((x, y), w, rows, facecolor=c, alpha=0.55, edgecolor="none", zorder=z + 0.1))
        x += w
    for j in range(1, int(sum(widths))):  # faint lines between entries
        ax.plot([left + j, left + j], [y, y + rows], color="white", lw=0.6, zorder=z + 0.2)
    for i in range(1, rows):
        ax.plot([left, right], [y + i, y + i], color="white", lw=0.6, zorder=z + 0.2)
    ax.add_patch(Rectangle((left, y), right - left, rows, fill=False, edgecolor="0.25", lw=1.1, zorder=z + 0.3))


def _deck(ax: Axes, x: float, y: float, rows: int, cols: int, colors: Sequence[str], step: float) -> None:
    """One box per head, drawn as a deck of cards: head 1 in front, the others behind it, up and right."""
    for i, c in enumerate(colors):
        _blocks(ax, x + i * step, y + i * step, rows, [cols], [c], z=10.0 - i)


def _step(ax: Axes, start: tuple, end: tuple, above: str = "", below: str = "") -> None:
    """An arrow from ``start`` to ``end`` with a label above it and one below it."""
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=13, color="0.2", lw=1.3,
                                 shrinkA=1, shrinkB=1))
    mid = (start[0] + end[0]) / 2
    if above:
        ax.text(mid, start[1] + 0.5, above, ha="center", va="bottom", fontsize=10.5, color="0.1")
    if below:
        ax.text(mid, start[1] - 0.5, below, ha="center", va="top", fontsize=10, color="0.3")


def _label(ax: Axes, x: float, y: float, text: str, va: str = "bottom", size: float = 10.0, **kw) -> None:
    ax.text(x, y, text, ha=kw.pop("ha", "center"), va=va, fontsize=size, **kw)


@book_figure
def plot_multihead_path(T: int = 4, d: int = 6, h: int = 3, title: str = "") -> Figure:
    r"""Multi-head attention's path, drawn to scale: project, split, attend per head, concatenate, ``W_O``.

    .. math:: X \to Q = XW_Q \to (Q_i)_{i \le h} \to A_i = \operatorname{softmax}(Q_i K_i^\top/\sqrt{d_k})
              \to \operatorname{head}_i = A_i V_i \to \operatorname{Concat}_i(\operatorname{head}_i)\, W_O

    One unit of length is one entry; head ``i`` has one colour throughout; each box carries its shape.

    Examples
    --------
    >>> fig = plot_multihead_path(T=4, d=6, h=3)
    >>> float(fig.get_size_inches()[0]) <= 7.0
    True
    >>> texts = [t.get_text() for t in fig.axes[0].texts]
    >>> [s for s in ("(B, T, d)", "(B, h, T, d_k)", "(B, h, T, T)") if s not in texts]
    []
    >>> plot_multihead_path(d=6, h=4)
    Traceback (most recent call last):
    ...
    ValueError: d = 6 is not a multiple of h = 4; each head takes d / h features
    """
    if min(T, d, h) < 1:
        raise ValueError(f"sizes must be positive; got T={T}, d={d}, h={h}")
    if d % h:
        raise ValueError(f"d = {d} is not a multiple of h = {h}; each head takes d / h features")
    if h > len(HEAD_COLORS):
        raise ValueError(f"h = {h}: the diagram has colours for at most {len(HEAD_COLORS)} heads")
    d_k, colors, step = d // h, HEAD_COLORS[:h], 0.9
    deck = (h - 1) * step  # how far a deck of h cards reaches up and right
    fig, ax = plt.subplots(figsize=(MAX_WIDTH, 4.2), layout="constrained")
    # top row: X -> Q, coloured by head -> the deck of Q_i
    y1 = T + deck + 6.5
    x_q = d + 6.5
    x_split = x_q + d + 9.0
    _blocks(ax, 0, y1, T, [d], ["#BBBBBB"])
    _label(ax, d / 2, y1 + T + 0.4, "$X$", size=11)
    _label(ax, d / 2, y1 - 0.4, "(B, T, d)", va="top")
    _step(ax, (d + 0.4, y1 + T / 2), (x_q - 0.4, y1 + T / 2), "$\\times W_Q$")
    _blocks(ax, x_q, y1, T, [d_k] * h, colors)
    _label(ax, x_q + d / 2, y1 + T + 0.4, "$Q = XW_Q$", size=11)
    _label(ax, x_q + d / 2, y1 - 0.4, "(B, T, d)", va="top")
    _step(ax, (x_q + d + 0.4, y1 + T / 2), (x_split - 0.4, y1 + T / 2), "split", "view, transpose")
    _deck(ax, x_split, y1, T, d_k, colors, step)
    _label(ax, x_split + (d_k + deck) / 2, y1 + T + deck + 0.4, "$Q_1, \\dots, Q_h$", size=11)
    _label(ax, x_split + (d_k + deck) / 2, y1 - 0.4, "(B, h, T, d_k)", va="top")
    x_key = x_split + d_k + deck + 3.0
    _label(ax, x_key, y1 + T + deck, "$K$ and $V$ are split\nthe same way", va="top", ha="left", color="0.3")
    for i, c in enumerate(colors):  # the colour key
        yk = y1 + T + deck - 3.4 - 1.25 * i
        ax.add_patch(Rectangle((x_key, yk - 0.45), 0.9, 0.9, facecolor=c, alpha=0.55, edgecolor="0.25", lw=0.8))
        _label(ax, x_key + 1.4, yk, f"head {i + 1}", va="center", ha="left")
    # bottom row: A_i -> head_i -> concatenation -> x W_O -> output
    y0 = 0.0
    x_head = T + deck + 6.5
    x_cat = x_head + d_k + deck + 9.0
    x_out = x_cat + d + 8.0
    _deck(ax, 0, y0, T, T, colors, step)
    _label(ax, 0, y0 + T + deck + 1.9, "$A_i = \\mathrm{softmax}(Q_i K_i^\\top/\\sqrt{d_k})$", ha="left", size=11)
    _label(ax, (T + deck) / 2, y0 - 0.4, "(B, h, T, T)", va="top")
    _step(ax, (T + deck + 0.4, y0 + T / 2), (x_head - 0.4, y0 + T / 2), "$\\times\\, V_i$")
    _deck(ax, x_head, y0, T, d_k, colors, step)
    _label(ax, x_head + (d_k + deck) / 2, y0 + T + deck + 0.4, "$\\mathrm{head}_i = A_i V_i$", size=11)
    _label(ax, x_head + (d_k + deck) / 2, y0 - 0.4, "(B, h, T, d_k)", va="top")
    _step(ax, (x_head + d_k + deck + 0.4, y0 + T / 2), (x_cat - 0.4, y0 + T / 2), "concatenate",
          "transpose,\nreshape")
    _blocks(ax, x_cat, y0, T, [d_k] * h, colors)
    _label(ax, x_cat + d / 2, y0 + T + 0.4, "Concat", size=11)
    _label(ax, x_cat + d / 2, y0 - 0.4, "(B, T, d)", va="top")
    _step(ax, (x_cat + d + 0.4, y0 + T / 2), (x_out - 0.4, y0 + T / 2), "$\\times W_O$")
    _blocks(ax, x_out, y0, T, [d], ["#BBBBBB"])
    _label(ax, x_out + d / 2, y0 + T + 0.4, "output", size=11)
    _label(ax, x_out + d / 2, y0 - 0.4, "(B, T, d)", va="top")
    ax.set_xlim(-0.5, max(x_out + d, x_key + 9.0) + 0.5)
    ax.set_ylim(-2.3, y1 + T + deck + 1.8)
    ax.set_aspect("equal")
    ax.axis("off")
    if title:
        ax.set_title(title)
    return fig


@book_figure
def plot_bottleneck(ranks: Sequence[int], curves: Mapping[str, Sequence[float]], title: str = "",
                    floor: float = 1e-4) -> Figure:
    """Minimum KL against head dimension ``r``, one line per target, on a log axis.

    Values below ``floor`` (an exact fit) are drawn on the floor with a hollow marker.

    Examples
    --------
    >>> fig = plot_bottleneck([1, 2, 4], {"dense": [0.3, 0.2, 0.0]}, title="t")
    >>> fig.axes[0].get_yscale(), fig.axes[0].get_ylabel()
    ('log', 'minimum mean KL (nats)')
    """
    fig, ax = plt.subplots(figsize=(6.2, 4.0), layout="constrained")
    for (name, kl), marker in zip(curves.items(), "osD^v"):
        kl = np.asarray(kl, dtype=float)
        line, = ax.plot(ranks, np.maximum(kl, floor), marker=marker, label=name)
        exact = kl < floor
        ax.plot(np.asarray(ranks)[exact], np.full(exact.sum(), floor), marker=marker, ls="none",
                mfc="white", mec=line.get_color(), ms=9)
    ax.set_yscale("log")
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(ranks), labels=[str(r) for r in ranks])
    ax.axhline(floor, color="0.6", lw=0.8, ls=":")
    ax.text(ranks[0], floor * 1.3, "exact fit (KL < %.0e)" % floor, fontsize="small", color="0.4")
    ax.set_xlabel("head dimension r (rank of $QK^\\top$)")
    ax.set_ylabel("minimum mean KL (nats)")
    ax.set_title(title)
    ax.legend()
    ax.grid(alpha=0.3, which="both")
    return fig


@book_figure
def plot_form_spectra(full: Array, heads: Array, title: str = "") -> Figure:
    """Singular values of the full bilinear form (one line) and of each head's form (thin lines).

    ``full`` (d_model,), ``heads`` (h, d_k); a dashed line marks ``d_k``.

    Examples
    --------
    >>> fig = plot_form_spectra(np.linspace(3, 1, 16), np.ones((4, 4)))
    >>> len(fig.axes[0].lines)                      # 4 heads, the full form, the d_k marker
    6
    """
    full, heads = to_numpy(full), to_numpy(heads)
    fig, ax = plt.subplots(figsize=(6.8, 4.0), layout="constrained")
    for i, s in enumerate(heads):
        ax.plot(np.arange(1, len(s) + 1), s, color="tab:orange", lw=0.9, alpha=0.7,
                label="each head $W_Q^{(i)}W_K^{(i)\\top}$" if i == 0 else None)
    ax.plot(np.arange(1, len(full) + 1), full, color="tab:blue", lw=2, label="full form $W_QW_K^\\top$")
    ax.axvline(heads.shape[1], color="0.5", ls="--", lw=0.8)
    ax.text(heads.shape[1] * 1.05, full.max() / 2, f"$d_k$ = {heads.shape[1]}", color="0.3")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("index of the singular value")
    ax.set_ylabel("singular value")
    ax.set_title(title)
    ax.legend()
    ax.grid(alpha=0.3, which="both")
    return fig


@book_figure
def plot_head_gallery(panels: Mapping[str, tuple], ncols: int = 3, vmax: float = 1.0,
                      title: str = "", colorbar_label: str = "attention weight",
                      panel_size: float = 3.5, title_colors: Optional[Sequence[str]] = None,
                      tick_size: float = 9.0) -> Figure:
    """A grid of attention heatmaps sharing one colour scale (capped at ``vmax``).

    ``panels`` maps a panel title to ``(matrix (T, S), tokens or None)``; ``panel_size`` (inches) shrinks
    so that ``ncols`` panels and the colour bar fit :data:`~.style.MAX_WIDTH`; ``title_colors``, one per panel.

    Examples
    --------
    >>> fig = plot_head_gallery({"a": (np.eye(3), ["x", "y", "z"]), "b": (np.eye(3), None)})
    >>> len(fig.axes), fig.axes[0].get_xlabel()      # two panels and the colour bar
    (3, 'key (attended to)')
    >>> fig = plot_head_gallery({"a": (np.eye(3), None)}, title_colors=["#0072B2"])
    >>> fig.axes[0].title.get_color()
    '#0072B2'
    """
    n = len(panels)
    ncols = min(ncols, n)
    nrows = -(-n // ncols)
    panel_size = min(panel_size, (MAX_WIDTH - 0.9) / ncols - 0.1)  # inches: ncols panels + colour bar fit
    fig, axes = plt.subplots(nrows, ncols, figsize=((panel_size + 0.1) * ncols + 0.9, panel_size * nrows + 0.5),
                             layout="constrained", squeeze=False)
    token_lists = [None if t is None else list(t) for _, t in panels.values()]
    shared = all(t == token_lists[0] for t in token_lists) and n == nrows * ncols
    if title_colors is not None and len(title_colors) != n:
        raise ValueError(f"title_colors has {len(title_colors)} colours for {n} panels")
    colors = list(title_colors) if title_colors is not None else [None] * n
    for ax, (name, (m, toks)), color in zip(axes.flat, panels.items(), colors):
        im = ax.imshow(to_numpy(m), cmap="viridis", vmin=0.0, vmax=vmax)
        wrapped = textwrap.fill(name, width=max(12, int(panel_size * 11.5)))  # ~11.5 characters per inch
        ax.set_title(wrapped, fontsize="medium", **({"color": color} if color else {}))
        if toks is not None:
            ax.set_xticks(range(len(toks)), labels=list(toks), rotation=90, fontsize=tick_size)
            ax.set_yticks(range(len(toks)), labels=list(toks), fontsize=tick_size)
        ax.set_xlabel("key (attended to)")
        ax.set_ylabel("query")
        if shared:
            ax.label_outer()  # tick labels and axis labels only on the left column and bottom row
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.colorbar(im, ax=axes, shrink=0.7, label=colorbar_label)
    if title:
        fig.suptitle(title)
    return fig


@book_figure
def plot_role_scores(scores: Mapping[str, np.ndarray], ncols: int = 2, title: str = "") -> Figure:
    """One layer x head heatmap per role, in the role's colour, on a shared 0-1 scale; counted from 1.

    ``scores`` maps a role to an array (n_layers, n_heads).

    Examples
    --------
    >>> fig = plot_role_scores({"broad": np.zeros((2, 3)), "[CLS]": np.ones((2, 3))})
    >>> [ax.get_title() for ax in fig.axes[:2]]
    ['broad', '[CLS]']
    """
    n = len(scores)
    ncols = min(ncols, n)
    nrows = -(-n // ncols)
    width = min(3.9, (MAX_WIDTH - 0.9) / ncols)  # inches per panel, so that the row fits the column
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols + 0.9, 2.3 * nrows + 0.4), layout="constrained",
                             squeeze=False)
    for ax, (role, s) in zip(axes.flat, scores.items()):
        im = ax.imshow(s, cmap="magma", vmin=0.0, vmax=1.0, aspect="auto")
        color = role_color(role) if role in ROLE_COLORS else "0.2"
        ax.set_title(role, color=color, fontweight="bold")
        ax.spines[:].set_visible(True)
        ax.spines[:].set_color(color)
        ax.spines[:].set_linewidth(2)
        ax.set_xticks(range(s.shape[1]), labels=[str(h + 1) for h in range(s.shape[1])], fontsize=9)
        ax.set_yticks(range(s.shape[0]), labels=[str(layer + 1) for layer in range(s.shape[0])], fontsize=9)
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.colorbar(im, ax=axes, shrink=0.8, label="score")
    if title:
        fig.suptitle(title)
    return fig


@book_figure
def plot_sorted_role_scores(panels: Mapping[str, Mapping[str, Array]], roles: Sequence[str],
                            chance: Optional[Mapping[str, Mapping[str, float]]] = None, threshold: float = 0.5,
                            title: str = "") -> Figure:
    """One panel per role: each model's heads sorted by score, against the share of its heads.

    Head :math:`k` of :math:`N` sits at :math:`(k + 1/2)/N`. ``panels``: title -> ``{model: scores}``;
    ``roles[i]`` colours panel ``i``; ``chance``: title -> {model: level}, drawn as thin lines.

    Examples
    --------
    >>> fig = plot_sorted_role_scores({"previous token": {"a": np.ones((2, 3)), "b": np.zeros(5)}}, ["previous token"])
    >>> [line.get_label() for line in fig.axes[0].get_lines()][:2]
    ['a', 'b']
    """
    if len(roles) != len(panels):
        raise ValueError(f"{len(panels)} panels but {len(roles)} roles; expected one role (a colour) per panel")
    fig, axes = plt.subplots(1, len(panels), figsize=(min(MAX_WIDTH, 3.4 * len(panels)), 2.9), layout="constrained",
                             sharey=True, squeeze=False)
    for ax, (name, models), role in zip(axes[0], panels.items(), roles):
        color = role_color(role)
        styles = [dict(color="0.1", lw=1.6), dict(color=color, lw=2.2)]
        for i, (model, s) in enumerate(models.items()):
            s = np.sort(np.asarray(to_numpy(s), dtype=float).ravel())[::-1]  # (N,) heads, highest first
            x = (np.arange(len(s)) + 0.5) / len(s)  # (N,) share of heads
            style = styles[i] if i < len(styles) else dict(color="0.55", lw=1.6, ls="--")
            ax.plot(x, s, label=model, **style)
            if chance is not None and model in chance.get(name, {}):
                ax.axhline(chance[name][model], color=style["color"], lw=0.8, ls=":", alpha=0.8)
        ax.axhline(threshold, color="0.4", lw=0.9, ls="--")
        ax.set_title(name, color=color, fontweight="bold")
        ax.set_xlabel("share of heads (sorted)")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    axes[0, 0].set_ylabel("role score")
    axes[0, 0].legend(fontsize=9, loc="upper right")
    if title:
        fig.suptitle(title)
    return fig


@book_figure
def plot_relation_gains(gains: Array, relations: Sequence[str], row_labels: Sequence[str], title: str = "",
                        threshold: Optional[float] = None) -> Figure:
    """Side-by-side heatmaps of what each head alone supplies to each relation, one row per run.

    ``gains`` (runs, h, R); panel ``r`` shows ``gains[:, :, r]`` on a scale centred on 0. With a
    ``threshold``, cells at or above it are framed.

    Examples
    --------
    >>> fig = plot_relation_gains(np.ones((2, 4, 2)), ["a", "b"], ["seed 1", "seed 2"], threshold=0.5)
    >>> [ax.get_title() for ax in fig.axes[:2]]
    ['a', 'b']
    """
    g = np.asarray(to_numpy(gains), dtype=float)
    if g.ndim != 3 or g.shape[2] != len(relations) or g.shape[0] != len(row_labels):
        raise ValueError(f"gains have shape {g.shape}; expected ({len(row_labels)}, h, {len(relations)})")
    runs, h, R = g.shape
    fig, axes = plt.subplots(1, R, figsize=(min(MAX_WIDTH, 3.2 * R + 0.8), 0.45 * runs + 1.9),
                             layout="constrained", squeeze=False)
    vmax = float(max(np.abs(g).max(), 1e-9))  # a diverging scale centred on 0: a negative gain is worse than a guess
    for r, ax in enumerate(axes[0]):
        plot_heatmap(g[:, :, r], list(row_labels), [f"{j + 1}" for j in range(h)], ax=ax, title=relations[r],
                     cmap="RdBu", vmin=-vmax, vmax=vmax, annotate=True, fmt="{:.1f}", xlabel="head",
                     colorbar_label="gain over a guess (nats)")
        if threshold is not None:  # frame the cells at or above the threshold
            for row, col in zip(*np.nonzero(g[:, :, r] >= threshold)):
                ax.add_patch(plt.Rectangle((col - 0.5, row - 0.5), 1, 1, fill=False, ec="#D55E00", lw=2))
        ax.tick_params(axis="x", labelrotation=0)  # head numbers read upright
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("center")
        if r or not any(row_labels):  # no tick marks without labels
            ax.set_yticks([])
    if title:
        fig.suptitle(title)
    return fig
