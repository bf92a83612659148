r"""Deep stacks of self-attention and rank collapse (Dong et al. 2021), for chapter 5.

Random stacks of single-head self-attention, with or without skip connections, MLPs and
LayerNorm, and the distance of the token matrix from rank 1,

.. math::

    \operatorname{res}(X) = \frac{\min_x \|X - \mathbf 1 x^\top\|_F}{\|X\|_F},

which pure attention shrinks doubly exponentially. :func:`attention_stack` also runs on torch
tensors, so autograd can differentiate through it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Optional

import numpy as np
import torch

from ...core import attention as att
from ...core._backend import Array, ShapeError, is_torch, shape_str, to_numpy

__all__ = ["init_stack_params", "rank_one_residual", "rank_collapse_curves", "shrink_factor", "rank_one_parts",
           "rank_one_part_curves"]


def init_stack_params(d_model: int, n_layers: int, *, seed: int, mlp: bool = False, d_ff: Optional[int] = None,
                      value_scale: float = 1.0) -> list[dict[str, np.ndarray]]:
    """Random float64 weights for :func:`attention_stack`, entries N(0, 1/fan_in).

    Each layer has ``W_q, W_k, W_v`` (d_model, d_model), ``W_v`` times ``value_scale``, and with
    ``mlp`` ``W_1`` (d_model, d_ff) and ``W_2`` (d_ff, d_model), ``d_ff = 4 d_model`` by default.

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


def attention_stack(x: Array, params: list[dict], mask: Optional[Array] = None, *, skip: bool = False,
                    mlp: bool = False, layernorm: bool = False) -> list[Array]:
    r"""Run single-head self-attention layers on ``x`` (T, d_model) or (B, T, d_model); returns ``[x_0, ..., x_L]``.

    Pure attention (default) is :math:`x_{\ell+1} = \operatorname{SA}(x_\ell)`; ``skip`` makes it
    :math:`x + \operatorname{SA}(x)`; ``mlp`` adds a ReLU MLP sublayer; ``layernorm`` applies
    LayerNorm without affine parameters after each sublayer (post-LN). ``mask`` (T, T): ``True`` =
    may attend.

    Examples
    --------
    >>> x = np.random.default_rng(0).normal(size=(6, 8))
    >>> outs = attention_stack(x, init_stack_params(8, 3, seed=0), skip=True)
    >>> len(outs), outs[-1].shape
    (4, (6, 8))
    """
    if x.ndim not in (2, 3) or x.shape[-1] != params[0]["W_q"].shape[0]:
        d = params[0]["W_q"].shape[0]
        raise ShapeError(f"x has shape {shape_str(x)}; expected (T, {d}) or (B, T, {d}) for these params")
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


def _tokens(x: Array) -> np.ndarray:
    X = to_numpy(x).astype(float)
    if X.ndim != 2:
        raise ShapeError(f"x has shape {X.shape}; expected (T, d) tokens by features")
    return X


def rank_one_residual(x: Array) -> float:
    r"""Relative distance to rank 1 in the Frobenius norm, minimised by the mean row :math:`\bar x`.

    .. math::

        \operatorname{res}(X) = \frac{\|X - \mathbf 1 \bar x^\top\|_F}{\|X\|_F}

    Examples
    --------
    >>> rank_one_residual(np.array([[1.0, 2.0], [1.0, 2.0]]))
    0.0
    """
    X = _tokens(x)
    return float(np.linalg.norm(X - X.mean(axis=0, keepdims=True)) / np.linalg.norm(X))


def rank_one_parts(x: Array) -> tuple[float, float]:
    r"""The two absolute sizes behind :func:`rank_one_residual` for ``x`` (T, d): spread and shared part.

    .. math::

        D(X) = \|X - \mathbf 1 \bar x^\top\|_F, \qquad S(X) = \sqrt{T}\,\|\bar x\|_2,

    orthogonal parts, so the residual is :math:`D / \sqrt{D^2 + S^2}` and can shrink because *S* grows.

    Examples
    --------
    >>> D, S = rank_one_parts(np.array([[1.0, 2.0], [3.0, 2.0]]))  # mean row (2, 2)
    >>> round(D ** 2, 12), round(S ** 2, 12)  # rows differ by (-1, 0), (1, 0); sqrt(2) * |(2, 2)|
    (2.0, 16.0)
    """
    X = _tokens(x)
    mean = X.mean(axis=0, keepdims=True)  # (1, d)
    return float(np.linalg.norm(X - mean)), float(math.sqrt(X.shape[0]) * np.linalg.norm(mean))


def _random_stack(n_tokens: int, d_model: int, n_layers: int, seed: int, *, skip: bool, mlp: bool,
                  layernorm: bool, value_scale: float) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n_tokens, d_model))
    params = init_stack_params(d_model, n_layers, seed=seed + 1, mlp=mlp, value_scale=value_scale)
    return attention_stack(x, params, skip=skip, mlp=mlp, layernorm=layernorm)


def rank_one_part_curves(n_tokens: int = 16, d_model: int = 64, n_layers: int = 48, *,
                         seeds: Sequence[int] = range(5), skip: bool = False, mlp: bool = False,
                         layernorm: bool = False, value_scale: float = 1.0) -> np.ndarray:
    """:func:`rank_one_parts` (D, S) after each layer of :func:`rank_collapse`'s stacks: (len(seeds), n_layers + 1, 2).

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


def rank_collapse(n_tokens: int = 16, d_model: int = 64, n_layers: int = 5, *, seed: int = 0, skip: bool = False,
                  mlp: bool = False, layernorm: bool = False, value_scale: float = 1.0) -> np.ndarray:
    """Distance to rank 1 after each layer of a random stack, input first: (n_layers + 1,).

    Inputs are standard normal (seed ``seed``), weights from :func:`init_stack_params` (seed ``seed + 1``).

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


def rank_collapse_curves(stacks: dict[str, dict], n_tokens: int = 16, d_model: int = 64, n_layers: int = 48,
                         seeds: Sequence[int] = range(5)) -> dict[str, np.ndarray]:
    """Per named stack (keywords of :func:`rank_collapse`), the layer-wise median over ``seeds``: (n_layers + 1,).

    Examples
    --------
    >>> curves = rank_collapse_curves({"pure": {}, "skip": {"skip": True}}, n_layers=4, seeds=range(3))
    >>> {name: r.shape for name, r in curves.items()}
    {'pure': (5,), 'skip': (5,)}
    """
    return {name: np.median([rank_collapse(n_tokens, d_model, n_layers, seed=s, **kw) for s in seeds], axis=0)
            for name, kw in stacks.items()}


def shrink_factor(residuals: Array, a: int, b: int) -> float:
    r"""Geometric-mean factor per layer by which residuals shrink from ``a`` to ``b``: :math:`(r_b/r_a)^{1/(b - a)}`.

    Examples
    --------
    >>> round(shrink_factor(0.5 ** np.arange(10), 2, 8), 12)
    0.5
    """
    r = to_numpy(residuals).astype(float)
    if not 0 <= a < b < len(r):
        raise ValueError(f"a={a}, b={b} for a curve of {len(r)} layers; expected 0 <= a < b < {len(r)}")
    return float((r[b] / r[a]) ** (1 / (b - a)))
