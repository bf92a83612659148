r"""The one runner of the course's long experiments; every long run is a configuration of it.

Each long run is an :class:`Experiment`: a command name, a frozen configuration whose defaults
are the stored run's, a ``run_one`` function, a grid of variants and the JSON document it stores
in ``attention_course/data/``. :func:`run` runs the grid (in ``jobs`` processes; runs are
deterministic, so ``jobs`` changes only the wall time). Chapters :func:`register` their
experiments; ``__main__`` builds the command line from :data:`EXPERIMENTS`:

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Doubling(Training):
...     seeds: tuple = (0, 1)
>>> def double(config, seed):
...     return {"seed": seed, "value": 2 * seed + config.steps}
>>> demo = Experiment("demo-run", Doubling(steps=10), double, out=None,
...                   description="Doubles each seed (under a second).",
...                   grid=lambda c: [(s,) for s in c.seeds],
...                   document=lambda c, runs, meta: {"runs": runs.records})
>>> run(demo).records
[{'seed': 0, 'value': 10}, {'seed': 1, 'value': 12}]
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import json
import multiprocessing
import os
import sys
import time
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np
import torch

from .records import machine_info

try:  # the progress bar of a long command: tqdm, which comes with transformers
    from tqdm import tqdm
except ImportError:  # pragma: no cover - depends on the environment
    tqdm = None

__all__ = ["Training", "Experiment", "Runs", "EXPERIMENTS", "register", "run", "execute", "progress_bar", "keep_other_models",
           "write_json", "read_json", "significant", "result_document", "load_result"]

Job = tuple  # the arguments of ``run_one`` after the configuration: one variant of the grid


# ------------------------------------------------------------------ the shared training keywords
@dataclass(frozen=True)
class Training:
    """The keywords of one training run of a tiny transformer, declared once for every experiment.

    A chapter's configuration subclasses it and overrides what it changes.

    Attributes
    ----------
    steps : int
        AdamW updates per model.
    lr : float
    n_heads, d_model, n_layers : int
    batch_size : int
    eval_batch : int
        Held-out batch the trained model is measured on.

    Examples
    --------
    >>> t = Training(steps=200, lr=1e-2)
    >>> t.training()
    {'steps': 200, 'lr': 0.01, 'n_heads': 4, 'd_model': 32, 'n_layers': 2, 'batch_size': 32, 'eval_batch': 256}
    >>> Training(steps=0)
    Traceback (most recent call last):
    ...
    ValueError: steps=0; expected a positive integer
    """

    steps: int = 1000
    lr: float = 3e-3
    n_heads: int = 4
    d_model: int = 32
    n_layers: int = 2
    batch_size: int = 32
    eval_batch: int = 256

    def __post_init__(self) -> None:
        if int(self.steps) != self.steps or self.steps < 1:
            raise ValueError(f"steps={self.steps!r}; expected a positive integer")

    def training(self) -> dict:
        """The training keywords alone, as a run function takes them."""
        return {f.name: getattr(self, f.name) for f in fields(Training)}


# ------------------------------------------------------------------ an experiment
@dataclass
class Runs:
    """What :func:`run` returns: the jobs run and their records, in the grid's order, and each one's time.

    ``seconds`` and ``cpu_seconds`` are measured around each ``run_one`` call in the process that ran it.
    """

    jobs: list = field(default_factory=list)
    records: list = field(default_factory=list)
    seconds: list = field(default_factory=list)
    cpu_seconds: list = field(default_factory=list)

    def add(self, job: Job, record: Any, seconds: float = 0.0, cpu_seconds: float = 0.0) -> None:
        self.jobs.append(job)
        self.records.append(record)
        self.seconds.append(seconds)
        self.cpu_seconds.append(cpu_seconds)

    def copy(self) -> "Runs":
        return Runs(list(self.jobs), list(self.records), list(self.seconds), list(self.cpu_seconds))


def _one_job(config: Any) -> list[Job]:
    return [()]


def _records(config: Any, runs: Runs, meta: dict) -> dict:
    return {"meta": meta, "runs": runs.records}


@dataclass(frozen=True)
class Experiment:
    """A long run: a configuration of :func:`run`, a command, and the JSON file it stores.

    Attributes
    ----------
    name : str
        Its command, ``python -m attention_course <name>``.
    config : dataclass instance
        The stored run's settings; the command line overrides its fields (:attr:`flags`).
    run_one : callable
        ``run_one(config, *job)`` runs one variant and returns its record (module-level, for workers).
    out : Path or None
        The JSON file it writes by default (None: only when the out flag names one).
    description : str
        The command's ``--help``: what it computes and how long it takes.
    help : str
        One line, for the list of commands.
    grid : callable
        ``grid(config)`` lists the jobs in the order they are stored (default: one job, ``()``).
    next_jobs : callable, optional
        For a search whose next run depends on the results so far: ``next_jobs(config, runs)``
        returns the next jobs (none: the search is over); it replaces :attr:`grid`.
    document : callable
        ``document(config, runs, meta)`` is the stored document; ``meta`` holds the machine, the
        command, its arguments and the wall and CPU seconds so far.
    flags : mapping
        Flag -> argparse keywords; ``"field"`` names the configuration field it sets (default:
        the flag's name, e.g. ``--eval-size`` sets ``eval_size``), whose value is its default.
    out_flag : str
        The flag that overrides :attr:`out`.
    parts : tuple of Experiment
        One per stored file of a command with several; they share its configuration and flags.
    select : callable, optional
        ``select(config)`` returns what a configuration runs: this experiment or some of its parts.
    also : tuple of Path
        Other stored files this command wrote, with other flags (each is checked against what it writes).
    check : callable, optional
        ``check(config)`` returns what is wrong with a configuration (a usage error), or None.
    cost : callable, optional
        ``cost(config, job)``: with several workers, the costliest jobs start first.
    merge : callable, optional
        ``merge(document, previous)``: what to keep of an existing file (under a lock).
    resume : callable, optional
        ``resume(previous, config)``: the ``(job, record)`` pairs of the existing file a search reuses.
    save_each : bool
        Write the document after every finished run.
    indent : int or None
        The JSON's indent: 1, or None (one line, for long curves).
    threads : int or None
        torch threads while a run runs (restored afterwards); None leaves them alone.
    report : callable, optional
        ``report(document)``: a summary the command prints after storing it.
    """

    name: str
    config: Any
    run_one: Callable[..., Any]
    out: Optional[Path]
    description: str
    help: str = ""
    grid: Callable[[Any], Sequence[Job]] = _one_job
    next_jobs: Optional[Callable[[Any, Runs], Sequence[Job]]] = None
    document: Callable[[Any, Runs, dict], dict] = _records
    flags: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    out_flag: str = "--out"
    parts: tuple = ()
    select: Optional[Callable[[Any], Sequence["Experiment"]]] = None
    also: tuple = ()
    check: Optional[Callable[[Any], Optional[str]]] = None
    cost: Optional[Callable[[Any, Job], float]] = None
    merge: Optional[Callable[[dict, dict], dict]] = None
    resume: Optional[Callable[[dict, Any], list]] = None
    save_each: bool = False
    indent: Optional[int] = 1
    threads: Optional[int] = 1
    report: Optional[Callable[[dict], str]] = None

    def experiments(self) -> list["Experiment"]:
        """This experiment and its parts: every one a configuration of its command may run."""
        return [self, *self.parts]

    # -------------------------------------------------------------- command line
    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """The command's arguments: every flag with this configuration's default, the out flag(s), ``--quiet``."""
        outs = {}
        for e in self.experiments():
            outs.setdefault(e.out_flag, []).append(e)
        for flag, owners in outs.items():
            named = [e.out.name for e in owners if e.out is not None]
            parser.add_argument(flag, type=Path, default=None,
                                help="JSON file to write (default: " + (" or ".join(dict.fromkeys(named)) or "none")
                                + (", in attention_course/data/)" if named else ")"))
        for flag, spec in self.flags.items():
            kwargs = {k: v for k, v in spec.items() if k != "field"}
            default = getattr(self.config, _field(flag, spec))
            default = list(default) if isinstance(default, tuple) else default
            if kwargs.get("action") != "store_true":
                kwargs["default"] = default
                kwargs["help"] = f"{kwargs.get('help', '')} (default: {default})".strip()
            parser.add_argument(flag, **kwargs)
        parser.add_argument("--quiet", action="store_true", help="no progress bar")

    def configure(self, args: argparse.Namespace) -> Any:
        """The configuration with the command line's values."""
        if not self.flags:
            return self.config
        values = {}
        for flag, spec in self.flags.items():
            value = getattr(args, spec.get("dest", flag[2:].replace("-", "_")))
            values[_field(flag, spec)] = tuple(value) if isinstance(value, list) else value
        return replace(self.config, **values)

    def cli(self, args: argparse.Namespace, parser: Optional[argparse.ArgumentParser] = None) -> int:
        """Run the configuration the command line gives and store it (each part in its file); the exit code."""
        config = self.configure(args)
        problem = self.check(config) if self.check is not None else None
        if problem:
            if parser is None:
                raise ValueError(problem)
            parser.error(problem)  # exit code 2, with the usage
        arguments = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()
                     if k not in ("command", "run", "parser")}
        for part in (self.select(config) if self.select is not None else [self]):
            out = getattr(args, part.out_flag[2:].replace("-", "_"), None) or part.out
            doc = execute(part, config, out, arguments, show=not getattr(args, "quiet", False))
            if part.report is not None:
                print(part.report(doc))
            if out is not None:
                print(f"stored {out}")
        return 0


