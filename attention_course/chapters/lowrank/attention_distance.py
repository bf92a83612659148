r"""Mean attention distance: how far, in pixels, a head looks; against uniform and shuffled geometry.

.. math::

    \bar d = \frac{1}{B\,n} \sum_{b, i} \sum_j A_{b i j}\, D_{i j}

(Dosovitskiy et al. 2021, App. D.7), with :math:`D` the distance between patch centres, or per image
between patch contents (:func:`content_distances`). The null relabels the patches,
:math:`D_{ij} \to D_{\pi(i)\pi(j)}` (rows and columns together, so a head's weight on its own patch
stays at distance 0); :func:`locality_pvalue` is the one-sided permutation p-value.
"""

from __future__ import annotations

from typing import Union

import numpy as np
import torch

from ...core._backend import ShapeError, shape_str

__all__ = ["neighbourhood"]

Array = Union[np.ndarray, torch.Tensor]


def _np(a: Array) -> np.ndarray:
    return a.detach().double().cpu().numpy() if isinstance(a, torch.Tensor) else np.asarray(a, dtype=float)


def grid_distances(centres: np.ndarray) -> np.ndarray:
    r"""Euclidean distances :math:`D_{ij} = \|c_i - c_j\|` between patch centres ``(n, 2)``; returns ``(n, n)``.

    Examples
    --------
    >>> grid_distances(np.array([[0., 0.], [0., 2.], [2., 2.]])).round(3)
    array([[0.   , 2.   , 2.828],
           [2.   , 0.   , 2.   ],
           [2.828, 2.   , 0.   ]])
    """
    c = np.asarray(centres, dtype=float)
    if c.ndim != 2:
        raise ShapeError(f"centres have shape {c.shape}; expected (n, 2)")
    return np.linalg.norm(c[:, None, :] - c[None, :, :], axis=-1)  # (n, n)


def neighbourhood(centres: np.ndarray, step: float) -> np.ndarray:
    r"""The 3 × 3 neighbourhood on the grid: :math:`N_{ij} = 1` when patch :math:`j` is patch :math:`i` or touches it.

    Used as a distance in :func:`mean_attention_distance`, it gives a head's *neighbourhood mass*.
    ``centres``: (n, 2) pixels; ``step``: the grid spacing.

    Examples
    --------
    >>> from attention_course.chapters.lowrank.vision import patch_centres
    >>> N = neighbourhood(patch_centres(2), 2)
    >>> N.sum(axis=1).reshape(4, 4).astype(int)        # corners 4, edges 6, inside 9
    array([[4, 6, 6, 4],
           [6, 9, 9, 6],
           [6, 9, 9, 6],
           [4, 6, 6, 4]])
    """
    c = np.asarray(centres, dtype=float)
    cheb = np.abs(c[:, None, :] - c[None, :, :]).max(axis=-1)  # (n, n) Chebyshev distance, pixels
    return (cheb <= step + 1e-9).astype(float)


def content_neighbourhood(patches: Array, sizes: np.ndarray) -> np.ndarray:
    r"""Per image, the :math:`|N_i|` patches nearest in content to patch :math:`i` (itself included).

    ``sizes[i]`` patches for query :math:`i`, as in :func:`neighbourhood`; ties broken by patch index.
    Returns (B, n, n), entries 0 or 1.
    """
    C = content_distances(patches)  # (B, n, n)
    B, n, _ = C.shape
    rank = np.argsort(np.argsort(C + 1e-9 * (np.arange(n) != np.arange(n)[:, None]), axis=-1, kind="stable"),
                      axis=-1, kind="stable")  # (B, n, n): rank of key j among query i's keys; itself first
    return (rank < np.asarray(sizes)[None, :, None]).astype(float)


def content_distances(patches: Array) -> np.ndarray:
    r"""Distances between the pixel contents of each image's patches, :math:`\|P_{bi} - P_{bj}\|`.

    ``patches`` (B, n, p²) from :func:`~attention_course.chapters.lowrank.vision.patchify` -> (B, n, n).
    """
    p = _np(patches)
    if p.ndim != 3:
        raise ShapeError(f"patches have shape {p.shape}; expected (B, n, p*p)")
    return np.linalg.norm(p[:, :, None, :] - p[:, None, :, :], axis=-1)  # (B, n, n)


