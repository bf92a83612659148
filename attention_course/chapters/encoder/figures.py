"""Figures for chapter 8: the two GELUs, the residual stream by depth, the layer-by-layer gaps, the search, causality."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Optional

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.colors import LogNorm
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch
from matplotlib.figure import Figure

from ...core._backend import ShapeError
from ...figures.style import book_figure
from .feed_forward import gelu

__all__ = ["plot_encoder_plan", "plot_gelus", "plot_stream_size", "plot_layer_gaps", "plot_search", "plot_dependence", "plot_rank_shares"]

_EXACT, _TANH, _PRE, _BOUND = "#0072B2", "#D55E00", "#D55E00", "#444444"


@book_figure
def plot_gelus(lo: float = -4.0, hi: float = 4.0) -> Figure:
    """Left: the exact GELU and its tanh approximation; right: their difference, in units of 1e-4."""
    z = torch.linspace(lo, hi, 801, dtype=torch.float64)
    exact, approx = gelu(z).numpy(), gelu(z, "tanh").numpy()
    zn = z.numpy()
    fig, (a, b) = plt.subplots(1, 2, figsize=(7.0, 2.9), layout="constrained")
    a.plot(zn, exact, color=_EXACT, lw=2.2, label="exact (erf), BERT")
    a.plot(zn, approx, color=_TANH, lw=1.2, ls="--", label="tanh approximation")
    a.plot(zn, np.maximum(zn, 0), color="0.7", lw=1, label="ReLU")
    a.set(xlabel="z", ylabel="GELU(z)", title="Two GELUs, one curve to the eye")
    a.legend(loc="upper left")
    diff = (exact - approx) * 1e4
    b.plot(zn, diff, color=_TANH, lw=1.6)
    i = int(np.argmax(np.abs(diff)))
    b.plot([zn[i]], [diff[i]], "o", color=_TANH)
    b.annotate(f"{abs(diff[i]):.1f}e-4 at |z| = {abs(zn[i]):.1f}", (zn[i], diff[i]), xytext=(0.0, 0.7 * diff[i]),
               textcoords="data", ha="center", va="center", arrowprops=dict(arrowstyle="->", color=_TANH))
    b.axhline(0, color="0.6", lw=0.8)
    b.set(xlabel="z", ylabel="exact - tanh  (x 1e-4)", title="Their difference")
    return fig


@book_figure
def plot_stream_size(sizes: Mapping[str, Sequence[float]]) -> Figure:
    """The rms of the hidden states after each layer, one line per block order (``{"post-LN": ..., ...}``)."""
    fig, ax = plt.subplots(figsize=(4.8, 3.2), layout="constrained")
    colors = {"post": _EXACT, "pre": _PRE}
    for name, s in sizes.items():
        s = np.asarray(s, dtype=float)
        color = next((c for key, c in colors.items() if name.startswith(key)), None)
        ax.plot(np.arange(len(s)), s, marker="o", ms=4, lw=1.8, color=color, label=name)
    ax.set(xlabel="layer (0 = the input)", ylabel="rms of the hidden states", ylim=(0, None),
           title="The residual stream through 12 random layers")
    ax.legend(loc="upper left")
    return fig


@book_figure
def plot_layer_gaps(gaps: Mapping[str, Sequence[float]], bound: Optional[Sequence[float]], tolerance: float,
                    tolerance_label: str = "one tolerance for every layer") -> Figure:
    """Largest |ours - reference| per layer (log scale), one line per comparison, with the float32 estimate.

    ``bound`` has one value per layer (:func:`~.reproduce.layer_bounds`), or is None to leave the
    per-layer estimate out; ``tolerance`` is a single tolerance for every layer, drawn as a horizontal
    line labelled ``tolerance_label``.
    """
    fig, ax = plt.subplots(figsize=(7.0, 3.6), layout="constrained")
    styles = [dict(color=_EXACT, marker="o"), dict(color="#009E73", marker="s"), dict(color=_TANH, marker="^")]
    if len(gaps) == 2:  # no float64 line: the mistake keeps its colour
        styles = [styles[0], styles[2]]
    values = [np.asarray(g, dtype=float) for g in gaps.values()]
    layers = np.arange(len(values[0]))
    for name, g, style in zip(gaps, values, styles):
        ax.semilogy(layers, np.maximum(g, 1e-17), lw=1.6, ms=5, label=name, **style)
    if bound is not None:
        ax.semilogy(layers, bound, color=_BOUND, lw=1.4, ls="--", label="float32 estimate, (l + 1) sqrt(n) u max|h|")
    ax.axhline(tolerance, color=_BOUND, lw=0.8 if bound is not None else 1.4, ls=":",
               label=f"{tolerance_label}, {tolerance:.1e}")
    low = 1e-17 if min(float(g.min()) for g in values) < 1e-12 else 1e-8
    ax.set_xticks(layers, ["emb."] + [str(i) for i in range(1, len(layers))])
    ax.set(xlabel="layer", ylabel="largest |difference|", ylim=(low, 1e-1),
           title="Hidden states against transformers, layer by layer")
    if bound is None:  # the lines sit at 1e-6 and 1e-3: the legend goes below them
        ax.legend(loc="lower right", fontsize=9)
    else:
        ax.legend(loc="center left", bbox_to_anchor=(0.0, 0.45), fontsize=9)
    return fig


@book_figure
def plot_rank_shares(trained: Sequence[float], scrambled: Sequence[Sequence[float]], n: int) -> Figure:
    """Median effective rank / n per layer: MiniLM's heads against the same heads with scrambled weights."""
    fig, ax = plt.subplots(figsize=(7.0, 3.4), layout="constrained")
    layers = np.arange(1, len(trained) + 1)
    for i, s in enumerate(scrambled):
        ax.plot(layers, s, color="#999999", lw=1.2, marker="o", ms=4,
                label="scrambled layer matrices (3 seeds)" if i == 0 else None)
    ax.plot(layers, trained, color=_EXACT, lw=2.0, marker="o", ms=6, label="MiniLM, trained")
    ax.set(xlabel="layer", ylabel="median effective rank / n", ylim=(0, None), xticks=layers,
           title=f"How low-rank are the heads? One text of n = {n} tokens")
    ax.legend(loc="upper right", fontsize=10)
    return fig


