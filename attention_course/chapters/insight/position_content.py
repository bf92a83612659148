r"""Does a head attend by content or by position? A per-head count from word shuffles (chapter 7).

Follow query word :math:`i` to its new place :math:`\pi^{-1}(i)` in a shuffle and correlate its row
:math:`a_i` with its shuffled row :math:`b`, read two ways (:func:`follow_scores`):

.. math::

    \text{by word:}\quad a_{ij} \leftrightarrow b_{\pi^{-1}(i),\,\pi^{-1}(j)}, \qquad
    \text{by offset:}\quad a_{ij} \leftrightarrow b_{\pi^{-1}(i),\,\pi^{-1}(i) + (j - i)}.

A content head matches by word, a position head by offset; uniform attention scores 0 in both.
:func:`classify_heads` sorts heads into content, position, sink and mixed, :func:`content_verdict`
applies ``content-not-position``'s rule to :func:`kind_shares`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ...core._backend import Array, ShapeError, to_numpy
from ..graphs.topology import shuffled_sentences
from ..graphs.topology_rule_table import content_maps, head_sink_shares
from ..lowrank.baselines import SINK_THRESHOLD

__all__ = ["CATEGORIES", "word_maps", "classify_heads", "rule_scores", "content_verdict", "verdict_range"]

#: The margin by which one correlation must beat the other (content or position head); swept on the page.
MARGIN = 0.2

#: The four kinds of head, in the order they are counted.
CATEGORIES = ("content", "position", "sink", "mixed")


def _check(maps: Array) -> np.ndarray:
    A = np.asarray(to_numpy(maps), dtype=float)
    if A.ndim != 4 or A.shape[-1] != A.shape[-2] or A.shape[-1] < 3:
        raise ShapeError(f"maps have shape {A.shape}; expected (L, H, n, n) with n >= 3 "
                         "([CLS], at least one word, [SEP])")
    return A


def word_maps(maps: Array) -> np.ndarray:
    r"""Cut ``[CLS]`` and ``[SEP]`` (first and last token) away and renormalise each row.

    ``maps`` (L, H, n, n) becomes (L, H, n-2, n-2): each word's weights over the words, summing to 1.

    Examples
    --------
    >>> A = np.full((1, 1, 4, 4), 0.25)
    >>> word_maps(A)[0, 0]
    array([[0.5, 0.5],
           [0.5, 0.5]])
    """
    cut = _check(maps)[:, :, 1:-1, 1:-1]  # (L, H, m, m), m = n - 2
    return cut / cut.sum(axis=-1, keepdims=True)


def _row_corr(x: np.ndarray, y: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Pearson correlation along the last axis over the ``valid`` entries; 0 where a row is constant."""
    k = valid.sum(axis=-1)  # (..., m)
    mx = (x * valid).sum(-1) / k
    my = (y * valid).sum(-1) / k
    dx, dy = (x - mx[..., None]) * valid, (y - my[..., None]) * valid
    sxy, sxx, syy = (dx * dy).sum(-1), (dx * dx).sum(-1), (dy * dy).sum(-1)
    den = np.sqrt(sxx * syy)
    flat = den < 1e-12  # a constant row (uniform attention) follows nothing: correlation 0 by convention
    return np.where(flat, 0.0, sxy / np.where(flat, 1.0, den))


