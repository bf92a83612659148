r"""Attention as an associative memory: store :math:`\pm 1` patterns, corrupt one, retrieve it (chapter 7).

The patterns are the columns of :math:`X` (``(d, M)``); a query :math:`\xi` is a stored pattern with a
share ``flip`` of its signs flipped. Softmax attention (the modern Hopfield update) and the
outer-product memory (linear attention with the identity feature map) retrieve in one step:

.. math:: \xi \leftarrow X \operatorname{softmax}(\beta X^\top \xi), \qquad \xi \leftarrow X X^\top \xi .

Retrieval is exact when the signs of the result are the stored pattern; the *capacity* at a ``d`` is
the largest ``M`` retrieved exactly in at least a share ``level`` of the trials. Numpy, float64, seeded.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

from ...models.experiments import read_json
from ...models.records import DATA_DIR

__all__ = ["memory_cues", "capacity", "recall_shares", "capacity_sweep", "outer_product_law", "exponential_law",
           "load_memory"]  # fmt: skip

#: The memories :func:`retrieve` knows: name -> inverse temperature rule (``None``: linear).
MEMORIES = {
    "softmax, beta = 1": lambda d: 1.0,
    "softmax, beta = 1/sqrt(d)": lambda d: 1.0 / math.sqrt(d),
    "outer product (linear)": None,
}


def store_patterns(d: int, n_patterns: int, seed: int = 0) -> np.ndarray:
    """``n_patterns`` random sign patterns of length ``d``, as the columns of ``X``.

    Returns
    -------
    numpy.ndarray, shape (d, n_patterns), entries in {-1.0, +1.0}

    Examples
    --------
    >>> X = store_patterns(8, 5, seed=0)
    >>> X.shape, sorted(set(X.ravel().tolist()))
    ((8, 5), [-1.0, 1.0])
    """
    if d < 1 or n_patterns < 1:
        raise ValueError(f"d={d}, n_patterns={n_patterns}; expected both >= 1")
    rng = np.random.default_rng(seed)
    return np.where(rng.random((d, n_patterns)) < 0.5, -1.0, 1.0)


def corrupt(patterns: np.ndarray, flip: float, seed: int = 0) -> np.ndarray:
    """Flip exactly ``round(flip * d)`` signs of every column of ``patterns`` (shape (d, n)).

    Examples
    --------
    >>> X = store_patterns(10, 3, seed=1)
    >>> (corrupt(X, 0.2, seed=0) != X).sum(axis=0).tolist()
    [2, 2, 2]
    """
    d, n = patterns.shape
    k = int(round(flip * d))
    rng = np.random.default_rng(seed)
    idx = np.argsort(rng.random((d, n)), axis=0)[:k]  # (k, n): the rows to flip in each column
    out = patterns.copy()
    cols = np.broadcast_to(np.arange(n), idx.shape)
    out[idx, cols] *= -1.0
    return out


def memory_cues(d: int, n_patterns: int, n_queries: int = 200, flip: float = 0.1,
                seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One memory and its test cues: cue ``i`` is pattern ``i % n_patterns`` with ``round(flip * d)`` signs flipped.

    Returns
    -------
    X : numpy.ndarray, shape (d, n_patterns)
    queries : numpy.ndarray, shape (d, n_queries): the damaged cues
    clean : numpy.ndarray, shape (d, n_queries): the stored pattern each cue came from

    Examples
    --------
    >>> X, queries, clean = memory_cues(16, 4)
    >>> X.shape, queries.shape, (queries != clean).sum(axis=0)[:3].tolist()
    ((16, 4), (16, 200), [2, 2, 2])
    """
    X = store_patterns(d, n_patterns, seed=seed)
    clean = X[:, np.arange(n_queries) % n_patterns]  # (d, n_queries)
    return X, corrupt(clean, flip, seed=seed + 1), clean


def retrieve(X: np.ndarray, queries: np.ndarray, beta: Optional[float]) -> np.ndarray:
    r"""One retrieval step from the memory ``X`` (shape (d, M)) for ``queries`` (shape (d, n)).

    .. math::

        \text{softmax:}\ \xi \leftarrow X \operatorname{softmax}(\beta X^\top \xi), \qquad
        \text{linear (beta=None):}\ \xi \leftarrow X X^\top \xi

    Returns
    -------
    numpy.ndarray, shape (d, n): the retrieved vectors (before ``sign``).

    Examples
    --------
    >>> X = store_patterns(16, 4, seed=0)
    >>> q = corrupt(X, 0.1, seed=0)
    >>> bool((np.sign(retrieve(X, q, beta=1.0)) == X).all())
    True
    """
    if X.ndim != 2 or queries.ndim != 2 or X.shape[0] != queries.shape[0]:
        raise ValueError(f"X has shape {X.shape} and queries {queries.shape}; expected (d, M) and (d, n)")
    scores = X.T @ queries  # (M, n): $X^\top \xi$
    if beta is None:
        return X @ scores  # (d, n): the outer-product memory $X X^\top \xi$
    z = beta * scores
    z -= z.max(axis=0, keepdims=True)
    w = np.exp(z)
    w /= w.sum(axis=0, keepdims=True)  # (M, n): softmax over the stored patterns
    return X @ w  # (d, n)


