r"""Chapter 5's hop sweep: can ``L`` layers learn to follow ``L`` pointers?

On a complete graph every node is one hop from every other, so the informative sense of "L layers
allow L hops" is chained lookups: :math:`k`-hop pointer chasing with :math:`k = L`. For each depth,
4 heads of width 16 per layer are trained at ``n`` = 8, 12, 16 over a learning-rate sweep
(:data:`HOP_SWEEP`), searched in the order fixed in advance (:func:`sweep_search`); a
configuration passes at ``n`` when every seed reaches 0.9 (:func:`sweep_decision`). Controls
(:func:`control_jobs`): ``k = L + 1`` hops, and random answers (:class:`RandomAnswers`), which
must stay at the guess :math:`1/n`. ``python -m attention_course composition-run --hops-sweep``
(:data:`HOP_SWEEP_RUNS`) adds its runs to ``composition_hops.json``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Callable, Optional

import numpy as np
import torch

from ...models.experiments import Experiment, Runs, read_json, register
from ...models.pointer_chasing import PointerChasingTask, baseline_accuracies
from ...models.records import DATA_DIR
from ...models.tasks import Batch, _generator
from .composition import HELD_OUT_SEED, CompositionConfig
from . import head_budget
from .head_budget import HEAD_WIDTH, converged, merge_grid, run_matched

__all__ = ["sweep_table", "sweep_decision", "decision_by_threshold", "load_sweep"]

#: The stored sweep and its controls.
HOP_SWEEP_RUN = DATA_DIR / "composition_hops.json"
#: The design, as pre-registered in the ledger: nodes, learning rates, heads per layer, most steps,
#: seeds, the window a failure must be flat over, the pass line and the nodes of the controls.
HOP_SWEEP = {"nodes": (8, 12, 16), "lrs": (1e-3, 3e-3, 1e-2), "heads": 4, "max_steps": 20_000,
             "seeds": (0, 1), "flat_window": 2_000, "threshold": 0.9, "control_nodes": 8}


@dataclass(frozen=True)
class RandomAnswers:
    """A pointer-chasing task whose answers (the target at the last position) are uniform random nodes.

    Examples
    --------
    >>> task = RandomAnswers(PointerChasingTask(n_nodes=8, hops=2))
    >>> b, true = task(2000, seed=0), PointerChasingTask(n_nodes=8, hops=2)(2000, seed=0)
    >>> bool((b.inputs == true.inputs).all()), abs(float((b.targets[:, -1] == true.targets[:, -1]).double().mean()) - 1 / 8) < 0.03
    (True, True)
    """

    task: PointerChasingTask

    @property
    def name(self) -> str:
        return f"random answers to {self.task.name}"

    @property
    def vocab_size(self) -> int:
        return self.task.vocab_size

    @property
    def seq_len(self) -> int:
        return self.task.seq_len

    def __call__(self, batch_size: int, seed: int = 0, generator: Optional[torch.Generator] = None) -> Batch:
        g = _generator(seed, generator)
        inputs, targets, mask = self.task(batch_size, generator=g)
        targets = targets.clone()
        targets[:, -1] = torch.randint(0, self.task.n_nodes, (batch_size,), generator=g)  # (B,): unrelated to the map
        return Batch(inputs, targets, mask)


def sweep_run(n_nodes: int, n_layers: int, lr: float, seed: int, hops: Optional[int] = None,
              max_steps: int = 20_000, random_answers: bool = False, kind: str = "sweep",
              n_heads: int = HOP_SWEEP["heads"], **training: Any) -> dict:
    r"""Train ``n_layers`` layers of ``n_heads`` heads (width 16) on ``k = hops`` hops (default ``k = L``) at ``lr``.

    :func:`~attention_course.chapters.graphs.head_budget.run_matched`'s record with ``kind``, ``lr``
    and ``max_steps``; ``random_answers`` trains on :class:`RandomAnswers`.

    Examples
    --------
    >>> r = sweep_run(8, 1, 1e-2, seed=0, max_steps=4, d_model=16, check_every=2, check_size=50, eval_batch=50)
    >>> r["kind"], r["hops"], r["lr"], r["steps"], 0.0 <= r["accuracy"] <= 1.0
    ('sweep', 1, 0.01, 4, True)
    """
    k = n_layers if hops is None else hops
    wrap = RandomAnswers if random_answers else None
    record = run_matched(n_nodes, n_layers, n_heads, seed, max_steps=max_steps, d_k=HEAD_WIDTH, hops=k, lr=lr,
                         train_task=wrap, **training)
    return {"kind": kind, "lr": lr, "max_steps": max_steps, **record}


# ------------------------------------------------------------------ the search, fixed in advance
def _key(r: Mapping) -> tuple:
    """A run's job: ``(kind, n, L, k, lr, seed, max_steps)``."""
    return r["kind"], r["n_nodes"], r["n_layers"], r["hops"], r["lr"], r["seed"], r["max_steps"]


