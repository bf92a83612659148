"""Figures for chapter 1's soft dictionary lookup and position encodings, :data:`PHONE_WIDTH` wide, no text under :data:`SMALLEST_PT`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ...core._backend import Array, ShapeError, shape_str, to_numpy
from ...figures.style import book_figure

__all__ = ["plot_soft_lookup", "plot_sinusoids", "plot_position_similarity"]

_BLUE, _ORANGE, _GREY, _VERMILION = "#0072B2", "#E69F00", "#777777", "#D55E00"


#: Width (in) of chapter 1's figures: at the book's DPI a 10-pt label is about 10 CSS px on a 390-px phone.
PHONE_WIDTH = 5.2
#: The smallest type size (pt) any chapter-1 figure uses.
SMALLEST_PT = 10


@book_figure
def plot_soft_lookup(query: Array, keys: Array, values: Array, labels: Sequence[str], query_label: str = "query"
                     ) -> Figure:
    """A soft dictionary lookup in four panels: compare the query with each key, weigh, blend, and the sum written out.

    Parameters
    ----------
    query : array, shape (2,)
    keys : array, shape (S, 2)
    values : array, shape (S, 2)
    labels : sequence of S str

    Examples
    --------
    >>> keys = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> fig = plot_soft_lookup(np.array([2.0, 0.0]), keys, 2 * keys, ["a", "b"])
    >>> [ax.get_title() for ax in fig.axes]
    ['1. compare with keys', '2. weigh: softmax', '3. blend the values', '4. the blend, written out']
    >>> fig.axes[3].texts[-1].get_text()
    '= (1.76, 0.24)'
    """
    q, K, V = (np.asarray(to_numpy(a), dtype=float) for a in (query, keys, values))
    S = len(labels)
    if q.shape != (2,) or K.shape != (S, 2) or V.shape != (S, 2):
        raise ShapeError(f"query {shape_str(q)}, keys {shape_str(K)}, values {shape_str(V)}; expected (2,), "
                         f"({S}, 2) and ({S}, 2) for {S} labels")
    scores = K @ q  # (S,)
    w = np.exp(scores - scores.max())
    w /= w.sum()  # (S,) the soft lookup's weights
    out = w @ V  # (2,)
    fig, axes = plt.subplots(2, 2, figsize=(PHONE_WIDTH, 5.0), layout="constrained")
    (ax_keys, ax_bars), (ax_vals, ax_sum) = axes
    ax = ax_keys
    lim = 1.3 * max(np.abs(K).max(), np.abs(q).max())
    for kj, name in zip(K, labels):
        ax.annotate("", kj, (0, 0), arrowprops={"arrowstyle": "->", "color": _BLUE, "lw": 1.6})
        ax.text(*(kj * 1.1), name, color=_BLUE, ha="left" if kj[0] > 0 else "right", va="center")
    ax.annotate("", q, (0, 0), arrowprops={"arrowstyle": "->", "color": _VERMILION, "lw": 2.2})
    ax.text(q[0], q[1] - 0.1 * lim, query_label, color=_VERMILION, ha="center", va="top", fontweight="bold")
    ax.set(xlim=(-lim, lim), ylim=(-lim, lim), aspect="equal", title="1. compare with keys",
           xlabel="feature 1", ylabel="feature 2")
    ax = ax_bars
    y = np.arange(S)
    ax.barh(y + 0.2, scores, height=0.38, color=_GREY, label=r"score $q\cdot k$")
    ax.barh(y - 0.2, w, height=0.38, color=_ORANGE, label="weight")
    ax.set_yticks(y, labels=list(labels))
    ax.invert_yaxis()
    ax.axvline(0, color="black", lw=0.6)
    ax.set(title="2. weigh: softmax", xlabel="score, weight")
    ax.legend(loc="lower right", fontsize=SMALLEST_PT, handlelength=1.0)
    ax = ax_vals
    ax.scatter(V[:, 0], V[:, 1], s=40 + 700 * w, color=_ORANGE, alpha=0.75, edgecolor="black", lw=0.5)
    pad = 0.2 * max(np.ptp(V[:, 0]), np.ptp(V[:, 1]), 1e-9)
    for vj, name in zip(V, labels):
        ax.text(vj[0], vj[1] + 0.5 * pad, name, ha="center", va="bottom", fontsize=SMALLEST_PT)
    ax.scatter(*out, marker="*", s=220, color=_VERMILION, edgecolor="black", lw=0.6, zorder=3)
    ax.text(out[0] - 0.4 * pad, out[1], "output", color=_VERMILION, ha="right", va="center", fontweight="bold")
    ax.set(xlim=(V[:, 0].min() - pad, V[:, 0].max() + pad), ylim=(V[:, 1].min() - pad, V[:, 1].max() + 1.5 * pad),
           title="3. blend the values", xlabel="value 1", ylabel="value 2")
    ax = ax_sum
    ax.axis("off")
    ax.set_title("4. the blend, written out")
    lines = [f"{wj:.2f} × {name} ({vj[0]:.3g}, {vj[1]:.3g})" for wj, name, vj in zip(w, labels, V)]
    for i, line in enumerate(lines):
        ax.text(0.0, 1 - (i + 0.5) / (S + 1.5), ("  " if i == 0 else "+ ") + line, transform=ax.transAxes,
                va="center", fontsize=SMALLEST_PT + 0.5, family="monospace")
    ax.text(0.0, 1 - (S + 0.7) / (S + 1.5), f"= ({out[0]:.2f}, {out[1]:.2f})", transform=ax.transAxes,
            va="center", fontsize=SMALLEST_PT + 0.5, family="monospace", color=_VERMILION, fontweight="bold")
    return fig


@book_figure
def plot_sinusoids(P: Array, dims: Sequence[int] = (4, 10, 20)) -> Figure:
    """Sinusoidal encodings: the matrix as a heat map (top), and dimensions ``dims`` against position (below).

    Parameters
    ----------
    P : array, shape (n, d), from :func:`~attention_course.chapters.mechanics.positions.sinusoidal_positions`
    dims : sequence of int
        Dimensions drawn as curves; the default skips dimension 0, whose period of about 6 positions reads as noise.

    Examples
    --------
    >>> from attention_course.chapters.mechanics.positions import sinusoidal_positions
    >>> fig = plot_sinusoids(sinusoidal_positions(64, 64))
    >>> [ax.get_title() for ax in fig.axes[:2]]
    ['Sinusoidal encodings $P$: one row per dimension', 'Dimensions 4, 10 and 20: fast to slow waves']
    >>> [t.get_text() for t in fig.legends[0].get_texts()]
    ['dim 4: period 11', 'dim 10: period 26', 'dim 20: period 112']
    """
    p = np.asarray(to_numpy(P), dtype=float)
    if p.ndim != 2 or max(dims) >= p.shape[1]:
        raise ShapeError(f"P has shape {shape_str(p)}; expected (n, d) with d > {max(dims)}")
    n, d = p.shape
    fig, axes = plt.subplots(2, 1, figsize=(PHONE_WIDTH, 5.4), layout="constrained", height_ratios=(1.2, 1))
    im = axes[0].imshow(p.T, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, origin="lower")  # (d, n): rows are dimensions
    ticks = sorted(set(dims) | {0, d // 2, d - 1})
    axes[0].set(title="Sinusoidal encodings $P$: one row per dimension", xlabel="position $t$",
                ylabel=f"dimension (of d = {d})", yticks=ticks)
    fig.colorbar(im, ax=axes[0], shrink=0.9, label="value", location="right", ticks=[-1, 0, 1])
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    t_fine = np.linspace(0, n - 1, 20 * n)  # between the whole positions, to draw each wave continuously
    for c, colour in zip(dims, colours):
        omega = 10000.0 ** (-2 * (c // 2) / d)  # the angle per position of this dimension's pair
        period = 2 * np.pi / omega  # positions per turn
        axes[1].plot(t_fine, np.sin(omega * t_fine) if c % 2 == 0 else np.cos(omega * t_fine),
                     lw=1.0, alpha=0.35, color=colour)
        axes[1].plot(np.arange(n), p[:, c], "o", ms=3.2, color=colour, label=f"dim {c}: period {period:.0f}")
    axes[0].set_yticks(ticks, labels=[str(t) for t in ticks])
    for t, label in zip(ticks, axes[0].get_yticklabels()):  # the dimensions drawn below, in their curves' colours
        if t in dims:
            label.set_color(colours[list(dims).index(t)])
    names = ", ".join(str(c) for c in dims[:-1]) + (f" and {dims[-1]}" if len(dims) > 1 else str(dims[-1]))
    axes[1].set(title=f"Dimension{'s' if len(dims) > 1 else ''} {names}: fast to slow waves", xlabel="position $t$",
                ylabel="value", ylim=(-1.1, 1.1), yticks=[-1, 0, 1])
    fig.legend(loc="outside lower center", ncols=len(dims), fontsize=SMALLEST_PT, handlelength=1.0,
                   columnspacing=0.8, handletextpad=0.4, frameon=False)
    return fig


@book_figure
def plot_position_similarity(similarities: Mapping[str, Array]) -> Figure:
    """Cosine similarity between positions, one heat map (n, n) per encoding, on one colour scale.

    Examples
    --------
    >>> fig = plot_position_similarity({"a": np.eye(3), "b": np.ones((3, 3))})
    >>> [ax.get_title() for ax in fig.axes[:2]], fig.axes[2].get_xlabel()
    (['a', 'b'], 'cosine similarity')
    """
    mats = {k: np.asarray(to_numpy(v), dtype=float) for k, v in similarities.items()}
    n = len(mats)
    fig, axes = plt.subplots(1, n, figsize=(PHONE_WIDTH if n > 1 else 3.2, 3.6), layout="constrained",
                             squeeze=False)
    for ax, (title, m) in zip(axes[0], mats.items()):
        im = ax.imshow(m, cmap="RdBu_r", vmin=-1, vmax=1)
        ax.set(title=title, xlabel="position $t$")
    axes[0, 0].set_ylabel("position $s$")
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8, label="cosine similarity", orientation="horizontal",
                 aspect=30, ticks=[-1, -0.5, 0, 0.5, 1])
    return fig
