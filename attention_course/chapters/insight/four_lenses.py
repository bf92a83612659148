"""One attention head through the course's four lenses (chapter 7).

The essay's closing section names four views of attention. Each chapter tested
one; here they are applied to the *same* head of a trained model:

* **kernel smoothing** (chapter 2): row ``i`` of the head's matrix ``A`` holds
  the kernel weights with which query ``i`` averages the values;
* **low rank** (chapter 3): the singular values of ``A``, and its effective rank;
* **subspaces** (chapter 4): the smallest principal angle between the head's
  query subspace and that of every other head of its layer;
* **message passing** (chapter 5): ``A`` as a weighted graph on the tokens.

:func:`head_lenses` computes the four views;
:func:`attention_course.chapters.insight.figures.plot_head_lenses` draws them, two to a figure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ...core._backend import ShapeError, to_numpy
from ..heads.subspaces import random_subspace_angles, smallest_head_angles
from ..lowrank.spectra import effective_rank, rank_k_error, singular_values

__all__ = ["HeadLenses", "head_lenses"]


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
