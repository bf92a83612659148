r"""Chapter 5's composition run: how many layers does the tiny transformer need for ``k`` hops?

Reach is not the question on a complete graph: one layer already connects every
position to every other. What depth can buy is **composition**, lookups whose
input is the output of an earlier lookup. The task is
:func:`~attention_course.models.pointer_chasing.pointer_chasing`: the edges of a
random cycle on ``n`` nodes, then a start node :math:`q`; the answer is
:math:`f^{k}(q)`. For each number of hops ``k`` and each depth ``L``, the
attention-only :class:`~attention_course.models.tiny.TinyTransformer` is trained
(:func:`~attention_course.models.training.train`: AdamW, one thread, batches seeded
by the seed) on the training maps, and scored by its **held-out accuracy**,

.. math::

    \operatorname{acc} = \frac{1}{N}\sum_{b=1}^{N}
        \big[\arg\max_c z_{b, T-1, c} = f_b^{k}(q_b)\big],

on :math:`N` sequences whose maps no training batch contains
(:func:`~attention_course.models.pointer_chasing.map_split`). Two hypotheses give
different predictions: one hop per layer (``L >= k``), or pointer doubling, where
the edges compose with each other so that ``L`` layers cover :math:`2^{L-1}` hops.
A causal model can double only with edges listed *earlier*, so doubling is partial.
They part at ``k = 4, L = 3``; the stored grid (``k, L`` in 1, 2, 3 seeds) tests the
first step of both, that one layer cannot compose two lookups and two layers can.
In a pilot (one seed, 3,000 steps) ``k = 3, L = 3`` and ``k = 4, L = 4`` were not
learned (held-out accuracy 0.32 and 0.17): deeper compositions need far longer training.

    python -m attention_course composition-run

writes the runs (3 seeds for every ``(k, L)``; 12 minutes with two workers on a busy 2-core machine)
to ``attention_course/data/composition.json``;
:func:`load_runs` reads them back and :func:`summarise` gives the mean, min and max
over seeds. :func:`live_run` is the reduced run a notebook can afford.

**Matched heads and parameters** (``composition-run --matched``, :func:`matched_study`): one layer
with ``H`` heads against two layers with ``H / 2`` heads each, every head of the same width
``d_k``, so that both have the same parameters; each run stops once its held-out accuracy
reaches 0.99, and its held-out loss and accuracy every 250 steps are the convergence curve
(:func:`run_matched`, :func:`converged`). Stored in ``attention_course/data/composition_matched.json``.

**The head grid** (``composition-run --matched --grid --nodes N``, :func:`grid_search`): at
``n`` = 6, 8 and 16 nodes, 4, 8 and 16 heads in total as one layer of ``H`` or two of ``H / 2``,
searched in the order fixed in the ledger (:func:`grid_order`); one ``n`` per call, each part
under 15 minutes on one thread, added to ``attention_course/data/composition_grid.json``
(:func:`load_grid`, :func:`grid_table`, :func:`fewest_heads`).

**The long grid** (``composition-run --matched --grid --long --nodes N``): the same search at
``n`` = 8, 12 and 16, with 4 to 32 heads and up to 10,000 steps (:data:`LONG_GRID`); parts may run
at the same time, since every save merges with the file (:func:`merge_grid_file`). Stored in
``attention_course/data/composition_grid_long.json`` (17 runs, with ``--seeds 0 1``). On one thread
each part stays under 15 minutes: ``--nodes 8`` (9 minutes), ``--nodes 12`` (10), ``--nodes 16
--grid-layers 1`` (12), ``--nodes 16 --grid-layers 2`` (11); two parts can run side by side. :func:`grid_decision` applies the ledger's rule to the runs.

The data of two sliders are written here too: the fixed rule's miss per head
(:func:`rule_miss_data`, :data:`RULE_DATA`) and the linear probes through random stacks
(:func:`probe_data`, :data:`PROBE_DATA`).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Optional, Union

import numpy as np
import torch

from ...models.encoder import bert_encode
from ...models.perturb import encoder_maps, scrambled_weights
from ...models.pointer_chasing import PointerChasingTask, baseline_accuracies, map_split
from ...models.pretrained import attention_maps, minilm_tokenizer, minilm_weights
from ...models.records import DATA_DIR, machine_info, progress_bar, write_json
from ...models.tiny import ModelConfig, TinyTransformer
from ...models.training import evaluate_loss, train
from . import depth_probe, topology_rule
from .gnn import shared_top_key

__all__ = ["MATCHED_RUN", "MATCHED_GRID", "MATCHED_EXTRA", "RULES_DATA", "rules_data", "load_rules", "TOPOLOGY_RULES", "run_matched", "matched_study", "converged", "fewest_heads", "load_matched", "GRID_RUN", "GRID_NODES", "GRID_HEADS", "LONG_GRID_RUN", "LONG_GRID", "merge_grid_file", "grid_decision", "FOLLOW_UP_RUN", "FOLLOW_UP", "SECOND_FOLLOW_UP_RUN", "SECOND_FOLLOW_UP", "follow_up_study", "follow_up_decision", "grid_order", "grid_search", "load_grid", "grid_table", "map_counts",
           "STORED_RUN", "SETTINGS", "HELD_OUT_SEED", "accuracy", "run_one", "composition_study", "summarise", "accuracy_table", "layers_needed", "live_run", "load_runs", "add_arguments", "cli", "main", "RULE_DATA", "PROBE_DATA", "PROBE_OFFSETS", "PROBE_STACKS", "rule_miss_data", "probe_data", "write_rule_miss", "write_probe_data",
           "TOP_KEY_DATA", "top_key_data", "write_top_key_data"]

#: The full run of chapter 5, shipped with the package.
STORED_RUN = DATA_DIR / "composition.json"
#: Model and training settings shared by every run (the command line can change them).
SETTINGS = {"n_nodes": 8, "d_model": 64, "n_heads": 4, "lr": 3e-3, "batch_size": 64}
#: Seed of the held-out batch; the maps themselves are held out by :func:`map_split`.
HELD_OUT_SEED = 12345
#: The matched run (``composition-run --matched``), shipped with the package.
MATCHED_RUN = DATA_DIR / "composition_matched.json"
#: Its grid, as pre-registered in the ledger: (n_nodes, n_layers, heads per layer).
MATCHED_GRID = [(8, 1, 4), (8, 2, 2)]
#: Exploratory configurations, run on the first seed only (they do not decide).
MATCHED_EXTRA = [(8, 1, 16)]
#: The head grid (``composition-run --grid``), shipped with the package.
GRID_RUN = DATA_DIR / "composition_grid.json"
#: Its nodes and total heads, as pre-registered in the ledger (one layer of ``H``, two of ``H / 2``).
GRID_NODES, GRID_HEADS = (6, 8, 16), (4, 8, 16)
#: The long head grid (``composition-run --matched --grid --long``), shipped with the package.
LONG_GRID_RUN = DATA_DIR / "composition_grid_long.json"
#: Its design, as pre-registered in the ledger: nodes, total heads, most steps, and the window
#: (steps) over which a failure must be flat to count as unable (:func:`converged`).
LONG_GRID = {"nodes": (8, 12, 16), "heads": (4, 8, 16, 32), "max_steps": 10_000, "flat_window": 2_000}


#: The follow-up of the long grid (``composition-run --matched --follow-up``), shipped with the package.
FOLLOW_UP_RUN = DATA_DIR / "composition_follow_up.json"
#: Its runs, as pre-registered in the ledger: (n_nodes, n_layers, heads per layer, seed, most steps).
#: Two layers of 2 + 2 heads on 16 nodes, given the steps the plateau may need, against one layer
#: of the same 4 heads trained as long; and one layer of 4 heads on 8 and 12 nodes, three times
#: longer than the two layers needed there.
FOLLOW_UP = ((16, 2, 2, 0, 150_000), (16, 2, 2, 1, 150_000), (16, 1, 4, 0, 150_000),
             (12, 1, 4, 0, 30_000), (8, 1, 4, 0, 30_000))
#: The second follow-up (``composition-run --matched --follow-up --second``), shipped with the package:
#: one layer of 4 heads on 12 and on 8 nodes again, up to 100,000 steps, since after 30,000 the
#: 12-node run was still rising and the 8-node run's accuracy still creeping up. Decided by
#: :func:`follow_up_decision`: a pass on either gives "reach only"; otherwise composition stays undecided.
SECOND_FOLLOW_UP_RUN = DATA_DIR / "composition_follow_up_2.json"
SECOND_FOLLOW_UP = ((12, 1, 4, 0, 100_000), (8, 1, 4, 0, 100_000))


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


def run_one(hops: int, n_layers: int, seed: int, steps: int, n_nodes: int = 8, d_model: int = 64,
            n_heads: int = 4, lr: float = 3e-3, batch_size: int = 64, every: int = 50,
            eval_size: int = 2000) -> dict:
    r"""Train one model on ``k = hops`` and return its held-out accuracy, loss and training curve.

    The model is ``TinyTransformer(ModelConfig(vocab_size=n + n**2, max_len=n + 1, d_model,
    n_heads, n_layers), seed)`` (attention only, pre-LayerNorm); the training curve is the
    training loss averaged over blocks of ``every`` steps.

    Returns
    -------
    dict with ``hops, n_layers, seed, steps`` (ints), ``accuracy`` (held-out, float),
    ``train_accuracy`` (a seeded batch of training maps), ``held_out_loss`` (nats),
    ``train_curve`` (``steps // every`` floats) and ``seconds`` (wall time).

    Examples
    --------
    >>> r = run_one(hops=1, n_layers=1, seed=0, steps=4, d_model=16, every=2, eval_size=100)
    >>> r["hops"], r["n_layers"], len(r["train_curve"]), 0.0 <= r["accuracy"] <= 1.0
    (1, 1, 2, True)
    """
    start = time.perf_counter()
    task = PointerChasingTask(n_nodes, hops, "train")
    held_out = PointerChasingTask(n_nodes, hops, "test")
    config = ModelConfig(vocab_size=task.vocab_size, max_len=task.seq_len, d_model=d_model,
                         n_heads=n_heads, n_layers=n_layers)
    model = TinyTransformer(config, seed=seed)
    history = train(model, task, steps=steps, seed=seed, lr=lr, batch_size=batch_size)  # (steps,)
    blocks = steps // every
    curve = history[: blocks * every].reshape(blocks, every).mean(1)  # (blocks,)
    return {"hops": hops, "n_layers": n_layers, "seed": seed, "steps": steps,
            "accuracy": round(accuracy(model, held_out, eval_size), 4),
            "train_accuracy": round(accuracy(model, task, eval_size), 4),
            "held_out_loss": round(evaluate_loss(model, held_out, batch_size=eval_size), 4),
            "train_curve": [round(float(v), 4) for v in curve],
            "seconds": round(time.perf_counter() - start, 2)}


def composition_study(hops: Iterable[int], layers: Iterable[int], seeds: Iterable[int],
                      steps: Union[int, Mapping[int, int]], progress: bool = True, every: int = 50,
                      eval_size: int = 2000, jobs: int = 1, **settings) -> list[dict]:
    """:func:`run_one` for every ``(k, L, seed)``, in that order; ``settings`` override :data:`SETTINGS`.

    ``steps`` is one number for every run or a mapping ``k -> steps``. With ``jobs > 1`` the
    runs go to that many worker processes (each on one thread; the results do not depend on
    ``jobs``), the longest first.

    Examples
    --------
    >>> runs = composition_study([1], [1], [0, 1], steps=2, progress=False, d_model=16, every=1, eval_size=50)
    >>> [(r["hops"], r["n_layers"], r["seed"]) for r in runs]
    [(1, 1, 0), (1, 1, 1)]
    """
    kw = {**SETTINGS, **settings}
    per_k = steps if isinstance(steps, Mapping) else {k: steps for k in hops}
    grid = [(k, L, s) for k in hops for L in layers for s in seeds]
    args = {g: (g[0], g[1], g[2], per_k[g[0]]) for g in grid}
    if jobs <= 1:
        return [run_one(*args[g], every=every, eval_size=eval_size, **kw)
                for g in progress_bar(grid, "composition (k, L, seed)", len(grid), progress)]
    order = sorted(grid, key=lambda g: -per_k[g[0]] * (1 + g[1]))  # longest first: cost ~ steps (1 + L)
    done = {}
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(run_one, *args[g], every=every, eval_size=eval_size, **kw): g for g in order}
        for future in progress_bar(as_completed(futures), "composition (k, L, seed)", len(grid), progress):
            done[futures[future]] = future.result()
    return [done[g] for g in grid]


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
             steps: int = 400, eval_size: int = 1000, **settings) -> list[dict]:
    """The reduced run for a notebook: one seed, few steps, every ``(k, L)`` of the grids given.

    Same model and task as the stored run (:data:`SETTINGS`), shorter training, so the
    accuracies are lower bounds on the stored ones.

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
    with open(path) as fh:
        doc = json.load(fh)
    if doc.get("schema_version") != 1:
        raise ValueError(f"{path}: schema_version={doc.get('schema_version')!r}; expected 1")
    return doc


def _baselines(hops: Iterable[int], n_nodes: int, eval_size: int) -> dict:
    """Non-composing answers on the held-out batch of each ``k`` (see ``baseline_accuracies``)."""
    out = {}
    for k in hops:
        task = PointerChasingTask(n_nodes, k, "test")
        b = baseline_accuracies(task(eval_size, seed=HELD_OUT_SEED), n_nodes)
        out[str(k)] = {"guess": b["guess"], "copy": b["copy"], "one_hop": b["one_hop"]}
    return out


# ------------------------------------------------------------------ matched heads and parameters
class _Stop(Exception):
    """Raised by :func:`run_matched`'s callback to end training early."""


def run_matched(n_nodes: int, n_layers: int, n_heads: int, seed: int, max_steps: int = 3000,
                d_k: int = 16, d_model: int = 64, lr: float = 3e-3, batch_size: int = 64, hops: int = 2,
                check_every: int = 250, check_size: int = 500, stop_at: float = 0.99,
                eval_size: int = 2000) -> dict:
    r"""Train one model of ``n_layers`` x ``n_heads`` heads of width ``d_k`` on ``k = hops``; stop at ``stop_at``.

    Every ``check_every`` steps the held-out accuracy and loss on ``check_size`` sequences (seed
    ``HELD_OUT_SEED + 1``) are recorded; training stops after the first check that reaches
    ``stop_at``, or after ``max_steps``. The final scores use ``eval_size`` other held-out
    sequences (seed ``HELD_OUT_SEED``). Heads of a fixed width make ``1 x 2h`` and ``2 x h``
    models the same size: attention has :math:`4\, d_{model}\, h\, d_k` weights per layer.

    Returns
    -------
    dict with ``n_nodes, n_layers, n_heads, seed, steps`` (the updates made), ``parameters``,
    ``accuracy``, ``held_out_loss``, ``checks`` (steps), ``check_accuracy`` and ``check_loss``
    (one per check) and ``seconds``.

    Examples
    --------
    >>> r = run_matched(8, 1, 2, seed=0, max_steps=4, d_k=4, d_model=8, check_every=2, check_size=50,
    ...                 eval_size=50)
    >>> r["steps"], r["checks"], 0.0 <= r["accuracy"] <= 1.0
    (4, [0, 2, 4], True)
    """
    start = time.perf_counter()
    task = PointerChasingTask(n_nodes, hops, "train")
    held_out = PointerChasingTask(n_nodes, hops, "test")
    config = ModelConfig(vocab_size=task.vocab_size, max_len=task.seq_len, d_model=d_model,
                         n_heads=n_heads, n_layers=n_layers, d_k=d_k)
    model = TinyTransformer(config, seed=seed)
    record = {"checks": [], "check_accuracy": [], "check_loss": []}

    def check(step: int, m: TinyTransformer, weights) -> None:
        if step % check_every and step < max_steps:
            return
        record["checks"].append(step)
        record["check_accuracy"].append(round(accuracy(m, held_out, check_size, HELD_OUT_SEED + 1), 4))
        with torch.no_grad():
            record["check_loss"].append(round(evaluate_loss(m, held_out, check_size, HELD_OUT_SEED + 1), 4))
        if step and record["check_accuracy"][-1] >= stop_at:
            raise _Stop

    try:
        train(model, task, steps=max_steps, seed=seed, lr=lr, batch_size=batch_size, callback=check)
    except _Stop:
        pass
    model.eval()
    return {"n_nodes": n_nodes, "n_layers": n_layers, "n_heads": n_heads, "seed": seed, "hops": hops,
            "steps": record["checks"][-1], "parameters": sum(p.numel() for p in model.parameters()),
            "accuracy": round(accuracy(model, held_out, eval_size), 4),
            "held_out_loss": round(evaluate_loss(model, held_out, batch_size=eval_size), 4),
            **record, "seconds": round(time.perf_counter() - start, 2)}


def converged(run: Mapping, window: int = 1000, tol: float = 0.05, stop_at: float = 0.99) -> bool:
    """Whether a matched run ended flat: it reached ``stop_at``, or its held-out loss fell by less
    than ``tol`` (relative) over its last ``window`` steps (the ledger's pre-registered rule).

    Examples
    --------
    >>> converged({"checks": [0, 500, 1000], "check_loss": [2.0, 1.0, 0.98], "check_accuracy": [0, .5, .5]},
    ...           window=500)
    True
    >>> converged({"checks": [0, 500, 1000], "check_loss": [2.0, 1.5, 1.0], "check_accuracy": [0, .3, .6]},
    ...           window=500)
    False
    """
    if run["check_accuracy"][-1] >= stop_at:
        return True
    checks, loss = np.asarray(run["checks"]), np.asarray(run["check_loss"])
    before = loss[checks <= checks[-1] - window]
    if not before.size:
        return False
    return bool(before[-1] - loss[-1] < tol * before[-1])


def fewest_heads(runs: Iterable[Mapping], n_nodes: int, n_layers: int, threshold: float = 0.9) -> Optional[int]:
    """The fewest heads in total (``n_layers * n_heads``) with which **every** seed reaches ``threshold``.

    Examples
    --------
    >>> runs = [{"n_nodes": 8, "n_layers": 1, "n_heads": h, "accuracy": a} for h, a in [(4, .5), (8, .95), (16, 1.)]]
    >>> fewest_heads(runs, 8, 1), fewest_heads(runs, 16, 1)
    (8, None)
    """
    ok: dict = {}
    for r in runs:
        if r["n_nodes"] == n_nodes and r["n_layers"] == n_layers:
            H = r["n_layers"] * r["n_heads"]
            ok[H] = ok.get(H, True) and r["accuracy"] >= threshold
    passing = [H for H, good in sorted(ok.items()) if good]
    return passing[0] if passing else None


def matched_study(grid: Sequence[tuple], seeds: Iterable[int], max_steps: int = 3000, jobs: int = 1,
                  extra: Sequence[tuple] = (),
                  progress: bool = True, out: Optional[Path] = None, meta: Optional[dict] = None,
                  **settings) -> list[dict]:
    """:func:`run_matched` for every ``(n, L, h)`` of ``grid`` and seed (and of ``extra`` on the first seed); with ``out``, the JSON is
    rewritten after every finished run (so an interrupted run keeps what it finished)."""
    seeds = list(seeds)
    jobs_list = [(n, L, h, s) for (n, L, h) in grid for s in seeds] + [(n, L, h, seeds[0]) for (n, L, h) in extra]
    done: dict = {}

    def save() -> None:
        if out is not None:
            runs = [done[j] for j in jobs_list if j in done]
            write_json({"schema_version": 1, "meta": meta or {},
                        "settings": {"max_steps": max_steps, **settings}, "runs": runs}, out)

    if jobs <= 1:
        for j in progress_bar(jobs_list, "matched (n, L, h, seed)", len(jobs_list), progress):
            done[j] = run_matched(*j, max_steps=max_steps, **settings)
            save()
    else:
        order = sorted(jobs_list, key=lambda j: -(j[0] ** 2) * j[1] * j[2])  # largest first
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(run_matched, *j, max_steps=max_steps, **settings): j for j in order}
            for future in progress_bar(as_completed(futures), "matched (n, L, h, seed)", len(jobs_list), progress):
                done[futures[future]] = future.result()
                save()
    return [done[j] for j in jobs_list]


