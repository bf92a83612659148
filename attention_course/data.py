"""Small, seeded data for the course's examples and tasks.

Everything here is generated in code from a ``seed``: nothing is downloaded.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["ToySentence", "toy_sentence"]


@dataclass(frozen=True)
class ToySentence:
    """A tiny self-attention example: tokens, embeddings and projections.

    Attributes
    ----------
    tokens : list of str, length n
    X : numpy.ndarray, shape (n, d_model)
        One embedding per token; repeated words share an embedding.
    W_q, W_k : numpy.ndarray, shape (d_model, d_k)
    W_v : numpy.ndarray, shape (d_model, d_v)
    """

    tokens: list
    X: np.ndarray
    W_q: np.ndarray
    W_k: np.ndarray
    W_v: np.ndarray


def toy_sentence(
    text: str = "the cat sat on the mat",
    d_model: int = 8,
    d_k: int = 4,
    d_v: int = 2,
    seed: int = 0,
) -> ToySentence:
    """Seeded embeddings and projections for a short sentence.

    The embeddings are random (one per distinct word, so repeated words get the
    same vector) and the projections are random with variance ``1/d_model``.
    In a trained model both would be learned; here they only serve to show the
    mechanics. ``d_v = 2`` lets the values be drawn in the plane.

    Examples
    --------
    >>> ex = toy_sentence()
    >>> ex.tokens, ex.X.shape, ex.W_q.shape, ex.W_v.shape
    (['the', 'cat', 'sat', 'on', 'the', 'mat'], (6, 8), (8, 4), (8, 2))
    >>> bool((ex.X[0] == ex.X[4]).all())   # both 'the' share an embedding
    True
    """
    tokens = text.split()
    if not tokens:
        raise ValueError("text is empty; expected at least one word")
    rng = np.random.default_rng(seed)
    vocab = sorted(set(tokens))
    table = rng.normal(size=(len(vocab), d_model))  # (|vocab|, d_model)
    X = table[[vocab.index(t) for t in tokens]]  # (n, d_model)
    scale = 1.0 / np.sqrt(d_model)
    W_q = rng.normal(scale=scale, size=(d_model, d_k))
    W_k = rng.normal(scale=scale, size=(d_model, d_k))
    W_v = rng.normal(scale=scale, size=(d_model, d_v))
    return ToySentence(tokens, X, W_q, W_k, W_v)
