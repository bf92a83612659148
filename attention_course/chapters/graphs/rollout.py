r"""Attention rollout (Abnar & Zuidema 2020): the total weight of all paths from input ``j`` to output ``i``.

Each layer is modelled as :math:`\hat A_\ell = \operatorname{rownorm}(\tfrac12 A_\ell + \tfrac12 I)`
(the skip connection keeps half of each token; heads are averaged first).
"""

from __future__ import annotations

import numpy as np

from ...core._backend import Array, ShapeError, to_numpy

__all__ = ["attention_rollout"]


def _augmented(weights: Array) -> np.ndarray:
    """Per-layer ``(A + I)`` row-normalised (= 0.5 A + 0.5 I for stochastic A), (L, T, T)."""
    W = to_numpy(weights).astype(float)
    if W.ndim == 4:
        W = W.mean(axis=1)  # average the heads, (L, T, T)
    if W.ndim != 3 or W.shape[1] != W.shape[2]:
        raise ShapeError(f"weights has shape {tuple(W.shape)}; expected (L, T, T) or (L, h, T, T) "
                         f"(one square attention map per layer)")
    aug = 0.5 * W + 0.5 * np.eye(W.shape[1])  # residual: half the token stays put
    return aug / aug.sum(axis=-1, keepdims=True)  # rows sum to 1, (L, T, T)


def attention_rollout(weights: Array) -> np.ndarray:
    r"""Attention rollout of maps (L, T, T) or (L, h, T, T): a (T, T) matrix whose rows sum to 1.

    .. math::

        \tilde A = \hat A_L \hat A_{L-1} \cdots \hat A_1

    Examples
    --------
    >>> A = np.array([[[0.0, 1.0], [0.0, 1.0]]] * 2)
    >>> attention_rollout(A)
    array([[0.25, 0.75],
           [0.  , 1.  ]])
    """
    aug = _augmented(weights)
    rollout = np.eye(aug.shape[1])
    for A_hat in aug:  # layer 1 first; later layers multiply on the left
        rollout = A_hat @ rollout  # (T, T)
    return rollout