def load_matched(path: Union[str, Path] = MATCHED_RUN) -> dict:
    """Read the matched run: ``{"schema_version": 1, "meta", "settings", "runs": [...]}``."""
    doc = json.loads(Path(path).read_text())
    if doc.get("schema_version") != 1:
        raise ValueError(f"{path}: schema_version={doc.get('schema_version')!r}; expected 1")
    return doc


# ------------------------------------------------------------------ the head grid
def grid_order(n_layers: int, heads: Sequence[int] = GRID_HEADS) -> list[int]:
    """The order in which :func:`grid_search` tries total head counts: one layer from the most heads
    down (stopping at its first failure), two layers from the fewest up (stopping at the first success).

    Examples
    --------
    >>> grid_order(1), grid_order(2)
    ([16, 8, 4], [4, 8, 16])
    """
    return sorted(heads, reverse=n_layers == 1)


def _same(r: Mapping, n: int, L: int, H: int, seed: int) -> bool:
    return (r["n_nodes"], r["n_layers"], r["n_layers"] * r["n_heads"], r["seed"]) == (n, L, H, seed)


def grid_search(nodes: Sequence[int], seeds: Sequence[int] = (0,), layers: Sequence[int] = (1, 2),
                heads: Sequence[int] = GRID_HEADS, runs: Sequence[Mapping] = (), threshold: float = 0.9,
                run=None, progress: bool = True, save=None, **settings) -> list[dict]:
    """The pre-registered search for the fewest heads, at each ``n`` and depth, over :func:`run_matched`.

    The first seed walks :func:`grid_order` (one layer: ``16, 8, 4`` heads, stopping after the first
    configuration below ``threshold``; two layers: ``2 x 2, 2 x 4, 2 x 8``, stopping after the first
    at or above it). Every later seed repeats only the configurations the first seed passed (a
    failure on one seed already fails "every seed"). Runs already in ``runs`` (same ``n``, depth,
    heads and seed) are reused, not repeated. ``run`` defaults to :func:`run_matched`; ``save``,
    if given, is called with the list of runs after each new one.

    Examples
    --------
    >>> fake = lambda n, L, h, seed, **kw: {"n_nodes": n, "n_layers": L, "n_heads": h, "seed": seed,
    ...                                     "accuracy": 1.0 if L * h >= (8 if L == 1 else 4) else 0.5}
    >>> out = grid_search([6], seeds=(0, 1), run=fake, progress=False)
    >>> [(r["n_layers"], r["n_layers"] * r["n_heads"], r["seed"]) for r in out]
    [(1, 16, 0), (1, 8, 0), (1, 4, 0), (2, 4, 0), (1, 16, 1), (1, 8, 1), (2, 4, 1)]
    """
    run = run_matched if run is None else run
    out = [dict(r) for r in runs]
    bar = None
    if progress:
        try:
            from tqdm import tqdm  # optional: the package does not require it
            bar = tqdm(desc="grid runs (n, L, H, seed)", file=sys.stderr)
        except ImportError:
            pass

    def get(n: int, L: int, H: int, seed: int) -> dict:
        for r in out:
            if _same(r, n, L, H, seed):
                return r
        if bar is not None:
            bar.set_postfix_str(f"n={n} L={L} H={H} seed={seed}")
        r = run(n, L, H // L, seed, **settings)
        out.append(r)
        if bar is not None:
            bar.update(1)
        if save is not None:
            save(out)
        return r

    first, rest = seeds[0], list(seeds[1:])
    passed = []
    for n in nodes:
        for L in layers:
            for H in grid_order(L, heads):
                ok = get(n, L, H, first)["accuracy"] >= threshold
                if ok:
                    passed.append((n, L, H))
                if ok != (L == 1):
                    break
    for seed in rest:
        for n, L, H in passed:
            get(n, L, H, seed)
    return out


def grid_table(runs: Iterable[Mapping], threshold: float = 0.9, window: int = 1000) -> dict:
    """Per ``(n, L, H)``: accuracies over seeds, whether every seed passes ``threshold``, and convergence
    (:func:`converged` over the last ``window`` steps).

    Examples
    --------
    >>> runs = [{"n_nodes": 6, "n_layers": 2, "n_heads": 2, "seed": s, "accuracy": a, "checks": [0, 1000],
    ...          "check_loss": [2.0, 0.01], "check_accuracy": [0.1, 0.995]} for s, a in [(0, 0.99), (1, 0.97)]]
    >>> grid_table(runs)[6, 2, 4]
    {'accuracy': [0.99, 0.97], 'seeds': [0, 1], 'passes': True, 'converged': True}
    """
    table: dict = {}
    for r in sorted(runs, key=lambda r: (r["n_nodes"], r["n_layers"], r["n_heads"], r["seed"])):
        key = (r["n_nodes"], r["n_layers"], r["n_layers"] * r["n_heads"])
        row = table.setdefault(key, {"accuracy": [], "seeds": [], "passes": True, "converged": True})
        row["accuracy"].append(r["accuracy"])
        row["seeds"].append(r["seed"])
        row["passes"] = row["passes"] and r["accuracy"] >= threshold
        row["converged"] = row["converged"] and converged(r, window=window)
    return table


def grid_decision(runs: Sequence[Mapping], nodes: Sequence[int], threshold: float = 0.9, window: int = 1000) -> dict:
    """The ledger's pre-registered decision on the head grid, read off its runs.

    ``h1[n]``, ``h2[n]`` are :func:`fewest_heads` for one and two layers (``None``: no configuration
    tried passes, "more than" the most heads). The one-layer failures the verdict rests on are, at
    each ``n``, the one-layer runs with ``h2[n]`` heads or fewer (they show ``h1 > h2``); the
    two-layer failures are those with more heads than ``h2`` at the smallest ``n``. A failure counts
    only when flat (:func:`converged` over ``window`` steps). ``composition`` is ``"holds"`` (``h2``
    constant and ``h1 > h2`` at every ``n``, the failures flat), ``"reach only"`` (one layer does as
    well as two at some ``n``, or ``h2`` grows with ``n``, on flat failures) or ``"undecided"``.

    Examples
    --------
    >>> def run(n, L, H, acc, loss):
    ...     return {"n_nodes": n, "n_layers": L, "n_heads": H // L, "seed": 0, "accuracy": acc,
    ...             "checks": [0, 1000, 2000], "check_loss": [2.0, loss, loss], "check_accuracy": [0.1, acc, acc]}
    >>> runs = [run(n, 2, 4, 1.0, 0.0) for n in (8, 12)] + [run(8, 1, 8, 1.0, 0.0), run(8, 1, 4, 0.5, 1.0),
    ...                                                    run(12, 1, 8, 0.5, 1.0)]
    >>> d = grid_decision(runs, (8, 12))
    >>> d["h1"], d["h2"], d["composition"]
    ({8: 8, 12: None}, {8: 4, 12: 4}, 'holds')
    """
    h1 = {n: fewest_heads(runs, n, 1, threshold) for n in nodes}
    h2 = {n: fewest_heads(runs, n, 2, threshold) for n in nodes}
    inf = float("inf")
    big = lambda h: inf if h is None else h  # noqa: E731 - "more than any number tried"

    def failures(n: int, L: int, keep) -> list:
        return [r for r in runs if (r["n_nodes"], r["n_layers"]) == (n, L) and r["accuracy"] < threshold
                and keep(r["n_layers"] * r["n_heads"])]

    base = big(h2[nodes[0]])
    one_fail = [r for n in nodes for r in failures(n, 1, lambda H, n=n: H <= big(h2[n]))]
    two_fail = [r for n in nodes for r in failures(n, 2, lambda H: H >= base)]
    flat = lambda rs: all(converged(r, window=window) for r in rs)  # noqa: E731
    same_h2 = all(big(h2[n]) == base < inf for n in nodes)
    if any(big(h1[n]) <= big(h2[n]) < inf for n in nodes):
        composition = "reach only"
    elif same_h2 and all(big(h1[n]) > big(h2[n]) for n in nodes):
        composition = "holds" if flat(one_fail) else "undecided"
    elif not same_h2 and flat(two_fail):
        composition = "reach only"
    else:
        composition = "undecided"
    return {"h1": h1, "h2": h2, "composition": composition,
            "one_layer_failures_flat": flat(one_fail), "two_layer_failures_flat": flat(two_fail)}


def follow_up_study(configs: Sequence[tuple] = FOLLOW_UP, jobs: int = 2, out: Optional[Path] = None,
                    progress: bool = True, meta: Optional[dict] = None, **settings) -> list[dict]:
    """:func:`run_matched` for each ``(n, L, h, seed, max_steps)`` of ``configs`` on ``jobs`` processes,
    the longest first; with ``out``, the JSON is rewritten after every finished run."""
    done: dict = {}
    order = sorted(configs, key=lambda c: -c[4] * c[0] ** 2 * c[1] * c[2])  # longest first

    def save() -> None:
        if out is not None:
            write_json({"schema_version": 1, "meta": meta or {}, "settings": {"configs": [list(c) for c in configs]},
                        "runs": [done[c] for c in configs if c in done]}, out)

    with ProcessPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(run_matched, n, L, h, seed, max_steps=T, **settings): (n, L, h, seed, T)
                   for (n, L, h, seed, T) in order}
        for future in progress_bar(as_completed(futures), "follow-up (n, L, h, seed)", len(order), progress):
            done[futures[future]] = future.result()
            save()
    return [done[c] for c in configs]


