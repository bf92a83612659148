r"""Do the heads of one layer divide the work? A task with two relations per output (chapter 4).

Tokens of :math:`V = F^2` read as two fields, :math:`a(x) = \lfloor x / F \rfloor`, :math:`b(x) = x \bmod F`;
the target is :math:`y_t = F\, a(x_{t - o_1}) + b(x_{t - o_2})`. The loss splits into the fields' marginal
cross-entropies :math:`\mathcal L_a, \mathcal L_b` (each :math:`\ln F` for a model that knows nothing);
keeping or zeroing one head at a time says which head carries which relation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from ...core._backend import ShapeError, shape_str
from ...models.tasks import Batch
from ...models.tiny import TinyTransformer

__all__ = ["TwoOffsetTask", "keep_one_losses", "single_ablation_rises", "carried_relations", "RELATION_NAMES"]

#: The two relations of :class:`TwoOffsetTask` with its default offsets, in field order (a, b).
RELATION_NAMES = ("previous token", "three back")


@dataclass(frozen=True)
class TwoOffsetTask:
    r"""Random tokens; the target joins a field of the token ``o_1`` back and one of the token ``o_2`` back.

    Called like a :class:`~attention_course.models.tasks.Task`: ``task(batch_size, seed=0, generator=None) -> Batch``.
    ``offsets`` are :math:`(o_1, o_2)`, for the high and the low field; ``fields`` is F.

    Examples
    --------
    >>> task = TwoOffsetTask()
    >>> x, y, m = task(2, seed=0)
    >>> tuple(x.shape), int(m[0].sum()), task.vocab_size       # positions t >= 3 count
    ((2, 16), 13, 64)
    >>> bool((y[:, 3:] == 8 * (x[:, 2:-1] // 8) + x[:, :-3] % 8).all())
    True
    """

    seq_len: int = 16
    offsets: tuple = (1, 3)
    fields: int = 8

    def __post_init__(self) -> None:
        o1, o2 = self.offsets
        if not (1 <= o1 and 1 <= o2 and o1 != o2 and max(o1, o2) < self.seq_len and self.fields >= 2):
            raise ValueError(f"offsets={self.offsets}, seq_len={self.seq_len}, fields={self.fields}; expected two "
                             f"different offsets in 1..seq_len-1 and at least 2 fields")

    @property
    def vocab_size(self) -> int:
        """:math:`F^2`."""
        return self.fields**2

    def __call__(self, batch_size: int, seed: int = 0, generator: Optional[torch.Generator] = None) -> Batch:
        g = generator if generator is not None else torch.Generator().manual_seed(int(seed))
        T, F, (o1, o2) = self.seq_len, self.fields, self.offsets
        x = torch.randint(0, F * F, (batch_size, T), generator=g)  # (B, T)
        start = max(o1, o2)
        y = torch.zeros_like(x)  # (B, T); positions t < start are not counted
        y[:, start:] = F * (x[:, start - o1:T - o1] // F) + x[:, start - o2:T - o2] % F  # y_t = F a(x_{t-o1}) + b(x_{t-o2})
        mask = (torch.arange(T) >= start).expand(batch_size, T).clone()  # (B, T)
        return Batch(x, y, mask)


@torch.no_grad()
def field_losses(model: TinyTransformer, batch: Batch, fields: int = 8,
                 head_mask: Optional[torch.Tensor] = None) -> np.ndarray:
    r"""The two fields' marginal cross-entropies :math:`(\mathcal L_a, \mathcal L_b)` in nats, shape (2,).

    :math:`\mathcal L_a = -\overline{\log \textstyle\sum_{b} p(F a^\star + b)}`, and :math:`\mathcal L_b` likewise.
    ``head_mask``: optional, shape (n_layers, n_heads); 0 zeroes a head.

    Examples
    --------
    >>> from attention_course.models.tiny import ModelConfig
    >>> model = TinyTransformer(ModelConfig(n_layers=1), seed=0)     # untrained: near ln 8 = 2.08 each
    >>> field_losses(model, TwoOffsetTask()(64, seed=1)).round(1).tolist()
    [2.1, 2.1]
    """
    inputs, targets, mask = batch
    logits, _ = model(inputs, head_mask=head_mask)  # (B, T, F*F)
    if logits.shape[-1] != fields * fields:
        raise ShapeError(f"logits have shape {shape_str(logits)}; expected (B, T, {fields * fields}) for {fields} fields")
    logp = torch.log_softmax(logits.double(), -1)[mask]  # (N, F*F): the counted positions
    logp = logp.view(-1, fields, fields)  # (N, F, F): token F a + b at [a, b]
    y = targets[mask]  # (N,)
    log_a = torch.logsumexp(logp, 2).gather(1, (y // fields)[:, None])  # (N, 1): log p(a*)
    log_b = torch.logsumexp(logp, 1).gather(1, (y % fields)[:, None])  # (N, 1): log p(b*)
    return -torch.cat([log_a, log_b], 1).mean(0).numpy()  # (2,)


def keep_one_losses(model: TinyTransformer, batch: Batch, layer: int = 0, fields: int = 8) -> np.ndarray:
    r"""Each field's loss when only one head of ``layer`` is kept (the others zeroed), shape (h, 2).

    A head *carries* R when this is at most half of :math:`\ln F` (:func:`carried_relations` with ``losses=True``).

    Examples
    --------
    >>> from attention_course.models.tiny import ModelConfig
    >>> keep_one_losses(TinyTransformer(ModelConfig(n_layers=1), seed=0), TwoOffsetTask()(64, seed=1)).shape
    (4, 2)
    """
    eye = torch.eye(model.config.n_heads)
    return np.stack([field_losses(model, batch, fields, _layer_mask(model, layer, on)) for on in eye])  # (h, 2)


def _layer_mask(model: TinyTransformer, layer: int, on: torch.Tensor) -> torch.Tensor:
    """A head mask (n_layers, n_heads) of ones, with row ``layer`` set to ``on`` (n_heads,)."""
    mask = torch.ones(model.config.n_layers, model.config.n_heads)
    mask[layer] = on
    return mask


def keep_one_gains(model: TinyTransformer, batch: Batch, layer: int = 0, fields: int = 8) -> np.ndarray:
    r"""How much each head of ``layer``, kept alone, lowers each field's loss, shape (h, 2).

    .. math:: g_{iR} = \mathcal L_R(\text{every head of the layer zeroed}) - \mathcal L_R(\text{only head } i)

    Examples
    --------
    >>> from attention_course.models.tiny import ModelConfig
    >>> keep_one_gains(TinyTransformer(ModelConfig(n_layers=1), seed=0), TwoOffsetTask()(64, seed=1)).shape
    (4, 2)
    """
    none = field_losses(model, batch, fields, _layer_mask(model, layer, torch.zeros(model.config.n_heads)))  # (2,)
    return none[None, :] - keep_one_losses(model, batch, layer, fields)  # (h, 2)


def single_ablation_rises(model: TinyTransformer, batch: Batch, layer: int = 0, fields: int = 8) -> np.ndarray:
    r"""How much each field's loss rises when one head of ``layer`` is zeroed, shape (h, 2).

    .. math:: r_{iR} = \mathcal L_R(\text{head } i \text{ zeroed}) - \mathcal L_R(\text{every head})

    Examples
    --------
    >>> from attention_course.models.tiny import ModelConfig
    >>> single_ablation_rises(TinyTransformer(ModelConfig(n_layers=1), seed=0), TwoOffsetTask()(64, seed=1)).shape
    (4, 2)
    """
    full = field_losses(model, batch, fields)  # (2,)
    off = 1.0 - torch.eye(model.config.n_heads)  # row i: every head but i
    return np.stack([field_losses(model, batch, fields, _layer_mask(model, layer, on)) - full for on in off])  # (h, 2)


def carried_relations(gains: np.ndarray, threshold: float, losses: bool = False) -> dict:
    r"""Which relations each head carries, and whether the heads divide them.

    ``gains`` (h, R): keep-one gains (carried when at least ``threshold``), or with ``losses=True``
    keep-one losses (carried when at most ``threshold``). Returns ``carries`` (h, R) bool, ``n_both``
    (heads carrying more than one), ``uncarried`` and ``divided`` (no head carries two, all carried).

    Examples
    --------
    >>> r = carried_relations(np.array([[2.0, 0.1], [0.0, 1.9], [1.5, 0.0], [0.2, 0.3]]), 1.04)
    >>> r["n_both"], r["uncarried"], r["divided"]
    (0, 0, True)
    >>> carried_relations(np.array([[1.4, 1.3], [0.1, 0.0]]), 1.04)["divided"]      # one head does both
    False
    >>> carried_relations(np.array([[0.1, 3.0], [4.0, 0.2]]), 1.04, losses=True)["divided"]   # losses, alone
    True
    """
    gains = np.asarray(gains, dtype=float)
    if gains.ndim != 2:
        raise ShapeError(f"gains have shape {gains.shape}; expected (h, R)")
    carries = gains <= threshold if losses else gains >= threshold  # (h, R)
    n_both = int((carries.sum(1) > 1).sum())
    uncarried = int((~carries.any(0)).sum())
    return {"carries": carries, "n_both": n_both, "uncarried": uncarried, "divided": n_both == 0 and uncarried == 0}
