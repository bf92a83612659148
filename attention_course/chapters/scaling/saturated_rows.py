r"""One head's attention with and without the :math:`1/\sqrt{d_k}`, and how saturated its rows are (chapter 6).

A row is *saturated* when its largest weight exceeds a threshold (0.99). :func:`swapped_softmax`
keeps a softmax's forward pass and swaps its backward pass (the backward-swap test).
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
import torch

from ...core._backend import Array, ShapeError, shape_str, to_numpy
from ...core.attention import softmax

__all__ = ["scale_pair", "saturated_share", "swapped_softmax"]


def scale_pair(q: Array, k: Array, valid: Optional[Array] = None) -> tuple[np.ndarray, np.ndarray]:
    r"""Attention weights of one head with the :math:`1/\sqrt{d_k}` and without it.

    Parameters
    ----------
    q : array, shape (..., T, d_k)
    k : array, shape (..., S, d_k)
    valid : array of bool, shape (..., S), optional
        ``True`` = a key that may be attended; masked keys get weight 0.

    Returns
    -------
    scaled, unscaled : np.ndarray (float64), shape (..., T, S)

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> q, k = rng.normal(size=(5, 64)), rng.normal(size=(5, 64))
    >>> scaled, unscaled = scale_pair(q, k)
    >>> scaled.shape, bool(unscaled.max(-1).mean() > scaled.max(-1).mean())
    ((5, 5), True)
    >>> scale_pair(q, k[:, :32])
    Traceback (most recent call last):
    ...
    attention_course.core._backend.ShapeError: q has shape (5, 64) and k (5, 32); expected (..., T, d_k) and (..., S, d_k)
    """
    q, k = np.asarray(to_numpy(q), dtype=np.float64), np.asarray(to_numpy(k), dtype=np.float64)
    if q.ndim < 2 or k.ndim < 2 or q.shape[-1] != k.shape[-1]:
        raise ShapeError(f"q has shape {shape_str(q)} and k {shape_str(k)}; expected (..., T, d_k) and (..., S, d_k)")
    s = q @ np.swapaxes(k, -1, -2)  # (..., T, S): the raw dot products q.k
    mask = None if valid is None else np.asarray(to_numpy(valid), dtype=bool)[..., None, :]  # (..., 1, S)
    scaled = softmax(s / math.sqrt(q.shape[-1]), axis=-1, mask=mask)  # (..., T, S), over the keys
    unscaled = softmax(s, axis=-1, mask=mask)  # (..., T, S)
    return scaled, unscaled


def saturated_share(weights: Array, threshold: float = 0.99) -> float:
    """Share of rows of ``weights`` (..., T, S) whose largest weight exceeds ``threshold``.

    Examples
    --------
    >>> saturated_share(np.array([[0.995, 0.005], [0.6, 0.4]]))
    0.5
    """
    w = np.asarray(to_numpy(weights), dtype=np.float64)
    return float((w.max(axis=-1) > threshold).mean())


#: A row is saturated when its largest weight exceeds this (the ``"saturated"`` backward).
SATURATED = 0.99
#: What :func:`swapped_softmax` passes back: the true gradient, the tempered one, one's
#: direction with the other's row norm, or the tempered one on saturated rows only.
BACKWARDS = ("true", "tempered", "size", "direction", "saturated")


def _masked_softmax(s: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Softmax over the last axis, masked keys (``False``) weight 0."""
    neg = torch.finfo(s.dtype).min
    return torch.softmax(s.masked_fill(~mask, neg), dim=-1).masked_fill(~mask, 0.0)  # (..., T, S), over S


