"""Reference solutions to the course's exercises, one function per exercise id.

The book shows each of these in a collapsed dropdown under its exercise, and a
test pastes them into solved copies of the notebooks to prove every check passes.
They are written to be read: plain numpy, one step per line.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SOLUTIONS"]


# ------------------------------------------------------------------ chapter 1
def stable_softmax(x):
    """Softmax over the last axis, stable for large logits."""
    z = x - x.max(axis=-1, keepdims=True)  # shift so the largest logit is 0
    e = np.exp(z)  # every entry in (0, 1]: no overflow
    return e / e.sum(axis=-1, keepdims=True)  # each row sums to 1


def attention(q, k, v):
    """Scaled dot-product attention: returns (output, weights)."""
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -2, -1) / np.sqrt(d_k)  # (..., T, S)
    weights = stable_softmax(scores)  # (..., T, S), rows sum to 1
    output = weights @ v  # (..., T, d_v)
    return output, weights


def causal_mask(T, S):
    """Boolean (T, S) mask: True where key j <= query i (may attend)."""
    i = np.arange(T)[:, None]  # (T, 1) query positions
    j = np.arange(S)[None, :]  # (1, S) key positions
    return j <= i  # (T, S)


def one_query_output(q_i, k, v):
    """Attention output for one query q_i (d_k,), written as an explicit sum."""
    d_k = q_i.shape[0]
    scores = np.array([q_i @ k_j / np.sqrt(d_k) for k_j in k])  # (S,)
    alphas = np.exp(scores - scores.max())
    alphas = alphas / alphas.sum()  # (S,), sums to 1
    return sum(alpha_j * v_j for alpha_j, v_j in zip(alphas, v))  # (d_v,)


SOLUTIONS = {
    "stable-softmax": stable_softmax,
    "attention": attention,
    "causal-mask": causal_mask,
    "one-query": one_query_output,
}
