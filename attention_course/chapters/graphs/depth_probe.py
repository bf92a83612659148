r"""What a deep stack keeps: linear probes that read each token's input (or a neighbour's) back from layer :math:`\ell`.

.. math::

    W = \arg\min_W \|[X_\ell\; \mathbf 1] W - Y\|_F^2 + \lambda \|W\|_F^2, \qquad
    \hat y = \arg\max_c\, ([x\; 1] W)_c,

fitted on training sequences and scored on held-out ones (chance is about ``1 / n_labels``).
Chapter 5's ``depth-keeps-information`` flags and evidence page.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Optional

import numpy as np

from ...core._backend import Array, ShapeError, to_numpy
from .collapse import attention_stack, init_stack_params

__all__ = ["labelled_sequences", "stack_probe_curves"]


def probe_accuracy(features: Array, labels: Array, n_train: int, ridge: float = 1e-3) -> float | np.ndarray:
    r"""Held-out accuracy of a least-squares linear probe from ``features`` (N, d) to ``labels``.

    The first ``n_train`` rows fit the probe (one-hot targets, an intercept, ridge :math:`\lambda` =
    ``ridge`` times the mean diagonal of :math:`X^\top X`, so the scale of the features does not
    matter); the rest are scored. ``labels`` (N,) gives a float; (N, K) gives K accuracies (K,).

    Examples
    --------
    >>> x = np.repeat(np.eye(3), 4, axis=0)  # (12, 3): three labels, one feature each
    >>> probe_accuracy(x, np.repeat([0, 1, 2], 4), n_train=9)  # the feature is the label
    1.0
    >>> probe_accuracy(np.zeros((12, 3)), np.tile([0, 1, 2], 4), n_train=9)  # no information: one class
    0.3333333333333333
    """
    X, y = to_numpy(features).astype(float), np.asarray(to_numpy(labels))
    Y = y.reshape(len(y), -1) if y.ndim else y  # (N, K)
    if X.ndim != 2 or y.ndim not in (1, 2) or len(y) != len(X) or not 0 < n_train < len(X):
        raise ShapeError(f"features has shape {X.shape} and labels {y.shape} with n_train={n_train}; "
                         f"expected (N, d), (N,) or (N, K), and 0 < n_train < N")
    predicted = _ridge_predict(X[:n_train], Y[:n_train], X[n_train:], (ridge,))[0]  # (K, N - n_train)
    acc = (predicted == Y[n_train:].T).mean(axis=1)  # (K,)
    return float(acc[0]) if y.ndim == 1 else acc


def _ridge_predict(X_fit: np.ndarray, Y_fit: np.ndarray, X_eval: np.ndarray, ridges: Sequence[float]) -> np.ndarray:
    """Labels that :func:`probe_accuracy`'s probes (one per column of ``Y_fit`` (n, K), one per ridge) give ``X_eval``.

    Returns (len(ridges), K, len(X_eval)).
    """
    A = np.hstack([X_fit, np.ones((len(X_fit), 1))])  # (n, d + 1), with an intercept
    B = np.hstack([X_eval, np.ones((len(X_eval), 1))])  # (m, d + 1)
    eig = _gram_eig(A.T @ A)
    out = np.zeros((len(ridges), Y_fit.shape[1], len(B)), dtype=Y_fit.dtype)
    for c, col in enumerate(Y_fit.T):
        classes = np.unique(col)  # (C,) labels seen in fitting
        rhs = A.T @ (col[:, None] == classes[None, :])  # (d + 1, C), one-hot targets
        out[:, c] = classes[_ridge_scores(eig, rhs, B, ridges).argmax(axis=2)]  # (ridges, m)
    return out


def _gram_eig(gram: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """The eigenvalues (d + 1,) and eigenvectors (d + 1, d + 1) of a Gram matrix, and its mean diagonal."""
    s, V = np.linalg.eigh(gram)
    return s, V, float(np.trace(gram)) / len(gram)


def _ridge_scores(eig: tuple, rhs: np.ndarray, B: np.ndarray, ridges: Sequence[float]) -> np.ndarray:
    r"""Class scores of ridge probes for every ridge from one eigendecomposition: (len(ridges), m, C).

    .. math::

        W_\lambda = (G + \lambda \bar g I)^{-1} A^\top Y = V \operatorname{diag}(1 / (s + \lambda \bar g)) V^\top A^\top Y,

    with :math:`G = A^\top A = V \operatorname{diag}(s) V^\top` and :math:`\bar g` its mean diagonal;
    ``rhs`` is :math:`A^\top Y` (d + 1, C) and ``B`` (m, d + 1) the rows scored.
    """
    s, V, scale = eig
    BV, Q = B @ V, V.T @ rhs  # (m, d + 1), (d + 1, C)
    return np.stack([(BV / (s + ridge * scale)) @ Q for ridge in ridges])  # (ridges, m, C)


def cross_validated_scores(features: Array, labels: Array, n_train: int,
                           ridges: Sequence[float] = (1e-4, 1e-3, 1e-2, 1e-1, 1.0), folds: int = 5,
                           n_fit: Optional[int] = None) -> tuple[np.ndarray, float, float]:
    """Labels read right per held-out sequence by a probe whose ridge is chosen by cross-validation.

    ``features`` (N, P, d) and ``labels`` (N, P): P read positions of N sequences. The first ``n_fit``
    (default ``n_train``) sequences fit; sequences ``n_train`` onwards are scored, so fits of several
    sizes score the same held-out sequences. The ridge has the best mean accuracy over ``folds``
    folds of the fitting sequences (sequence s in fold s mod folds; ties: the smaller); one
    eigendecomposition of the Gram matrix per fold gives every ridge. Returns ``hits``
    (N - n_train,), 0..P, the ridge and its cross-validated accuracy (fitting sequences only).

    Examples
    --------
    >>> y = np.random.default_rng(0).integers(4, size=(30, 3))
    >>> hits, ridge, cv = cross_validated_scores(np.eye(4)[y], y, n_train=20)  # (30, 3, 4): the label itself
    >>> hits.tolist() == [3] * 10, ridge, cv
    (True, 0.0001, 1.0)
    >>> y = np.random.default_rng(0).integers(4, size=(60, 3))
    >>> x = np.eye(4)[y] + 0.8 * np.random.default_rng(1).normal(size=(60, 3, 4))  # (60, 3, 4): the label, noisy
    >>> hits, ridge, cv = cross_validated_scores(x, y, n_train=40, n_fit=10)  # 10 fit; sentences 40-59 score
    >>> hits.shape, ridge, round(cv, 2)
    ((20,), 0.0001, 0.63)
    """
    X, y = to_numpy(features).astype(float), np.asarray(to_numpy(labels))
    n_fit = n_train if n_fit is None else n_fit
    if X.ndim != 3 or y.shape != X.shape[:2] or not folds <= n_fit <= n_train < len(X):
        raise ShapeError(f"features has shape {X.shape} and labels {y.shape} with n_train={n_train}, "
                         f"n_fit={n_fit}, folds={folds}; expected (N, P, d) and (N, P), and folds <= n_fit <= n_train < N")
    N, P, d = X.shape
    A = np.concatenate([X[:n_fit], np.ones((n_fit, P, 1))], axis=2)  # (n_fit, P, d + 1), with an intercept
    classes = np.unique(y[:n_fit])  # (C,)
    onehot = (y[:n_fit, :, None] == classes).astype(float)  # (n_fit, P, C)
    fold = np.arange(n_fit) % folds  # (n_fit,) each sequence's fold
    rows = [A[fold == f].reshape(-1, d + 1) for f in range(folds)]  # each (fold's sequences P, d + 1)
    grams = np.stack([r.T @ r for r in rows])  # (folds, d + 1, d + 1)
    rhs = np.stack([r.T @ onehot[fold == f].reshape(len(r), -1) for f, r in enumerate(rows)])  # (folds, d + 1, C)
    score = np.zeros(len(ridges))
    for f in range(folds):
        seen = (rhs.sum(axis=0) - rhs[f])[-1] > 0  # (C,) classes among the other folds' rows (intercept row counts)
        scores = _ridge_scores(_gram_eig(grams.sum(axis=0) - grams[f]), (rhs.sum(axis=0) - rhs[f])[:, seen],
                               rows[f], ridges)  # (ridges, rows, C seen)
        score += (classes[seen][scores.argmax(axis=2)] == y[:n_fit][fold == f].reshape(-1)).mean(axis=1) / folds
    best = int(score.argmax())  # ties: the first, the smaller ridge
    B = np.concatenate([X[n_train:], np.ones((N - n_train, P, 1))], axis=2).reshape(-1, d + 1)  # ((N - n_train) P, d + 1)
    pred = classes[_ridge_scores(_gram_eig(grams.sum(axis=0)), rhs.sum(axis=0), B, (ridges[best],))[0].argmax(axis=1)]
    hits = (pred.reshape(N - n_train, P) == y[n_train:]).sum(axis=1)  # (N - n_train,)
    return hits, float(ridges[best]), float(score[best])


def halves_difference(hits: Array, n_read: int, first: Sequence[int], second: Sequence[int],
                      n_boot: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    r"""How much better the later layers read a word than the earlier ones, with a bootstrap interval.

    .. math::

        D = \frac{1}{|S|}\sum_{\ell \in S} a_\ell - \frac{1}{|F|}\sum_{\ell \in F} a_\ell,

    with :math:`a_\ell` the accuracy after layer :math:`\ell`. ``hits`` (L + 1, M) are words read
    right per held-out sequence, ``n_read`` words per sequence. Returns ``(D, low, high)``, the
    95% interval from ``n_boot`` seeded resamples of the sequences.

    Examples
    --------
    >>> hits = np.array([[0] * 10, [8, 9] * 5, [8, 9] * 5, [4, 5] * 5, [4, 5] * 5])  # (5 layers, 10)
    >>> tuple(round(v, 2) for v in halves_difference(hits, 10, first=[1, 2], second=[3, 4]))
    (-0.4, -0.4, -0.4)
    """
    h = np.asarray(to_numpy(hits), dtype=float)
    if h.ndim != 2 or max(*first, *second) >= len(h) or n_read < 1:
        raise ShapeError(f"hits has shape {h.shape} with layers {list(first)} and {list(second)}, n_read={n_read}; "
                         f"expected (L + 1, M) covering those layers and n_read >= 1")
    weights = np.zeros(len(h))  # (L + 1,) +1/|S| on the later layers, -1/|F| on the earlier
    weights[list(second)] += 1 / len(second)
    weights[list(first)] -= 1 / len(first)
    per_sequence = weights @ h / n_read  # (M,) each sequence's contribution
    boot = per_sequence[_resamples(h.shape[1], n_boot, seed)].mean(axis=1)  # (n_boot,)
    low, high = np.percentile(boot, [2.5, 97.5])
    return float(per_sequence.mean()), float(low), float(high)


def _resamples(m: int, n_boot: int, seed: int) -> np.ndarray:
    """Indices of ``n_boot`` seeded resamples, with replacement, of ``m`` sequences: (n_boot, m)."""
    return np.random.default_rng(seed).integers(m, size=(n_boot, m))


def last_minus_best(hits: Array, n_read: int, n_boot: int = 2000, seed: int = 0,
                    best: Optional[int] = None) -> tuple[float, float, float]:
    """The last layer's accuracy minus the best layer's (1..L), with a bootstrap interval over sequences.

    MiniLM's statistic on the hits of :func:`halves_difference`. Without ``best`` each resample takes
    its own best layer; with it (a layer picked beforehand, e.g. on the fitting sequences) every
    resample compares the last layer with that one: F of ``depth-keeps-information``.

    Examples
    --------
    >>> hits = np.array([[0] * 10, [9] * 10, [6] * 10])  # (3 layers, 10 sequences), 10 words read each
    >>> tuple(round(v, 2) for v in last_minus_best(hits, 10))
    (-0.3, -0.3, -0.3)
    >>> tuple(round(v, 2) for v in last_minus_best(hits, 10, best=0))  # against the embeddings instead
    (0.6, 0.6, 0.6)
    """
    h = np.asarray(to_numpy(hits), dtype=float)
    if h.ndim != 2 or len(h) < 2 or n_read < 1 or (best is not None and not 0 <= best < len(h)):
        raise ShapeError(f"hits has shape {h.shape} with n_read={n_read}, best={best}; expected (L + 1, M), L >= 1, "
                         f"n_read >= 1 and 0 <= best <= L")
    acc = h / n_read  # (L + 1, M): share read right per sequence
    boot = acc[:, _resamples(h.shape[1], n_boot, seed)].mean(axis=2)  # (L + 1, n_boot)
    mean = acc.mean(axis=1)  # (L + 1,)
    if best is not None:
        low, high = np.percentile(boot[-1] - boot[best], [2.5, 97.5])
        return float(mean[-1] - mean[best]), float(low), float(high)
    low, high = np.percentile(boot[-1] - boot[1:].max(axis=0), [2.5, 97.5])
    return float(mean[-1] - mean[1:].max()), float(low), float(high)


def halves_label(difference: tuple[float, float, float], last: float, scrambled_last: float,
                 margin: float = 0.05) -> str:
    """One offset by the halves rule: ``"lost"``, ``"kept"``, ``"fades"`` or ``"undecided"``.

    In this order: lost if the last layer is within ``margin`` of the scrambled model's; kept if
    the interval of ``difference`` (D of :func:`halves_difference`, or F of :func:`last_minus_best`)
    lies above ``-margin``; fades if below; else undecided.

    Examples
    --------
    >>> [halves_label(d, 0.7, 0.1) for d in [(0.0, -0.02, 0.02), (-0.2, -0.3, -0.1), (-0.05, -0.08, -0.02)]]
    ['kept', 'fades', 'undecided']
    >>> halves_label((0.0, -0.02, 0.02), last=0.12, scrambled_last=0.1)
    'lost'
    """
    _, low, high = difference
    if abs(last - scrambled_last) <= margin:
        return "lost"
    if low > -margin:
        return "kept"
    return "fades" if high < -margin else "undecided"


def labelled_sequences(
    n_seq: int, n_tokens: int, d_model: int, n_labels: int, *, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Random labelled tokens: labels (n_seq, T) and inputs x_0 (n_seq, T, d_model), each label a fixed normal vector.

    Examples
    --------
    >>> y, x = labelled_sequences(5, 4, 8, 3, seed=0)
    >>> y.shape, x.shape, bool(np.array_equal(x[y == 1][0], x[y == 1][-1]))
    ((5, 4), (5, 4, 8), True)
    """
    rng = np.random.default_rng(seed)
    embed = rng.normal(size=(n_labels, d_model))  # (n_labels, d_model)
    labels = rng.integers(n_labels, size=(n_seq, n_tokens))  # (n_seq, T)
    return labels, embed[labels]  # (n_seq, T), (n_seq, T, d_model)


