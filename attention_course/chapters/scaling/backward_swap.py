r"""The backward-swap test of chapter 6: is the vanishing softmax gradient what stops training?

The unscaled model's forward pass is kept (its rows still saturate); only the backward pass
through each softmax is swapped, with :func:`~attention_course.chapters.scaling.saturated_rows.swapped_softmax`,
for the gradient a softmax at the scaled model's temperature would pass back
(:math:`\tau = 1/\sqrt{d_k}` on the scores :math:`q\cdot k`), or for only its row norm
("size") or only its direction ("direction"). The reverse swap gives the scaled model the
unscaled softmax's backward (:math:`\tau = \sqrt{d_k}`). If the vanishing gradient is the cause,
the tempered backward must rescue the unscaled model and the reverse swap must break the
scaled one. :data:`VARIANTS` lists the runs; the stored run is

    python -m attention_course scaling-backward --out attention_course/data/scale_backward.json

and :func:`load_backward` reads it back.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import itertools
import json
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional, Union

import numpy as np
import torch

from ...core.attention import resolve_scale
from .saturated_rows import BACKWARDS, swapped_softmax
from ...models import tiny
from ...models.tasks import make_task
from ...models.tiny import qk_logits
from ...models.records import machine_info
from .init_vs_step import HELD_OUT_SEED, TASK, build_variant, run_steps
from .saturation_training import FIRST_ROW, THRESHOLD, row_gradients
from ...models.records import DATA_DIR

__all__ = ["VARIANTS", "swapped_backward", "train_swapped", "score_motion", "BackwardGrid", "run_backward", "with_motion", "save_backward",
           "load_backward", "add_arguments", "cli"]

#: name -> (forward scale, W_Q init factor, W_Q lr factor, backward kind, backward scale).
#: The backward softmax is that of scores times ``backward scale`` (``"sqrt"``: 1/sqrt(d_k)).
VARIANTS = {
    "scaled": ("sqrt", 1, 1, "true", "sqrt"),
    "scaled, unscaled backward": ("sqrt", 1, 1, "tempered", "none"),
    "unscaled": ("none", 1, 1, "true", "none"),
    "unscaled, tempered backward": ("none", 1, 1, "tempered", "sqrt"),
    "unscaled, size only": ("none", 1, 1, "size", "sqrt"),
    "unscaled, direction only": ("none", 1, 1, "direction", "sqrt"),
    "small W_Q init": ("none", "sqrt", 1, "true", "none"),
    "small W_Q init, tempered backward": ("none", "sqrt", 1, "tempered", "sqrt"),
    "small W_Q init, size only": ("none", "sqrt", 1, "size", "sqrt"),
    "small W_Q init, direction only": ("none", "sqrt", 1, "direction", "sqrt"),
    "small W_Q lr": ("none", 1, "sqrt", "true", "none"),
    "small W_Q lr, tempered backward": ("none", 1, "sqrt", "tempered", "sqrt"),
}

#: The run of chapter 6, shipped with the package.
STORED_BACKWARD = DATA_DIR / "scale_backward.json"


@contextlib.contextmanager
def swapped_backward(tau: float, backward: str) -> Iterator[None]:
    r"""Within the block, the tiny transformer's softmaxes pass back ``backward`` at ``tau``.

    Replaces the attention function that :func:`~attention_course.models.tiny.attention_block`
    calls by one whose weights come from :func:`~attention_course.chapters.scaling.saturated_rows.swapped_softmax`
    (same forward numbers, causal mask); restores it on leaving, also after an error.

    Examples
    --------
    >>> model, _ = build_variant(8, "none", d_model=8)
    >>> tokens = torch.zeros(1, 5, dtype=torch.long)
    >>> with swapped_backward(1.0, "true"):
    ...     swapped = model(tokens)[0]
    >>> bool(torch.allclose(swapped, model(tokens)[0], atol=1e-6))
    True
    """
    if backward not in BACKWARDS:
        raise ValueError(f"backward={backward!r}; expected one of {BACKWARDS}")
    original = tiny.scaled_dot_product_attention

    def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Optional[torch.Tensor] = None,
               scale: Optional[float] = None) -> tuple[torch.Tensor, torch.Tensor]:
        s = (q @ k.transpose(-2, -1)) * scale  # $c\,qk^\top$   (B, h, T, T)
        weights = swapped_softmax(s, mask, tau=tau, backward=backward)  # (B, h, T, T), over the keys
        return weights @ v, weights  # (B, h, T, d_k), (B, h, T, T)

    tiny.scaled_dot_product_attention = attend
    try:
        yield
    finally:
        tiny.scaled_dot_product_attention = original


def train_swapped(d_k: int, variant: str, steps: int = 1000, seed: int = 0, lr: float = 1e-2,
                  eval_batch: int = 256) -> tuple[float, np.ndarray, float]:
    r"""Train one variant of :data:`VARIANTS` with its backward swapped; measure it unswapped.

    The model and loop are :func:`~attention_course.chapters.scaling.init_vs_step.build_variant`
    and :func:`~attention_course.chapters.scaling.init_vs_step.run_steps` (AdamW, batch 32, one
    thread); the backward softmax has :math:`\tau = c_{\text{backward}}/c_{\text{forward}}`.
    A "true" backward runs the package's attention unpatched.

    Returns
    -------
    eval_loss : float
        Held-out loss after training (the forward pass is never swapped).
    saturated : np.ndarray, shape (L,)
        Share of each layer's rows with largest weight above 0.99 on the held-out batch.
    seconds : float
        Wall time of the run.

    Examples
    --------
    >>> loss, sat, sec = train_swapped(8, "unscaled, tempered backward", steps=2, eval_batch=8)
    >>> sat.shape, bool(loss > 0)
    ((2,), True)
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; expected one of {list(VARIANTS)}")
    scale, q_init, q_lr, backward, back_scale = VARIANTS[variant]
    tau = resolve_scale(d_k, back_scale) / resolve_scale(d_k, scale)
    start = time.perf_counter()
    task = make_task(TASK)
    model, opt = build_variant(d_k, scale, q_init, q_lr, seed=seed, lr=lr)
    if backward == "true":  # the package's own attention, untouched
        run_steps(model, opt, task, steps, seed=seed)
    else:
        with swapped_backward(tau, backward):
            run_steps(model, opt, task, steps, seed=seed)
    loss, peak, _ = row_gradients(model, *task(eval_batch, seed=HELD_OUT_SEED))
    return loss, np.array([float((p > THRESHOLD).mean()) for p in peak]), time.perf_counter() - start


