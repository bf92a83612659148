"""Writing with chapter 9's decoder: greedy and sampled decoding, one new token at a time against the cache
(chapter 9's decoder, tokenizer and reference are re-exported so chapter 10's page imports one thing).
"""

from __future__ import annotations

from typing import Callable

import torch

from ..decoder.model import empty_cache, forward
from ..decoder.reproduce import PROMPTS, logit_estimate, stored_reference
from ..decoder.tokenizer import decode, encode
from .sampling import next_token_probs, sample

__all__ = ["forward", "empty_cache", "encode", "decode", "PROMPTS", "stored_reference", "logit_estimate", "greedy",
           "sample_tokens"]


@torch.no_grad()
def greedy(weights, ids: torch.Tensor, n_new: int, forward_fn: Callable = forward) -> list:
    """``n_new`` greedy tokens after ``ids`` (1, T): the prompt once, then one token per step with the cache.

    ``forward_fn(weights, ids, cache) -> (logits, cache)`` is the decoder (the package's by default).
    """
    logits, cache = forward_fn(weights, ids, empty_cache(weights.config, ids.shape[0], weights.embed.dtype))
    out = []
    for _ in range(n_new):
        nxt = logits[:, -1].argmax(dim=-1, keepdim=True)  # (1, 1): the largest logit
        out.append(int(nxt))
        logits, cache = forward_fn(weights, nxt, cache)
    return out


@torch.no_grad()
def sample_tokens(weights, ids: torch.Tensor, n_new: int, generator: torch.Generator, temperature: float = 1.0,
                  top_k: int = 0, top_p: float = 1.0, probs_fn: Callable = next_token_probs,
                  forward_fn: Callable = forward) -> list:
    """``n_new`` sampled tokens after ``ids`` (1, T), drawn with ``generator`` from ``probs_fn``'s distribution."""
    logits, cache = forward_fn(weights, ids, empty_cache(weights.config, ids.shape[0], weights.embed.dtype))
    out = []
    for _ in range(n_new):
        nxt = sample(probs_fn(logits[:, -1].double(), temperature, top_k, top_p), generator)  # (1,)
        out.append(int(nxt))
        logits, cache = forward_fn(weights, nxt[:, None], cache)
    return out