def _field(flag: str, spec: Mapping[str, Any]) -> str:
    return spec.get("field", flag[2:].replace("-", "_"))


#: Every registered experiment, by command, in the order the chapters register them.
EXPERIMENTS: dict[str, Experiment] = {}


def register(experiment: Experiment) -> Experiment:
    """Add ``experiment`` to :data:`EXPERIMENTS` (its command) and return it; a second one of the same name is an error."""
    old = EXPERIMENTS.get(experiment.name)
    if old is not None and old.run_one.__module__ != experiment.run_one.__module__:  # (a module reloaded: the same)
        raise ValueError(f"two experiments are named {experiment.name!r}: in {old.run_one.__module__} "
                         f"and {experiment.run_one.__module__}")
    EXPERIMENTS[experiment.name] = experiment
    return experiment


# ------------------------------------------------------------------ running
#: Whether the experiment running now shows its progress (a bar inside a run, ``show=None``, follows it).
_SHOWING = contextvars.ContextVar("showing", default=False)


@contextlib.contextmanager
def _torch_threads(n: Optional[int]) -> Iterator[None]:
    before = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _timed(run_one: Callable[..., Any], config: Any, job: Job, threads: Optional[int]) -> tuple[Any, float, float]:
    """``run_one(config, *job)``, its wall and CPU seconds; on ``threads`` torch threads."""
    wall, cpu = time.perf_counter(), time.process_time()
    with _torch_threads(threads):
        record = run_one(config, *job)
    return record, time.perf_counter() - wall, time.process_time() - cpu


