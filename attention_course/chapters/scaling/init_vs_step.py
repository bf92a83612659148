r"""Why the unscaled model fails: the gradient at the softmax, and a 2x2 experiment (chapter 6).

Two measurements on the tiny transformer of chapter 6.

:func:`score_gradient_norms` separates the gradient that passes *through* the softmax from
the chain-rule factor of the scale. With scores :math:`s = c\,q k^\top` and :math:`q = x W_Q`,

.. math::

    \frac{\partial \mathcal{L}}{\partial W_Q} = c\, x^\top \frac{\partial \mathcal{L}}{\partial s}\, k ,

so the gradient of :math:`W_Q` carries the factor :math:`c` itself (1 without a scale,
:math:`1/\sqrt{d_k}` with it); :math:`\partial\mathcal{L}/\partial s`, the gradient at the
softmax's input, does not.

:func:`run_causes` trains the same model five ways (:data:`VARIANTS`): with
:math:`c = 1/\sqrt{d_k}`; with :math:`c = 1`; with :math:`c = 1` and :math:`W_Q` initialised
:math:`\sqrt{d_k}` times smaller (the scores start as the scaled model's do); with
:math:`c = 1` and a :math:`\sqrt{d_k}` times smaller learning rate on :math:`W_Q` (Adam's steps
move the scores as slowly as the scaled model's); and with both. The stored run is

    python -m attention_course.chapters.scaling.init_vs_step --out attention_course/data/scale_causes.json

and :func:`load_causes` reads it back.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional, Union

import numpy as np
import torch

from ...core.attention import resolve_scale
from ...models.probes import head_scores
from ...models.tasks import Task, make_task
from ...models.tiny import ModelConfig, TinyTransformer
from ...models.training import evaluate_loss, masked_loss
from ...models.records import machine_info
from ...models.records import DATA_DIR

__all__ = ["VARIANTS", "score_gradients", "score_gradient_norms", "VariantRun", "build_variant", "run_steps",
           "train_variant", "CauseGrid",
           "run_causes", "save_causes", "load_causes", "add_arguments", "cli"]

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
TASK = "repeated_sequences"
HELD_OUT_SEED = 12345  # the held-out batch, as in evaluate_loss


def score_gradients(model: TinyTransformer, inputs: torch.Tensor, targets: torch.Tensor,
                    mask: torch.Tensor) -> dict[str, list]:
    r"""The loss gradient at each layer's softmax input, and at ``W_Q, W_K``.

    The attention weights :math:`p = \operatorname{softmax}(s)` that the model returns keep
    their gradient :math:`g = \partial\mathcal{L}/\partial p`; the softmax's backward pass

    .. math::

        \frac{\partial \mathcal{L}}{\partial s_{ij}} = p_{ij}\Big(g_{ij} - \sum_l p_{il}\, g_{il}\Big)

    gives the gradient at the scores :math:`s = c\,qk^\top` (masked keys have :math:`p = 0`,
    hence gradient 0). Nothing is updated; the model's gradients are left unset.

    Parameters
    ----------
    model : TinyTransformer
    inputs, targets : torch.LongTensor, shape (B, T)
    mask : torch.BoolTensor, shape (B, T)
        Positions that count in the loss (:func:`~attention_course.models.training.masked_loss`).

    Returns
    -------
    dict of lists, one entry per layer
        ``"score"``: :math:`\partial\mathcal{L}/\partial s`, each (B, h, T, T);
        ``"W_q"``, ``"W_k"``: :math:`\nabla W_Q, \nabla W_K`, each (h, d_model, d_k).

    Examples
    --------
    >>> task = make_task("repeated_sequences")
    >>> model = TinyTransformer(ModelConfig(d_k=16, n_heads=1, scale="none"), seed=0)
    >>> g = score_gradients(model, *task(8, seed=0))
    >>> tuple(g["score"][0].shape), tuple(g["W_q"][0].shape)
    ((8, 1, 28, 28), (1, 32, 16))
    """
    logits, weights = model(inputs)  # (B, T, V), L x (B, h, T, T)
    for w in weights:
        w.retain_grad()
    masked_loss(logits, targets, mask).backward()
    with torch.no_grad():
        out = {"score": [w * (w.grad - (w * w.grad).sum(-1, keepdim=True)) for w in weights],  # L x (B, h, T, T)
               "W_q": [p.grad.clone() for p in model.W_q], "W_k": [p.grad.clone() for p in model.W_k]}
    model.zero_grad(set_to_none=True)
    return out


def score_gradient_norms(model: TinyTransformer, inputs: torch.Tensor, targets: torch.Tensor,
                         mask: torch.Tensor) -> dict[str, np.ndarray]:
    r"""Frobenius norms of :func:`score_gradients`, per layer: each entry (L,).

    ``"score"`` is :math:`\lVert\partial\mathcal{L}/\partial s\rVert_F` over the batch and
    the heads, free of the factor :math:`c`; ``"W_q"`` and ``"W_k"`` carry it.

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


