r"""Why a trained model's scores spread more than :math:`d_k\,\sigma_q^2\sigma_k^2`: controls for the excess (chapter 6).

*Alignment* puts the excess in pairs of the same sentence; *anisotropy* (shared dominant directions) puts
it in every pair, and shuffling each coordinate across tokens removes it. :func:`variance_ratio_controls`
measures the ratio for each pair set; :func:`within_row_spread` the spread each softmax row sees.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

from ...core._backend import Array, ShapeError, shape_str, to_numpy

__all__ = ["PAIR_SETS", "variance_ratio_controls", "within_row_spread"]

#: The pair sets of :func:`variance_ratio_controls`, in order.
PAIR_SETS = ("same sentence", "different sentences", "random pairs", "shuffled coordinates")


def _check(q: Array, k: Array, valid: Optional[Array]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    q, k = np.asarray(to_numpy(q), dtype=float), np.asarray(to_numpy(k), dtype=float)
    if q.ndim != 4 or q.shape != k.shape:
        raise ShapeError(f"q has shape {shape_str(q)} and k has shape {shape_str(k)}; expected "
                         f"equal shapes (B, h, T, d_k) for self-attention")
    B, _, T, _ = q.shape
    valid = np.ones((B, T), bool) if valid is None else np.asarray(to_numpy(valid), dtype=bool)
    if valid.shape != (B, T):
        raise ShapeError(f"valid has shape {shape_str(valid)} but q has shape {shape_str(q)}; expected (B, T) = ({B}, {T})")
    return q, k, valid


def variance_ratio_controls(q: Array, k: Array, valid: Optional[Array] = None, seed: int = 0,
                            n_random: int = 20000) -> dict[str, np.ndarray]:
    r"""Measured over predicted variance of :math:`q_i\cdot k_j` per head, for the pair sets :data:`PAIR_SETS`.

    Keys are centred per head (no attention weight changes); the prediction is
    :math:`d_k\,\widehat{\operatorname{Var}}(q)\,\widehat{\operatorname{Var}}(k)` over the pooled real tokens.
    ``"random pairs"`` draws ``n_random`` pairs; ``"shuffled coordinates"`` permutes each coordinate across
    tokens independently (``seed``).

    Parameters
    ----------
    q, k : array, shape (B, h, T, d_k)
    valid : array of bool, shape (B, T), optional
        ``True`` = a real token. Default: all tokens.

    Returns
    -------
    dict
        :data:`PAIR_SETS` -> ratio per head, each (h,).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> q, k = rng.normal(size=(6, 2, 20, 32)), rng.normal(size=(6, 2, 20, 32))
    >>> {name: r.round(1).tolist() for name, r in variance_ratio_controls(q, k).items()}
    {'same sentence': [1.0, 1.0], 'different sentences': [1.0, 1.0], 'random pairs': [1.0, 1.0], 'shuffled coordinates': [1.0, 1.0]}
    """
    q, k, valid = _check(q, k, valid)
    B, h, T, d_k = q.shape
    rng = np.random.default_rng(seed)
    sent = np.broadcast_to(np.arange(B)[:, None], (B, T))[valid]  # (N,): the sequence of each real token
    q_pool = np.moveaxis(q, 1, 0)[:, valid]  # (h, N, d_k)
    k_pool = np.moveaxis(k, 1, 0)[:, valid]  # (h, N, d_k)
    k_pool = k_pool - k_pool.mean(axis=1, keepdims=True)  # centred keys: no attention weight changes
    N = q_pool.shape[1]
    predicted = d_k * q_pool.reshape(h, -1).var(axis=1) * k_pool.reshape(h, -1).var(axis=1)  # (h,)
    s = q_pool @ np.swapaxes(k_pool, -1, -2)  # (h, N, N): q_i . k_j for every pooled pair
    same = sent[:, None] == sent[None, :]  # (N, N)
    i, j = rng.integers(N, size=int(n_random)), rng.integers(N, size=int(n_random))  # random pairs
    perm = lambda x: np.stack([x[:, rng.permutation(N), c] for c in range(d_k)], axis=-1)  # noqa: E731  (h, N, d_k)
    s_shuffled = perm(q_pool) @ np.swapaxes(perm(k_pool), -1, -2)  # (h, N, N)
    measured = {"same sentence": s[:, same].var(axis=1), "different sentences": s[:, ~same].var(axis=1),
                "random pairs": s[:, i, j].var(axis=1), "shuffled coordinates": s_shuffled.reshape(h, -1).var(axis=1)}
    return {name: measured[name] / predicted for name in PAIR_SETS}


def within_row_spread(q: Array, k: Array, valid: Optional[Array] = None, causal: bool = False) -> np.ndarray:
    r"""For every real query, the std of :math:`q_i\cdot k_j/\sqrt{d_k}` over the real keys of its sequence.

    With ``causal=True`` the keys are :math:`j \le i`, and rows with fewer than two keys are left out.

    Returns
    -------
    np.ndarray, shape (h, N)
        One value per head and real query kept.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> q, k = rng.normal(size=(4, 1, 50, 64)), rng.normal(size=(4, 1, 50, 64))
    >>> round(float(np.median(within_row_spread(q, k))), 1)
    1.0
    """
    q, k, valid = _check(q, k, valid)
    d_k = q.shape[-1]
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(d_k)  # (B, h, T, T)
    T = q.shape[-2]
    keys = valid[:, None, None, :]  # (B, 1, 1, T): real keys
    if causal:
        keys = keys & np.tril(np.ones((T, T), bool))  # (B, 1, T, T): key j <= query i
    n = keys.sum(-1)  # (B, 1, 1) or (B, 1, T)
    mean = np.where(keys, s, 0.0).sum(-1) / np.maximum(n, 1)  # (B, h, T)
    var = np.where(keys, (s - mean[..., None]) ** 2, 0.0).sum(-1) / np.maximum(n, 1)  # (B, h, T), over the row's keys
    rows = valid & (np.broadcast_to(n, (q.shape[0], 1, T))[:, 0] >= 2)  # (B, T): real queries with a spread
    return np.moveaxis(np.sqrt(var), 1, 0)[:, rows]  # (h, N)
