r"""What asymmetric scores buy (chapter 7's evidence page): cyclic successor recall and the score arms.

A score :math:`x^\top W_Q W_K^\top y` is symmetric when :math:`W_Q W_K^\top` is: tied :math:`W_K = W_Q`
(symmetric and PSD) or ``signed`` :math:`W_K = W_Q D` (symmetric, indefinite). On :func:`cyclic_mqar` a
symmetric key-key score :math:`s` (plus any term :math:`c` of the stored key) cannot order a cycle,

.. math:: \sum_{a} \big[s(a, f(a)) + c(f(a))\big] - \big[s(a, f^{-1}(a)) + c(f^{-1}(a))\big] = 0 ,

so reading out the top-scoring key is right on at most :math:`1 - 1/m` of the queries (3/4 for cycles
of 4); trained layers, which mix several keys, are not held to that bound.
:class:`Arm` and :class:`ArmModel` change the score (form, heads, frozen embeddings) and nothing else;
:func:`train_best` trains one to a budget and keeps its best validation check.
"""

from __future__ import annotations

from collections.abc import Sequence
import math
from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn

from ...models.tasks import Batch, _generator
from .ablations import VALID_SEED, RecallTask, accuracy
from .convergence import ConvergenceRule, _tune, best_check, stop_reason, train_until
from .mixers import MixerModel, Variant, mixing_mask, signature, symmetric_weights
from .recall_tasks import N_VALUES, _group_recall

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

    with :func:`successor` :math:`f`; the ``N`` stored keys are ``N / cycle`` whole cycles. Chance is 1/64.

    Returns a :class:`~attention_course.models.tasks.Batch` laid out as :func:`~.recall_tasks.stacked_mqar`'s.

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
    return _group_recall(batch_size, n_pairs, n_keys, cycle, _generator(seed, generator), lambda a: successor(a, cycle))


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


#: Score forms of an :class:`Arm`: learned (untied, signed, tied) and fixed (identity, fixed D, frozen random).
SCORES = ("untied", "signed", "tied", "identity", "fixed D", "frozen random")
#: How an :class:`Arm` turns scores into weights: softmax over each row, or :func:`~attention_course.chapters.insight.mixers.symmetric_weights`.
WEIGHTS = ("row", "symmetric")
#: What an :class:`Arm`'s score sees: the whole token (key, value and position embeddings summed) or the key embedding.
SCORE_INPUTS = ("token", "key")
#: Cyclic recall's budget: stop at 0.99 from step 400, otherwise train 12,000 steps (no plateau stop).
CYCLIC_BUDGET = ConvergenceRule(max_steps=12000, plateau_from=12100)
#: Cyclic recall trained to convergence: stop at 0.99 from step 400, or once the best check has gained less than
#: 0.002 over the last 12,000 steps (:func:`best_plateau`), else at 48,000 steps.
CONVERGED = ConvergenceRule(max_steps=48000, min_gain=0.002, window=12000, plateau_from=12000)
#: The validation accuracy whose first crossing measures learning speed (:func:`steps_to`).
SPEED_LEVEL = 0.95
#: The metric comparison's budget: stop at 0.99 from step 400, otherwise train 4,000 steps (no plateau stop).
METRIC_BUDGET = ConvergenceRule(max_steps=4000, plateau_from=4100)


@dataclass(frozen=True)
class Arm:
    """One arm of the score comparisons: score form (:data:`SCORES`), heads, frozen embeddings, ``weights``
    (:data:`WEIGHTS`), ``causal`` mask and what the score reads (:data:`SCORE_INPUTS`).

    Examples
    --------
    >>> Arm("signed", heads=2).heads, Arm("fixed D").fixed, Arm("untied").fixed
    (2, True, False)
    >>> Arm("signed", weights="symmetric", causal=False).weights
    'symmetric'
    """

    score: str = "untied"
    heads: int = 1
    frozen_inputs: bool = False
    weights: str = "row"
    causal: bool = True
    score_input: str = "token"

    def __post_init__(self) -> None:
        if self.score not in SCORES:
            raise ValueError(f"score={self.score!r}; expected one of {SCORES}")
        if self.heads < 1:
            raise ValueError(f"heads={self.heads}; expected >= 1")
        if self.weights not in WEIGHTS:
            raise ValueError(f"weights={self.weights!r}; expected one of {WEIGHTS}")
        if self.score_input not in SCORE_INPUTS:
            raise ValueError(f"score_input={self.score_input!r}; expected one of {SCORE_INPUTS}")
        if self.weights == "symmetric" and self.causal:
            raise ValueError("weights='symmetric' with causal=True; a causal mask is not symmetric, so the weights "
                             "would not be: use causal=False")

    @property
    def fixed(self) -> bool:
        """True when W_Q, W_K do not learn (a fixed metric)."""
        return self.score in ("identity", "fixed D", "frozen random")