def _softmax_vjp(p: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    r"""The softmax's backward pass :math:`p \odot (g - \langle p, g\rangle)`, row by row."""
    return p * (g - (p * g).sum(-1, keepdim=True))  # (..., T, S)


def _row_norm(x: torch.Tensor, tiny: float) -> torch.Tensor:
    """Norm of each row, (..., T, 1), without float32 underflow (a saturated row's entries reach 1e-25)."""
    m = x.abs().amax(-1, keepdim=True)  # (..., T, 1)
    return m * torch.linalg.vector_norm(x / m.clamp_min(tiny), dim=-1, keepdim=True)


class _SwappedSoftmax(torch.autograd.Function):
    """Forward: the masked softmax of ``s``. Backward: see :func:`swapped_softmax`."""

    @staticmethod
    def forward(ctx, s: torch.Tensor, mask: torch.Tensor, tau: float, backward: str) -> torch.Tensor:
        p = _masked_softmax(s, mask)  # (..., T, S)
        ctx.save_for_backward(p, _masked_softmax(s * tau, mask))
        ctx.backward_kind = backward
        return p

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        p, p_tau = ctx.saved_tensors
        true, tempered = _softmax_vjp(p, g), _softmax_vjp(p_tau, g)  # each (..., T, S)
        kind = ctx.backward_kind
        if kind == "true":
            out = true
        elif kind == "tempered":
            out = tempered
        elif kind == "saturated":  # tempered where the row's largest weight exceeds SATURATED, true elsewhere
            out = torch.where(p.amax(-1, keepdim=True) > SATURATED, tempered, true)  # (..., T, S)
        else:
            tiny = torch.finfo(g.dtype).tiny  # a zero row stays zero
            n, n_tau = _row_norm(true, tiny), _row_norm(tempered, tiny)  # (..., T, 1)
            if kind == "size":  # unit row first: n_tau / n alone can overflow when n is near 0
                out = true / n.clamp_min(tiny) * n_tau
            else:
                out = tempered * (n / n_tau.clamp_min(tiny))
        return out, None, None, None


def swapped_softmax(s: torch.Tensor, mask: Optional[torch.Tensor] = None, tau: float = 1.0,
                    backward: str = "tempered") -> torch.Tensor:
    r"""Softmax of the scores on the way forward; another softmax's gradient on the way back.

    With :math:`g = \partial\mathcal{L}/\partial p` and :math:`J(p)\,g = p \odot (g - \langle p, g\rangle)` per row:

    .. math::

        \begin{aligned}
        \text{true:}\quad & \delta = J(p)\,g, \qquad
        \text{tempered:}\quad \delta_\tau = J(p_\tau)\,g,
        \quad p_\tau = \operatorname{softmax}(\tau s), \\
        \text{size:}\quad & \delta\, \lVert\delta_\tau\rVert / \lVert\delta\rVert, \qquad
        \text{direction:}\quad \delta_\tau\, \lVert\delta\rVert / \lVert\delta_\tau\rVert , \\
        \text{saturated:}\quad & \delta_\tau \text{ on rows with } \max_j p_j > 0.99
        \text{ (:data:`SATURATED`)}, \ \delta \text{ on the others}.
        \end{aligned}

    "tempered" omits the chain factor :math:`\tau`: with :math:`\tau = 1/\sqrt{d_k}` it is the scaled model's
    softmax gradient on the unscaled model's rows. With :math:`\tau = 1` every kind is the true gradient.

    Parameters
    ----------
    s : torch.Tensor, shape (..., T, S)
    mask : torch.BoolTensor, optional, broadcastable to (..., T, S)
        ``True`` = may attend (at least one key per row). Masked keys get weight 0 and gradient 0.
    tau : float
    backward : {"true", "tempered", "size", "direction", "saturated"}

    Returns
    -------
    torch.Tensor, shape (..., T, S)
        The attention weights :math:`p`, whatever ``backward``.

    Examples
    --------
    >>> s = torch.tensor([[8.0, 0.0, -8.0]], requires_grad=True)
    >>> g = torch.tensor([[0.0, 1.0, 0.0]])                      # the loss wants key 1
    >>> for kind in BACKWARDS:
    ...     (swapped_softmax(s, tau=1 / 8, backward=kind) * g).sum().backward()
    ...     print(kind, [round(x, 4) + 0.0 for x in s.grad[0].tolist()]); s.grad = None
    true [-0.0003, 0.0003, 0.0]
    tempered [-0.1628, 0.1848, -0.022]
    size [-0.1749, 0.1749, 0.0]
    direction [-0.0003, 0.0004, 0.0]
    saturated [-0.1628, 0.1848, -0.022]
    """
    if backward not in BACKWARDS:
        raise ValueError(f"backward={backward!r}; expected one of {BACKWARDS}")
    if s.ndim < 2:
        raise ShapeError(f"s has shape {shape_str(s)}; expected (..., T, S)")
    m = torch.ones_like(s, dtype=torch.bool) if mask is None else torch.as_tensor(mask, dtype=torch.bool)
    try:
        m = m.expand_as(s)  # (..., T, S)
    except RuntimeError:
        raise ShapeError(f"mask has shape {shape_str(m)}; expected a shape that broadcasts to s's {shape_str(s)}") from None
    return _SwappedSoftmax.apply(s, m, float(tau), backward)
