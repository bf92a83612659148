r"""Training and evaluating :class:`~attention_course.models.tiny.TinyTransformer` on a task.

:func:`train` runs AdamW on fresh seeded batches and returns the loss per step;
:func:`train_run` runs the same loop (the same updates, bit for bit) and also
records gradient norms and how peaked the attention is (chapter 6);
:func:`evaluate_loss` scores a held-out batch. The loss is :func:`masked_loss`,
the cross-entropy on the positions a task marks (for the induction task, the
repeated part only). Everything is deterministic on the CPU for a fixed seed and
thread count, and the caller's random state is left as it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from ..core._backend import ShapeError, shape_str
from .tasks import Task
from .tiny import TinyTransformer

__all__ = ["masked_loss", "train", "TrainingRun", "train_run", "evaluate_loss"]


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


def train(
    model: TinyTransformer,
    task: Task,
    steps: int = 1000,
    seed: int = 0,
    lr: float = 3e-3,
    batch_size: int = 32,
    weight_decay: float = 0.0,
    num_threads: Optional[int] = 1,
) -> np.ndarray:
    """Train ``model`` in place on fresh batches of ``task`` with Adam(W).

    Deterministic on the CPU for a fixed ``seed`` and thread count: batches
    come from a ``torch.Generator`` seeded with ``seed``, and the global torch
    RNG is seeded inside :func:`torch.random.fork_rng`, so the caller's random
    state is left as it was. The thread count is set to ``num_threads`` for the
    duration of the call and restored afterwards. :func:`train_run` runs the
    same loop and also records gradient norms and attention sharpness.

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
        Threads torch uses while training (restored on return); ``None`` leaves
        the current setting alone. See the notes.

    Returns
    -------
    numpy.ndarray, shape (steps,)
        The training loss (nats, on the masked positions only: for the
        induction task, the repeated part) *before* each update.

    Notes
    -----
    With the defaults a 2-layer model (``ModelConfig()``) learns the
    ``"repeated_sequences"`` task in 250-350 steps (loss below 0.6; seeds 0-5).
    For a model this small one thread is fastest, hence the default
    ``num_threads=1``: on a busy 2-core machine two threads ran 10x slower
    (433 s instead of 42 s for 1,000 steps) and gave the same losses.

    Examples
    --------
    >>> from attention_course.models.tasks import make_task
    >>> from attention_course.models.tiny import ModelConfig
    >>> model = TinyTransformer(ModelConfig(d_model=16, n_heads=2), seed=0)
    >>> history = train(model, make_task("repeated_sequences"), steps=3, seed=0)
    >>> history.shape, round(float(history[0]), 1)     # starts near ln 64 = 4.16
    ((3,), 4.2)
    """
    return _train_loop(model, task, steps, seed, lr, batch_size, weight_decay, num_threads,
                       record=False).loss


@dataclass(frozen=True)
class TrainingRun:
    """What :func:`train_run` records, one row per step (measured *before* the update).

    Attributes
    ----------
    loss : numpy.ndarray, shape (steps,)
        Training loss, as returned by :func:`train`.
    grad_norm_q, grad_norm_k : numpy.ndarray, shape (steps, n_layers)
        Frobenius norm of the loss gradient with respect to each layer's
        ``W_q`` (all heads together) and ``W_k``.
    grad_norm : numpy.ndarray, shape (steps,)
        Norm of the gradient with respect to all parameters.
    max_weight : numpy.ndarray, shape (steps, n_layers)
        Mean over the batch, the heads and the queries ``t >= 1`` of the largest
        attention weight in the row (query 0 has one key, so its weight is 1):
        near 1 means saturated, one-hot attention.
    """

    loss: np.ndarray
    grad_norm_q: np.ndarray
    grad_norm_k: np.ndarray
    grad_norm: np.ndarray
    max_weight: np.ndarray


def train_run(
    model: TinyTransformer,
    task: Task,
    steps: int = 1000,
    seed: int = 0,
    lr: float = 3e-3,
    batch_size: int = 32,
    weight_decay: float = 0.0,
    num_threads: Optional[int] = 1,
) -> TrainingRun:
    r""":func:`train`, also recording gradient norms and how peaked the attention is.

    The parameters and the updates are exactly those of :func:`train` (same
    seed, same losses, bit for bit); only measurements are added. At each step,
    after the backward pass and before the optimiser step, it records

    .. math::

        \lVert \nabla_{W_Q^{(\ell)}} \mathcal{L} \rVert_F, \quad
        \lVert \nabla_{W_K^{(\ell)}} \mathcal{L} \rVert_F, \quad
        \lVert \nabla_\theta \mathcal{L} \rVert_2, \quad
        \overline{\max_j A^{(\ell)}_{ij}} .

    Parameters
    ----------
    See :func:`train`.

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
    return _train_loop(model, task, steps, seed, lr, batch_size, weight_decay, num_threads,
                       record=True)


def _train_loop(model, task, steps, seed, lr, batch_size, weight_decay, num_threads, record):
    if int(steps) != steps or steps < 1:
        raise ValueError(f"steps={steps!r}; expected a positive integer")
    steps, L = int(steps), model.config.n_layers
    g = torch.Generator().manual_seed(int(seed))
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay, foreach=True)
    history = np.empty(steps)
    shape = (steps, L) if record else (0, L)
    gq, gk, peak = np.empty(shape), np.empty(shape), np.empty(shape)
    gall = np.empty(steps if record else 0)
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
                if record:
                    with torch.no_grad():
                        for layer in range(L):
                            gq[step, layer] = torch.linalg.vector_norm(model.W_q[layer].grad)
                            gk[step, layer] = torch.linalg.vector_norm(model.W_k[layer].grad)
                            w = weights[layer][:, :, 1:]  # (B, h, T - 1, T): queries t >= 1
                            peak[step, layer] = w.amax(dim=-1).mean()  # largest weight per row
                        grads = [p.grad for p in model.parameters() if p.grad is not None]
                        gall[step] = torch.linalg.vector_norm(
                            torch.stack([torch.linalg.vector_norm(gr) for gr in grads])
                        )  # $\lVert \nabla_\theta \mathcal{L} \rVert_2$ over all parameters
                opt.step()
                history[step] = loss.item()
    finally:
        torch.set_num_threads(threads)
        model.eval()
    return TrainingRun(history, gq, gk, gall, peak)


@torch.no_grad()
def evaluate_loss(
    model: TinyTransformer,
    task: Task,
    batch_size: int = 256,
    seed: int = 12345,
    head_mask: Optional[torch.Tensor] = None,
) -> float:
    """Loss (nats) on the masked positions of one fresh, seeded batch.

    The default ``seed`` differs from the training seeds used in the course,
    so the batch is held out (the tasks have far more sequences than a run sees).

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
