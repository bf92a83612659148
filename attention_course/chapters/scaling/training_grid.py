r"""Chapter 6's grid of training runs: every width :math:`d_k`, variant and seed, the records stacked.

Every experiment trains the tiny transformer on :data:`TASK` with the defaults :data:`CHAPTER_6` and
measures it on the held-out batch (:data:`HELD_OUT_SEED`). A :class:`ScalingGrid` configures the course's
runner (:mod:`attention_course.models.experiments`); the stored configurations are the commands
``scaling-run`` (``training``), ``scaling-causes`` (``init_vs_step``), ``scaling-saturation``
(``saturation_training``) and ``scaling-backward`` (``backward_swap``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Optional

import numpy as np

from ...models.experiments import Experiment, Runs, Training, register, result_document, run

__all__ = ["TASK", "HELD_OUT_SEED"]

#: The task every run of chapter 6 trains on.
TASK = "repeated_sequences"
#: Seed of the held-out batch every run is measured on, as in ``evaluate_loss`` and ``head_scores``.
HELD_OUT_SEED = 12345
#: Chapter 6's training keywords: what a run function uses for those it is not given.
CHAPTER_6 = Training(steps=200, lr=1e-2, n_heads=1)


@dataclass(frozen=True)
class ScalingGrid(Training):
    """A grid of chapter 6's training runs, with the chapter's training defaults (:data:`CHAPTER_6`).

    Attributes
    ----------
    train : callable
        ``train(d_k, *definitions[variant], seed=..., **training)`` returns one frozen record.
    result : type
        ``result.from_runs(config, runs)`` builds the result from the records stacked as (D, V, S, ...).
    definitions : mapping
        Variant name -> the arguments of ``train`` after ``d_k``.
    variants, d_ks, seeds : tuple
    jobs : int
    every : int, optional
        Average curves over blocks of ``every`` steps (``SCALE_RUN``).
    motion_every : int
        If positive, ``BACKWARD`` also tracks the unscaled model's scores.
    """

    steps: int = CHAPTER_6.steps
    lr: float = CHAPTER_6.lr
    n_heads: int = CHAPTER_6.n_heads
    train: Optional[Callable[..., Any]] = None
    result: Optional[type] = None
    definitions: Mapping[Any, tuple] = field(default_factory=dict)
    variants: tuple = ()
    d_ks: tuple = (64,)
    seeds: tuple = (0, 1, 2, 3, 4)
    jobs: int = 1
    every: Optional[int] = None
    motion_every: int = 0

    def settings(self, **extra: Any) -> dict:
        """What a stored result records to be rerun: the training keywords, ``extra``, the task and the optimiser."""
        return {**self.training(), **extra, "task": TASK, "optimizer": "AdamW"}


def _jobs(config: ScalingGrid) -> list[tuple]:
    return list(itertools.product(config.d_ks, config.variants, config.seeds))  # (d_k, variant, seed), d_k-major


def _train(config: ScalingGrid, d_k: int, variant: Any, seed: int) -> Any:
    """One run of the grid: ``config.train`` with the variant's definition and the training keywords."""
    return config.train(d_k, *config.definitions[variant], seed=seed, **config.training())


def _problem(config: ScalingGrid) -> Optional[str]:
    if not (config.d_ks and config.variants and config.seeds):
        return (f"d_ks={list(config.d_ks)}, variants={list(config.variants)} and seeds={list(config.seeds)}; "
                f"expected at least one of each")
    unknown = [v for v in config.variants if v not in config.definitions]
    if unknown:
        return f"unknown variants {unknown}; expected some of {list(config.definitions)}"
    return None


def _stacked(config: ScalingGrid, records: Sequence[Any]) -> dict[str, np.ndarray]:
    """Each record field stacked on the grid: (D, V, S, ...)."""
    grid_shape = (len(config.d_ks), len(config.variants), len(config.seeds))
    runs = {}
    for f in fields(records[0]):
        stacked = np.array([getattr(r, f.name) for r in records])  # (D * V * S, ...)
        runs[f.name] = stacked.reshape(*grid_shape, *stacked.shape[1:])  # (D, V, S, ...)
    return runs


def _experiment(name: str, config: ScalingGrid, out: Optional[Path] = None, **kwargs: Any) -> Experiment:
    return Experiment(name, config, _train, out, grid=_jobs, check=_problem, indent=None,
                      document=lambda c, runs, meta: result_document(_result(c, runs), meta), **kwargs)


def _result(config: ScalingGrid, runs: Runs) -> Any:
    return config.result.from_runs(config, _stacked(config, runs.records))


def run_grid(config: ScalingGrid, show: bool = False) -> Any:
    """Train every ``(d_k, variant, seed)`` of ``config`` (d_k-major) and stack the records into its result.

    ``config.jobs`` processes change only the wall time; ``show`` draws a progress bar on stderr.

    Examples
    --------
    >>> from attention_course.chapters.scaling.init_vs_step import CAUSES
    >>> from dataclasses import replace
    >>> r = run_grid(replace(CAUSES.config, variants=("scaled", "unscaled"), seeds=(0,), steps=2, d_ks=(8,),
    ...                      eval_batch=8))
    >>> r.variants, r.loss.shape
    (('scaled', 'unscaled'), (2, 1, 2))
    """
    problem = _problem(config)
    if problem:
        raise ValueError(problem)
    return _result(config, run(_experiment("scaling", config, description=""), show=show))


def grid_experiment(name: str, config: ScalingGrid, out: Path, description: str, help: str,
                    flags: Sequence[str], also: tuple = ()) -> Experiment:
    """Register the command ``name``: ``config`` run by :func:`run_grid`, stored at ``out``, offering ``flags``."""
    offered = {
        "--seeds": dict(type=int, nargs="+", help="seeds: each (d_k, variant) is trained once per seed"),
        "--d-k": dict(type=int, nargs="+", dest="d_k", field="d_ks", help="per-head widths d_k"),
        "--variants": dict(nargs="+", metavar="VARIANT", choices=list(config.definitions),
                           help=f"which variants to train, of {list(config.definitions)}"),
        "--scales": dict(nargs="+", metavar="SCALE", field="variants", choices=list(config.definitions),
                         help="score scales: sqrt, none, mup"),
        "--steps": dict(type=int, help="AdamW steps per model"),
        "--n-heads": dict(type=int, help="heads per layer"),
        "--lr": dict(type=float, help="learning rate"),
        "--every": dict(type=int, help="average the curves over blocks of this many steps"),
        "--jobs": dict(type=int, help="processes in parallel (each uses one thread)"),
        "--motion-every": dict(type=int, help="also track the unscaled model's scores every N steps "
                                              "(score_motion); 0: skip"),
    }
    return register(_experiment(name, config, out, description=description, help=help,
                                flags={f: offered[f] for f in flags}, also=also))
