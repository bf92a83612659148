r"""Re-checking chapter 3 on the assembled model: the effective rank of each head's attention maps.

:math:`\operatorname{erank}(A) = \exp(-\sum_i p_i \log p_i)`, :math:`p_i = \sigma_i / \sum_j \sigma_j`,
from torch's singular values (numpy's threaded BLAS crawls for many small SVDs on a busy 2-core machine).
"""

from __future__ import annotations

import numpy as np
import torch

from ...core._backend import ShapeError, shape_str
from ...models.encoder import BertWeights
from ..lowrank.spectra import effective_rank_from_singular_values
from .assemble import encode
from .self_attention import self_attention

__all__ = ["rank_shares"]


def effective_ranks(maps: torch.Tensor) -> np.ndarray:
    """The entropy effective rank of every (n, n) attention map: (..., n, n) -> (...,), in float64.

    Examples
    --------
    >>> effective_ranks(torch.stack([torch.eye(4), torch.ones(4, 4) / 4])).round(6)
    array([4., 1.])
    """
    if maps.ndim < 2:
        raise ShapeError(f"maps has shape {shape_str(maps)}; expected (..., n, n)")
    s = torch.linalg.svdvals(maps.detach().double())  # (..., n), decreasing
    return effective_rank_from_singular_values(s)  # (...,)


def rank_shares(weights: BertWeights, input_ids: torch.Tensor) -> np.ndarray:
    """Each layer's median effective rank of its heads' attention maps, as a share of ``n``: (L,).

    One text without padding, ``input_ids`` (1, n), encoded in float64.

    Examples
    --------
    >>> from attention_course.chapters.encoder.random_weights import random_bert
    >>> shares = rank_shares(random_bert(0, n_layers=3), torch.tensor([[1, 5, 7, 2, 9, 4]]))
    >>> shares.shape, bool(((shares > 0) & (shares <= 1)).all())
    ((3,), True)
    """
    if input_ids.ndim != 2 or input_ids.shape[0] != 1:
        raise ShapeError(f"input_ids has shape {shape_str(input_ids)}; expected (1, n): one text, no padding")
    w64 = weights.to(torch.float64)
    n = input_ids.shape[1]
    hidden = encode(w64, input_ids)  # (L+1, 1, n, d)
    everything = torch.ones(1, 1, 1, n, dtype=torch.bool)  # (1, 1, 1, n): no padding
    shares = []
    for l, layer in enumerate(w64.layers):
        _, maps = self_attention(hidden[l], layer, w64.num_heads, everything)  # (1, h, n, n)
        shares.append(float(np.median(effective_ranks(maps[0]))) / n)
    return np.array(shares)
