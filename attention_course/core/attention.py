r"""Scaled dot-product attention, written out step by step.

.. math::

    \operatorname{Attention}(Q, K, V) = \operatorname{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right) V

Shape legend (as in the PyTorch SDPA docs)::

    q        (..., T, d_k)   T queries
    k        (..., S, d_k)   S keys
    v        (..., S, d_v)   one value per key
    mask     broadcastable to (..., T, S)
    weights  (..., T, S)     each row sums to 1 (over the S keys)
    output   (..., T, d_v)

``...`` is any number of batch and head dimensions, broadcast as in ``matmul``.

Masks (the package's one convention, as in ``F.scaled_dot_product_attention``): boolean
``True`` = query ``i`` *may* attend to key ``j``; a float mask is *added* to the scores. A query
with no allowed key gets weights and output of exactly 0 (torch's math reference gives NaN), so
such a row does *not* sum to 1. Every function takes numpy or torch and returns the same kind.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Optional, Union

import numpy as np
import torch

from ._backend import Array, ShapeError, check_float, is_torch, shape_str

__all__ = ["SCALES", "resolve_scale", "softmax", "scaled_dot_product_attention", "causal_mask", "padding_mask"]

#: Named score scales c(d_k): the essay's 1/sqrt(d_k), no scale, and muP's 1/d_k (chapter 6).
SCALES = ("sqrt", "none", "mup")
Scale = Union[str, float]


def resolve_scale(d_k: int, scale: Scale = "sqrt") -> float:
    r"""Return the factor :math:`c(d_k)` that multiplies the scores ``q . k``.

    Parameters
    ----------
    d_k : int
        Query/key dimension, a positive integer.
    scale : {"sqrt", "none", "mup"} or float, default "sqrt"
        ``"sqrt"`` gives :math:`1/\sqrt{d_k}`, ``"none"`` gives 1, ``"mup"`` gives
        :math:`1/d_k`; a positive number is returned unchanged.

    Raises
    ------
    ValueError
        For a non-positive or non-integer ``d_k``, an unknown scale name, or a
        non-positive number.

    Examples
    --------
    >>> [resolve_scale(64, s) for s in ("sqrt", "none", "mup", 0.5)]
    [0.125, 1.0, 0.015625, 0.5]
    """
    if isinstance(d_k, bool) or int(d_k) != d_k or d_k < 1:
        raise ValueError(f"d_k={d_k!r}; expected a positive integer dimension")
    if isinstance(scale, str):
        if scale == "sqrt":
            return 1.0 / math.sqrt(d_k)
        if scale == "none":
            return 1.0
        if scale == "mup":
            return 1.0 / d_k
        raise ValueError(f"unknown scale {scale!r}; expected one of {SCALES} or a positive number")
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.number)) or not (
        scale > 0 and math.isfinite(scale)
    ):
        raise ValueError(f"scale={scale!r}; expected one of {SCALES} or a positive finite number")
    return float(scale)



def _broadcast_or_raise(name: str, shape: tuple, target: tuple, expected: str) -> None:
    """Raise :class:`ShapeError` unless ``shape`` broadcasts to exactly ``target``."""
    try:
        ok = np.broadcast_shapes(tuple(shape), tuple(target)) == tuple(target)
    except ValueError:
        ok = False
    if not ok:
        raise ShapeError(
            f"{name} has shape {tuple(int(s) for s in shape)} which does not broadcast "
            f"to the scores' shape {tuple(int(s) for s in target)}; expected {expected}"
        )


def _apply_mask(x: Array, mask: Optional[Array]) -> Array:
    """Return ``x`` with a boolean mask applied as ``-inf`` or a float mask added."""
    if mask is None:
        return x
    if is_torch(x) and not is_torch(mask):
        mask = torch.as_tensor(np.asarray(mask), device=x.device)
    elif not is_torch(x) and is_torch(mask):
        mask = mask.detach().cpu().numpy()
    _broadcast_or_raise("mask", tuple(mask.shape), tuple(x.shape), "a shape broadcastable to it")
    if is_torch(x):
        if mask.dtype == torch.bool:
            return x.masked_fill(~mask, float("-inf"))
        if not mask.is_floating_point():
            raise ShapeError(
                f"mask has dtype {mask.dtype} and shape {shape_str(mask)}; expected bool "
                f"(True = may attend) or a float mask that is added to the scores"
            )
        return x + mask.to(x.dtype)
    mask = np.asarray(mask)
    if mask.dtype == np.bool_:
        return np.where(mask, x, -np.inf)
    if not np.issubdtype(mask.dtype, np.floating):
        raise ShapeError(
            f"mask has dtype {mask.dtype} and shape {shape_str(mask)}; expected bool "
            f"(True = may attend) or a float mask that is added to the scores"
        )
    return x + mask


def softmax(x: Array, axis: int = -1, mask: Optional[Array] = None) -> Array:
    r"""Numerically stable softmax along ``axis``, with an optional mask.

    .. math::

        \operatorname{softmax}(x)_j = \frac{e^{x_j - m}}{\sum_{j'} e^{x_{j'} - m}},
        \qquad m = \max_{j'} x_{j'}

    Parameters
    ----------
    x : array or tensor, float
        Logits of any shape.
    axis : int, default -1
    mask : array or tensor, optional
        Broadcastable to ``x.shape``; boolean (``True`` = keep) or float (added).
        A slice with every entry masked gets weights of exactly 0.

    Returns
    -------
    array or tensor
        Same shape and library as ``x``; non-negative; slices sum to 1.

    Examples
    --------
    >>> import numpy as np
    >>> softmax(np.array([1.0, 2.0, 3.0])).round(4)
    array([0.09  , 0.2447, 0.6652])
    >>> softmax(np.array([1000.0, 1000.0]))          # no overflow
    array([0.5, 0.5])
    >>> softmax(np.array([1.0, 2.0, 3.0]), mask=np.array([True, True, False])).round(4)
    array([0.2689, 0.7311, 0.    ])
    """
    check_float("x", x)
    z = _apply_mask(x, mask)
    if is_torch(z):
        m = z.detach().amax(dim=axis, keepdim=True)  # row max; constant for autograd
        m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))  # fully masked row -> 0
        e = torch.exp(z - m)  # masked entries: exp(-inf) = 0
        s = e.sum(dim=axis, keepdim=True)
        return e / torch.where(s > 0, s, torch.ones_like(s))
    m = np.max(z, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(z - m)
    s = e.sum(axis=axis, keepdims=True)
    return e / np.where(s > 0, s, 1.0)


def _check_qkv(q: Array, k: Array, v: Array) -> None:
    """Validate the types, dtypes and shapes of q, k and v, naming shapes in errors."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_float(name, t)
        if t.ndim < 2:
            raise ShapeError(
                f"{name} has shape {shape_str(t)}; expected at least 2 dimensions "
                f"(..., length, features)"
            )
    kinds = {is_torch(t) for t in (q, k, v)}
    if len(kinds) > 1:
        raise ShapeError("q, k and v must all be numpy arrays or all be torch tensors")
    if is_torch(q) and not (q.dtype == k.dtype == v.dtype):
        raise ShapeError(
            f"q, k and v have dtypes {q.dtype}, {k.dtype}, {v.dtype}; expected one dtype"
        )
    d_k = q.shape[-1]
    if k.shape[-1] != d_k:
        raise ShapeError(
            f"k has shape {shape_str(k)} but q has shape {shape_str(q)} (d_k={d_k}); "
            f"expected k of shape (..., S, {d_k})"
        )
    S = k.shape[-2]
    if v.shape[-2] != S:
        raise ShapeError(
            f"v has shape {shape_str(v)} but k has shape {shape_str(k)} (S={S} keys); "
            f"expected v of shape (..., {S}, d_v): one value per key"
        )
    try:
        np.broadcast_shapes(tuple(q.shape[:-2]), tuple(k.shape[:-2]), tuple(v.shape[:-2]))
    except ValueError:
        raise ShapeError(
            f"batch dimensions of q {shape_str(q)}, k {shape_str(k)} and v {shape_str(v)} "
            f"do not broadcast"
        ) from None


