r"""Is a trained head's kernel local? Its attention weights against query-key distances.

Within one row of an attention matrix the query :math:`q` is fixed, and the identity
:math:`-\tfrac12\lVert q - k\rVert^2 = q\cdot k - \tfrac12\lVert q\rVert^2 - \tfrac12\lVert k\rVert^2`
splits each weight of scaled dot-product attention into two factors,

.. math::

    \alpha_j \;\propto\; e^{q\cdot k_j/\sqrt d}
    \;=\; \underbrace{e^{-\lVert q - k_j\rVert^2 / 2\sqrt d}}_{\text{Gaussian kernel}}
    \;\times\; \underbrace{e^{\lVert k_j\rVert^2 / 2\sqrt d}}_{\text{key-norm factor}}
    \;\times\; \text{const}_q ,

so the spread of the key norms is exactly how far a head departs from a Gaussian
smoother in its own query-key space. The helpers measure, per head:

=============================  ==========================================================
``"rank_corr"``                median over queries of the rank correlation of the weights with
                               :math:`-\lVert q - k_j\rVert` (1 = weight falls with distance)
``"nearest_wins"``             fraction of queries whose largest weight is on the nearest key
``"blind_rank_corr"``,         the same two measures for a *query-blind* weight, each key's mean
``"blind_nearest_wins"``       weight over all queries of the head (it ignores the distance to the query)
``"chance"``                   :math:`1/S`, the nearest-key rate of weights that ignore the keys
``"distance_share"``           share of the within-row logit variance explained by the distance term
``"norm_share"``               share explained by the key-norm term
``"norm_ratio"``               largest over smallest key norm
=============================  ==========================================================

In trained self-attention :math:`W_Q \ne W_K`, so a token's own key is not its query:
"the nearest key" replaces "the own key" of the synthetic test in
:mod:`attention_course.chapters.kernels.attention_kernel`. The queries and keys themselves come from
:mod:`attention_course.models.queries_keys` (it runs the model): ``sentence_queries_keys``
for a BERT encoder, ``minilm_queries_keys`` for all-MiniLM-L6-v2 and a list of texts.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...core._backend import Array, ShapeError, shape_str, to_numpy
from .attention_kernel import rank_correlation

__all__ = []

MEASURES = ("rank_corr", "nearest_wins", "blind_rank_corr", "blind_nearest_wins", "chance",
            "distance_share", "norm_share", "norm_ratio")


def key_norm_ratio(k: Array) -> np.ndarray:
    r"""Largest over smallest key norm, :math:`\max_j \lVert k_j\rVert / \min_j \lVert k_j\rVert`.

    Parameters
    ----------
    k : array, shape (..., S, d)

    Returns
    -------
    ndarray, shape (...)

    Examples
    --------
    >>> key_norm_ratio(np.array([[3.0, 4.0], [1.0, 0.0], [0.0, 2.0]]))  # norms 5, 1, 2
    array(5.)
    """
    keys = np.asarray(to_numpy(k), dtype=np.float64)
    if keys.ndim < 2 or keys.shape[-2] == 0:
        raise ShapeError(f"k has shape {shape_str(keys)}; expected (..., S, d) with S >= 1")
    norms = np.linalg.norm(keys, axis=-1)  # (..., S)
    return np.asarray(norms.max(-1) / norms.min(-1))


def _row_r2(y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Squared correlation of y with x after removing each row's mean, pooled over the rows (..., T, S) -> (...)."""
    yc, xc = y - y.mean(-1, keepdims=True), x - x.mean(-1, keepdims=True)  # (..., T, S)
    num = (yc * xc).sum((-2, -1)) ** 2
    x_var = (xc**2).sum((-2, -1))
    den = (yc**2).sum((-2, -1)) * x_var
    # x constant in every row up to round-off (relative spread below 1e-12, float64 noise is ~1e-16): share 0
    varies = (x_var > 1e-24 * (x**2).sum((-2, -1))) & (den > 0)
    return np.divide(num, den, out=np.zeros_like(num), where=varies)