class ArmModel(MixerModel):
    r""":class:`~attention_course.chapters.insight.mixers.MixerModel` with the score of an :class:`Arm`.

    Head :math:`h` scores :math:`s_h\, q^h_t \cdot k^h_s / \sqrt{d_h}` on its block of :math:`d_h = d / H` columns,
    with its own learnable scale :math:`s_h` (started at :math:`1/\sqrt{d}`); one untied head is the ``learn_scale`` model.

    Forward: ``inputs`` (B, T, 2) -> ``(logits (B, T, 64), [A (B, T, T)])``, ``A`` the heads' mean weights.

    Examples
    --------
    >>> from attention_course.chapters.insight.recall_tasks import stacked_mqar
    >>> x, y, m = stacked_mqar(2, n_pairs=4)
    >>> base = MixerModel(Variant(learn_scale=True), 8, d_model=16, seed=0)
    >>> torch.allclose(ArmModel(Arm(), 8, d_model=16, seed=0)(x)[0], base(x)[0], atol=1e-6)
    True
    >>> logits, (A,) = ArmModel(Arm("signed", heads=2), 8, d_model=16)(x)
    >>> tuple(logits.shape), torch.allclose(A.sum(-1), torch.ones(2, 8))
    ((2, 8, 64), True)
    """

    def __init__(self, arm: Arm, seq_len: int, d_model: int = 64, n_keys: int = 64, seed: int = 0) -> None:
        if d_model % arm.heads:
            raise ValueError(f"d_model={d_model} is not a multiple of heads={arm.heads}")
        super().__init__(Variant(learn_scale=True), seq_len, d_model=d_model, n_keys=n_keys, seed=seed)
        self.arm = arm
        self.log_scale = nn.Parameter(torch.full((arm.heads,), -0.5 * math.log(d_model)))  # $\tau_h$
        with torch.no_grad():
            if arm.score in ("identity", "fixed D"):
                self.W_q.copy_(torch.eye(d_model))
                self.W_k.copy_(torch.eye(d_model) if arm.score == "identity" else torch.diag(signature(d_model)))
        if arm.fixed:
            self.W_q.requires_grad_(False)
            self.W_k.requires_grad_(False)
        if arm.score in ("signed", "tied"):
            self.W_k.requires_grad_(False)  # unused: k is made from q
        if arm.frozen_inputs:
            for p in (self.E_K, self.E_V, self.P):
                p.requires_grad_(False)

    def forward(self, inputs: torch.Tensor) -> tuple[torch.Tensor, list]:
        if self.arm.score_input == "token":
            return super().forward(inputs)
        T, d = inputs.shape[1], self.d_model
        e_k = self.E_K[inputs[..., 0]]  # (B, T, d): what the score sees
        x = e_k + self.E_V[inputs[..., 1]] + self.P[:T]  # (B, T, d): what the values carry
        mixed, A = self.mix(x, e_k)
        return self.ln(x + mixed) @ self.E_V[:N_VALUES].T / math.sqrt(d), [A]  # (B, T, 64)

    def mix(self, x: torch.Tensor, seen: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Multi-head attention with the arm's score on embedded inputs ``x`` (B, T, d); the score reads ``seen``
        (B, T, d; default ``x``)."""
        B, T, d = x.shape
        H = self.arm.heads
        dh = d // H
        seen = x if seen is None else seen

        def split(z: torch.Tensor) -> torch.Tensor:  # (B, T, d) -> (B, H, T, d_h)
            return z.view(B, T, H, dh).transpose(1, 2)

        q = split(seen @ self.W_q)  # (B, H, T, d_h)
        if self.arm.score == "signed":
            k = q * signature(dh)  # (B, H, T, d_h): $k^h = x W_Q^h D$, a symmetric indefinite score per head
        elif self.arm.score == "tied":
            k = q  # symmetric, positive semi-definite per head
        else:
            k = split(seen @ self.W_k)  # (B, H, T, d_h)
        scale = self.log_scale.exp()[None, :, None, None]  # (1, H, 1, 1)
        scores = scale * (q @ k.transpose(-1, -2)) / math.sqrt(dh)  # (B, H, T, T)
        allowed = mixing_mask(T) if self.arm.causal else torch.ones(T, T, dtype=torch.bool)  # (T, T), True = may attend
        if self.arm.weights == "symmetric":
            A = symmetric_weights(scores, allowed)  # (B, H, T, T): $E_{ts} / \sqrt{r_t r_s}$, A = A^T
        else:
            A = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)  # (B, H, T, T), rows over keys
        out = (A @ split(x @ self.W_v)).transpose(1, 2).reshape(B, T, d)  # (B, T, d): heads concatenated
        return out @ self.W_o, A.mean(dim=1)


def best_plateau(curve: Sequence[float], rule: ConvergenceRule = CONVERGED) -> Optional[str]:
    """:data:`CONVERGED`'s stop: :func:`~attention_course.chapters.insight.convergence.stop_reason` on best checks.

    Examples
    --------
    >>> rule = ConvergenceRule(max_steps=2000, min_gain=0.002, window=300, plateau_from=300)
    >>> best_plateau([0.5, 0.6, 0.7], rule) is None, best_plateau([0.5, 0.6, 0.7, 0.995], rule)
    (True, 'target')
    >>> best_plateau([0.5, 0.9, 0.7, 0.7, 0.9], rule)            # best 0.9 three checks ago and now
    'plateau'
    >>> best_plateau([0.5, 0.9, 0.7, 0.7, 0.905], rule) is None  # the best rose by 0.005
    True
    >>> best_plateau([0.1 + 0.01 * i for i in range(20)], rule)
    'max steps'
    """
    return stop_reason(curve, rule, best=True)


def steps_to(curve: Sequence[float], level: float = SPEED_LEVEL, check_every: int = 100) -> Optional[int]:
    """Steps to the first validation check at or above ``level`` (``None`` if none is).

    Examples
    --------
    >>> steps_to([0.5, 0.96, 0.99]), steps_to([0.5, 0.9]) is None
    (200, True)
    """
    return next(((i + 1) * check_every for i, a in enumerate(curve) if a >= level), None)


def train_best(arm: Arm, task: RecallTask, lr: float, seed: int = 0, d_model: int = 64,
               rule: ConvergenceRule = CYCLIC_BUDGET, batch_size: int = 32) -> tuple[ArmModel, dict]:
    """Train the seeded arm until ``rule`` stops it (:data:`CONVERGED` by :func:`best_plateau`); keep the best check.

    Returns the model at its best check and ``{"steps", "best_step", "stopped", "curve"}``.

    Examples
    --------
    >>> task = RecallTask("previous_token", {"length": 8})
    >>> rule = ConvergenceRule(check_every=5, min_steps=5, max_steps=15, window=5, valid_batch=16, plateau_from=20)
    >>> model, r = train_best(Arm(), task, lr=1e-2, d_model=16, rule=rule)
    >>> r["best_step"] == 5 * (1 + best_check(r["curve"])), r["steps"] == 5 * len(r["curve"])
    (True, True)
    """
    model = ArmModel(arm, task.seq_len, d_model=d_model, seed=seed)
    record = train_until(model, task, lr, seed, rule, batch_size,
                         stop=best_plateau if rule == CONVERGED else stop_reason, keep_best=True)
    return model, {"steps": record["steps"], "best_step": (1 + best_check(record["curve"])) * rule.check_every,
                   "stopped": record["stopped"], "curve": record["curve"]}


def tune_best(arm: Arm, task: RecallTask, seeds: Sequence[int] = (0, 1, 2), lrs: Sequence[float] = (3e-3, 1e-2),
              d_model: int = 64, rule: ConvergenceRule = CYCLIC_BUDGET) -> dict:
    """:func:`train_best` at the learning rate of ``seeds[0]``'s best check (ties: the smaller), every seed;
    ``{"lr", "sweep", "accuracy", "steps", "best_step", "stopped", "curves", "seeds", "rule"}``.
    """
    return _tune(lambda lr, seed: train_best(arm, task, lr, seed, d_model, rule), task, seeds, lrs, rule, score=max,
                 fields=("steps", "best_step", "stopped"))
