r"""Re-checking an earlier chapter on the assembled model: chapter 3's effective rank of each head.

.. math::

    \operatorname{erank}(A) = \exp\Big(-\sum_i p_i \log p_i\Big), \qquad p_i = \frac{\sigma_i}{\sum_j \sigma_j}

(Roy & Vetterli 2007), as :func:`~attention_course.chapters.lowrank.spectra.effective_rank` computes
it, here from torch's singular values, so that a chapter running on one torch thread does not start
numpy's threaded BLAS for many small SVDs (which slows to a crawl on a busy 2-core machine).
"""

from __future__ import annotations

import numpy as np
import torch

from ...core._backend import ShapeError, shape_str
from ..lowrank.spectra import effective_rank_from_singular_values

__all__ = ["effective_ranks"]


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
