r"""Chapter 4's training runs over seeds (``python -m attention_course heads-run``, read by :func:`load_runs`).

Four studies with the attention-only :class:`~attention_course.models.tiny.TinyTransformer`
(:math:`d_{model} = 32`): **depth** (2 layers against 1, same steps, on ``"repeated_sequences"``),
**heads** (``h`` heads of width :math:`d_{model}/h` or :math:`d_{model}`, :cite:t:`bhojanapalli2020`),
**division** (the two-offset task) and **subspaces** (head overlaps before and after training).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

import numpy as np
import torch

from ...models.experiments import Experiment, Runs, Training, read_json, register
from ...models.records import DATA_DIR
from ...models.tasks import make_task
from ...models.tiny import ModelConfig, TinyTransformer
from ...models.training import evaluate_loss, train
from .circuits import model_head_overlaps
from .division import (TwoOffsetTask, carried_relations, field_losses, keep_one_gains, keep_one_losses,
                       single_ablation_rises)

__all__ = ["STORED_RUN", "run_one", "layer_overlaps", "converged", "load_runs"]

#: Convergence rule of the division study: the mean training loss of the last ``window`` steps is
#: within ``tol`` nats of the ``window`` before.
CONVERGENCE = {"window": 300, "tol": 0.02}
#: The studies of :data:`HEADS_RUN`, each a list of runs in the JSON.
STUDIES = ("depth", "heads", "division", "subspaces")

#: The fuller runs of chapter 4, shipped with the package.
STORED_RUN = DATA_DIR / "head_training.json"
TASK = "repeated_sequences"


def run_one(n_layers: int, steps: int, seed: int, n_heads: int = 4, d_k: Optional[int] = None,
            d_model: int = 32, every: int = 20) -> dict:
    r"""Train one model and return its held-out loss and its block-averaged training loss.

    Trained on ``"repeated_sequences"`` by :func:`~attention_course.models.training.train`, batches
    seeded by ``seed``. The training curve is
    :math:`\bar\ell_b = \frac1{e}\sum_{t = be}^{(b+1)e - 1} \ell_t` with :math:`e` = ``every``.

    Returns ``n_layers, n_heads, d_k, steps, seed``, ``held_out`` (nats), ``train_curve``
    (``steps // every`` floats), ``parameters``, and with several heads the overlaps before and after.

    Examples
    --------
    >>> r = run_one(1, steps=4, seed=0, every=2)
    >>> r["d_k"], len(r["train_curve"]), r["held_out"] > 3.5     # untrained: near ln 64 = 4.16
    (8, 2, True)
    """
    config = ModelConfig(n_layers=n_layers, n_heads=n_heads, d_k=d_k, d_model=d_model)
    model = TinyTransformer(config, seed=seed)
    task = make_task(TASK)
    overlaps_init = layer_overlaps(model) if n_heads > 1 else None
    history = train(model, task, steps=steps, seed=seed)  # (steps,) training loss
    run = {"n_layers": n_layers, "n_heads": n_heads, "d_k": config.head_dim, "steps": steps, "seed": seed,
           "held_out": round(evaluate_loss(model, task), 5), "train_curve": _block_means(history, steps, every),
           "parameters": int(sum(p.numel() for p in model.parameters()))}
    if overlaps_init is not None:
        run.update(overlaps_init=overlaps_init, overlaps_trained=layer_overlaps(model))
    return run


def _block_means(history: np.ndarray, steps: int, every: int) -> list[float]:
    """The training loss averaged over each block of ``every`` steps, rounded as stored."""
    blocks = steps // every
    return [round(float(v), 4) for v in history[: blocks * every].reshape(blocks, every).mean(1)]


def layer_overlaps(model: TinyTransformer, digits: int = 5) -> list[dict]:
    """Per layer, the pairwise overlaps of the heads' q, k, v (read) and o (write) subspaces.

    One dict per layer: ``{"q", "k", "v", "o"}`` -> the ``h(h-1)/2`` overlaps of the pairs ``i < j``.
    """
    h = model.config.n_heads
    pairs = np.triu_indices(h, k=1)
    with torch.no_grad():
        return [{kind: np.round(m[pairs], digits).tolist()
                 for kind, m in model_head_overlaps(model.W_q[l], model.W_k[l], model.W_v[l], model.W_o[l]).items()}
                for l in range(model.config.n_layers)]


def converged(history: np.ndarray, window: int = CONVERGENCE["window"], tol: float = CONVERGENCE["tol"]) -> bool:
    """Whether the mean of the last ``window`` losses is within ``tol`` of the ``window`` before.

    Examples
    --------
    >>> converged(np.r_[np.linspace(4, 0.1, 1000), np.full(600, 0.1)]), converged(np.linspace(4, 0.1, 1000))
    (True, False)
    """
    if len(history) < 2 * window:
        return False
    last, before = history[-window:].mean(), history[-2 * window:-window].mean()
    return bool(abs(last - before) <= tol)


def division_run(n_heads: int, seed: int, steps: int, d_model: int = 32, every: int = 20,
                 task: TwoOffsetTask = TwoOffsetTask()) -> dict:
    r"""Train a one-layer model with ``n_heads`` heads of width ``d_model // n_heads`` on the two-offset task.

    Records as :func:`run_one`, plus the field losses, every head's keep-one losses and gains and
    single-ablation rises on the held-out batch, and whether it converged.

    Examples
    --------
    >>> r = division_run(2, seed=0, steps=4, every=2)
    >>> r["d_k"], len(r["gains"]), len(r["overlaps_init"][0]["q"]), r["converged"]
    (16, 2, 1, False)
    """
    config = ModelConfig(n_layers=1, n_heads=n_heads, d_model=d_model, vocab_size=task.vocab_size)
    model = TinyTransformer(config, seed=seed)
    overlaps_init = layer_overlaps(model) if n_heads > 1 else None
    history = train(model, task, steps=steps, seed=seed)  # (steps,)
    held = task(256, seed=12345)  # evaluate_loss's held-out batch
    gains, rises = keep_one_gains(model, held, fields=task.fields), single_ablation_rises(model, held, fields=task.fields)
    alone = keep_one_losses(model, held, fields=task.fields)
    threshold = 0.5 * float(np.log(task.fields))
    run = {"n_layers": 1, "n_heads": n_heads, "d_k": config.head_dim, "steps": steps, "seed": seed,
           "held_out": round(evaluate_loss(model, task), 5),
           "field_losses": np.round(field_losses(model, held, task.fields), 5).tolist(),
           "gains": np.round(gains, 5).tolist(), "rises": np.round(rises, 5).tolist(),
           "alone": np.round(alone, 5).tolist(),
           "divided_gains": carried_relations(gains, threshold)["divided"],
           "divided": carried_relations(alone, threshold, losses=True)["divided"], "converged": converged(history),
           "train_curve": _block_means(history, steps, every),
           "parameters": int(sum(p.numel() for p in model.parameters()))}
    if overlaps_init is not None:
        run.update(overlaps_init=overlaps_init, overlaps_trained=layer_overlaps(model))
    return run


@dataclass(frozen=True)
class HeadStudies(Training):
    """The configuration of ``heads-run``: each study's seeds and steps.

    ``seeds`` and ``steps`` are the depth study's (``steps`` also the subspace study's); ``study``:
    ``"all"``, or one (the others are kept from the file).
    """

    steps: int = 2000
    seeds: tuple = (0, 1, 2, 3, 4)
    heads: tuple = (1, 2, 4, 8, 16)
    head_seeds: tuple = (0, 1, 2)
    head_steps: int = 600
    every: int = 20
    division_seeds: tuple = (0, 1, 2, 3, 4)
    division_steps: int = 3000
    division_heads: tuple = (4, 1)
    subspace_seeds: tuple = (0, 1, 2, 3, 4)
    study: str = "all"


def _jobs(c: HeadStudies) -> list[tuple]:
    """Every run of the studies ``c.study`` asks for, each tagged with its study, in the stored order."""
    jobs = {"depth": [("depth", seed, L) for seed in c.seeds for L in (2, 1)],
            "heads": [("heads", seed, h, d_k) for seed in c.head_seeds for h in c.heads
                      for d_k in sorted({c.d_model // h, c.d_model})],
            "division": [("division", seed, h) for seed in c.division_seeds for h in c.division_heads],
            "subspaces": [("subspaces", seed) for seed in c.subspace_seeds]}
    return [job for study in STUDIES if c.study in (study, "all") for job in jobs[study]]


def _run(c: HeadStudies, study: str, seed: int, *what: int) -> dict:
    """One run of a study: the 2-layer model or its 1-layer control, h heads of width d_k, a division run."""
    if study == "depth":
        return run_one(what[0], c.steps, seed, every=c.every)
    if study == "heads":
        return run_one(2, c.head_steps, seed, n_heads=what[0], d_k=what[1], d_model=c.d_model, every=c.every)
    if study == "division":
        return division_run(what[0], seed, c.division_steps, every=c.every)
    return run_one(2, c.steps, seed, every=c.every)  # the subspace study: the 2-layer induction model


def _document(c: HeadStudies, runs: Runs, meta: dict) -> dict:
    studies = {}
    for study in STUDIES:
        ran = [i for i, job in enumerate(runs.jobs) if job[0] == study]
        if ran:
            studies[study] = {"arguments": meta["arguments"], "wall_seconds": round(sum(runs.seconds[i] for i in ran), 1),
                              "cpu_seconds": round(sum(runs.cpu_seconds[i] for i in ran), 1)}
    meta = {**{k: meta[k] for k in ("machine", "command", "arguments")}, "studies": studies,
            **{k: meta[k] for k in ("wall_seconds", "cpu_seconds")}}
    return {"schema_version": 1, "meta": meta,
            **{study: [r for job, r in zip(runs.jobs, runs.records) if job[0] == study] for study in STUDIES}}


def _keep_others(doc: Mapping, previous: Mapping) -> dict:
    """``doc`` with the studies it did not run kept from the stored ``previous`` (and their timings)."""
    rerun = doc["meta"]["studies"]
    kept = [s for s in STUDIES if s not in rerun]
    studies = {**{s: v for s, v in previous.get("meta", {}).get("studies", {}).items() if s in kept}, **rerun}
    return {**doc, "meta": {**doc["meta"], "studies": studies}, **{s: previous.get(s, []) for s in kept}}


#: ``python -m attention_course heads-run``: the four studies over seeds (tens of minutes on one thread).
HEADS_RUN = register(Experiment(
    "heads-run", HeadStudies(), _run, STORED_RUN, grid=_jobs, document=_document, merge=_keep_others, indent=None,
    help="chapter 4's long run: depth, heads at fixed width, division of two relations in one layer, over seeds",
    description="Train the 2-layer model and its 1-layer control for the same number of steps over several seeds, "
                "2-layer models with h heads of width d/h or d, one layer of 4 heads against one head on the "
                "two-offset task, and the 2-layer model's heads' subspaces before and after training; write held-out "
                "losses and training curves as JSON (default: attention_course/data/head_training.json; about half "
                "an hour on one thread, or minutes for one --study).",
    flags={"--seeds": dict(type=int, nargs="+", help="seeds of the depth study"),
           "--steps": dict(type=int, help="AdamW steps of every model in the depth study"),
           "--heads": dict(type=int, nargs="+", help="head counts h"),
           "--head-seeds": dict(type=int, nargs="+", help="seeds of the heads study"),
           "--head-steps": dict(type=int, help="AdamW steps in the heads study"),
           "--every": dict(type=int, help="average the training curves over this many steps"),
           "--division-seeds": dict(type=int, nargs="+", help="seeds of the division study"),
           "--division-steps": dict(type=int, help="AdamW steps in the division study"),
           "--division-heads": dict(type=int, nargs="+", help="head counts of the division study (width 32 / h each)"),
           "--subspace-seeds": dict(type=int, nargs="+",
                                    help="seeds of the subspace study (the 2-layer induction model, --steps steps)"),
           "--study": dict(choices=("depth", "heads", "division", "subspaces", "all"),
                           help="which study to run (the others are kept from --out when it exists)")}))


def load_runs(path: Union[str, Path] = STORED_RUN) -> dict:
    """Read the stored runs: ``{"meta": ..., "depth": [run, ...], "heads": [run, ...]}``.

    Examples
    --------
    >>> doc = load_runs()
    >>> sorted({r["n_layers"] for r in doc["depth"]}), sorted(doc)
    ([1, 2], ['depth', 'division', 'heads', 'meta', 'schema_version', 'subspaces'])
    """
    doc = read_json(path, schema_version=1)
    for study in STUDIES:
        doc.setdefault(study, [])
    return doc
