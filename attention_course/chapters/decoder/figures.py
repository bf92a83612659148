"""Figures for chapter 9: RoPE's rotations, the causal graph, layer gaps against the estimate.

Every helper labels its axes, returns the :class:`matplotlib.figure.Figure` and changes no
global matplotlib state (:func:`~attention_course.figures.style.book_figure`).
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure

from ...figures.style import MASK_CMAP, book_figure, mask_legend
from .rope import apply_rope, rope_frequencies

__all__ = ["plot_rope", "plot_causal_graph", "plot_decoder_gaps"]

_OURS, _REF, _EST = "#0072B2", "#D55E00", "#444444"


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
        for m in (0, positions - 1):
            a.annotate(f"m={m}", (np.cos(ang[m]), np.sin(ang[m])), xytext=(6, 4), textcoords="offset points",
                       fontsize=9, color=color)
    a.set(aspect="equal", xlim=(-1.25, 1.35), ylim=(-1.25, 1.35), title="A pair turned by position",
          xlabel="feature i", ylabel="feature i + d/2")
    a.legend(loc="lower left", fontsize=8.5)
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, d_head, generator=g, dtype=torch.float64), torch.randn(1, d_head, generator=g, dtype=torch.float64)
    offsets = np.arange(0, 33)
    for start, style in ((0, "-"), (100, "--"), (1000, ":")):
        qs = apply_rope(q.expand(len(offsets), -1)[None], torch.tensor(start + offsets), base)[0]  # (n, d)
        ks = apply_rope(k, torch.tensor([start]), base)  # (1, d)
        b.plot(offsets, (qs @ ks.T).numpy()[:, 0], style, lw=1.8, color=_OURS, label=f"key at {start}")
    b.set(xlabel="offset m - n (query after key)", ylabel="score q_m . k_n", title="The score depends on the offset")
    b.legend(fontsize=9)
    return fig


@book_figure
def plot_causal_graph(T: int = 6) -> Figure:
    """Left: the causal mask as an adjacency matrix; right: the same graph, each token reading itself and
    every earlier token (chapter 5's view of a mask as edges)."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(7.0, 3.0), layout="constrained", width_ratios=(1, 1.6))
    a.imshow(np.tril(np.ones((T, T), bool)), cmap=MASK_CMAP, vmin=0, vmax=1)
    a.set(xticks=range(T), yticks=range(T), xlabel="key j (is read)", ylabel="query i (reads)", title="Mask: j <= i")
    mask_legend(a, ("j > i: blocked", "j <= i: edge"), loc="upper right")
    a.get_legend().set_bbox_to_anchor((1.02, 1.0))
    for i in range(T):
        b.add_patch(plt.Circle((i, 0), 0.22, color=_OURS, zorder=3))
        b.text(i, 0, str(i), ha="center", va="center", color="white", fontsize=10, zorder=4)
        for j in range(i):  # an arc from the earlier token j to the reader i, arrowhead at i
            h = 0.35 * (i - j)
            x = np.linspace(j, i, 40)
            y = h * np.sin(np.pi * (x - j) / (i - j))
            b.plot(x[:-4], y[:-4], color="0.55", lw=0.9)
            b.annotate("", xy=(x[-2], y[-2] + 0.12), xytext=(x[-5], y[-5]),
                       arrowprops=dict(arrowstyle="-|>", color="0.55", lw=0.9, mutation_scale=8))
    b.set(xlim=(-0.5, T - 0.5), ylim=(-0.4, 0.4 * T), aspect="equal", title="Each token reads every earlier one")
    b.axis("off")
    return fig


@book_figure
def plot_decoder_gaps(gap: Sequence[float], estimate: Sequence[float], label: str) -> Figure:
    """The largest |ours - reference| at one position per layer (log scale), with the float32 estimate."""
    gap, estimate = np.asarray(gap, dtype=float), np.asarray(estimate, dtype=float)
    layers = np.arange(len(gap))
    fig, ax = plt.subplots(figsize=(7.0, 3.2), layout="constrained")
    ax.semilogy(layers, np.maximum(gap, 1e-9), "o-", color=_OURS, ms=4, lw=1.6, label=label)
    ax.semilogy(layers, estimate, "--", color=_EST, lw=1.4, label="float32 estimate, (l + 1) sqrt(n) u max|h|")
    ax.set(xlabel="layer (0 = the embeddings)", ylabel="largest |difference|", ylim=(1e-8, 1e0),
           title="The package's decoder against transformers, layer by layer")
    ax.legend(loc="upper left", fontsize=9.5)
    return fig
