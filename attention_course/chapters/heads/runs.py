r"""Chapter 4's training runs, over seeds: depth at equal steps, and heads at fixed width.

Two studies on the induction task ``"repeated_sequences"`` (tokens that repeat
with a random period of 6-14), both with the tiny attention-only
:class:`~attention_course.models.tiny.TinyTransformer` (:math:`d_{model} = 32`):

* **depth** (:func:`depth_study`): a 2-layer model and its 1-layer control, each
  trained for the **same** number of steps with the same seed, for several seeds;
* **heads** (:func:`heads_study`): at fixed :math:`d_{model}`, ``h`` heads whose
  width is tied to it, :math:`d_k = d_{model}/h`, or decoupled from it
  (:math:`d_k = d_{model}` for every ``h``, as :cite:t:`bhojanapalli2020` propose).

Each run records the **held-out** loss after training
(:func:`~attention_course.models.training.evaluate_loss`, a batch of 256 sequences
no run trains on) and its **training** loss, averaged over blocks of ``every`` steps.
:func:`run_one` is the unit;

    python -m attention_course.chapters.heads.runs

writes the fuller runs (5 seeds) as ``attention_course/data/head_training.json``,
which :func:`load_runs` reads back.

MiniLM's head-role scores behind the ``head-relations`` slider (:func:`role_scores_data`,
:func:`write_role_scores`, stored as :data:`ROLES_DATA`) are written here too.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Optional, Union

import numpy as np
import torch
from tqdm import tqdm

from ...models.pretrained import attention_maps
from ...models.records import DATA_DIR, machine_info, write_json
from ...models.tasks import make_task
from ...models.tiny import ModelConfig, TinyTransformer
from ...models.training import evaluate_loss, train
from .circuits import model_head_overlaps
from .division import (TwoOffsetTask, carried_relations, field_losses, keep_one_gains, keep_one_losses,
                       single_ablation_rises)
from .roles import PARKING, RELATIONS, head_role_scores, uniform_role_baselines

__all__ = ["STORED_RUN", "run_one", "depth_study", "heads_study", "division_run", "division_study", "layer_overlaps",
           "converged", "load_runs", "add_arguments", "cli", "main", "ROLES_DATA", "role_scores_data",
           "write_role_scores"]

#: Convergence rule of the division study: the mean training loss of the last ``window`` steps is
#: within ``tol`` nats of the ``window`` before.
CONVERGENCE = {"window": 300, "tol": 0.02}
#: The studies of :func:`cli`, each a list of runs in the JSON.
STUDIES = ("depth", "heads", "division", "subspaces")

#: The fuller runs of chapter 4, shipped with the package.
STORED_RUN = DATA_DIR / "head_training.json"
TASK = "repeated_sequences"


def run_one(n_layers: int, steps: int, seed: int, n_heads: int = 4, d_k: Optional[int] = None,
            d_model: int = 32, every: int = 20) -> dict:
    r"""Train one model and return its held-out loss and its block-averaged training loss.

    The model is ``TinyTransformer(ModelConfig(n_layers, n_heads, d_k, d_model), seed)``,
    trained by :func:`~attention_course.models.training.train` (AdamW, lr 3e-3,
    batch 32, one thread; batches seeded by ``seed``). The training curve is

    .. math:: \bar\ell_b = \frac1{e}\sum_{t = be}^{(b+1)e - 1} \ell_t, \qquad b = 0, \dots, \lfloor N/e \rfloor - 1,

    with :math:`e` = ``every`` and :math:`\ell_t` the training loss before update ``t``.

    Returns
    -------
    dict with ``n_layers, n_heads, d_k, steps, seed`` (ints), ``held_out`` (float, nats),
    ``train_curve`` (list of ``steps // every`` floats) and ``parameters`` (int).

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
    blocks = steps // every
    curve = history[: blocks * every].reshape(blocks, every).mean(1)  # (blocks,)
    run = {"n_layers": n_layers, "n_heads": n_heads, "d_k": config.head_dim, "steps": steps, "seed": seed,
           "held_out": round(evaluate_loss(model, task), 5), "train_curve": [round(float(v), 4) for v in curve],
           "parameters": int(sum(p.numel() for p in model.parameters()))}
    if overlaps_init is not None:
        run.update(overlaps_init=overlaps_init, overlaps_trained=layer_overlaps(model))
    return run


def layer_overlaps(model: TinyTransformer, digits: int = 5) -> list[dict]:
    """Per layer, the pairwise overlaps of the heads' q, k, v (read) and o (write) subspaces.

    A list (one dict per layer) of ``{"q", "k", "v", "o"}`` -> list of the ``h(h-1)/2``
    overlaps of the pairs ``i < j`` (:func:`~attention_course.chapters.heads.circuits.model_head_overlaps`).
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

    Records the held-out loss and field losses, every head's keep-one gains and single-ablation
    rises (:mod:`attention_course.chapters.heads.division`, on the held-out batch of
    :func:`~attention_course.models.training.evaluate_loss`), the training curve, whether it
    converged (:func:`converged`), and the heads' pairwise overlaps at initialisation and after
    training (:func:`layer_overlaps`; with more than one head).

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
    blocks = steps // every
    curve = history[: blocks * every].reshape(blocks, every).mean(1)  # (blocks,)
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
           "train_curve": [round(float(v), 4) for v in curve],
           "parameters": int(sum(p.numel() for p in model.parameters()))}
    if overlaps_init is not None:
        run.update(overlaps_init=overlaps_init, overlaps_trained=layer_overlaps(model))
    return run


def division_study(seeds: Sequence[int], steps: int, heads: Sequence[int] = (4, 1), every: int = 20) -> list[dict]:
    """:func:`division_run` for every seed and head count (4 heads of width 8, and one head of width 32)."""
    runs = []
    jobs = [(seed, h) for seed in seeds for h in heads]
    for seed, h in tqdm(jobs, desc="division study", file=sys.stderr):
        runs.append(division_run(h, seed, steps, every=every))
    return runs


def depth_study(seeds: Sequence[int], steps: int, every: int = 20) -> list[dict]:
    """A 2-layer model and its 1-layer control, the same ``steps`` and seed each, for every seed."""
    jobs = [(seed, n_layers) for seed in seeds for n_layers in (2, 1)]
    return [run_one(n_layers, steps, seed, every=every) for seed, n_layers in tqdm(jobs, desc="depth study", file=sys.stderr)]


def heads_study(heads: Sequence[int], seeds: Sequence[int], steps: int, d_model: int = 32,
                every: int = 20) -> list[dict]:
    """2-layer models with ``h`` heads of width ``d_model // h`` (tied) and ``d_model`` (decoupled)."""
    jobs = [(seed, h, d_k) for seed in seeds for h in heads for d_k in sorted({d_model // h, d_model})]
    return [run_one(2, steps, seed, n_heads=h, d_k=d_k, d_model=d_model, every=every)
            for seed, h, d_k in tqdm(jobs, desc="heads study", file=sys.stderr)]


def load_runs(path: Union[str, Path] = STORED_RUN) -> dict:
    """Read the stored runs: ``{"meta": ..., "depth": [run, ...], "heads": [run, ...]}``.

    Examples
    --------
    >>> doc = load_runs()
    >>> sorted({r["n_layers"] for r in doc["depth"]}), sorted(doc)
    ([1, 2], ['depth', 'division', 'heads', 'meta', 'schema_version', 'subspaces'])
    """
    with open(path) as fh:
        doc = json.load(fh)
    if doc.get("schema_version") != 1:
        raise ValueError(f"{path}: schema_version={doc.get('schema_version')!r}; expected 1")
    for study in STUDIES:
        doc.setdefault(study, [])
    return doc


# ------------------------------------------------------------------ command line
def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    p.add_argument("--out", default=str(STORED_RUN), help="JSON file to write (default: the shipped run)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="seeds of the depth study")
    p.add_argument("--steps", type=int, default=2000, help="AdamW steps of every model in the depth study")
    p.add_argument("--heads", type=int, nargs="+", default=[1, 2, 4, 8, 16], help="head counts h")
    p.add_argument("--head-seeds", type=int, nargs="+", default=[0, 1, 2], help="seeds of the heads study")
    p.add_argument("--head-steps", type=int, default=600, help="AdamW steps in the heads study")
    p.add_argument("--every", type=int, default=20, help="average the training curves over this many steps")
    p.add_argument("--division-seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="seeds of the division study")
    p.add_argument("--division-steps", type=int, default=3000, help="AdamW steps in the division study")
    p.add_argument("--division-heads", type=int, nargs="+", default=[4, 1],
                   help="head counts of the division study (width 32 / h each)")
    p.add_argument("--subspace-seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4],
                   help="seeds of the subspace study (the 2-layer induction model, --steps steps)")
    p.add_argument("--study", choices=("depth", "heads", "division", "subspaces", "all"), default="all",
                   help="which study to run (the others are kept from --out when it exists)")


def cli(args: argparse.Namespace, parser: Optional[argparse.ArgumentParser] = None) -> int:
    """Command line: run the studies and write them as JSON."""
    arguments = {k: v for k, v in vars(args).items() if k not in ("command", "run", "parser")}
    meta = {"machine": machine_info(threads=1), "command": "python -m attention_course.chapters.heads.runs",
            "arguments": arguments}
    wall, cpu = time.perf_counter(), time.process_time()
    doc = {"schema_version": 1, "meta": meta, **{k: [] for k in STUDIES}}
    if args.study != "all" and Path(args.out).exists():  # keep the studies not rerun, and their metadata
        old = load_runs(args.out)
        doc.update({k: old.get(k, []) for k in STUDIES})
        meta["studies"] = old["meta"].get("studies", {})
    meta.setdefault("studies", {})
    for study in STUDIES:
        if args.study not in (study, "all"):
            continue
        t0, c0 = time.perf_counter(), time.process_time()
        if study == "depth":
            doc["depth"] = depth_study(args.seeds, args.steps, args.every)
        elif study == "heads":
            doc["heads"] = heads_study(args.heads, args.head_seeds, args.head_steps, every=args.every)
        elif study == "division":
            doc["division"] = division_study(args.division_seeds, args.division_steps, args.division_heads,
                                             every=args.every)
        else:  # the 2-layer induction model's heads at initialisation and after training
            doc["subspaces"] = [run_one(2, args.steps, seed, every=args.every)
                                for seed in tqdm(args.subspace_seeds, desc="subspace study", file=sys.stderr)]
        meta["studies"][study] = {"arguments": arguments, "wall_seconds": round(time.perf_counter() - t0, 1),
                                  "cpu_seconds": round(time.process_time() - c0, 1)}
    meta.update(wall_seconds=round(time.perf_counter() - wall, 1), cpu_seconds=round(time.process_time() - cpu, 1))
    with open(args.out, "w") as fh:
        json.dump(doc, fh)
        fh.write("\n")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m attention_course.chapters.heads.runs``."""
    p = argparse.ArgumentParser(prog="python -m attention_course.chapters.heads.runs",
                                description=__doc__.split("\n")[0])
    add_arguments(p)
    return cli(p.parse_args(argv), p)


if __name__ == "__main__":
    raise SystemExit(main())


ROLES_DATA = DATA_DIR / "slider_role_scores.json"


# ------------------------------------------------------------------ chapter 4: head-relations
def role_scores_data(texts: Sequence[str], digits: int = 4) -> dict:
    """MiniLM's role scores on ``texts`` and uniform attention's, rounded to ``digits`` decimals.

    Returns ``{"texts", "scores": {role: (6, 12) nested list}, "chance": {role: float}}`` for the
    roles in :data:`~attention_course.chapters.heads.roles.RELATIONS` and
    :data:`~attention_course.chapters.heads.roles.PARKING`: what :data:`ROLES_DATA` stores.
    """
    tokens, maps = attention_maps(list(texts))  # lists: tokens, (6, 12, n, n) each
    scores, chance = head_role_scores(maps, tokens), uniform_role_baselines(tokens)
    roles = RELATIONS + PARKING
    return {"texts": list(texts), "scores": {r: np.round(scores[r], digits).tolist() for r in roles},
            "chance": {r: round(float(chance[r]), 6) for r in roles}}


def write_role_scores(texts: Optional[Sequence[str]] = None, path: Path = ROLES_DATA) -> dict:
    """Store :func:`role_scores_data` at ``path``; ``texts`` default to the stored ones (chapter 4's)."""
    texts = json.loads(Path(path).read_text())["texts"] if texts is None else texts
    return write_json(role_scores_data(texts), path)