def follow_scores(original: Array, shuffled: Sequence[Array], perms: Sequence[Sequence[int]],
                  causal: bool = False) -> tuple[np.ndarray, np.ndarray]:
    r"""How well each head's rows follow the words and how well they follow the offsets under shuffles.

    Parameters
    ----------
    original : array, shape (L, H, m, m)
        Rows over the ``m`` words of a sentence (a head's content part, e.g. :func:`word_maps`).
    shuffled : sequence of arrays, each (L, H, m, m)
        The same for shuffled versions of it.
    perms : sequence of int sequences, each of length m
        ``perms[s][p]`` is the original index of the word at place ``p`` of version ``s``.
    causal : bool
        Row ``i`` sees only keys ``j <= i`` (a decoder): only pairs visible in both orders are compared.

    Returns
    -------
    by_word, by_offset : numpy.ndarray, each (L, H)
        Pearson correlations averaged over the query words and the shuffles, over the keys compared in
        both sentences (a constant row correlates 0; a row with fewer than two keys is left out).

    Examples
    --------
    >>> prev = np.eye(5, k=-1); prev[0, 0] = 1.0          # previous word (the first reads itself)
    >>> w, o = follow_scores(prev[None, None], [prev[None, None]], [[4, 2, 0, 3, 1]])
    >>> round(float(w[0, 0]), 2), round(float(o[0, 0]), 2)    # rows at the ends lose their offset
    (-0.25, 0.75)
    >>> w, o = follow_scores(prev[None, None], [prev[None, None]], [[4, 2, 0, 3, 1]], causal=True)
    >>> round(float(w[0, 0]), 2), round(float(o[0, 0]), 2)    # looking back only
    (-0.25, 1.0)
    """
    A = np.asarray(to_numpy(original), dtype=float)
    if A.ndim != 4 or A.shape[-1] != A.shape[-2]:
        raise ShapeError(f"original has shape {A.shape}; expected (L, H, m, m)")
    m = A.shape[-1]
    sums = {"word": np.zeros(A.shape[:2]), "offset": np.zeros(A.shape[:2])}
    i, j = np.meshgrid(np.arange(m), np.arange(m), indexing="ij")  # (m, m) query, key
    back = j <= i if causal else np.ones((m, m), bool)  # (m, m) keys the query sees in the original
    for B, perm in zip(shuffled, perms):
        B, perm = np.asarray(to_numpy(B), dtype=float), np.asarray(perm)
        if B.shape != A.shape or sorted(perm.tolist()) != list(range(m)):
            raise ShapeError(f"a shuffled map has shape {B.shape} and perm {perm.tolist()}; expected "
                             f"{A.shape} and a permutation of range({m})")
        where = np.argsort(perm)  # where[i] = new place of original word i, (m,)
        same_word = B[:, :, where[i], where[j]]  # (L, H, m, m): b at the places of words i and j
        word_seen = back & ((where[j] <= where[i]) if causal else True)  # (m, m) visible in both orders
        jj = where[i] + (j - i)  # (m, m) key place at the same offset from the moved query
        offset_seen = back & (jj >= 0) & (jj < m)  # (m, m) offsets that exist (and look back) in both
        same_offset = B[:, :, where[i], np.clip(jj, 0, m - 1)]  # (L, H, m, m)
        for key, y, seen in (("word", same_word, word_seen), ("offset", same_offset, offset_seen)):
            rows = seen.sum(-1) >= 2  # (m,) queries with a correlation
            sums[key] += _row_corr(A[..., rows, :], y[..., rows, :], seen[rows]).mean(-1)
    return sums["word"] / len(perms), sums["offset"] / len(perms)


def best_offset_share(maps: Sequence[Array]) -> tuple[np.ndarray, np.ndarray]:
    r"""The head's best fixed offset :math:`d` and its share :math:`\operatorname{mean}_i a_{i,i+d}`, averaged over maps.

    Returns ``(share, offset)``, each (L, H). Uniform attention over m words scores 1/m.

    Examples
    --------
    >>> prev = np.eye(4, k=-1); prev[0, 0] = 1.0
    >>> share, offset = best_offset_share([prev[None, None]])
    >>> float(share[0, 0]), int(offset[0, 0])
    (1.0, -1)
    """
    lengths = {np.shape(a)[-1] for a in maps}
    if len(lengths) != 1:
        raise ShapeError(f"maps cover different lengths {sorted(lengths)}; pass the versions of one sentence")
    m = lengths.pop()
    offsets = np.arange(-(m - 1), m)
    shares = 0.0
    for A in maps:
        A = np.asarray(to_numpy(A), dtype=float)
        shares = shares + np.stack([np.diagonal(A, offset=int(d), axis1=-2, axis2=-1).mean(-1)
                                    for d in offsets], axis=-1)  # (L, H, 2m-1); diagonal d holds a[i, i+d]
    shares = shares / len(maps)
    best = shares.argmax(axis=-1)  # (L, H)
    return np.take_along_axis(shares, best[..., None], -1)[..., 0], offsets[best]


