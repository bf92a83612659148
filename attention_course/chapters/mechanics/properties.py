r"""Chapter 1's claims about one attention layer, measured on seeded random problems.

Each row of :math:`A = \operatorname{softmax}(QK^\top/\sqrt{d_k})` is a distribution
(:func:`row_sum_errors`), each output a convex combination of the values (:func:`fraction_in_hull`,
:func:`hull_dropout_sweep`), and the package agrees with PyTorch (:func:`torch_agreement`, with
:data:`MISTAKES` as the baselines that must fail). Where a verdict flips is found by
:func:`first_crossing` and :func:`square_index`, never typed in. Randomness is passed explicitly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F

from ...core._backend import Array, ShapeError, is_torch, to_numpy
from ...core.attention import causal_mask, scaled_dot_product_attention
from .hull import in_convex_hull

__all__ = [
    "effective_keys", "row_sum_errors", "naive_attention", "MISTAKES", "fraction_in_hull", "torch_agreement",
    "DROPOUT_RATES", "first_crossing", "row_entropy",
]

#: The dropout slider's rates; 0.1 is the rate the chapter measures, as used in training.
DROPOUT_RATES = (0.0, 0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5)


def random_attention_problem(rng: np.random.Generator, scale: float, max_size: int = 11, d_v: int = 3
                            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One random attention problem: ``q`` (T, d), ``k`` (S, d), ``v`` (S, d_v), with T, S, d uniform in 1..``max_size``.

    Queries and keys are standard normal times ``scale``. Draws the sizes, then ``q``, ``k``, ``v``.

    Examples
    --------
    >>> q, k, v = random_attention_problem(np.random.default_rng(0), scale=1.0)
    >>> q.shape[1] == k.shape[1], k.shape[0] == v.shape[0], v.shape[1]
    (True, True, 3)
    """
    T, S, d = rng.integers(1, max_size + 1, size=3)
    q, k = rng.normal(size=(T, d)) * scale, rng.normal(size=(S, d)) * scale  # (T, d), (S, d)
    return q, k, rng.normal(size=(S, d_v))  # v: (S, d_v)


@dataclass(frozen=True)
class RowSumErrors:
    """Worst row-sum error per dtype, and the smallest weight seen in any dtype."""

    worst: dict  # dtype name -> max_i |sum_j A_ij - 1| over every problem
    min_weight: float


def row_sum_errors(rng: np.random.Generator, n_problems: int = 1000,
                   dtypes: Sequence[str] = ("float64", "float32"), log10_scale: tuple[float, float] = (-2.0, 2.0),
                   attention=scaled_dot_product_attention) -> RowSumErrors:
    r"""Largest deviation of an attention row sum from 1, over many random problems, per dtype.

    .. math::

        e_{\text{dtype}} = \max_{\text{problems}} \max_i \Bigl|\sum_j A_{ij} - 1\Bigr|

    Each problem has scale :math:`10^u`, :math:`u \sim U(\text{log10\_scale})` (logits up to :math:`\pm 10^4`),
    and runs in every dtype. ``attention(q, k, v) -> (output, weights)``.

    Returns
    -------
    RowSumErrors
        ``worst[dtype]`` (``inf`` after a NaN or overflow) and ``min_weight``.

    Examples
    --------
    >>> errors = row_sum_errors(np.random.default_rng(0), n_problems=20)
    >>> errors.worst["float64"] < 1e-12, errors.worst["float32"] < 1e-5, errors.min_weight >= 0
    (True, True, True)
    """
    worst = {dtype: 0.0 for dtype in dtypes}
    min_weight = np.inf
    for _ in range(n_problems):
        q, k, v = random_attention_problem(rng, scale=10.0 ** rng.uniform(*log10_scale))
        for dtype in dtypes:
            _, w = attention(q.astype(dtype), k.astype(dtype), v.astype(dtype))  # (T, S)
            err = float(np.abs(w.sum(-1) - 1).max())
            worst[dtype] = max(worst[dtype], err if np.isfinite(err) else np.inf)  # NaN/inf: overflow, infinitely wrong
            min_weight = min(min_weight, float(w.min()))
    return RowSumErrors(worst, min_weight)


