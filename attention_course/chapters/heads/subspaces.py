r"""What heads are made of (chapter 4): their blocks of the weights, bilinear forms, subspaces and combination.

Head ``i`` owns the columns ``i*d_k:(i+1)*d_k`` of :math:`W_Q, W_K, W_V` (and those rows of
:math:`W_O`); its scores are the bilinear form :math:`M_i = W_Q^{(i)} W_K^{(i)\top}`, of rank at most
:math:`d_k`. :func:`principal_angles` is the package's one principal-angle routine.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import torch

from ...core._backend import Array, ShapeError, is_torch, shape_str, to_numpy
from ...core.attention import resolve_scale, softmax
from ...core.multihead import split_heads

__all__ = [
    "head_bilinear_forms", "form_singular_values", "reparametrise_head", "principal_angles",
    "smallest_head_angles", "random_subspace_angles", "head_score_matrices", "combine_head_patterns",
    "total_variation",
]  # fmt: skip


# ------------------------------------------------------------ heads' blocks and forms
def split_head_weights(W: Array, num_heads: int, axis: int = 1) -> Array:
    """Cut a projection into per-head blocks.

    ``axis=1`` (for ``W_q, W_k, W_v``): ``(d_model, h*d_k) -> (h, d_model, d_k)``.
    ``axis=0`` (for ``W_o``): ``(h*d_v, d_out) -> (h, d_v, d_out)``.

    Examples
    --------
    >>> split_head_weights(np.zeros((6, 8)), 4).shape
    (4, 6, 2)
    >>> split_head_weights(np.zeros((8, 6)), 4, axis=0).shape
    (4, 2, 6)
    """
    if W.ndim != 2 or axis not in (0, 1) or W.shape[axis] % num_heads:
        raise ShapeError(f"W has shape {shape_str(W)}; expected 2 dimensions with axis {axis} "
                         f"a multiple of num_heads={num_heads}")
    if axis == 0:
        return W.reshape(num_heads, W.shape[0] // num_heads, W.shape[1])  # (h, d_v, d_out)
    return split_heads(W[None], num_heads)[0]  # the d_model rows as a length: (1, h, d_model, d_k) -> (h, d_model, d_k)


def _head_bases(W: Array, num_heads: int, axis: int) -> torch.Tensor:
    """Each head's block of ``W`` in float64 with its subspace as columns: (h, n, d_head)."""
    blocks = torch.as_tensor(to_numpy(split_head_weights(W, num_heads, axis)), dtype=torch.float64)
    return blocks if axis == 1 else blocks.transpose(1, 2)  # (h, n, d_head): a W_o block's rows as columns


def head_bilinear_forms(W_q: Array, W_k: Array, num_heads: int) -> Array:
    r"""Each head's bilinear form :math:`M_i = W_Q^{(i)} W_K^{(i)\top}`, shape (h, d_model, d_model).

    Without biases, head ``i``'s scores are :math:`x_q^\top M_i\, x_k / \sqrt{d_k}`.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> M = head_bilinear_forms(rng.normal(size=(8, 8)), rng.normal(size=(8, 8)), 4)
    >>> M.shape, [int(np.linalg.matrix_rank(m)) for m in M]
    ((4, 8, 8), [2, 2, 2, 2])
    """
    Wq_h = split_head_weights(W_q, num_heads)  # (h, d_model, d_k)
    Wk_h = split_head_weights(W_k, num_heads)  # (h, d_model, d_k)
    return Wq_h @ Wk_h.transpose(-2, -1) if is_torch(Wk_h) else Wq_h @ Wk_h.transpose(0, 2, 1)  # (h, d, d)


def form_singular_values(W_q: Array, W_k: Array, num_heads: int) -> np.ndarray:
    r"""Singular values of every head's bilinear form :math:`M_i = W_Q^{(i)} W_K^{(i)\top}`, shape (h, d_k).

    With :math:`W_Q^{(i)} = Q_a R_a`, :math:`W_K^{(i)} = Q_b R_b` (QR), they are those of the small
    :math:`R_a R_b^\top` (d_k x d_k). Descending in each row.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> W_q, W_k = rng.normal(size=(2, 16, 8))
    >>> s = form_singular_values(W_q, W_k, 4)
    >>> s.shape, int((s > 1e-10).sum(1).min())          # 4 heads, each of rank d_k = 2
    ((4, 2), 2)
    """
    Wq_h = torch.as_tensor(to_numpy(split_head_weights(W_q, num_heads)), dtype=torch.float64)  # (h, d, d_k)
    Wk_h = torch.as_tensor(to_numpy(split_head_weights(W_k, num_heads)), dtype=torch.float64)  # (h, d, d_k)
    R_a, R_b = torch.linalg.qr(Wq_h).R, torch.linalg.qr(Wk_h).R  # (h, d_k, d_k) each
    return torch.linalg.svdvals(R_a @ R_b.transpose(1, 2)).numpy()  # (h, d_k)