def mean_attention_distance(weights: Array, distances: Array) -> np.ndarray:
    r"""Attention-weighted distance per head, averaged over queries and images.

    .. math:: \bar d_h = \frac{1}{B n}\sum_{b,i,j} A_{bhij} D_{(b)ij}

    ``weights`` (B, h, n, n), ``distances`` (n, n) shared or (B, n, n) per image -> (h,).

    Examples
    --------
    >>> D = grid_distances(np.array([[0., 0.], [0., 2.]]))
    >>> A = np.array([[[[1., 0.], [0., 1.]], [[0.5, 0.5], [0.5, 0.5]]]])   # (1, 2 heads, 2, 2)
    >>> mean_attention_distance(A, D)          # head 1 looks at itself, head 2 uniformly
    array([0., 1.])
    """
    A, D = _np(weights), _np(distances)
    if A.ndim != 4 or A.shape[-1] != A.shape[-2]:
        raise ShapeError(f"weights have shape {A.shape}; expected (B, h, n, n)")
    B, h, n, _ = A.shape
    if D.shape not in ((n, n), (B, n, n)):
        raise ShapeError(f"distances have shape {D.shape} but weights {A.shape}; expected ({n}, {n}) or ({B}, {n}, {n})")
    if D.ndim == 2:
        return np.einsum("bhij,ij->h", A, D) / (B * n)  # A summed over images is enough: D is shared
    return np.einsum("bhij,bij->h", A, D) / (B * n)


def uniform_distance(distances: Array) -> float:
    r"""Mean attention distance of uniform attention, :math:`\frac{1}{n^2}\sum_{ij} D_{ij}` (averaged over images).

    Examples
    --------
    >>> from attention_course.chapters.lowrank.vision import patch_centres
    >>> round(uniform_distance(grid_distances(patch_centres(2))), 3)     # the 4 × 4 grid of 2 × 2 patches
    4.016
    """
    return float(_np(distances).mean())


def shuffled_distances(weights: Array, distances: Array, n_perm: int = 1000, seed: int = 0) -> np.ndarray:
    r"""Mean attention distance of the same maps under ``n_perm`` random relabellings of the patches.

    :math:`D_{ij} \to D_{\pi(i)\pi(j)}`, the same :math:`\pi` for every image. Returns (n_perm, h).
    """
    A, D = _np(weights), _np(distances)
    B, h, n, _ = A.shape
    rng = np.random.default_rng(seed)
    perms = np.stack([rng.permutation(n) for _ in range(n_perm)])  # (K, n)
    if D.ndim == 2:
        Abar = A.sum(axis=0)  # (h, n, n): images summed, since D is shared
        Dp = D[perms[:, :, None], perms[:, None, :]]  # (K, n, n): $D_{\pi(i)\pi(j)}$
        return np.einsum("hij,kij->kh", Abar, Dp) / (B * n)
    # per-image distances: for a chunk of c permutations at once, sum_ij A_bhij D_b,pi(i)pi(j) as one batched
    # product per image (the same numbers as mean_attention_distance(A, D[:, p][:, :, p]) for each p, faster)
    A_flat, D_t, out = torch.from_numpy(A.reshape(B, h, n * n)), torch.from_numpy(D), []  # (B, h, n²), (B, n, n)
    for start in range(0, n_perm, 10):
        P = torch.from_numpy(perms[start:start + 10])  # (c, n)
        Dp = D_t[:, P[:, :, None], P[:, None, :]].reshape(B, len(P), n * n)  # (B, c, n²): $D_{b\pi(i)\pi(j)}$
        out.append((torch.bmm(A_flat, Dp.transpose(1, 2)).sum(0).T / (B * n)).numpy())  # (c, h)
    return np.concatenate(out)  # (K, h)


def locality_pvalue(observed: np.ndarray, null: np.ndarray) -> np.ndarray:
    r"""One-sided permutation p-value that each head is closer than the shuffled null: :math:`(1 + \#\{\bar d_\pi \le \bar d\})/(1 + K)`.

    ``observed``: (h,), ``null``: (K, h).

    Examples
    --------
    >>> locality_pvalue(np.array([1.0, 5.0]), np.array([[2.0, 4.0], [3.0, 6.0], [4.0, 4.5]]))
    array([0.25, 0.75])
    """
    observed, null = np.asarray(observed, dtype=float), np.asarray(null, dtype=float)
    if null.ndim != 2 or null.shape[1:] != observed.shape:
        raise ShapeError(f"null has shape {null.shape} but observed {observed.shape}; expected (K, h) and (h,)")
    return (1 + (null <= observed + 1e-12).sum(axis=0)) / (1 + len(null))
