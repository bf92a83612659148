r"""Deep stacks of self-attention and rank collapse (Dong et al. 2021).

A stack of single-head self-attention layers, with or without skip
connections, MLPs and LayerNorm, on random weights, and the quantity Dong et
al. track through it: the distance of the token matrix from rank 1,

.. math::

    \operatorname{res}(X) = \frac{\min_x \|X - \mathbf 1 x^\top\|_F}{\|X\|_F}.

Every attention layer averages tokens, so without skip connections the tokens
become one and the same vector after a few layers; the residual shrinks
*doubly* exponentially (each layer roughly raises it to a power).

:func:`attention_stack` runs on numpy arrays or torch tensors, so autograd can
differentiate through it (see :func:`attention_course.chapters.graphs.propagation.dependency_support`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Optional

import numpy as np
import torch

from ...core import attention as att
from ...core._backend import Array, ShapeError, is_torch, shape_str, to_numpy

__all__ = [
    "init_stack_params", "rank_one_residual", "rank_collapse_curves", "shrink_factor", "rank_one_parts",
    "rank_one_part_curves",
]


def init_stack_params(
    d_model: int, n_layers: int, *, seed: int, mlp: bool = False, d_ff: Optional[int] = None,
    value_scale: float = 1.0,
) -> list[dict[str, np.ndarray]]:
    """Random weights for :func:`attention_stack`, entries N(0, 1/fan_in), float64.

    Each layer has ``W_q, W_k, W_v`` (d_model, d_model) and, with ``mlp``,
    ``W_1`` (d_model, d_ff) and ``W_2`` (d_ff, d_model), ``d_ff = 4 d_model``.
    ``value_scale`` multiplies every ``W_v`` (the gain of the attention branch).

    Examples
    --------
    >>> p = init_stack_params(8, 2, seed=0, mlp=True)
    >>> len(p), sorted(p[0]), p[0]["W_1"].shape
    (2, ['W_1', 'W_2', 'W_k', 'W_q', 'W_v'], (8, 32))
    """
    rng = np.random.default_rng(seed)
    d_ff = 4 * d_model if d_ff is None else d_ff

    def w(n_in: int, n_out: int) -> np.ndarray:
        return rng.normal(size=(n_in, n_out)) / math.sqrt(n_in)

    params = []
    for _ in range(n_layers):
        layer = {"W_q": w(d_model, d_model), "W_k": w(d_model, d_model),
                 "W_v": value_scale * w(d_model, d_model)}  # fmt: skip
        if mlp:
            layer.update(W_1=w(d_model, d_ff), W_2=w(d_ff, d_model))
        params.append(layer)
    return params


def _layer_norm(x: Array, eps: float = 1e-5) -> Array:
    mu = x.mean(axis=-1, keepdims=True)  # (T, 1)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)  # (T, 1)
    return (x - mu) / (var + eps) ** 0.5  # (T, d_model), no affine parameters


def attention_stack(
    x: Array, params: list[dict], mask: Optional[Array] = None, *,
    skip: bool = False, mlp: bool = False, layernorm: bool = False,
) -> list[Array]:
    r"""Run single-head self-attention layers; returns ``[x_0, x_1, ..., x_L]``.

    Pure attention (default): :math:`x_{\ell+1} = \operatorname{SA}(x_\ell)`. With
    ``skip``: :math:`x + \operatorname{SA}(x)`; ``mlp`` adds a ReLU MLP sublayer
    (with its own skip when ``skip``); ``layernorm`` applies LayerNorm (no affine)
    after each sublayer (post-LN).

    Parameters
    ----------
    x : array or tensor, shape (T, d_model) or (B, T, d_model)
        One sequence of tokens, or a batch of them run through the same weights.
    params : list of dict
        From :func:`init_stack_params`.
    mask : bool array, shape (T, T), optional
        ``True`` = may attend (edge j -> i); a fully masked query gets output 0.

    Examples
    --------
    >>> x = np.random.default_rng(0).normal(size=(6, 8))
    >>> outs = attention_stack(x, init_stack_params(8, 3, seed=0), skip=True)
    >>> len(outs), outs[-1].shape
    (4, (6, 8))
    """
    if x.ndim not in (2, 3) or x.shape[-1] != params[0]["W_q"].shape[0]:
        raise ShapeError(
            f"x has shape {shape_str(x)}; "
            f"expected (T, {params[0]['W_q'].shape[0]}) or (B, T, {params[0]['W_q'].shape[0]}) for these params"
        )
    conv = (lambda p: torch.as_tensor(p, dtype=x.dtype)) if is_torch(x) else (lambda p: p)
    outs = [x]
    for layer in params:
        P = {name: conv(p) for name, p in layer.items()}
        q, k, v = x @ P["W_q"], x @ P["W_k"], x @ P["W_v"]  # (..., T, d_model) each
        h, _ = att.scaled_dot_product_attention(q, k, v, mask)  # (..., T, d_model)
        x = x + h if skip else h
        x = _layer_norm(x) if layernorm else x
        if mlp:
            u = x @ P["W_1"]  # (..., T, d_ff)
            f = (u * (u > 0)) @ P["W_2"]  # ReLU, (..., T, d_model)
            x = x + f if skip else f
            x = _layer_norm(x) if layernorm else x
        outs.append(x)
    return outs


def rank_one_residual(x: Array) -> float:
    r"""Relative distance to rank 1 (Dong et al. 2021), in the Frobenius norm.

    .. math::

        \operatorname{res}(X) = \frac{\min_x \|X - \mathbf 1 x^\top\|_F}{\|X\|_F}, \qquad
        \text{minimised by } x = \text{the mean row of } X.

    Examples
    --------
    >>> rank_one_residual(np.array([[1.0, 2.0], [1.0, 2.0]]))
    0.0
    """
    X = to_numpy(x).astype(float)
    if X.ndim != 2:
        raise ShapeError(f"x has shape {X.shape}; expected (T, d) tokens by features")
    return float(np.linalg.norm(X - X.mean(axis=0, keepdims=True)) / np.linalg.norm(X))


def rank_one_parts(x: Array) -> tuple[float, float]:
    r"""The two absolute sizes behind :func:`rank_one_residual`: spread and shared part.

    .. math::

        D(X) = \min_x \|X - \mathbf 1 x^\top\|_F = \|X - \mathbf 1 \bar x^\top\|_F, \qquad
        S(X) = \|\mathbf 1 \bar x^\top\|_F = \sqrt{T}\,\|\bar x\|_2,

    with :math:`\bar x` the mean row of ``x`` (T, d). The two parts are orthogonal, so
    :math:`\|X\|_F^2 = D^2 + S^2` and :func:`rank_one_residual` is :math:`D / \sqrt{D^2 + S^2}`:
    the ratio can shrink because *S* grows while *D* does not shrink at all.

    Examples
    --------
    >>> D, S = rank_one_parts(np.array([[1.0, 2.0], [3.0, 2.0]]))  # mean row (2, 2)
    >>> round(D ** 2, 12), round(S ** 2, 12)  # rows differ by (-1, 0), (1, 0); sqrt(2) * |(2, 2)|
    (2.0, 16.0)
    """
    X = to_numpy(x).astype(float)
    if X.ndim != 2:
        raise ShapeError(f"x has shape {X.shape}; expected (T, d) tokens by features")
    mean = X.mean(axis=0, keepdims=True)  # (1, d)
    return float(np.linalg.norm(X - mean)), float(math.sqrt(X.shape[0]) * np.linalg.norm(mean))


def _random_stack(n_tokens: int, d_model: int, n_layers: int, seed: int, *, skip: bool, mlp: bool,
                  layernorm: bool, value_scale: float) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n_tokens, d_model))
    params = init_stack_params(d_model, n_layers, seed=seed + 1, mlp=mlp, value_scale=value_scale)
    return attention_stack(x, params, skip=skip, mlp=mlp, layernorm=layernorm)


def rank_one_part_curves(
    n_tokens: int = 16, d_model: int = 64, n_layers: int = 48, *, seeds: Sequence[int] = range(5),
    skip: bool = False, mlp: bool = False, layernorm: bool = False, value_scale: float = 1.0,
) -> np.ndarray:
    """:func:`rank_one_parts` after each layer of the random stacks of :func:`rank_collapse`.

    Returns
    -------
    numpy.ndarray, shape (len(seeds), n_layers + 1, 2)
        ``[s, l, 0]`` is the distance *D* to rank 1 and ``[s, l, 1]`` the shared part *S*
        after layer ``l`` (input first) for the ``s``-th seed; the same stacks as
        :func:`rank_collapse`, so ``D / sqrt(D**2 + S**2)`` is its curve.

    Examples
    --------
    >>> parts = rank_one_part_curves(n_layers=3, seeds=[0], skip=True)
    >>> parts.shape
    (1, 4, 2)
    >>> r = parts[0, :, 0] / np.hypot(parts[0, :, 0], parts[0, :, 1])
    >>> bool(np.allclose(r, rank_collapse(n_layers=3, seed=0, skip=True)))
    True
    """
    return np.array([[rank_one_parts(o) for o in _random_stack(
        n_tokens, d_model, n_layers, s, skip=skip, mlp=mlp, layernorm=layernorm, value_scale=value_scale)]
        for s in seeds])


def rank_collapse(
    n_tokens: int = 16, d_model: int = 64, n_layers: int = 5, *, seed: int = 0,
    skip: bool = False, mlp: bool = False, layernorm: bool = False, value_scale: float = 1.0,
) -> np.ndarray:
    """Distance to rank 1 after each layer of a random stack, input first: (n_layers + 1,).

    Input tokens are standard normal; weights come from :func:`init_stack_params`
    (seed ``seed + 1``, ``value_scale`` on ``W_v``). Pure attention collapses
    doubly exponentially (Dong et al. 2021).

    Examples
    --------
    >>> rank_collapse(n_layers=5, seed=0).round(3).tolist()[:3]
    [0.965, 0.686, 0.029]
    >>> bool(rank_collapse(n_layers=5, seed=0)[-1] < 1e-12)
    True
    """
    outs = _random_stack(n_tokens, d_model, n_layers, seed, skip=skip, mlp=mlp, layernorm=layernorm,
                         value_scale=value_scale)
    return np.array([rank_one_residual(o) for o in outs])


def rank_collapse_curves(
    stacks: dict[str, dict], n_tokens: int = 16, d_model: int = 64, n_layers: int = 48,
    seeds: Sequence[int] = range(5),
) -> dict[str, np.ndarray]:
    """The median over ``seeds`` of :func:`rank_collapse`, for each named stack.

    ``stacks`` maps a name to the keyword arguments of :func:`rank_collapse` (``skip``,
    ``mlp``, ``layernorm``, ``value_scale``); the median is taken layer by layer.

    Returns
    -------
    dict of numpy.ndarray, each of shape (n_layers + 1,), input first.

    Examples
    --------
    >>> curves = rank_collapse_curves({"pure": {}, "skip": {"skip": True}}, n_layers=4, seeds=range(3))
    >>> {name: r.shape for name, r in curves.items()}
    {'pure': (5,), 'skip': (5,)}
    """
    return {name: np.median([rank_collapse(n_tokens, d_model, n_layers, seed=s, **kw) for s in seeds], axis=0)
            for name, kw in stacks.items()}


def shrink_factor(residuals: Array, a: int, b: int) -> float:
    r"""Geometric-mean factor per layer by which a residual curve shrinks from layer ``a`` to ``b``.

    .. math::

        \Big(\frac{r_b}{r_a}\Big)^{1/(b - a)}

    1 means no shrinking; a pure exponential decay :math:`r_\ell = c\,\rho^\ell` gives :math:`\rho`.

    Examples
    --------
    >>> round(shrink_factor(0.5 ** np.arange(10), 2, 8), 12)
    0.5
    """
    r = to_numpy(residuals).astype(float)
    if not 0 <= a < b < len(r):
        raise ValueError(f"a={a}, b={b} for a curve of {len(r)} layers; expected 0 <= a < b < {len(r)}")
    return float((r[b] / r[a]) ** (1 / (b - a)))
