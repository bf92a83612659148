r"""From logits to the next token: temperature, top-k, top-p (nucleus), then a seeded draw.

In ``transformers``' ``generate`` order: divide by the temperature (0: greedy, the first largest logit),
keep the top ``k`` (ties kept; ``k = 0`` keeps all), renormalise, keep the shortest prefix of the sorted
probabilities whose sum reaches ``p`` (the crossing token and its ties included), renormalise.
"""

from __future__ import annotations

import torch

__all__ = ["next_token_probs", "sample"]


def next_token_probs(logits: torch.Tensor, temperature: float, top_k: int, top_p: float) -> torch.Tensor:
    """The distribution the next token is drawn from: (B, V) logits -> (B, V) probabilities, rows summing to 1.

    Examples
    --------
    >>> z = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]], dtype=torch.float64))
    >>> next_token_probs(z, 1.0, 0, 0.7)                    # 0.5, then 0.8 >= 0.7: two tokens
    tensor([[0.6250, 0.3750, 0.0000, 0.0000]], dtype=torch.float64)
    >>> next_token_probs(z, 0.0, 0, 1.0)                    # greedy
    tensor([[1., 0., 0., 0.]], dtype=torch.float64)
    """
    if temperature == 0:
        return torch.zeros_like(logits).scatter_(-1, logits.argmax(dim=-1, keepdim=True), 1.0)  # (B, V) one-hot
    z = logits / temperature  # (B, V)
    if top_k > 0:
        kth = torch.topk(z, min(top_k, z.shape[-1]), dim=-1).values[..., -1:]  # (B, 1): the k-th largest
        z = z.masked_fill(z < kth, float("-inf"))
    probs = torch.softmax(z, dim=-1)  # (B, V), over the vocabulary
    if top_p < 1:
        sorted_p = probs.sort(dim=-1, descending=True).values  # (B, V)
        before = sorted_p.cumsum(dim=-1) - sorted_p  # (B, V): the mass of the tokens ranked above
        crossing = sorted_p.masked_fill(before >= top_p, float("inf")).amin(dim=-1, keepdim=True)  # (B, 1)
        crossing = torch.minimum(crossing, sorted_p[..., :1])  # top_p = 0: the most likely token (and its ties)
        probs = probs.masked_fill(probs < crossing, 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


def sample(probs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One token per row, drawn from ``probs`` (B, V) with ``generator``: (B,) int64.

    Examples
    --------
    >>> sample(torch.tensor([[0.0, 1.0, 0.0]]), torch.Generator().manual_seed(0))
    tensor([1])
    """
    return torch.multinomial(probs, 1, generator=generator)[:, 0]  # (B,)
