r"""One head's attention with and without the :math:`1/\sqrt{d_k}`, and how saturated its rows are.

The same queries and keys give two attention matrices,

.. math::

    A_{\text{scaled}} = \operatorname{softmax}\!\Big(\frac{q k^\top}{\sqrt{d_k}}\Big), \qquad
    A_{\text{unscaled}} = \operatorname{softmax}\big(q k^\top\big),

each row normalised over the keys. Dropping the scale multiplies every logit by
:math:`\sqrt{d_k}`: a temperature :math:`\sqrt{d_k}` times lower, so rows sharpen towards
one-hot. A row is *saturated* when its largest weight exceeds a threshold (0.99 in chapter 6).
The variance, entropy and Jacobian measurements are in :mod:`attention_course.lenses.scaling`.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

from ..core._backend import Array, ShapeError, shape_str, to_numpy
from ..core.attention import softmax

__all__ = ["scale_pair", "saturated_share"]


def scale_pair(q: Array, k: Array, valid: Optional[Array] = None) -> tuple[np.ndarray, np.ndarray]:
    r"""Attention weights of one head with the :math:`1/\sqrt{d_k}` and without it.

    Parameters
    ----------
    q : array, shape (..., T, d_k)
    k : array, shape (..., S, d_k)
    valid : array of bool, shape (..., S), optional
        ``True`` = a key that may be attended (a real token, not padding); masked keys get
        weight 0. Default: every key.

    Returns
    -------
    scaled, unscaled : np.ndarray (float64), shape (..., T, S)
        Rows sum to 1 over the keys.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> q, k = rng.normal(size=(5, 64)), rng.normal(size=(5, 64))
    >>> scaled, unscaled = scale_pair(q, k)
    >>> scaled.shape, bool(unscaled.max(-1).mean() > scaled.max(-1).mean())
    ((5, 5), True)
    >>> scale_pair(q, k[:, :32])
    Traceback (most recent call last):
    ...
    attention_course.core._backend.ShapeError: q has shape (5, 64) and k (5, 32); expected (..., T, d_k) and (..., S, d_k)
    """
    q, k = np.asarray(to_numpy(q), dtype=np.float64), np.asarray(to_numpy(k), dtype=np.float64)
    if q.ndim < 2 or k.ndim < 2 or q.shape[-1] != k.shape[-1]:
        raise ShapeError(f"q has shape {shape_str(q)} and k {shape_str(k)}; expected (..., T, d_k) and (..., S, d_k)")
    s = q @ np.swapaxes(k, -1, -2)  # (..., T, S): the raw dot products q.k
    mask = None if valid is None else np.asarray(to_numpy(valid), dtype=bool)[..., None, :]  # (..., 1, S)
    scaled = softmax(s / math.sqrt(q.shape[-1]), axis=-1, mask=mask)  # (..., T, S), over the keys
    unscaled = softmax(s, axis=-1, mask=mask)  # (..., T, S)
    return scaled, unscaled


def saturated_share(weights: Array, threshold: float = 0.99) -> float:
    """Share of rows whose largest weight exceeds ``threshold``.

    Parameters
    ----------
    weights : array, shape (..., T, S)
        Attention weights, rows over the last axis.

    Examples
    --------
    >>> saturated_share(np.array([[0.995, 0.005], [0.6, 0.4]]))
    0.5
    """
    w = np.asarray(to_numpy(weights), dtype=np.float64)
    return float((w.max(axis=-1) > threshold).mean())
