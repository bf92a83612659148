r"""Heads as circuits (chapter 4): how much two heads' subspaces overlap, against three baselines, and OV maps.

:math:`\operatorname{overlap}(A, B) = \frac1m \sum_{j=1}^{m} \cos^2\theta_j`, :math:`m = \min(p, q)`:
1 for one subspace inside the other, 0 for orthogonal ones, :math:`\max(p, q)/n` on average at random.
The OV map :math:`W_V^{(i)} W_O^{(i)}` is what a head writes (Elhage et al. 2021).
"""

from __future__ import annotations

import numpy as np
import torch

from ...core._backend import Array, ShapeError, shape_str, to_numpy
from .subspaces import _head_bases, _orth, head_bilinear_forms, reparametrise_head

__all__ = [
    "subspace_overlap", "head_overlaps", "random_overlaps", "shuffled_head_overlaps",
    "matched_random_overlaps", "head_ov_maps", "reparametrise_ov",
]


def subspace_overlap(A: Array, B: Array) -> np.ndarray:
    r"""Mean of :math:`\cos^2` over all principal angles between the column spaces of A and B.

    .. math:: \operatorname{overlap} = \frac1m \sum_{j=1}^{m} \cos^2\theta_j, \quad m = \min(\operatorname{rank} A, \operatorname{rank} B)

    ``A`` (..., n, p) and ``B`` (..., n, q), leading dimensions broadcast; returns shape (...).

    Examples
    --------
    >>> A = np.eye(4)[:, :2]                                  # span(e1, e2)
    >>> B = np.array([[1.0, 0], [0, 0], [0, 1], [0, 0]])      # span(e1, e3)
    >>> float(subspace_overlap(A, B))                          # angles 0 and 90 degrees
    0.5
    """
    A, B = (torch.as_tensor(to_numpy(M), dtype=torch.float64) for M in (A, B))
    if A.ndim < 2 or B.ndim < 2 or A.shape[-2] != B.shape[-2]:
        raise ShapeError(f"A has shape {shape_str(A)} and B has shape {shape_str(B)}; "
                         f"expected (..., n, p) and (..., n, q)")
    QA, QB = _orth(A, 1e-12), _orth(B, 1e-12)  # orthonormal bases, (..., n, rank)
    C = QA.transpose(-2, -1) @ QB  # (..., p, q): its singular values are the cosines
    # $\sum_j \cos^2\theta_j = \lVert Q_A^\top Q_B \rVert_F^2$: no SVD of C needed
    return ((C**2).sum((-2, -1)) / min(QA.shape[-1], QB.shape[-1])).numpy()


def head_overlaps(W: Array, num_heads: int, axis: int = 1) -> np.ndarray:
    """:func:`subspace_overlap` between every pair of heads' subspaces, shape (h, h), diagonal 1.

    ``axis=1`` for ``W_q``/``W_k``/``W_v`` (the columns a head reads), ``axis=0`` for ``W_o`` (the rows it writes).

    Examples
    --------
    >>> W = np.eye(6)[:, [0, 1, 2, 3, 0, 4]]          # heads span {e0,e1}, {e2,e3}, {e0,e4}
    >>> head_overlaps(W, 3).round(2).tolist()
    [[1.0, 0.0, 0.5], [0.0, 1.0, 0.0], [0.5, 0.0, 1.0]]
    """
    Q = _orth(_head_bases(W, num_heads, axis), 1e-12)  # (h, n, r): one orthonormal basis per head, computed once
    C = torch.einsum("inp,jnq->ijpq", Q, Q)  # (h, h, r, r): Q_i^T Q_j for every pair
    return ((C**2).sum((-2, -1)) / Q.shape[-1]).numpy()  # (h, h)


def random_overlaps(n: int, p: int, n_pairs: int = 1000, seed: int = 0) -> np.ndarray:
    r""":func:`subspace_overlap` of ``n_pairs`` pairs of random p-dim subspaces of R^n, shape (n_pairs,); mean :math:`p/n`.

    Examples
    --------
    >>> r = random_overlaps(384, 32, n_pairs=200, seed=0)
    >>> r.shape, abs(float(r.mean()) - 32 / 384) < 0.005    # mean p/n = 0.083
    ((200,), True)
    """
    g = torch.Generator().manual_seed(int(seed))
    A, B = torch.randn(2, n_pairs, n, p, generator=g, dtype=torch.float64)  # (n_pairs, n, p) each
    return subspace_overlap(A, B)  # (n_pairs,)


def shuffled_head_overlaps(W: Array, num_heads: int, n_draws: int = 10, seed: int = 0, axis: int = 1) -> np.ndarray:
    r""":func:`head_overlaps` after regrouping the layer's directions into random heads, shape (n_draws, h, h).

    Each draw permutes the columns (``axis=1``) or rows (``axis=0``) of ``W`` and splits them into heads
    again: the layer's directions stay, only their grouping is random.

    Examples
    --------
    >>> W = np.eye(8)[:, :6]              # 6 orthonormal directions: any 3 heads of 2 are orthogonal
    >>> r = shuffled_head_overlaps(W, 3, n_draws=4, seed=0)
    >>> r.shape, r[0].round(2).tolist()
    ((4, 3, 3), [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    """
    W = torch.as_tensor(to_numpy(W), dtype=torch.float64)
    g = torch.Generator().manual_seed(int(seed))
    draws = []
    for _ in range(n_draws):
        perm = torch.randperm(W.shape[axis], generator=g)  # a random regrouping of the directions
        draws.append(head_overlaps(W.index_select(axis, perm), num_heads, axis))  # (h, h)
    return np.stack(draws)  # (n_draws, h, h)


