r"""Do the heads of one layer divide the work? A task with two relations per output (chapter 4).

An induction circuit needs two layers, so comparing two layers with one measures depth, not
how the heads of a layer share the work. This module builds a task whose every output needs
**two relations inside one layer**, and measures which head carries which.

**The two-offset task** (:class:`TwoOffsetTask`). Tokens are uniform over
:math:`V = F^2` (``F = 8``), each read as two fields, :math:`a(x) = \lfloor x / F \rfloor` and
:math:`b(x) = x \bmod F`. The target at position :math:`t` takes its high field from the token
``offsets[0]`` back and its low field from the token ``offsets[1]`` back,

.. math:: y_t = F\, a(x_{t - o_1}) + b(x_{t - o_2}), \qquad t \ge \max(o_1, o_2),

so a model must look at two positions at once. One head puts one mixture of weights on the
positions; two heads can look at one position each.

**Which head carries which relation.** The loss splits into the two fields' marginal
cross-entropies (:func:`field_losses`),

.. math:: \mathcal L_a = -\overline{\log \textstyle\sum_{b} p(F a^\star + b)}, \qquad
          \mathcal L_b = -\overline{\log \textstyle\sum_{a} p(F a + b^\star)},

each :math:`\ln F` for a model that knows nothing. :func:`keep_one_gains` keeps one head at a
time (the others zeroed) and measures how much it alone lowers each field's loss from the
model with every head zeroed; :func:`single_ablation_rises` zeroes one head at a time and
measures how much each field's loss rises (Michel et al. 2019). Both read only the model's
function, so they do not move when :math:`q \to \alpha q, k \to k/\alpha` or when the heads
are permuted (they permute with them). :func:`carried_relations` applies the threshold.
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

    Called like a :class:`~attention_course.models.tasks.Task`: ``task(batch_size, seed=0,
    generator=None) -> Batch``, so :func:`~attention_course.models.training.train` and
    :func:`~attention_course.models.training.evaluate_loss` take it as it is.

    Attributes
    ----------
    seq_len : int, default 16
        Length T of the inputs.
    offsets : (int, int), default (1, 3)
        :math:`o_1` (whose token gives the high field) and :math:`o_2` (the low field).
    fields : int, default 8
        F; the vocabulary has :math:`F^2` tokens.

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

    Parameters
    ----------
    model : TinyTransformer with ``vocab_size = fields ** 2``
    batch : Batch of :class:`TwoOffsetTask`
    head_mask : optional, shape (n_layers, n_heads); 0 zeroes a head

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

    :math:`\mathcal L_R(\text{only head } i)`; :math:`\ln F` is what a head that supplies nothing
    about relation R could at best leave. A head *carries* R when this is at most half of
    :math:`\ln F` (:func:`carried_relations` with ``losses=True``).

    Examples
    --------
    >>> from attention_course.models.tiny import ModelConfig
    >>> keep_one_losses(TinyTransformer(ModelConfig(n_layers=1), seed=0), TwoOffsetTask()(64, seed=1)).shape
    (4, 2)
    """
    L, h = model.config.n_layers, model.config.n_heads
    out = []
    for i in range(h):
        only = torch.ones(L, h)
        only[layer] = 0.0
        only[layer, i] = 1.0
        out.append(field_losses(model, batch, fields, only))
    return np.stack(out)  # (h, 2)


def keep_one_gains(model: TinyTransformer, batch: Batch, layer: int = 0, fields: int = 8) -> np.ndarray:
    r"""How much each head of ``layer``, kept alone, lowers each field's loss, shape (h, 2).

    .. math:: g_{iR} = \mathcal L_R(\text{every head of the layer zeroed}) - \mathcal L_R(\text{only head } i)

    Examples
    --------
    >>> from attention_course.models.tiny import ModelConfig
    >>> keep_one_gains(TinyTransformer(ModelConfig(n_layers=1), seed=0), TwoOffsetTask()(64, seed=1)).shape
    (4, 2)
    """
    silenced = torch.ones(model.config.n_layers, model.config.n_heads)
    silenced[layer] = 0.0
    none = field_losses(model, batch, fields, silenced)  # (2,): the layer silenced
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
    L, h = model.config.n_layers, model.config.n_heads
    full = field_losses(model, batch, fields)  # (2,)
    rises = []
    for i in range(h):
        mask = torch.ones(L, h)
        mask[layer, i] = 0.0
        rises.append(field_losses(model, batch, fields, mask) - full)
    return np.stack(rises)  # (h, 2)


def carried_relations(gains: np.ndarray, threshold: float, losses: bool = False) -> dict:
    r"""Which relations each head carries, and whether the heads divide them.

    Parameters
    ----------
    gains : shape (h, R): keep-one gains (:func:`keep_one_gains`; a head carries R when its gain is
        at least ``threshold``), or with ``losses=True`` keep-one losses (:func:`keep_one_losses`;
        a head carries R when its loss is at most ``threshold``)
    threshold : nats; the chapter uses half of :math:`\ln F`

    Returns
    -------
    dict with ``carries`` (h, R) bool, ``n_both`` (heads carrying more than one relation),
    ``uncarried`` (relations no head carries) and ``divided`` (no head carries two, every
    relation is carried).

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
