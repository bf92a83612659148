r"""The language-modelling loss: the logits at position ``t`` (which read tokens ``0..t``) predict token ``t + 1``.

.. math::

    \mathcal{L} = -\frac{1}{B (T-1)} \sum_{b} \sum_{t=0}^{T-2} \log \operatorname{softmax}(z_{b,t})_{x_{b,t+1}}
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["next_token_loss"]


def next_token_loss(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy (nats) of predicting ``ids[:, t + 1]`` from ``logits[:, t]``: a 0-d tensor.

    ``logits`` (B, T, V), ``ids`` (B, T) int64, ``T >= 2``.

    Examples
    --------
    >>> logits = torch.zeros(1, 3, 4)                      # uniform over 4 tokens
    >>> round(float(next_token_loss(logits, torch.tensor([[0, 1, 2]]))), 4)   # ln 4
    1.3863
    """
    B, T, V = logits.shape
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1))  # mean over B (T - 1)