@dataclass(frozen=True)
class VariantRun:
    r"""What :func:`train_variant` measures; ``N`` steps, ``L`` layers.

    Attributes
    ----------
    loss : (N,)
        Training loss before each update.
    eval_loss : float
        Held-out loss after training.
    score_grad0, wq_grad0 : (L,)
        :func:`score_gradient_norms` ``"score"`` and ``"W_q"`` on the held-out batch, at
        initialisation.
    previous_token, induction : (L,)
        Best head's score per layer after training.
    """

    loss: np.ndarray
    eval_loss: float
    score_grad0: np.ndarray
    wq_grad0: np.ndarray
    previous_token: np.ndarray
    induction: np.ndarray


def build_variant(d_k: int, scale: Union[str, float] = "none", q_init: Union[str, float] = 1,
                  q_lr: Union[str, float] = 1, seed: int = 0, lr: float = 1e-2, d_model: int = 32,
                  n_heads: int = 1, n_layers: int = 2) -> tuple[TinyTransformer, torch.optim.Optimizer]:
    r"""The model and optimiser of :func:`train_variant`, before any step.

    :class:`~attention_course.models.tiny.TinyTransformer` built with ``seed``, every layer's
    ``W_q`` multiplied by ``q_init``; AdamW (no weight decay) with learning rate ``q_lr * lr``
    for ``W_q`` and ``lr`` for every other parameter.

    Examples
    --------
    >>> model, opt = build_variant(8, "none", q_init="sqrt", d_model=8)
    >>> float(model.W_q[0].detach().std()) < float(model.W_k[0].detach().std()), len(opt.param_groups)
    (True, 2)
    """
    cfg = ModelConfig(d_model=d_model, n_heads=n_heads, n_layers=n_layers, d_k=d_k, scale=scale)
    model = TinyTransformer(cfg, seed=seed)
    with torch.no_grad():
        for W in model.W_q:
            W.mul_(_factor(q_init, d_k))  # $W_Q \leftarrow a\,W_Q$
    q_params = {id(p) for p in model.W_q}
    groups = [{"params": list(model.W_q), "lr": lr * _factor(q_lr, d_k)},
              {"params": [p for p in model.parameters() if id(p) not in q_params], "lr": lr}]
    return model, torch.optim.AdamW(groups, lr=lr, weight_decay=0.0, foreach=True)


