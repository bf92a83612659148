"""Figures for chapter 9: the plan of a decoder, RoPE's rotations, the causal graph, layer gaps against the estimate."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyBboxPatch

from ...figures.style import MASK_CMAP, book_figure, mask_legend
from ..encoder.figures import _PLAN_FILL, _PLAN_WIDTH, _plan_arrow, _plan_box
from .rope import apply_rope, rope_frequencies

__all__ = ["plot_decoder_plan", "plot_rope", "plot_causal_graph", "plot_decoder_gaps"]

_OURS, _REF, _EST = "#0072B2", "#D55E00", "#444444"


@book_figure
def plot_decoder_plan(n_layers: int = 30) -> Figure:
    """The decoder as a block diagram: left, the whole model; right, one pre-norm layer, repeated ``n_layers`` times."""
    fig, ax = plt.subplots(figsize=(_PLAN_WIDTH, 5.6), layout="constrained")
    ax.set(xlim=(0, 10), ylim=(0, 11), aspect="auto")
    ax.axis("off")
    # left column: the whole model, top to bottom
    xl, wl = 2.2, 3.6
    ax.text(xl, 10.6, "token ids", ha="center", va="center", fontsize=11)
    _plan_box(ax, xl, 9.3, wl, 1.1, "embeddings E", _PLAN_FILL["embed"])
    _plan_box(ax, xl, 5.9, wl, 1.5, f"decoder layer\n× {n_layers}", "white")
    _plan_box(ax, xl, 2.4, wl, 1.3, "RMSNorm, then\nthe tied head E\u1d40", _PLAN_FILL["pool"])
    ax.text(xl, 0.4, "next-token logits", ha="center", va="center", fontsize=11)
    for y0, y1 in ((10.35, 9.9), (8.7, 6.7), (5.1, 3.1), (1.7, 0.7)):
        _plan_arrow(ax, (xl, y0), (xl, y1))
    ax.text(xl + 0.15, 4.1, "steps 1-4", ha="left", va="center", fontsize=10, color="0.35")
    ax.text(xl + 0.15, 1.2, "step 5", ha="left", va="center", fontsize=10, color="0.35")
    # right column: one layer, expanded
    xr, wr = 7.45, 3.3
    frame_lo, frame_hi = 0.6, 10.3
    ax.add_patch(FancyBboxPatch((5.0, frame_lo), 4.95, frame_hi - frame_lo, boxstyle="round,pad=0,rounding_size=0.2",
                                facecolor="none", edgecolor="0.45", lw=1.1, ls="--"))
    ax.text(7.45, 10.65, "one layer (pre-norm)", ha="center", va="center", fontsize=11)
    for y in (frame_hi, frame_lo):  # the left box opens into the frame
        ax.plot([xl + wl / 2, 5.0], [5.9 + (0.75 if y == frame_hi else -0.75), y], color="0.6", lw=0.9, ls=":")
    rows = [("RMSNorm", "norm", "1", 9.0, 0.6), ("grouped-query\ncausal attention\nwith RoPE", "attention", "2, 3", 7.75, 1.3),
            ("+", None, "", 6.55, 0), ("RMSNorm", "norm", "1", 5.6, 0.6), ("SwiGLU\nfeed-forward", "ffn", "4", 4.45, 1.0),
            ("+", None, "", 3.3, 0)]
    for text, kind, step, y, hb in rows:
        if kind is None:  # the residual addition
            ax.add_patch(Circle((xr, y), 0.3, facecolor="white", edgecolor="0.25", lw=1.2))
            ax.text(xr, y, "+", ha="center", va="center", fontsize=14)
        else:
            _plan_box(ax, xr, y, wr, hb, text, _PLAN_FILL[kind])
            ax.text(xr + wr / 2 + 0.1, y, step, ha="left", va="center", fontsize=10, color="0.35")
    _plan_arrow(ax, (xr, 10.0), (xr, 9.32))  # the layer's input
    ax.text(xr + 0.15, 9.75, "h", ha="left", va="center", fontsize=11, style="italic")
    for y0, y1 in ((8.68, 8.42), (7.08, 6.87), (6.23, 5.92), (5.28, 4.97), (3.93, 3.62), (2.98, 1.25)):
        _plan_arrow(ax, (xr, y0), (xr, y1))
    ax.text(xr + 0.15, 2.1, "h'", ha="left", va="center", fontsize=11, style="italic")
    ax.text(xr, 0.98, "to the next layer", ha="center", va="center", fontsize=10, color="0.35")
    # the residual stream: round each branch into its "+", untouched by the norms
    xs = xr - wr / 2 - 0.4
    for y_from, y_to in ((9.75, 6.55), (6.1, 3.3)):
        ax.plot([xr, xs, xs], [y_from, y_from, y_to], color=_REF, lw=1.4)
        _plan_arrow(ax, (xs, y_to), (xr - 0.3, y_to), color=_REF)
    ax.text(xs - 0.1, 4.9, "residual stream", ha="right", va="center", fontsize=10, color=_REF, rotation=90)
    return fig


@book_figure
def plot_rope(d_head: int = 64, base: float = 100000.0, positions: int = 8) -> Figure:
    """Left: one pair of features turned at positions 0..7, for the fastest and a slower pair; right: the
    score of a fixed query and key against their offset, at three absolute positions (the curves coincide)."""
    freq = rope_frequencies(d_head, base, torch.float64).numpy()
    fig, (a, b) = plt.subplots(1, 2, figsize=(7.0, 3.2), layout="constrained")
    for i, color in ((0, _OURS), (8, _REF)):
        ang = np.arange(positions) * freq[i]
        a.plot(np.cos(ang), np.sin(ang), "o-", color=color, ms=5, lw=1,
               label=f"pair {i}: {freq[i]:.2g} rad per position")
        m = positions - 1  # both pairs start at the same point, labelled once below
        a.annotate(f"m={m}", (np.cos(ang[m]), np.sin(ang[m])), xytext=(6, 4), textcoords="offset points",
                   fontsize=9, color=color)
    a.annotate("m=0 (both)", (1.0, 0.0), xytext=(4, -14), textcoords="offset points", fontsize=9, color="black")
    a.set(aspect="equal", xlim=(-1.25, 1.35), ylim=(-1.25, 1.35), title="A pair turned by position",
          xlabel="feature i", ylabel="feature i + d/2")
    a.legend(loc="lower left", fontsize=8.5)
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, d_head, generator=g, dtype=torch.float64), torch.randn(1, d_head, generator=g, dtype=torch.float64)
    offsets = np.arange(0, 33)
    # the three curves coincide: drawn wide and pale, then narrower and darker on top, so each stays visible
    for start, style, lw, color, alpha in ((0, "-", 6.0, _OURS, 0.35), (100, "--", 2.4, _OURS, 1.0),
                                           (1000, ":", 1.6, "black", 1.0)):
        qs = apply_rope(q.expand(len(offsets), -1)[None], torch.tensor(start + offsets), base)[0]  # (n, d)
        ks = apply_rope(k, torch.tensor([start]), base)  # (1, d)
        b.plot(offsets, (qs @ ks.T).numpy()[:, 0], style, lw=lw, color=color, alpha=alpha, label=f"key at {start}")
    b.set(xlabel="offset $m - n$ (query after key)", ylabel=r"score $q_m \cdot k_n$", title="The score depends on the offset")
    b.legend(fontsize=9)
    return fig


@book_figure
def plot_causal_graph(T: int = 6) -> Figure:
    """Left: the causal mask as an adjacency matrix; right: the same graph, each token reading itself (a loop
    under it, the mask's diagonal) and every earlier token (chapter 5's view of a mask as edges)."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(7.0, 3.0), layout="constrained", width_ratios=(1, 1.6))
    a.imshow(np.tril(np.ones((T, T), bool)), cmap=MASK_CMAP, vmin=0, vmax=1)
    a.set(xticks=range(T), yticks=range(T), xlabel="key j (is read)", ylabel="query i (reads)", title="Mask: j <= i")
    mask_legend(a, ("j > i: blocked", "j <= i: edge"), loc="upper right")
    a.get_legend().set_bbox_to_anchor((1.02, 1.0))
    r, edge = 0.22, dict(color="0.45", lw=0.9)
    head = dict(arrowstyle="-|>", color="0.45", lw=0.9, mutation_scale=8)
    for i in range(T):
        b.add_patch(plt.Circle((i, 0), r, color=_OURS, zorder=3))
        b.text(i, 0, str(i), ha="center", va="center", color="white", fontsize=10, zorder=4)
        # the self-loop (the mask's diagonal): a small circle under the node, leaving and re-entering it
        t = np.linspace(np.radians(120), np.radians(420), 60)
        lx, ly = i + 0.19 * np.cos(t), -r - 0.14 + 0.19 * np.sin(t)
        b.plot(lx[:-6], ly[:-6], **edge)
        b.annotate("", xy=(lx[-1], ly[-1]), xytext=(lx[-7], ly[-7]), arrowprops=head)
        for j in range(i):  # an arc from the earlier token j to the reader i, arrowhead on i's rim
            n = i - j  # the longer the edge, the higher its arc and the nearer the top of i it lands
            land = np.radians(170 - 80 * (n - 1) / max(T - 2, 1))  # where on i's rim it arrives
            p0 = np.array([j + r * np.cos(np.pi - land), r * np.sin(np.pi - land)])
            p2 = np.array([i + r * np.cos(land), r * np.sin(land)])
            p1 = np.array([(i + j) / 2, 0.9 * n**0.75])  # a quadratic Bezier's control point
            u = np.linspace(0, 1, 60)[:, None]
            x, y = ((1 - u) ** 2 * p0 + 2 * u * (1 - u) * p1 + u**2 * p2).T
            b.plot(x[:-3], y[:-3], **edge)
            b.annotate("", xy=(x[-1], y[-1]), xytext=(x[-4], y[-4]), arrowprops=head)
    b.set(xlim=(-0.5, T - 0.5), ylim=(-0.85, 0.45 * (T - 1) ** 0.75 + 0.15), aspect="equal",
          title="Each token reads itself and every earlier one")
    b.axis("off")
    return fig