def stack_probe_curves(stacks: dict[str, dict], layers: Sequence[int], *, n_seq: int = 200, n_train: int = 150,
                       n_tokens: int = 16, d_model: int = 64, n_labels: int = 16, seeds: Sequence[int] = range(3),
                       mask: Optional[dict[str, np.ndarray]] = None) -> dict[str, np.ndarray]:
    r"""Probe accuracy for each token's own label after each of ``layers``: name -> (len(seeds), len(layers)).

    ``stacks`` maps a name to the keywords of
    :func:`~attention_course.chapters.graphs.collapse.attention_stack`; ``mask`` optionally maps a
    name to its (T, T) mask. Per seed: sequences with seed ``seed``, weights with ``seed + 1``.

    Examples
    --------
    >>> acc = stack_probe_curves({"skip": {"skip": True}}, layers=[0, 2], n_seq=40, n_train=30,
    ...                          n_tokens=6, d_model=16, n_labels=4, seeds=[0])
    >>> acc["skip"].shape, float(acc["skip"][0, 0])  # layer 0 is the input itself
    ((1, 2), 1.0)
    """
    mask = mask or {}
    out = {name: np.zeros((len(seeds), len(layers))) for name in stacks}
    for s, seed in enumerate(seeds):
        labels, x0 = labelled_sequences(n_seq, n_tokens, d_model, n_labels, seed=seed)
        params = init_stack_params(d_model, max(layers), seed=seed + 1, mlp=True) if max(layers) else []
        y = labels.reshape(-1)  # (n_seq * T,), sequence-major: the first n_train sequences come first
        for name, kw in stacks.items():
            states = attention_stack(x0, params, mask.get(name), **kw) if params else [x0]  # each (n_seq, T, d)
            for c, layer in enumerate(layers):
                out[name][s, c] = probe_accuracy(states[layer].reshape(-1, d_model), y, n_train * n_tokens)
    return out