def follow_up_decision(runs: Sequence[Mapping], threshold: float = 0.9) -> dict:
    """The ledger's rule for the follow-up: two layers of 2 + 2 heads on 16 nodes against one layer of 4.

    A failure counts only when flat over its last third (:func:`converged` with ``window`` a third of
    its steps). ``composition`` is ``"holds"`` when the two-layer runs pass on every seed and every
    one-layer run fails flat; ``"reach only"`` when a one-layer run passes; otherwise ``"undecided"``.

    Examples
    --------
    >>> r = lambda L, acc, loss: {"n_layers": L, "accuracy": acc, "steps": 3000, "checks": [0, 1000, 2000, 3000],
    ...                           "check_loss": [2.0, 2.0, loss, loss], "check_accuracy": [0.1, 0.1, acc, acc]}
    >>> follow_up_decision([r(2, 1.0, 0.0), r(1, 0.1, 2.0)])["composition"]
    'holds'
    >>> follow_up_decision([r(2, 1.0, 0.0), r(1, 0.95, 0.1)])["composition"]
    'reach only'
    """
    two = [r for r in runs if r["n_layers"] == 2]
    one = [r for r in runs if r["n_layers"] == 1]
    flat = [converged(r, window=r["steps"] // 3) for r in one]
    if any(r["accuracy"] >= threshold for r in one):
        composition = "reach only"
    elif two and all(r["accuracy"] >= threshold for r in two) and all(flat):
        composition = "holds"
    else:
        composition = "undecided"
    return {"composition": composition, "two_layers_pass": all(r["accuracy"] >= threshold for r in two),
            "one_layer_failures_flat": all(flat)}


def map_counts(n_nodes: int) -> dict:
    """How many single cycles on ``n_nodes`` nodes exist, and how many fall in the training and held-out parts.

    Every cycle is enumerated ((n - 1)! of them), so keep ``n_nodes`` small.

    Examples
    --------
    >>> map_counts(6)
    {'cycles': 120, 'train': 88, 'test': 32}
    """
    if not 3 <= n_nodes <= 9:
        raise ValueError(f"n_nodes={n_nodes}: enumerating (n - 1)! cycles is meant for 3 <= n <= 9")
    cycles = []
    for rest in itertools.permutations(range(1, n_nodes)):
        order, f = (0, *rest), [0] * n_nodes
        for i, a in enumerate(order):
            f[a] = order[(i + 1) % n_nodes]  # f(pi_i) = pi_{i+1}
        cycles.append(f)
    part = map_split(torch.tensor(cycles))  # (cycles,)
    return {"cycles": len(cycles), "train": int((part > 0).sum()), "test": int((part == 0).sum())}


def load_grid(path: Union[str, Path] = GRID_RUN) -> dict:
    """Read the head grid: ``{"schema_version": 1, "meta", "settings", "runs": [...]}`` (as :func:`load_matched`)."""
    return load_matched(path)


def merge_grid_file(path: Path, runs: Sequence[Mapping], part: Mapping, meta: Mapping, settings: Mapping) -> dict:
    """Add ``runs`` to the grid file at ``path`` under a lock, keeping the runs other parts wrote there.

    A run already in the file (same ``n``, depth, heads and seed) is kept as it is; ``part`` (the
    machine and arguments of this call) is recorded once in ``meta["parts"]``.

    Examples
    --------
    >>> import tempfile
    >>> f = Path(tempfile.mkdtemp()) / "grid.json"
    >>> r = lambda n, s: {"n_nodes": n, "n_layers": 1, "n_heads": 4, "seed": s}
    >>> _ = merge_grid_file(f, [r(8, 0)], {"arguments": "a"}, {}, {})
    >>> doc = merge_grid_file(f, [r(8, 0), r(12, 0)], {"arguments": "b"}, {}, {})
    >>> [x["n_nodes"] for x in doc["runs"]], len(doc["meta"]["parts"])
    ([8, 12], 2)
    """
    try:
        import fcntl  # POSIX; elsewhere the parts must run one after another
    except ImportError:
        fcntl = None
    path = Path(path)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        if fcntl is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)
        doc = load_grid(path) if path.exists() else {"runs": [], "meta": {}}
        have = [dict(r) for r in doc["runs"]]
        for r in runs:
            key = (r["n_nodes"], r["n_layers"], r["n_heads"], r["seed"])
            if not any((h["n_nodes"], h["n_layers"], h["n_heads"], h["seed"]) == key for h in have):
                have.append(dict(r))
        parts = list(doc["meta"].get("parts", []))
        if dict(part) not in parts:
            parts.append(dict(part))
        new = {"schema_version": 1, "meta": {**meta, "parts": parts}, "settings": dict(settings), "runs": have}
        write_json(new, path)
    return new


# ------------------------------------------------------------------ command line
def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    p.add_argument("--out", default=str(STORED_RUN), help="JSON file to write (default: the shipped run)")
    p.add_argument("--hops", type=int, nargs="+", default=[1, 2], help="numbers of hops k")
    p.add_argument("--layers", type=int, nargs="+", default=[1, 2], help="depths L")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="seeds (model and batches)")
    p.add_argument("--steps", type=int, nargs="+", default=[1000, 3000],
                   help="AdamW steps: one number for every k, or one per k in --hops")
    p.add_argument("--jobs", type=int, default=2, help="worker processes (one thread each)")
    p.add_argument("--every", type=int, default=50, help="average the training curves over this many steps")
    p.add_argument("--eval-size", type=int, default=2000, help="held-out sequences per model")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--matched", action="store_true",
                   help="the matched run instead: 1 layer x h heads against 2 layers x h/2 (MATCHED_GRID), "
                        "written to composition_matched.json unless --out is given")
    p.add_argument("--max-steps", type=int, default=3000, help="--matched: most AdamW steps per run")
    p.add_argument("--grid", action="store_true",
                   help="with --matched: the head grid (GRID_NODES x GRID_HEADS, grid_search), added to "
                        "composition_grid.json unless --out is given; runs already there are kept")
    p.add_argument("--long", action="store_true",
                   help="with --matched --grid: the long grid instead (LONG_GRID: n = 8, 12, 16; 4-32 heads; "
                        "up to 10,000 steps), added to composition_grid_long.json unless --out is given; "
                        "parts may run at the same time (one n each): every save merges with the file")
    p.add_argument("--follow-up", action="store_true",
                   help="with --matched: the long grid's follow-up instead (FOLLOW_UP: 2 x 2 heads on 16 nodes up to "
                        "150,000 steps against 1 x 4, and 1 x 4 on 8 and 12 nodes up to 30,000), written to "
                        "composition_follow_up.json unless --out is given (about 40 minutes on two workers)")
    p.add_argument("--second", action="store_true",
                   help="with --matched --follow-up: the second follow-up (SECOND_FOLLOW_UP: one layer of 4 heads on "
                        "12 and 8 nodes up to 100,000 steps), written to composition_follow_up_2.json unless --out "
                        "is given (about 10 minutes on two workers)")
    p.add_argument("--nodes", type=int, nargs="+", default=None,
                   help="--grid: numbers of nodes n to search (default: all of the grid's; run in parts: one n per call)")
    p.add_argument("--grid-layers", type=int, nargs="+", default=[1, 2],
                   help="--grid: depths to search (1, 2 or both; a part can take one depth)")
    for name, value in SETTINGS.items():
        p.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value, help=f"default {value}")