def fraction_in_hull(rng: np.random.Generator, n_problems: int = 500, dropout: float = 0.0, mask_row: bool = False
                    ) -> float:
    r"""Fraction of attention outputs that lie in the convex hull of their values.

    Problems: ``T, S`` uniform in 3..9, ``d = 4``, ``d_v = 2``, standard normal. With dropout rate :math:`p`,

    .. math::

        \tilde A_{ij} = A_{ij}\, \frac{m_{ij}}{1 - p}, \qquad m_{ij} \sim \text{Bernoulli}(1 - p).

    ``mask_row``: query 0 sees no key, so its output is 0. Inside is decided geometrically
    (:func:`~attention_course.chapters.mechanics.hull.in_convex_hull`), never from the weights.

    Examples
    --------
    >>> fraction_in_hull(np.random.default_rng(1), n_problems=50)
    1.0
    """
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout={dropout!r}; expected a rate p with 0 <= p < 1")
    inside = []
    for _ in range(n_problems):
        T, S = rng.integers(3, 10, size=2)
        q, k, v = rng.normal(size=(T, 4)), rng.normal(size=(S, 4)), rng.normal(size=(S, 2))
        mask = np.ones((T, S), dtype=bool)  # True = may attend
        if mask_row:
            mask[0] = False  # query 0 sees no key
        _, w = scaled_dot_product_attention(q, k, v, mask=mask)  # (T, S)
        if dropout:
            w = w * (rng.random(w.shape) > dropout) / (1 - dropout)  # training-time dropout   (T, S)
        inside.append(in_convex_hull(w @ v, v))  # (T,)
    return float(np.mean(np.concatenate(inside)))


def torch_agreement(seed: int = 0, B: int = 2, h: int = 3, T: int = 5, S: int = 7, d: int = 8,
                    attention=scaled_dot_product_attention) -> dict[str, float]:
    r""":math:`\max |o - o_{\text{torch}}|` in float64 against ``torch.nn.functional.scaled_dot_product_attention``, per case.

    ``q`` (B, h, T, d), ``k, v`` (B, h, S, d) from ``seed``; the cases: no mask, a boolean mask (True = attend),
    a float mask, causal with T != S, and scale 0.3. Pass a wrong ``attention`` to see the comparison fail.

    Examples
    --------
    >>> gaps = torch_agreement(seed=0)
    >>> list(gaps), max(gaps.values()) < 1e-12
    (['no mask', 'boolean mask', 'float mask', 'causal, T != S', 'scale = 0.3'], True)
    >>> {case: gap > 1e-3 for case, gap in torch_agreement(attention=MISTAKES["scale 1/d_k"]).items()}
    {'no mask': True, 'boolean mask': True, 'float mask': True, 'causal, T != S': True, 'scale = 0.3': False}
    """
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, h, n, d, generator=gen, dtype=torch.float64) for n in (T, S, S))
    bool_mask = torch.rand(B, 1, T, S, generator=gen) > 0.3  # (B, 1, T, S), broadcast over heads
    float_mask = torch.randn(T, S, generator=gen, dtype=torch.float64)  # (T, S)
    cases = {
        "no mask": ({}, {}),
        "boolean mask": ({"mask": bool_mask}, {"attn_mask": bool_mask}),
        "float mask": ({"mask": float_mask}, {"attn_mask": float_mask}),
        "causal, T != S": ({"mask": causal_mask(T, S)}, {"is_causal": True}),
        "scale = 0.3": ({"scale": 0.3}, {"scale": 0.3}),
    }
    gaps = {}
    for name, (ours_kw, torch_kw) in cases.items():
        ours, _ = attention(q, k, v, **ours_kw)  # (B, h, T, d)
        ref = F.scaled_dot_product_attention(q, k, v, **torch_kw)  # (B, h, T, d)
        gaps[name] = float((ours - ref).abs().max())
    return gaps


