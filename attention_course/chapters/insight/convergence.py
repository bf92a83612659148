r"""Train a variant until its validation accuracy stops rising, by a rule fixed in advance.

:class:`ConvergenceRule`: every ``check_every`` steps measure validation accuracy; stop at ``target``
(from ``min_steps``), on a gain below ``min_gain`` over ``window`` steps (from ``plateau_from``), or at
``max_steps``. The loop is :func:`attention_course.models.training.train`, the rule its ``callback``.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass
from typing import Callable, Optional, Sequence

import torch

from ...models.training import train
from .ablations import TEST_SEED, VALID_SEED, RecallTask, accuracy
from .mixers import MixerModel, Variant

__all__ = []


@dataclass(frozen=True)
class ConvergenceRule:
    """When to stop training: at the target, on a plateau, or at ``max_steps``.

    Examples
    --------
    >>> rule = ConvergenceRule()
    >>> rule.check_every, rule.min_steps, rule.max_steps, rule.target, rule.min_gain, rule.window
    (100, 400, 1200, 0.99, 0.01, 300)
    """

    check_every: int = 100
    min_steps: int = 400
    max_steps: int = 1200
    target: float = 0.99
    min_gain: float = 0.01
    window: int = 300
    valid_batch: int = 256
    plateau_from: int = 0

    def __post_init__(self) -> None:
        if self.window % self.check_every or self.max_steps % self.check_every:
            raise ValueError(f"window={self.window} and max_steps={self.max_steps} must be multiples of "
                             f"check_every={self.check_every}")


def stop_reason(curve: Sequence[float], rule: ConvergenceRule, best: bool = False) -> Optional[str]:
    """Apply ``rule`` to a validation curve (one value per check, the last taken at ``len * check_every`` steps).

    Returns ``"target"``, ``"plateau"``, ``"max steps"`` or ``None`` (go on). The plateau compares the last
    check with the one ``window`` back, or with ``best`` the best checks (a noisy last check cannot stop a rise).

    Examples
    --------
    >>> rule = ConvergenceRule()
    >>> stop_reason([0.2, 0.5, 0.999], rule) is None           # before min_steps
    True
    >>> stop_reason([0.2, 0.5, 0.8, 0.995], rule)
    'target'
    >>> stop_reason([0.30, 0.305, 0.306, 0.308], rule)         # +0.008 over the last 300 steps
    'plateau'
    >>> stop_reason([0.1, 0.3, 0.5, 0.7], rule) is None
    True
    >>> stop_reason([0.05 * i for i in range(1, 13)], rule)
    'max steps'
    >>> stop_reason([0.30, 0.305, 0.306, 0.308], ConvergenceRule(max_steps=4000, plateau_from=2000)) is None
    True
    """
    steps = len(curve) * rule.check_every
    if steps < rule.min_steps and steps < rule.max_steps:
        return None
    if curve[-1] >= rule.target:
        return "target"
    back = rule.window // rule.check_every
    if steps >= rule.plateau_from and len(curve) > back:
        gain = max(curve) - max(curve[:-back]) if best else curve[-1] - curve[-1 - back]
        if gain < rule.min_gain:
            return "plateau"
    return "max steps" if steps >= rule.max_steps else None


class _Stop(Exception):
    pass


def best_check(curve: list[float]) -> int:
    """Index of the best validation check (the first of equals).

    Examples
    --------
    >>> best_check([0.6, 0.5, 0.9, 0.88, 0.9])
    2
    """
    return max(range(len(curve)), key=lambda i: (curve[i], -i))


def train_until(model: torch.nn.Module, task: RecallTask, lr: float, seed: int, rule: ConvergenceRule,
                batch_size: int = 32, stop: Optional[Callable[[list[float], ConvergenceRule], Optional[str]]] = None,
                keep_best: bool = False) -> dict:
    """Train ``model`` in place until ``stop(curve, rule)`` (default :func:`stop_reason`) names a reason; with
    ``keep_best`` leave it at its best check. Returns ``{"steps", "stopped", "curve"}``."""
    stop = stop_reason if stop is None else stop
    curve: list[float] = []
    reason: list[str] = []
    best: dict = {}

    def check(step: int, m: torch.nn.Module, weights) -> None:
        if step == 0 or step % rule.check_every:
            return
        curve.append(round(accuracy(m, task, batch_size=rule.valid_batch, seed=VALID_SEED), 4))
        if keep_best and best_check(curve) == len(curve) - 1:
            best["state"] = copy.deepcopy(m.state_dict())
        why = stop(curve, rule)
        if why is not None:
            reason.append(why)
            raise _Stop

    try:
        train(model, task, steps=rule.max_steps, seed=seed, lr=lr, batch_size=batch_size, callback=check)
    except _Stop:
        pass
    if best:
        model.load_state_dict(best["state"])
    return {"steps": len(curve) * rule.check_every, "stopped": reason[0] if reason else "max steps", "curve": curve}


def train_converged(variant: Variant, task: RecallTask, lr: float, seed: int = 0, d_model: int = 64,
                    rule: ConvergenceRule = ConvergenceRule(), batch_size: int = 32) -> tuple[MixerModel, dict]:
    """Train the seeded variant with :func:`train_until` until ``rule`` stops it.

    Returns the model after the stopping check and :func:`train_until`'s record.

    Examples
    --------
    >>> task = RecallTask("previous_token", {"length": 8})
    >>> rule = ConvergenceRule(check_every=5, min_steps=5, max_steps=10, window=5, valid_batch=16)
    >>> model, r = train_converged(Variant(mixer="fixed"), task, lr=1e-2, d_model=16, rule=rule)
    >>> r["steps"] in (5, 10), r["stopped"] in ("target", "plateau", "max steps"), len(r["curve"]) == r["steps"] // 5
    (True, True, True)
    """
    model = MixerModel(variant, task.seq_len, d_model=d_model, seed=seed)
    return model, train_until(model, task, lr, seed, rule, batch_size)


def tune_converged(variant: Variant, task: RecallTask, seeds: Sequence[int] = (0, 1),
                   lrs: Sequence[float] = (3e-3, 1e-2), d_model: int = 64,
                   rule: ConvergenceRule = ConvergenceRule()) -> dict:
    """As :func:`~attention_course.chapters.insight.ablations.tune_and_train`, each model trained by ``rule``
    (the learning rate of ``seeds[0]``'s best last check, ties the smaller).

    Returns
    -------
    dict
        ``{"lr", "sweep", "accuracy" (test, per seed), "steps", "stopped", "curves", "seeds", "rule"}``.
    """
    return _tune(lambda lr, seed: train_converged(variant, task, lr, seed, d_model, rule), task, seeds, lrs, rule,
                 score=lambda curve: curve[-1])


def _tune(train_one: Callable[[float, int], tuple[torch.nn.Module, dict]], task: RecallTask, seeds: Sequence[int],
          lrs: Sequence[float], rule: ConvergenceRule, score: Callable[[list[float]], float],
          fields: Sequence[str] = ("steps", "stopped")) -> dict:
    """``train_one(lr, seed)`` for each learning rate on ``seeds[0]``, then every other seed at the learning rate whose
    curve ``score``s highest (ties: the smaller); each record's ``fields`` listed per seed, with the test accuracy."""
    torch.set_num_threads(1)
    runs = {lr: train_one(lr, seeds[0]) for lr in lrs}
    sweep = {lr: score(runs[lr][1]["curve"]) for lr in lrs}
    best = max(lrs, key=lambda lr: (sweep[lr], -lr))
    trained = [runs[best]] + [train_one(best, s) for s in seeds[1:]]
    return {"lr": best, "sweep": {str(k): v for k, v in sweep.items()},
            "accuracy": [round(accuracy(m, task, seed=TEST_SEED), 4) for m, _ in trained],
            **{f: [r[f] for _, r in trained] for f in fields}, "curves": [r["curve"] for _, r in trained],
            "seeds": list(seeds), "rule": asdict(rule)}
