r"""Are the trailing singular values of attention noise? Remove them, or the same energy elsewhere.

Keeping the leading :math:`k` modes of :math:`A = \sum_i \sigma_i u_i v_i^\top` (a share ``keep`` of
:math:`\|A\|_F^2`) removes :math:`E = \sum_{i > k} \sigma_i^2`; the same energy can be taken from random
or leading modes instead,

.. math::

    A' = A - \sum_{i \in R} \sigma_i u_i v_i^\top - c\, \sigma_j u_j v_j^\top, \qquad
    \sum_{i \in R} \sigma_i^2 + c^2 \sigma_j^2 = E .
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ...models.pretrained import minilm_weights
from . import head_swap as sw
from .in_function import minilm_ids, trained_induction_models

__all__ = []

#: How the removed energy is chosen: the trailing modes, modes in a random order, the leading modes.
ORDERS_REMOVED = ("trailing", "random", "leading")


def energy_rank(s: torch.Tensor, keep: float = 0.9) -> torch.Tensor:
    r"""The smallest :math:`k` with :math:`\sum_{i \le k} \sigma_i^2 \ge` ``keep`` :math:`\sum_i \sigma_i^2`.

    ``s``: singular values (..., r), decreasing -> (...) integers.

    Examples
    --------
    >>> energy_rank(torch.tensor([3.0, 1.0, 1.0]), keep=0.9).item()  # 9 of 11 is below 0.9
    2
    >>> energy_rank(torch.eye(4).diagonal(), keep=0.75).item()
    3
    """
    if not 0 < keep <= 1:
        raise ValueError(f"keep={keep}; expected 0 < keep <= 1")
    e = s.double() ** 2  # (..., r)
    # a relative slack of 1e-12 so that an exact share (3 of 4) counts as reached
    return ((e.cumsum(-1) < keep * e.sum(-1, keepdim=True) * (1 - 1e-12)).sum(-1) + 1).clamp(max=s.shape[-1])


def energy_removal(w: torch.Tensor, order: str = "trailing", keep: float = 0.9, seed: int = 0,
                   causal: bool = False) -> torch.Tensor:
    r"""Each matrix of ``w`` with its trailing energy removed, from the trailing, random or leading modes.

    ``w``: (..., T, S) -> (..., T, S), its dtype. ``order`` picks the modes that lose the energy
    :math:`E` fixed by ``keep`` (``"trailing"`` is :math:`A_k`); ``seed`` seeds the random order;
    ``causal`` zeroes the keys ``j > i`` afterwards.

    Examples
    --------
    >>> A = torch.softmax(torch.randn(2, 6, 6, generator=torch.Generator().manual_seed(0)), -1).double()
    >>> tail = (A - energy_removal(A, "trailing")).square().sum((-2, -1))
    >>> rand = (A - energy_removal(A, "random", seed=1)).square().sum((-2, -1))
    >>> bool(torch.allclose(tail, rand))  # the same energy, removed elsewhere
    True
    """
    if order not in ORDERS_REMOVED:
        raise ValueError(f"order={order!r}; expected one of {ORDERS_REMOVED}")
    if w.ndim < 2:
        raise ValueError(f"w has shape {tuple(w.shape)}; expected (..., T, S)")
    U, s, Vh = torch.linalg.svd(w.double(), full_matrices=False)  # (..., T, r), (..., r), (..., r, S)
    e = s ** 2  # (..., r)
    r = e.shape[-1]
    k = energy_rank(s, keep).unsqueeze(-1)  # (..., 1)
    idx = torch.arange(r)  # (r,)
    if order == "trailing":
        coef = (idx < k).double()  # (..., r): keep the leading k modes whole
    else:
        E = (e * (idx >= k)).sum(-1, keepdim=True)  # (..., 1): the trailing energy
        if order == "leading":
            perm = idx.expand_as(e)
        else:
            g = torch.Generator().manual_seed(int(seed))
            perm = torch.rand(e.shape, generator=g, dtype=torch.float64).argsort(-1)  # (..., r)
        e_p = e.gather(-1, perm)  # (..., r): energies in removal order
        before = e_p.cumsum(-1) - e_p  # energy removed before each mode
        whole = before + e_p <= E * (1 + 1e-12)
        part = ~whole & (before < E)
        c = torch.sqrt(((E - before) / e_p.clamp_min(1e-300)).clamp(0, 1))
        removed = torch.where(whole, 1.0, torch.where(part, c, 0.0)).double()  # (..., r), in removal order
        coef = 1 - torch.zeros_like(e).scatter(-1, perm, removed)  # (..., r), back in the SVD's order
    out = (U * (s * coef).unsqueeze(-2)) @ Vh  # (..., T, S)
    if causal:
        out = torch.tril(out)
    return out.to(w.dtype)


def _transform(order: str, keep: float, seed: int, causal: bool):
    # one seed per layer, so each layer's heads get their own random orders
    return lambda w, layer: energy_removal(w, order, keep, seed=1000 * seed + layer, causal=causal)


def _costs(row: dict, base: float) -> dict:
    """Each removal's cost (its value minus ``base``) divided by uniform attention's."""
    unif = row["uniform"] - base
    return {"trailing": (row["trailing"] - base) / unif, "leading": (row["leading"] - base) / unif,
            "random": float(np.mean([(x - base) / unif for x in row["random"]]))}


def _kept_share(maps, keep: float, n: int) -> float:
    """The mean share of modes :func:`energy_rank` keeps, over the maps (each (1, h, n, n)) and their heads."""
    return float(np.mean([(energy_rank(torch.linalg.svdvals(a.double()), keep) / n).float().mean().item() for a in maps]))


def trailing_study(seeds: Sequence[int] = (0, 1, 2, 3, 4), orders: Sequence[int] = (0, 1, 2, 3, 4),
                   draws: Sequence[int] = (0, 1, 2, 3, 4), n: int = 128, keeps: Sequence[float] = (0.9,),
                   steps: int = 600) -> dict:
    """The deciding run of ``trailing-noise``: the cost of each removal, and of uniform attention, per kept share.

    ``tiny``: per induction-model seed and share, held-out losses; ``minilm``: per sentence order and
    share, the relative change of the last hidden states. Each row has ``cost`` (divided by uniform
    attention's) and ``kept``, the mean share of modes kept.
    """
    tiny = []
    for seed, model, inputs, loss in trained_induction_models(seeds, steps):
        exact, uniform = loss(), loss(lambda w, layer: sw.uniform_weights(w, causal=True))
        for keep in keeps:
            kept = []
            with torch.no_grad():
                sw.tiny_forward_with(model, inputs, lambda w, layer: kept.append(
                    (energy_rank(torch.linalg.svdvals(w.double()), keep) / w.shape[-1]).mean().item()) or w)
            row = {"seed": seed, "keep": keep, "exact": exact, "uniform": uniform,
                   "trailing": loss(_transform("trailing", keep, 0, True)),
                   "leading": loss(_transform("leading", keep, 0, True)),
                   "random": [loss(_transform("random", keep, d, True)) for d in draws], "kept": float(np.mean(kept))}
            row["cost"] = _costs(row, row["exact"])
            tiny.append(row)
    W = minilm_weights()
    minilm = []
    with torch.no_grad():
        for order in orders:
            ids = minilm_ids(n, order)
            ref, att = sw.bert_forward_with(W, ids)
            ref = ref[-1]  # (1, n, d)

            def change(tf) -> float:
                return float((sw.bert_forward_with(W, ids, tf)[0][-1] - ref).norm() / ref.norm())

            uniform = change(lambda w, layer: sw.uniform_weights(w))
            for keep in keeps:
                row = {"order": int(order), "keep": keep, "uniform": uniform,
                       "trailing": change(_transform("trailing", keep, 0, False)),
                       "leading": change(_transform("leading", keep, 0, False)),
                       "random": [change(_transform("random", keep, d, False)) for d in draws],
                       "kept": _kept_share(att, keep, n)}
                row["cost"] = _costs(row, 0.0)
                minilm.append(row)
    return {"config": {"seeds": list(seeds), "orders": list(orders), "draws": list(draws), "n": n,
                       "keeps": list(keeps), "steps": steps}, "tiny": tiny, "minilm": minilm}