def classify_heads(sink: np.ndarray, by_word: np.ndarray, by_offset: np.ndarray,
                   sink_tol: float = SINK_THRESHOLD, margin_tol: float = MARGIN) -> np.ndarray:
    r"""Sort heads into ``"sink"``, ``"content"``, ``"position"`` and ``"mixed"``.

    A *sink* has a sink share of at least ``sink_tol``; otherwise *content* or *position* when that reading
    wins by more than ``margin_tol``, else *mixed*.

    Examples
    --------
    >>> classify_heads(np.array([0.9, 0.1, 0.1, 0.1]), np.array([0.0, 0.9, 0.1, 0.5]),
    ...                np.array([0.0, 0.1, 0.9, 0.4]))
    array(['sink', 'content', 'position', 'mixed'], dtype='<U8')
    """
    label = np.where(by_word - by_offset > margin_tol, "content",
                     np.where(by_offset - by_word > margin_tol, "position", "mixed"))
    return np.where(np.asarray(sink) >= sink_tol, "sink", label).astype("<U8")


def count_categories(labels: np.ndarray) -> dict[str, int]:
    """How many heads fall in each of :data:`CATEGORIES`.

    Examples
    --------
    >>> count_categories(np.array(["sink", "content", "content"]))
    {'content': 2, 'position': 0, 'sink': 1, 'mixed': 0}
    """
    return {c: int((np.asarray(labels) == c).sum()) for c in CATEGORIES}


def kind_shares(labels: np.ndarray) -> dict[str, float]:
    """Shares of ALL heads in each of :data:`CATEGORIES` (they sum to 1).

    Examples
    --------
    >>> kind_shares(np.array(["sink", "content", "content", "mixed"]))
    {'content': 0.5, 'position': 0.0, 'sink': 0.25, 'mixed': 0.25}
    """
    lab = np.asarray(labels).ravel()
    unknown = set(lab.tolist()) - set(CATEGORIES)
    if lab.size == 0 or unknown:
        raise ValueError(f"labels {sorted(unknown) or 'empty'}; expected a non-empty list of {CATEGORIES}")
    return {c: float((lab == c).mean()) for c in CATEGORIES}


def content_verdict(shares: Mapping[str, float]) -> str:
    """``content-not-position``'s rule on one model's shares of all heads (:func:`kind_shares`), fixed before its run.

    Examples
    --------
    >>> content_verdict({"content": 0.5, "position": 0.1, "sink": 0.4, "mixed": 0.0})
    'holds'
    >>> content_verdict({"content": 0.3, "position": 0.1, "sink": 0.5, "mixed": 0.1})
    'holds when'
    >>> content_verdict({"content": 0.2, "position": 0.2, "sink": 0.6, "mixed": 0.0})
    'wrong as stated'
    """
    if shares["content"] >= 0.5:
        return "holds"
    return "wrong as stated" if shares["position"] >= shares["content"] else "holds when"


def verdict_range(values: Sequence[float], verdicts: Sequence[str], chosen: float) -> tuple[float, float]:
    """The unbroken run of ``values`` around ``chosen`` whose verdict is the one at ``chosen``: ``(lowest, highest)``.

    Examples
    --------
    >>> verdict_range([0.1, 0.2, 0.3, 0.4], ["holds", "holds when", "holds when", "holds"], 0.2)
    (0.2, 0.3)
    """
    values = list(values)
    if chosen not in values or len(values) != len(verdicts):
        raise ValueError(f"chosen={chosen} must be one of the {len(values)} values {values}, one verdict each "
                         f"({len(verdicts)} given)")
    i = lo = hi = values.index(chosen)
    while lo > 0 and verdicts[lo - 1] == verdicts[i]:
        lo -= 1
    while hi + 1 < len(values) and verdicts[hi + 1] == verdicts[i]:
        hi += 1
    return values[lo], values[hi]


