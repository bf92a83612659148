r"""Pointer chasing: a task that needs :math:`k` lookups composed, not just reach.

A sequence lists the edges of a random **successor map** :math:`f` on ``n`` nodes, in
random order, one token per edge :math:`a \to f(a)`, and ends with a start node
:math:`q`. The target at the last position is the node reached after ``hops`` steps,

.. math::

    y = f^{k}(q) = \underbrace{f(f(\cdots f}_{k}(q)\cdots)).

:math:`f` is a single random cycle, so for :math:`1 < k < n` following one link or copying
scores 0; a guess scores :math:`1/n`. Nodes are tokens ``0 .. n-1``; the edge
:math:`a \to b` is the single token ``n + a n + b`` (reading an edge costs no layer). A fixed
hash of :math:`f` (:func:`map_split`) holds out maps for testing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from .tasks import Batch, _generator

__all__ = ["N_SPLITS", "random_cycles", "map_split", "follow", "edge_tokens", "decode",
           "pointer_chasing", "PointerChasingTask", "baseline_accuracies"]

#: One map in ``N_SPLITS`` is held out (split ``"test"``), the rest are for training.
N_SPLITS = 5
_SPLITS = ("train", "test", "all")


def _check(batch_size: int, n_nodes: int, hops: int) -> None:
    for name, v in {"batch_size": batch_size, "n_nodes": n_nodes, "hops": hops}.items():
        if int(v) != v or v < 1:
            raise ValueError(f"{name}={v!r}; expected a positive integer")
    if n_nodes < 3:
        raise ValueError(f"n_nodes={n_nodes}; expected at least 3 so that 2-hop answers differ")


def random_cycles(batch_size: int, n_nodes: int, generator: torch.Generator) -> torch.Tensor:
    r"""Successor maps that are single random cycles, shape (B, n): ``f[b, a]`` follows node ``a``.

    :math:`f(\pi_i) = \pi_{(i + 1) \bmod n}` for a random order :math:`\pi`; all cycles are equally likely.

    Examples
    --------
    >>> f = random_cycles(2, 5, torch.Generator().manual_seed(0))
    >>> f.shape, sorted(f[0].tolist())               # a permutation of the nodes
    (torch.Size([2, 5]), [0, 1, 2, 3, 4])
    """
    order = torch.rand(batch_size, n_nodes, generator=generator).argsort(dim=1)  # (B, n): pi
    f = torch.empty_like(order)
    f.scatter_(1, order, order.roll(-1, dims=1))  # f[pi_i] = pi_{i+1}   (B, n)
    return f


def map_split(f: torch.Tensor) -> torch.Tensor:
    r"""Which part a map belongs to, shape (B,): 0 = held out (``"test"``), 1.. = training.

    A fixed hash of the whole map, :math:`\big(\sum_a c_a f(a)\big) \bmod` ``N_SPLITS``
    with :math:`c_a = 2a + 1`: it depends on :math:`f` only.

    Examples
    --------
    >>> map_split(torch.tensor([[1, 2, 3, 0], [1, 3, 0, 2]])).tolist()   # 22 mod 5, 24 mod 5
    [2, 4]
    """
    c = 2 * torch.arange(f.shape[-1]) + 1  # (n,)
    return (f * c).sum(dim=-1) % N_SPLITS  # (B,)


def follow(f: torch.Tensor, start: torch.Tensor, hops: int) -> torch.Tensor:
    r"""The node reached from ``start`` after ``hops`` steps of ``f``: :math:`f^{k}(q)`, shape (B,).

    Parameters
    ----------
    f : torch.LongTensor, shape (B, n)
    start : torch.LongTensor, shape (B,)
    hops : int, >= 0

    Examples
    --------
    >>> f = torch.tensor([[1, 2, 3, 0]])          # 0 -> 1 -> 2 -> 3 -> 0
    >>> [int(follow(f, torch.tensor([0]), k)) for k in range(6)]
    [0, 1, 2, 3, 0, 1]
    """
    node = start
    for _ in range(int(hops)):
        node = f.gather(1, node[:, None])[:, 0]  # (B,): one more link
    return node


def edge_tokens(src: torch.Tensor, dst: torch.Tensor, n_nodes: int) -> torch.Tensor:
    """The token of each edge ``src -> dst``: ``n + src * n + dst`` (same shape as ``src``).

    Examples
    --------
    >>> edge_tokens(torch.tensor([0, 2]), torch.tensor([1, 0]), 3).tolist()
    [4, 9]
    """
    return n_nodes + src * n_nodes + dst


def decode(inputs: torch.Tensor, n_nodes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Read the successor map and the query back from a batch's inputs.

    Parameters
    ----------
    inputs : torch.LongTensor, shape (B, n + 1)
        ``n`` edge tokens, then the query node.

    Returns
    -------
    f : torch.LongTensor, shape (B, n)
    query : torch.LongTensor, shape (B,)

    Examples
    --------
    >>> batch = pointer_chasing(3, n_nodes=5, hops=2, seed=0)
    >>> f, q = decode(batch.inputs, 5)
    >>> bool((follow(f, q, 2) == batch.targets[:, -1]).all())
    True
    """
    B, T = inputs.shape
    if T != n_nodes + 1:
        raise ValueError(f"inputs have shape {(B, T)}; expected (B, n_nodes + 1) = (B, {n_nodes + 1})")
    edges = inputs[:, :-1] - n_nodes  # (B, n): a n + b
    src, dst = edges // n_nodes, edges % n_nodes  # (B, n) each
    f = torch.full((B, n_nodes), -1, dtype=torch.long)
    f.scatter_(1, src, dst)  # f[src] = dst   (B, n)
    return f, inputs[:, -1]


