r"""LayerNorm, written out: each token's features, centred and scaled to unit variance.

.. math::

    \operatorname{LN}(x) = \gamma \odot \frac{x - \mu}{\sqrt{\sigma^2 + \varepsilon}} + \beta

over the last axis, with the biased variance and :math:`\varepsilon` inside the root, as
``torch.nn.LayerNorm`` (MiniLM: :math:`\varepsilon = 10^{-12}`; torch's default :math:`10^{-5}`).
"""

from __future__ import annotations

from ...core._backend import Array, ShapeError, check_float, shape_str

__all__ = ["layer_norm"]


def layer_norm(x: Array, gamma: Array, beta: Array, eps: float = 1e-12) -> Array:
    r"""Normalise each token's features: :math:`\gamma (x - \mu) / \sqrt{\sigma^2 + \varepsilon} + \beta`.

    Parameters
    ----------
    x : array or tensor, shape (..., d)
    gamma, beta : shape (d,)
        The learned gain and shift (``LayerNorm.weight`` and ``LayerNorm.bias``).
    eps : float

    Returns
    -------
    Same kind (numpy or torch), dtype and shape as ``x``.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[1.0, 2.0, 3.0, 6.0]])
    >>> y = layer_norm(x, np.ones(4), np.zeros(4), eps=0.0)
    >>> y.round(3), round(float(y.mean()), 12), round(float(y.var()), 12)
    (array([[-1.069, -0.535,  0.   ,  1.604]]), 0.0, 1.0)
    """
    check_float("x", x)
    d = x.shape[-1]
    for name, p in (("gamma", gamma), ("beta", beta)):
        if tuple(p.shape) != (d,):
            raise ShapeError(f"{name} has shape {shape_str(p)} but x has shape {shape_str(x)}; "
                             f"expected ({d},), one value per feature")
    mu = x.mean(axis=-1, keepdims=True)  # (..., 1) each token's mean
    centred = x - mu  # (..., d)
    var = (centred**2).mean(axis=-1, keepdims=True)  # (..., 1) biased: divide by d
    return gamma * centred / (var + eps) ** 0.5 + beta  # (..., d), eps inside the square root
