r"""The effective, input-dependent graph of an attention head, and how it moves when words move (chapter 5).

For query :math:`i` the effective graph keeps the fewest keys holding a share ``mass`` of the
row's weight. After a shuffle of the words, a head that keeps the same *words* routes by content,
one that keeps the same *offsets* :math:`j - i` by position (:func:`shuffle_overlap`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ...core._backend import Array, ShapeError, to_numpy
from ..mechanics.properties import effective_keys

__all__ = ["shuffled_sentences"]


def shuffled_sentences(sentence: str, n_shuffles: int, seed: int = 0) -> tuple[list[str], list[list[int]]]:
    """The sentence and ``n_shuffles`` seeded shuffles of its words, the full stop kept last.

    Returns ``(texts, perms)``, ``perms[s][p]`` the original index of the word at place ``p`` of
    shuffle ``s`` (``texts[s + 1]``).

    Examples
    --------
    >>> texts, perms = shuffled_sentences("the cat sat on a mat.", 1, seed=1)
    >>> texts[1], perms[0]
    ('a the sat cat mat on.', [4, 0, 2, 1, 5, 3, 6])
    """
    if not sentence.endswith("."):
        raise ValueError(f"the sentence must end with a full stop: {sentence!r}")
    words = sentence[:-1].split()
    rng = np.random.default_rng(seed)
    perms = [rng.permutation(len(words)).tolist() + [len(words)] for _ in range(n_shuffles)]
    return [sentence] + [" ".join(words[i] for i in p[:-1]) + "." for p in perms], perms


def jaccard(a: frozenset, b: frozenset) -> float:
    r"""Jaccard overlap :math:`|a \cap b| / |a \cup b|` (1 for two empty sets).

    Examples
    --------
    >>> jaccard(frozenset({1, 2}), frozenset({2, 3}))
    0.3333333333333333
    """
    union = a | b
    return len(a & b) / len(union) if union else 1.0


def chance_jaccard(a: int, b: int, n: int) -> float:
    r"""Expected :func:`jaccard` of a fixed a-set and a uniformly random b-set of ``range(n)`` (hypergeometric overlap).

    .. math::

        \mathbb E\,J = \sum_k \frac{k}{a + b - k}\,\frac{\binom{a}{k}\binom{n - a}{b - k}}{\binom{n}{b}}.

    Examples
    --------
    >>> chance_jaccard(1, 1, 4), chance_jaccard(3, 3, 3)
    (0.25, 1.0)
    """
    if not (0 < a <= n and 0 < b <= n):
        raise ValueError(f"set sizes a={a}, b={b} must lie in 1..n={n}")
    return sum(k / (a + b - k) * math.comb(a, k) * math.comb(n - a, b - k)
               for k in range(max(0, a + b - n), min(a, b) + 1)) / math.comb(n, b)


def shuffle_overlap(original: Array, shuffled: Sequence[Array], perms: Sequence[Sequence[int]],
                    mass: float = 0.8) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""How much of each head's effective graph survives a shuffle of the words: by word and by offset.

    ``original`` (L, H, n, n) and each of ``shuffled`` are maps over the words (special tokens cut);
    ``perms[s][p]`` is the original index of the word at ``p`` in version ``s``. Returns ``words``,
    ``offsets`` and ``chance``, each (L, H): the :func:`jaccard` overlap of the same query word's
    effective keys, averaged over queries and versions, by original index, by offset :math:`j - i`,
    and for random keys of the same sizes.

    Examples
    --------
    >>> pos = np.eye(4, k=-1); pos[0, 0] = 1.0  # the previous position; row 0 itself
    >>> w, o, c = shuffle_overlap(pos[None, None], [pos[None, None]], [[3, 2, 1, 0]])  # reversed
    >>> float(o[0, 0]), float(w[0, 0]), float(c[0, 0])  # offset -1 kept by the 2 middle words
    (0.5, 0.0, 0.25)
    """
    A = to_numpy(original).astype(float)
    if A.ndim != 4 or A.shape[-1] != A.shape[-2]:
        raise ShapeError(f"original has shape {A.shape}; expected (L, H, n, n)")
    L, H, n, _ = A.shape
    words, offsets, chance = np.zeros((L, H)), np.zeros((L, H)), np.zeros((L, H))
    for B, perm in zip(shuffled, perms):
        B, perm = to_numpy(B).astype(float), np.asarray(perm)
        if B.shape != A.shape or sorted(perm.tolist()) != list(range(n)):
            raise ShapeError(f"a shuffled map has shape {B.shape} and perm {perm.tolist()}; expected "
                             f"{A.shape} and a permutation of range({n})")
        where = np.argsort(perm)  # where[i] = new position of original word i, (n,)
        for l in range(L):
            for h in range(H):
                K_a, K_b = effective_keys(A[l, h], mass), effective_keys(B[l, h], mass)
                for i in range(n):
                    kb = K_b[where[i]]
                    words[l, h] += jaccard(K_a[i], frozenset(perm[j] for j in kb))
                    offsets[l, h] += jaccard(frozenset(j - i for j in K_a[i]),
                                             frozenset(j - where[i] for j in kb))
                    chance[l, h] += chance_jaccard(len(K_a[i]), len(kb), n)
    count = n * len(perms)
    return words / count, offsets / count, chance / count