def retrieval_accuracy(d: int, n_patterns: int, beta: Optional[float], flip: float = 0.1,
                       n_queries: int = 200, seed: int = 0) -> float:
    """Share of the ``n_queries`` cues of :func:`memory_cues` that one step retrieves exactly.

    Examples
    --------
    >>> retrieval_accuracy(32, 4, beta=1.0), retrieval_accuracy(32, 64, beta=None)
    (1.0, 0.005)
    """
    X, queries, clean = memory_cues(d, n_patterns, n_queries, flip, seed)
    out = np.sign(retrieve(X, queries, beta))
    return float((out == clean).all(axis=0).mean())


def capacity(accuracies: Sequence[float], sizes: Sequence[int], level: float = 0.9) -> int:
    """The largest stored count whose accuracy is at least ``level`` (0 when none is).

    Examples
    --------
    >>> capacity([1.0, 0.95, 0.5, 0.92], [1, 2, 4, 8])
    8
    """
    ok = [m for a, m in zip(accuracies, sizes) if a >= level]
    return int(max(ok)) if ok else 0


def recall_shares(d: int, sizes: Sequence[int], n_cues: int = 200, flip: float = 0.1,
                  seed: int = 0) -> dict[str, list[float]]:
    """Memory name (:data:`MEMORIES`) -> the share of ``n_cues`` damaged cues recalled exactly, one per size.

    Examples
    --------
    >>> recall_shares(16, [1, 64], n_cues=50)["outer product (linear)"]
    [1.0, 0.0]
    """
    return {name: [retrieval_accuracy(d, m, None if rule is None else rule(d), flip, n_cues, seed=seed) for m in sizes]
            for name, rule in MEMORIES.items()}


def capacity_sweep(dims: Sequence[int] = (16, 32, 64), max_log2: Sequence[int] = (10, 14, 17),
                   flip: float = 0.1, n_queries: int = 200, seeds: Sequence[int] = (0,)) -> dict:
    """Retrieval accuracy against the number of stored patterns (powers of 2) for every memory and ``d``.

    Returns
    -------
    dict
        ``{"dims", "flip", "n_queries", "seeds", "curves": {memory: {str(d): {"sizes", "accuracy"}}}}``;
        ``accuracy`` has one row per seed.

    Examples
    --------
    >>> r = capacity_sweep(dims=(16,), max_log2=(4,), n_queries=50)
    >>> r["curves"]["outer product (linear)"]["16"]["sizes"]
    [1, 2, 4, 8, 16]
    """
    curves: dict = {name: {} for name in MEMORIES}
    for d, top in zip(dims, max_log2):
        sizes = [2**i for i in range(top + 1)]
        per_seed = [recall_shares(d, sizes, n_queries, flip, seed=s) for s in seeds]
        for name in MEMORIES:
            curves[name][str(d)] = {"sizes": sizes, "accuracy": [shares[name] for shares in per_seed]}
    return {"dims": list(dims), "flip": flip, "n_queries": n_queries, "seeds": list(seeds), "curves": curves}


def outer_product_law(d: float) -> float:
    r"""The outer-product memory's capacity law, :math:`d / (4 \ln d)` (Amit et al. 1985; McEliece et al. 1987).

    Examples
    --------
    >>> round(outer_product_law(64), 2)
    3.85
    """
    return d / (4.0 * math.log(d))


def exponential_law(d: float, flip: float = 0.1) -> float:
    r"""The softmax (exponential-energy) memory's capacity rate, :math:`e^{\alpha d}` with
    :math:`\alpha = I(1 - 2\rho)/2` and :math:`I(x) = \tfrac12[(1+x)\ln(1+x) + (1-x)\ln(1-x)]`,
    for a share :math:`\rho` of flipped signs (Demircigil et al. 2017, at :math:`\beta = 1`).

    Examples
    --------
    >>> round(exponential_law(32), 1)
    361.1
    """
    x = 1.0 - 2.0 * flip
    info = 0.5 * ((1 + x) * math.log(1 + x) + ((1 - x) * math.log(1 - x) if x < 1 else 0.0))
    return math.exp(info / 2.0 * d)


#: The stored capacity sweep (``python -m attention_course insight-run --part memory``).
MEMORY_FILE = DATA_DIR / "insight_memory.json"


def load_memory(path=MEMORY_FILE) -> dict:
    """The stored :func:`capacity_sweep` (three seeds)."""
    return read_json(path)