def sweep_search(layers: Sequence[int], nodes: Optional[Sequence[int]] = None, lrs: Optional[Sequence[float]] = None,
                 seeds: Optional[Sequence[int]] = None, runs: Sequence[Mapping] = (), threshold: float = 0.9,
                 max_steps: Optional[int] = None, run: Optional[Callable[..., dict]] = None) -> list[dict]:
    """The ledger's search: at each depth ``L`` and ``n``, seed 0 at every learning rate; each later
    seed at the learning rates the first passed at (fewest steps first) until one passes.

    Runs already in ``runs`` are reused; ``run`` defaults to :func:`sweep_run`, the rest to :data:`HOP_SWEEP`.

    Examples
    --------
    >>> fake = lambda n, L, lr, seed, max_steps: {"kind": "sweep", "n_nodes": n, "n_layers": L, "hops": L, "lr": lr,
    ...     "seed": seed, "max_steps": max_steps, "steps": int(1 / lr), "accuracy": 1.0 if lr > 2e-3 else 0.5}
    >>> out = sweep_search([2], nodes=[8], run=fake)
    >>> [(r["lr"], r["seed"]) for r in out]
    [(0.001, 0), (0.003, 0), (0.01, 0), (0.01, 1)]
    """
    run = sweep_run if run is None else run
    nodes, lrs = nodes or HOP_SWEEP["nodes"], lrs or HOP_SWEEP["lrs"]
    seeds, max_steps = seeds or HOP_SWEEP["seeds"], max_steps or HOP_SWEEP["max_steps"]
    out = [dict(r) for r in runs]

    def get(n: int, L: int, lr: float, seed: int) -> dict:
        job = ("sweep", n, L, L, lr, seed, max_steps)
        for r in out:
            if _key(r) == job:
                return r
        r = run(n, L, lr, seed, max_steps=max_steps)
        out.append(r)
        return r

    first, rest = seeds[0], list(seeds[1:])
    for L in layers:
        for n in nodes:
            tried = [get(n, L, lr, first) for lr in lrs]
            passed = sorted((r for r in tried if r["accuracy"] >= threshold), key=lambda r: r["steps"])
            for r in passed:
                if all(get(n, L, r["lr"], seed)["accuracy"] >= threshold for seed in rest):
                    break
    return out


def control_jobs(runs: Sequence[Mapping], layers: Sequence[int], n_nodes: Optional[int] = None,
                 lrs: Optional[Sequence[float]] = None, max_steps: Optional[int] = None,
                 threshold: float = 0.9) -> list[tuple]:
    """The controls' jobs for the depths ``layers``: ``k = L + 1`` hops at every learning rate, and the
    fastest passing seed-0 run at ``n_nodes`` again on random answers, for as many steps as it took.

    Examples
    --------
    >>> runs = [{"kind": "sweep", "n_nodes": 8, "n_layers": 1, "hops": 1, "lr": 0.01, "seed": 0, "max_steps": 9,
    ...          "steps": 500, "accuracy": 1.0}]
    >>> control_jobs(runs, [1], lrs=[0.01], max_steps=9)
    [('control', 8, 1, 2, 0.01, 0, 9), ('shuffled', 8, 1, 1, 0.01, 0, 500)]
    """
    n_nodes, lrs = n_nodes or HOP_SWEEP["control_nodes"], lrs or HOP_SWEEP["lrs"]
    max_steps = max_steps or HOP_SWEEP["max_steps"]
    jobs = []
    for L in layers:
        jobs += [("control", n_nodes, L, L + 1, lr, 0, max_steps) for lr in lrs]
        passed = [r for r in runs if (r["kind"], r["n_nodes"], r["n_layers"], r["seed"]) == ("sweep", n_nodes, L, 0)
                  and r["accuracy"] >= threshold]
        if passed:
            best = min(passed, key=lambda r: r["steps"])
            jobs.append(("shuffled", n_nodes, L, L, best["lr"], 0, best["steps"]))
    return jobs


