r"""Why the unscaled model fails: the gradient at the softmax, and a 2x2 experiment (chapter 6).

With :math:`s = c\,q k^\top` and :math:`q = x W_Q`, :math:`\partial\mathcal{L}/\partial W_Q = c\, x^\top (\partial\mathcal{L}/\partial s)\, k`:
the gradient of :math:`W_Q` carries the factor :math:`c`, the gradient at the softmax's input does not
(:func:`score_gradient_norms`). :data:`CAUSES` trains :data:`VARIANTS` (unscaled with :math:`W_Q`
started and/or stepped :math:`\sqrt{d_k}` times smaller); the stored run is ``python -m attention_course
scaling-causes``, read back by :func:`load_causes`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, Optional, Union

import numpy as np
import torch

from ...core.attention import resolve_scale
from ...models.adamw import AdamW
from ...models.experiments import load_result, significant
from ...models.probes import head_scores
from ...models.records import DATA_DIR
from ...models.tasks import Task, make_task
from ...models.tiny import ModelConfig, TinyTransformer
from ...models.training import OptimizerFactory, evaluate_loss, masked_loss, train
from .training_grid import CHAPTER_6, HELD_OUT_SEED, TASK, ScalingGrid, grid_experiment

__all__ = ["VARIANTS", "train_variant", "load_causes"]

#: The 2x2 experiment plus its reference: name -> (scale, W_Q init factor, W_Q lr factor).
#: ``"sqrt"`` in a factor stands for :math:`1/\sqrt{d_k}`.
VARIANTS = {
    "scaled": ("sqrt", 1, 1),
    "unscaled": ("none", 1, 1),
    "unscaled, small W_Q init": ("none", "sqrt", 1),
    "unscaled, small W_Q lr": ("none", 1, "sqrt"),
    "unscaled, both": ("none", "sqrt", "sqrt"),
}

#: The 2x2 run of chapter 6, shipped with the package.
STORED_CAUSES = DATA_DIR / "scale_causes.json"


def score_gradients(model: TinyTransformer, inputs: torch.Tensor, targets: torch.Tensor,
                    mask: torch.Tensor) -> dict[str, list]:
    r"""The loss gradient at each layer's softmax input, :math:`p \odot (g - \langle p, g\rangle)`, and at ``W_Q, W_K``.

    By :func:`torch.autograd.grad`: the parameters' ``.grad`` are left as they were, so it can run inside a
    training step.

    Parameters
    ----------
    model : TinyTransformer
    inputs, targets : torch.LongTensor, shape (B, T)
    mask : torch.BoolTensor, shape (B, T)
        Positions that count in the loss.

    Returns
    -------
    dict of lists, one entry per layer
        ``"score"``: :math:`\partial\mathcal{L}/\partial s`, each (B, h, T, T);
        ``"W_q"``, ``"W_k"``: each (h, d_model, d_k).

    Examples
    --------
    >>> task = make_task("repeated_sequences")
    >>> model = TinyTransformer(ModelConfig(d_k=16, n_heads=1, scale="none"), seed=0)
    >>> g = score_gradients(model, *task(8, seed=0))
    >>> tuple(g["score"][0].shape), tuple(g["W_q"][0].shape), model.W_q[0].grad is None
    ((8, 1, 28, 28), (1, 32, 16), True)
    """
    logits, weights = model(inputs)  # (B, T, V), L x (B, h, T, T)
    L = len(weights)
    grads = [g.contiguous() for g in  # laid out as .backward() would store them
             torch.autograd.grad(masked_loss(logits, targets, mask), [*weights, *model.W_q, *model.W_k])]
    with torch.no_grad():
        score = [w * (g - (w * g).sum(-1, keepdim=True)) for w, g in zip(weights, grads[:L])]  # L x (B, h, T, T)
    return {"score": score, "W_q": list(grads[L:2 * L]), "W_k": list(grads[2 * L:])}


def score_gradient_norms(model: TinyTransformer, inputs: torch.Tensor, targets: torch.Tensor,
                         mask: torch.Tensor) -> dict[str, np.ndarray]:
    r"""Frobenius norms of :func:`score_gradients`, per layer: each entry (L,).

    Examples
    --------
    >>> task = make_task("repeated_sequences")
    >>> model = TinyTransformer(ModelConfig(d_k=16, n_heads=1, scale="none"), seed=0)
    >>> g = score_gradient_norms(model, *task(8, seed=0))
    >>> g["score"].shape, g["W_q"].shape
    ((2,), (2,))
    """
    grads = score_gradients(model, inputs, targets, mask)
    return {k: np.array([float(torch.linalg.vector_norm(t)) for t in v]) for k, v in grads.items()}


def _factor(x: Union[str, float], d_k: int) -> float:
    """A factor of :data:`VARIANTS`: a number, or ``"sqrt"`` for 1/sqrt(d_k)."""
    return resolve_scale(d_k, x) if isinstance(x, str) else float(x)


def adamw_q_lr(model: TinyTransformer, lr: float, weight_decay: float, q_lr: float = 1.0) -> AdamW:
    r"""AdamW with learning rate ``q_lr * lr`` on every layer's ``W_q`` and ``lr`` on the rest.

    Examples
    --------
    >>> opt = adamw_q_lr(TinyTransformer(ModelConfig(d_model=8), seed=0), lr=1e-2, weight_decay=0.0, q_lr=0.5)
    >>> [group["lr"] for group in opt.param_groups]
    [0.005, 0.01]
    """
    q_params = {id(p) for p in model.W_q}
    groups = [{"params": list(model.W_q), "lr": lr * q_lr},
              {"params": [p for p in model.parameters() if id(p) not in q_params], "lr": lr}]
    return AdamW(groups, lr=lr, weight_decay=weight_decay)


def build_variant(d_k: int, scale: Union[str, float] = "none", q_init: Union[str, float] = 1,
                  q_lr: Union[str, float] = 1, seed: int = 0, d_model: int = 32, n_heads: int = 1,
                  n_layers: int = 2) -> tuple[TinyTransformer, OptimizerFactory]:
    r"""The model of a variant (``W_q`` multiplied by ``q_init``) and its ``optimizer`` (:func:`adamw_q_lr` with ``q_lr``).

    ``"sqrt"`` as a factor is :math:`1/\sqrt{d_k}`.

    Examples
    --------
    >>> model, optimizer = build_variant(8, "none", q_init="sqrt", q_lr="sqrt", d_model=8)
    >>> float(model.W_q[0].detach().std()) < float(model.W_k[0].detach().std())
    True
    >>> [round(group["lr"], 5) for group in optimizer(model, 1e-2, 0.0).param_groups]
    [0.00354, 0.01]
    """
    cfg = ModelConfig(d_model=d_model, n_heads=n_heads, n_layers=n_layers, d_k=d_k, scale=scale)
    model = TinyTransformer(cfg, seed=seed)
    with torch.no_grad():
        for W in model.W_q:
            W.mul_(_factor(q_init, d_k))  # $W_Q \leftarrow a\,W_Q$
    return model, partial(adamw_q_lr, q_lr=_factor(q_lr, d_k))


@dataclass(frozen=True)
class VariantRun:
    r"""What :func:`train_variant` measures; ``N`` steps, ``L`` layers.

    ``loss`` (N,) before each update; ``eval_loss`` held out after training; ``score_grad0``, ``wq_grad0``
    (L,) :func:`score_gradient_norms` at initialisation; ``previous_token``, ``induction`` (L,) the best
    head's score per layer after training.
    """

    loss: np.ndarray
    eval_loss: float
    score_grad0: np.ndarray
    wq_grad0: np.ndarray
    previous_token: np.ndarray
    induction: np.ndarray


def train_variant(d_k: int = 64, scale: Union[str, float] = "none", q_init: Union[str, float] = 1,
                  q_lr: Union[str, float] = 1, seed: int = 0, task: Optional[Task] = None,
                  **training: Any) -> VariantRun:
    r"""Train the tiny transformer with :math:`W_Q` initialised and stepped by the factors ``q_init``, ``q_lr``.

    :func:`build_variant`'s model and optimiser, trained by :func:`~attention_course.models.training.train`;
    with ``q_init = q_lr = 1`` the losses equal ``train``'s with AdamW bit for bit. ``**training`` as in
    :func:`~attention_course.chapters.scaling.training.train_one`.

    Examples
    --------
    >>> run = train_variant(8, "none", q_init="sqrt", q_lr="sqrt", steps=3, d_model=8, eval_batch=8)
    >>> run.loss.shape, run.score_grad0.shape
    ((3,), (2,))
    """
    t = replace(CHAPTER_6, **training)
    task = make_task(TASK) if task is None else task
    model, optimizer = build_variant(d_k, scale, q_init, q_lr, seed=seed, d_model=t.d_model, n_heads=t.n_heads,
                                     n_layers=t.n_layers)
    grads = score_gradient_norms(model, *task(t.eval_batch, seed=HELD_OUT_SEED))
    loss = train(model, task, steps=t.steps, seed=seed, lr=t.lr, batch_size=t.batch_size, optimizer=optimizer)
    scores = head_scores(model, task, batch_size=t.eval_batch)  # each (L, h)
    return VariantRun(loss=loss, eval_loss=evaluate_loss(model, task, batch_size=t.eval_batch),
                      score_grad0=grads["score"], wq_grad0=grads["W_q"],
                      previous_token=scores["previous_token"].max(axis=1),
                      induction=scores["induction"].max(axis=1))


@dataclass(frozen=True)
class CauseGrid:
    """Result of :data:`CAUSES`: :class:`VariantRun` fields stacked as (variant, seed, ...); ``settings`` the run's."""

    variants: tuple
    seeds: np.ndarray
    loss: np.ndarray
    eval_loss: np.ndarray
    score_grad0: np.ndarray
    wq_grad0: np.ndarray
    previous_token: np.ndarray
    induction: np.ndarray
    settings: dict = field(default_factory=dict)

    #: How the stored JSON rounds the fields.
    ROUNDING: ClassVar[dict] = {"loss": significant(4)}

    @classmethod
    def from_runs(cls, config: ScalingGrid, runs: dict[str, np.ndarray]) -> CauseGrid:
        """The grid of one width: each field of ``runs`` (1, V, S, ...) without its width axis."""
        (d_k,) = config.d_ks
        return cls(variants=tuple(config.variants), seeds=np.array(config.seeds),
                   settings={"d_k": d_k, **config.settings()}, **{k: v[0] for k, v in runs.items()})


#: The 2x2 run of chapter 6 (``python -m attention_course scaling-causes``): every variant, 5 seeds,
#: ``d_k`` = 64, 200 steps, the chapter's other defaults.
CAUSES = grid_experiment(
    "scaling-causes", ScalingGrid(train=train_variant, result=CauseGrid, definitions=VARIANTS, variants=tuple(VARIANTS)),
    STORED_CAUSES, help="chapter 6's 2x2 run: W_Q init x W_Q learning rate without the scale",
    description="Train the tiny transformer at d_k = 64 with and without the scale, and without it with W_Q "
                "started, stepped or both sqrt(d_k) times smaller, over seeds; write held-out losses as JSON "
                "(default: attention_course/data/scale_causes.json; about a minute).",
    flags=("--seeds", "--steps"))


def load_causes(path: Union[str, Path] = STORED_CAUSES) -> tuple[CauseGrid, dict]:
    """Read a stored :data:`CAUSES` run: ``(result, meta)``; default, the shipped run.

    Examples
    --------
    >>> r, meta = load_causes()
    >>> r.variants[:2], r.eval_loss.shape[0]
    (('scaled', 'unscaled'), 5)
    """
    return load_result(path, CauseGrid)
