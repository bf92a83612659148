r"""Efficient attention on a trained model's own queries, keys and values.

Every head's :math:`z_h = A_h v_h` in chosen layers of all-MiniLM-L6-v2 is replaced by an approximation
from that layer's own :math:`q_h, k_h, v_h`; the change of the output :math:`H` is measured as

.. math::

    \Delta = \frac{\|H' - H\|_F}{\|H\|_F}, \qquad
    c = \cos\Big(\tfrac1T\textstyle\sum_t H'_t,\ \tfrac1T\sum_t H_t\Big).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from ...core import approximations as approx
from ...core import efficient as eff
from ...core.attention import scaled_dot_product_attention
from .approximation_error import mean_of_values
from .head_swap import bert_forward_with, rank_k_weights

__all__ = []

Method = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]  # (q, k, v) -> z, all (B, h, T, d)


def _rank_oracle(q, k, v, budget):
    _, w = scaled_dot_product_attention(q, k, v)  # (B, h, T, T), exact weights
    return rank_k_weights(w, budget) @ v  # (B, h, T, d_v)


def replacements(budget: int = 32, num_features: int = 256, seed: int = 0) -> dict[str, Method]:
    """Every method compared on the model, ``fn(q, k, v) -> z``, each ``(B, h, T, d)``, at one budget.

    Examples
    --------
    >>> list(replacements())
    ['Nystrom', 'Linformer pool', 'Performer', 'top-k', 'rank-k of A', 'uniform', 'zeros']
    """
    return {
        "Nystrom": lambda q, k, v: approx.nystrom_attention(q, k, v, num_landmarks=budget),
        "Linformer pool": lambda q, k, v: approx.linformer_attention(q, k, v, proj_dim=budget, projection="mean"),
        "Performer": lambda q, k, v: approx.performer_attention(q, k, v, num_features=num_features, seed=seed),
        "top-k": lambda q, k, v: eff.topk_attention(q, k, v, top_k=budget),
        "rank-k of A": lambda q, k, v: _rank_oracle(q, k, v, budget),
        "uniform": mean_of_values,
        "zeros": lambda q, k, v: torch.zeros_like(v),
    }


def output_change(H1: torch.Tensor, H: torch.Tensor) -> tuple[float, float]:
    """``(relative change, pooled cosine)`` of last hidden states ``H1`` against ``H``, each ``(1, T, d)``.

    Examples
    --------
    >>> H = torch.ones(1, 3, 2, dtype=torch.float64)
    >>> [round(x, 12) for x in output_change(H, H) + output_change(2 * H, H)]
    [0.0, 1.0, 1.0, 1.0]
    """
    if H1.shape != H.shape or H.ndim != 3:
        raise ValueError(f"H1 has shape {tuple(H1.shape)} and H {tuple(H.shape)}; expected two (1, T, d)")
    change = float((H1 - H).norm() / H.norm())
    cos = float(torch.nn.functional.cosine_similarity(H1[0].mean(0), H[0].mean(0), dim=0))
    return change, cos


@torch.no_grad()
def replace_layers(weights: Any, input_ids: torch.Tensor, method: Method, layers: Sequence[int],
                   reference: torch.Tensor | None = None) -> tuple[float, float]:
    """Run the encoder with ``method`` in place of attention in ``layers`` (0-based): ``(change, pooled cosine)``.

    Examples
    --------
    >>> from attention_course.models.encoder import BertLayerWeights, BertWeights
    >>> g = torch.Generator().manual_seed(0)
    >>> r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)
    >>> layer = BertLayerWeights(*[r(4, 4) for _ in range(4)], *[r(4) for _ in range(6)],
    ...                          r(4, 8), r(8), r(8, 4), r(4), r(4), r(4))
    >>> w = BertWeights(r(10, 4), r(16, 4), r(2, 4), r(4), r(4), (layer,), num_heads=2, layer_norm_eps=1e-12)
    >>> exact = lambda q, k, v: scaled_dot_product_attention(q, k, v)[0]
    >>> [round(x, 12) for x in replace_layers(w, torch.tensor([[1, 2, 3]]), exact, [0])]  # exact: no change
    [0.0, 1.0]
    """
    H = bert_forward_with(weights, input_ids)[0][-1] if reference is None else reference  # (1, T, d)
    chosen = set(layers)
    H1 = bert_forward_with(weights, input_ids,
                           attend=lambda q, k, v, layer: method(q, k, v) if layer in chosen else None)[0][-1]
    return output_change(H1, H)
