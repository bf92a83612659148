r"""Multi-head attention from scratch: split, attend per head, concatenate, project.

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

The attention step is a parameter, ``attend(q, k, v, mask=..., scale=...) -> (heads, weights)``:
the course's models use it as their hook point. Masks: boolean ``True`` = *may attend*;
``nn.MultiheadAttention`` uses the opposite convention (its ``True`` = masked out).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Optional

import numpy as np
import torch
from torch import nn

from ._backend import Array, ShapeError, check_float, is_torch, shape_str
from .attention import scaled_dot_product_attention

__all__ = [
    "split_heads", "merge_heads", "head_outputs", "multi_head_attention", "head_contributions",
    "MultiHeadAttention", "from_torch", ]  # fmt: skip

#: The attention step: ``attend(q, k, v, mask=mask, scale=scale) -> (heads, weights)`` with q, k
#: (B, h, T or S, d_k), v (B, h, S, d_v), heads (B, h, T, d_v) and weights (B, h, T, S).
AttentionStep = Callable[..., tuple[Array, Array]]


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
                 *, num_heads: int, mask: Optional[Array] = None, scale: Optional[float] = None,
                 attend: Optional[AttentionStep] = None) -> tuple[Array, Array]:
    r"""Every head's attention output, before concatenation and ``W_o``.

    .. math:: \operatorname{head}_i = \operatorname{softmax}\!\left(
              \frac{(X_q W_Q^{(i)} + b_Q^{(i)})(X_{kv} W_K^{(i)} + b_K^{(i)})^\top}{\sqrt{d_k}}\right)
              (X_{kv} W_V^{(i)} + b_V^{(i)})

    Parameters are as in :func:`multi_head_attention` (without ``W_o``, ``b_o`` and ``head_mask``).

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
    return _head_outputs(x_q, x_kv, W_q, W_k, W_v, b_q, b_k, b_v, num_heads, mask, scale, attend)


def _head_outputs(x_q, x_kv, W_q, W_k, W_v, b_q, b_k, b_v, num_heads, mask, scale, attend):
    """:func:`head_outputs` after its checks."""
    q = split_heads(_linear(x_q, W_q, b_q), num_heads)  # (B, h, T, d_k)
    k = split_heads(_linear(x_kv, W_k, b_k), num_heads)  # (B, h, S, d_k)
    v = split_heads(_linear(x_kv, W_v, b_v), num_heads)  # (B, h, S, d_v)
    if mask is not None and mask.ndim == 3:  # (B, T or 1, S): one mask per sequence
        mask = mask[:, None]  # (B, 1, T or 1, S), the same for every head
    elif mask is not None and mask.ndim not in (2, 4):
        raise ShapeError(f"mask has shape {shape_str(mask)}; expected (T, S), (B, T, S) or (B, h, T, S) "
                         f"with 1 allowed for broadcasting")
    attend = scaled_dot_product_attention if attend is None else attend
    return attend(q, k, v, mask=mask, scale=scale)  # (B, h, T, d_v), (B, h, T, S) over S


def multi_head_attention(x_q: Array, x_kv: Array, W_q: Array, W_k: Array, W_v: Array, W_o: Array,
                         b_q: Optional[Array] = None, b_k: Optional[Array] = None,
                         b_v: Optional[Array] = None, b_o: Optional[Array] = None,
                         *, num_heads: int, mask: Optional[Array] = None, scale: Optional[float] = None,
                         head_mask: Optional[Array] = None, attend: Optional[AttentionStep] = None
                         ) -> tuple[Array, Array]:
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
        Shape (T, S), (B, T, S) or (B, h, T, S). A query with no allowed key outputs ``b_o``.
    scale : float, optional
        Multiplies the scores; default :math:`1/\sqrt{d_k}`.
    head_mask : shape (h,), optional
        Multiplies each head's output before ``W_o``; 0 removes the head (an ablation).
    attend : callable, optional
        The attention step, ``attend(q, k, v, mask=mask, scale=scale) -> (heads, weights)``
        with q (B, h, T, d_k), k (B, h, S, d_k), v (B, h, S, d_v); default
        :func:`~attention_course.core.attention.scaled_dot_product_attention`.

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
    if head_mask is not None and tuple(head_mask.shape) != (num_heads,):
        raise ShapeError(f"head_mask has shape {shape_str(head_mask)}; expected ({num_heads},), one "
                         f"factor per head")
    heads, weights = _head_outputs(x_q, x_kv, W_q, W_k, W_v, b_q, b_k, b_v, num_heads, mask, scale,
                                   attend)  # (B, h, T, d_v), (B, h, T, S)
    if head_mask is not None:
        m = head_mask.to(heads.dtype) if is_torch(head_mask) else np.asarray(head_mask, dtype=heads.dtype)
        heads = heads * m[None, :, None, None]  # (B, h, T, d_v): a removed head's output is 0
    concat = merge_heads(heads)  # (B, T, h*d_v)
    return _linear(concat, W_o, b_o), weights  # (B, T, d_out), (B, h, T, S)


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
    _, h, _, d_v = heads.shape  # (B, h, T, d_v)
    W_o_h = W_o.reshape(h, d_v, W_o.shape[1])  # (h, d_v, d_out): head i owns rows i*d_v:(i+1)*d_v
    return heads @ W_o_h[None]  # (B, h, T, d_v) @ (1, h, d_v, d_out) -> (B, h, T, d_out)


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

    Dropout is not copied: compare in eval mode, and invert torch's boolean masks (its ``True`` = masked out).

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


