r"""Train one :class:`~attention_course.chapters.insight.mixers.Variant` on one task, and score it.

Every variant uses the same width, steps and batch and the package's one training loop; the learning
rate is picked on a validation batch (:func:`tune_and_train`). Accuracy is the share of the scored
positions whose most likely output is right, on a held-out batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

import torch

from ...models.training import train
from . import recall_tasks
from .mixers import VARIANTS, MixerModel, Variant

__all__ = ["RecallTask", "TASKS", "accuracy", "train_variant"]

TEST_SEED, VALID_SEED = 12345, 999


@dataclass(frozen=True)
class RecallTask:
    """A task of :mod:`~attention_course.chapters.insight.recall_tasks` with its settings fixed.

    Called as :func:`~attention_course.models.training.train` calls a task:
    ``task(batch_size, seed=0, generator=None) -> Batch``.

    Examples
    --------
    >>> task = RecallTask("stacked_mqar", {"n_pairs": 4})
    >>> task.seq_len, tuple(task(2).inputs.shape)
    (8, (2, 8, 2))
    """

    name: str
    kwargs: dict = field(default_factory=dict)

    def __call__(self, batch_size: int, seed: int = 0, generator: Optional[torch.Generator] = None):
        return getattr(recall_tasks, self.name)(batch_size, seed=seed, generator=generator, **self.kwargs)

    @property
    def seq_len(self) -> int:
        """The length T of the task's sequences."""
        return int(self(1).inputs.shape[1])


#: The two task families of the ablations.
TASKS = {
    "recall (MQAR, 16 pairs)": RecallTask("stacked_mqar", {"n_pairs": 16}),
    "previous token": RecallTask("previous_token", {"length": 32}),
}


def task_of(label: str, known: dict = TASKS) -> RecallTask:
    """The task of a run's label: one of ``known``, else stacked MQAR with the label's N, "recall (MQAR, N pairs)"."""
    if label in known:
        return known[label]
    return RecallTask("stacked_mqar", {"n_pairs": int(label.split("(MQAR, ")[1].split()[0])})


@torch.no_grad()
def accuracy(model: MixerModel, task: RecallTask, batch_size: int = 512, seed: int = TEST_SEED) -> float:
    """Share of the scored positions of one seeded batch where the top output is the target.

    Examples
    --------
    >>> task = RecallTask("stacked_mqar", {"n_pairs": 4})
    >>> 0.0 <= accuracy(MixerModel(Variant(), task.seq_len), task, batch_size=8) <= 1.0
    True
    """
    inputs, targets, mask = task(batch_size, seed=seed)
    logits, _ = model(inputs)  # (B, T, 64)
    return float((logits.argmax(dim=-1) == targets)[mask].float().mean())


def train_variant(variant: Variant, task: RecallTask, steps: int = 300, lr: float = 3e-3, seed: int = 0,
                  batch_size: int = 32, d_model: int = 64) -> tuple[MixerModel, float]:
    """Build the variant's model (seeded), train it with :func:`~attention_course.models.training.train`,
    and return it with its final training loss.

    Examples
    --------
    >>> task = RecallTask("previous_token", {"length": 8})
    >>> model, loss = train_variant(Variant(mixer="fixed"), task, steps=5, d_model=16)
    >>> loss > 0
    True
    """
    model = MixerModel(variant, task.seq_len, d_model=d_model, seed=seed)
    history = train(model, task, steps=steps, seed=seed, lr=lr, batch_size=batch_size)
    return model, float(history[-10:].mean())


def tune_and_train(variant: Variant, task: RecallTask, seeds: Sequence[int] = (0, 1, 2),
                   lrs: Sequence[float] = (3e-3, 1e-2), steps: int = 300, batch_size: int = 32,
                   d_model: int = 64) -> dict:
    """Pick the learning rate on seed ``seeds[0]`` (validation batch), then train every seed at it.

    Returns
    -------
    dict
        ``{"lr", "sweep": {lr: validation accuracy}, "accuracy": [test accuracy per seed], "seeds"}``.

    Examples
    --------
    >>> r = tune_and_train(Variant(mixer="none"), RecallTask("previous_token", {"length": 8}),
    ...                    seeds=(0,), lrs=(1e-2,), steps=3, d_model=16)
    >>> sorted(r)
    ['accuracy', 'final_loss', 'lr', 'seeds', 'sweep']
    """
    sweep, models = {}, {}
    for lr in lrs:
        models[lr] = train_variant(variant, task, steps, lr, seeds[0], batch_size, d_model)
        sweep[lr] = accuracy(models[lr][0], task, seed=VALID_SEED)
    best = max(lrs, key=lambda lr: (sweep[lr], -lr))
    trained = [models[best]] + [train_variant(variant, task, steps, best, s, batch_size, d_model) for s in seeds[1:]]
    return {"lr": best, "sweep": {str(k): round(v, 4) for k, v in sweep.items()},
            "accuracy": [round(accuracy(m, task), 4) for m, _ in trained],
            "final_loss": [round(loss, 4) for _, loss in trained], "seeds": list(seeds)}


def window_copy_accuracy(window: Optional[int], gap: int = 3, length: int = 16, steps: int = 150,
                         lr: float = 1e-2, seed: int = 0, d_model: int = 16) -> float:
    """Held-out accuracy of softmax attention with a causal window of ``window`` positions (None: all) on
    the copy of the token ``gap`` positions back (:func:`~attention_course.chapters.insight.recall_tasks.previous_token`).

    A window of ``w`` positions sees the answer only when ``w > gap``; a small model, seconds on a laptop.

    Examples
    --------
    >>> 0.0 <= window_copy_accuracy(2, gap=1, length=6, steps=2, d_model=8) <= 1.0
    True
    """
    task = RecallTask("previous_token", {"length": length, "lag": gap})
    model, _ = train_variant(Variant(window=window), task, steps, lr, seed, d_model=d_model)
    return accuracy(model, task, batch_size=256)