def reparametrise_head(W_q: Array, W_k: Array, R: Array, *, head: int, num_heads: int,
                       b_q: Optional[Array] = None, b_k: Optional[Array] = None) -> tuple:
    r"""Return copies with head ``head`` changed to :math:`W_Q R` and :math:`W_K R^{-\top}`.

    :math:`(W_Q R)(W_K R^{-\top})^\top = W_Q W_K^\top`: the scores do not change. Biases transform the same way.

    Returns
    -------
    (W_q, W_k, b_q, b_k), with ``None`` for biases not given.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> W_q, W_k, R = rng.normal(size=(8, 4)), rng.normal(size=(8, 4)), rng.normal(size=(2, 2))
    >>> W_q2, W_k2, _, _ = reparametrise_head(W_q, W_k, R, head=1, num_heads=2)
    >>> bool(np.allclose(head_bilinear_forms(W_q2, W_k2, 2), head_bilinear_forms(W_q, W_k, 2)))
    True
    """
    d_k = W_q.shape[1] // num_heads
    if tuple(R.shape) != (d_k, d_k) or not 0 <= head < num_heads:
        raise ShapeError(f"R has shape {shape_str(R)} and head={head}; expected ({d_k}, {d_k}) "
                         f"and 0 <= head < {num_heads}")
    R_inv_T = (torch.linalg.inv(R) if is_torch(R) else np.linalg.inv(R)).T  # (d_k, d_k)
    cols = slice(head * d_k, (head + 1) * d_k)
    out = []
    for M, A in ((W_q, R), (W_k, R_inv_T), (b_q, R), (b_k, R_inv_T)):
        if M is None:
            out.append(None)
            continue
        M = M.clone() if is_torch(M) else M.copy()
        M[..., cols] = M[..., cols] @ A  # (d_model, d_k) @ (d_k, d_k), or (d_k,) @ (d_k, d_k)
        out.append(M)
    return tuple(out)


# ------------------------------------------------------------ subspaces and principal angles
#: A QR basis (2-3 times faster than the SVD) is used when every diagonal entry of R is at least
#: this share of the largest: the columns are then well away from any rank decision.
_QR_CONDITION = 1e-6


def _orth(A: torch.Tensor, rtol: float) -> torch.Tensor:
    """Orthonormal bases of the column spaces of ``A`` (..., n, p): (..., n, r), r = the common rank."""
    if A.shape[-2] >= A.shape[-1] and A.numel():
        Q, R = torch.linalg.qr(A)  # (..., n, p), (..., p, p)
        diag = R.diagonal(dim1=-2, dim2=-1).abs()  # (..., p)
        if bool((diag >= _QR_CONDITION * diag.amax(-1, keepdim=True)).all()):
            return Q  # full column rank, well conditioned
    U, s, _ = torch.linalg.svd(A, full_matrices=False)  # U (..., n, min(n, p)), s descending
    ranks = (s > rtol * s[..., :1]).sum(-1)  # directions above rtol * the largest singular value
    r = int(ranks.flatten()[0]) if ranks.numel() else 0
    if bool((ranks != r).any()):
        raise ShapeError(f"the matrices of shape {tuple(A.shape)} have ranks {sorted(set(ranks.flatten().tolist()))}; "
                         f"a batch of subspaces needs one dimension")
    return U[..., :r]


