"""Small, seeded data for the course's examples and tasks.

Everything here is generated in code from a ``seed``: nothing is downloaded.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple, Optional

import numpy as np
import torch

__all__ = [
    "ToySentence",
    "toy_sentence",
    "Batch",
    "Task",
    "TASKS",
    "make_task",
    "repeated_sequences",
    "associative_recall",
    "copy_sequences",
]


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

    One random embedding per distinct word; projections with variance ``1/d_model``.
    ``d_v = 2`` lets the values be drawn in the plane.

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


# ----------------------------------------------------------------------------
# Synthetic next-token tasks that make attention mechanisms visible.
#
# Every task returns a ``Batch`` of torch LongTensors of shape (B, T):
# ``inputs[b, t]`` is token t, ``targets[b, t]`` is token t + 1 (the next token
# to predict), and ``mask[b, t]`` (bool) says whether position t counts in the
# loss. Only positions whose target is determined by the context are counted.
# ----------------------------------------------------------------------------


class Batch(NamedTuple):
    """One batch of a next-token task; unpack as ``inputs, targets, mask = batch``.

    Attributes
    ----------
    inputs : torch.LongTensor, shape (B, T)
    targets : torch.LongTensor, shape (B, T)
        ``targets[:, t]`` is the token that follows ``inputs[:, t]``.
    mask : torch.BoolTensor, shape (B, T)
        ``True`` = this position counts in the loss.
    """

    inputs: torch.Tensor
    targets: torch.Tensor
    mask: torch.Tensor


def _generator(seed: int, generator: Optional[torch.Generator]) -> torch.Generator:
    """Return ``generator``, or a fresh CPU generator seeded with ``seed``."""
    if generator is not None:
        return generator
    return torch.Generator().manual_seed(int(seed))


def _check_positive(**values: int) -> None:
    for name, n in values.items():
        if int(n) != n or n < 1:
            raise ValueError(f"{name}={n!r}; expected a positive integer")


def _distinct_tokens(
    batch_size: int, n: int, low: int, high: int, g: torch.Generator
) -> torch.Tensor:
    """``n`` distinct tokens from ``[low, high)`` per row, shape (batch_size, n)."""
    if n > high - low:
        raise ValueError(
            f"cannot draw {n} distinct tokens from the {high - low} in [{low}, {high})"
        )
    order = torch.rand(batch_size, high - low, generator=g).argsort(dim=1)  # (B, high - low)
    return order[:, :n] + low  # (B, n)


def repeated_sequences(
    batch_size: int,
    seq_len: int = 28,
    vocab_size: int = 64,
    min_period: int = 6,
    max_period: int = 14,
    seed: int = 0,
    generator: Optional[torch.Generator] = None,
) -> Batch:
    r"""Random blocks that repeat with a random period: the induction-head task.

    Each sequence draws a period :math:`p \sim U\{6, \dots, 14\}` and a block of
    :math:`p` *distinct* random tokens, then repeats the block to fill
    ``seq_len + 1`` tokens:

    .. math::

        s_t = s_{t - p} \quad (t \ge p)

    Position ``t`` counts in the loss when ``t >= p``, where an induction head can copy what
    followed the token's previous occurrence; the period is ``p_b = (~mask[b]).sum()``.

    Parameters
    ----------
    batch_size : int
    seq_len : int, default 28
        Length T of ``inputs``; must exceed ``max_period``.
    vocab_size : int, default 64
    min_period, max_period : int, default 6 and 14
        Inclusive range of the period.
    seed : int, default 0
        Seeds a fresh ``torch.Generator`` when ``generator`` is not given.
    generator : torch.Generator, optional
        Draw from this generator instead (advancing it).

    Returns
    -------
    Batch
        ``inputs``, ``targets`` (LongTensor, shape (B, T)) and ``mask`` (bool, (B, T)).

    Examples
    --------
    >>> inputs, targets, mask = repeated_sequences(4, seed=0)
    >>> inputs.shape, targets.shape, mask.shape, inputs.dtype
    (torch.Size([4, 28]), torch.Size([4, 28]), torch.Size([4, 28]), torch.int64)
    >>> periods = (~mask).sum(dim=1)
    >>> bool(((periods >= 6) & (periods <= 14)).all())
    True
    >>> p = int(periods[0]); bool((inputs[0, p:] == inputs[0, :-p]).all())
    True
    """
    _check_positive(batch_size=batch_size, seq_len=seq_len, vocab_size=vocab_size,
                    min_period=min_period, max_period=max_period)
    if not min_period <= max_period < seq_len:
        raise ValueError(
            f"periods {min_period}..{max_period} with seq_len={seq_len}; expected "
            f"min_period <= max_period < seq_len so that every sequence repeats"
        )
    g = _generator(seed, generator)
    periods = torch.randint(min_period, max_period + 1, (batch_size,), generator=g)  # (B,)
    block = _distinct_tokens(batch_size, max_period, 0, vocab_size, g)  # (B, max_period)
    idx = torch.arange(seq_len + 1)[None, :] % periods[:, None]  # (B, T + 1): t mod p
    seq = block.gather(1, idx)  # (B, T + 1), s_t = s_{t mod p}
    mask = torch.arange(seq_len)[None, :] >= periods[:, None]  # (B, T): t >= p
    return Batch(seq[:, :-1], seq[:, 1:], mask)


def associative_recall(
    batch_size: int,
    n_pairs: int = 8,
    vocab_size: int = 64,
    seed: int = 0,
    generator: Optional[torch.Generator] = None,
) -> Batch:
    r"""Key-value pairs, then a query key: predict its value.

    A sequence reads ``k_1 v_1 k_2 v_2 ... k_n v_n q`` with distinct keys from
    the lower half of the vocabulary, values from the upper half (repeats
    allowed) and ``q`` one of the keys. Only the last position counts: its
    target is the value paired with ``q``,

    .. math::

        y = v_j \quad \text{where } k_j = q,

    which a head can fetch by matching ``q`` against the keys.

    Parameters
    ----------
    batch_size : int
    n_pairs : int, default 8
        Sequences have length ``T = 2 * n_pairs + 1``.
    vocab_size : int, default 64
        Keys are drawn from ``[0, V/2)``, values from ``[V/2, V)``.
    seed, generator
        As in :func:`repeated_sequences`.

    Returns
    -------
    Batch
        ``targets[:, t]`` is the next token for ``t < T - 1`` and the queried
        value at ``t = T - 1``; ``mask`` is ``True`` only at ``t = T - 1``.

    Examples
    --------
    >>> inputs, targets, mask = associative_recall(3, n_pairs=4, seed=0)
    >>> inputs.shape, mask.sum(dim=1).tolist()
    (torch.Size([3, 9]), [1, 1, 1])
    >>> keys, values, query = inputs[0, 0:8:2], inputs[0, 1:8:2], inputs[0, -1]
    >>> bool(targets[0, -1] == values[keys == query][0])
    True
    """
    _check_positive(batch_size=batch_size, n_pairs=n_pairs, vocab_size=vocab_size)
    half = vocab_size // 2
    g = _generator(seed, generator)
    keys = _distinct_tokens(batch_size, n_pairs, 0, half, g)  # (B, n)
    values = torch.randint(half, vocab_size, (batch_size, n_pairs), generator=g)  # (B, n)
    which = torch.randint(0, n_pairs, (batch_size, 1), generator=g)  # (B, 1)
    query = keys.gather(1, which)  # (B, 1)
    answer = values.gather(1, which)  # (B, 1)
    pairs = torch.stack([keys, values], dim=2).reshape(batch_size, 2 * n_pairs)  # (B, 2n)
    inputs = torch.cat([pairs, query], dim=1)  # (B, 2n + 1)
    targets = torch.cat([inputs[:, 1:], answer], dim=1)  # (B, 2n + 1)
    mask = torch.zeros_like(inputs, dtype=torch.bool)
    mask[:, -1] = True
    return Batch(inputs, targets, mask)


def copy_sequences(
    batch_size: int,
    length: int = 10,
    vocab_size: int = 64,
    reverse: bool = False,
    seed: int = 0,
    generator: Optional[torch.Generator] = None,
) -> Batch:
    r"""Random tokens, a separator, then the same tokens again (or reversed).

    The sequence is ``a_1 ... a_L SEP a_1 ... a_L`` (or ``a_L ... a_1`` with
    ``reverse=True``), with ``SEP = 0`` and the ``a_i`` drawn from
    ``[1, V)``. The positions from ``SEP`` onwards count in the loss: each
    predicts one token of the copy,

    .. math::

        y_{L + i} = a_{i+1} \quad\text{(copy)}, \qquad y_{L + i} = a_{L - i} \quad\text{(reverse)},

    a fixed offset back (copy) or the mirror position (reverse).

    Parameters
    ----------
    batch_size : int
    length : int, default 10
        L; the inputs have length ``T = 2 L``.
    vocab_size : int, default 64
    reverse : bool, default False
    seed, generator
        As in :func:`repeated_sequences`.

    Returns
    -------
    Batch
        ``mask[:, t]`` is ``True`` for ``t >= L``.

    Examples
    --------
    >>> inputs, targets, mask = copy_sequences(2, length=5, seed=0)
    >>> inputs.shape, int(mask[0].sum()), int(inputs[0, 5])
    (torch.Size([2, 10]), 5, 0)
    >>> bool((targets[:, 5:] == inputs[:, :5]).all())
    True
    """
    _check_positive(batch_size=batch_size, length=length, vocab_size=vocab_size)
    if vocab_size < 2:
        raise ValueError(f"vocab_size={vocab_size}; expected at least 2 (one separator + tokens)")
    g = _generator(seed, generator)
    a = torch.randint(1, vocab_size, (batch_size, length), generator=g)  # (B, L)
    second = a.flip(1) if reverse else a  # (B, L)
    sep = torch.zeros(batch_size, 1, dtype=torch.long)  # (B, 1)
    seq = torch.cat([a, sep, second], dim=1)  # (B, 2L + 1)
    mask = (torch.arange(2 * length) >= length).expand(batch_size, -1).clone()  # (B, 2L)
    return Batch(seq[:, :-1], seq[:, 1:], mask)


TASKS: dict[str, Callable[..., Batch]] = {
    "repeated_sequences": repeated_sequences,
    "associative_recall": associative_recall,
    "copy": copy_sequences,
    "reverse": partial(copy_sequences, reverse=True),
}


@dataclass(frozen=True)
class Task:
    """A task with its settings fixed: ``task(batch_size, generator=g) -> Batch``.

    Attributes
    ----------
    name : str
        A key of :data:`TASKS`.
    kwargs : dict
        Keyword arguments passed to the generator on every call.
    """

    name: str
    kwargs: dict = field(default_factory=dict)

    def __call__(
        self, batch_size: int, seed: int = 0, generator: Optional[torch.Generator] = None
    ) -> Batch:
        return TASKS[self.name](batch_size, seed=seed, generator=generator, **self.kwargs)

    @property
    def vocab_size(self) -> int:
        """Vocabulary size of the task's tokens."""
        return int(self.kwargs.get("vocab_size", 64))

    @property
    def seq_len(self) -> int:
        """Length T of the task's inputs."""
        return int(self(1).inputs.shape[1])


def make_task(name: str, **kwargs) -> Task:
    """Look up a task by name and fix its settings.

    Parameters
    ----------
    name : str
        One of ``"repeated_sequences"``, ``"associative_recall"``, ``"copy"``,
        ``"reverse"`` (the keys of :data:`TASKS`).
    **kwargs
        Settings for the generator, e.g. ``seq_len=28`` or ``n_pairs=8``.

    Raises
    ------
    ValueError
        For an unknown name or a setting the generator does not take.

    Examples
    --------
    >>> task = make_task("associative_recall", n_pairs=4)
    >>> batch = task(16, seed=1)
    >>> batch.inputs.shape, task.seq_len, task.vocab_size
    (torch.Size([16, 9]), 9, 64)
    """
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; known tasks: {', '.join(sorted(TASKS))}")
    fn = TASKS[name]
    allowed = set(inspect.signature(fn).parameters) - {"batch_size", "seed", "generator"}
    unknown = set(kwargs) - allowed
    if unknown:
        raise ValueError(
            f"task {name!r} takes no setting(s) {sorted(unknown)}; "
            f"its settings are {sorted(allowed)}"
        )
    return Task(name, dict(kwargs))
