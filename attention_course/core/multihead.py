r"""Multi-head attention from scratch, and tools to look inside the heads.

.. math::

    \operatorname{head}_i = \operatorname{Attention}(X_q W_Q^{(i)}, X_{kv} W_K^{(i)}, X_{kv} W_V^{(i)}),
    \qquad
    \operatorname{MHA} = \operatorname{Concat}(\operatorname{head}_1, \dots, \operatorname{head}_h)\, W_O

Weights use the equations' convention ``y = x @ W + b`` (``W`` has shape
``(in, out)``, the transpose of ``nn.Linear.weight``). Head ``i`` owns the
columns ``i*d_k:(i+1)*d_k`` of ``W_q``, ``W_k``, ``W_v`` and the same rows of ``W_o``.

Shape legend::

    x_q      (B, T, d_model)      T queries        W_q, W_k  (d_model, h*d_k)
    x_kv     (B, S, d_model)      S keys/values    W_v       (d_model, h*d_v)
    weights  (B, h, T, S)         one map per head W_o       (h*d_v, d_out)
    output   (B, T, d_out)

Mask convention: the package's own (as in ``F.scaled_dot_product_attention``),
boolean ``True`` = *may attend*; float masks are added to the scores; a query
with no allowed key gets weights 0 (torch's ``nn.MultiheadAttention`` gives NaN).
``torch.nn.MultiheadAttention`` uses the **opposite** boolean convention
(``True`` = masked out): convert its masks with :func:`mask_from_torch`.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
import torch
from torch import nn

from ._backend import Array, ShapeError, check_float, is_torch, shape_str, to_numpy
from .attention import scaled_dot_product_attention

__all__ = [
    "split_heads", "merge_heads", "head_outputs", "multi_head_attention", "MultiHeadAttention",
    "from_torch", "mask_from_torch", "split_head_weights", "head_bilinear_forms", "bilinear_ranks",
    "principal_angles", "head_subspace_angles", "head_contributions", "reparametrize_head",
]  # fmt: skip


def _swap(x: Array, a: int, b: int) -> Array:
    return x.transpose(a, b) if is_torch(x) else np.swapaxes(x, a, b)


def split_heads(x: Array, h: int) -> Array:
    """Split the feature axis into ``h`` heads: ``(B, T, h*d_k) -> (B, h, T, d_k)``.

    Head ``i`` gets the features ``i*d_k:(i+1)*d_k``.

    Examples
    --------
    >>> x = np.arange(2 * 3 * 8.0).reshape(2, 3, 8)
    >>> split_heads(x, 4).shape
    (2, 4, 3, 2)
    >>> bool((merge_heads(split_heads(x, 4)) == x).all())
    True
    """
    check_float("x", x)
    if x.ndim != 3 or int(h) != h or h < 1 or x.shape[-1] % h != 0:
        raise ShapeError(
            f"x has shape {shape_str(x)} and h={h!r}; expected (B, T, h*d_k) with the "
            f"last dimension a multiple of a positive integer h"
        )
    B, T, D = x.shape
    return _swap(x.reshape(B, T, h, D // h), 1, 2)  # (B, T, h, d_k) -> (B, h, T, d_k)


def merge_heads(x: Array) -> Array:
    """Concatenate the heads: ``(B, h, T, d_k) -> (B, T, h*d_k)`` (inverse of :func:`split_heads`).

    Examples
    --------
    >>> merge_heads(np.zeros((2, 4, 3, 5))).shape
    (2, 3, 20)
    """
    check_float("x", x)
    if x.ndim != 4:
        raise ShapeError(f"x has shape {shape_str(x)}; expected 4 dimensions (B, h, T, d_k)")
    B, h, T, d_k = x.shape
    return _swap(x, 1, 2).reshape(B, T, h * d_k)  # (B, T, h, d_k) -> (B, T, h*d_k)


def _check_mha(x_q, x_kv, W_q, W_k, W_v, W_o, b, num_heads) -> None:
    """Validate shapes for multi-head attention; every error names the shapes involved."""
    if isinstance(num_heads, bool) or int(num_heads) != num_heads or num_heads < 1:
        raise ValueError(f"num_heads={num_heads!r}; expected a positive integer")
    for name, x in (("x_q", x_q), ("x_kv", x_kv)):
        check_float(name, x)
        if x.ndim != 3:
            raise ShapeError(f"{name} has shape {shape_str(x)}; expected 3 dimensions "
                             f"(B, length, d_model)")
    if x_q.shape[0] != x_kv.shape[0]:
        raise ShapeError(f"x_q has shape {shape_str(x_q)} but x_kv has shape {shape_str(x_kv)}; "
                         f"batch sizes differ")
    inputs = (("W_q", W_q, "x_q", x_q), ("W_k", W_k, "x_kv", x_kv), ("W_v", W_v, "x_kv", x_kv))
    for name, W, xn, x in inputs:
        check_float(name, W)
        d = x.shape[-1]
        if W.ndim != 2 or W.shape[0] != d:
            raise ShapeError(f"{name} has shape {shape_str(W)} but {xn} has shape {shape_str(x)}; "
                             f"expected {name} of shape ({d}, h*d_head) (y = x @ {name})")
        if W.shape[1] % num_heads:
            raise ShapeError(f"{name} has shape {shape_str(W)}: {W.shape[1]} output features cannot "
                             f"be split into num_heads={num_heads} equal heads; expected a multiple "
                             f"of {num_heads}")
    if W_k.shape[1] != W_q.shape[1]:
        raise ShapeError(f"W_q has shape {shape_str(W_q)} but W_k has shape {shape_str(W_k)}; "
                         f"queries and keys need the same h*d_k")
    if W_o is not None:
        check_float("W_o", W_o)
        if W_o.ndim != 2 or W_o.shape[0] != W_v.shape[1]:
            raise ShapeError(f"W_o has shape {shape_str(W_o)} but W_v has shape {shape_str(W_v)}; "
                             f"expected W_o of shape ({W_v.shape[1]}, d_out)")
    sizes = (W_q.shape[1], W_k.shape[1], W_v.shape[1], None if W_o is None else W_o.shape[1])
    for name, bias, n in zip(("b_q", "b_k", "b_v", "b_o"), b, sizes):
        if bias is not None and tuple(bias.shape) != (n,):
            raise ShapeError(f"{name} has shape {shape_str(bias)}; expected ({n},)")


def _linear(x: Array, W: Array, b: Optional[Array]) -> Array:
    y = x @ W  # (B, L, out)
    return y if b is None else y + b


def head_outputs(x_q: Array, x_kv: Array, W_q: Array, W_k: Array, W_v: Array,
                 b_q: Optional[Array] = None, b_k: Optional[Array] = None, b_v: Optional[Array] = None,
                 *, num_heads: int, mask: Optional[Array] = None) -> tuple[Array, Array]:
    r"""Every head's attention output, before concatenation and ``W_o``.

    .. math:: \operatorname{head}_i = \operatorname{softmax}\!\left(
              \frac{(X_q W_Q^{(i)} + b_Q^{(i)})(X_{kv} W_K^{(i)} + b_K^{(i)})^\top}{\sqrt{d_k}}\right)
              (X_{kv} W_V^{(i)} + b_V^{(i)})

    Parameters are as in :func:`multi_head_attention` (without ``W_o``, ``b_o``).

    Returns
    -------
    heads : shape (B, h, T, d_v)
    weights : shape (B, h, T, S)

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x, W = rng.normal(size=(2, 5, 8)), rng.normal(size=(8, 8))
    >>> heads, w = head_outputs(x, x, W, W, W, num_heads=4)
    >>> heads.shape, w.shape
    ((2, 4, 5, 2), (2, 4, 5, 5))
    """
    _check_mha(x_q, x_kv, W_q, W_k, W_v, None, (b_q, b_k, b_v, None), num_heads)
    q = split_heads(_linear(x_q, W_q, b_q), num_heads)  # (B, h, T, d_k)
    k = split_heads(_linear(x_kv, W_k, b_k), num_heads)  # (B, h, S, d_k)
    v = split_heads(_linear(x_kv, W_v, b_v), num_heads)  # (B, h, S, d_v)
    if mask is not None and mask.ndim == 3:  # (B, T or 1, S): one mask per sequence
        mask = mask[:, None]  # (B, 1, T or 1, S), the same for every head
    elif mask is not None and mask.ndim not in (2, 4):
        raise ShapeError(f"mask has shape {shape_str(mask)}; expected (T, S), (B, T, S) or (B, h, T, S) "
                         f"with 1 allowed for broadcasting")
    return scaled_dot_product_attention(q, k, v, mask=mask)  # (B, h, T, d_v), (B, h, T, S) over S


def multi_head_attention(x_q: Array, x_kv: Array, W_q: Array, W_k: Array, W_v: Array, W_o: Array,
                         b_q: Optional[Array] = None, b_k: Optional[Array] = None,
                         b_v: Optional[Array] = None, b_o: Optional[Array] = None,
                         *, num_heads: int, mask: Optional[Array] = None) -> tuple[Array, Array]:
    r"""Multi-head attention; returns the output and **every head's** weights.

    .. math::

        \operatorname{MHA}(X_q, X_{kv}) = \operatorname{Concat}_i(\operatorname{head}_i)\, W_O + b_O

    Parameters
    ----------
    x_q : shape (B, T, d_model)
        Queries' inputs. For self-attention pass the same array as ``x_kv``.
    x_kv : shape (B, S, d_model)
        Keys' and values' inputs.
    W_q, W_k : shape (d_model, h*d_k)
    W_v : shape (d_model, h*d_v)
    W_o : shape (h*d_v, d_out)
        Used as ``x @ W``; ``nn.Linear.weight`` is the transpose.
    b_q, b_k, b_v, b_o : optional, shapes (h*d_k,), (h*d_k,), (h*d_v,), (d_out,)
    num_heads : int
        ``h``; head ``i`` uses the columns ``i*d_k:(i+1)*d_k``.
    mask : optional, boolean ``True`` = may attend, or float (added to the scores)
        Shape (T, S), (B, T, S) (e.g. :func:`~attention_course.padding_mask`; the same
        for every head) or (B, h, T, S), with 1 where it broadcasts. A query with
        no allowed key gets weights 0, so its output is ``b_o``.

    Returns
    -------
    output : shape (B, T, d_out)
    weights : shape (B, h, T, S)
        Per-head weights; ``weights.mean(1)`` is torch's ``average_attn_weights=True``.

    Raises
    ------
    ShapeError
        (a ``ValueError``) naming the shapes, e.g. when ``h*d_k`` is not a multiple of ``num_heads``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(2, 5, 8))
    >>> W_q, W_k, W_v, W_o = rng.normal(size=(4, 8, 8))
    >>> out, w = multi_head_attention(x, x, W_q, W_k, W_v, W_o, num_heads=2)
    >>> out.shape, w.shape
    ((2, 5, 8), (2, 2, 5, 5))
    """
    _check_mha(x_q, x_kv, W_q, W_k, W_v, W_o, (b_q, b_k, b_v, b_o), num_heads)
    heads, weights = head_outputs(x_q, x_kv, W_q, W_k, W_v, b_q, b_k, b_v,
                                  num_heads=num_heads, mask=mask)  # (B, h, T, d_v), (B, h, T, S)
    concat = merge_heads(heads)  # (B, T, h*d_v)
    return _linear(concat, W_o, b_o), weights  # (B, T, d_out), (B, h, T, S)


class MultiHeadAttention(nn.Module):
    """A thin ``nn.Module`` over :func:`multi_head_attention` (no dropout, no stored maps).

    Parameters ``W_q, W_k, W_v, W_o`` have shape ``(d_model, d_model)`` (used as
    ``x @ W``), initialised Xavier-uniform from ``seed``; biases start at 0.
    ``forward(x_q, x_kv=None, mask=None)`` returns ``(output, weights (B, h, T, S))``;
    ``x_kv=None`` means self-attention.

    Examples
    --------
    >>> mha = MultiHeadAttention(d_model=8, num_heads=2, seed=0)
    >>> out, w = mha(torch.ones(3, 4, 8))
    >>> tuple(out.shape), tuple(w.shape)
    ((3, 4, 8), (3, 2, 4, 4))
    """

    def __init__(self, d_model: int, num_heads: int, bias: bool = True, *, seed: int = 0,
                 dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        if num_heads < 1 or d_model % num_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}: each "
                             f"head gets d_model / num_heads features, so d_model must be a "
                             f"multiple of num_heads")
        self.d_model, self.num_heads = d_model, num_heads
        g = torch.Generator().manual_seed(seed)
        bound = math.sqrt(6.0 / (2 * d_model))  # Xavier uniform for a square matrix
        for name in ("W_q", "W_k", "W_v", "W_o"):
            w = (2 * torch.rand(d_model, d_model, generator=g, dtype=torch.float64) - 1) * bound
            setattr(self, name, nn.Parameter(w.to(dtype)))
        for name in ("b_q", "b_k", "b_v", "b_o"):
            setattr(self, name, nn.Parameter(torch.zeros(d_model, dtype=dtype)) if bias else None)

    def forward(self, x_q: torch.Tensor, x_kv: Optional[torch.Tensor] = None,
                mask: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, torch.Tensor]:
        x_kv = x_q if x_kv is None else x_kv
        return multi_head_attention(x_q, x_kv, self.W_q, self.W_k, self.W_v, self.W_o, self.b_q,
                                    self.b_k, self.b_v, self.b_o, num_heads=self.num_heads, mask=mask)


def from_torch(mha: nn.MultiheadAttention) -> MultiHeadAttention:
    """Copy a ``torch.nn.MultiheadAttention`` into a :class:`MultiHeadAttention`.

    ``in_proj_weight`` (3d, d) is split into the query, key and value blocks and
    transposed; ``out_proj.weight`` is transposed. Dropout is not copied (ours has
    none): compare in eval mode or with ``dropout=0``. Remember to convert masks
    with :func:`mask_from_torch`.

    Examples
    --------
    >>> ref = nn.MultiheadAttention(8, 2, batch_first=True)
    >>> ours = from_torch(ref)
    >>> bool(torch.equal(ours.W_k, ref.in_proj_weight[8:16].T))
    True
    """
    if not mha._qkv_same_embed_dim or mha.bias_k is not None or mha.add_zero_attn:
        raise ValueError("from_torch supports nn.MultiheadAttention with kdim = vdim = embed_dim, "
                         "add_bias_kv=False and add_zero_attn=False")
    d, bias = mha.embed_dim, mha.in_proj_bias is not None
    ours = MultiHeadAttention(d, mha.num_heads, bias=bias, dtype=mha.in_proj_weight.dtype)
    with torch.no_grad():
        for name, w in zip(("W_q", "W_k", "W_v"), mha.in_proj_weight.chunk(3, dim=0)):  # (d, d) each
            getattr(ours, name).copy_(w.T)
        ours.W_o.copy_(mha.out_proj.weight.T)
        if bias:
            for name, b in zip(("b_q", "b_k", "b_v"), mha.in_proj_bias.chunk(3)):
                getattr(ours, name).copy_(b)
            ours.b_o.copy_(mha.out_proj.bias)
    return ours


def mask_from_torch(key_padding_mask: Optional[torch.Tensor] = None,
                    attn_mask: Optional[torch.Tensor] = None,
                    num_heads: Optional[int] = None) -> Optional[torch.Tensor]:
    """Convert ``nn.MultiheadAttention`` masks into this package's convention.

    torch's boolean masks mean ``True`` = **masked out**; ours mean ``True`` = may
    attend, so booleans are inverted. Float masks (added to the scores) mean the
    same in both and pass through. Mixed bool/float inputs give a float mask.

    Parameters
    ----------
    key_padding_mask : shape (B, S), optional
    attn_mask : shape (T, S) or (B*num_heads, T, S), optional
    num_heads : int, needed only for a 3-D ``attn_mask``

    Returns
    -------
    torch.Tensor of shape (B or 1, h or 1, T or 1, S), or None

    Examples
    --------
    >>> mask_from_torch(key_padding_mask=torch.tensor([[False, False, True]])).int()
    tensor([[[[1, 1, 0]]]], dtype=torch.int32)
    """
    parts = []
    if key_padding_mask is not None:
        parts.append(key_padding_mask[:, None, None, :])  # (B, 1, 1, S)
    if attn_mask is not None:
        if attn_mask.ndim == 2:
            parts.append(attn_mask[None, None])  # (1, 1, T, S)
        elif attn_mask.ndim == 3 and num_heads and attn_mask.shape[0] % num_heads == 0:
            parts.append(attn_mask.reshape(-1, num_heads, *attn_mask.shape[1:]))  # (B, h, T, S)
        else:
            raise ShapeError(f"attn_mask has shape {shape_str(attn_mask)} with num_heads={num_heads}; "
                             f"expected (T, S) or (B*num_heads, T, S)")
    if not parts:
        return None
    if all(p.dtype == torch.bool for p in parts):
        out = ~parts[0]
        for p in parts[1:]:
            out = out & ~p  # may attend only if no mask forbids it
        return out
    dtype = next(p.dtype for p in parts if p.dtype != torch.bool)
    floats = [torch.zeros(p.shape, dtype=dtype).masked_fill(p, float("-inf")) if p.dtype == torch.bool
              else p for p in parts]  # bool True = masked out -> -inf
    return sum(floats[1:], floats[0])


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
    return _swap(W.reshape(W.shape[0], num_heads, W.shape[1] // num_heads), 0, 1)  # (h, d_model, d_k)


def head_bilinear_forms(W_q: Array, W_k: Array, num_heads: int) -> Array:
    r"""Each head's bilinear form :math:`M_i = W_Q^{(i)} W_K^{(i)\top}`, shape (h, d_model, d_model).

    Without biases, head ``i``'s scores are :math:`x_q^\top M_i\, x_k / \sqrt{d_k}`,
    so :math:`M_i` (rank at most ``d_k``) is what the head really computes.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> M = head_bilinear_forms(rng.normal(size=(8, 8)), rng.normal(size=(8, 8)), 4)
    >>> M.shape, bilinear_ranks(M).tolist()
    ((4, 8, 8), [2, 2, 2, 2])
    """
    Wq_h = split_head_weights(W_q, num_heads)  # (h, d_model, d_k)
    Wk_h = split_head_weights(W_k, num_heads)  # (h, d_model, d_k)
    return Wq_h @ _swap(Wk_h, 1, 2)  # (h, d_model, d_model)


def bilinear_ranks(forms: Array, tol: Optional[float] = None) -> np.ndarray:
    """Numerical rank of each matrix in ``forms`` (h, n, n), via ``numpy.linalg.matrix_rank``."""
    return np.array([np.linalg.matrix_rank(M, tol=tol) for M in to_numpy(forms)])


def _orth(A: np.ndarray, rtol: float) -> np.ndarray:
    U, s, _ = np.linalg.svd(A, full_matrices=False)  # U (n, min(n, p))
    return U[:, : int((s > rtol * s.max()).sum()) if s.size and s.max() > 0 else 0]


def principal_angles(A: Array, B: Array, rtol: float = 1e-12) -> np.ndarray:
    r"""Principal angles (radians, ascending) between the column spaces of ``A`` and ``B``.

    With orthonormal bases :math:`Q_A, Q_B` (from SVDs), :math:`\cos\theta_i = \sigma_i(Q_A^\top Q_B)`.
    Small angles come from the sines (Knyazev & Argentati 2002) to stay accurate.
    0 = a shared direction, :math:`\pi/2` = orthogonal. Returns ``min(rank A, rank B)`` angles.

    Examples
    --------
    >>> A = np.eye(3)[:, :2]                                  # span(e1, e2)
    >>> B = np.array([[1.0, 0], [0, 1], [0, 1]])              # span(e1, e2 + e3)
    >>> np.degrees(principal_angles(A, B)).round(6)
    array([ 0., 45.])
    """
    A, B = np.asarray(to_numpy(A), dtype=float), np.asarray(to_numpy(B), dtype=float)
    if A.ndim != 2 or B.ndim != 2 or A.shape[0] != B.shape[0]:
        raise ShapeError(f"A has shape {A.shape} and B has shape {B.shape}; expected (n, p) and (n, q)")
    QA, QB = _orth(A, rtol), _orth(B, rtol)
    if QA.shape[1] < QB.shape[1]:
        QA, QB = QB, QA  # QA spans the larger space
    C = QA.T @ QB  # (p, q)
    cos = np.clip(np.linalg.svd(C, compute_uv=False), 0.0, 1.0)[::-1]  # ascending cosines
    sin = np.clip(np.linalg.svd(QB - QA @ C, compute_uv=False), 0.0, 1.0)  # descending sines
    theta = np.where(cos**2 >= 0.5, np.arcsin(sin), np.arccos(cos))  # descending angles
    return theta[::-1]


def head_subspace_angles(W: Array, num_heads: int, axis: int = 1) -> np.ndarray:
    """Principal angles between every pair of heads' subspaces, shape (h, h, d_k).

    For ``W_q``/``W_k``/``W_v`` (``axis=1``) a head's subspace is the span of its
    columns: the input directions it reads. For ``W_o`` use ``axis=0``: the span
    of a head's rows, the output directions it writes to.

    Examples
    --------
    >>> ang = head_subspace_angles(np.random.default_rng(0).normal(size=(16, 8)), 4)
    >>> ang.shape, float(abs(ang[0, 0]).max()) < 1e-7
    ((4, 4, 2), True)
    """
    blocks = to_numpy(split_head_weights(W, num_heads, axis))
    blocks = blocks if axis == 1 else np.swapaxes(blocks, 1, 2)  # (h, n, d_head): subspaces as columns
    return np.array([[principal_angles(a, b) for b in blocks] for a in blocks])


def head_contributions(heads: Array, W_o: Array) -> Array:
    r"""Each head's share of the output, :math:`\operatorname{head}_i W_O^{(i)}`, shape (B, h, T, d_out).

    ``head_contributions(heads, W_o).sum(1) + b_o`` equals the multi-head output:
    concatenate-then-project is a sum over heads.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> heads, W_o = rng.normal(size=(2, 4, 5, 3)), rng.normal(size=(12, 8))
    >>> c = head_contributions(heads, W_o)
    >>> c.shape, bool(np.allclose(c.sum(1), merge_heads(heads) @ W_o))
    ((2, 4, 5, 8), True)
    """
    if heads.ndim != 4 or W_o.ndim != 2 or W_o.shape[0] != heads.shape[1] * heads.shape[3]:
        raise ShapeError(f"heads has shape {shape_str(heads)} and W_o has shape {shape_str(W_o)}; "
                         f"expected heads (B, h, T, d_v) and W_o (h*d_v, d_out)")
    W_o_h = split_head_weights(W_o, heads.shape[1], axis=0)  # (h, d_v, d_out)
    return heads @ W_o_h[None]  # (B, h, T, d_v) @ (1, h, d_v, d_out) -> (B, h, T, d_out)


def reparametrize_head(W_q: Array, W_k: Array, R: Array, *, head: int, num_heads: int,
                       b_q: Optional[Array] = None, b_k: Optional[Array] = None) -> tuple:
    r"""Return copies with head ``head`` changed to :math:`W_Q R` and :math:`W_K R^{-\top}`.

    Since :math:`(W_Q R)(W_K R^{-\top})^\top = W_Q W_K^\top`, the head's scores do
    not change: a head's weights are not unique. Biases transform the same way.

    Returns
    -------
    (W_q, W_k, b_q, b_k), with ``None`` for biases not given.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> W_q, W_k, R = rng.normal(size=(8, 4)), rng.normal(size=(8, 4)), rng.normal(size=(2, 2))
    >>> W_q2, W_k2, _, _ = reparametrize_head(W_q, W_k, R, head=1, num_heads=2)
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
