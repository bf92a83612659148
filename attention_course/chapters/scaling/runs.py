r"""The one runner of chapter 6's training experiments: a grid of runs, a progress bar, JSON files.

Every experiment of the chapter trains the tiny
:class:`~attention_course.models.tiny.TinyTransformer` on the induction task
``"repeated_sequences"`` with :func:`~attention_course.models.training.train` (AdamW, one
thread), once per width ``d_k``, variant and seed, and measures each model on the held-out
batch (seed 12345). An :class:`Experiment` says which grid, with what settings, what one run
is (``run_one``, which returns a record) and how the records are stacked and stored
(``result``). Its fields carry the chapter's defaults (:math:`d_{model} = 32`, 2 layers, one
head, learning rate :math:`10^{-2}`, batch 32, held-out batch 256); each stored run is a
configuration that overrides a few of them, as nanoGPT's ``config/train_shakespeare_char.py``
overrides ``train.py``'s defaults:

* ``scaling-run``: ``SCALE_RUN`` in :mod:`~attention_course.chapters.scaling.training`
  (each score scale; ``scaling_training.json``);
* ``scaling-causes``: ``CAUSES`` in :mod:`~attention_course.chapters.scaling.init_vs_step`
  (:math:`W_Q` started or stepped smaller; ``scale_causes.json``);
* ``scaling-saturation``: ``SATURATION`` in :mod:`~attention_course.chapters.scaling.saturation_training`
  (saturated rows through training; ``scale_saturation.json`` and ``scale_sweep.json``);
* ``scaling-backward``: ``BACKWARD`` in :mod:`~attention_course.chapters.scaling.backward_swap`
  (the softmax's backward swapped; ``scale_backward.json``).

:func:`run_experiment` trains the grid, in ``jobs`` processes (each run is deterministic and
single-threaded, so ``jobs`` changes only the wall time); :func:`save_result` writes a result
and the machine it ran on as JSON and :func:`load_result` reads it back. Each configuration is
also its command (:meth:`Experiment.add_arguments`, :meth:`Experiment.cli`), which shows a
progress bar on stderr.
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import os
import sys
import time
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from ...models.records import machine_info

try:  # a progress bar for the command line, if tqdm happens to be installed
    from tqdm import tqdm
except ImportError:  # pragma: no cover - depends on the environment
    tqdm = None

__all__ = ["TASK", "HELD_OUT_SEED", "Experiment", "run_experiment", "significant", "save_result",
           "load_result", "progress_bar"]

#: The task every run of chapter 6 trains on.
TASK = "repeated_sequences"
#: Seed of the held-out batch every run is measured on, as in ``evaluate_loss`` and ``head_scores``.
HELD_OUT_SEED = 12345

Job = tuple  # (d_k, variant, seed): one run of the grid
Progress = Callable[[Sequence[Job]], Iterable[Job]]

#: Command-line flags an :class:`Experiment` may offer: flag -> (its field, argparse keywords).
FLAGS = {
    "--seeds": ("seeds", dict(type=int, nargs="+", help="seeds: each (d_k, variant) is trained once per seed")),
    "--d-k": ("d_ks", dict(type=int, nargs="+", dest="d_k", help="per-head widths d_k")),
    "--variants": ("variants", dict(nargs="+", metavar="VARIANT", help="which variants to train")),
    "--scales": ("variants", dict(nargs="+", metavar="SCALE", help="score scales: sqrt, none, mup")),
    "--steps": ("steps", dict(type=int, help="AdamW steps per model")),
    "--n-heads": ("n_heads", dict(type=int, help="heads per layer")),
    "--lr": ("lr", dict(type=float, help="learning rate")),
    "--every": ("every", dict(type=int, help="average the curves over blocks of this many steps")),
    "--jobs": ("jobs", dict(type=int, help="processes in parallel (each uses one thread)")),
    "--motion-every": ("motion_every", dict(
        type=int, help="also track the unscaled model's scores every N steps (score_motion); 0: skip")),
}


@dataclass(frozen=True)
class Experiment:
    r"""One grid of training runs: what one run is, which runs, their settings, where they are stored.

    Attributes
    ----------
    command : str
        Its command, ``python -m attention_course <command>``.
    run_one : callable
        ``run_one(d_k, *definitions[variant], seed=..., steps=..., lr=..., d_model=...,
        n_heads=..., n_layers=..., batch_size=..., eval_batch=...)`` trains one model and
        returns a frozen dataclass (its record).
    result : type
        The result: ``result.from_runs(experiment, runs)`` builds it from the records' fields
        stacked on the grid, each (D, V, S, ...) for ``D = len(d_ks)`` widths, ``V`` variants
        and ``S`` seeds; its ``ROUNDING`` says how :func:`save_result` rounds its fields.
    definitions : mapping
        Variant name -> the arguments of ``run_one`` after ``d_k``.
    variants, d_ks, seeds : tuple
        The grid.
    out : Path
        The JSON file the command writes by default.
    flags : tuple of str
        The command-line flags the command offers (of :data:`FLAGS`), besides ``--out``.
    steps, lr, d_model, n_heads, n_layers, batch_size, eval_batch
        Passed to ``run_one``: training steps, learning rate, model sizes, batch sizes.
    jobs : int
        Processes in parallel.
    every : int, optional
        If set, curves are averaged over blocks of ``every`` steps (``SCALE_RUN``).
    motion_every : int
        If positive, ``BACKWARD`` also tracks the unscaled model's scores every so many steps.
    """

    command: str
    run_one: Callable[..., Any]
    result: type
    definitions: Mapping[Any, tuple]
    variants: tuple
    out: Path
    flags: tuple = ("--seeds", "--steps")
    d_ks: tuple = (64,)
    seeds: tuple = (0, 1, 2, 3, 4)
    steps: int = 200
    lr: float = 1e-2
    d_model: int = 32
    n_heads: int = 1
    n_layers: int = 2
    batch_size: int = 32
    eval_batch: int = 256
    jobs: int = 1
    every: Optional[int] = None
    motion_every: int = 0

    def training(self) -> dict:
        """The keyword arguments of ``run_one`` besides the seed."""
        return dict(steps=self.steps, lr=self.lr, n_heads=self.n_heads, d_model=self.d_model,
                    n_layers=self.n_layers, batch_size=self.batch_size, eval_batch=self.eval_batch)

    def settings(self, **extra: Any) -> dict:
        """What a stored result records to be rerun: :meth:`training`, ``extra``, the task and the optimiser."""
        return {**self.training(), **extra, "task": TASK, "optimizer": "AdamW"}

    # -------------------------------------------------------------- command line
    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """The command's arguments: ``--out`` and :attr:`flags`, with this experiment's defaults."""
        parser.add_argument("--out", default=str(self.out), help="JSON file to write (default: the shipped run)")
        for flag in self.flags:
            name, kwargs = FLAGS[flag]
            default = getattr(self, name)
            default = list(default) if isinstance(default, tuple) else default
            kwargs = {**kwargs, "help": f"{kwargs['help']} (default: {default})"}
            if name == "variants":
                kwargs.update(choices=list(self.definitions), help=f"{kwargs['help']}; of {list(self.definitions)}")
            parser.add_argument(flag, default=default, **kwargs)

    def cli(self, args: argparse.Namespace, parser: Optional[argparse.ArgumentParser] = None) -> int:
        """Run the experiment with the command line's overrides and write it, with the machine, as JSON."""
        arguments = {k: v for k, v in vars(args).items() if k not in ("command", "run", "parser")}
        overrides = {}
        for flag in self.flags:
            name, kwargs = FLAGS[flag]
            value = getattr(args, kwargs.get("dest", flag[2:].replace("-", "_")))  # argparse's dest
            overrides[name] = tuple(value) if isinstance(value, list) else value
        wall, cpu = time.perf_counter(), _cpu_seconds()
        result = run_experiment(replace(self, **overrides), progress=progress_bar(self.command))
        meta = {"machine": machine_info(threads=1), "command": f"python -m attention_course {self.command}",
                "arguments": arguments, "wall_seconds": round(time.perf_counter() - wall, 1),
                "cpu_seconds": round(_cpu_seconds() - cpu, 1)}
        save_result(result, args.out, meta)
        return 0


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished workers."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _run_one(experiment: Experiment, d_k: int, variant: Any, seed: int) -> Any:
    return experiment.run_one(d_k, *experiment.definitions[variant], seed=seed, **experiment.training())