@book_figure
def plot_decoder_gaps(gap: Sequence[float], estimate: Sequence[float], label: str) -> Figure:
    """The largest |ours - reference| at one position per layer (log scale), with the float32 estimate.

    A gap of exactly 0 (the embeddings, read from the same table) has no place on a log axis: it is drawn
    in a grey band under the axis's lowest decade, marked "0" and set apart by a white gap."""
    gap, estimate = np.asarray(gap, dtype=float), np.asarray(estimate, dtype=float)
    layers = np.arange(len(gap))
    bottom, zero_band = 1e-8, (8e-10, 5e-9)  # the log axis starts at 1e-8; below it a band stands for 0
    fig, ax = plt.subplots(figsize=(7.0, 3.2), layout="constrained")
    nonzero = gap > 0
    ax.semilogy(layers[nonzero], gap[nonzero], "o-", color=_OURS, ms=4, lw=1.6, label=label)
    ax.axhspan(*zero_band, color="0.9", lw=0)
    ax.axhspan(zero_band[1], bottom, color="white", lw=0, zorder=2.5)  # the break between the band and the axis
    if (~nonzero).any():
        ax.plot(layers[~nonzero], np.full((~nonzero).sum(), np.sqrt(zero_band[0] * zero_band[1])), "o",
                color=_OURS, ms=5, zorder=3)
        ax.text(layers[~nonzero][-1] + 0.6, np.sqrt(zero_band[0] * zero_band[1]), "exactly 0: the same embeddings",
                va="center", fontsize=9.5, color="0.3", zorder=3)
    ax.semilogy(layers, estimate, "--", color=_EST, lw=1.4, label="float32 round-off estimate")
    ticks = [10.0**e for e in range(-8, 1, 2)]
    ax.set_yticks([np.sqrt(zero_band[0] * zero_band[1]), *ticks],
                  ["0", *[f"$10^{{{e}}}$" for e in range(-8, 1, 2)]])
    ax.minorticks_off()
    ax.set(xlabel="layer (0 = the embeddings)", ylabel="largest |difference|", ylim=(zero_band[0], 1e0),
           title="This chapter's decoder against transformers, layer by layer")
    ax.legend(loc="upper left", fontsize=9.5)
    return fig