# ------------------------------------------------------------------ reading the runs
def sweep_table(runs: Sequence[Mapping], threshold: float = 0.9, seeds: Optional[Sequence[int]] = HOP_SWEEP["seeds"],
                window: int = HOP_SWEEP["flat_window"]) -> dict:
    """Per ``(L, n)``: accuracies per learning rate, the passing learning rates (every seed of ``seeds``
    run, or with ``None`` those run, at least ``threshold``), the score (the best learning rate's lowest
    accuracy) and whether the first seed's best run ended flat (:func:`converged`).

    Examples
    --------
    >>> r = lambda lr, s, a: {"kind": "sweep", "n_nodes": 8, "n_layers": 2, "hops": 2, "lr": lr, "seed": s,
    ...                       "accuracy": a, "checks": [0, 5000], "check_loss": [2.0, 0.0], "check_accuracy": [0, a]}
    >>> row = sweep_table([r(1e-3, 0, 0.5), r(1e-2, 0, 0.99), r(1e-2, 1, 0.95)])[2, 8]
    >>> row["accuracy"], row["passing_lrs"], row["score"]
    ({0.001: [0.5], 0.01: [0.99, 0.95]}, [0.01], 0.95)
    """
    table: dict = {}
    for r in sorted((r for r in runs if r["kind"] == "sweep"), key=lambda r: (r["n_layers"], r["n_nodes"], r["lr"], r["seed"])):
        row = table.setdefault((r["n_layers"], r["n_nodes"]), {"accuracy": {}, "seeds": {}, "runs": []})
        row["accuracy"].setdefault(r["lr"], []).append(r["accuracy"])
        row["seeds"].setdefault(r["lr"], []).append(r["seed"])
        row["runs"].append(r)
    for row in table.values():
        row["passing_lrs"] = [lr for lr, acc in row["accuracy"].items() if min(acc) >= threshold
                              and (seeds is None or sorted(row["seeds"][lr]) == sorted(seeds))]
        row["passes"] = bool(row["passing_lrs"])
        row["score"] = max(min(a) for a in row["accuracy"].values())
        first = [r for r in row["runs"] if r["seed"] == min(r["seed"] for r in row["runs"])]
        best = max(first, key=lambda r: r["accuracy"])
        row["flat"] = row["passes"] or converged(best, window=window)
        del row["runs"]
    return table


def sweep_decision(runs: Sequence[Mapping], threshold: float = 0.9, nodes: Sequence[int] = HOP_SWEEP["nodes"],
                   seeds: Optional[Sequence[int]] = HOP_SWEEP["seeds"], window: int = HOP_SWEEP["flat_window"]) -> dict:
    """The ledger's rule, read off the sweep's runs.

    ``verdict`` is ``"holds"`` when every depth tried passes at every ``n`` tried for it and ``L = 2``
    was tried at every ``n`` in ``nodes``; ``"wrong as stated"`` when no depth ``L >= 2`` passes at any
    ``n``; else ``"holds when"``, with ``max_nodes`` (the largest ``n`` at or below which every depth
    tried passes; None if none) and ``max_layers`` (the deepest ``L`` that passes at every ``n`` it was
    tried at). ``not_shown`` lists the failing cells whose best run was still learning.

    Examples
    --------
    >>> r = lambda L, n, s, a: {"kind": "sweep", "n_nodes": n, "n_layers": L, "hops": L, "lr": 0.01, "seed": s,
    ...     "accuracy": a, "checks": [0, 20000], "check_loss": [2.0, 2.0], "check_accuracy": [0, a]}
    >>> runs = [r(L, n, s, 1.0) for L in (1, 2) for n in (8, 12, 16) for s in (0, 1)]
    >>> sweep_decision(runs)["verdict"]
    'holds'
    >>> d = sweep_decision([x for x in runs if (x["n_layers"], x["n_nodes"]) != (2, 16)] + [r(2, 16, 0, 0.06)])
    >>> d["verdict"], d["max_nodes"], d["not_shown"]
    ('holds when', 12, [])
    """
    table = sweep_table(runs, threshold, seeds, window)
    layers = sorted({L for L, _ in table})
    passes = {cell: row["passes"] for cell, row in table.items()}
    tried = {L: sorted(n for L2, n in table if L2 == L) for L in layers}
    all_pass = all(passes.values())
    max_nodes = None
    for n in sorted({n for _, n in table}):
        if all(passes[L, m] for (L, m) in table if m <= n):
            max_nodes = n
        else:
            break
    max_layers = max((L for L in layers if all(passes[L, n] for n in tried[L])), default=None)
    if all_pass and set(nodes) <= set(tried.get(2, [])):
        verdict = "holds"
    elif not any(p for (L, _), p in passes.items() if L >= 2):
        verdict = "wrong as stated"
    else:
        verdict = "holds when"
    not_shown = sorted(cell for cell, row in table.items() if not row["passes"] and not row["flat"])
    return {"verdict": verdict, "passes": passes, "max_nodes": max_nodes, "max_layers": max_layers,
            "not_shown": not_shown, "scores": {cell: row["score"] for cell, row in table.items()}}