def scaled_dot_product_attention(
    q: Array,
    k: Array,
    v: Array,
    mask: Optional[Array] = None,
    scale: Optional[float] = None,
) -> tuple[Array, Array]:
    r"""Scaled dot-product attention; returns the output **and** the weights.

    .. math::

        S = \frac{QK^\top}{\sqrt{d_k}}, \qquad A = \operatorname{softmax}_{\text{rows}}(S),
        \qquad O = AV

    Parameters
    ----------
    q : array or tensor, shape (..., T, d_k)
    k : array or tensor, shape (..., S, d_k)
    v : array or tensor, shape (..., S, d_v)
    mask : array or tensor, optional, broadcastable to (..., T, S)
        Boolean (``True`` = may attend) or float (added to the scores). A query with
        every key masked gets weights 0 and output 0.
    scale : float, optional
        Multiplies the scores. Default ``1 / sqrt(d_k)``.

    Returns
    -------
    output : array or tensor, shape (..., T, d_v)
    weights : array or tensor, shape (..., T, S)
        Attention weights; each unmasked row is a probability distribution.

    Raises
    ------
    ShapeError
        (a ``ValueError``) for mismatched ``d_k`` or ``S``, a mask that does not
        broadcast to ``(..., T, S)``, non-float inputs, or mixed numpy/torch.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = rng.normal(size=(2, 4, 8)), rng.normal(size=(2, 6, 8)), rng.normal(size=(2, 6, 3))
    >>> out, w = scaled_dot_product_attention(q, k, v)
    >>> out.shape, w.shape
    ((2, 4, 3), (2, 4, 6))
    >>> w.sum(axis=-1).round(6)
    array([[1., 1., 1., 1.],
           [1., 1., 1., 1.]])
    """
    _check_qkv(q, k, v)
    T, d_k = q.shape[-2], q.shape[-1]
    S = k.shape[-2]
    if scale is None:
        scale = resolve_scale(d_k)
    k_t = k.transpose(-2, -1) if is_torch(k) else np.swapaxes(k, -2, -1)  # (..., d_k, S)
    scores = (q @ k_t) * scale  # $S = QK^T / \sqrt{d_k}$   (..., T, S)
    if mask is not None:
        expected = f"(..., {T}, {S}) for T={T} queries and S={S} keys"
        _broadcast_or_raise("mask", tuple(mask.shape), tuple(scores.shape), expected)
    weights = softmax(scores, axis=-1, mask=mask)  # (..., T, S), normalised over S
    output = weights @ v  # $O = AV$   (..., T, d_v)
    return output, weights


