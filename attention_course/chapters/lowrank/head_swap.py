r"""Run a model with every head's attention replaced: rank-:math:`k`, top-:math:`k` or uniform.

.. math::

    z_h = \mathcal T_\ell(A_h)\, v_h \quad\text{instead of}\quad z_h = A_h v_h

through each model's own ``attention_override``; transforms map ``(B, h, T, S)`` to ``(B, h, T, S)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

import torch

from ...core.attention import causal_mask
from ...models.encoder import bert_encode
from ...models.override import AttentionOverride

__all__ = []

Transform = Callable[[torch.Tensor, int], torch.Tensor]  # (weights (B, h, T, S), layer) -> (B, h, T, S)


def rank_k_weights(w: torch.Tensor, k: int, causal: bool = False) -> torch.Tensor:
    r"""Best rank-``k`` approximation of every matrix in ``w`` (Eckart-Young), optionally kept causal.

    .. math::

        \tilde A = U_k \Sigma_k V_k^\top, \qquad
        \tilde A \leftarrow \tilde A \odot M_{\text{causal}} \text{ if ``causal``}

    Rows are not renormalised. ``w``: (..., T, S) -> (..., T, S); ``0 <= k <= min(T, S)``;
    ``causal`` zeroes the keys ``j > i`` after truncating.

    Examples
    --------
    >>> rank_k_weights(torch.diag(torch.tensor([3.0, 2.0, 1.0])), 1)
    tensor([[3., 0., 0.],
            [0., 0., 0.],
            [0., 0., 0.]])
    """
    T, S = w.shape[-2:]
    if int(k) != k or not 0 <= k <= min(T, S):
        raise ValueError(f"k={k!r} for weights of shape {tuple(w.shape)}; expected 0 <= k <= {min(T, S)}")
    U, s, Vh = torch.linalg.svd(w, full_matrices=False)  # (..., T, r), (..., r), (..., r, S)
    out = (U[..., :k] * s[..., None, :k]) @ Vh[..., :k, :]  # (..., T, S)
    if causal:
        out = out * torch.from_numpy(causal_mask(T, S)).to(out.dtype)  # zero keys j > i
    return out


def topk_weights(w: torch.Tensor, k: int) -> torch.Tensor:
    r"""Keep each row's ``k`` largest weights and renormalise them to sum to 1.

    .. math::

        \tilde A_{ij} = \frac{A_{ij}\,[j \in \operatorname{top}_k(A_{i\cdot})]}
                             {\sum_{j' \in \operatorname{top}_k(A_{i\cdot})} A_{ij'}}

    ``w``: (..., T, S), non-negative -> (..., T, S), rows summing to 1; ``1 <= k <= S``.

    Examples
    --------
    >>> topk_weights(torch.tensor([[0.5, 0.2, 0.3]]), 2)
    tensor([[0.6250, 0.0000, 0.3750]])
    """
    S = w.shape[-1]
    if int(k) != k or not 1 <= k <= S:
        raise ValueError(f"k={k!r} for weights of shape {tuple(w.shape)}; expected 1 <= k <= {S}")
    vals, idx = w.topk(int(k), dim=-1)  # (..., T, k)
    out = torch.zeros_like(w).scatter(-1, idx, vals)  # (..., T, S)
    return out / out.sum(dim=-1, keepdim=True)


def uniform_weights(w: torch.Tensor, causal: bool = False) -> torch.Tensor:
    r"""Uniform weights over the keys each query may attend to: the output becomes a mean of values.

    .. math::

        \tilde A_{ij} = \frac{M_{ij}}{\sum_{j'} M_{ij'}}, \qquad
        M = \text{causal mask (True = may attend) or all ones}

    Only the shape (..., T, S) and dtype of ``w`` are used.

    Examples
    --------
    >>> uniform_weights(torch.zeros(3, 3), causal=True)
    tensor([[1.0000, 0.0000, 0.0000],
            [0.5000, 0.5000, 0.0000],
            [0.3333, 0.3333, 0.3333]])
    """
    T, S = w.shape[-2:]
    allowed = torch.from_numpy(causal_mask(T, S)) if causal else torch.ones(T, S, dtype=torch.bool)
    m = allowed.to(w.dtype)  # (T, S)
    return (m / m.sum(dim=-1, keepdim=True)).expand_as(w).clone()


def _swapping(transform: Optional[Transform]) -> Optional[AttentionOverride]:
    """The model's attention override that multiplies the values by ``transform(weights, layer)``."""
    if transform is None:
        return None
    return lambda q, k, v, weights, layer: transform(weights, layer) @ v  # (B, h, T, d_v)