def _wrap(text: str, width: int, lines: int = 3) -> str:
    """``text`` broken into lines of at most ``width`` characters; past ``lines`` lines it ends in an ellipsis."""
    parts = textwrap.wrap(text, width)
    if len(parts) > lines:
        parts = parts[:lines]
        parts[-1] = parts[-1][: width - 1].rstrip() + "…"
    return "\n".join(parts)


@book_figure
def plot_search(sim: np.ndarray, queries: Sequence[str], corpus: Sequence[str], width: int = 40) -> Figure:
    """Cosine similarities (corpus rows, query columns) with each query's best match outlined."""
    sim = np.asarray(sim, dtype=float)
    if sim.shape != (len(queries), len(corpus)):
        raise ShapeError(f"sim has shape {sim.shape}; expected (queries, corpus) = ({len(queries)}, {len(corpus)})")
    S = sim.T  # (N, Q): one row per corpus sentence
    fig, ax = plt.subplots(figsize=(7.0, 6.4), layout="constrained")
    im = ax.imshow(S, cmap="Blues", vmin=min(0.0, S.min()), vmax=1.0, aspect="auto")
    fig.colorbar(im, ax=ax, shrink=0.85, label="cosine similarity")
    ax.set_yticks(range(len(corpus)), [_wrap(c, width) for c in corpus])
    ax.set_xticks(range(len(queries)), [_wrap(q, 14, lines=4) for q in queries])
    for (i, j), v in np.ndenumerate(S):
        ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=9, color="white" if v > 0.45 else "black")
    for j in range(S.shape[1]):
        i = int(np.argmax(S[:, j]))
        ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, lw=2.2, ec="#D55E00"))
    ax.set_title("Each question against each sentence")
    return fig


@book_figure
def plot_dependence(deps: Mapping[str, np.ndarray]) -> Figure:
    """Each panel: |d y_i / d x_j| (rows: outputs i, columns: inputs j); exact zeros are white."""
    fig, axes = plt.subplots(1, len(deps), figsize=(7.0, 3.4), layout="constrained", squeeze=False)
    positive = np.concatenate([d[d > 0] for d in deps.values()])
    norm = LogNorm(vmin=positive.min(), vmax=positive.max())
    for ax, (name, d) in zip(axes[0], deps.items()):
        im = ax.imshow(np.ma.masked_equal(d, 0.0), cmap="viridis", norm=norm)
        ax.set(title=name, xlabel="input position j", ylabel="output position i")
        ax.set_facecolor("white")
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.85, label=r"$|\partial y_i / \partial x_j|$  (white: exactly 0)")
    return fig


#: The plan's width (in): narrow enough that its smallest text (10 pt) stays about 10 CSS px on a 390-px phone.
_PLAN_WIDTH = 5.2
_PLAN_FILL = {"attention": "#F3CF7F", "norm": "#DDDDDD", "ffn": "#9CCBEA", "embed": "#8FD3BD", "pool": "#E8B7D3"}


def _plan_box(ax, x: float, y: float, w: float, h: float, text: str, fill: str) -> None:
    """A rounded box centred at (x, y) with ``text`` inside."""
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02,rounding_size=0.12",
                                facecolor=fill, edgecolor="0.25", lw=1.2))
    ax.text(x, y, text, ha="center", va="center", fontsize=11, linespacing=1.1)