def causal_mask(T: int, S: Optional[int] = None) -> np.ndarray:
    """Boolean causal mask: query ``i`` may attend to keys ``j <= i``.

    Top-left aligned, like ``is_causal=True`` in torch's SDPA, also when ``T != S``.

    Parameters
    ----------
    T : int
        Number of queries.
    S : int, optional
        Number of keys; defaults to ``T``.

    Returns
    -------
    numpy.ndarray of bool, shape (T, S)
        ``True`` = may attend. Works with torch inputs too (converted on use).

    Examples
    --------
    >>> causal_mask(3).astype(int)
    array([[1, 0, 0],
           [1, 1, 0],
           [1, 1, 1]])
    >>> causal_mask(2, 4).astype(int)
    array([[1, 0, 0, 0],
           [1, 1, 0, 0]])
    """
    S = T if S is None else S
    for name, n in (("T", T), ("S", S)):
        if int(n) != n or n < 1:
            raise ValueError(f"{name}={n!r}; expected a positive integer length")
    return np.tril(np.ones((int(T), int(S)), dtype=bool))


def padding_mask(lengths: Sequence[int], S: int) -> np.ndarray:
    """Boolean key-padding mask for a batch of sequences of different lengths.

    Every query of sequence ``b`` may attend to the keys ``j < lengths[b]``.

    Parameters
    ----------
    lengths : sequence of int, shape (B,)
        Real length of each sequence, ``0 <= length <= S`` (0 gives zero weights).
    S : int
        Padded length (number of keys).

    Returns
    -------
    numpy.ndarray of bool, shape (B, 1, S)
        ``True`` = may attend. The middle axis broadcasts over the ``T``
        queries; for head-split scores of shape ``(B, h, T, S)`` use
        ``mask[:, None]``.

    Examples
    --------
    >>> padding_mask([3, 1], 4).astype(int)
    array([[[1, 1, 1, 0]],
    <BLANKLINE>
           [[1, 0, 0, 0]]])
    """
    lengths_arr = np.asarray(lengths)
    if lengths_arr.ndim != 1 or not np.issubdtype(lengths_arr.dtype, np.integer):
        raise ValueError(
            f"lengths has shape {lengths_arr.shape} and dtype {lengths_arr.dtype}; "
            f"expected a 1-D sequence of integers (one length per sequence)"
        )
    if np.any(lengths_arr < 0) or np.any(lengths_arr > S):
        raise ValueError(f"lengths {lengths_arr.tolist()} must lie between 0 and S={S}")
    mask = np.arange(S)[None, :] < lengths_arr[:, None]  # (B, S)
    return mask[:, None, :]  # (B, 1, S)