def tiny_forward_with(model: Any, tokens: torch.Tensor,
                      transform: Optional[Transform] = None) -> torch.Tensor:
    r"""Logits of a :class:`~attention_course.models.tiny.TinyTransformer` with each layer's weights transformed.

    .. math::

        x \leftarrow x + \sum_h \mathcal T_\ell\big(\operatorname{softmax}(c\, q_h k_h^\top + M)\big)\,
        v_h W_O^h

    ``tokens`` (B, T) -> logits (B, T, vocab_size); ``transform`` ``(weights (B, h, T, T), layer) ->
    (B, h, T, T)``, default none (``model(tokens)[0]``).

    Examples
    --------
    >>> from attention_course.models.tiny import ModelConfig, TinyTransformer
    >>> model = TinyTransformer(ModelConfig(), seed=0)
    >>> tokens = torch.randint(0, 64, (2, 10), generator=torch.Generator().manual_seed(0))
    >>> own_map = lambda w, layer: w
    >>> bool(torch.equal(tiny_forward_with(model, tokens, own_map), model(tokens)[0]))
    True
    """
    return model(tokens, attention_override=_swapping(transform))[0]  # (B, T, vocab_size)


Attend = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, int], Optional[torch.Tensor]]  # (q, k, v, layer) -> z


def bert_forward_with(weights: Any, input_ids: torch.Tensor, transform: Optional[Transform] = None,
                      attend: Optional[Attend] = None) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    r"""Hidden states of a BERT encoder with each layer's attention weights transformed.

    Parameters
    ----------
    weights : :class:`~attention_course.models.encoder.BertWeights`
    input_ids : torch.LongTensor, shape (B, T), no padding
    transform : callable ``(weights (B, h, T, T), layer) -> (B, h, T, T)``, optional
    attend : callable ``(q, k, v, layer) -> z (B, h, T, d_v)`` or ``None``, optional
        Replaces a layer's whole attention output; returning ``None`` keeps exact attention there.

    Returns
    -------
    hidden : list of L+1 tensors (B, T, d)
    attentions : list of L tensors (B, h, T, T), each layer's weights before any transform.

    Examples
    --------
    >>> from attention_course.models.encoder import BertLayerWeights, BertWeights, bert_encode
    >>> g = torch.Generator().manual_seed(0)
    >>> r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)
    >>> layer = BertLayerWeights(*[r(4, 4) for _ in range(4)], *[r(4) for _ in range(6)],
    ...                          r(4, 8), r(8), r(8, 4), r(4), r(4), r(4))
    >>> w = BertWeights(r(10, 4), r(16, 4), r(2, 4), r(4), r(4), (layer,), num_heads=2, layer_norm_eps=1e-12)
    >>> ids = torch.tensor([[1, 2, 3]])
    >>> hidden, _ = bert_forward_with(w, ids, lambda a, layer: a)
    >>> bool(torch.equal(hidden[-1], bert_encode(w, ids).hidden_states[-1]))
    True
    """
    swap = _swapping(transform)

    def override(q, k, v, w, layer):  # each (B, h, T, d_k); w (B, h, T, T)
        z = attend(q, k, v, layer) if attend is not None else None  # (B, h, T, d_v) or None
        return swap(q, k, v, w, layer) if z is None and swap is not None else z

    out = bert_encode(weights, input_ids, attention_override=override)
    return list(out.hidden_states), list(out.attentions)