def _label(job: Job) -> str:
    """A job as the progress bar shows it (a tuple inside it by its length)."""
    return ", ".join(f"{len(x)} values" if isinstance(x, (tuple, list)) else str(x) for x in job)


def run(experiment: Experiment, config: Any = None, show: bool = False,
        save: Optional[Callable[[Runs], None]] = None, done: Optional[Runs] = None) -> Runs:
    """Run every job of ``experiment`` (its configuration, or ``config``) and return the :class:`Runs`.

    With ``config.jobs`` above one, in fresh worker processes (costliest first); records come back
    in the grid's order. ``save(runs)`` is called after each run; ``done`` holds runs a search reuses.

    Examples
    --------
    >>> e = Experiment("demo", Training(), lambda c, x: x * x, out=None, description="Squares (instant).",
    ...                grid=lambda c: [(1,), (2,), (3,)])
    >>> r = run(e)
    >>> r.jobs, r.records
    ([(1,), (2,), (3,)], [1, 4, 9])
    """
    e = experiment
    config = e.config if config is None else config
    runs = Runs() if done is None else done.copy()
    showing = _SHOWING.set(show)
    try:
        return _run(e, config, show, save, runs)
    finally:
        _SHOWING.reset(showing)


def _run(e: Experiment, config: Any, show: bool, save: Optional[Callable[[Runs], None]], runs: Runs) -> Runs:
    def searched() -> Iterator[Job]:  # a search: each next run depends on what the runs so far found
        while todo := [j for j in e.next_jobs(config, runs) if j not in runs.jobs]:
            yield todo[0]

    jobs = None if e.next_jobs is not None else list(e.grid(config))
    workers = 1 if jobs is None else min(int(getattr(config, "jobs", 1) or 1), len(jobs))
    if workers <= 1:
        todo, total = (searched(), None) if jobs is None else (jobs, len(jobs))
        for job in progress_bar(todo, e.name, total=total, show=show, label=_label):
            runs.add(job, *_timed(e.run_one, config, job, e.threads))
            if save is not None:
                save(runs)
        return runs
    order = sorted(range(len(jobs)), key=lambda i: -e.cost(config, jobs[i])) if e.cost else range(len(jobs))
    finished: dict[int, tuple] = {}

    def in_order() -> Runs:
        out = runs.copy()
        for i in sorted(finished):
            out.add(jobs[i], *finished[i])
        return out

    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(_timed, e.run_one, config, jobs[i], e.threads): i for i in order}
        for future in progress_bar(as_completed(futures), e.name, total=len(jobs), show=show,
                                   label=lambda f: _label(jobs[futures[f]])):
            finished[futures[future]] = future.result()
            if save is not None:
                save(in_order())
    return in_order()


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished workers."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def execute(experiment: Experiment, config: Any = None, out: Optional[Union[str, Path]] = None,
            arguments: Optional[dict] = None, show: bool = True) -> dict:
    """Run ``experiment`` and store its document at ``out`` (None: not stored); return the document.

    ``meta`` (see :attr:`Experiment.document`) records the machine, the command, ``arguments``
    and the wall and CPU seconds. With :attr:`Experiment.merge` an existing file is merged with,
    under a lock; with :attr:`Experiment.resume` its runs are reused.
    """
    e = experiment
    config = e.config if config is None else config
    out = None if out is None else Path(out)
    start, cpu = time.perf_counter(), _cpu_seconds()
    meta = {"machine": machine_info(threads=e.threads), "command": f"python -m attention_course {e.name}",
            "arguments": dict(arguments or {})}

    def timed() -> dict:
        return {**meta, "wall_seconds": round(time.perf_counter() - start, 1),
                "cpu_seconds": round(_cpu_seconds() - cpu, 1)}

    done = None
    if e.resume is not None and out is not None and out.exists():
        done = Runs()
        for job, record in e.resume(read_json(out), config):
            done.add(job, record)

    def store(runs: Runs) -> dict:
        doc = e.document(config, runs, timed())
        if out is not None:
            _store(e, doc, out)
        return doc

    runs = run(e, config, show=show, save=store if e.save_each and out is not None else None, done=done)
    return store(runs)