def run_experiment(experiment: Experiment, progress: Optional[Progress] = None) -> Any:
    """Train every ``(d_k, variant, seed)`` of ``experiment`` and stack the records into its result.

    Parameters
    ----------
    experiment : Experiment
    progress : callable, optional
        Wraps the list of runs ``(d_k, variant, seed)`` (d_k-major, then variant, then seed) and
        yields each as it starts, e.g. :func:`progress_bar`; nothing is printed without it.

    Returns
    -------
    ``experiment.result.from_runs(experiment, runs)``, with ``runs`` each record field stacked
    as (D, V, S, ...).

    Examples
    --------
    >>> from attention_course.chapters.scaling.init_vs_step import CAUSES
    >>> from dataclasses import replace
    >>> r = run_experiment(replace(CAUSES, variants=("scaled", "unscaled"), seeds=(0,), steps=2, d_ks=(8,), eval_batch=8))
    >>> r.variants, r.loss.shape
    (('scaled', 'unscaled'), (2, 1, 2))
    """
    e = experiment
    if not (e.d_ks and e.variants and e.seeds):
        raise ValueError(f"d_ks={list(e.d_ks)}, variants={list(e.variants)} and seeds={list(e.seeds)}; "
                         f"expected at least one of each")
    unknown = [v for v in e.variants if v not in e.definitions]
    if unknown:
        raise ValueError(f"unknown variants {unknown}; expected some of {list(e.definitions)}")
    grid = list(itertools.product(e.d_ks, e.variants, e.seeds))  # (d_k, variant, seed), d_k-major
    started = progress(grid) if progress is not None else grid
    if e.jobs > 1:  # fresh processes: a fork of one whose torch has started its OpenMP threads can hang
        with ProcessPoolExecutor(max_workers=int(e.jobs), mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(_run_one, e, *job) for job in grid]
            records = [future.result() for _, future in zip(started, futures)]  # in grid order
    else:
        records = [_run_one(e, *job) for job in started]
    grid_shape = (len(e.d_ks), len(e.variants), len(e.seeds))
    runs = {}
    for f in fields(records[0]):
        stacked = np.array([getattr(r, f.name) for r in records])  # (D * V * S, ...)
        runs[f.name] = stacked.reshape(*grid_shape, *stacked.shape[1:])  # (D, V, S, ...): the field on the grid
    return e.result.from_runs(e, runs)


