r"""Causal grouped-query attention (Ainslie et al. 2023), with queries that may sit after a cached prefix.

Each key/value head serves a group of consecutive query heads (SmolLM2: 9 query heads, 3 key/value
heads), so ``k`` and ``v`` are repeated with ``repeat_interleave`` (0, 0, 0, 1, ...), not ``repeat``.
The causal mask is aligned bottom-right: the ``T`` queries are the last ``T`` of the ``S`` positions.
"""

from __future__ import annotations

import math

import torch

from ...core._backend import ShapeError, shape_str

__all__ = ["grouped_query_attention"]


def repeat_kv(k: torch.Tensor, group: int) -> torch.Tensor:
    """Each key/value head ``group`` times in a row: (B, h_kv, S, d) -> (B, h_kv * group, S, d).

    Examples
    --------
    >>> repeat_kv(torch.arange(2.0).reshape(1, 2, 1, 1), 3).flatten().tolist()
    [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    """
    return k.repeat_interleave(group, dim=1)  # (B, h, S, d)


def decoder_mask(T: int, S: int) -> torch.Tensor:
    """(T, S) boolean, True = may attend: query ``t`` (at position ``S - T + t``) reads keys ``j <= S - T + t``.

    Examples
    --------
    >>> decoder_mask(2, 4).int()
    tensor([[1, 1, 1, 0],
            [1, 1, 1, 1]], dtype=torch.int32)
    """
    if not 0 < T <= S:
        raise ValueError(f"T={T}, S={S}; expected 0 < T <= S (the queries are the last T of the S positions)")
    return torch.ones(T, S, dtype=torch.bool).tril(diagonal=S - T)  # (T, S)


def grouped_query_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    r"""Causal attention with ``h_kv`` key/value heads shared by ``h`` query heads.

    .. math::

        o_i = \operatorname{softmax}\Big(\frac{q_i k_{g(i)}^\top}{\sqrt{d}} + M\Big) v_{g(i)},
        \qquad g(i) = \lfloor i / (h / h_{kv}) \rfloor

    Parameters
    ----------
    q : (B, h, T, d)
    k, v : (B, h_kv, S, d), with ``S >= T`` and ``h_kv`` dividing ``h``

    Returns
    -------
    torch.Tensor, shape (B, h, T, d)

    Examples
    --------
    >>> q, k = torch.randn(1, 4, 3, 8), torch.randn(1, 2, 3, 8)
    >>> tuple(grouped_query_attention(q, k, k).shape)
    (1, 4, 3, 8)
    """
    B, h, T, d = q.shape
    h_kv, S = k.shape[1], k.shape[2]
    if k.shape != v.shape or k.shape[0] != B or k.shape[-1] != d or h % h_kv or S < T:
        raise ShapeError(f"q {shape_str(q)}, k {shape_str(k)}, v {shape_str(v)}; expected q (B, h, T, d) and k, v "
                         f"(B, h_kv, S, d) with h_kv dividing h and S >= T")
    k, v = repeat_kv(k, h // h_kv), repeat_kv(v, h // h_kv)  # (B, h, S, d) each
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)  # (B, h, T, S)
    scores = scores.masked_fill(~decoder_mask(T, S), float("-inf"))
    weights = torch.softmax(scores, dim=-1)  # (B, h, T, S), over the keys
    return weights @ v  # (B, h, T, d)
