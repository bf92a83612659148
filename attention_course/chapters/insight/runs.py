"""``python -m attention_course insight-run``: chapter 7's long runs, stored as JSON.

Two parts. ``memory``: :func:`~attention_course.chapters.insight.memory.capacity_sweep` over
d = 16, 32, 64 and three seeds, written to ``attention_course/data/insight_memory.json``
(12 s measured on a quiet 2-core machine). ``ablations``: every variant of :data:`GRID` trained by
:func:`~attention_course.chapters.insight.ablations.tune_and_train` (learning rate picked on
seed 0 from 3e-3 and 1e-2, then seeds 0-2 at it, 300 AdamW steps, batch 32, d_model 64), written to
``attention_course/data/insight_ablations.json`` (58 s with two workers of one thread on a quiet
2-core machine; 38 minutes on one shared with other work).
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Optional

import torch

from ...models.records import DATA_DIR, machine_info, progress_bar, write_json
from .ablations import TASKS, RecallTask, tune_and_train
from .memory import capacity_sweep
from .mixers import VARIANTS, Variant

__all__ = ["GRID", "MEMORY_FILE", "ABLATION_FILE", "load_memory", "load_ablations", "run_job", "add_arguments", "cli"]

MEMORY_FILE = DATA_DIR / "insight_memory.json"
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


def _task(label: str) -> RecallTask:
    if label in TASKS:
        return TASKS[label]
    n = int(label.split("(MQAR, ")[1].split()[0])
    return RecallTask("stacked_mqar", {"n_pairs": n})


def run_job(task_label: str, variant_name: str, steps: int = 300, seeds=(0, 1, 2), lrs=(3e-3, 1e-2)) -> dict:
    """Train one configuration of :data:`GRID` (one thread) and return its record."""
    torch.set_num_threads(1)
    start = time.perf_counter()
    r = tune_and_train(_variant(variant_name), _task(task_label), seeds=seeds, lrs=lrs, steps=steps)
    return {"task": task_label, "variant": variant_name, "steps": steps, **r,
            "seconds": round(time.perf_counter() - start, 1)}


def load_memory(path=MEMORY_FILE) -> dict:
    """The stored :func:`~attention_course.chapters.insight.memory.capacity_sweep` (three seeds)."""
    with open(path) as fh:
        return json.load(fh)


def load_ablations(path=ABLATION_FILE) -> dict:
    """The stored ablation grid: ``{"meta", "runs": [record of run_job, ...]}``."""
    with open(path) as fh:
        return json.load(fh)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    p.add_argument("--part", choices=("memory", "ablations", "all"), default="all")
    p.add_argument("--steps", type=int, default=300, help="AdamW steps per model")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--jobs", type=int, default=2, help="worker processes (one thread each)")
    p.add_argument("--only", nargs="*", default=None, help="variant names to run (default: the whole grid)")
    p.add_argument("--memory-out", default=str(MEMORY_FILE))
    p.add_argument("--out", default=str(ABLATION_FILE))
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def cli(args: argparse.Namespace, parser: Optional[argparse.ArgumentParser] = None) -> int:
    """Run the chosen parts and write their JSON."""
    meta = {"machine": machine_info(threads=1), "command": "python -m attention_course insight-run",
            "arguments": {k: v for k, v in vars(args).items() if k not in ("command", "run", "parser")}}
    if args.part in ("memory", "all"):
        start = time.perf_counter()
        doc = capacity_sweep(seeds=tuple(args.seeds))
        write_json({"meta": {**meta, "wall_seconds": round(time.perf_counter() - start, 1)}, **doc}, args.memory_out)
    if args.part in ("ablations", "all"):
        grid = [g for g in GRID if args.only is None or g[1] in args.only]
        start, runs = time.perf_counter(), []
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            futures = [pool.submit(run_job, t, v, args.steps, tuple(args.seeds)) for t, v in grid]
            for f in progress_bar(as_completed(futures), "insight-run", len(futures), not args.quiet):
                runs.append(f.result())
        order = {g: i for i, g in enumerate(grid)}
        runs.sort(key=lambda r: order[(r["task"], r["variant"])])
        write_json({"meta": {**meta, "wall_seconds": round(time.perf_counter() - start, 1)}, "runs": runs}, args.out)
    return 0