def rule_maps(perms: Sequence[Sequence[int]], rule: str) -> list[np.ndarray]:
    r"""Baseline heads on a sentence and its shuffles (the original first): one (1, 1, m, m) map per version.

    ``rule``: ``"uniform"``, ``"previous"`` (the word one place back; a position rule) or ``"first word"``
    (the sentence's first word wherever it stands; a content rule).

    Examples
    --------
    >>> maps = rule_maps([[1, 0, 2]], "first word")
    >>> maps[1][0, 0]          # the first word now stands at place 1
    array([[0., 1., 0.],
           [0., 1., 0.],
           [0., 1., 0.]])
    """
    m = len(perms[0])
    out = []
    for perm in [list(range(m))] + [list(p) for p in perms]:
        if rule == "uniform":
            A = np.full((m, m), 1.0 / m)
        elif rule == "previous":
            A = np.eye(m, k=-1)
            A[0, 0] = 1.0
        elif rule == "first word":
            A = np.zeros((m, m))
            A[:, int(np.argsort(perm)[0])] = 1.0
        else:
            raise ValueError(f"rule {rule!r} is not one of 'uniform', 'previous', 'first word'")
        out.append(A[None, None])  # (1, 1, m, m)
    return out


def rule_scores(sentences: Sequence[str], rule: str, n_shuffles: int = 5, seed: int = 0) -> tuple[float, float]:
    """:func:`follow_scores` of a baseline head (:func:`rule_maps`), averaged over the sentences' shuffles.

    The shuffles are those of :func:`content_position_scores` with the same ``n_shuffles`` and ``seed``.

    Examples
    --------
    >>> rule_scores(["one two three four five six."], "uniform")     # follows nothing
    (0.0, 0.0)
    >>> [round(x, 2) for x in rule_scores(["one two three four five six."], "first word")]
    [1.0, 0.16]
    """
    words, offsets = [], []
    for s, sentence in enumerate(sentences):
        _, perms = shuffled_sentences(sentence, n_shuffles, seed + s)
        maps = rule_maps(perms, rule)
        w, o = follow_scores(maps[0], maps[1:], perms)
        words.append(float(w[0, 0]))
        offsets.append(float(o[0, 0]))
    return float(np.mean(words)), float(np.mean(offsets))


@dataclasses.dataclass(frozen=True)
class ContentPositionScores:
    """Per-sentence scores of every head (see :func:`content_position_scores`); each array is (S, L, H)."""

    sink: np.ndarray  # sink share: mean weight on the sinks over all rows of the sentence and its shuffles
    by_word: np.ndarray  # correlation of a word's row with its row after a shuffle, matched by word
    by_offset: np.ndarray  # the same, matched by offset from the query
    offset_share: np.ndarray  # weight on the head's best fixed offset, over the sentence and its shuffles
    best_offset: np.ndarray  # that offset (int)
    n_shuffles: int

    def labels(self, sink_tol: float = SINK_THRESHOLD, margin_tol: float = MARGIN) -> np.ndarray:
        """:func:`classify_heads` for each sentence: (S, L, H) strings."""
        return np.stack([classify_heads(s, w, o, sink_tol, margin_tol)
                         for s, w, o in zip(self.sink, self.by_word, self.by_offset)])

    def head_labels(self, sink_tol: float = SINK_THRESHOLD, margin_tol: float = MARGIN) -> np.ndarray:
        """:func:`classify_heads` of each head's scores averaged over the sentences: (L, H) strings (the deciding count)."""
        return classify_heads(self.sink.mean(0), self.by_word.mean(0), self.by_offset.mean(0), sink_tol, margin_tol)

    def shares(self, sink_tol: float = SINK_THRESHOLD, margin_tol: float = MARGIN) -> dict[str, float]:
        """:func:`kind_shares` of :meth:`head_labels`: the shares of all heads the rule reads."""
        return kind_shares(self.head_labels(sink_tol, margin_tol))

    def counts(self, sink_tol: float = SINK_THRESHOLD, margin_tol: float = MARGIN) -> dict[str, np.ndarray]:
        """Heads per category in each sentence: category -> (S,) ints."""
        per = [count_categories(lab) for lab in self.labels(sink_tol, margin_tol)]
        return {c: np.array([p[c] for p in per]) for c in CATEGORIES}


