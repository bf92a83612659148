r"""Rotary position embeddings (RoPE, Su et al. 2021), in both layouts.

Pair ``i`` of the features of the token at position ``m`` is turned by :math:`m\,\theta_i`,
:math:`\theta_i = b^{-2i/d}` (SmolLM2: ``b`` = 100,000), so a query at ``m`` and a key at ``n`` meet at
:math:`(m - n)\,\theta_i`. Pairs are ``(i, i + d/2)`` in the rotate-half layout (Hugging Face,
:func:`apply_rope`) and ``(2i, 2i + 1)`` interleaved (RoFormer, llama.cpp, :func:`apply_rope_interleaved`);
permuting W_Q's and W_K's outputs (:func:`~attention_course.models.smollm2.permute_for_llama_cpp`) maps one to the other.
"""

from __future__ import annotations

import torch

from ...core._backend import ShapeError, shape_str
from ...models.smollm2 import permute_for_llama_cpp, unpermute_from_llama_cpp

__all__ = ["apply_rope", "permute_for_llama_cpp", "unpermute_from_llama_cpp"]


def rope_frequencies(d_head: int, base: float, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    r""":math:`\theta_i = b^{-2i/d}` for :math:`i = 0, \dots, d/2 - 1`: shape (d/2,).

    Examples
    --------
    >>> rope_frequencies(4, 100.0, torch.float64)
    tensor([1.0000, 0.1000], dtype=torch.float64)
    """
    if d_head % 2:
        raise ValueError(f"d_head={d_head}; RoPE turns pairs of features, so it must be even")
    exponent = torch.arange(0, d_head, 2, dtype=torch.int64).to(dtype) / d_head  # (d/2,)
    return 1.0 / (base**exponent)  # (d/2,)


def rope_angles(positions: torch.Tensor, d_head: int, base: float,
                dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    r"""``(cos, sin)`` of :math:`m\,\theta_i` for each position ``m``, in the rotate-half layout: (T, d_head) each.

    Examples
    --------
    >>> cos, sin = rope_angles(torch.arange(3), 4, 100.0)
    >>> tuple(cos.shape), sin[1].tolist()                  # position 1: sin(1), sin(0.1), twice
    ((3, 4), [0.8414709568023682, 0.0998334214091301, 0.8414709568023682, 0.0998334214091301])
    """
    angles = positions.to(dtype)[:, None] * rope_frequencies(d_head, base, dtype)[None, :]  # (T, d/2)
    angles = torch.cat([angles, angles], dim=-1)  # (T, d): feature i and i + d/2 share an angle
    return angles.cos(), angles.sin()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """``(-x2, x1)`` for the halves ``x1 = x[..., :d/2]``, ``x2 = x[..., d/2:]``.

    Examples
    --------
    >>> rotate_half(torch.tensor([1.0, 2.0, 3.0, 4.0]))
    tensor([-3., -4.,  1.,  2.])
    """
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)  # (..., d)


def _check(x: torch.Tensor, positions: torch.Tensor) -> None:
    if x.ndim < 2 or positions.shape != x.shape[-2:-1] or x.shape[-1] % 2:
        raise ShapeError(f"x has shape {shape_str(x)} and positions {shape_str(positions)}; expected x (..., T, d_head) "
                         f"with an even d_head and positions (T,)")


def apply_rope(x: torch.Tensor, positions: torch.Tensor, base: float) -> torch.Tensor:
    r"""Rotate-half RoPE: :math:`x \cos(m\theta) + \operatorname{rotate\_half}(x) \sin(m\theta)`.

    ``x`` (..., T, d_head), usually (B, h, T, d_head); ``positions`` (T,) integers. Returns
    ``x``'s shape and dtype.

    Examples
    --------
    >>> q = torch.tensor([[1.0, 0.0, 0.0, 0.0]])            # T = 1, d_head = 4
    >>> apply_rope(q, torch.tensor([0]), 100.0)               # position 0: no rotation
    tensor([[1., 0., 0., 0.]])
    """
    _check(x, positions)
    cos, sin = rope_angles(positions, x.shape[-1], base, x.dtype)  # (T, d_head) each
    return x * cos + rotate_half(x) * sin  # (..., T, d_head)


def apply_rope_interleaved(x: torch.Tensor, positions: torch.Tensor, base: float) -> torch.Tensor:
    r"""Interleaved RoPE (RoFormer, llama.cpp): pair ``(2i, 2i+1)`` turned by :math:`m\,\theta_i`.

    Examples
    --------
    >>> x = torch.randn(2, 5, 8, dtype=torch.float64)
    >>> ours = apply_rope(x, torch.arange(5), 1e4)
    >>> theirs = apply_rope_interleaved(permute_for_llama_cpp(x.transpose(0, -1), 1).transpose(0, -1), torch.arange(5), 1e4)
    >>> torch.allclose(permute_for_llama_cpp(ours.transpose(0, -1), 1).transpose(0, -1), theirs)
    True
    """
    _check(x, positions)
    d = x.shape[-1]
    angles = positions.to(x.dtype)[:, None] * rope_frequencies(d, base, x.dtype)[None, :]  # (T, d/2)
    cos, sin = angles.cos(), angles.sin()
    pairs = x.reshape(*x.shape[:-1], d // 2, 2)  # (..., T, d/2, 2)
    x0, x1 = pairs[..., 0], pairs[..., 1]  # (..., T, d/2) each
    out = torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1)  # (..., T, d/2, 2)
    return out.reshape(x.shape)  # (..., T, d)
