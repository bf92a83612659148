r"""The tasks of the ablations: stacked MQAR, partner recall and a previous-token copy.

Each returns a :class:`~attention_course.models.tasks.Batch` with two ids per position, ``inputs``
``(B, T, 2)``: a key (or token) id and a value id (:data:`BLANK`: no value).
Stacked MQAR (Arora et al. 2023) stores ``N`` pairs :math:`(k_j, v_j)`, then queries each key;
partner recall asks for the value of the partner key :math:`f(2i) = 2i + 1`, :math:`f(2i + 1) = 2i`;
the copy asks position :math:`t \ge 1` for the token at :math:`t - 1`.
"""

from __future__ import annotations

from typing import Optional

import torch

from ...models.tasks import Batch, _generator

__all__ = ["BLANK", "stacked_mqar", "previous_token", "gaps"]

#: Number of value ids; the blank value is id ``N_VALUES``.
N_VALUES = 64
BLANK = N_VALUES


def _recall_batch(keys: torch.Tensor, values: torch.Tensor, queried: torch.Tensor, answers: torch.Tensor) -> Batch:
    """The stacked layout: ``N`` (key, value) tokens, then ``N`` (queried key, blank) tokens whose
    targets are ``answers``; each argument (B, N). Returns inputs (B, 2N, 2), targets and mask (B, 2N)."""
    B, N = keys.shape
    inputs = torch.empty(B, 2 * N, 2, dtype=torch.long)
    inputs[:, :N, 0], inputs[:, :N, 1] = keys, values
    inputs[:, N:, 0], inputs[:, N:, 1] = queried, BLANK
    targets = torch.zeros(B, 2 * N, dtype=torch.long)
    targets[:, N:] = answers
    mask = torch.zeros(B, 2 * N, dtype=torch.bool)
    mask[:, N:] = True
    return Batch(inputs, targets, mask)


def stacked_mqar(batch_size: int, n_pairs: int = 16, n_keys: int = 64, seed: int = 0,
                 generator: Optional[torch.Generator] = None) -> Batch:
    r"""Stacked multi-query associative recall: ``N`` key-value tokens, then the ``N`` keys again.

    .. math::

        x_j = (k_j, v_j),\ j < N; \qquad x_{N+i} = (k_{\pi(i)}, \varnothing),\quad
        y_{N+i} = v_{\pi(i)} ,

    with distinct keys from ``[0, n_keys)``, values from ``[0, 64)`` and :math:`\pi` a random
    permutation. Chance is 1/64.

    Returns
    -------
    Batch
        ``inputs`` (B, 2N, 2), ``targets`` (B, 2N) (0 where unused), ``mask`` (B, 2N): True at the queries.

    Examples
    --------
    >>> x, y, m = stacked_mqar(2, n_pairs=4, seed=0)
    >>> tuple(x.shape), m[0].tolist()
    ((2, 8, 2), [False, False, False, False, True, True, True, True])
    >>> k, v = x[0, :4, 0], x[0, :4, 1]
    >>> all(int(y[0, t]) == int(v[k == x[0, t, 0]][0]) for t in range(4, 8))
    True
    """
    if n_pairs < 1 or n_keys < n_pairs:
        raise ValueError(f"n_pairs={n_pairs}, n_keys={n_keys}; expected 1 <= n_pairs <= n_keys")
    g = _generator(seed, generator)
    B, N = batch_size, n_pairs
    keys = torch.rand(B, n_keys, generator=g).argsort(dim=1)[:, :N]  # (B, N): distinct keys
    values = torch.randint(0, N_VALUES, (B, N), generator=g)  # (B, N)
    order = torch.rand(B, N, generator=g).argsort(dim=1)  # (B, N): the queried pair at each query
    return _recall_batch(keys, values, keys.gather(1, order), values.gather(1, order))


