r"""Do most tokens attend to a few relevant positions? The weight on a query's heaviest keys.

For a row :math:`a_i` of a head's attention matrix and a set of keys :math:`\mathcal S` to leave
out (the *sinks*, [CLS] and [SEP], where heads park weight they do not use), the weight on the
:math:`k` heaviest other keys is

.. math::

    m_k(i) = \max_{|J| = k,\ J \cap \mathcal S = \emptyset}\ \sum_{j \in J} a_{ij} ,

and the pair (head, query :math:`i`) is *focused* when :math:`m_k(i) \ge 1/2`: most of its weight
lies on :math:`k` positions that are words. The effective number of keys of a row,
:math:`\exp H(a_i)`, says the same without a threshold: 1 for a one-hot row, :math:`n` for a
uniform one. Both are functions of :math:`A` alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...core._backend import to_numpy
from ...models.pretrained import attention_maps
from ..mechanics.properties import row_entropy

__all__ = ["top_key_mass"]


def top_key_mass(A, k: int = 3, exclude: Sequence[int] = ()) -> np.ndarray:
    r"""The weight :math:`m_k(i)` on each row's ``k`` heaviest keys outside ``exclude``.

    Parameters
    ----------
    A : array, shape (..., T, S)
    k : int, 1 <= k
        How many keys (all remaining keys when fewer are left).
    exclude : sequence of int
        Key indices that do not count (e.g. ``[0, S - 1]``, [CLS] and [SEP]).

    Returns
    -------
    numpy.ndarray, shape (..., T)

    Examples
    --------
    >>> A = np.array([[0.6, 0.3, 0.1], [0.1, 0.2, 0.7]])
    >>> top_key_mass(A, k=1, exclude=[0]).round(2).tolist()
    [0.3, 0.7]
    >>> top_key_mass(A, k=2).round(2).tolist()
    [0.9, 0.9]
    """
    a = np.array(to_numpy(A), dtype=np.float64)
    if a.ndim < 2:
        raise ValueError(f"A has shape {a.shape}; expected (..., T, S)")
    if k < 1:
        raise ValueError(f"k={k}; expected k >= 1")
    keep = np.setdiff1d(np.arange(a.shape[-1]), np.asarray(exclude, dtype=int))
    a = np.sort(a[..., keep], axis=-1)  # (..., T, S'), ascending
    return a[..., ::-1][..., :k].sum(-1)  # (..., T)


def row_perplexity(A) -> np.ndarray:
    r"""Each row's perplexity :math:`\exp\big(-\sum_j a_{ij} \ln a_{ij}\big)`: how many keys it spreads over.

    A row spread evenly over :math:`k` keys gives :math:`k`. Not
    :func:`~attention_course.chapters.mechanics.properties.effective_keys`, the set of keys
    that carry a share of a row's weight.

    Examples
    --------
    >>> row_perplexity(np.array([[1.0, 0, 0, 0], [0.25, 0.25, 0.25, 0.25]])).round(6).tolist()
    [1.0, 4.0]
    """
    a = np.asarray(to_numpy(A), dtype=np.float64)
    return np.exp(row_entropy(a))  # (..., T)


def focus_study(sentences: Sequence[str], ks: Sequence[int] = (1, 2, 3, 4, 5, 6, 7, 8), k: int = 3,
                threshold: float = 0.5) -> dict:
    """The deciding run of ``few-relevant-positions``: MiniLM on each sentence alone.

    Queries are every token but [CLS] and [SEP]; sinks are [CLS] and [SEP]. Returns, per head
    (72 values, layer-major), the number of focused pairs, pairs in all and the mean sink weight;
    per ``k`` in ``ks`` the pooled focused share with sinks left out and with sinks allowed;
    the median effective number of keys; the share of focused pairs whose heaviest word key is
    adjacent to the query; and the uniform and previous-token patterns scored the same way.
    """
    tokens, maps = attention_maps(list(sentences))
    focused, pairs, sink, adjacent = np.zeros(72), np.zeros(72), np.zeros(72), np.zeros(72)
    by_k = {int(kk): [0.0, 0.0] for kk in ks}  # k -> [focused without sinks, focused with sinks]
    erank, unif, prev = [], 0, 0
    for toks, w in zip(tokens, maps):
        n = len(toks)
        A = w.reshape(72, n, n)[:, 1:n - 1]  # (72, n - 2, n): word queries, every key
        sinks = [0, n - 1]
        m = top_key_mass(A, k, sinks)  # (72, n - 2)
        f = m >= threshold
        focused += f.sum(1)
        pairs += m.shape[1]
        sink += A[..., sinks].sum(-1).sum(1)
        words = A.copy()
        words[..., sinks] = -1.0
        top = words.argmax(-1)  # (72, n - 2): heaviest word key
        adjacent += (f & (np.abs(top - np.arange(1, n - 1)) == 1)).sum(1)
        for kk in by_k:
            by_k[kk][0] += float((top_key_mass(A, kk, sinks) >= threshold).sum())
            by_k[kk][1] += float((top_key_mass(A, kk) >= threshold).sum())
        erank.append(row_perplexity(A).ravel())
        unif += int(n - 2) * int(min(k, n - 2) / n >= threshold)  # uniform over the n tokens
        prev += int(n - 2)  # all weight on the previous token: a word for every query but the first
        prev -= 1
    total = float(pairs.sum())
    return {"config": {"k": k, "threshold": threshold, "n_sentences": len(sentences)},
            "focused": focused.tolist(), "pairs": pairs.tolist(), "sink": (sink / pairs).tolist(),
            "adjacent": adjacent.tolist(),
            "by_k": {str(kk): {"words": v[0] / total, "any": v[1] / total} for kk, v in by_k.items()},
            "erank_median": float(np.median(np.concatenate(erank))),
            "uniform_share": unif / (total / 72), "previous_share": prev / (total / 72)}
