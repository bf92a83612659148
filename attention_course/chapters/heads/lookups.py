r"""Several heads as several lookups at once: a layer built by hand (chapter 4's first picture).

Inputs :math:`x_i = [e_{w_i};\, p_i]` (one-hot word and position). Head 1, the previous word:
:math:`q_i = \beta\, p_{i-1}`, :math:`k_j = p_j`; head 2, the same word elsewhere:
:math:`q_i = \beta\, e_{w_i}`, :math:`k_j = e_{w_j}`. One head with the summed scores gives
:math:`\operatorname{softmax}(S_1 + S_2) \propto \operatorname{softmax}(S_1) \odot \operatorname{softmax}(S_2)`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...core.attention import softmax

__all__ = ["hand_built_heads"]


class HandBuiltHeads(NamedTuple):
    """The inputs, the two heads' projections (used as ``X @ W``) and their score matrices."""

    tokens: list  # T words
    X: np.ndarray  # (T, V + T): word one-hot, then position one-hot
    W_q: np.ndarray  # (2, V + T, V + T), one per head
    W_k: np.ndarray  # (2, V + T, V + T)
    scores: np.ndarray  # (2, T, T): S_i = (X W_q[i]) (X W_k[i])^T
    weights: np.ndarray  # (2, T, T): softmax(S_i), one lookup per head
    merged: np.ndarray  # (T, T): softmax(S_1 + S_2), one head asked to do both


def hand_built_heads(text: str = "the cat saw the dog and the dog saw the cat", beta: float = 6.0) -> HandBuiltHeads:
    r"""Two hand-written heads on one sentence: the previous word, and the same word elsewhere.

    ``text``: at least two words separated by spaces; ``beta``: the score of a match.

    Examples
    --------
    >>> hb = hand_built_heads("a b a c")
    >>> hb.X.shape, hb.weights.shape
    ((4, 7), (2, 4, 4))
    >>> int(hb.weights[0, 2].argmax()), hb.weights[1, 2].round(2).tolist()    # word 3 ("a"): previous word; both "a"s
    (1, [0.5, 0.0, 0.5, 0.0])
    """
    tokens = text.split()
    if len(tokens) < 2:
        raise ValueError(f"text has {len(tokens)} word(s); expected at least 2")
    vocab = sorted(set(tokens))
    V, T = len(vocab), len(tokens)
    X = np.hstack([np.eye(V)[[vocab.index(t) for t in tokens]], np.eye(T)])  # (T, V + T): [word; position]
    W_q, W_k = np.zeros((2, V + T, V + T)), np.zeros((2, V + T, V + T))
    W_q[0, V + 1:, V:V + T - 1] = beta * np.eye(T - 1)  # head 1: position i -> query p_{i-1}
    W_k[0, V:, V:] = np.eye(T)  # key p_j
    W_q[1, :V, :V] = beta * np.eye(V)  # head 2: query beta e_w
    W_k[1, :V, :V] = np.eye(V)  # key e_w
    q, k = X @ W_q, X @ W_k  # (2, T, V + T) each
    scores = q @ k.transpose(0, 2, 1)  # (2, T, T): S_i = q_i k_i^T
    return HandBuiltHeads(tokens, X, W_q, W_k, scores, softmax(scores), softmax(scores.sum(0)))