def decision_by_threshold(runs: Sequence[Mapping], thresholds: Sequence[float], **kw: Any) -> list[dict]:
    """:func:`sweep_decision` at each pass line in ``thresholds``, with the seeds that were run (``seeds=None``).

    Examples
    --------
    >>> r = lambda n, s, a: {"kind": "sweep", "n_nodes": n, "n_layers": 2, "hops": 2, "lr": 0.01, "seed": s,
    ...     "accuracy": a, "checks": [0, 9], "check_loss": [2.0, 0.1], "check_accuracy": [0, a]}
    >>> runs = [r(n, s, 0.95 if n == 8 else 0.7) for n in (8, 12, 16) for s in (0, 1)]
    >>> [d["verdict"] for d in decision_by_threshold(runs, [0.6, 0.9])]
    ['holds', 'holds when']
    """
    return [sweep_decision(runs, threshold=t, seeds=None, **kw) for t in thresholds]


def _baselines(runs: Sequence[Mapping], eval_size: int) -> dict:
    """Answers that do not chain ``k`` lookups, on each ``(n, k)``'s held-out batch: the guess, the
    start node and the node one link short, :math:`f^{k-1}(q)`."""
    out = {}
    for n, k in sorted({(r["n_nodes"], r["hops"]) for r in runs}):
        b = baseline_accuracies(PointerChasingTask(n, k, "test")(eval_size, seed=HELD_OUT_SEED), n)
        out[f"{n},{k}"] = {"guess": b["guess"], "copy": b["copy"], "one_short": b["hop_j"][k - 1]}
    return out


# ------------------------------------------------------------------ the part of composition-run
def _next(config: CompositionConfig, runs: Runs) -> list[tuple]:
    if config.controls:
        return control_jobs(runs.records, config.layers, lrs=config.lrs)
    nodes = config.nodes or HOP_SWEEP["nodes"]
    search = lambda run: sweep_search(config.layers, nodes, config.lrs, runs=runs.records, run=run)  # noqa: E731
    return head_budget._first_missing(search, lambda n, L, lr, seed, max_steps: ("sweep", n, L, L, lr, seed, max_steps))


def _run(config: CompositionConfig, kind: str, n: int, L: int, k: int, lr: float, seed: int, max_steps: int) -> dict:
    return sweep_run(n, L, lr, seed, hops=k, max_steps=max_steps, random_answers=kind == "shuffled", kind=kind,
                     d_model=config.d_model, batch_size=config.batch_size, eval_batch=config.eval_batch)


def _document(config: CompositionConfig, runs: Runs, meta: dict) -> dict:
    settings = {**{k: (list(v) if isinstance(v, tuple) else v) for k, v in HOP_SWEEP.items()}, "d_k": HEAD_WIDTH,
                "d_model": config.d_model, "batch_size": config.batch_size, "eval_size": config.eval_batch}
    return head_budget._part_document(meta, settings, runs.records,
                                      baselines=_baselines(runs.records, config.eval_batch))


def _merge(doc: Mapping, previous: Mapping) -> dict:
    merged = merge_grid(doc, previous, key=_key)
    return {**merged, "baselines": {**previous.get("baselines", {}), **doc["baselines"]}}


#: ``composition-run --hops-sweep [--controls]``: the search or its controls, added to :data:`HOP_SWEEP_RUN`.
HOP_SWEEP_RUNS = Experiment("composition-run --hops-sweep", CompositionConfig(), _run, HOP_SWEEP_RUN,
                            next_jobs=_next, document=_document, resume=head_budget._resume_by(_key), merge=_merge, save_each=True,
                            description="")


def _select(config: CompositionConfig) -> list[Experiment]:
    return [HOP_SWEEP_RUNS] if config.hops_sweep else head_budget._part(config)


_FLAGS = {
    **head_budget._FLAGS,
    "--hops-sweep": dict(action="store_true", help="the hop sweep instead: L layers of 4 heads on k = L hops for "
                                                   "each depth in --layers, at n = 8, 12, 16 (or --nodes) and each "
                                                   "learning rate in --lrs, up to 20,000 steps, seeds 0 and 1 as the "
                                                   "ledger's search orders them; added to composition_hops.json "
                                                   "unless --out is given (parts may run side by side)"),
    "--controls": dict(action="store_true", help="with --hops-sweep: its controls for the depths in --layers "
                                                 "(k = L + 1 hops, and random answers), on 8 nodes"),
    "--lrs": dict(type=float, nargs="+", help="--hops-sweep: learning rates to sweep"),
}

#: ``python -m attention_course composition-run``: the k-hop run by default, the head budget's parts with
#: ``--matched``, the hop sweep with ``--hops-sweep``.
COMPOSITION_RUN = register(replace(head_budget.COMPOSITION_RUN, flags=_FLAGS, select=_select,
                                   parts=(*head_budget.COMPOSITION_RUN.parts, HOP_SWEEP_RUNS)))


def load_sweep(path=HOP_SWEEP_RUN) -> dict:
    """Read the stored sweep: ``{"schema_version": 1, "meta", "settings", "baselines", "runs": [...]}``."""
    return read_json(path, schema_version=1)