def score_motion(d_k: int = 64, variant: str = "unscaled", steps: int = 200, every: int = 50, seed: int = 0,
                 layer: int = 0, eval_batch: int = 128) -> dict[str, np.ndarray]:
    r"""Do saturated rows move? Their scores and top keys between checkpoints, during training.

    Trains ``variant`` of :data:`VARIANTS` (its backward as listed) and, every ``every`` steps,
    reads layer ``layer``'s scores :math:`c\,q\cdot k` on a held-out batch (queries
    :math:`t \ge 1`, causal keys). Between consecutive checkpoints it records the median
    :math:`|\Delta s|` over all entries, and, among the rows saturated (largest weight above 0.99)
    at both checkpoints, the share whose largest weight moved to another key.

    Returns
    -------
    dict of np.ndarray
        ``"step"`` (K,); ``"saturated"`` (K,), share of saturated rows; ``"median_change"`` and
        ``"top_key_changed"`` (K - 1,), each for the interval ending at ``step[1:]``.

    Examples
    --------
    >>> m = score_motion(8, steps=4, every=2, eval_batch=4)
    >>> m["step"].tolist(), m["median_change"].shape
    ([0, 2, 4], (2,))
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; expected one of {list(VARIANTS)}")
    if steps % every:
        raise ValueError(f"steps={steps} is not a multiple of every={every}")
    scale, q_init, q_lr, backward, back_scale = VARIANTS[variant]
    task = make_task(TASK)
    tokens = task(eval_batch, seed=HELD_OUT_SEED).inputs  # (B, T)
    T = tokens.shape[1]
    keys = torch.tril(torch.ones(T, T, dtype=torch.bool))[FIRST_ROW:]  # (T - 1, T): key j <= query i
    snaps: list[torch.Tensor] = []

    def record(step: int, model: torch.nn.Module) -> None:
        if step % every == 0:
            with torch.no_grad():
                s = qk_logits(model, tokens)[layer][:, 0, FIRST_ROW:]  # (B, T - 1, T), head 0
                snaps.append(s.masked_fill(~keys, -torch.inf))  # future keys: weight 0

    model, opt = build_variant(d_k, scale, q_init, q_lr, seed=seed)
    tau = resolve_scale(d_k, back_scale) / resolve_scale(d_k, scale)
    with swapped_backward(tau, backward) if backward != "true" else contextlib.nullcontext():
        run_steps(model, opt, task, steps, seed=seed, callback=record)
    peak = [torch.softmax(s, -1).amax(-1) > THRESHOLD for s in snaps]  # K x (B, T - 1): saturated rows
    top = [s.argmax(-1) for s in snaps]  # K x (B, T - 1)
    change, moved = [], []
    for a, b, pa, pb, ta, tb in zip(snaps, snaps[1:], peak, peak[1:], top, top[1:]):
        change.append(float((b - a)[keys.expand_as(a)].abs().median()))
        both = pa & pb  # saturated at both checkpoints
        moved.append(float((ta != tb)[both].double().mean()) if both.any() else float("nan"))
    return {"step": np.arange(0, steps + 1, every), "saturated": np.array([float(p.double().mean()) for p in peak]),
            "median_change": np.array(change), "top_key_changed": np.array(moved)}


@dataclass(frozen=True)
class BackwardGrid:
    """Result of :func:`run_backward`: ``eval_loss`` and ``seconds`` (V, S), ``saturated`` (V, S, L).

    ``motion`` holds :func:`score_motion` of the unscaled model for each seed, stacked
    (S, K) or (S, K - 1), when the command line measured it; else it is empty.
    """

    variants: tuple
    seeds: np.ndarray
    eval_loss: np.ndarray
    saturated: np.ndarray
    seconds: np.ndarray
    settings: dict = field(default_factory=dict)
    motion: dict = field(default_factory=dict)


def _train(job: tuple) -> tuple[float, np.ndarray, float]:
    d_k, variant, seed, steps, lr = job
    result = train_swapped(d_k, variant, steps=steps, seed=seed, lr=lr)
    print(f"{variant:36s} seed {seed}: held-out loss {result[0]:.3f} ({result[2]:.0f} s)", flush=True)
    return result


def run_backward(seeds: Sequence[int] = (0, 1, 2, 3, 4), d_k: int = 64, steps: int = 1000, lr: float = 1e-2,
                 variants: Sequence[str] = tuple(VARIANTS), jobs: int = 1) -> BackwardGrid:
    """:func:`train_swapped` for every variant and seed; ``jobs`` processes in parallel.

    Each run is deterministic and single-threaded, so ``jobs`` changes only the wall time.
    Prints one line per finished run.

    Examples
    --------
    >>> r = run_backward([0], d_k=8, steps=2, variants=["unscaled", "unscaled, size only"])
    unscaled                             seed 0: held-out loss ...
    unscaled, size only                  seed 0: held-out loss ...
    >>> r.eval_loss.shape, r.saturated.shape
    ((2, 1), (2, 1, 2))
    """
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise ValueError(f"unknown variants {unknown}; expected some of {list(VARIANTS)}")
    job_list = [(int(d_k), v, int(s), int(steps), lr) for v, s in itertools.product(variants, seeds)]
    if jobs > 1:
        with ProcessPoolExecutor(max_workers=int(jobs)) as pool:
            runs = list(pool.map(_train, job_list))
    else:
        runs = [_train(j) for j in job_list]
    shape = (len(variants), len(seeds))
    settings = {"d_k": int(d_k), "steps": int(steps), "lr": lr, "n_heads": 1, "d_model": 32, "n_layers": 2,
                "batch_size": 32, "eval_batch": 256, "threshold": THRESHOLD, "task": TASK, "optimizer": "AdamW",
                "definitions": {v: list(VARIANTS[v]) for v in variants}}
    return BackwardGrid(variants=tuple(variants), seeds=np.array(list(seeds)),
                        eval_loss=np.array([r[0] for r in runs]).reshape(shape),
                        saturated=np.array([r[1] for r in runs]).reshape(*shape, -1),
                        seconds=np.array([r[2] for r in runs]).reshape(shape), settings=settings)


def with_motion(result: BackwardGrid, every: int = 100) -> BackwardGrid:
    """``result`` with :func:`score_motion` of the unscaled model, one run per seed, as its ``motion``.

    Examples
    --------
    >>> r = run_backward([0], d_k=8, steps=2, variants=["unscaled"])
    unscaled                             seed 0: held-out loss ...
    >>> with_motion(r, every=1).motion["median_change"].shape
    (1, 2)
    """
    d_k, steps = result.settings["d_k"], result.settings["steps"]
    runs = [score_motion(d_k, "unscaled", steps=steps, every=every, seed=int(s)) for s in result.seeds]
    motion = {k: np.array([r[k] for r in runs]) for k in runs[0]}  # each (S, K) or (S, K - 1)
    return dataclasses.replace(result, motion=motion, settings={**result.settings, "motion_every": int(every)})


def save_backward(result: BackwardGrid, path: Union[str, Path], meta: Optional[dict] = None) -> None:
    """Write a :class:`BackwardGrid` and ``meta`` (machine, timings) as JSON."""
    d = {k: (v if k in ("variants", "settings", "motion") else np.asarray(v).tolist()) for k, v in asdict(result).items()}
    d["seconds"] = np.round(result.seconds, 1).tolist()
    d["motion"] = {k: np.asarray(v).tolist() for k, v in result.motion.items()}
    with open(path, "w") as fh:
        json.dump({"schema_version": 1, "meta": meta or {}, "result": d}, fh)
        fh.write("\n")


def load_backward(path: Union[str, Path] = STORED_BACKWARD) -> tuple[BackwardGrid, dict]:
    """Read what :func:`save_backward` wrote: ``(result, meta)``; default, the shipped run.

    Examples
    --------
    >>> r, meta = load_backward()
    >>> r.variants[:2], r.eval_loss.shape == (len(r.variants), len(r.seeds))
    (('scaled', 'scaled, unscaled backward'), True)
    """
    with open(path) as fh:
        doc = json.load(fh)
    if doc.get("schema_version") != 1:
        raise ValueError(f"{path}: schema_version={doc.get('schema_version')!r}; expected 1")
    d = doc["result"]
    arrays = {k: np.array(v) for k, v in d.items() if k not in ("variants", "settings", "motion")}
    motion = {k: np.array(v, dtype=float) for k, v in d.get("motion", {}).items()}
    return BackwardGrid(variants=tuple(d["variants"]), settings=d["settings"], motion=motion, **arrays), doc["meta"]


# ------------------------------------------------------------------ command line
def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``scaling-backward`` command's arguments."""
    p.add_argument("--out", default=str(STORED_BACKWARD), help="JSON file to write (default: the shipped run)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="seeds, one run of each variant per seed")
    p.add_argument("--steps", type=int, default=1000, help="AdamW steps per model")
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS), metavar="VARIANT",
                   help="which runs (default: all)")
    p.add_argument("--jobs", type=int, default=1, help="processes in parallel")
    p.add_argument("--motion-every", type=int, default=100,
                   help="also track the unscaled model's scores every N steps (score_motion); 0: skip")


def cli(args: argparse.Namespace, parser: Optional[argparse.ArgumentParser] = None) -> int:
    """Command line: run :func:`run_backward` and write it as JSON (minutes)."""
    arguments = {k: v for k, v in vars(args).items() if k not in ("command", "run", "parser")}
    wall, cpu = time.perf_counter(), time.process_time()
    result = run_backward(args.seeds, steps=args.steps, variants=args.variants, jobs=args.jobs)
    if args.motion_every:
        result = with_motion(result, every=args.motion_every)
    meta = {"machine": machine_info(threads=1), "command": "python -m attention_course scaling-backward",
            "arguments": arguments, "wall_seconds": round(time.perf_counter() - wall, 1),
            "cpu_seconds (this process)": round(time.process_time() - cpu, 1)}
    save_backward(result, args.out, meta)
    return 0


if __name__ == "__main__":  # pragma: no cover
    _parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(_parser)
    raise SystemExit(cli(_parser.parse_args()))