def naive_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""Attention with the softmax :math:`e^{s_{ij}}/\sum_j e^{s_{ij}}` as written, without subtracting the row's maximum.

    The baseline :func:`row_sum_errors` must be able to fail: scores above about 709 (float64) or 88
    (float32) overflow and the row becomes NaN (the warnings are silenced).

    Examples
    --------
    >>> q, k, v = np.array([[10.0]]), np.array([[10.0], [0.0]]), np.eye(2)  # scores 100 and 0
    >>> naive_attention(q, k, v)[1].round(3), naive_attention(*(a.astype("float32") for a in (q, k, v)))[1]
    (array([[1., 0.]]), array([[nan,  0.]], dtype=float32))
    """
    scale = np.asarray(1.0 / np.sqrt(q.shape[-1]), dtype=q.dtype)  # in q's precision: float32 stays float32
    scores = q @ np.swapaxes(k, -1, -2) * scale  # (..., T, S)
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(scores)  # (..., T, S), inf where a score is too large
        weights = e / e.sum(axis=-1, keepdims=True)  # (..., T, S), softmax over the S keys; NaN after inf
    return weights @ v, weights  # (..., T, d_v), (..., T, S)


def _scale_over_d_k(q, k, v, mask=None, scale=None):
    """Attention scaled by 1/d_k instead of 1/sqrt(d_k) (an explicit ``scale`` is kept)."""
    return scaled_dot_product_attention(q, k, v, mask=mask, scale=1.0 / q.shape[-1] if scale is None else scale)


def _mask_read_as_blocked(q, k, v, mask=None, scale=None):
    """Attention that reads a boolean mask as True = blocked (``nn.MultiheadAttention``'s convention)."""
    if mask is not None and (getattr(mask, "dtype", None) in (torch.bool, np.bool_)):
        mask = ~mask if is_torch(mask) else ~np.asarray(mask)
    return scaled_dot_product_attention(q, k, v, mask=mask, scale=scale)


#: Two plausible wrong attentions, ``attention(q, k, v, mask=None, scale=None) -> (output, weights)``:
#: :func:`torch_agreement` must tell each from PyTorch wherever it differs.
MISTAKES: dict = {"scale 1/d_k": _scale_over_d_k, "mask True = blocked": _mask_read_as_blocked}


def first_crossing(values: Sequence[float], line: float) -> Optional[int]:
    """Index of the first value strictly above ``line``, or ``None`` if none is.

    Examples
    --------
    >>> first_crossing([0.0, 0.0, 0.004, 0.02], line=0.0)
    2
    >>> first_crossing([1.0, 2.0], line=3.0) is None
    True
    """
    above = np.flatnonzero(np.asarray(values, dtype=float) > line)
    return int(above[0]) if above.size else None


def hull_dropout_sweep(rates: Sequence[float] = DROPOUT_RATES, n_problems: int = 500, seed: int = 1) -> np.ndarray:
    """Share of outputs outside the values' hull at each dropout rate: :math:`1 -` :func:`fraction_in_hull`, shape (len(rates),).

    Each rate draws afresh from ``default_rng(seed)`` (seed 1 is the chapter's measurement).

    Examples
    --------
    >>> hull_dropout_sweep([0.0, 0.3], n_problems=40).round(3)
    array([0.   , 0.225])
    """
    return np.array([1.0 - fraction_in_hull(np.random.default_rng(seed), n_problems=n_problems, dropout=p)
                     for p in rates])


def dropout_outputs(rates: Sequence[float], seed: int = 0, T: int = 8, S: int = 3,
                    draws: int = 10) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""One random problem's outputs under ``draws`` dropout masks at each rate, and which stay in the hull.

    A problem as in :func:`fraction_in_hull` from ``default_rng(seed)``, with

    .. math::

        \tilde A_{ij} = A_{ij}\, \frac{[u_{ij} > p]}{1 - p}

    for fixed uniform :math:`u` (draws, T, S): a weight dropped at one rate stays dropped at higher ones.

    Returns
    -------
    v : array, shape (S, 2)
    outputs : array, shape (len(rates), draws * T, 2)
    inside : bool array, shape (len(rates), draws * T)

    Examples
    --------
    >>> v, o, inside = dropout_outputs([0.0, 0.3])
    >>> v.shape, o.shape, inside.sum(axis=1).tolist()
    ((3, 2), (2, 80, 2), [80, 36])
    """
    if any(not 0.0 <= p < 1.0 for p in rates):
        raise ValueError(f"rates={list(rates)}; expected dropout rates p with 0 <= p < 1")
    rng = np.random.default_rng(seed)
    q, k, v = rng.normal(size=(T, 4)), rng.normal(size=(S, 4)), rng.normal(size=(S, 2))  # as in fraction_in_hull
    _, w = scaled_dot_product_attention(q, k, v)  # (T, S), rows sum to 1
    u = rng.random((draws, T, S))  # one uniform number per weight and dropout draw
    outputs = np.stack([((w * (u > p) / (1 - p)) @ v).reshape(-1, 2) for p in rates])  # (R, draws * T, 2)
    inside = np.stack([in_convex_hull(o, v) for o in outputs])  # (R, draws * T)
    return v, outputs, inside


def square_index(shapes: Sequence[tuple[int, int]]) -> Optional[int]:
    """Index of the first ``(rows, columns)`` shape that is square, or ``None``.

    Examples
    --------
    >>> square_index([(6, 4), (6, 5), (6, 6), (6, 7)])
    2
    """
    return next((i for i, (r, c) in enumerate(shapes) if r == c), None)


def cross_attention_weights(x: np.ndarray, W_q: np.ndarray, W_k: np.ndarray, T: int, S: int) -> np.ndarray:
    r"""Weights :math:`A = \operatorname{softmax}(QK^\top/\sqrt{d_k})` of the first ``T`` rows of ``x`` over its first ``S`` rows, shape (T, S).

    Parameters
    ----------
    x : array, shape (n, d_model)
    W_q, W_k : arrays, shape (d_model, d_k)

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x, W_q, W_k = rng.normal(size=(5, 4)), rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    >>> A = cross_attention_weights(x, W_q, W_k, T=4, S=2)
    >>> A.shape, A.sum(axis=1).round(12).tolist()
    ((4, 2), [1.0, 1.0, 1.0, 1.0])
    """
    x = np.asarray(x, dtype=float)
    n = x.shape[0]
    if not (1 <= T <= n and 1 <= S <= n):
        raise ValueError(f"T={T} queries and S={S} keys from x of shape {x.shape}; expected 1 <= T, S <= {n}")
    q, k = x[:T] @ W_q, x[:S] @ W_k  # (T, d_k), (S, d_k)
    return np.asarray(scaled_dot_product_attention(q, k, k)[1])  # (T, S), softmax over the S keys (v = k: weights only)


def row_entropy(p: Array, axis: int = -1, *, log_p: Optional[Array] = None) -> Array:
    r"""Entropy of each distribution along ``axis``, in nats, with :math:`0 \log 0 = 0`.

    .. math:: H(p) = -\sum_j p_j \log p_j, \qquad 0 \le H \le \log S

    Parameters
    ----------
    p : array or tensor, shape (..., S, ...)
        numpy gives numpy (integers read as float64); torch gives torch, differentiable (zeros get gradient 0).
    log_p : array or tensor of ``p``'s shape, optional
        :math:`\log p` when known more accurately (a log-softmax).

    Returns
    -------
    array or tensor, ``p.shape`` without ``axis``

    Examples
    --------
    >>> row_entropy(np.full((2, 4), 0.25)).round(4).tolist()
    [1.3863, 1.3863]
    >>> bool(row_entropy(np.array([1.0, 0.0, 0.0])) == 0)     # one-hot: 0, not NaN
    True
    """
    if is_torch(p):
        log_p = torch.log(torch.where(p > 0, p, torch.ones_like(p))) if log_p is None else log_p
        return -torch.where(p > 0, p * log_p, torch.zeros_like(p)).sum(dim=axis)
    p = np.asarray(p)
    p = p if np.issubdtype(p.dtype, np.floating) else p.astype(np.float64)
    with np.errstate(invalid="ignore"):  # p * log_p may be 0 * -inf where p = 0: masked below
        log_p = np.log(np.where(p > 0, p, 1.0)) if log_p is None else log_p  # log 1 = 0 where p = 0
        return -np.where(p > 0, p * log_p, 0.0).sum(axis=axis)  # $-\sum_j p_j \log p_j$


def effective_keys(weights: Array, mass: float = 0.8) -> list[frozenset[int]]:
    """For each row of ``weights`` (n, m), the smallest set of columns holding ``mass`` of its own sum; ties to the lower index.

    Examples
    --------
    >>> [sorted(s) for s in effective_keys(np.array([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]]))]
    [[0, 1], [2]]
    """
    W = to_numpy(weights).astype(float)
    if W.ndim != 2 or not 0 < mass <= 1:
        raise ShapeError(f"weights has shape {W.shape} and mass={mass}; expected (n, m) and 0 < mass <= 1")
    order = np.argsort(-W, axis=1, kind="stable")  # (n, m), heaviest key first
    cum = np.cumsum(np.take_along_axis(W, order, axis=1), axis=1) / W.sum(axis=1, keepdims=True)  # (n, m)
    k = (cum < mass - 1e-9).sum(axis=1) + 1  # keys needed per row; 1e-9 absorbs round-off at an exact share
    return [frozenset(order[i, :k[i]].tolist()) for i in range(W.shape[0])]
