r"""The feed-forward block of BERT: two linear maps with a GELU between them, applied to each token.

.. math::

    \operatorname{FFN}(x) = \operatorname{GELU}(x W_1 + b_1)\, W_2 + b_2, \qquad
    \operatorname{GELU}(z) = z\,\Phi(z) = \tfrac{z}{2}\left(1 + \operatorname{erf}(z / \sqrt{2})\right)

BERT uses the exact (erf) GELU; GPT-2's tanh approximation
:math:`\tfrac{z}{2}(1 + \tanh(\sqrt{2/\pi}\,(z + 0.044715\, z^3)))` differs from it by at most
:data:`GELU_GAP` (at :math:`|z|` = :data:`GELU_GAP_AT`).
"""

from __future__ import annotations

import math

import torch

from ...core._backend import ShapeError, shape_str
from ...models.encoder import BertLayerWeights

__all__ = ["gelu", "gelu_gap", "GELU_GAP", "GELU_GAP_AT", "feed_forward"]


def gelu(z: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    r"""GELU, exact (``"none"``: :math:`z\,\Phi(z)` with erf) or its tanh approximation (``"tanh"``).

    Examples
    --------
    >>> z = torch.tensor([-1.0, 0.0, 2.0], dtype=torch.float64)
    >>> gelu(z).numpy().round(4), gelu(z, "tanh").numpy().round(4)
    (array([-0.1587,  0.    ,  1.9545]), array([-0.1588,  0.    ,  1.9546]))
    """
    if approximate == "none":
        return 0.5 * z * (1.0 + torch.erf(z / math.sqrt(2.0)))  # z * Phi(z), Phi the normal CDF
    if approximate == "tanh":
        inner = math.sqrt(2.0 / math.pi) * (z + 0.044715 * z**3)
        return 0.5 * z * (1.0 + torch.tanh(inner))
    raise ValueError(f"approximate={approximate!r}; expected 'none' (erf, as BERT) or 'tanh'")


def gelu_gap(lo: float = -10.0, hi: float = 10.0, n: int = 200_001) -> tuple[float, float]:
    """The largest ``|GELU(z) - GELU_tanh(z)|`` on a grid of ``n`` points, and the ``|z|`` where it is.

    The difference is even in ``z`` (both satisfy ``GELU(z) - GELU(-z) = z``), so one ``|z|`` says where.

    Examples
    --------
    >>> gap, at = gelu_gap()
    >>> f"{gap:.2e} at |z| = {at:.2f}"
    '4.73e-04 at |z| = 2.70'
    """
    z = torch.linspace(lo, hi, n, dtype=torch.float64)  # (n,)
    diff = (gelu(z) - gelu(z, "tanh")).abs()  # (n,)
    i = int(diff.argmax())
    return float(diff[i]), abs(float(z[i]))


#: :func:`gelu_gap` on its default grid, measured once and written down, so that importing the
#: chapter computes nothing (tests/chapters/encoder/test_steps.py checks that it still holds).
GELU_GAP, GELU_GAP_AT = 4.73235519323335e-04, 2.6989


def feed_forward(x: torch.Tensor, layer: BertLayerWeights, approximate: str = "none") -> torch.Tensor:
    r"""BERT's position-wise feed-forward block, :math:`\operatorname{GELU}(x W_1 + b_1) W_2 + b_2`.

    Parameters
    ----------
    x : torch.Tensor, shape (..., d)
    layer : BertLayerWeights
        ``W_1`` (d, d_ff), ``b_1`` (d_ff,), ``W_2`` (d_ff, d), ``b_2`` (d,).
    approximate : ``"none"`` (erf, as BERT) or ``"tanh"``

    Returns
    -------
    torch.Tensor, shape (..., d)

    Examples
    --------
    >>> from attention_course.chapters.encoder.random_weights import random_layer
    >>> layer = random_layer(torch.Generator().manual_seed(0), 4, 8)
    >>> tuple(feed_forward(torch.ones(2, 3, 4, dtype=torch.float64), layer).shape)
    (2, 3, 4)
    """
    if x.shape[-1] != layer.W_1.shape[0]:
        raise ShapeError(f"x has shape {shape_str(x)} but W_1 has shape {shape_str(layer.W_1)}; "
                         f"expected x of shape (..., {layer.W_1.shape[0]})")
    hidden = gelu(x @ layer.W_1 + layer.b_1, approximate)  # (..., d_ff)
    return hidden @ layer.W_2 + layer.b_2  # (..., d)