_DETS = ("the", "a", "my", "your", "this", "that", "one", "every")
_ADJS = ("old", "young", "small", "big", "red", "green", "tall", "quiet", "busy", "happy")
_NOUNS = ("cat", "dog", "girl", "boy", "tree", "river", "book", "friend", "teacher", "bird", "car", "house")
_VERBS = ("saw", "chased", "found", "liked", "helped", "followed", "painted", "watched")
_PREPS = ("near", "under", "behind", "beside", "above")
#: The ten slots of the template sentence.
_SLOTS = (_DETS, _ADJS, _NOUNS, _VERBS, _DETS, _NOUNS, _PREPS, _DETS, _ADJS, _NOUNS)


def template_sentences(n: int, seed: int) -> list[str]:
    """``n`` seeded sentences of one template, ten words and a full stop, each word one common token.

    Examples
    --------
    >>> template_sentences(1, seed=0)[0].count(" ")
    9
    """
    rng = np.random.default_rng(seed)
    return [" ".join(str(rng.choice(words)) for words in _SLOTS) + "." for _ in range(n)]


def encoder_probe(hidden: Sequence[Array], ids: Array, n_train: int, offsets: Sequence[int] = (0, -1, 1),
                  words: Optional[Sequence[int]] = None) -> np.ndarray:
    """Probe accuracy for the token ``offset`` places away, from each layer's states: (len(offsets), len(hidden)).

    ``hidden``: each (N, n, d), ``[CLS]`` first and ``[SEP]`` last; ``ids`` (N, n) are the labels;
    the first ``n_train`` sequences fit. Without ``words`` every position 1..n-2 is read from; with
    it, only positions ``i`` with ``i`` and ``i + offset`` both in ``words``.

    Examples
    --------
    >>> ids = np.random.default_rng(0).integers(5, size=(30, 6))
    >>> states = np.eye(5)[ids]  # (30, 6, 5): each state is its own one-hot token
    >>> encoder_probe([states], ids, n_train=20).round(1).tolist()  # own: read; neighbours: not
    [[1.0], [0.2], [0.3]]
    >>> both = np.concatenate([states, np.roll(states, 1, axis=1)], axis=-1)  # own and previous token
    >>> encoder_probe([both], ids, n_train=20, offsets=(-1, 1), words=range(1, 5)).round(1).tolist()
    [[1.0], [0.2]]
    """
    y = np.asarray(to_numpy(ids))
    N, n = y.shape
    acc = np.zeros((len(offsets), len(hidden)))
    if words is None:
        read = {o: np.arange(1, n - 1) for o in offsets}  # (n - 2,) the positions read
    else:
        kept = set(int(w) for w in words)
        read = {o: np.array([i for i in sorted(kept) if i + o in kept]) for o in offsets}
    groups: dict = {}
    for o in offsets:  # offsets that read from the same positions share one factorisation
        groups.setdefault(tuple(read[o]), []).append(o)
    for pos, group in groups.items():
        pos = np.array(pos)
        targets = np.stack([y[:, pos + o].reshape(-1) for o in group], axis=1)  # (N len(pos), K)
        for layer, h in enumerate(hidden):
            X = to_numpy(h).astype(float)[:, pos].reshape(N * len(pos), -1)  # (N len(pos), d)
            a = probe_accuracy(X, targets, n_train * len(pos))
            for o, v in zip(group, a):
                acc[list(offsets).index(o), layer] = v
    return acc


