r"""Why attention divides the scores by :math:`\sqrt{d_k}`, measured (chapter 6's lesson).

For independent zero-mean entries, :math:`\operatorname{Var}(q \cdot k) = d_k \operatorname{Var}(q_i) \operatorname{Var}(k_i)`;
a softmax fed such scores saturates and its Jacobian :math:`\operatorname{diag}(p) - pp^\top` goes to 0.
This module measures the variance, the saturation and the Jacobian against :math:`d_k`. ``scale`` is as
in :func:`~attention_course.core.attention.resolve_scale`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from ...core._backend import Array, ShapeError, check_float, is_torch, shape_str, to_numpy
from ...core.attention import Scale, resolve_scale, softmax
from ..mechanics.properties import row_entropy

__all__ = [
    "variance_vs_dim", "softmax_entropy", "softmax_jacobian", "softmax_jacobian_norm", "saturation_stats", "pair_logit_variance",
]


def _check_dims(d_ks: Sequence[int]) -> list[int]:
    dims = list(np.atleast_1d(np.asarray(d_ks)).tolist())
    if not dims:
        raise ValueError("d_ks is empty; expected at least one dimension")
    for d in dims:
        resolve_scale(d, "none")  # raises for a non-positive or non-integer d_k
    return [int(d) for d in dims]


# --------------------------------------------------------------------- variance
def dot_product_variance(q: Array, k: Array) -> float:
    r"""Empirical variance (``ddof=0``) of the paired dot products :math:`s_n = q_n \cdot k_n`.

    Parameters
    ----------
    q, k : array or tensor, shape (..., d_k)
        Samples; leading axes are pooled. Query ``n`` is paired with key ``n`` only.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> q, k = rng.normal(size=(20000, 64)), rng.normal(size=(20000, 64))
    >>> round(dot_product_variance(q, k), 1)   # theory: d_k = 64
    64.6
    """
    check_float("q", q)
    check_float("k", k)
    if tuple(q.shape) != tuple(k.shape):
        raise ShapeError(f"q has shape {shape_str(q)} but k has shape {shape_str(k)}; expected equal "
                         f"shapes (..., d_k): sample n of q is paired with sample n of k")
    s = (q * k).sum(-1)  # (...,) one dot product per sample
    return float(s.var(unbiased=False) if is_torch(s) else np.var(s))


def dot_variance_standard_error(d_k: int, n_samples: int) -> float:
    r"""Relative standard error of :func:`dot_product_variance` for Gaussian ``q``, ``k``: :math:`\sqrt{(2 + 6/d_k)/N}`.

    Examples
    --------
    >>> round(dot_variance_standard_error(64, 20000), 4)
    0.0102
    """
    resolve_scale(d_k, "none")
    if int(n_samples) != n_samples or n_samples < 2:
        raise ValueError(f"n_samples={n_samples!r}; expected an integer >= 2")
    return math.sqrt((2.0 + 6.0 / d_k) / n_samples)


@dataclass(frozen=True)
class VarianceSweep:
    """Result of :func:`variance_vs_dim`; every field has shape (len(d_k),)."""

    d_k: np.ndarray
    empirical: np.ndarray  # measured Var(c q.k)
    theory: np.ndarray  # c^2 d_k var_q var_k
    std_error: np.ndarray  # absolute Monte-Carlo standard error of `empirical`


def variance_vs_dim(d_ks: Sequence[int], n_samples: int = 20000, var_q: float = 1.0, var_k: float = 1.0,
                    scale: Scale = "none", seed: int = 0) -> VarianceSweep:
    r"""Measure :math:`\operatorname{Var}(c\, q \cdot k)` against its theory :math:`c^2 d_k \sigma_q^2 \sigma_k^2`.

    For each ``d_k``, ``n_samples`` Gaussian pairs seeded by ``(seed, d_k)`` (independent of the other
    widths in the list); ``c`` from ``scale``.

    Examples
    --------
    >>> r = variance_vs_dim([4, 64, 1024], n_samples=2000)
    >>> r.theory, r.empirical.round(0)
    (array([   4.,   64., 1024.]), array([   4.,   65., 1036.]))
    >>> variance_vs_dim([4, 64, 1024], n_samples=2000, scale="sqrt").empirical.round(2)
    array([1.01, 1.01, 1.01])
    """
    dims = _check_dims(d_ks)
    for name, v in (("var_q", var_q), ("var_k", var_k)):
        if not v > 0:
            raise ValueError(f"{name}={v!r}; expected a positive variance")
    emp, theory, se = [], [], []
    for d in dims:
        c = resolve_scale(d, scale)
        rng = np.random.default_rng([seed, d])
        s = np.empty(n_samples)
        for start in range(0, n_samples, 4096):  # chunks keep memory small at large d_k
            m = min(4096, n_samples - start)
            q = rng.normal(scale=math.sqrt(var_q), size=(m, d))  # (m, d_k)
            k = rng.normal(scale=math.sqrt(var_k), size=(m, d))  # (m, d_k)
            s[start : start + m] = c * (q * k).sum(-1)  # (m,)
        emp.append(np.var(s))
        theory.append(c**2 * d * var_q * var_k)
        se.append(theory[-1] * dot_variance_standard_error(d, n_samples))
    return VarianceSweep(np.array(dims), np.array(emp), np.array(theory), np.array(se))



# ------------------------------------------------------------ softmax geometry
def softmax_entropy(logits: Array, temperature: float = 1.0, axis: int = -1) -> Array:
    r"""Entropy (nats) of :math:`p = \operatorname{softmax}(x / \tau)` along ``axis``: :math:`H = -\sum_j p_j \log p_j`.

    From the log-softmax, so a saturated row gives 0, not NaN. ``logits`` (..., S, ...) with the keys on
    ``axis``; the result drops ``axis``.

    Examples
    --------
    >>> x = np.array([[0.0, 0.0, 0.0, 0.0], [10.0, 0.0, 0.0, 0.0]])
    >>> softmax_entropy(x).round(4)          # log 4 = 1.3863 for a uniform row
    array([1.3863, 0.0015])
    >>> softmax_entropy(x, temperature=10.0).round(4)
    array([1.3863, 1.2683])
    """
    check_float("logits", logits)
    if not bool((temperature > 0).all() if is_torch(temperature) else temperature > 0):
        raise ValueError(f"temperature={temperature!r}; expected a positive number")
    z = logits / temperature
    if is_torch(z):
        logp = torch.log_softmax(z, dim=axis)
        return row_entropy(logp.exp(), axis, log_p=logp)
    m = np.max(z, axis=axis, keepdims=True)
    logp = z - m - np.log(np.exp(z - m).sum(axis=axis, keepdims=True))  # log-softmax
    return row_entropy(np.exp(logp), axis, log_p=logp)


def softmax_jacobian(p: Array) -> Array:
    r"""Jacobian of the softmax at probabilities ``p``: :math:`J = \operatorname{diag}(p) - p p^\top`.

    ``p`` (..., S) gives (..., S, S); each row of :math:`J` sums to 0.

    Examples
    --------
    >>> softmax_jacobian(np.array([0.5, 0.5]))
    array([[ 0.25, -0.25],
           [-0.25,  0.25]])
    """
    check_float("p", p)
    if p.ndim < 1:
        raise ShapeError(f"p has shape {shape_str(p)}; expected (..., S)")
    if is_torch(p):
        return torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # (..., S, S)
    J = -p[..., :, None] * p[..., None, :]  # $-pp^T$   (..., S, S)
    idx = np.arange(p.shape[-1])
    J[..., idx, idx] += p  # $+\operatorname{diag}(p)$
    return J


def softmax_jacobian_norm(p: Array, ord: str = "fro") -> np.ndarray:
    r"""Norm of :func:`softmax_jacobian` for each row of ``p`` (..., S), a numpy array (...,).

    ``ord="fro"``: :math:`\|J\|_F^2 = \sum_i p_i^2 ((1 - p_i)^2 + \sum_{j \ne i} p_j^2)`, with the largest
    weight's terms summed from the other weights, so a nearly one-hot row keeps full relative accuracy.
    ``ord="spectral"``: the largest eigenvalue.

    Examples
    --------
    >>> p = np.array([[0.25, 0.25, 0.25, 0.25], [1.0, 0.0, 0.0, 0.0]])
    >>> softmax_jacobian_norm(p).round(4), softmax_jacobian_norm(p, "spectral").round(4)
    (array([0.433, 0.   ]), array([0.25, 0.  ]))
    """
    if ord not in ("fro", "spectral"):
        raise ValueError(f"ord={ord!r}; expected 'fro' or 'spectral'")
    check_float("p", p)
    p = to_numpy(p)
    if p.ndim < 1 or p.shape[-1] < 1:
        raise ShapeError(f"p has shape {shape_str(p)}; expected (..., S) with S >= 1")
    if ord == "spectral":
        return np.linalg.eigvalsh(softmax_jacobian(p))[..., -1].clip(min=0.0)  # (...,)
    top = p.argmax(axis=-1)[..., None]  # (..., 1) index of the largest weight
    rest = p.copy()
    np.put_along_axis(rest, top, 0.0, axis=-1)  # (..., S) every weight but the largest
    one_minus = 1.0 - p  # (..., S) $1 - p_i$
    others_sq = (p**2).sum(axis=-1, keepdims=True) - p**2  # (..., S) $\sum_{j \ne i} p_j^2$
    np.put_along_axis(one_minus, top, rest.sum(axis=-1, keepdims=True), axis=-1)
    np.put_along_axis(others_sq, top, (rest**2).sum(axis=-1, keepdims=True), axis=-1)
    return np.sqrt((p**2 * (one_minus**2 + others_sq)).sum(axis=-1))  # (...,)


@dataclass(frozen=True)
class SaturationStats:
    r"""Result of :func:`saturation_stats`; every field has shape (len(d_k),).

    Means over rows, but ``jacobian_norm``: the median :math:`\|J\|_F` with respect to the scaled scores;
    ``score_gradient_norm`` is ``scale * jacobian_norm``, with respect to the raw ``q . k``.
    """

    d_k: np.ndarray
    scale: np.ndarray
    entropy: np.ndarray
    max_weight: np.ndarray
    frac_saturated: np.ndarray
    jacobian_norm: np.ndarray
    score_gradient_norm: np.ndarray


def saturation_stats(d_ks: Sequence[int], scale: Scale = "none", n_keys: int = 64, n_queries: int = 64,
                     n_batches: int = 64, threshold: float = 0.99, seed: int = 0) -> SaturationStats:
    r"""How saturated are softmax rows of :math:`c(d_k)\, q k^\top` with Gaussian ``q`` (T, d_k), ``k`` (S, d_k)?

    For each ``d_k``, ``n_batches`` score matrices seeded by ``(seed, d_k)``, the same for every ``scale``
    (paired samples). A row is saturated when its largest weight exceeds ``threshold``.

    Examples
    --------
    >>> r = saturation_stats([4, 256], scale="none", n_batches=4)
    >>> r.max_weight.round(3), r.frac_saturated.round(3)
    (array([0.289, 0.889]), array([0.   , 0.477]))
    >>> saturation_stats([4, 256], scale="sqrt", n_batches=4).max_weight.round(3)
    array([0.108, 0.107])
    """
    dims = _check_dims(d_ks)
    for name, n in (("n_keys", n_keys), ("n_queries", n_queries), ("n_batches", n_batches)):
        if int(n) != n or n < 1:
            raise ValueError(f"{name}={n!r}; expected a positive integer")
    if not 0 < threshold < 1:
        raise ValueError(f"threshold={threshold!r}; expected a probability in (0, 1)")
    rows = {f: [] for f in ("scale", "entropy", "max_weight", "frac", "jac")}
    for d in dims:
        c = resolve_scale(d, scale)
        rng = np.random.default_rng([seed, d])
        q = rng.standard_normal((n_batches, n_queries, d))  # (B, T, d_k)
        k = rng.standard_normal((n_batches, n_keys, d))  # (B, S, d_k)
        qk = torch.from_numpy(q) @ torch.from_numpy(k).transpose(1, 2)  # (B, T, S), torch: fast
        s = c * qk.numpy()  # $c\,QK^T$   (B, T, S)
        p = softmax(s, axis=-1)  # (B, T, S), normalised over the S keys
        p_max = p.max(axis=-1)  # (B, T)
        jac = softmax_jacobian_norm(p)  # (B, T), Frobenius norm of each row's Jacobian
        rows["scale"].append(c)
        rows["entropy"].append(softmax_entropy(s).mean())
        rows["max_weight"].append(p_max.mean())
        rows["frac"].append((p_max > threshold).mean())
        rows["jac"].append(np.median(jac))
    c_arr, jac_arr = np.array(rows["scale"]), np.array(rows["jac"])
    return SaturationStats(d_k=np.array(dims), scale=c_arr, entropy=np.array(rows["entropy"]),
                           max_weight=np.array(rows["max_weight"]), frac_saturated=np.array(rows["frac"]),
                           jacobian_norm=jac_arr, score_gradient_norm=c_arr * jac_arr)


# ------------------------------------------------------ a pretrained model
def pair_logit_variance(q: Array, k: Array, valid: Optional[Array] = None) -> tuple[np.ndarray, np.ndarray]:
    r"""Measured variance of :math:`q_i \cdot k_j` per head, and the independent-entries prediction.

    .. math::

        \text{measured}_h = \widehat{\operatorname{Var}}_{b,i,j}(q_{bhi} \cdot k_{bhj}), \qquad
        \text{theory}_h = d_k\, \widehat{\operatorname{Var}}(q)\, \widehat{\operatorname{Var}}(k),

    over pairs of real tokens of one sequence; the entry variances pool tokens and coordinates.

    Parameters
    ----------
    q, k : array, shape (B, h, T, d_k)
        Self-attention queries and keys.
    valid : array of bool, shape (B, T), optional
        ``True`` for a real token (default: all).

    Returns
    -------
    measured, theory : np.ndarray, each (h,)

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> q, k = rng.normal(size=(40, 2, 30, 64)), rng.normal(size=(40, 2, 30, 64))
    >>> measured, theory = pair_logit_variance(q, k)      # d_k = 64
    >>> measured.round(0), (measured / theory).round(2)
    (array([64., 65.]), array([1.01, 1.  ]))
    """
    check_float("q", q)
    check_float("k", k)
    q, k = to_numpy(q).astype(float), to_numpy(k).astype(float)
    if q.ndim != 4 or q.shape != k.shape:
        raise ShapeError(f"q has shape {shape_str(q)} and k has shape {shape_str(k)}; expected "
                         f"equal shapes (B, h, T, d_k) for self-attention")
    B, h, T, d_k = q.shape
    valid = np.ones((B, T), bool) if valid is None else to_numpy(valid).astype(bool)
    if valid.shape != (B, T):
        raise ShapeError(f"valid has shape {shape_str(valid)} but q has shape {shape_str(q)}; "
                         f"expected (B, T) = ({B}, {T})")
    s = q @ np.swapaxes(k, -2, -1)  # $q_i \cdot k_j$   (B, h, T, T)
    pairs = valid[:, :, None] & valid[:, None, :]  # (B, T, T): both tokens real
    measured = np.array([s[:, head][pairs].var() for head in range(h)])  # (h,)
    q_real, k_real = np.moveaxis(q, 1, 0)[:, valid], np.moveaxis(k, 1, 0)[:, valid]  # (h, N, d_k)
    theory = d_k * q_real.reshape(h, -1).var(axis=1) * k_real.reshape(h, -1).var(axis=1)  # (h,)
    return measured, theory