def run_steps(model: TinyTransformer, opt: torch.optim.Optimizer, task: Task, steps: int, seed: int = 0,
              batch_size: int = 32, callback: Optional[Callable[[int, TinyTransformer], None]] = None) -> np.ndarray:
    """Train ``model`` in place for ``steps`` steps; return the training loss before each update.

    The loop of :func:`~attention_course.models.training.train`: batches from a generator seeded
    with ``seed``, one thread, the caller's random state and thread count restored.
    ``callback(step, model)``, if given, is called before update ``step`` (so ``step`` updates
    have been made) and once more after the last one, with ``step = steps``; it must not
    change the model.

    Examples
    --------
    >>> model, opt = build_variant(8, "sqrt", d_model=8)
    >>> seen = []
    >>> run_steps(model, opt, make_task("repeated_sequences"), 2, callback=lambda i, m: seen.append(i)).shape, seen
    ((2,), [0, 1, 2])
    """
    if int(steps) != steps or steps < 1:
        raise ValueError(f"steps={steps!r}; expected a positive integer")
    g, loss_history = torch.Generator().manual_seed(int(seed)), np.empty(int(steps))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    model.train()
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed))
            for step in range(int(steps)):
                if callback is not None:
                    callback(step, model)
                inputs, targets, mask = task(batch_size, generator=g)
                logits, _ = model(inputs)  # (B, T, V)
                loss = masked_loss(logits, targets, mask)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                loss_history[step] = loss.item()
            if callback is not None:
                callback(int(steps), model)
    finally:
        torch.set_num_threads(threads)
        model.eval()
    return loss_history


def train_variant(d_k: int = 64, scale: Union[str, float] = "none", q_init: Union[str, float] = 1,
                  q_lr: Union[str, float] = 1, steps: int = 200, seed: int = 0, lr: float = 1e-2,
                  batch_size: int = 32, d_model: int = 32, n_heads: int = 1, n_layers: int = 2,
                  eval_batch: int = 256, task: Optional[Task] = None) -> VariantRun:
    r"""Train the tiny transformer with :math:`W_Q` initialised and stepped by given factors.

    The model is :class:`~attention_course.models.tiny.TinyTransformer` built with ``seed``;
    every layer's ``W_q`` is then multiplied by ``q_init`` and gets the learning rate
    ``q_lr * lr`` (an AdamW parameter group), all other parameters ``lr``. The loop is that of
    :func:`~attention_course.models.training.train` (same batches, one thread, deterministic):
    with ``q_init = q_lr = 1`` its losses equal ``train``'s bit for bit.

    Parameters
    ----------
    d_k : int
    scale : {"sqrt", "none", "mup"} or float
        The factor :math:`c` on :math:`q \cdot k`.
    q_init, q_lr : float or "sqrt"
        Factors on ``W_q``'s initial value and on its learning rate; ``"sqrt"`` is
        :math:`1/\sqrt{d_k}`.
    steps, seed, lr, batch_size, d_model, n_heads, n_layers, eval_batch
        As in :func:`~attention_course.chapters.scaling.training.train_one`.
    task : Task, optional
        Default: ``make_task("repeated_sequences")``.

    Returns
    -------
    VariantRun

    Examples
    --------
    >>> run = train_variant(8, "none", q_init="sqrt", q_lr="sqrt", steps=3, d_model=8, eval_batch=8)
    >>> run.loss.shape, run.score_grad0.shape
    ((3,), (2,))
    """
    task = make_task(TASK) if task is None else task
    model, opt = build_variant(d_k, scale, q_init, q_lr, seed=seed, lr=lr, d_model=d_model, n_heads=n_heads,
                               n_layers=n_layers)
    held_out = task(eval_batch, seed=HELD_OUT_SEED)
    grads = score_gradient_norms(model, *held_out)
    loss_history = run_steps(model, opt, task, steps, seed=seed, batch_size=batch_size)
    scores = head_scores(model, task, batch_size=eval_batch)  # each (L, h)
    return VariantRun(loss=loss_history, eval_loss=evaluate_loss(model, task, batch_size=eval_batch),
                      score_grad0=grads["score"], wq_grad0=grads["W_q"],
                      previous_token=scores["previous_token"].max(axis=1),
                      induction=scores["induction"].max(axis=1))


@dataclass(frozen=True)
class CauseGrid:
    """Result of :func:`run_causes`: :class:`VariantRun` fields stacked as (variant, seed, ...).

    ``loss`` is (V, S, N), the others (V, S) or (V, S, L); ``settings`` holds the sizes,
    steps, learning rate and batch size.
    """

    variants: tuple
    seeds: np.ndarray
    loss: np.ndarray
    eval_loss: np.ndarray
    score_grad0: np.ndarray
    wq_grad0: np.ndarray
    previous_token: np.ndarray
    induction: np.ndarray
    settings: dict = field(default_factory=dict)