def principal_angles(A: Array, B: Array, rtol: float = 1e-12) -> np.ndarray:
    r"""Principal angles (radians, ascending) between the column spaces of ``A`` and ``B``.

    With orthonormal bases :math:`Q_A, Q_B`, :math:`\cos\theta_i = \sigma_i(Q_A^\top Q_B)`; small angles
    come from :math:`\sin\theta_i = \sigma_i(Q_B - Q_A Q_A^\top Q_B)` (Knyazev & Argentati 2002).
    Float64, through ``torch.linalg`` (faster batched SVDs than numpy).

    ``A`` (..., n, p) and ``B`` (..., n, q), leading dimensions broadcast; directions below ``rtol`` times
    the largest singular value are dropped. Returns shape (..., min(rank A, rank B)), one rank per batch.

    Examples
    --------
    >>> A = np.eye(3)[:, :2]                                  # span(e1, e2)
    >>> B = np.array([[1.0, 0], [0, 1], [0, 1]])              # span(e1, e2 + e3)
    >>> np.degrees(principal_angles(A, B)).round(6)
    array([ 0., 45.])
    """
    A, B = (torch.as_tensor(to_numpy(M), dtype=torch.float64) for M in (A, B))
    if A.ndim < 2 or B.ndim < 2 or A.shape[-2] != B.shape[-2]:
        raise ShapeError(f"A has shape {shape_str(A)} and B has shape {shape_str(B)}; "
                         f"expected (..., n, p) and (..., n, q)")
    QA, QB = _orth(A, rtol), _orth(B, rtol)
    if QA.shape[-1] < QB.shape[-1]:
        QA, QB = QB, QA  # QA spans the larger space
    C = QA.transpose(-2, -1) @ QB  # (..., p, q)
    cos = torch.linalg.svdvals(C).clamp(0.0, 1.0).flip(-1)  # ascending cosines
    sin = torch.linalg.svdvals(QB - QA @ C).clamp(0.0, 1.0)  # descending sines
    theta = torch.where(cos**2 >= 0.5, torch.arcsin(sin), torch.arccos(cos))  # descending angles
    return theta.flip(-1).numpy()


def head_subspace_angles(W: Array, num_heads: int, axis: int = 1) -> np.ndarray:
    """Principal angles between every pair of heads' subspaces, shape (h, h, d_k).

    ``axis=1`` (``W_q``, ``W_k``, ``W_v``): the span of a head's columns, the directions it reads;
    ``axis=0`` (``W_o``): the span of its rows, the directions it writes to.

    Examples
    --------
    >>> ang = head_subspace_angles(np.random.default_rng(0).normal(size=(16, 8)), 4)
    >>> ang.shape, float(abs(ang[0, 0]).max()) < 1e-7
    ((4, 4, 2), True)
    """
    blocks = _head_bases(W, num_heads, axis)  # (h, n, d_head)
    return principal_angles(blocks[:, None], blocks[None, :])  # (h, 1, ...) against (1, h, ...): all pairs


def smallest_head_angles(W: Array, num_heads: int, axis: int = 1) -> np.ndarray:
    r"""Smallest principal angle (radians) between every pair of heads' subspaces, shape (h, h).

    0 means the heads share a direction. The diagonal is set to exactly 0.

    Examples
    --------
    >>> W = np.eye(6)[:, [0, 1, 2, 0]]                          # heads span {e0, e1} and {e2, e0}
    >>> np.degrees(smallest_head_angles(W, 2)).round(1).tolist()
    [[0.0, 0.0], [0.0, 0.0]]
    """
    theta = head_subspace_angles(W, num_heads, axis)[..., 0]  # (h, h): smallest angle first
    np.fill_diagonal(theta, 0.0)
    return theta


def random_subspace_angles(n: int, p: int, n_pairs: int = 100, seed: int = 0) -> np.ndarray:
    """Smallest principal angles (radians) between ``n_pairs`` pairs of random ``p``-dim subspaces of R^n.

    Examples
    --------
    >>> a = random_subspace_angles(3, 2, n_pairs=5)         # two planes in R^3 always share a line
    >>> bool(np.allclose(a, 0, atol=1e-6))
    True
    """
    g = torch.Generator().manual_seed(int(seed))
    A, B = torch.randn(2, n_pairs, n, p, generator=g, dtype=torch.float64)  # (n_pairs, n, p) each
    return principal_angles(A, B)[:, 0]  # (n_pairs,)


