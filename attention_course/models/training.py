r"""Training and evaluating :class:`~attention_course.models.tiny.TinyTransformer` on a task.

:func:`train` is the package's one training loop (AdamW on fresh seeded batches; a ``callback``
measures during training, as :func:`train_run` does); :func:`evaluate_loss` scores a held-out
batch with :func:`masked_loss`, the cross-entropy on the positions a task marks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import torch

from ..core._backend import ShapeError, shape_str
from .adamw import AdamW
from .tasks import Task
from .tiny import TinyTransformer

__all__ = ["masked_loss", "adamw", "train", "TrainingRun", "train_run", "evaluate_loss"]

#: Builds the optimiser of :func:`train`: ``optimizer(model, lr, weight_decay)``.
#: The optimiser needs ``zero_grad(set_to_none=True)`` and ``step()``, as torch.optim's have.
OptimizerFactory = Callable[[TinyTransformer, float, float], AdamW]
#: Called by :func:`train` as ``callback(step, model, weights)``; see there.
StepCallback = Callable[[int, TinyTransformer, Optional[list]], None]


def masked_loss(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    r"""Mean cross-entropy (nats) over the positions where ``mask`` is True.

    .. math::

        \mathcal{L} = -\frac{1}{|\mathcal{M}|}\sum_{(b, t) \in \mathcal{M}}
            \log \operatorname{softmax}(z_{b t})_{y_{b t}}

    Parameters
    ----------
    logits : torch.Tensor, shape (B, T, V)
    targets : torch.LongTensor, shape (B, T)
    mask : torch.BoolTensor, shape (B, T)
    """
    if logits.shape[:2] != targets.shape or targets.shape != mask.shape:
        raise ShapeError(
            f"logits {shape_str(logits)}, targets {shape_str(targets)} and mask "
            f"{shape_str(mask)}; expected (B, T, V), (B, T) and (B, T)"
        )
    nll = torch.nn.functional.cross_entropy(
        logits.transpose(1, 2), targets, reduction="none"
    )  # (B, T)
    return nll[mask].mean()


def adamw(model: TinyTransformer, lr: float, weight_decay: float) -> AdamW:
    """:func:`train`'s default optimiser: AdamW on every parameter, with one learning rate.

    :class:`~attention_course.models.adamw.AdamW`: ``torch.optim.AdamW``'s update, bit for bit,
    without the 3 s import of ``torch._dynamo`` that ``torch.optim`` costs a process.

    Examples
    --------
    >>> from attention_course.models.tiny import ModelConfig
    >>> opt = adamw(TinyTransformer(ModelConfig(d_model=16, n_heads=2), seed=0), lr=1e-3, weight_decay=0.0)
    >>> type(opt).__name__, opt.defaults["lr"], len(opt.param_groups)
    ('AdamW', 0.001, 1)
    """
    return AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)


def _positive(steps: int) -> int:
    if int(steps) != steps or steps < 1:
        raise ValueError(f"steps={steps!r}; expected a positive integer")
    return int(steps)


def train(
    model: TinyTransformer,
    task: Task,
    steps: int = 1000,
    seed: int = 0,
    lr: float = 3e-3,
    batch_size: int = 32,
    weight_decay: float = 0.0,
    num_threads: Optional[int] = 1,
    optimizer: OptimizerFactory = adamw,
    callback: Optional[StepCallback] = None,
) -> np.ndarray:
    """Train ``model`` in place on fresh batches of ``task``; return the loss before each update.

    Deterministic on the CPU for a fixed ``seed`` and thread count; the caller's random state
    and thread count are left as they were.

    Parameters
    ----------
    model : TinyTransformer
        Updated in place; its initialisation is seeded when it is built.
    task : Task
        From :func:`~attention_course.models.tasks.make_task`.
    steps : int, default 1000
    seed : int, default 0
    lr : float, default 3e-3
    batch_size : int, default 32
    weight_decay : float, default 0
    num_threads : int or None, default 1
        Threads torch uses while training (one is fastest for these sizes); ``None`` leaves
        the current setting alone.
    optimizer : callable, default :func:`adamw`
        ``optimizer(model, lr, weight_decay)`` returns the optimiser.
    callback : callable, optional
        ``callback(step, model, weights)``, ``steps + 1`` times: for ``step < steps`` after the
        backward pass and before the update (``.grad`` holds the gradient, ``weights`` the
        attention weights, n_layers x (B, h, T, T)), then once with ``step = steps`` and
        ``weights = None``. It must leave the parameters and their gradients as they are.

    Returns
    -------
    numpy.ndarray, shape (steps,)
        The training loss (nats, on the masked positions only: for the
        induction task, the repeated part) *before* each update.

    Examples
    --------
    >>> from attention_course.models.tasks import make_task
    >>> from attention_course.models.tiny import ModelConfig
    >>> model = TinyTransformer(ModelConfig(d_model=16, n_heads=2), seed=0)
    >>> seen = []
    >>> history = train(model, make_task("repeated_sequences"), steps=3, seed=0,
    ...                 callback=lambda step, m, weights: seen.append((step, weights is None)))
    >>> history.shape, round(float(history[0]), 1)     # starts near ln 64 = 4.16
    ((3,), 4.2)
    >>> seen
    [(0, False), (1, False), (2, False), (3, True)]
    """
    steps = _positive(steps)
    g = torch.Generator().manual_seed(int(seed))
    opt = optimizer(model, lr, weight_decay)
    history = np.empty(steps)
    threads = torch.get_num_threads()
    if num_threads is not None:
        torch.set_num_threads(int(num_threads))
    model.train()
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed))
            for step in range(steps):
                inputs, targets, mask = task(batch_size, generator=g)
                logits, weights = model(inputs)  # (B, T, V), n_layers x (B, h, T, T)
                loss = masked_loss(logits, targets, mask)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                if callback is not None:
                    callback(step, model, weights)  # after `step` updates, with this batch's gradient
                opt.step()
                history[step] = loss.item()
            if callback is not None:
                callback(steps, model, None)  # after the last update
    finally:
        torch.set_num_threads(threads)
        model.eval()
    return history


@dataclass(frozen=True)
class TrainingRun:
    """What :func:`train_run` records, one row per step (measured *before* the update).

    Attributes
    ----------
    loss : numpy.ndarray, shape (steps,)
        Training loss, as returned by :func:`train`.
    grad_norm_q, grad_norm_k : numpy.ndarray, shape (steps, n_layers)
        Frobenius norm of the gradient of each layer's ``W_q`` and ``W_k`` (all heads).
    grad_norm : numpy.ndarray, shape (steps,)
        Norm of the gradient of all parameters.
    max_weight : numpy.ndarray, shape (steps, n_layers)
        Mean over batch, heads and queries ``t >= 1`` of a row's largest weight (1: one-hot).
    """

    loss: np.ndarray
    grad_norm_q: np.ndarray
    grad_norm_k: np.ndarray
    grad_norm: np.ndarray
    max_weight: np.ndarray


def train_run(model: TinyTransformer, task: Task, **kwargs: Any) -> TrainingRun:
    r""":func:`train`, also recording gradient norms and how peaked the attention is.

    The updates are bit for bit those of :func:`train`; at each step, before the update, it records

    .. math::

        \lVert \nabla_{W_Q^{(\ell)}} \mathcal{L} \rVert_F, \quad
        \lVert \nabla_{W_K^{(\ell)}} \mathcal{L} \rVert_F, \quad
        \lVert \nabla_\theta \mathcal{L} \rVert_2, \quad
        \overline{\max_j A^{(\ell)}_{ij}} .

    Parameters
    ----------
    model, task, **kwargs
        As :func:`train` takes them (``steps``, ``seed``, ``lr``, ``batch_size``, ``weight_decay``,
        ``num_threads``); ``callback`` is this function's own.

    Returns
    -------
    TrainingRun

    Examples
    --------
    >>> from attention_course.models.tasks import make_task
    >>> from attention_course.models.tiny import ModelConfig
    >>> model = TinyTransformer(ModelConfig(d_model=16, n_heads=2), seed=0)
    >>> run = train_run(model, make_task("repeated_sequences"), steps=3, seed=0)
    >>> run.loss.shape, run.grad_norm_q.shape, run.max_weight.shape
    ((3,), (3, 2), (3, 2))
    """
    L = model.config.n_layers
    gq, gk, peak, gall = [], [], [], []  # one row per step

    @torch.no_grad()
    def record(step: int, model: TinyTransformer, weights: Optional[list]) -> None:
        if weights is None:  # after the last update: no batch, no gradient
            return
        gq.append([float(torch.linalg.vector_norm(model.W_q[layer].grad)) for layer in range(L)])
        gk.append([float(torch.linalg.vector_norm(model.W_k[layer].grad)) for layer in range(L)])
        # largest weight per row of queries t >= 1: (B, h, T - 1, T) -> a mean per layer
        peak.append([float(weights[layer][:, :, 1:].amax(dim=-1).mean()) for layer in range(L)])
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        gall.append(float(torch.linalg.vector_norm(
            torch.stack([torch.linalg.vector_norm(gr) for gr in grads])
        )))  # $\lVert \nabla_\theta \mathcal{L} \rVert_2$ over all parameters

    loss = train(model, task, callback=record, **kwargs)
    return TrainingRun(loss, np.array(gq), np.array(gk), np.array(gall), np.array(peak))


@torch.no_grad()
def evaluate_loss(
    model: TinyTransformer,
    task: Task,
    batch_size: int = 256,
    seed: int = 12345,
    head_mask: Optional[torch.Tensor] = None,
) -> float:
    """Loss (nats) on the masked positions of one fresh, seeded batch.

    The default ``seed`` differs from the course's training seeds, so the batch is held out.

    Parameters
    ----------
    model : TinyTransformer
    task : Task
    batch_size : int, default 256
    seed : int, default 12345
    head_mask : torch.Tensor, optional, shape (n_layers, n_heads)
        Passed to the model: 0 ablates a head.

    Examples
    --------
    >>> from attention_course.models.tasks import make_task
    >>> from attention_course.models.tiny import ModelConfig
    >>> model = TinyTransformer(ModelConfig(), seed=0)          # untrained
    >>> round(evaluate_loss(model, make_task("repeated_sequences")), 2)   # ln 64 = 4.16
    4.17
    """
    inputs, targets, mask = task(batch_size, seed=seed)
    logits, _ = model(inputs, head_mask=head_mask)  # (B, T, V)
    return float(masked_loss(logits, targets, mask))
