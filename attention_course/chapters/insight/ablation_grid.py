"""The ablation grid of chapter 7: every ingredient of attention taken away, on recall and a copy, over seeds.

``python -m attention_course insight-run`` (:data:`INSIGHT_RUN`): part ``memory`` (:data:`MEMORY`,
``insight_memory.json``) and part ``ablations`` (:data:`ABLATIONS`, every variant of :data:`GRID` by
:func:`~attention_course.chapters.insight.ablations.tune_and_train`, ``insight_ablations.json``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Optional

import torch

from ...models.experiments import Experiment, Runs, read_json, register
from ...models.records import DATA_DIR
from .ablations import task_of, tune_and_train
from .memory import MEMORY_FILE, capacity_sweep
from .mixers import VARIANTS, Variant

__all__ = ["load_ablations"]

ABLATION_FILE = DATA_DIR / "insight_ablations.json"
RECALL, COPY = "recall (MQAR, 16 pairs)", "previous token"
WINDOWS = (4, 8, 16)
#: Variants also trained on the previous-token copy.
ON_COPY = ("softmax attention", "fixed mixing (learned T x T)", "gated long convolution", "window 4",
           "straight-through argmax", "argmax, no gradient", "sparsemax", "tied", "tied, self masked",
           "W_Q = W_K = I")


def _grid() -> list[tuple[str, str, dict]]:
    """(task label, variant label, Variant switches, task kwargs) for every configuration of the run."""
    jobs = []
    for name in VARIANTS:
        jobs.append((RECALL, name))
        if name in ON_COPY:
            jobs.append((COPY, name))
    for w in WINDOWS:
        if f"window {w}" not in VARIANTS:
            jobs.append((RECALL, f"window {w}"))
    for n in (4, 8):
        for name in ("softmax attention", "linear attention"):
            jobs.append((f"recall (MQAR, {n} pairs)", name))
    return jobs


#: (task label, variant label) of every configuration ``insight-run`` trains.
GRID = _grid()


def _variant(name: str) -> Variant:
    if name in VARIANTS:
        return VARIANTS[name]
    if name.startswith("window "):
        return Variant(window=int(name.split()[1]))
    raise KeyError(f"unknown variant {name!r}")


def run_job(task_label: str, variant_name: str, steps: int = 300, seeds=(0, 1, 2), lrs=(3e-3, 1e-2)) -> dict:
    """Train one configuration of :data:`GRID` (one thread) and return its record."""
    torch.set_num_threads(1)
    start = time.perf_counter()
    r = tune_and_train(_variant(variant_name), task_of(task_label), seeds=seeds, lrs=lrs, steps=steps)
    return {"task": task_label, "variant": variant_name, "steps": steps, **r,
            "seconds": round(time.perf_counter() - start, 1)}


def load_ablations(path=ABLATION_FILE) -> dict:
    """The stored ablation grid: ``{"meta", "runs": [record of run_job, ...]}``."""
    return read_json(path)


@dataclass(frozen=True)
class InsightConfig:
    """The configuration of ``insight-run``: which part, the ablations' steps, seeds, workers and variants
    (``only``: these variants of :data:`GRID`; None: all)."""

    part: str = "all"
    steps: int = 300
    seeds: tuple = (0, 1, 2)
    jobs: int = 2
    only: Optional[tuple] = None


def _meta(config: InsightConfig, runs: Runs, meta: dict) -> dict:
    return {k: meta[k] for k in ("machine", "command", "arguments", "wall_seconds")}


#: ``insight-run --part memory``: the capacity sweep (seconds).
MEMORY = Experiment("insight-run", InsightConfig(), lambda config: capacity_sweep(seeds=tuple(config.seeds)),
                    MEMORY_FILE, out_flag="--memory-out", description="",
                    document=lambda config, runs, meta: {"meta": _meta(config, runs, meta), **runs.records[0]})


def _ablation(config: InsightConfig, task_label: str, variant_name: str) -> dict:
    return run_job(task_label, variant_name, config.steps, tuple(config.seeds))


#: ``insight-run --part ablations``: :data:`GRID` (or ``only`` its variants) on ``jobs`` workers.
ABLATIONS = Experiment("insight-run", InsightConfig(), _ablation, ABLATION_FILE, description="",
                       grid=lambda c: [g for g in GRID if c.only is None or g[1] in c.only],
                       document=lambda config, runs, meta: {"meta": _meta(config, runs, meta), "runs": runs.records})

#: ``python -m attention_course insight-run``: the memory capacity and the ablation grid.
INSIGHT_RUN = register(replace(
    ABLATIONS, parts=(MEMORY,), select=lambda c: [p for p in (MEMORY, ABLATIONS) if c.part in ("memory" if p is MEMORY else "ablations", "all")],
    flags={"--part": dict(choices=("memory", "ablations", "all"), help="which part to run"),
           "--steps": dict(type=int, help="AdamW steps per model"),
           "--seeds": dict(type=int, nargs="+", help="seeds"),
           "--jobs": dict(type=int, help="worker processes (one thread each)"),
           "--only": dict(nargs="*", help="variant names to run (default: the whole grid)")},
    help="chapter 7's long runs: memory capacity, and attention's ingredients taken away",
    description="Measure retrieval against the number of stored patterns for softmax and outer-product memories "
                "(d = 16, 32, 64), and train every ablation of attention (fixed mixing, convolution, windows, hard "
                "selection, tied and identity metrics, linear attention) on recall and a previous-token copy over "
                "seeds; write attention_course/data/insight_memory.json and insight_ablations.json (about a minute on "
                "two cores, half an hour on a busy one)."))