def _plan_arrow(ax, start: tuple, end: tuple, color: str = "0.2") -> None:
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12, color=color, lw=1.3,
                                 shrinkA=0, shrinkB=0))


@book_figure
def plot_encoder_plan(n_layers: int = 6) -> Figure:
    """The encoder as a block diagram: left, the whole model; right, one post-LN layer, the box repeated ``n_layers`` times."""
    fig, ax = plt.subplots(figsize=(_PLAN_WIDTH, 5.6), layout="constrained")
    ax.set(xlim=(0, 10), ylim=(0, 11), aspect="auto")
    ax.axis("off")
    # left column: the whole model, top to bottom
    xl, wl = 2.2, 3.6
    ax.text(xl, 10.6, "token ids", ha="center", va="center", fontsize=11)
    _plan_box(ax, xl, 9.2, wl, 1.3, "embeddings\nword + position\n+ type, then LN", _PLAN_FILL["embed"])
    _plan_box(ax, xl, 5.5, wl, 1.5, f"encoder layer\n× {n_layers}", "white")
    _plan_box(ax, xl, 2.2, wl, 1.3, "mean pooling,\nlength 1", _PLAN_FILL["pool"])
    ax.text(xl, 0.3, "sentence vector", ha="center", va="center", fontsize=11)
    for y0, y1 in ((10.35, 9.85), (8.55, 6.25), (4.75, 2.85), (1.55, 0.55)):
        _plan_arrow(ax, (xl, y0), (xl, y1))
    for y, step in ((8.2, "step 5"), (4.4, "step 6"), (1.25, "step 7")):  # the step that builds the box above
        ax.text(xl + 0.15, y, step, ha="left", va="center", fontsize=10, color="0.35")
    # right column: one layer, expanded
    xr, wr, hb = 7.3, 3.2, 0.75
    frame_lo, frame_hi = 0.75, 10.3
    ax.add_patch(FancyBboxPatch((4.95, frame_lo), 4.95, frame_hi - frame_lo, boxstyle="round,pad=0,rounding_size=0.2",
                                facecolor="none", edgecolor="0.45", lw=1.1, ls="--"))
    ax.text(7.4, 10.65, "one layer (post-LN, step 4)", ha="center", va="center", fontsize=11)
    for y in (frame_hi, frame_lo):  # the left box opens into the frame
        ax.plot([xl + wl / 2, 4.95], [5.5 + (0.75 if y == frame_hi else -0.75), y], color="0.6", lw=0.9, ls=":")
    rows = [("multi-head\nattention", "attention", "step 1", 8.75), ("+", None, "", 7.7),
            ("LayerNorm", "norm", "step 2", 6.85), ("feed-forward\n(GELU)", "ffn", "step 3", 5.55),
            ("+", None, "", 4.5), ("LayerNorm", "norm", "step 2", 3.65)]
    ys = []
    for text, kind, step, y in rows:
        if kind is None:  # the residual addition
            ax.add_patch(Circle((xr, y), 0.3, facecolor="white", edgecolor="0.25", lw=1.2))
            ax.text(xr, y, "+", ha="center", va="center", fontsize=14)
        else:
            _plan_box(ax, xr, y, wr, hb if "\n" not in text else 1.0, text, _PLAN_FILL[kind])
        ys.append(y)
    _plan_arrow(ax, (xr, 9.95), (xr, 9.25))  # the layer's input
    ax.text(xr + 0.15, 9.75, "x", ha="left", va="center", fontsize=11, style="italic")
    edges = [(8.25, 8.0), (7.4, 7.22), (6.47, 6.05), (5.05, 4.8), (4.2, 4.02), (3.27, 1.2)]
    for y0, y1 in edges:
        _plan_arrow(ax, (xr, y0), (xr, y1))
    ax.text(xr + 0.15, 1.45, "to the next layer", ha="left", va="center", fontsize=10, color="0.35")
    # the residual connections: round each sub-block into its "+"
    xs = xr - wr / 2 - 0.45
    for y_from, y_to in ((9.6, 7.7), (6.3, 4.5)):
        ax.plot([xr, xs, xs], [y_from, y_from, y_to], color="#D55E00", lw=1.4)
        _plan_arrow(ax, (xs, y_to), (xr - 0.3, y_to), color="#D55E00")
    ax.text(xs - 0.1, 6.9, "residual", ha="right", va="center", fontsize=10, color="#D55E00", rotation=90)
    # step numbers beside the expanded boxes
    for text, kind, step, y in rows:
        if step:
            ax.text(xr + wr / 2 + 0.1, y, step.replace("step ", ""), ha="left", va="center", fontsize=10, color="0.35")
    return fig