def cli(args: argparse.Namespace, parser: Optional[argparse.ArgumentParser] = None) -> int:
    """Command line: run the grid and write it as JSON."""
    arguments = {k: v for k, v in vars(args).items() if k not in ("command", "run", "parser")}
    settings = {name: getattr(args, name) for name in SETTINGS}
    meta = {"machine": machine_info(threads=1), "command": "python -m attention_course composition-run",
            "arguments": arguments}
    if len(args.steps) not in (1, len(args.hops)):
        parser.error(f"--steps has {len(args.steps)} values; expected 1 or one per k ({len(args.hops)})")
    if args.matched and args.follow_up:
        configs, stored = (SECOND_FOLLOW_UP, SECOND_FOLLOW_UP_RUN) if args.second else (FOLLOW_UP, FOLLOW_UP_RUN)
        out = stored if args.out == str(STORED_RUN) else Path(args.out)
        meta["command"] += " --matched --follow-up" + (" --second" if args.second else "")
        wall = time.perf_counter()
        runs = follow_up_study(configs, jobs=args.jobs, out=out, progress=not args.quiet, meta=meta,
                               eval_size=args.eval_size)
        meta.update(wall_seconds=round(time.perf_counter() - wall, 1))
        write_json({"schema_version": 1, "meta": meta, "settings": {"configs": [list(c) for c in configs]},
                    "runs": runs}, out)
        return 0
    if args.matched and args.grid:
        design = LONG_GRID if args.long else {"nodes": GRID_NODES, "heads": GRID_HEADS,
                                              "max_steps": args.max_steps, "flat_window": 1000}
        default_out = LONG_GRID_RUN if args.long else GRID_RUN
        out = default_out if args.out == str(STORED_RUN) else Path(args.out)
        meta["command"] += " --matched --grid" + (" --long" if args.long else "")
        part = {k: meta[k] for k in ("machine", "arguments")}
        doc_settings = {"max_steps": design["max_steps"], "eval_size": args.eval_size, "d_k": 16, "d_model": 64,
                        "lr": 3e-3, "batch_size": 64, "threshold": 0.9, "heads": list(design["heads"]),
                        "flat_window": design["flat_window"]}
        old = load_grid(out) if out.exists() else {"runs": []}

        def save(runs: list) -> None:
            merge_grid_file(out, runs, part, {"command": meta["command"]}, doc_settings)

        grid_search(args.nodes or list(design["nodes"]), args.seeds, layers=args.grid_layers,
                    heads=design["heads"], runs=old["runs"], progress=not args.quiet, save=save,
                    max_steps=design["max_steps"], eval_size=args.eval_size)
        return 0
    if args.matched:
        out = MATCHED_RUN if args.out == str(STORED_RUN) else Path(args.out)
        meta["command"] += " --matched"
        wall = time.perf_counter()
        runs = matched_study(MATCHED_GRID, args.seeds, max_steps=args.max_steps, jobs=args.jobs, extra=MATCHED_EXTRA,
                             progress=not args.quiet, out=out, meta=meta, eval_size=args.eval_size)
        meta.update(wall_seconds=round(time.perf_counter() - wall, 1), run_seconds=round(sum(r["seconds"] for r in runs), 1))
        write_json({"schema_version": 1, "meta": meta, "settings": {"max_steps": args.max_steps,
                    "eval_size": args.eval_size, "d_k": 16, "d_model": 64, "lr": 3e-3, "batch_size": 64},
                    "runs": runs}, out)
        return 0
    steps = dict(zip(args.hops, args.steps * len(args.hops) if len(args.steps) == 1 else args.steps))
    wall = time.perf_counter()
    runs = composition_study(args.hops, args.layers, args.seeds, steps, progress=not args.quiet,
                             every=args.every, eval_size=args.eval_size, jobs=args.jobs, **settings)
    meta.update(wall_seconds=round(time.perf_counter() - wall, 1),
                run_seconds=round(sum(r["seconds"] for r in runs), 1))  # summed over the workers
    doc = {"schema_version": 1, "meta": meta,
           "settings": {**settings, "steps": {str(k): v for k, v in steps.items()}, "eval_size": args.eval_size},
           "baselines": _baselines(args.hops, settings["n_nodes"], args.eval_size), "runs": runs}
    with open(args.out, "w") as fh:
        json.dump(doc, fh)
        fh.write("\n")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m attention_course.chapters.graphs.runs``."""
    p = argparse.ArgumentParser(prog="python -m attention_course.chapters.graphs.runs",
                                description=__doc__.split("\n")[0])
    add_arguments(p)
    return cli(p.parse_args(argv), p)


if __name__ == "__main__":
    raise SystemExit(main())


RULE_DATA = DATA_DIR / "slider_rule_miss.json"


PROBE_DATA = DATA_DIR / "slider_depth_probe.json"
#: The neighbours chapter 5's word probes read: two and one words before, one and two after.
PROBE_OFFSETS = (-2, -1, 1, 2)


#: Chapter 5's random stacks: keyword arguments of :func:`attention_course.chapters.graphs.collapse.attention_stack`.
PROBE_STACKS = {"pure attention": {}, "+ skip": {"skip": True},
                "+ skip + MLP + LayerNorm": {"skip": True, "mlp": True, "layernorm": True},
                "+ skip, no exchange": {"skip": True}}


# ------------------------------------------------------------------ chapter 5: learned-topology
def rule_miss_data(sentences: Sequence[str], digits: int = 4) -> dict:
    """The fixed rule's and uniform attention's miss per MiniLM head, as chapter 5 computes them.

    Fits :func:`~attention_course.chapters.graphs.topology_rule.fit_fixed_rule` on each sentence and three
    shuffles and scores it on two held-out shuffles. Returns ``{"sentences", "miss", "uniform"}``,
    each miss a list of 72 (layer-major), rounded to ``digits`` decimals: what :data:`RULE_DATA` stores.
    """
    tokenizer = minilm_tokenizer()
    weights = minilm_weights()
    (fit_ids, fit_maps), (held_ids, held_maps) = topology_rule.held_out_shuffles(
        lambda texts: encoder_maps(weights, tokenizer, texts), sentences)
    rule = topology_rule.fit_fixed_rule(fit_maps, fit_ids)
    return {"sentences": list(sentences),
            "miss": np.round(topology_rule.rule_miss(rule, held_maps, held_ids), digits).tolist(),
            "uniform": np.round(topology_rule.uniform_miss(held_maps), digits).tolist()}


#: Chapter 5's rule comparison (``python -m attention_course topology-rules``).
RULES_DATA = DATA_DIR / "topology_rules.json"


def rules_data(sentences: Sequence[str], digits: int = 4) -> dict:
    """Every rule of :data:`~attention_course.chapters.graphs.topology_rule.RULES` fitted to each MiniLM head.

    Fitted on each sentence and three shuffles, scored on two held-out shuffles, as
    :func:`rule_miss_data`. Returns ``{"sentences", "uniform", "rules": {name: miss}}``, each miss a
    list of 72 (layer-major): the weight the rule misplaces (mean total variation over rows).
    """
    tokenizer = minilm_tokenizer()
    weights = minilm_weights()
    (fit_ids, fit_maps), (held_ids, held_maps) = topology_rule.held_out_shuffles(
        lambda texts: encoder_maps(weights, tokenizer, texts), sentences)
    rules = {}
    for name, parts in topology_rule.RULES.items():
        rule = topology_rule.fit_fixed_rule(fit_maps, fit_ids, parts=parts)
        rules[name] = np.round(topology_rule.rule_miss(rule, held_maps, held_ids), digits).tolist()
    return {"sentences": list(sentences), "uniform": np.round(topology_rule.uniform_miss(held_maps), digits).tolist(),
            "rules": rules}


def load_rules(path: Union[str, Path] = RULES_DATA) -> dict:
    """Read the stored rule comparison: ``{"sentences", "uniform", "rules": {name: 72 misses}}``.

    Examples
    --------
    >>> doc = load_rules()
    >>> sorted(doc["rules"])[0], len(doc["uniform"])
    ('key token', 72)
    """
    return json.loads(Path(path).read_text())


class _RulesCommand:
    """``python -m attention_course topology-rules``: write :func:`rules_data` to :data:`RULES_DATA`."""

    @staticmethod
    def add_arguments(p: argparse.ArgumentParser) -> None:
        p.add_argument("--out", default=str(RULES_DATA), help="JSON file to write (default: the shipped one)")

    @staticmethod
    def cli(args: argparse.Namespace, parser: Optional[argparse.ArgumentParser] = None) -> int:
        sentences = json.loads(Path(RULE_DATA).read_text())["sentences"]  # chapter 5's four sentences
        write_json(rules_data(sentences), Path(args.out))
        return 0


#: The ``topology-rules`` command (minutes: five rules x 72 heads, L-BFGS).
TOPOLOGY_RULES = _RulesCommand()


def write_rule_miss(sentences: Optional[Sequence[str]] = None, path: Path = RULE_DATA) -> dict:
    """Store :func:`rule_miss_data` at ``path``; ``sentences`` default to the stored ones (chapter 5's)."""
    sentences = json.loads(Path(path).read_text())["sentences"] if sentences is None else sentences
    return write_json(rule_miss_data(sentences), path)


# ------------------------------------------------------------------ chapter 5: depth-keeps-information
def probe_data(max_depth: int = 24, seeds: Sequence[int] = range(3), digits: int = 4) -> dict:
    """Chapter 5's probe accuracies at every depth ``0..max_depth``: what :data:`PROBE_DATA` stores.

    Random stacks (:data:`PROBE_STACKS`; 100 sequences, 75 to fit, 25 to score, the last with the
    identity mask) per seed, guessing each sequence's commonest label (seed 0's held-out
    sequences), and MiniLM and its scrambled copy (seed 0) on 160 template sentences (120 to fit):
    the word at each of :data:`PROBE_OFFSETS` read from a word's state, x 7 layers.
    """
    layers = list(range(max_depth + 1))
    acc = depth_probe.stack_probe_curves(PROBE_STACKS, layers, n_seq=100, n_train=75, seeds=seeds,
                                         mask={"+ skip, no exchange": np.eye(16, dtype=bool)})
    labels, _ = depth_probe.labelled_sequences(100, 16, 64, 16, seed=0)
    commonest = float(np.mean([np.bincount(l).max() / len(l) for l in labels[75:]]))
    tokenizer = minilm_tokenizer()
    ids = tokenizer(depth_probe.template_sentences(160, seed=0), return_tensors="pt")["input_ids"]
    W = minilm_weights()
    mini = {}
    for name, weights in (("MiniLM", W), ("scrambled", scrambled_weights(W, seed=0))):
        with torch.no_grad():
            states = [h.numpy() for h in bert_encode(weights, ids).hidden_states]  # 7 x (160, n, 384)
        mini[name] = np.round(depth_probe.encoder_probe(states, ids.numpy(), n_train=120, offsets=PROBE_OFFSETS,
                                                        words=range(1, 11)), digits).tolist()  # (4, 7)
    return {"layers": layers, "stacks": {k: np.round(v, digits).tolist() for k, v in acc.items()},
            "chance": round(commonest, 6), "n_test_tokens": 25 * 16, "minilm": mini}


def write_probe_data(path: Path = PROBE_DATA) -> dict:
    """Store :func:`probe_data` with its defaults at ``path`` (minutes)."""
    return write_json(probe_data(), path)


# ------------------------------------------------------------------ chapter 5: unlike-gnns
#: Per MiniLM head and sentence, the share of queries whose top key is the head's commonest one.
TOP_KEY_DATA = DATA_DIR / "slider_top_key.json"


def top_key_data(sentences: Sequence[str], digits: int = 6) -> dict:
    """:func:`~attention_course.chapters.graphs.gnn.shared_top_key` of every MiniLM head on each sentence.

    Returns ``{"sentences", "shares", "shares_words"}``: two lists of (sentences, 72) shares
    (layer-major), with [CLS] and [SEP] as queries and keys, and on the words alone; rounded to
    ``digits`` decimals (each share is a count over the sentence's tokens). What :data:`TOP_KEY_DATA` stores.
    """
    _, maps = attention_maps(list(sentences))  # one (6, 12, n, n) per sentence
    shares = [shared_top_key(m).ravel() for m in maps]  # (72,) each
    words = [shared_top_key(m[:, :, 1:-1, 1:-1]).ravel() for m in maps]  # without [CLS], [SEP]
    return {"sentences": list(sentences), "shares": np.round(shares, digits).tolist(),
            "shares_words": np.round(words, digits).tolist()}


def write_top_key_data(sentences: Optional[Sequence[str]] = None, path: Path = TOP_KEY_DATA) -> dict:
    """Store :func:`top_key_data` at ``path``; ``sentences`` default to chapter 5's four (:data:`RULE_DATA`'s)."""
    sentences = json.loads(Path(RULE_DATA).read_text())["sentences"] if sentences is None else sentences
    return write_json(top_key_data(sentences), path)