def pointer_chasing(
    batch_size: int,
    n_nodes: int = 8,
    hops: int = 1,
    split: str = "train",
    seed: int = 0,
    generator: Optional[torch.Generator] = None,
) -> Batch:
    r"""Edges of a random cycle in random order, then a start node: predict :math:`f^{k}(q)`.

    Maps are drawn until ``batch_size`` of them fall in ``split``; ``split="test"`` needs
    ``n_nodes >= 5``.

    Parameters
    ----------
    batch_size : int
    n_nodes : int, default 8
        The inputs have length ``T = n_nodes + 1`` and tokens in ``[0, n + n**2)``.
    hops : int, default 1
        k, the number of links to follow.
    split : {"train", "test", "all"}, default "train"
    seed, generator : int, default 0, and torch.Generator, optional
        A fresh ``torch.Generator`` seeded with ``seed``, or ``generator`` itself (advanced) when given.

    Returns
    -------
    Batch
        ``inputs``, ``targets`` and ``mask`` (B, n + 1); only the last position counts.

    Examples
    --------
    >>> inputs, targets, mask = pointer_chasing(2, n_nodes=4, hops=2, seed=0)
    >>> inputs.shape, mask.sum().item(), bool((inputs[:, -1] < 4).all())
    (torch.Size([2, 5]), 2, True)
    """
    _check(batch_size, n_nodes, hops)
    if split not in _SPLITS:
        raise ValueError(f"split={split!r}; expected one of {_SPLITS}")
    if split == "test" and n_nodes < 5:
        raise ValueError(f"split='test' with n_nodes={n_nodes}: no cycle on fewer than 5 nodes is "
                         f"held out; expected n_nodes >= 5 or split='all'")
    g = _generator(seed, generator)
    kept, have = [], 0
    while have < batch_size:
        f = random_cycles(2 * batch_size, n_nodes, g)  # (2B, n) candidates
        part = map_split(f)  # (2B,)
        keep = part == 0 if split == "test" else part > 0 if split == "train" else part >= 0
        kept.append(f[keep])
        have += int(keep.sum())
    f = torch.cat(kept)[:batch_size]  # (B, n)
    order = torch.rand(batch_size, n_nodes, generator=g).argsort(dim=1)  # (B, n): edge order
    src = order  # the edges a -> f(a), listed in a random order of a
    edges = edge_tokens(src, f.gather(1, src), n_nodes)  # (B, n)
    query = torch.randint(0, n_nodes, (batch_size,), generator=g)  # (B,)
    answer = follow(f, query, hops)  # (B,)
    inputs = torch.cat([edges, query[:, None]], dim=1)  # (B, n + 1)
    targets = torch.cat([inputs[:, 1:], answer[:, None]], dim=1)  # (B, n + 1)
    mask = torch.zeros_like(inputs, dtype=torch.bool)
    mask[:, -1] = True
    return Batch(inputs, targets, mask)


@dataclass(frozen=True)
class PointerChasingTask:
    """:func:`pointer_chasing` with its settings fixed: ``task(batch_size, generator=g) -> Batch``.

    Examples
    --------
    >>> task = PointerChasingTask(n_nodes=8, hops=3)
    >>> task.vocab_size, task.seq_len, task(4, seed=1).inputs.shape
    (72, 9, torch.Size([4, 9]))
    """

    n_nodes: int = 8
    hops: int = 1
    split: str = "train"

    def __post_init__(self) -> None:
        _check(1, self.n_nodes, self.hops)
        if self.split not in _SPLITS:
            raise ValueError(f"split={self.split!r}; expected one of {_SPLITS}")

    @property
    def name(self) -> str:
        """A label, e.g. ``"pointer_chasing(n=8, k=3, train)"``."""
        return f"pointer_chasing(n={self.n_nodes}, k={self.hops}, {self.split})"

    def __call__(self, batch_size: int, seed: int = 0, generator: Optional[torch.Generator] = None) -> Batch:
        return pointer_chasing(batch_size, self.n_nodes, self.hops, self.split, seed=seed, generator=generator)

    @property
    def vocab_size(self) -> int:
        """``n`` node tokens and ``n**2`` edge tokens."""
        return self.n_nodes + self.n_nodes**2

    @property
    def seq_len(self) -> int:
        """``n`` edges and the query."""
        return self.n_nodes + 1


def baseline_accuracies(batch: Batch, n_nodes: int) -> dict:
    r"""What answers that do not compose ``k`` lookups score on a batch.

    * ``"guess"``: a uniform guess among the nodes, :math:`1/n` (expected accuracy);
    * ``"copy"``: answer the start node :math:`q`;
    * ``"one_hop"``: follow one link, answer :math:`f(q)`;
    * ``"hop_j"``: for each :math:`j` in :math:`0..n-1`, the share of answers equal to
      :math:`f^{j}(q)`: 1 at :math:`j = k \bmod n` and 0 elsewhere on a single cycle.

    Examples
    --------
    >>> b = baseline_accuracies(pointer_chasing(64, n_nodes=8, hops=2, seed=0), 8)
    >>> b["guess"], b["copy"], b["one_hop"], b["hop_j"][:3]
    (0.125, 0.0, 0.0, [0.0, 0.0, 1.0])
    """
    f, q = decode(batch.inputs, n_nodes)
    y = batch.targets[:, -1]  # (B,)
    hop_j = [float((follow(f, q, j) == y).double().mean()) for j in range(n_nodes)]
    return {"guess": 1.0 / n_nodes, "copy": hop_j[0], "one_hop": hop_j[1], "hop_j": hop_j}