def _store(e: Experiment, doc: dict, out: Path) -> None:
    if out.suffix == ".npz":  # arrays (a reference model's states), not JSON
        np.savez_compressed(out, **doc)
        return
    if e.merge is None:
        write_json(doc, out, indent=e.indent)
        return
    with _locked(out):
        write_json(e.merge(doc, read_json(out)) if out.exists() else doc, out, indent=e.indent)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path.lock`` (POSIX; elsewhere parts that merge must run one after another)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover
        fcntl = None
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        if fcntl is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


# ------------------------------------------------------------------ progress
def progress_bar(items: Iterable, desc: str, total: Optional[int] = None, show: Optional[bool] = True,
                 label: Optional[Callable[[Any], str]] = None) -> Iterator:
    """Iterate ``items`` with a progress bar on stderr: tqdm's if it is installed, else one line per item.

    ``show=None`` shows it when the running experiment does; ``label(item)`` describes the item.

    Examples
    --------
    >>> list(progress_bar(range(3), "demo", show=False))
    [0, 1, 2]
    """
    if show is None:
        show = _SHOWING.get()
    if not show:
        yield from items
        return
    if tqdm is None:  # pragma: no cover - tqdm comes with transformers
        for i, item in enumerate(items, 1):
            what = f" ({label(item)})" if label is not None else ""
            print(f"{desc}: {i}/{total if total is not None else '?'}{what}", file=sys.stderr, flush=True)
            yield item
        return
    with tqdm(items, desc=desc, total=total, unit="run", file=sys.stderr) as bar:
        for item in bar:
            if label is not None:
                bar.set_postfix_str(label(item), refresh=False)
            yield item