def progress_bar(desc: str) -> Progress:
    """A ``progress`` for :func:`run_experiment`: a tqdm bar on stderr, or one line per run without tqdm.

    Examples
    --------
    >>> list(progress_bar("demo")([(8, "scaled", 0)]))
    [(8, 'scaled', 0)]
    """
    def lines(grid: Sequence[Job]) -> Iterator[Job]:
        for d_k, variant, seed in grid:
            print(f"{desc}: d_k={d_k}, {variant}, seed {seed}", file=sys.stderr, flush=True)
            yield d_k, variant, seed

    def bar(grid: Sequence[Job]) -> Iterator[Job]:
        with tqdm(grid, desc=desc, unit="run", file=sys.stderr) as runs:
            for d_k, variant, seed in runs:
                runs.set_postfix_str(f"d_k={d_k}, {variant}, seed {seed}")
                yield d_k, variant, seed

    return lines if tqdm is None else bar


# ------------------------------------------------------------------ JSON
def significant(digits: int) -> Callable[[np.ndarray], np.ndarray]:
    """Rounding to ``digits`` significant digits, for a compact JSON: integers stay, NaN becomes null.

    Examples
    --------
    >>> significant(4)(np.array([3.14159, np.nan, 1234567.0])).tolist()
    [3.142, None, 1235000.0]
    """
    def rounded(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        if np.issubdtype(x.dtype, np.integer) or not x.size:
            return x
        return np.vectorize(lambda v: None if np.isnan(v) else float(f"{v:.{digits}g}"), otypes=[object])(x)

    return rounded


def _plain(value: Any, rounding: Optional[Callable] = None) -> Any:
    """``value`` as JSON: arrays as (rounded) lists, tuples as lists, dicts entry by entry."""
    if isinstance(value, np.ndarray):
        return (rounding(value) if rounding else value).tolist()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return list(value)
    return value


def _encode(result: Any) -> dict:
    rounding = getattr(type(result), "ROUNDING", {})
    return {f.name: _plain(getattr(result, f.name), rounding.get(f.name)) for f in fields(result)}


def save_result(result: Any, path: Union[str, Path], meta: Optional[dict] = None) -> None:
    """Write a result (or a list of them, e.g. one per seed) and ``meta`` (machine, timings) as JSON.

    The file is ``{"schema_version": 1, "meta": meta, "result": ...}`` (``"runs": [...]`` for a
    list); each field is rounded as the result's class says in its ``ROUNDING``.
    """
    key, body = ("runs", [_encode(r) for r in result]) if isinstance(result, list) else ("result", _encode(result))
    with open(path, "w") as fh:
        json.dump({"schema_version": 1, "meta": meta or {}, key: body}, fh)
        fh.write("\n")


def _array(value: list) -> np.ndarray:
    a = np.array(value)
    return a.astype(float) if a.dtype == object else a  # null (a NaN when stored) back to NaN


def load_result(path: Union[str, Path], kind: type) -> tuple[Any, dict]:
    """Read what :func:`save_result` wrote: ``(result, meta)``, the result of class ``kind``.

    Each field is rebuilt from ``kind``'s type hints: arrays, tuples of names, dicts (of arrays
    when hinted ``dict[str, np.ndarray]``).

    Examples
    --------
    >>> from attention_course.chapters.scaling.init_vs_step import STORED_CAUSES, CauseGrid
    >>> r, meta = load_result(STORED_CAUSES, CauseGrid)
    >>> r.loss.shape, "machine" in meta
    ((5, 5, 200), True)
    """
    with open(path) as fh:
        doc = json.load(fh)
    if doc.get("schema_version") != 1:
        raise ValueError(f"{path}: schema_version={doc.get('schema_version')!r}; expected 1")
    hints = typing.get_type_hints(kind)

    def decode(name: str, value: Any) -> Any:
        hint = hints[name]
        if hint is tuple:
            return tuple(value)
        if hint is dict:
            return value
        if typing.get_origin(hint) is dict:
            return {k: np.array(v, dtype=float) for k, v in value.items()}
        return _array(value)

    build = lambda d: kind(**{k: decode(k, v) for k, v in d.items()})  # noqa: E731
    return ([build(r) for r in doc["runs"]] if "runs" in doc else build(doc["result"])), doc["meta"]