def content_position_scores(maps_of: Callable[[list[str]], tuple[Any, Any]], sentences: Sequence[str],
                            n_shuffles: int = 5, seed: int = 0, causal: bool = False) -> ContentPositionScores:
    r"""Score every head, content against position, on each sentence and ``n_shuffles`` shuffles of it.

    Parameters
    ----------
    maps_of : callable
        ``maps_of(texts) -> (tokens, maps)``, one (L, H, n, n) map per text (``tokens`` may be None);
        called once, with every version of every sentence.
    sentences : sequence of str
        Each ends with a full stop; each word must be one token (checked on the maps' size).
    n_shuffles, seed : int
        Sentence ``s`` is shuffled with seed ``seed + s``.
    causal : bool
        False: an encoder's maps (sinks ``[CLS]`` and ``[SEP]``). True: a decoder's causal maps after one
        start token (its sink).

    Examples
    --------
    >>> def prev_map(k):              # each token reads the one before; [CLS] and the first word themselves
    ...     A = np.eye(k, k=-1); A[:2] = np.eye(k)[:2]
    ...     return np.broadcast_to(A, (1, 2, k, k))
    >>> def positional(texts):         # two such heads; tokens: [CLS], the words, ".", [SEP]
    ...     return None, [prev_map(len(t.split()) + 3) for t in texts]
    >>> sc = content_position_scores(positional, ["one two three four five six."], n_shuffles=2)
    >>> sc.by_offset.shape, {c: int(v[0]) for c, v in sc.counts().items()}
    ((1, 1, 2), {'content': 0, 'position': 2, 'sink': 0, 'mixed': 0})
    """
    fields: dict[str, list] = {k: [] for k in ("sink", "by_word", "by_offset", "offset_share", "best_offset")}
    versions = [shuffled_sentences(sentence, n_shuffles, seed + s) for s, sentence in enumerate(sentences)]
    tokens, maps = maps_of([t for texts, _ in versions for t in texts])  # one batch: every version of every sentence
    for s, (texts, perms) in enumerate(versions):
        rows = slice(s * (n_shuffles + 1), (s + 1) * (n_shuffles + 1))  # this sentence and its shuffles
        m = len(perms[0])  # words and the full stop
        n = m + (1 if causal else 2)  # with the start token, or [CLS] and [SEP]
        sizes = [len(t) for t in tokens[rows]] if tokens is not None else [np.shape(A)[-1] for A in maps[rows]]
        if any(k != n for k in sizes):
            raise ValueError(f"{texts[0]!r}: some word is split into several tokens "
                             f"({sizes} tokens for {m} words and the full stop, expected {n})")
        versions_maps = [_check(A) for A in maps[rows]]  # each (L, H, n, n)
        sinks = [0] if causal else [0, n - 1]
        words = [content_maps(A, sinks, causal) for A in versions_maps]  # each (L, H, m, m), rows renormalised
        w, o = follow_scores(words[0], words[1:], perms, causal=causal)
        share, offset = best_offset_share(words)
        sink = head_sink_shares(versions_maps, sinks)  # (L, H): mean weight on the sinks over all rows
        for key, value in zip(fields, (sink, w, o, share, offset)):
            fields[key].append(value)
    return ContentPositionScores(**{k: np.stack(v) for k, v in fields.items()}, n_shuffles=n_shuffles)