# ------------------------------------------------------------ combining heads
def head_score_matrices(x: Array, W_q: Array, W_k: Array, num_heads: int,
                        b_q: Optional[Array] = None, b_k: Optional[Array] = None) -> np.ndarray:
    r"""Each head's scaled scores, shape (h, T, T).

    .. math:: S_i = (XW_Q^{(i)} + b_Q^{(i)})(XW_K^{(i)} + b_K^{(i)})^\top / \sqrt{d_k}

    ``x`` (T, d_model); ``W_q, W_k`` (d_model, h*d_k); ``b_q, b_k`` optional, (h*d_k,).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x, W_q, W_k = rng.normal(size=(5, 8)), rng.normal(size=(8, 8)), rng.normal(size=(8, 8))
    >>> S = head_score_matrices(x, W_q, W_k, 4)
    >>> S.shape, bool(np.allclose(S.sum(0), x @ W_q @ W_k.T @ x.T / np.sqrt(2)))   # heads add up
    ((4, 5, 5), True)
    """
    x, W_q, W_k = (np.asarray(to_numpy(a), dtype=float) for a in (x, W_q, W_k))
    if x.ndim != 2 or W_q.shape != W_k.shape or W_q.shape[0] != x.shape[1] or W_q.shape[1] % num_heads:
        raise ShapeError(f"x has shape {x.shape}, W_q {W_q.shape}, W_k {W_k.shape}; expected (T, d_model) "
                         f"and two (d_model, h*d_k) with h={num_heads} dividing h*d_k")
    q = x @ W_q + (0.0 if b_q is None else to_numpy(b_q))  # (T, h*d_k)
    k = x @ W_k + (0.0 if b_k is None else to_numpy(b_k))  # (T, h*d_k)
    q, k = (split_heads(a[None], num_heads)[0] for a in (q, k))  # each (h, T, d_k)
    return q @ k.transpose(0, 2, 1) * resolve_scale(q.shape[-1])  # (h, T, T)


def combine_head_patterns(scores: Array) -> dict[str, np.ndarray]:
    r"""Three ways to merge ``h`` heads' scores (h, T, S) into one pattern (T, S).

    ``"softmax_of_sum"`` :math:`\operatorname{softmax}(\sum_i S_i)`, ``"mean_of_softmaxes"``
    :math:`\frac1h\sum_i \operatorname{softmax}(S_i)` and ``"normalised_product"``
    :math:`\prod_i \operatorname{softmax}(S_i)` renormalised per row (equal to the first).

    Examples
    --------
    >>> S = np.array([[[4.0, 0.0]], [[0.0, 4.0]]])             # two heads that disagree
    >>> c = combine_head_patterns(S)
    >>> c["softmax_of_sum"].round(3).tolist(), c["mean_of_softmaxes"].round(3).tolist()
    ([[0.5, 0.5]], [[0.5, 0.5]])
    """
    s = np.asarray(to_numpy(scores), dtype=float)
    if s.ndim != 3:
        raise ShapeError(f"scores have shape {s.shape}; expected (h, T, S)")
    heads = softmax(s)  # (h, T, S), normalised over the keys
    log_prod = np.log(heads).sum(0)  # (T, S): log of the product of the heads' weights
    return {"softmax_of_sum": softmax(s.sum(0)), "mean_of_softmaxes": heads.mean(0),
            "normalised_product": softmax(log_prod)}


def total_variation(P: Array, Q: Array) -> np.ndarray:
    r"""Total-variation distance :math:`\tfrac12 \sum_j |P_{ij} - Q_{ij}|` of each row (0 to 1).

    ``P``, ``Q``: shape (..., S), one distribution per row; returns shape (...).

    Examples
    --------
    >>> total_variation(np.array([[1.0, 0.0], [0.5, 0.5]]), np.array([[0.0, 1.0], [0.5, 0.5]]))
    array([1., 0.])
    """
    P, Q = np.asarray(to_numpy(P), dtype=float), np.asarray(to_numpy(Q), dtype=float)
    if P.shape != Q.shape:
        raise ShapeError(f"P has shape {P.shape} and Q {Q.shape}; expected the same shape (..., S)")
    return 0.5 * np.abs(P - Q).sum(axis=-1)  # (...): one distance per row


def mha_parameter_count(d_model: int, num_heads: int, bias: bool = True) -> int:
    r"""Parameters of multi-head attention with :math:`d_k = d_v = d_{model}/h`: :math:`4d^2 (+ 4d)`.

    The count does not depend on ``num_heads``: heads split the width, they do not add to it.

    Examples
    --------
    >>> mha_parameter_count(384, 12), mha_parameter_count(384, 1)
    (591360, 591360)
    """
    if num_heads < 1 or d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return 4 * d_model * d_model + (4 * d_model if bias else 0)
