r"""Train the tiny transformer with each score scale and measure what happens (chapter 6).

:func:`train_one` trains one model on ``"repeated_sequences"`` and records its loss, the gradient of
:math:`W_Q, W_K`, the sharpness of its attention, the spread :math:`\operatorname{std}(c\, q_i \cdot k_j)`,
:math:`j \le i`, before and after training, and its best previous-token and induction heads.
:func:`compare_scales` runs a grid of widths and scales; :data:`SCALE_RUN` is the stored comparison
(``python -m attention_course scaling-run``), read back by :func:`load_comparisons`.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, Optional, Union

import numpy as np
import torch

from ...core.attention import SCALES, Scale, causal_mask, resolve_scale
from ...models.probes import head_scores
from ...models.experiments import load_result, significant
from ...models.records import DATA_DIR
from ...models.tasks import Task, make_task
from ...models.tiny import ModelConfig, TinyTransformer, qk_logits
from ...models.training import evaluate_loss, train_run
from .training_grid import CHAPTER_6, HELD_OUT_SEED, TASK, ScalingGrid, grid_experiment, run_grid

__all__ = ["compare_scales", "load_comparisons"]

#: The fuller training comparison of chapter 6, shipped with the package.
STORED_RUN = DATA_DIR / "scaling_training.json"


@dataclass(frozen=True)
class ScaleRun:
    r"""What :func:`train_one` measures on one model; ``N`` steps, ``L`` layers.

    Attributes
    ----------
    factor : float
        The factor :math:`c(d_k)` on :math:`q \cdot k`.
    loss, grad_norm_qk : (N,)
        Before each update; ``grad_norm_qk`` is :math:`(\sum_\ell \lVert\nabla W_Q^{(\ell)}\rVert_F^2
        + \lVert\nabla W_K^{(\ell)}\rVert_F^2)^{1/2}`.
    grad_norm_init, grad_norm_qk_init : float
        All-parameter and :math:`W_Q, W_K` gradient norms at step 0.
    max_weight : (N, L)
        Mean largest attention weight per row (queries ``t >= 1``).
    eval_loss : float
        Held-out loss after training.
    logit_std_init, logit_std_final : (L,)
        Std of the scaled scores over the held-out pairs ``j <= i``, before and after training.
    previous_token, induction : (L,)
        Best head's score per layer after training.
    """

    factor: float
    loss: np.ndarray
    grad_norm_qk: np.ndarray
    grad_norm_init: float
    grad_norm_qk_init: float
    max_weight: np.ndarray
    eval_loss: float
    logit_std_init: np.ndarray
    logit_std_final: np.ndarray
    previous_token: np.ndarray
    induction: np.ndarray


def _logit_std(model: TinyTransformer, tokens: torch.Tensor) -> np.ndarray:
    """Per layer, the std of the scaled scores over the causal pairs ``j <= i``; shape (L,)."""
    allowed = torch.from_numpy(causal_mask(tokens.shape[1]))  # (T, T), True = may attend
    return np.array([float(s[..., allowed].std()) for s in qk_logits(model, tokens)])  # (L,)


def train_one(d_k: int, scale: Scale, seed: int = 0, task: Optional[Task] = None, **training: Any) -> ScaleRun:
    r"""Train one tiny transformer with width ``d_k`` and score factor :math:`c(d_k)` (``scale``).

    Initial ``W_Q, W_K`` entries have variance ``1/d_model`` whatever ``d_k``, so at initialisation
    :math:`\operatorname{Var}(q \cdot k) \approx d_k`. ``**training``: the keywords of
    :class:`~attention_course.models.experiments.Training`, defaulting to
    :data:`~attention_course.chapters.scaling.training_grid.CHAPTER_6`.

    Examples
    --------
    >>> run = train_one(8, "sqrt", steps=3, d_model=8, eval_batch=8)
    >>> run.loss.shape, run.max_weight.shape, round(run.factor, 3)
    ((3,), (3, 2), 0.354)
    """
    t = replace(CHAPTER_6, **training)
    task = make_task(TASK) if task is None else task
    held_out = task(t.eval_batch, seed=HELD_OUT_SEED).inputs  # (eval_batch, T)
    cfg = ModelConfig(d_model=t.d_model, n_heads=t.n_heads, n_layers=t.n_layers, d_k=d_k, scale=scale)
    model = TinyTransformer(cfg, seed=seed)
    std_init = _logit_std(model, held_out)  # (L,)
    run = train_run(model, task, steps=t.steps, seed=seed, lr=t.lr, batch_size=t.batch_size)
    grad_qk = np.sqrt((run.grad_norm_q**2 + run.grad_norm_k**2).sum(axis=1))  # (steps,), sum over layers
    scores = head_scores(model, task, batch_size=t.eval_batch)  # each (L, h)
    return ScaleRun(factor=cfg.score_scale, loss=run.loss, grad_norm_qk=grad_qk, grad_norm_init=run.grad_norm[0],
                    grad_norm_qk_init=grad_qk[0], max_weight=run.max_weight,
                    eval_loss=evaluate_loss(model, task, batch_size=t.eval_batch),
                    logit_std_init=std_init, logit_std_final=_logit_std(model, held_out),
                    previous_token=scores["previous_token"].max(axis=1),  # (L,), best head per layer
                    induction=scores["induction"].max(axis=1))


@dataclass(frozen=True)
class ScaleComparison:
    r"""Result of :func:`compare_scales` (one seed): :class:`ScaleRun` fields on a (D, C) grid of widths and scales.

    ``loss`` is (D, C, N), ``max_weight`` (D, C, N, L), ``eval_loss`` (D, C); curves per step, or block means
    after :func:`thin_comparison`. ``settings`` holds what is needed to rerun.
    """

    d_k: np.ndarray
    scales: tuple
    step: np.ndarray
    factor: np.ndarray
    loss: np.ndarray
    grad_norm_qk: np.ndarray
    grad_norm_init: np.ndarray
    grad_norm_qk_init: np.ndarray
    max_weight: np.ndarray
    eval_loss: np.ndarray
    logit_std_init: np.ndarray
    logit_std_final: np.ndarray
    previous_token: np.ndarray
    induction: np.ndarray
    settings: dict = field(default_factory=dict)

    #: How the stored JSON rounds the fields (:func:`~attention_course.models.experiments.result_document`): 4 digits.
    ROUNDING: ClassVar[dict] = {name: significant(4) for name in (
        "d_k", "step", "factor", "loss", "grad_norm_qk", "grad_norm_init", "grad_norm_qk_init", "max_weight",
        "eval_loss", "logit_std_init", "logit_std_final", "previous_token", "induction")}

    @classmethod
    def from_runs(cls, config: ScalingGrid, runs: dict[str, np.ndarray]) -> list[ScaleComparison]:
        """One comparison per seed (each field of ``runs`` is (D, C, S, ...)), thinned if ``config.every``."""
        out = []
        for k, seed in enumerate(config.seeds):
            r = cls(d_k=np.array(config.d_ks), scales=tuple(config.variants), step=np.arange(config.steps),
                    settings=config.settings(seed=seed), **{name: v[:, :, k] for name, v in runs.items()})
            out.append(thin_comparison(r, config.every) if config.every else r)
        return out

    def index(self, d_k: int, scale: Scale) -> tuple[int, int]:
        """Position ``(i, j)`` of a ``(d_k, scale)`` pair in the arrays."""
        if d_k not in self.d_k.tolist() or scale not in self.scales:
            raise KeyError(f"(d_k={d_k!r}, scale={scale!r}) not in d_k={self.d_k.tolist()}, "
                           f"scales={list(self.scales)}")
        return self.d_k.tolist().index(d_k), list(self.scales).index(scale)


def thin_comparison(result: ScaleComparison, every: int) -> ScaleComparison:
    """Average the curves over blocks of ``every`` steps (the last block may be shorter); ``step`` becomes the block centres.

    Examples
    --------
    >>> r = compare_scales([8], ["sqrt"], steps=5, d_model=8, eval_batch=8)
    >>> t = thin_comparison(r, 2)
    >>> t.step.tolist(), t.loss.shape
    ([0.5, 2.5, 4.0], (1, 1, 3))
    """
    if int(every) != every or every < 1:
        raise ValueError(f"every={every!r}; expected a positive integer")
    n = result.step.shape[0]
    blocks = [range(b, min(b + every, n)) for b in range(0, n, int(every))]  # step indices

    def block_means(x: np.ndarray, axis: int) -> np.ndarray:
        return np.stack([np.take(x, b, axis=axis).mean(axis=axis) for b in blocks], axis=axis)

    return replace(result, step=block_means(result.step.astype(float), 0), loss=block_means(result.loss, 2),
                   grad_norm_qk=block_means(result.grad_norm_qk, 2), max_weight=block_means(result.max_weight, 2))


#: The fuller comparison of chapter 6 (``python -m attention_course scaling-run``): 3 seeds,
#: ``d_k`` = 16, 64, 256, every scale, 4 heads, 600 steps at learning rate 3e-3, curves
#: averaged over blocks of 10 steps.
SCALE_RUN = grid_experiment(
    "scaling-run",
    ScalingGrid(train=train_one, result=ScaleComparison, definitions={s: (s,) for s in SCALES}, variants=SCALES,
                d_ks=(16, 64, 256), seeds=(0, 1, 2), steps=600, n_heads=4, lr=3e-3, every=10),
    STORED_RUN, help="train the tiny transformer with each score scale (chapter 6)",
    description="Train the tiny transformer on the induction task with each score scale, width and seed, "
                "and write the loss and gradient curves as JSON (about half an hour on one thread).",
    flags=("--d-k", "--scales", "--seeds", "--steps", "--n-heads", "--lr", "--every"))


def compare_scales(d_ks: Sequence[int] = (16, 64, 256), scales: Sequence[Scale] = SCALES, seed: int = 0,
                   **training: Any) -> ScaleComparison:
    """Run :func:`train_one` for every ``(d_k, scale)`` with one ``seed`` and stack the records: :data:`SCALE_RUN`, one seed.

    Examples
    --------
    >>> r = compare_scales([8], ["sqrt", "none"], steps=2, d_model=8, eval_batch=8)
    >>> r.loss.shape, r.max_weight.shape, r.factor.round(3).tolist()
    ((1, 2, 2), (1, 2, 2, 2), [[0.354, 1.0]])
    """
    dims, scales = np.atleast_1d(np.asarray(d_ks)).tolist(), tuple(scales)
    if not dims or not scales:
        raise ValueError(f"d_ks={dims} and scales={list(scales)}; expected at least one of each")
    for d, c in itertools.product(dims, scales):
        resolve_scale(d, c)  # fail before any training, on a bad d_k (0, 2.5) or scale
    config = ScalingGrid(train=train_one, result=ScaleComparison, definitions={c: (c,) for c in scales},
                         variants=scales, d_ks=tuple(int(d) for d in dims), seeds=(int(seed),), **training)
    return run_grid(config)[0]


def load_comparisons(path: Union[str, Path] = STORED_RUN) -> tuple[list[ScaleComparison], dict]:
    """Read stored comparisons (one per seed): ``(results, meta)``; default, the shipped :data:`SCALE_RUN`.

    Examples
    --------
    >>> results, meta = load_comparisons()
    >>> len(results), results[0].scales, results[0].loss.shape   # 3 seeds; (d_k, scale, blocks)
    (3, ('sqrt', 'none', 'mup'), (3, 3, 60))
    """
    return load_result(path, ScaleComparison)
