r"""How low-rank is softmax attention of random queries and keys, by head width and sharpness?

On a grid of :math:`(d_k, \beta)` over seeds, the centred rank-:math:`k` error of
:math:`A = \operatorname{softmax}(\beta\,QK^\top/\sqrt{d_k})` with Gaussian ``Q, K``:

.. math::

    e_k = \frac{\|\bar A - \bar A_k\|_F}{\|\bar A\|_F}, \qquad \bar A = A - \mathbf 1\mu^\top
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .baselines import centred_rank_k_error
from .spectra import effective_rank, synthetic_attention

__all__ = []


def centred_error_grid(d_ks: Sequence[int], betas: Sequence[float], n: int = 256, k: int = 32,
                       seeds: Sequence[int] = (0, 1, 2, 3, 4)) -> dict[str, np.ndarray]:
    r"""Centred rank-``k`` error and effective rank of Gaussian attention on a ``(d_k, beta)`` grid.

    Returns ``error`` and ``effective_rank``, each ``(len(seeds), len(d_ks), len(betas))``; ``1 <= k < n``.

    Examples
    --------
    >>> g = centred_error_grid([1, 16], [0.1, 4.0], n=64, k=8, seeds=[0])
    >>> g["error"].shape
    (1, 2, 2)
    >>> bool(g["error"][0, 0, 0] < 0.01 < g["error"][0, 1, 1])   # d_k = 1 soft: low rank; d_k = 16 sharp: not
    True
    """
    if not 1 <= k < n:
        raise ValueError(f"k={k}, n={n}; expected 1 <= k < n")
    err = np.empty((len(seeds), len(d_ks), len(betas)))  # (seeds, d_k, beta)
    erank = np.empty_like(err)
    for s, seed in enumerate(seeds):
        for i, d in enumerate(d_ks):
            A = np.stack([synthetic_attention(n, int(d), float(b), seed=int(seed)) for b in betas])  # (betas, n, n)
            err[s, i] = centred_rank_k_error(A, k)
            erank[s, i] = effective_rank(A)
    return {"error": err, "effective_rank": erank}