def word_end_ids(encode: Callable[[str], Sequence[int]], sentences: Sequence[str], start: Sequence[int],
                 pad: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A decoder's token ids (N, T) of sentences read after ``start``, and each word's last position (N, W).

    Each sentence is read as ``start``, a space and the sentence, so every word has its leading
    space. A split word is stood for by its last token (the first causal state that has seen the
    whole word). Rows are right-padded with ``pad``, which changes no earlier causal state.

    Examples
    --------
    >>> vocab = {" the": 1, " dog": 2, " ran": 3, ".": 4}
    >>> def encode(text):  # a word not in vocab, " cat", is split into " ca" (5) and "t" (6)
    ...     out = []
    ...     for w in text.replace(".", " .").split(" ")[1:]:
    ...         out += [4] if w == "." else [vocab[" " + w]] if " " + w in vocab else [5, 6]
    ...     return out
    >>> ids, ends = word_end_ids(encode, ["the dog ran.", "the cat ran."], start=[0], pad=9)
    >>> ids.tolist(), ends.tolist()  # "cat" is split: its last token "t" stands for it
    ([[0, 1, 2, 3, 4, 9], [0, 1, 5, 6, 3, 4]], [[1, 2, 3], [1, 3, 4]])
    """
    rows, ends = [], []
    for sentence in sentences:
        words = sentence.rstrip(".").split(" ")
        row, where = list(start), []
        for word in words:
            row += list(encode(" " + word))
            where.append(len(row) - 1)  # the word's last token
        row += list(encode(sentence[len(" ".join(words)):])) if sentence.endswith(".") else []
        whole = list(start) + list(encode(" " + sentence))
        if row != whole:
            raise ValueError(f"{sentence!r}: the words tokenized one by one give {row[len(start):]} but the "
                             f"sentence gives {whole[len(start):]}; expected the tokenizer to split at spaces")
        rows.append(row)
        ends.append(where)
    if len({len(e) for e in ends}) > 1:
        raise ValueError(f"the sentences have {sorted({len(e) for e in ends})} words; expected one count")
    ids = np.full((len(rows), max(map(len, rows))), pad, dtype=np.int64)  # (N, T)
    for r, row in enumerate(rows):
        ids[r, :len(row)] = row
    return ids, np.array(ends, dtype=np.int64)  # (N, T), (N, W)


def word_probes(hidden: Sequence[Array], ids: Array, ends: Array, n_train: int, offsets: Sequence[int] = (-2, -1),
                ridges: Sequence[float] = (1e-4, 1e-3, 1e-2, 1e-1, 1.0), folds: int = 5,
                n_fit: Optional[int] = None, causal: bool = False) -> dict:
    """Cross-validated probes for the word ``offset`` places away, from each layer's word states.

    ``hidden``: each (N, T, d); ``ends`` (N, W): each word's position, its last token (so
    ``[CLS]``, ``[SEP]``, a start token and the full stop are not read, unless listed); a word's
    label is the token there. Only words with a word ``offset`` places away are read. Each
    (offset, layer) probe is :func:`cross_validated_scores`'s (the first ``n_fit`` of ``n_train``
    sentences fit; sentences ``n_train`` onwards score). ``causal=True`` refuses offsets >= 0. Returns
    ``"hits"`` (offsets, len(hidden), N - n_train), ``"ridge"`` and ``"cv"`` (offsets, len(hidden)),
    the cross-validated accuracy of the chosen ridge, and ``"n_read"``, words read per sentence.

    Examples
    --------
    >>> ids = np.random.default_rng(0).integers(6, size=(40, 5))
    >>> after = np.eye(6)[np.roll(ids, -1, axis=1)]  # (40, 5, 6): each state holds the next token
    >>> probes = word_probes([after], ids, np.tile(np.arange(5), (40, 1)), n_train=30, offsets=(1, -1))
    >>> probes["hits"][:, 0].sum(axis=1).tolist(), probes["n_read"], probes["cv"][0].tolist()  # of 40; chance 1/6
    ([40, 3], [4, 4], [1.0])
    >>> word_probes([after], ids, np.tile(np.arange(5), (40, 1)), n_train=30, offsets=(1,), causal=True)
    Traceback (most recent call last):
    ...
    ValueError: offsets=(1,); a causal state has not seen the words after it: expected negative offsets
    """
    if causal and any(o >= 0 for o in offsets):
        raise ValueError(f"offsets={tuple(offsets)}; a causal state has not seen the words after it: "
                         f"expected negative offsets")
    y, e = np.asarray(to_numpy(ids)), np.asarray(to_numpy(ends))
    if y.ndim != 2 or e.ndim != 2 or len(e) != len(y) or e.max() >= y.shape[1]:
        raise ShapeError(f"ids has shape {y.shape} and ends {e.shape}; expected (N, T) and (N, W) positions below T")
    labels = np.take_along_axis(y, e, axis=1)  # (N, W): the token at each word's position
    W = e.shape[1]
    hits = np.zeros((len(offsets), len(hidden), len(y) - n_train), dtype=np.int64)
    ridge, cv = np.zeros((len(offsets), len(hidden))), np.zeros((len(offsets), len(hidden)))
    n_read = []
    for i, o in enumerate(offsets):
        pos = np.arange(max(0, -o), min(W, W - o))  # (P,) the words that have a word o places away
        n_read.append(len(pos))
        for layer, h in enumerate(hidden):
            words = np.take_along_axis(to_numpy(h), e[:, pos, None], axis=1)  # (N, P, d)
            hits[i, layer], ridge[i, layer], cv[i, layer] = cross_validated_scores(
                words, labels[:, pos + o], n_train, ridges, folds, n_fit)
    return {"hits": hits, "ridge": ridge, "cv": cv, "n_read": n_read}


def guessing_line(chance: float, n_test: int) -> float:
    r"""The highest accuracy still "at guessing", two standard errors above chance: :math:`p + 2\sqrt{p(1-p)/N}`.

    Examples
    --------
    >>> round(guessing_line(0.25, 400), 6)
    0.293301
    """
    if not 0 <= chance <= 1 or n_test < 1:
        raise ValueError(f"chance={chance}, n_test={n_test}; expected 0 <= chance <= 1 and n_test >= 1")
    return chance + 2 * float(np.sqrt(chance * (1 - chance) / n_test))


def guess_depth(acc: Array, chance: float, n_test: int) -> Optional[int]:
    """The first depth at which the median accuracy over seeds of ``acc`` (seeds, depths) is at :func:`guessing_line`.

    Examples
    --------
    >>> guess_depth(np.array([[1.0, 0.6, 0.2, 0.18]]), chance=0.18, n_test=400)
    2
    """
    acc = np.asarray(to_numpy(acc), dtype=float)
    if acc.ndim != 2:
        raise ValueError(f"acc has shape {acc.shape}; expected (seeds, depths)")
    at = np.flatnonzero(np.median(acc, axis=0) <= guessing_line(chance, n_test))  # (depths,) median over seeds
    return int(at[0]) if at.size else None
