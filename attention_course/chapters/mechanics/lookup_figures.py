"""Figures for chapter 1's two teaching pictures: a soft dictionary lookup, and position encodings.

Each helper labels its axes, adds a colour bar where colour carries a value, returns the
:class:`matplotlib.figure.Figure` and changes no global matplotlib state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ...core._backend import Array, ShapeError, shape_str, to_numpy
from ...figures.style import MAX_WIDTH, book_figure

__all__ = ["plot_soft_lookup", "plot_sinusoids", "plot_position_similarity"]

_BLUE, _ORANGE, _GREY, _VERMILION = "#0072B2", "#E69F00", "#777777", "#D55E00"


@book_figure
def plot_soft_lookup(query: Array, keys: Array, values: Array, labels: Sequence[str], query_label: str = "query"
                     ) -> Figure:
    r"""A soft dictionary lookup in three panels: compare the query with each key, weigh, blend the values.

    Panel 1 draws the 2-D query and keys as arrows; panel 2 the scores :math:`q\cdot k_j` and the
    weights :math:`\operatorname{softmax}_j(q\cdot k_j)`; panel 3 the 2-D values, each marker's
    area proportional to its weight, and the output :math:`\sum_j w_j v_j` as a star.

    Parameters
    ----------
    query : array, shape (2,)
    keys : array, shape (S, 2)
    values : array, shape (S, 2)
    labels : sequence of S str
        The entries' names.
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
    fig, axes = plt.subplots(1, 3, figsize=(MAX_WIDTH - 0.2, 2.9), layout="constrained")
    ax = axes[0]
    lim = 1.25 * max(np.abs(K).max(), np.abs(q).max())
    for kj, name in zip(K, labels):
        ax.annotate("", kj, (0, 0), arrowprops={"arrowstyle": "->", "color": _BLUE, "lw": 1.6})
        ax.text(*(kj * 1.12), name, color=_BLUE, ha="left" if kj[0] > 0 else "right", va="center")
    ax.annotate("", q, (0, 0), arrowprops={"arrowstyle": "->", "color": _VERMILION, "lw": 2.2})
    ax.text(q[0], q[1] + 0.08 * lim, query_label, color=_VERMILION, ha="center", va="bottom", fontweight="bold")
    ax.set(xlim=(-lim, lim), ylim=(-lim, lim), aspect="equal", title="1. compare with keys",
           xlabel="feature 1", ylabel="feature 2")
    ax = axes[1]
    y = np.arange(S)
    ax.barh(y + 0.2, scores, height=0.38, color=_GREY, label=r"score $q\cdot k$")
    ax.barh(y - 0.2, w, height=0.38, color=_ORANGE, label="weight")
    ax.set_yticks(y, labels=list(labels))
    ax.invert_yaxis()
    ax.axvline(0, color="black", lw=0.6)
    ax.set(title="2. weigh: softmax", xlabel="score / weight")
    ax.legend(loc="lower right", fontsize=9)
    ax = axes[2]
    ax.scatter(V[:, 0], V[:, 1], s=40 + 900 * w, color=_ORANGE, alpha=0.75, edgecolor="black", lw=0.5)
    for vj, name in zip(V, labels):
        ax.text(vj[0], vj[1] + 0.22, name, ha="center", va="bottom", fontsize=9)
    ax.scatter(*out, marker="*", s=220, color=_VERMILION, edgecolor="black", lw=0.6, zorder=3)
    ax.text(out[0] - 0.25, out[1], "output", color=_VERMILION, ha="right", va="center", fontweight="bold")
    pad = 0.6
    ax.set(xlim=(V[:, 0].min() - pad, V[:, 0].max() + pad), ylim=(V[:, 1].min() - pad, V[:, 1].max() + pad),
           title="3. blend the values", xlabel="value 1", ylabel="value 2")
    return fig


@book_figure
def plot_sinusoids(P: Array, dims: Sequence[int] = (4, 10, 16)) -> Figure:
    r"""Sinusoidal position encodings: the matrix as a heat map, and a few of its columns against position.

    Parameters
    ----------
    P : array, shape (n, d)
        From :func:`~attention_course.chapters.mechanics.positions.sinusoidal_positions`.
    dims : sequence of int
        Columns to draw as curves (even ones are sines of falling frequency).
    """
    p = np.asarray(to_numpy(P), dtype=float)
    if p.ndim != 2 or max(dims) >= p.shape[1]:
        raise ShapeError(f"P has shape {shape_str(p)}; expected (n, d) with d > {max(dims)}")
    fig, axes = plt.subplots(1, 2, figsize=(MAX_WIDTH - 0.6, 3.0), layout="constrained", width_ratios=(1.1, 1))
    im = axes[0].imshow(p, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1)
    fig.colorbar(im, ax=axes[0], shrink=0.9, label="value")
    axes[0].set(title="Sinusoidal encodings $P$", xlabel="dimension", ylabel="position $t$")
    for c in dims:
        axes[1].plot(np.arange(len(p)), p[:, c], lw=1.6, label=f"dim {c}")
    axes[1].set(title="A few columns: fast to slow waves", xlabel="position $t$", ylabel="$P_{t, \\mathrm{dim}}$")
    axes[1].set_ylim(-1.1, 1.6)  # room for the legend above the waves
    axes[1].legend(loc="upper center", fontsize=9, ncols=3)
    return fig


@book_figure
def plot_position_similarity(similarities: Mapping[str, Array]) -> Figure:
    """Cosine similarity between positions, one heat map per encoding, on one colour scale.

    Parameters
    ----------
    similarities : mapping of title to array, shape (n, n)
        E.g. ``{"sinusoidal": cosine_similarity(P), "learned (MiniLM)": ...}``.
    """
    mats = {k: np.asarray(to_numpy(v), dtype=float) for k, v in similarities.items()}
    fig, axes = plt.subplots(1, len(mats), figsize=(MAX_WIDTH - 0.4, 3.3), layout="constrained", squeeze=False)
    for ax, (title, m) in zip(axes[0], mats.items()):
        im = ax.imshow(m, cmap="RdBu_r", vmin=-1, vmax=1)
        ax.set(title=title, xlabel="position $t$", ylabel="position $s$")
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.9, label="cosine similarity")
    return fig