def partner_mqar(batch_size: int, n_pairs: int = 16, n_keys: int = 64, seed: int = 0,
                 generator: Optional[torch.Generator] = None) -> Batch:
    r"""Partner recall: :func:`stacked_mqar` whose query key :math:`a` must fetch the value stored under :math:`f(a)`.

    .. math::

        f(2i) = 2i + 1,\quad f(2i + 1) = 2i; \qquad x_{N+i} = (a_i, \varnothing),\quad
        y_{N+i} = v_j \text{ where } k_j = f(a_i) ,

    with the ``N`` stored keys made of ``N / 2`` partner pairs drawn from the ``n_keys / 2``, so both
    :math:`a` and :math:`f(a)` are stored. A symmetric positive semi-definite score
    :math:`x^\top W^\top W y` cannot rank the partner above the key itself for both members of a
    pair (Cauchy-Schwarz: :math:`\langle Wa, Wb\rangle \le \max(|Wa|^2, |Wb|^2)`). Chance is 1/64.

    Returns a :class:`~attention_course.models.tasks.Batch` laid out as :func:`stacked_mqar`'s.

    Examples
    --------
    >>> x, y, m = partner_mqar(2, n_pairs=4, seed=0)
    >>> tuple(x.shape), m[0].tolist()
    ((2, 8, 2), [False, False, False, False, True, True, True, True])
    >>> k, v = x[0, :4, 0], x[0, :4, 1]
    >>> all(int(y[0, t]) == int(v[k == (x[0, t, 0] ^ 1)][0]) for t in range(4, 8))
    True
    """
    if n_pairs < 2 or n_pairs % 2 or n_keys < n_pairs or n_keys % 2:
        raise ValueError(f"n_pairs={n_pairs}, n_keys={n_keys}; expected even 2 <= n_pairs <= n_keys, n_keys even")
    return _group_recall(batch_size, n_pairs, n_keys, 2, _generator(seed, generator), lambda a: a ^ 1)


def _group_recall(B: int, N: int, n_keys: int, m: int, g: torch.Generator, follow) -> Batch:
    """``N / m`` whole groups of ``m`` key ids stored in a random order, each key queried once, in a random
    order, for the value stored under ``follow(key)``."""
    groups = torch.rand(B, n_keys // m, generator=g).argsort(dim=1)[:, :N // m]  # (B, N/m): whole groups
    members = (m * groups[:, :, None] + torch.arange(m)).reshape(B, N)  # (B, N): every id of those groups
    keys = members.gather(1, torch.rand(B, N, generator=g).argsort(dim=1))  # (B, N): storage order
    values = torch.randint(0, N_VALUES, (B, N), generator=g)  # (B, N)
    queried = keys.gather(1, torch.rand(B, N, generator=g).argsort(dim=1))  # (B, N): the queried key at each query
    where = (keys[:, None, :] == follow(queried)[:, :, None]).float().argmax(dim=2)  # (B, N): follow(a)'s slot
    return _recall_batch(keys, values, queried, values.gather(1, where))


def previous_token(batch_size: int, length: int = 32, vocab_size: int = 64, seed: int = 0,
                   generator: Optional[torch.Generator] = None, lag: int = 1) -> Batch:
    r"""Random tokens; every position from ``lag`` on outputs the token ``lag`` before it, :math:`y_t = a_{t-\ell}`.

    With the default ``lag = 1`` it is the previous-token copy. A causal window of ``w`` positions (the
    query and the ``w - 1`` before it) sees the answer exactly when ``w > lag``.

    Returns
    -------
    Batch
        ``inputs`` (B, T, 2), the token id in both slots, ``targets`` (B, T), ``mask`` True for ``t >= lag``.

    Examples
    --------
    >>> x, y, m = previous_token(2, length=6, seed=0)
    >>> bool((y[:, 1:] == x[:, :-1, 0]).all()), int(m[0].sum())
    (True, 5)
    >>> x, y, m = previous_token(2, length=6, seed=0, lag=3)
    >>> bool((y[:, 3:] == x[:, :-3, 0]).all()), int(m[0].sum())
    (True, 3)
    """
    if lag < 1 or length <= lag:
        raise ValueError(f"length={length}, lag={lag}; expected 1 <= lag < length")
    g = _generator(seed, generator)
    a = torch.randint(0, vocab_size, (batch_size, length), generator=g)  # (B, T)
    inputs = torch.stack([a, a], dim=2)  # (B, T, 2): the token is its own key and value
    targets = torch.zeros_like(a)
    targets[:, lag:] = a[:, :-lag]
    mask = torch.ones_like(a, dtype=torch.bool)
    mask[:, :lag] = False
    return Batch(inputs, targets, mask)


def gaps(n_pairs: int, batch_size: int = 4096, seed: int = 0) -> torch.Tensor:
    """How far back each query's key sits in :func:`stacked_mqar` (one entry per query; 1 .. 2N - 1).

    A causal window of ``w`` positions (the query and the ``w - 1`` before it) can see the key
    only when the gap is below ``w``.

    Examples
    --------
    >>> g = gaps(4, batch_size=500)
    >>> int(g.min()) >= 1, int(g.max()) <= 7
    (True, True)
    """
    x, _, m = stacked_mqar(batch_size, n_pairs=n_pairs, seed=seed)
    N = n_pairs
    keys, queried = x[:, :N, 0], x[:, N:, 0]  # (B, N), (B, N)
    where = (queried[:, :, None] == keys[:, None, :]).float().argmax(dim=2)  # (B, N): key position
    return (N + torch.arange(N) - where).flatten()