def matched_random_overlaps(W: Array, p: int, n_pairs: int = 100, seed: int = 0, axis: int = 1) -> np.ndarray:
    r""":func:`subspace_overlap` of random p-dim subspaces drawn with the covariance of ``W``'s directions.

    Each subspace is the span of :math:`V G` (:math:`V` = ``W``, or :math:`W^\top` for ``axis=0``; :math:`G`
    standard Gaussian): columns with covariance :math:`V V^\top`. Returns shape (n_pairs,).

    Examples
    --------
    >>> V = np.diag([1.0, 1.0, 1e-9, 1e-9])          # directions almost only in span(e0, e1)
    >>> bool(matched_random_overlaps(V, 2, n_pairs=5, seed=0).min() > 0.99)
    True
    """
    V = torch.as_tensor(to_numpy(W), dtype=torch.float64)
    V = V if axis == 1 else V.T  # (n, m): the directions as columns
    g = torch.Generator().manual_seed(int(seed))
    G = torch.randn(2, n_pairs, V.shape[1], p, generator=g, dtype=torch.float64)  # (2, n_pairs, m, p)
    A, B = V @ G  # (n_pairs, n, p) each: columns with covariance V V^T
    return subspace_overlap(A, B)  # (n_pairs,)


def head_ov_maps(W_v: Array, W_o: Array, num_heads: int) -> np.ndarray:
    r"""Each head's OV map :math:`W_V^{(i)} W_O^{(i)}`, shape (h, d_model, d_out), float64.

    Head ``i`` adds :math:`A_i X W_V^{(i)} W_O^{(i)}` to the output. ``W_v`` (d_model, h*d_v), used as
    ``x @ W_v``; ``W_o`` (h*d_v, d_out).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> W_v, W_o = rng.normal(size=(6, 4)), rng.normal(size=(4, 5))
    >>> ov = head_ov_maps(W_v, W_o, 2)
    >>> ov.shape, bool(np.allclose(ov.sum(0), W_v @ W_o))
    ((2, 6, 5), True)
    """
    if W_v.ndim != 2 or W_o.ndim != 2 or W_v.shape[1] != W_o.shape[0]:
        raise ShapeError(f"W_v has shape {shape_str(W_v)} and W_o has shape {shape_str(W_o)}; "
                         f"expected (d_model, h*d_v) and (h*d_v, d_out)")
    W_v, W_o = (np.asarray(to_numpy(W), dtype=np.float64) for W in (W_v, W_o))
    return head_bilinear_forms(W_v, W_o.T, num_heads)  # W_V^(i) (W_O^(i)T)^T: (h, d, d_out)


def reparametrise_ov(W_v: Array, W_o: Array, R: Array, *, head: int, num_heads: int) -> tuple:
    r"""Return copies with head ``head`` changed to :math:`W_V^{(i)} R` and :math:`R^{-1} W_O^{(i)}`.

    :math:`(W_V^{(i)} R)(R^{-1} W_O^{(i)}) = W_V^{(i)} W_O^{(i)}`: the OV map is unchanged. Returns new ``(W_v, W_o)``.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> W_v, W_o, R = rng.normal(size=(6, 4)), rng.normal(size=(4, 5)), rng.normal(size=(2, 2))
    >>> W_v2, W_o2 = reparametrise_ov(W_v, W_o, R, head=0, num_heads=2)
    >>> bool(np.allclose(head_ov_maps(W_v2, W_o2, 2), head_ov_maps(W_v, W_o, 2)))
    True
    """
    W_v2, W_oT2, _, _ = reparametrise_head(W_v, W_o.T, R, head=head, num_heads=num_heads)
    return W_v2, W_oT2.T  # the rows of W_o become (R^{-T})^T W_O^(i) = R^{-1} W_O^(i)


def model_head_overlaps(W_q: Array, W_k: Array, W_v: Array, W_o: Array) -> dict[str, np.ndarray]:
    r""":func:`head_overlaps` of one layer stored per head, as :class:`~attention_course.models.tiny.TinyTransformer` stores it.

    ``W_q, W_k, W_v`` (h, d_model, d_k), ``W_o`` (h, d_k, d_model); returns ``{"q", "k", "v", "o"}`` of (h, h):
    the read subspaces (columns) and the write subspace (rows of :math:`W_O`).

    Examples
    --------
    >>> g = torch.Generator().manual_seed(0)
    >>> Wq, Wk, Wv = torch.randn(3, 4, 32, 8, generator=g)          # 4 heads of width 8 in R^32
    >>> ovl = model_head_overlaps(Wq, Wk, Wv, torch.randn(4, 8, 32, generator=g))
    >>> sorted(ovl), ovl["q"].shape, bool(np.allclose(np.diag(ovl["q"]), 1))
    (['k', 'o', 'q', 'v'], (4, 4), True)
    """
    W_q, W_k, W_v, W_o = (torch.as_tensor(to_numpy(W), dtype=torch.float64) for W in (W_q, W_k, W_v, W_o))
    if W_q.ndim != 3 or W_o.ndim != 3 or W_o.shape[0] != W_q.shape[0]:
        raise ShapeError(f"W_q has shape {shape_str(W_q)} and W_o {shape_str(W_o)}; expected (h, d_model, d_k) "
                         f"and (h, d_k, d_model)")
    h, d, d_k = W_q.shape
    out = {}
    for name, W in (("q", W_q), ("k", W_k), ("v", W_v)):
        out[name] = head_overlaps(W.permute(1, 0, 2).reshape(d, h * d_k), h)  # (d, h*d_k): heads side by side
    out["o"] = head_overlaps(W_o.reshape(h * d_k, -1), h, axis=0)  # (h*d_k, d): heads' rows stacked
    return out
