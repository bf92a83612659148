r"""The hook point of the course's models: replace what a layer's heads output.

``override(q, k, v, weights, layer)``, with q, k, v ``(B, h, T or S, d)`` and weights
``(B, h, T, S)``, is called once per layer and returns the heads' output ``(B, h, T, d_v)`` in place
of ``weights @ v``, or ``None`` to keep it. The model still returns its own weights.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Optional

import torch

from ..core._backend import ShapeError, shape_str
from ..core.multihead import AttentionStep

__all__ = ["AttentionOverride", "attend_with_override"]

#: ``override(q, k, v, weights, layer) -> heads (B, h, T, d_v) or None`` (``None``: keep ``weights @ v``).
AttentionOverride = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int], Optional[torch.Tensor]]


def attend_with_override(attend: AttentionStep, override: Optional[AttentionOverride],
                         layer: int) -> AttentionStep:
    """The attention step ``attend`` of layer ``layer``, with ``override`` applied to its output.

    Returns ``attend`` itself when ``override`` is None; the weights are left as they were.

    Examples
    --------
    >>> from attention_course.core.attention import scaled_dot_product_attention as sdpa
    >>> q = k = v = torch.eye(2).reshape(1, 1, 2, 2)               # (B, h, T, d_k)
    >>> uniform = lambda q, k, v, w, layer: torch.full_like(w, 0.5) @ v
    >>> heads, w = attend_with_override(sdpa, uniform, layer=0)(q, k, v)
    >>> heads[0, 0].tolist(), bool(torch.equal(w, sdpa(q, k, v)[1]))
    ([[0.5, 0.5], [0.5, 0.5]], True)
    """
    if override is None:
        return attend

    def step(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Optional[torch.Tensor] = None,
             scale: Optional[float] = None) -> tuple[torch.Tensor, torch.Tensor]:
        heads, weights = attend(q, k, v, mask=mask, scale=scale)  # (B, h, T, d_v), (B, h, T, S)
        replaced = override(q, k, v, weights, layer)  # (B, h, T, d_v) or None
        if replaced is None:
            return heads, weights
        if tuple(replaced.shape) != tuple(heads.shape):
            raise ShapeError(f"the attention override of layer {layer} returned shape {shape_str(replaced)}; "
                             f"expected the heads' output {shape_str(heads)} (B, h, T, d_v)")
        return replaced, weights

    return step