def qk_locality(q: Array, k: Array) -> dict[str, np.ndarray]:
    r"""Locality of scaled dot-product attention in its own query-key space, per head.

    With scores :math:`s_{ij} = q_i\cdot k_j/\sqrt d` (softmax over :math:`j`), distances
    :math:`D_{ij} = \lVert q_i - k_j\rVert` and, per row, the split
    :math:`s_{ij} = g_{ij} + b_j + c_i` into the distance term
    :math:`g_{ij} = -D_{ij}^2/2\sqrt d`, the key-norm term :math:`b_j = \lVert k_j\rVert^2/2\sqrt d`
    and a constant, returns the measures listed in the module docstring. The two shares
    are squared correlations of :math:`s` with :math:`g` (and with :math:`b`) after
    removing each row's mean, pooled over the rows: a Gaussian kernel has
    ``distance_share`` 1; keys of equal norm make ``norm_share`` 0. Softmax is monotone,
    so ranks and argmaxes of the scores are those of the weights.

    Parameters
    ----------
    q : array, shape (..., T, d)
    k : array, shape (..., S, d), S >= 2
        Leading axes (layers, heads) must match and are kept.

    Returns
    -------
    dict
        Each entry of :data:`MEASURES` as an array of shape (...).

    Examples
    --------
    Keys of equal norm: the dot product is a Gaussian kernel in the distance.

    >>> rng = np.random.default_rng(0)
    >>> k = rng.normal(size=(6, 3)); k /= np.linalg.norm(k, axis=-1, keepdims=True)
    >>> loc = qk_locality(rng.normal(size=(4, 3)), k)
    >>> {m: round(float(loc[m]), 3) for m in ("rank_corr", "nearest_wins", "distance_share", "norm_share")}
    {'rank_corr': 1.0, 'nearest_wins': 1.0, 'distance_share': 1.0, 'norm_share': 0.0}
    """
    qa, ka = (np.asarray(to_numpy(a), dtype=np.float64) for a in (q, k))
    if qa.ndim < 2 or ka.ndim != qa.ndim or qa.shape[:-2] != ka.shape[:-2] or qa.shape[-1] != ka.shape[-1] \
            or ka.shape[-2] < 2:
        raise ShapeError(f"q has shape {shape_str(qa)} and k has shape {shape_str(ka)}; expected (..., T, d) "
                         f"and (..., S, d) with the same leading axes and d, and S >= 2")
    d, S = qa.shape[-1], ka.shape[-2]
    scores = qa @ np.swapaxes(ka, -2, -1) / np.sqrt(d)  # $q_i\cdot k_j/\sqrt d$   (..., T, S), softmax over S
    dist2 = ((qa[..., :, None, :] - ka[..., None, :, :]) ** 2).sum(-1)  # $\lVert q_i - k_j\rVert^2$   (..., T, S)
    g = -dist2 / (2 * np.sqrt(d))  # distance term   (..., T, S)
    b = np.broadcast_to((ka**2).sum(-1)[..., None, :] / (2 * np.sqrt(d)), g.shape)  # key-norm term   (..., T, S)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)  # (..., T, S) attention weights
    blind = np.broadcast_to(weights.mean(-2, keepdims=True), weights.shape)  # (..., T, S) same row for every query
    nearest = dist2.argmin(-1)  # (..., T)
    return {
        "rank_corr": np.median(rank_correlation(scores, -dist2), axis=-1),
        "nearest_wins": np.mean(scores.argmax(-1) == nearest, axis=-1),
        "blind_rank_corr": np.median(rank_correlation(blind, -dist2), axis=-1),
        "blind_nearest_wins": np.mean(blind.argmax(-1) == nearest, axis=-1),
        "chance": np.full(scores.shape[:-2], 1 / S),
        "distance_share": _row_r2(scores, g),
        "norm_share": _row_r2(scores, b),
        "norm_ratio": key_norm_ratio(ka),
    }
