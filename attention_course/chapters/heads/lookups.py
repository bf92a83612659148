r"""Several heads as several lookups at once: a layer built by hand (chapter 4's first picture).

Each position's input is a word part and a position part, :math:`x_i = [e_{w_i};\, p_i]`
(one-hot vectors of the vocabulary and of the positions). Two heads are written down, not
trained:

* head 1, **the previous word**: :math:`q_i = \beta\, p_{i-1}`, :math:`k_j = p_j`, so its score
  :math:`q_i \cdot k_j = \beta` exactly when :math:`j = i - 1`;
* head 2, **the same word elsewhere**: :math:`q_i = \beta\, e_{w_i}`, :math:`k_j = e_{w_j}`, a
  score :math:`\beta` wherever the word repeats (a lookup by content).

Each head's row is :math:`\operatorname{softmax}(S_i)`, its own lookup. One head cannot do both:
a head whose scores are the sum :math:`S_1 + S_2` (what a single head with the summed bilinear
form computes) gives :math:`\operatorname{softmax}(S_1 + S_2) \propto \operatorname{softmax}(S_1)
\odot \operatorname{softmax}(S_2)`, weight only where both lookups agree.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...core.attention import softmax

__all__ = ["hand_built_heads"]


class HandBuiltHeads(NamedTuple):
    """The inputs, the two heads' projections and their score matrices.

    Attributes
    ----------
    tokens : list of str, length T
    X : (T, V + T) inputs, word one-hot then position one-hot
    W_q, W_k : (2, V + T, V + T), one pair per head, used as ``X @ W``
    scores : (2, T, T) the heads' scores :math:`S_i = (XW_Q^{(i)})(XW_K^{(i)})^\\top`
    weights : (2, T, T) :math:`\\operatorname{softmax}(S_i)`, one lookup per head
    merged : (T, T) :math:`\\operatorname{softmax}(S_1 + S_2)`, one head asked to do both
    """

    tokens: list
    X: np.ndarray
    W_q: np.ndarray
    W_k: np.ndarray
    scores: np.ndarray
    weights: np.ndarray
    merged: np.ndarray


def hand_built_heads(text: str = "the cat saw the dog and the dog saw the cat", beta: float = 6.0) -> HandBuiltHeads:
    r"""Two hand-written heads on one sentence: the previous word, and the same word elsewhere.

    Parameters
    ----------
    text : words separated by spaces (at least two)
    beta : the score of a match; larger = sharper lookups

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
