r"""What asymmetric scores buy: a directional task, the score's bilinear form, and the untrained baseline.

A score :math:`s(x, y) = x^\top W_Q W_K^\top y` is symmetric when :math:`M = W_Q W_K^\top` is. Tying
:math:`W_K = W_Q` makes :math:`M = W_Q W_Q^\top` symmetric *and* positive semi-definite (PSD); the
``signed`` variant, :math:`W_K = W_Q D` with :math:`D = \operatorname{diag}(\pm 1)` half and half
(:func:`~attention_course.chapters.insight.mixers.signature`), keeps the symmetry and drops the PSD.

**Cyclic successor recall** (:func:`cyclic_mqar`) is a relation a symmetric score cannot order. The
``n_keys`` key ids form cycles of ``cycle`` ids, :math:`\{c m, \dots, c m + m - 1\}`, and the query key
:math:`a` must fetch the value stored under its successor :math:`f(a)` in its cycle. Each sequence
stores whole cycles, so a query's successor and predecessor are both in its context. With a symmetric
key-key score :math:`s(a, b) = s(b, a)`, plus any term :math:`c(b)` of the stored key alone,

.. math::

    \sum_{a \in \text{cycle}} \big[s(a, f(a)) + c(f(a))\big] - \big[s(a, f^{-1}(a)) + c(f^{-1}(a))\big] = 0 ,

since both sums run over the same edges and the same keys. So some query of every cycle scores its
predecessor at least as high as its successor: a symmetric score is right on at most about
:math:`1 - 1/m` of the queries (3/4 for cycles of 4).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import torch

from ...models.tasks import Batch
from .ablations import TEST_SEED, RecallTask, accuracy
from .mixers import MixerModel, Variant
from .recall_tasks import N_VALUES, _gen, _recall_batch

__all__ = []  # the chapter reads these through converged_comparisons


def successor(a: torch.Tensor, cycle: int = 4) -> torch.Tensor:
    r"""The next key of ``a``'s cycle, :math:`f(a) = c m + ((a - c m + 1) \bmod m)` with :math:`c = \lfloor a / m \rfloor`.

    Examples
    --------
    >>> successor(torch.arange(8), cycle=4).tolist()
    [1, 2, 3, 0, 5, 6, 7, 4]
    """
    start = a - a % cycle  # the cycle's first id, c m
    return start + (a - start + 1) % cycle


def cyclic_mqar(batch_size: int, n_pairs: int = 16, n_keys: int = 64, cycle: int = 4, seed: int = 0,
                generator: Optional[torch.Generator] = None) -> Batch:
    r"""Cyclic successor recall: stacked MQAR whose query key :math:`a` must fetch the value stored under :math:`f(a)`.

    .. math::

        x_j = (k_j, v_j),\ j < N; \qquad x_{N+i} = (a_i, \varnothing),\quad y_{N+i} = v_j \text{ where } k_j = f(a_i),

    with :func:`successor` :math:`f` over cycles of ``cycle`` key ids. The ``N`` stored keys are
    ``N / cycle`` whole cycles drawn from the ``n_keys / cycle``, in a random order, with values from
    ``[0, 64)``; every stored key is queried once, in a random order. Chance is 1/64.

    Returns
    -------
    Batch
        ``inputs`` (B, 2N, 2), ``targets`` (B, 2N) (0 where unused), ``mask`` (B, 2N): True at the queries.

    Examples
    --------
    >>> x, y, m = cyclic_mqar(2, n_pairs=8, cycle=4, seed=0)
    >>> tuple(x.shape), int(m[0].sum())
    ((2, 16, 2), 8)
    >>> k, v = x[0, :8, 0], x[0, :8, 1]
    >>> all(int(y[0, t]) == int(v[k == successor(x[0, t, 0])][0]) for t in range(8, 16))
    True
    """
    if cycle < 3 or n_pairs % cycle or n_keys % cycle or n_keys < n_pairs:
        raise ValueError(f"n_pairs={n_pairs}, n_keys={n_keys}, cycle={cycle}; expected cycle >= 3 dividing both "
                         f"n_pairs and n_keys, n_pairs <= n_keys")
    g = _gen(seed, generator)
    B, N, m = batch_size, n_pairs, cycle
    cycles = torch.rand(B, n_keys // m, generator=g).argsort(dim=1)[:, :N // m]  # (B, N/m): whole cycles
    members = (m * cycles[:, :, None] + torch.arange(m)).reshape(B, N)  # (B, N): every id of those cycles
    keys = members.gather(1, torch.rand(B, N, generator=g).argsort(dim=1))  # (B, N): storage order
    values = torch.randint(0, N_VALUES, (B, N), generator=g)  # (B, N)
    queried = keys.gather(1, torch.rand(B, N, generator=g).argsort(dim=1))  # (B, N): the queried key at each query
    where = (keys[:, None, :] == successor(queried, m)[:, :, None]).float().argmax(dim=2)  # (B, N): f(a)'s slot
    return _recall_batch(keys, values, queried, values.gather(1, where))



@dataclass(frozen=True)
class CyclicRecallTask(RecallTask):
    """:func:`cyclic_mqar` with its settings fixed, called as :class:`~attention_course.chapters.insight.ablations.RecallTask` is.

    Examples
    --------
    >>> task = CyclicRecallTask(kwargs={"n_pairs": 16, "cycle": 4})
    >>> task.name, task.seq_len
    ('cyclic_mqar', 32)
    """

    name: str = "cyclic_mqar"

    def __call__(self, batch_size: int, seed: int = 0, generator: Optional[torch.Generator] = None):
        return cyclic_mqar(batch_size, seed=seed, generator=generator, **self.kwargs)


def untrained_accuracy(variant: Variant, task: RecallTask, seeds: Sequence[int] = (0, 1, 2), d_model: int = 64,
                       batch_size: int = 512) -> list[float]:
    """Held-out accuracy of the variant's model at its seeded initialisation (no training), one per seed.

    Examples
    --------
    >>> acc = untrained_accuracy(Variant(), RecallTask("stacked_mqar", {"n_pairs": 4}), seeds=(0,), d_model=8,
    ...                          batch_size=16)
    >>> len(acc), 0.0 <= acc[0] <= 1.0
    (1, True)
    """
    return [round(accuracy(MixerModel(variant, task.seq_len, d_model=d_model, seed=s), task, batch_size, TEST_SEED), 4)
            for s in seeds]
