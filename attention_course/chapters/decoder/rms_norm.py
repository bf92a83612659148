r"""RMSNorm (Zhang and Sennrich 2019): LayerNorm without the centring and the shift, used by Llama-style decoders.

.. math::

    \operatorname{RMSNorm}(x) = g \odot \frac{x}{\sqrt{\tfrac{1}{d}\sum_i x_i^2 + \varepsilon}}
"""

from __future__ import annotations

import torch

from ...core._backend import ShapeError, shape_str

__all__ = ["rms_norm"]


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm over the last axis: ``x`` (..., d), ``weight`` (d,) -> (..., d), in ``x``'s dtype.

    Examples
    --------
    >>> x = torch.tensor([[3.0, -4.0]])                     # mean square 12.5
    >>> rms_norm(x, torch.ones(2), eps=0.0)                   # x / sqrt(12.5)
    tensor([[ 0.8485, -1.1314]])
    """
    if weight.shape != x.shape[-1:]:
        raise ShapeError(f"weight has shape {shape_str(weight)} but x has shape {shape_str(x)}; expected ({x.shape[-1]},)")
    mean_square = x.pow(2).mean(dim=-1, keepdim=True)  # (..., 1): each token's own features
    return x * torch.rsqrt(mean_square + eps) * weight  # (..., d)
