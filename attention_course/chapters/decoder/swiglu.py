r"""The SwiGLU feed-forward block (Shazeer 2020) of Llama-style decoders, no biases:
:math:`\operatorname{FFN}(x) = \big(\operatorname{SiLU}(x W_\text{gate}) \odot x W_\text{up}\big) W_\text{down}`,
:math:`\operatorname{SiLU}(z) = z\,\sigma(z)`.
"""

from __future__ import annotations

import torch

__all__ = ["silu", "swiglu"]


def silu(z: torch.Tensor) -> torch.Tensor:
    """SiLU (swish): ``z * sigmoid(z)``.

    Examples
    --------
    >>> silu(torch.tensor([0.0, 1.0]))
    tensor([0.0000, 0.7311])
    """
    return z * torch.sigmoid(z)


def swiglu(x: torch.Tensor, layer) -> torch.Tensor:
    """``(silu(x @ W_gate) * (x @ W_up)) @ W_down``: (..., d) -> (..., d), with ``layer``'s matrices.

    Examples
    --------
    >>> from attention_course.chapters.decoder.random_weights import random_decoder
    >>> w = random_decoder(0)
    >>> tuple(swiglu(torch.ones(2, 3, w.config.d_model, dtype=torch.float64), w.layers[0]).shape)
    (2, 3, 16)
    """
    gate = silu(x @ layer.W_gate)  # (..., d_ff)
    return (gate * (x @ layer.W_up)) @ layer.W_down  # (..., d)
