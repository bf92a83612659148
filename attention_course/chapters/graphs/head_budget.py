r"""Chapter 5's head budget: do two layers compose with fewer heads than one layer needs?

One layer of ``H`` heads against two of ``H / 2``, every head of width ``d_k`` (so both have the
same :math:`4\, d_{model}\, h\, d_k` attention weights per layer), on 2-hop pointer chasing. These
are the parts of ``python -m attention_course composition-run --matched`` (:data:`COMPOSITION_RUN`):
the matched run (:data:`MATCHED`), the head grid (``--grid``, :data:`HEAD_GRID`) and the long grid
(``--grid --long``, :data:`LONG_HEAD_GRID`, one ``n`` a part, merged on save by :func:`merge_grid`),
and the follow-ups (``--follow-up [--second]``); :func:`grid_decision` and
:func:`follow_up_decision` apply the ledger's rules.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Optional

import numpy as np
import torch

from ...models.experiments import Experiment, Runs, read_json, register
from ...models.pointer_chasing import PointerChasingTask
from ...models.records import DATA_DIR
from ...models.tiny import ModelConfig, TinyTransformer
from ...models.training import evaluate_loss, train
from .composition import HELD_OUT_SEED, K_HOPS, CompositionConfig, accuracy

__all__ = [
    "LONG_GRID_RUN", "LONG_GRID", "FOLLOW_UP_RUN", "SECOND_FOLLOW_UP_RUN", "converged", "grid_table",
    "grid_decision", "follow_up_decision", "load_grid",
]

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
#: Its design, as pre-registered: nodes, total heads, most steps, and the window a failure must be flat over.
LONG_GRID = {"nodes": (8, 12, 16), "heads": (4, 8, 16, 32), "max_steps": 10_000, "flat_window": 2_000}
#: The follow-up of the long grid (``composition-run --matched --follow-up``), shipped with the package.
FOLLOW_UP_RUN = DATA_DIR / "composition_follow_up.json"
#: Its runs, as pre-registered in the ledger: (n_nodes, n_layers, heads per layer, seed, most steps).
FOLLOW_UP = ((16, 2, 2, 0, 150_000), (16, 2, 2, 1, 150_000), (16, 1, 4, 0, 150_000),
             (12, 1, 4, 0, 30_000), (8, 1, 4, 0, 30_000))
#: The second follow-up (``--follow-up --second``): one layer of 4 heads on 12 and 8 nodes, up to 100,000 steps.
SECOND_FOLLOW_UP_RUN = DATA_DIR / "composition_follow_up_2.json"
SECOND_FOLLOW_UP = ((12, 1, 4, 0, 100_000), (8, 1, 4, 0, 100_000))
#: The width of every head in the matched runs.
HEAD_WIDTH = 16


class _Stop(Exception):
    """Raised by :func:`run_matched`'s callback to end training early."""


