r"""Position encodings for chapter 1: attention alone is permutation-equivariant, :math:`\operatorname{Attn}(PX) = P\,\operatorname{Attn}(X)`.

So a vector :math:`p_t` is added to each token, here sinusoidal (:func:`sinusoidal_positions`); how alike two
positions are is :func:`cosine_similarity`.
"""

from __future__ import annotations

import numpy as np

from ...core._backend import Array, ShapeError, shape_str, to_numpy

__all__ = ["sinusoidal_positions", "cosine_similarity"]


def sinusoidal_positions(n: int, d: int, base: float = 10000.0) -> np.ndarray:
    r"""The sinusoidal position encodings of Vaswani et al. (2017), shape (n, d), ``d`` even.

    .. math::

        P_{t, 2i} = \sin\!\bigl(t / \text{base}^{2i/d}\bigr), \qquad
        P_{t, 2i+1} = \cos\!\bigl(t / \text{base}^{2i/d}\bigr)

    Examples
    --------
    >>> P = sinusoidal_positions(3, 4)
    >>> P[0].tolist()  # position 0: sin 0 = 0, cos 0 = 1
    [0.0, 1.0, 0.0, 1.0]
    >>> bool(np.isclose(P[1, 0], np.sin(1.0)) and np.isclose(P[1, 2], np.sin(1 / 100)))
    True
    """
    if n < 1 or d < 2 or d % 2:
        raise ValueError(f"need n >= 1 positions and an even width d >= 2; got n = {n}, d = {d}")
    t = np.arange(n, dtype=np.float64)[:, None]  # (n, 1)
    freq = base ** (-np.arange(0, d, 2, dtype=np.float64) / d)  # (d/2,) from 1 down to about 1/base
    P = np.empty((n, d))
    P[:, 0::2] = np.sin(t * freq)  # (n, d/2)
    P[:, 1::2] = np.cos(t * freq)  # (n, d/2)
    return P



def cosine_similarity(P: Array) -> np.ndarray:
    """Cosine similarity of every pair of rows of ``P`` (n, d), no zero row; shape (n, n).

    Examples
    --------
    >>> cosine_similarity(np.array([[1.0, 0.0], [1.0, 1.0]])).round(3)
    array([[1.   , 0.707],
           [0.707, 1.   ]])
    """
    p = np.asarray(to_numpy(P), dtype=np.float64)
    if p.ndim != 2:
        raise ShapeError(f"P has shape {shape_str(p)}; expected (n, d)")
    norms = np.linalg.norm(p, axis=-1)  # (n,)
    if np.any(norms == 0):
        raise ValueError("P has a zero row; its cosine similarity is undefined")
    u = p / norms[:, None]  # (n, d) unit rows
    return u @ u.T  # (n, n)