def run_causes(seeds: Sequence[int] = (0, 1, 2, 3, 4), d_k: int = 64, steps: int = 200,
               lr: float = 1e-2, n_heads: int = 1, variants: Sequence[str] = tuple(VARIANTS)) -> CauseGrid:
    """Train every variant of :data:`VARIANTS` for every seed (:func:`train_variant`).

    Examples
    --------
    >>> r = run_causes([0], d_k=8, steps=2, variants=["scaled", "unscaled"])
    >>> r.eval_loss.shape, r.loss.shape
    ((2, 1), (2, 1, 2))
    """
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise ValueError(f"unknown variants {unknown}; expected some of {list(VARIANTS)}")
    task = make_task(TASK)
    runs = [[train_variant(d_k, *VARIANTS[v], steps=steps, seed=s, lr=lr, n_heads=n_heads, task=task)
             for s in seeds] for v in variants]
    stacked = {f: np.array([[getattr(r, f) for r in row] for row in runs])
               for f in ("loss", "eval_loss", "score_grad0", "wq_grad0", "previous_token", "induction")}
    settings = dict(d_k=d_k, steps=int(steps), lr=lr, n_heads=n_heads, d_model=32, n_layers=2,
                    batch_size=32, task=TASK, optimizer="AdamW")
    return CauseGrid(variants=tuple(variants), seeds=np.array(list(seeds)), settings=settings, **stacked)


def save_causes(result: CauseGrid, path: Union[str, Path], meta: Optional[dict] = None) -> None:
    """Write a :class:`CauseGrid` and ``meta`` (machine, timings) as JSON (4 significant digits)."""
    d = {k: (v if k in ("variants", "settings") else np.asarray(v).tolist()) for k, v in asdict(result).items()}
    d["loss"] = np.vectorize(lambda v: float(f"{v:.4g}"))(result.loss).tolist()
    with open(path, "w") as fh:
        json.dump({"schema_version": 1, "meta": meta or {}, "result": d}, fh)
        fh.write("\n")


def load_causes(path: Union[str, Path] = STORED_CAUSES) -> tuple[CauseGrid, dict]:
    """Read what :func:`save_causes` wrote: ``(result, meta)``; default, the shipped run.

    Examples
    --------
    >>> r, meta = load_causes()
    >>> r.variants[:2], r.eval_loss.shape[0]
    (('scaled', 'unscaled'), 5)
    """
    with open(path) as fh:
        doc = json.load(fh)
    if doc.get("schema_version") != 1:
        raise ValueError(f"{path}: schema_version={doc.get('schema_version')!r}; expected 1")
    d = doc["result"]
    arrays = {k: np.array(v) for k, v in d.items() if k not in ("variants", "settings")}
    return CauseGrid(variants=tuple(d["variants"]), settings=d["settings"], **arrays), doc["meta"]


# ------------------------------------------------------------------ command line
def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``scaling-causes`` command's arguments."""
    p.add_argument("--out", default=str(STORED_CAUSES), help="JSON file to write (default: the shipped run)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="seeds, one run of each variant per seed")
    p.add_argument("--steps", type=int, default=200, help="AdamW steps per model")


def cli(args: argparse.Namespace, parser: Optional[argparse.ArgumentParser] = None) -> int:
    """Command line: run :func:`run_causes` and write it as JSON (about a minute)."""
    arguments = {k: v for k, v in vars(args).items() if k not in ("command", "run", "parser")}
    wall, cpu = time.perf_counter(), time.process_time()
    result = run_causes(args.seeds, steps=args.steps)
    meta = {"machine": machine_info(threads=1), "command": "python -m attention_course.chapters.scaling.init_vs_step",
            "arguments": arguments, "wall_seconds": round(time.perf_counter() - wall, 1),
            "cpu_seconds": round(time.process_time() - cpu, 1)}
    save_causes(result, args.out, meta)
    return 0


if __name__ == "__main__":  # pragma: no cover
    _parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(_parser)
    raise SystemExit(cli(_parser.parse_args()))
