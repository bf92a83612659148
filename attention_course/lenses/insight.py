"""One attention head through the course's four lenses (chapter 7).

The essay's closing section names four views of attention. Each chapter tested
one; here they are applied to the *same* head of a trained model:

* **kernel smoothing** (chapter 2): row ``i`` of the head's matrix ``A`` holds
  the kernel weights with which query ``i`` averages the values;
* **low rank** (chapter 3): the singular values of ``A``, and its effective rank;
* **subspaces** (chapter 4): the smallest principal angle between the head's
  query subspace and that of every other head of its layer;
* **message passing** (chapter 5): ``A`` as a weighted graph on the tokens.

:func:`head_lenses` computes the four views and :func:`plot_head_lenses` draws
them side by side.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from matplotlib.figure import Figure

from ..core._backend import ShapeError, to_numpy
from ..figures.graphs import plot_attention_graph
from .heads import random_subspace_angles, smallest_head_angles
from .lowrank import effective_rank, rank_k_error, singular_values
from ..figures.mechanics import plot_attention

__all__ = ["HeadLenses", "head_lenses", "plot_head_lenses"]


@dataclass(frozen=True)
class HeadLenses:
    """The four views of one head (see :func:`head_lenses` for the fields' meaning)."""

    layer: int
    head: int
    tokens: tuple
    weights: np.ndarray  # (n, n) the head's attention matrix A
    singular_values: np.ndarray  # (h, n) sigma_i / sigma_1 for every head of the layer
    effective_rank: np.ndarray  # (h,) effective rank of every head of the layer
    rank_k_error: float  # relative Frobenius error of the best rank-k approximation of A
    k: int
    angles: np.ndarray  # (h,) smallest angle (degrees) to each head of the layer; 0 for itself
    random_angle: float  # median smallest angle (degrees) between random subspaces
    threshold: float
    n_edges: int  # edges j -> i with A[i, j] > threshold


def head_lenses(maps, tokens: Sequence[str], W_q, layer: int, head: int, *, k: int = 4,
                threshold: float = 0.1, seed: int = 0) -> HeadLenses:
    r"""Look at head ``(layer, head)`` as a kernel, a low-rank matrix, a subspace and a graph.

    For the head's matrix :math:`A` (rows sum to 1) with singular values
    :math:`\sigma_1 \ge \sigma_2 \ge \dots`, the effective rank is
    :math:`\exp H(p)` with :math:`p_i = \sigma_i / \sum_j \sigma_j`, and the
    rank-:math:`k` error is :math:`\lVert A - A_k \rVert_F / \lVert A \rVert_F`.
    A head's query subspace is the span of its :math:`d_k` columns of
    :math:`W_Q`; two heads are compared by their smallest principal angle.

    Parameters
    ----------
    maps : array, shape (L, h, n, n)
        Attention weights of every layer and head for one input.
    tokens : sequence of str, length n
    W_q : array, shape (d, d)
        The query projection of layer ``layer`` (used as ``x @ W_q``; columns
        ``head*d_k : (head+1)*d_k`` belong to head ``head``).
    layer, head : int
        Zero-based indices.
    k : int
        Rank of the approximation whose error is reported.
    threshold : float
        Edges with weight above it count as edges of the graph view.
    seed : int
        Seed of the random-subspace baseline.

    Returns
    -------
    HeadLenses

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> maps = rng.dirichlet(np.ones(5), size=(2, 4, 5))       # (L=2, h=4, n=5, n=5)
    >>> lens = head_lenses(maps, list("abcde"), rng.normal(size=(8, 8)), layer=1, head=2, k=2)
    >>> lens.weights.shape, lens.singular_values.shape, lens.angles.shape
    ((5, 5), (4, 5), (4,))
    >>> float(lens.angles[2]), float(lens.singular_values[2, 0])
    (0.0, 1.0)
    """
    maps = to_numpy(maps)
    if maps.ndim != 4 or maps.shape[-1] != maps.shape[-2]:
        raise ShapeError(f"maps must have shape (L, h, n, n); got {maps.shape}")
    L, h, n, _ = maps.shape
    if len(tokens) != n:
        raise ShapeError(f"{len(tokens)} tokens for attention maps over n = {n} positions {maps.shape}")
    if not (0 <= layer < L and 0 <= head < h):
        raise ValueError(f"(layer, head) = ({layer}, {head}) is outside maps of shape {maps.shape}")
    W_q = to_numpy(W_q)
    if W_q.ndim != 2 or W_q.shape[1] % h:
        raise ShapeError(f"W_q must be (d, d) with d divisible by h = {h}; got {W_q.shape}")
    A = maps[layer, head]  # (n, n)
    sv = np.array([singular_values(m) for m in maps[layer]])  # (h, n), descending
    angles = np.degrees(smallest_head_angles(W_q, h))[head]  # (h,), 0 for the head itself
    d, d_k = W_q.shape[0], W_q.shape[1] // h
    baseline = np.degrees(np.median(random_subspace_angles(d, d_k, n_pairs=66, seed=seed)))  # as in ch. 4
    return HeadLenses(
        layer=layer, head=head, tokens=tuple(tokens), weights=A,
        singular_values=sv / sv[:, :1], effective_rank=effective_rank(maps[layer]),
        rank_k_error=float(rank_k_error(A, k)), k=k, angles=angles, random_angle=float(baseline),
        threshold=threshold, n_edges=int((A > threshold).sum()),
    )


def plot_head_lenses(lens: HeadLenses, title: str = "") -> Figure:
    """Draw the four views of :func:`head_lenses` in one 2 x 2 figure.

    Returns the Figure; nothing global is changed.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> maps = rng.dirichlet(np.ones(5), size=(1, 4, 5))
    >>> fig = plot_head_lenses(head_lenses(maps, list("abcde"), rng.normal(size=(8, 8)), 0, 1, k=2))
    >>> len(fig.axes) >= 4
    True
    """
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(16, 10.5), layout="constrained")
    axes = fig.subplot_mosaic([["kernel", "rank", "subspace"], ["graph", "graph", "notes"]],
                              height_ratios=[1.0, 0.9])
    name = f"layer {lens.layer + 1}, head {lens.head + 1}"
    tokens = list(lens.tokens)

    plot_attention(lens.weights, tokens, tokens, ax=axes["kernel"],
                   title="Kernel smoothing: row $i$ = query $i$'s weights on the values")

    ax = axes["rank"]
    idx = np.arange(1, lens.singular_values.shape[1] + 1)
    for i, s in enumerate(lens.singular_values):
        if i != lens.head:
            ax.semilogy(idx, s, color="0.75", lw=1, label="other heads of the layer" if i == 0 or
                        (lens.head == 0 and i == 1) else None)
    ax.semilogy(idx, lens.singular_values[lens.head], "o-", color="tab:red", lw=2, ms=4, label=name)
    ax.axvline(lens.effective_rank[lens.head], color="tab:red", ls="--", lw=1)
    ax.text(lens.effective_rank[lens.head], 1.3, f" effective rank {lens.effective_rank[lens.head]:.1f}",
            color="tab:red", fontsize=9, va="bottom")
    ax.set(xlabel="index $i$", ylabel=r"$\sigma_i / \sigma_1$", ylim=(1e-4, 3),
           title=f"Low rank: singular values of $A$ (n = {len(idx)})")
    ax.legend(frameon=False, loc="lower left")
    ax.grid(alpha=0.3, which="both")

    ax = axes["subspace"]
    heads = np.arange(1, len(lens.angles) + 1)
    colors = ["tab:red" if i == lens.head else "tab:blue" for i in range(len(heads))]
    ax.bar(heads, lens.angles, color=colors)
    ax.axhline(lens.random_angle, color="k", ls="--", lw=1,
               label=f"random subspaces ({lens.random_angle:.1f}°)")
    ax.text(lens.head + 1, 1.5, "itself", rotation=90, ha="center", va="bottom", fontsize=9, color="tab:red")
    ax.set_xticks(heads)
    ax.set(xlabel="head of the same layer", ylabel="smallest principal angle (degrees)", ylim=(0, 90),
           title="Subspaces: angle to each head's query subspace")
    ax.legend(frameon=False, loc="upper right")

    plot_attention_graph(lens.weights, tokens, threshold=lens.threshold, ax=axes["graph"],
                         title=f"Message passing: the {lens.n_edges} edges with weight > {lens.threshold}")
    ax = axes["notes"]
    ax.axis("off")
    others = np.delete(lens.angles, lens.head)
    erank = lens.effective_rank[lens.head]
    notes = [
        ("kernel", f"largest weight {lens.weights.max():.2f}; rows sum to 1 within "
                   f"{np.abs(lens.weights.sum(axis=1) - 1).max():.0e}"),
        ("low rank", f"effective rank {erank:.1f} of {len(tokens)};\n"
                     f"rank-{lens.k} error {lens.rank_k_error:.1%}"),
        ("subspaces", f"median angle {np.median(others):.1f}°\n(random: {lens.random_angle:.1f}°)"),
        ("graph", f"{lens.n_edges} of {lens.weights.size} edges above {lens.threshold};\n"
                  f"{int((lens.weights == 0).sum())} weights exactly zero"),
    ]
    for row, (lens_name, text) in enumerate(notes):
        y = 0.92 - 0.24 * row
        ax.text(0.0, y, lens_name, fontsize=11, fontweight="bold", va="top", transform=ax.transAxes)
        ax.text(0.0, y - 0.07, text, fontsize=10, va="top", transform=ax.transAxes)
    ax.set_title(f"What each lens reads off {name}")
    if title:
        fig.suptitle(title, fontsize=14)
    return fig