def run_matched(n_nodes: int, n_layers: int, n_heads: int, seed: int, max_steps: int = 3000, d_k: int = HEAD_WIDTH,
                hops: int = 2, check_every: int = 250, check_size: int = 500, stop_at: float = 0.99,
                train_task: Optional[Callable[[PointerChasingTask], Any]] = None, **training: Any) -> dict:
    r"""Train ``n_layers`` x ``n_heads`` heads of width ``d_k`` on ``k = hops`` until held-out accuracy hits ``stop_at``.

    Every ``check_every`` steps the held-out accuracy and loss on ``check_size`` sequences (seed
    ``HELD_OUT_SEED + 1``) are recorded; the final scores use ``eval_batch`` sequences of seed
    ``HELD_OUT_SEED``. ``train_task`` optionally wraps the training task. ``training`` holds
    ``lr``, ``d_model``, ``batch_size``, ``eval_batch`` (defaults from
    :class:`~attention_course.chapters.graphs.composition.CompositionConfig`).

    Returns a dict with ``n_nodes, n_layers, n_heads, seed, hops, steps, parameters, accuracy,
    held_out_loss, checks, check_accuracy, check_loss, seconds``.

    Examples
    --------
    >>> r = run_matched(8, 1, 2, seed=0, max_steps=4, d_k=4, d_model=8, check_every=2, check_size=50,
    ...                 eval_batch=50)
    >>> r["steps"], r["checks"], 0.0 <= r["accuracy"] <= 1.0
    (4, [0, 2, 4], True)
    """
    t = replace(CompositionConfig(), **training)
    start = time.perf_counter()
    task = PointerChasingTask(n_nodes, hops, "train")
    held_out = PointerChasingTask(n_nodes, hops, "test")
    config = ModelConfig(vocab_size=task.vocab_size, max_len=task.seq_len, d_model=t.d_model,
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
        train(model, task if train_task is None else train_task(task), steps=max_steps, seed=seed, lr=t.lr,
              batch_size=t.batch_size, callback=check)
    except _Stop:
        pass
    model.eval()
    return {"n_nodes": n_nodes, "n_layers": n_layers, "n_heads": n_heads, "seed": seed, "hops": hops,
            "steps": record["checks"][-1], "parameters": sum(p.numel() for p in model.parameters()),
            "accuracy": round(accuracy(model, held_out, t.eval_batch), 4),
            "held_out_loss": round(evaluate_loss(model, held_out, batch_size=t.eval_batch), 4),
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


# ------------------------------------------------------------------ the head grid
def grid_order(n_layers: int, heads: Sequence[int] = GRID_HEADS) -> list[int]:
    """The order :func:`grid_search` tries total head counts: one layer from the most down, two layers from the fewest up.

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
                run=None, **settings: Any) -> list[dict]:
    """The pre-registered search for the fewest heads, at each ``n`` and depth, over :func:`run_matched`.

    The first seed walks :func:`grid_order` (one layer stops after its first failure, two layers
    after their first pass); later seeds repeat only what the first seed passed. Runs already in
    ``runs`` are reused. ``run(n, L, h, seed, **settings)`` defaults to :func:`run_matched`.

    Examples
    --------
    >>> fake = lambda n, L, h, seed, **kw: {"n_nodes": n, "n_layers": L, "n_heads": h, "seed": seed,
    ...                                     "accuracy": 1.0 if L * h >= (8 if L == 1 else 4) else 0.5}
    >>> out = grid_search([6], seeds=(0, 1), run=fake)
    >>> [(r["n_layers"], r["n_layers"] * r["n_heads"], r["seed"]) for r in out]
    [(1, 16, 0), (1, 8, 0), (1, 4, 0), (2, 4, 0), (1, 16, 1), (1, 8, 1), (2, 4, 1)]
    """
    run = run_matched if run is None else run
    out = [dict(r) for r in runs]

    def get(n: int, L: int, H: int, seed: int) -> dict:
        for r in out:
            if _same(r, n, L, H, seed):
                return r
        r = run(n, L, H // L, seed, **settings)
        out.append(r)
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
    """Per ``(n, L, H)``: accuracies over seeds, whether every seed passes ``threshold``, and :func:`converged`.

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

    ``h1[n]``, ``h2[n]``: :func:`fewest_heads` for one and two layers (``None``: more than any tried).
    ``composition`` is ``"holds"`` when ``h2`` is the same at every ``n`` and ``h1 > h2`` there, the
    one-layer failures at ``h2[n]`` heads or fewer flat (:func:`converged` over ``window``);
    ``"reach only"`` when one layer does as well as two at some ``n``, or ``h2`` grows with ``n`` on
    flat two-layer failures; else ``"undecided"``.

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


def follow_up_decision(runs: Sequence[Mapping], threshold: float = 0.9) -> dict:
    """The ledger's rule for the follow-up: ``"holds"`` when the two-layer runs pass on every seed and every
    one-layer run fails flat over its last third; ``"reach only"`` when a one-layer run passes; else ``"undecided"``.

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


def load_grid(path=GRID_RUN) -> dict:
    """Read the head grid (or another matched run): ``{"schema_version": 1, "meta", "settings", "runs": [...]}``."""
    return read_json(path, schema_version=1)


def _key(r: Mapping) -> tuple:
    return r["n_nodes"], r["n_layers"], r["n_heads"], r["seed"]


def merge_grid(doc: Mapping, previous: Mapping, key: Callable[[Mapping], tuple] = _key) -> dict:
    """A grid part's document merged into the file's ``previous`` one: runs already there (same ``key``) are
    kept, new ones added; each part's machine and arguments go once into ``meta["parts"]``.

    Examples
    --------
    >>> r = lambda n, s: {"n_nodes": n, "n_layers": 1, "n_heads": 4, "seed": s}
    >>> first = {"meta": {"command": "c", "parts": [{"arguments": "a"}]}, "settings": {}, "runs": [r(8, 0)]}
    >>> doc = merge_grid({"meta": {"command": "c", "parts": [{"arguments": "b"}]}, "settings": {},
    ...                   "runs": [r(8, 0), r(12, 0)]}, first)
    >>> [x["n_nodes"] for x in doc["runs"]], len(doc["meta"]["parts"])
    ([8, 12], 2)
    """
    have = [dict(r) for r in previous["runs"]]
    keys = {key(r) for r in have}
    have += [dict(r) for r in doc["runs"] if key(r) not in keys]
    parts = list(previous["meta"].get("parts", []))
    parts += [p for p in doc["meta"]["parts"] if p not in parts]
    return {"schema_version": 1, "meta": {**doc["meta"], "parts": parts}, "settings": dict(doc["settings"]),
            "runs": have}


# ------------------------------------------------------------------ the parts of composition-run --matched
def _matched_settings(config: CompositionConfig) -> dict:
    return {"lr": config.lr, "d_model": config.d_model, "batch_size": config.batch_size, "eval_batch": config.eval_batch}


def _matched_run(config: CompositionConfig, n: int, L: int, h: int, seed: int, max_steps: Optional[int] = None) -> dict:
    return run_matched(n, L, h, seed, max_steps=max_steps or config.max_steps, **_matched_settings(config))


def _matched_jobs(config: CompositionConfig) -> list[tuple]:
    return ([(n, L, h, s) for (n, L, h) in MATCHED_GRID for s in config.seeds]
            + [(n, L, h, config.seeds[0]) for (n, L, h) in MATCHED_EXTRA])


def _matched_cost(config: CompositionConfig, job: tuple) -> float:
    n, L, h = job[:3]
    return n ** 2 * L * h * (job[4] if len(job) > 4 else config.max_steps)  # the largest first


def _settings(config: CompositionConfig) -> dict:
    return {"max_steps": config.max_steps, "eval_size": config.eval_batch, "d_k": HEAD_WIDTH,
            "d_model": config.d_model, "lr": config.lr, "batch_size": config.batch_size}


def _matched_document(config: CompositionConfig, runs: Runs, meta: dict) -> dict:
    meta = {**{k: meta[k] for k in ("machine", "command", "arguments", "wall_seconds")},
            "run_seconds": round(sum(r["seconds"] for r in runs.records), 1)}
    return {"schema_version": 1, "meta": meta, "settings": _settings(config), "runs": runs.records}


def _follow_ups(config: CompositionConfig) -> tuple:
    return SECOND_FOLLOW_UP if config.second else FOLLOW_UP


def _follow_up_document(config: CompositionConfig, runs: Runs, meta: dict) -> dict:
    meta = {k: meta[k] for k in ("machine", "command", "arguments", "wall_seconds")}
    return {"schema_version": 1, "meta": meta, "settings": {"configs": [list(c) for c in _follow_ups(config)]},
            "runs": runs.records}


def _design(config: CompositionConfig) -> dict:
    return LONG_GRID if config.long else {"nodes": GRID_NODES, "heads": GRID_HEADS, "max_steps": config.max_steps,
                                          "flat_window": 1000}


class _Missing(Exception):
    """A run the search asks for that is not run yet."""


def _first_missing(search: Callable[[Callable[..., dict]], Any], job: Callable[..., tuple]) -> list[tuple]:
    """The first run ``search(run)`` asks for that is not run yet, as ``[job(*its arguments)]`` (none: all are run)."""
    def missing(*args: Any, **kw: Any) -> dict:
        raise _Missing(job(*args, **kw))

    try:
        search(missing)
    except _Missing as m:
        return [m.args[0]]
    return []


def _grid_next(config: CompositionConfig, runs: Runs) -> list[tuple]:
    design = _design(config)
    return _first_missing(lambda run: grid_search(config.nodes or design["nodes"], config.seeds,
                                                  layers=config.grid_layers, heads=design["heads"],
                                                  runs=runs.records, run=run),
                          lambda n, L, h, seed, **kw: (n, L, h, seed))


def _grid_run(config: CompositionConfig, n: int, L: int, h: int, seed: int) -> dict:
    return run_matched(n, L, h, seed, max_steps=_design(config)["max_steps"], **_matched_settings(config))


def _grid_document(config: CompositionConfig, runs: Runs, meta: dict) -> dict:
    design = _design(config)
    settings = {**_settings(config), "max_steps": design["max_steps"], "threshold": 0.9,
                "heads": list(design["heads"]), "flat_window": design["flat_window"]}
    return _part_document(meta, settings, runs.records)


def _part_document(meta: dict, settings: dict, runs: list, **more: Any) -> dict:
    """One part of a grid stored in parts: its machine and arguments are ``meta["parts"]``' one part (the
    parts are merged on save by :func:`merge_grid`); ``more`` goes between the settings and the runs."""
    part = {"machine": meta["machine"], "arguments": meta["arguments"]}
    return {"schema_version": 1, "meta": {"command": meta["command"], "parts": [part]}, "settings": settings,
            **more, "runs": runs}


def _resume_by(key: Callable[[Mapping], tuple]) -> Callable[[Mapping, CompositionConfig], list]:
    """A grid's ``resume``: the stored runs, each under its job ``key``."""
    return lambda previous, config: [(key(r), r) for r in previous["runs"]]


_MATCHED_PARTS = dict(cost=_matched_cost, save_each=True)  # the largest first; a run cut short keeps what it finished
#: ``composition-run --matched``: :data:`MATCHED_GRID` over seeds (and :data:`MATCHED_EXTRA` on the first).
MATCHED = Experiment("composition-run --matched", K_HOPS.config, _matched_run, MATCHED_RUN, grid=_matched_jobs,
                     document=_matched_document, description="", **_MATCHED_PARTS)
#: ``composition-run --matched --grid``: the pre-registered head grid, one ``n`` a call (each under 15 minutes).
HEAD_GRID = Experiment("composition-run --matched --grid", K_HOPS.config, _grid_run, GRID_RUN,
                       next_jobs=_grid_next, document=_grid_document, resume=_resume_by(_key), merge=merge_grid,
                       save_each=True, description="")
#: ``composition-run --matched --grid --long``: the long grid (:data:`LONG_GRID`).
LONG_HEAD_GRID = replace(HEAD_GRID, name="composition-run --matched --grid --long", out=LONG_GRID_RUN)
#: ``composition-run --matched --follow-up``: :data:`FOLLOW_UP` (about 40 minutes on two workers).
FOLLOW_UP_RUNS = Experiment("composition-run --matched --follow-up", K_HOPS.config, _matched_run, FOLLOW_UP_RUN,
                            grid=lambda c: list(_follow_ups(c)), document=_follow_up_document, description="",
                            **_MATCHED_PARTS)
#: ``composition-run --matched --follow-up --second``: :data:`SECOND_FOLLOW_UP` (about 10 minutes on two workers).
SECOND_FOLLOW_UP_RUNS = replace(FOLLOW_UP_RUNS, name="composition-run --matched --follow-up --second",
                                out=SECOND_FOLLOW_UP_RUN)


def _part(config: CompositionConfig) -> list[Experiment]:
    if not config.matched:
        return [K_HOPS]
    if config.follow_up:
        return [SECOND_FOLLOW_UP_RUNS if config.second else FOLLOW_UP_RUNS]
    if config.grid:
        return [LONG_HEAD_GRID if config.long else HEAD_GRID]
    return [MATCHED]


_FLAGS = {
    "--hops": dict(type=int, nargs="+", help="numbers of hops k"),
    "--layers": dict(type=int, nargs="+", help="depths L"),
    "--seeds": dict(type=int, nargs="+", help="seeds (model and batches)"),
    "--steps": dict(type=int, nargs="+", field="hop_steps",
                    help="AdamW steps: one number for every k, or one per k in --hops"),
    "--jobs": dict(type=int, help="worker processes (one thread each)"),
    "--every": dict(type=int, help="average the training curves over this many steps"),
    "--eval-size": dict(type=int, field="eval_batch", help="held-out sequences per model"),
    "--matched": dict(action="store_true", help="the matched run instead: 1 layer x h heads against 2 layers x h/2 "
                                                "(MATCHED_GRID), written to composition_matched.json unless --out "
                                                "is given"),
    "--max-steps": dict(type=int, help="--matched: most AdamW steps per run"),
    "--grid": dict(action="store_true", help="with --matched: the head grid (GRID_NODES x GRID_HEADS, grid_search), "
                                             "added to composition_grid.json unless --out is given; runs already "
                                             "there are kept"),
    "--long": dict(action="store_true", help="with --matched --grid: the long grid instead (LONG_GRID: n = 8, 12, "
                                             "16; 4-32 heads; up to 10,000 steps), added to composition_grid_long.json "
                                             "unless --out is given; parts may run at the same time (one n each): "
                                             "every save merges with the file"),
    "--follow-up": dict(action="store_true", help="with --matched: the long grid's follow-up instead (FOLLOW_UP: 2 x 2 "
                                                  "heads on 16 nodes up to 150,000 steps against 1 x 4, and 1 x 4 on 8 "
                                                  "and 12 nodes up to 30,000), written to composition_follow_up.json "
                                                  "unless --out is given (about 40 minutes on two workers)"),
    "--second": dict(action="store_true", help="with --matched --follow-up: the second follow-up (SECOND_FOLLOW_UP: "
                                               "one layer of 4 heads on 12 and 8 nodes up to 100,000 steps), written to "
                                               "composition_follow_up_2.json unless --out is given (about 10 minutes "
                                               "on two workers)"),
    "--nodes": dict(type=int, nargs="+", help="--grid: numbers of nodes n to search (default: all of the grid's; "
                                              "run in parts: one n per call)"),
    "--grid-layers": dict(type=int, nargs="+", help="--grid: depths to search (1, 2 or both; a part can take one "
                                                    "depth)"),
    "--n-nodes": dict(type=int, help="nodes n of the k-hop run"),
    "--d-model": dict(type=int, help="model width d_model"),
    "--n-heads": dict(type=int, help="heads per layer of the k-hop run"),
    "--lr": dict(type=float, help="learning rate"),
    "--batch-size": dict(type=int, help="training batch"),
}

#: ``python -m attention_course composition-run``: the k-hop run by default, the head budget's parts with ``--matched``.
COMPOSITION_RUN = register(replace(K_HOPS, flags=_FLAGS, select=_part,
                                   parts=(MATCHED, HEAD_GRID, LONG_HEAD_GRID, FOLLOW_UP_RUNS, SECOND_FOLLOW_UP_RUNS)))
