r"""Chapter 5's composition run: how many layers does the tiny transformer need for ``k`` hops?

On a complete graph one layer already reaches every position; what depth buys is composition,
lookups whose input is an earlier lookup's output. The task is
:func:`~attention_course.models.pointer_chasing.pointer_chasing` (a random cycle on ``n`` nodes,
then a start node :math:`q`; the answer is :math:`f^{k}(q)`), scored by held-out accuracy on maps
no training batch contains,

.. math::

    \operatorname{acc} = \frac{1}{N}\sum_{b=1}^{N} \big[\arg\max_c z_{b, T-1, c} = f_b^{k}(q_b)\big].

``python -m attention_course composition-run`` (:data:`K_HOPS`) writes ``composition.json``;
:func:`load_runs` reads it, :func:`summarise` gives mean, min and max over seeds, and
:func:`live_run` is the reduced run a notebook can afford. The ``--matched`` parts are in
:mod:`~attention_course.chapters.graphs.head_budget`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np
import torch

from ...models.experiments import Experiment, Runs, Training, read_json, run
from ...models.pointer_chasing import PointerChasingTask, baseline_accuracies
from ...models.records import DATA_DIR
from ...models.tiny import ModelConfig, TinyTransformer
from ...models.training import evaluate_loss, train

__all__ = [
    "STORED_RUN", "HELD_OUT_SEED", "accuracy", "run_one", "summarise", "accuracy_table", "layers_needed",
    "live_run", "load_runs",
]

#: The full run of chapter 5, shipped with the package.
STORED_RUN = DATA_DIR / "composition.json"
#: Seed of the held-out batch; the maps themselves are held out by :func:`map_split`.
HELD_OUT_SEED = 12345


@dataclass(frozen=True)
class CompositionConfig(Training):
    """The configuration of ``composition-run``: chapter 5's training keywords and each part's grid.

    ``hops``, ``layers``, ``seeds`` and ``hop_steps`` (one per ``k``, or one for all) are the k-hop
    grid; ``matched`` and what follows configure :mod:`~attention_course.chapters.graphs.head_budget`,
    ``hops_sweep``, ``controls`` and ``lrs`` :mod:`~attention_course.chapters.graphs.hop_sweep`.
    """

    lr: float = 3e-3
    n_heads: int = 4
    d_model: int = 64
    batch_size: int = 64
    eval_batch: int = 2000
    n_nodes: int = 8
    hops: tuple = (1, 2)
    layers: tuple = (1, 2)
    seeds: tuple = (0, 1, 2)
    hop_steps: tuple = (1000, 3000)
    jobs: int = 2
    every: int = 50
    matched: bool = False
    max_steps: int = 3000
    grid: bool = False
    long: bool = False
    follow_up: bool = False
    second: bool = False
    nodes: Optional[tuple] = None
    grid_layers: tuple = (1, 2)
    hops_sweep: bool = False
    controls: bool = False
    lrs: tuple = (1e-3, 3e-3, 1e-2)

    def steps_per_k(self) -> dict[int, int]:
        """``k -> steps``: one number of steps for every ``k``, or one per ``k``."""
        steps = self.hop_steps * len(self.hops) if len(self.hop_steps) == 1 else self.hop_steps
        return dict(zip(self.hops, steps))


def accuracy(model: TinyTransformer, task: PointerChasingTask, batch_size: int = 2000,
             seed: int = HELD_OUT_SEED) -> float:
    """Share of a seeded batch of ``task`` whose last-position argmax is the answer.

    Examples
    --------
    >>> task = PointerChasingTask(n_nodes=8, hops=1, split="test")
    >>> model = TinyTransformer(ModelConfig(vocab_size=72, max_len=9), seed=0)   # untrained
    >>> 0.0 <= accuracy(model, task, batch_size=200) < 0.4
    True
    """
    inputs, targets, _ = task(batch_size, seed=seed)
    with torch.no_grad():
        logits, _ = model(inputs)  # (B, T, V)
    return float((logits[:, -1].argmax(dim=-1) == targets[:, -1]).double().mean())


def run_one(hops: int, n_layers: int, seed: int, steps: int, n_nodes: int = 8, every: int = 50,
            **training: Any) -> dict:
    r"""Train one attention-only model on ``k = hops``; return its held-out accuracy, loss and training curve.

    ``training`` holds ``lr``, ``n_heads``, ``d_model``, ``batch_size``, ``eval_batch``
    (:class:`CompositionConfig`'s for those not given). The record has ``hops, n_layers, seed,
    steps, accuracy, train_accuracy, held_out_loss, train_curve`` (training loss averaged over
    blocks of ``every`` steps) and ``seconds``.

    Examples
    --------
    >>> r = run_one(hops=1, n_layers=1, seed=0, steps=4, d_model=16, every=2, eval_batch=100)
    >>> r["hops"], r["n_layers"], len(r["train_curve"]), 0.0 <= r["accuracy"] <= 1.0
    (1, 1, 2, True)
    """
    t = replace(CompositionConfig(), **training)
    start = time.perf_counter()
    task = PointerChasingTask(n_nodes, hops, "train")
    held_out = PointerChasingTask(n_nodes, hops, "test")
    config = ModelConfig(vocab_size=task.vocab_size, max_len=task.seq_len, d_model=t.d_model,
                         n_heads=t.n_heads, n_layers=n_layers)
    model = TinyTransformer(config, seed=seed)
    history = train(model, task, steps=steps, seed=seed, lr=t.lr, batch_size=t.batch_size)  # (steps,)
    blocks = steps // every
    curve = history[: blocks * every].reshape(blocks, every).mean(1)  # (blocks,)
    return {"hops": hops, "n_layers": n_layers, "seed": seed, "steps": steps,
            "accuracy": round(accuracy(model, held_out, t.eval_batch), 4),
            "train_accuracy": round(accuracy(model, task, t.eval_batch), 4),
            "held_out_loss": round(evaluate_loss(model, held_out, batch_size=t.eval_batch), 4),
            "train_curve": [round(float(v), 4) for v in curve],
            "seconds": round(time.perf_counter() - start, 2)}


# ------------------------------------------------------------------ the run as a configuration of the runner
def _k_hop_jobs(config: CompositionConfig) -> list[tuple]:
    return [(k, L, s) for k in config.hops for L in config.layers for s in config.seeds]


def _k_hop_run(config: CompositionConfig, k: int, L: int, seed: int) -> dict:
    kw = {name: getattr(config, name) for name in ("lr", "n_heads", "d_model", "batch_size", "eval_batch")}
    return run_one(k, L, seed, config.steps_per_k()[k], n_nodes=config.n_nodes, every=config.every, **kw)


def _k_hop_cost(config: CompositionConfig, job: tuple) -> float:
    k, L, _ = job
    return config.steps_per_k()[k] * (1 + L)  # the longest first: cost ~ steps (1 + L)


def _baselines(hops: Iterable[int], n_nodes: int, eval_size: int) -> dict:
    """Non-composing answers on the held-out batch of each ``k`` (see ``baseline_accuracies``)."""
    out = {}
    for k in hops:
        task = PointerChasingTask(n_nodes, k, "test")
        b = baseline_accuracies(task(eval_size, seed=HELD_OUT_SEED), n_nodes)
        out[str(k)] = {"guess": b["guess"], "copy": b["copy"], "one_hop": b["one_hop"]}
    return out


def _k_hop_document(config: CompositionConfig, runs: Runs, meta: dict) -> dict:
    settings = {"n_nodes": config.n_nodes, "d_model": config.d_model, "n_heads": config.n_heads, "lr": config.lr,
                "batch_size": config.batch_size, "steps": {str(k): v for k, v in config.steps_per_k().items()},
                "eval_size": config.eval_batch}
    meta = {**{k: meta[k] for k in ("machine", "command", "arguments", "wall_seconds")},
            "run_seconds": round(sum(r["seconds"] for r in runs.records), 1)}  # summed over the workers
    return {"schema_version": 1, "meta": meta, "settings": settings,
            "baselines": _baselines(config.hops, config.n_nodes, config.eval_batch), "runs": runs.records}


def _k_hop_problem(config: CompositionConfig) -> Optional[str]:
    if len(config.hop_steps) not in (1, len(config.hops)):
        return f"--steps has {len(config.hop_steps)} values; expected 1 or one per k ({len(config.hops)})"
    return None


#: The k-hop run (``python -m attention_course composition-run``): ``k, L`` in 1, 2, three seeds,
#: 1,000 steps for ``k = 1`` and 3,000 for ``k = 2``, on two workers.
K_HOPS = Experiment(
    "composition-run", CompositionConfig(), _k_hop_run, STORED_RUN, grid=_k_hop_jobs, document=_k_hop_document,
    cost=_k_hop_cost, check=_k_hop_problem, indent=None,
    help="chapter 5's composition run: k-hop pointer chasing against depth L, over seeds",
    description="Train the tiny transformer on k-hop pointer chasing (the edges of a random cycle, then a start "
                "node; answer the node k links on) for every k, depth L and seed, and write held-out accuracies as "
                "JSON (default: attention_course/data/composition.json; 12 minutes with two workers). With "
                "--matched, one layer of h heads against two of h/2 at equal parameters instead (--grid: the "
                "head grid, --grid --long: the long grid, --follow-up [--second]: its follow-ups; from 15 "
                "minutes to an hour each, see head_budget). With --hops-sweep, L layers on k = L hops over a "
                "learning-rate sweep, one depth (and, for L >= 2, a few node counts) a call, each under 15 minutes, "
                "and --hops-sweep --controls its controls (see hop_sweep).",
)


def composition_study(hops: Iterable[int], layers: Iterable[int], seeds: Iterable[int],
                      steps: Union[int, Mapping[int, int]], progress: bool = True, every: int = 50,
                      eval_size: int = 2000, jobs: int = 1, **settings: Any) -> list[dict]:
    """:func:`run_one` for every ``(k, L, seed)``, in that order; ``settings`` override :class:`CompositionConfig`.

    ``steps`` is one number or a mapping ``k -> steps``; ``jobs > 1`` runs on that many worker
    processes (the results do not depend on ``jobs``).

    Examples
    --------
    >>> runs = composition_study([1], [1], [0, 1], steps=2, progress=False, d_model=16, every=1, eval_size=50)
    >>> [(r["hops"], r["n_layers"], r["seed"]) for r in runs]
    [(1, 1, 0), (1, 1, 1)]
    """
    hops = list(hops)
    per_k = steps if isinstance(steps, Mapping) else {k: steps for k in hops}
    config = replace(K_HOPS.config, hops=tuple(hops), layers=tuple(layers), seeds=tuple(seeds),
                     hop_steps=tuple(per_k[k] for k in hops), every=every, eval_batch=eval_size, jobs=jobs,
                     **settings)
    return run(K_HOPS, config, show=progress).records


def summarise(runs: Iterable[dict], key: str = "accuracy") -> dict:
    """Mean, min and max of ``key`` over seeds, keyed by ``(k, L)`` in sorted order.

    Examples
    --------
    >>> runs = [{"hops": 1, "n_layers": 1, "accuracy": a} for a in (0.5, 1.0)]
    >>> summarise(runs)
    {(1, 1): {'mean': 0.75, 'min': 0.5, 'max': 1.0, 'n': 2}}
    """
    groups: dict = {}
    for r in runs:
        groups.setdefault((r["hops"], r["n_layers"]), []).append(r[key])
    return {kl: {"mean": float(np.mean(v)), "min": float(min(v)), "max": float(max(v)), "n": len(v)}
            for kl, v in sorted(groups.items())}


def accuracy_table(summary: dict, chance: float) -> str:
    """A :func:`summarise` result as text: one row per ``k``, one column per depth ``L``.

    Examples
    --------
    >>> print(accuracy_table({(1, 1): {"mean": 1.0, "min": 1.0, "max": 1.0, "n": 3}}, chance=0.125))
    held-out accuracy, mean (min-max) over 3 seeds; guess 1/n = 0.125
                       L = 1
    k = 1     1.00 (1.00-1.00)
    """
    ks, Ls = sorted({k for k, _ in summary}), sorted({L for _, L in summary})
    n = next(iter(summary.values()))["n"]
    lines = [f"held-out accuracy, mean (min-max) over {n} seeds; guess 1/n = {chance:.3f}",
             "      " + "".join(f"{f'L = {L}':>18s}" for L in Ls)]
    for k in ks:
        cells = [summary[k, L] for L in Ls]
        lines.append(f"k = {k} " + "".join(f"{c['mean']:8.2f} ({c['min']:.2f}-{c['max']:.2f})" for c in cells))
    return "\n".join(lines)


def layers_needed(runs: Iterable[dict], threshold: float = 0.9) -> dict:
    """For each ``k``, the fewest layers at which **every** seed reaches ``threshold`` (None if none does).

    Examples
    --------
    >>> runs = [{"hops": 2, "n_layers": L, "accuracy": a} for L, a in [(1, 0.3), (2, 0.95), (3, 0.99)]]
    >>> layers_needed(runs)
    {2: 2}
    """
    needed: dict = {}
    for (k, L), s in summarise(runs).items():
        needed.setdefault(k, None)
        if needed[k] is None and s["min"] >= threshold:
            needed[k] = L
    return needed


def live_run(hops: Sequence[int] = (1, 2), n_layers: Sequence[int] = (1, 2), seed: int = 0,
             steps: int = 400, eval_size: int = 1000, **settings: Any) -> list[dict]:
    """The reduced run for a notebook: one seed, few steps (accuracies are lower bounds on the stored run's).

    Examples
    --------
    >>> runs = live_run(hops=(1,), n_layers=(1,), steps=2, eval_size=50, d_model=16)
    >>> len(runs), sorted(runs[0])[:3]
    (1, ['accuracy', 'held_out_loss', 'hops'])
    """
    return composition_study(hops, n_layers, [seed], steps, progress=False, every=min(50, steps),
                             eval_size=eval_size, **settings)


def load_runs(path: Union[str, Path] = STORED_RUN) -> dict:
    """Read the stored run: ``{"schema_version": 1, "meta": ..., "settings": ..., "baselines": ..., "runs": [...]}``.

    Examples
    --------
    >>> doc = load_runs()
    >>> sorted(doc), sorted({r["hops"] for r in doc["runs"]})[:2]
    (['baselines', 'meta', 'runs', 'schema_version', 'settings'], [1, 2])
    """
    return read_json(path, schema_version=1)