# ------------------------------------------------------------------ JSON

def keep_other_models(doc: dict, previous: dict) -> dict:
    """An :class:`Experiment`'s ``merge`` for runs over several models: the models not run this time
    keep their stored records, if the stored file has the same ``config`` (else the new document alone).

    >>> keep_other_models({"config": 1, "models": {"a": 2}}, {"config": 1, "models": {"a": 0, "b": 3}})
    {'config': 1, 'models': {'a': 2, 'b': 3}}
    >>> keep_other_models({"config": 1, "models": {"a": 2}}, {"config": 2, "models": {"b": 3}})
    {'config': 1, 'models': {'a': 2}}
    """
    if previous.get("config") != doc["config"]:
        return doc
    return {**doc, "models": {**previous.get("models", {}), **doc["models"]}}

def write_json(doc: Any, path: Union[str, Path], indent: Optional[int] = 1) -> Any:
    """Store ``doc`` as the data files are stored (``indent`` 1, or one line with None; a final newline); return it."""
    text = json.dumps(doc, indent=indent) if indent is not None else json.dumps(doc)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(text + "\n")
    return doc


def read_json(path: Union[str, Path], schema_version: Optional[int] = None) -> Any:
    """Read a stored file; with ``schema_version``, check the document's ``"schema_version"`` is it.

    Examples
    --------
    >>> import tempfile
    >>> f = Path(tempfile.mkdtemp()) / "doc.json"
    >>> _ = write_json({"schema_version": 2}, f)
    >>> read_json(f, schema_version=1)
    Traceback (most recent call last):
    ...
    ValueError: .../doc.json: schema_version=2; expected 1
    """
    with open(path) as fh:
        doc = json.load(fh)
    if schema_version is not None and doc.get("schema_version") != schema_version:
        raise ValueError(f"{path}: schema_version={doc.get('schema_version')!r}; expected {schema_version}")
    return doc


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
    if isinstance(value, np.generic):
        return value.item()
    return value


def _encode(result: Any) -> dict:
    rounding = getattr(type(result), "ROUNDING", {})
    return {f.name: _plain(getattr(result, f.name), rounding.get(f.name)) for f in fields(result)}


def result_document(result: Any, meta: Optional[dict] = None) -> dict:
    """The stored document of a result dataclass (or of a list of them, e.g. one per seed).

    ``{"schema_version": 1, "meta": meta, "result": ...}`` (``"runs": [...]`` for a list); each
    field is rounded as the result's class says in its ``ROUNDING``. :func:`load_result` reads it.
    """
    key, body = ("runs", [_encode(r) for r in result]) if isinstance(result, list) else ("result", _encode(result))
    return {"schema_version": 1, "meta": meta or {}, key: body}


def _array(value: list) -> np.ndarray:
    a = np.array(value)
    return a.astype(float) if a.dtype == object else a  # null (a NaN when stored) back to NaN


def load_result(path: Union[str, Path], kind: type) -> tuple[Any, dict]:
    """Read what :func:`result_document` stored: ``(result, meta)``, the result of class ``kind``.

    Each field is rebuilt from ``kind``'s type hints: arrays, tuples of names, dicts (of arrays
    when hinted ``dict[str, np.ndarray]``).
    """
    doc = read_json(path, schema_version=1)
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
