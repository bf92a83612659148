r"""The backward-swap test of chapter 6: is the vanishing softmax gradient what stops training?

The unscaled model keeps its forward pass (its rows still saturate); only the backward pass through each
softmax is swapped (:func:`~attention_course.chapters.scaling.saturated_rows.swapped_softmax`) for the
scaled model's (:math:`\tau = 1/\sqrt{d_k}`), its size or direction only, or on saturated rows only; the
reverse swap gives the scaled model the unscaled backward. :data:`VARIANTS` lists the runs; the stored runs
are ``python -m attention_course scaling-backward`` (all variants, and :data:`ROWS_VARIANTS` with
``--motion-every 0``), read back by :func:`load_backward`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Optional, Union

import numpy as np
import torch

from ...core.attention import resolve_scale
from ...models import tiny
from ...models.experiments import load_result
from ...models.records import DATA_DIR
from ...models.tasks import make_task
from ...models.tiny import qk_logits
from ...models.training import train
from .init_vs_step import build_variant
from .training_grid import CHAPTER_6, HELD_OUT_SEED, TASK, ScalingGrid, grid_experiment
from .saturated_rows import BACKWARDS, swapped_softmax
from .saturation_training import FIRST_ROW, THRESHOLD, row_gradients

__all__ = ["VARIANTS", "STORED_BACKWARD_ROWS", "load_backward", "combine_backward"]

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
    "unscaled, saturated rows tempered": ("none", 1, 1, "saturated", "sqrt"),
    "small W_Q init, saturated rows tempered": ("none", "sqrt", 1, "saturated", "sqrt"),
}

#: The run that decides ``gradient-vanishes``: the tempered backward on the saturated rows only
#: (largest weight above 0.99), against the true backward and the tempered backward on every row.
ROWS_VARIANTS = ("unscaled", "unscaled, tempered backward", "unscaled, saturated rows tempered",
                 "small W_Q init", "small W_Q init, saturated rows tempered")

#: The slider's start-scale run (``gradient-vanishes``): the saturated-rows swap from W_Q started a times its
#: own size, between the two starts of :data:`ROWS_VARIANTS`; stored in three parts joined by :func:`combine_backward`.
START_FACTORS = (0.25, 0.5, 0.707, 0.85)  # 0.707 (about 1/sqrt 2) added after 0.5 trained 5 of 5, 0.85 after 0.707 did
START_VARIANTS = {f"W_Q init x{a:g}, saturated rows tempered": ("none", a, 1, "saturated", "sqrt")
                  for a in START_FACTORS}

#: The run of chapter 6, shipped with the package.
STORED_BACKWARD = DATA_DIR / "scale_backward.json"
#: The saturated-rows run (:data:`ROWS_VARIANTS`), in the same format.
STORED_BACKWARD_ROWS = DATA_DIR / "scale_backward_rows.json"
#: The start-scale run (:data:`START_VARIANTS`), in the same format.
STORED_BACKWARD_START = DATA_DIR / "scale_backward_start.json"


@contextlib.contextmanager
def swapped_backward(tau: float, backward: str) -> Iterator[None]:
    r"""Within the block, the tiny transformer's softmaxes pass back ``backward`` at ``tau`` (same forward numbers).

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


@dataclass(frozen=True)
class SwapRun:
    """What :func:`train_swapped` measures: held-out ``eval_loss``, ``saturated`` (L,) share of rows above 0.99, ``seconds``."""

    eval_loss: float
    saturated: np.ndarray
    seconds: float


def _swapped(tau: float, backward: str) -> contextlib.AbstractContextManager:
    """:func:`swapped_backward`, or nothing for the true backward (the package's attention, untouched)."""
    return contextlib.nullcontext() if backward == "true" else swapped_backward(tau, backward)


def train_swapped(d_k: int, scale: Union[str, float] = "none", q_init: Union[str, float] = 1,
                  q_lr: Union[str, float] = 1, backward: str = "true", back_scale: Union[str, float] = "none",
                  seed: int = 0, **training: Any) -> SwapRun:
    r"""Train one variant (a row of :data:`VARIANTS`) with its backward swapped; measure it unswapped.

    :func:`~attention_course.chapters.scaling.init_vs_step.build_variant`'s model inside :func:`swapped_backward`
    with :math:`\tau = c_{\text{backward}}/c_{\text{forward}}`; ``**training`` as in
    :func:`~attention_course.chapters.scaling.training.train_one`.

    Examples
    --------
    >>> run = train_swapped(8, *VARIANTS["unscaled, tempered backward"], steps=2, eval_batch=8)
    >>> run.saturated.shape, bool(run.eval_loss > 0)
    ((2,), True)
    """
    t = dataclasses.replace(CHAPTER_6, **training)
    tau = resolve_scale(d_k, back_scale) / resolve_scale(d_k, scale)
    start = time.perf_counter()
    task = make_task(TASK)
    model, optimizer = build_variant(d_k, scale, q_init, q_lr, seed=seed, d_model=t.d_model, n_heads=t.n_heads,
                                     n_layers=t.n_layers)
    with _swapped(tau, backward):
        train(model, task, steps=t.steps, seed=seed, lr=t.lr, batch_size=t.batch_size, optimizer=optimizer)
    loss, peak, _ = row_gradients(model, *task(t.eval_batch, seed=HELD_OUT_SEED))
    return SwapRun(eval_loss=loss, saturated=np.array([float((p > THRESHOLD).mean()) for p in peak]),
                   seconds=time.perf_counter() - start)


def score_motion(d_k: int = 64, variant: str = "unscaled", steps: int = 200, every: int = 50, seed: int = 0,
                 layer: int = 0, eval_batch: int = 128) -> dict[str, np.ndarray]:
    r"""Do saturated rows move? Layer ``layer``'s scores on a held-out batch every ``every`` steps of training ``variant``.

    Returns
    -------
    dict of np.ndarray
        ``"step"`` (K,); ``"saturated"`` (K,), share of saturated rows; ``"median_change"`` (K - 1,), the
        median :math:`|\Delta s|` between checkpoints; ``"top_key_changed"`` (K - 1,), among rows saturated at
        both, the share whose top key moved.

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

    def record(step: int, model: torch.nn.Module, weights: Optional[list]) -> None:
        if step % every == 0:
            with torch.no_grad():
                s = qk_logits(model, tokens)[layer][:, 0, FIRST_ROW:]  # (B, T - 1, T), head 0
                snaps.append(s.masked_fill(~keys, -torch.inf))  # future keys: weight 0

    model, optimizer = build_variant(d_k, scale, q_init, q_lr, seed=seed)
    tau = resolve_scale(d_k, back_scale) / resolve_scale(d_k, scale)
    with _swapped(tau, backward):
        train(model, task, steps=steps, seed=seed, lr=1e-2, optimizer=optimizer, callback=record)
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
    """Result of :data:`BACKWARD`: ``eval_loss``, ``seconds`` (V, S), ``saturated`` (V, S, L); ``motion`` from :func:`with_motion`, or empty."""

    variants: tuple
    seeds: np.ndarray
    eval_loss: np.ndarray
    saturated: np.ndarray
    seconds: np.ndarray
    settings: dict = field(default_factory=dict)
    motion: dict[str, np.ndarray] = field(default_factory=dict)

    #: How the stored JSON rounds the fields.
    ROUNDING: ClassVar[dict] = {"seconds": lambda x: np.round(x, 1)}

    @classmethod
    def from_runs(cls, config: ScalingGrid, runs: dict[str, np.ndarray]) -> BackwardGrid:
        """The grid of one width, and :func:`with_motion` if the configuration's ``motion_every`` is set."""
        (d_k,) = config.d_ks
        settings = {"d_k": d_k, **config.settings(threshold=THRESHOLD),
                    "definitions": {v: list(config.definitions[v]) for v in config.variants}}
        result = cls(variants=tuple(config.variants), seeds=np.array(config.seeds), settings=settings,
                     **{k: v[0] for k, v in runs.items()})  # (V, S, ...): the width axis dropped
        return with_motion(result, every=config.motion_every) if config.motion_every else result


#: The backward-swap run of chapter 6 (``python -m attention_course scaling-backward``): every
#: variant, 5 seeds, ``d_k`` = 64, 1,000 steps, and the unscaled model's scores every 100 steps.
BACKWARD = grid_experiment(
    "scaling-backward",
    ScalingGrid(train=train_swapped, result=BackwardGrid, definitions={**VARIANTS, **START_VARIANTS},
                variants=tuple(VARIANTS), steps=1000, motion_every=100),
    STORED_BACKWARD, also=(STORED_BACKWARD_ROWS, STORED_BACKWARD_START),
    help="chapter 6's backward-swap test: unscaled forward, tempered softmax backward",
    description="Train the tiny transformer at d_k = 64 keeping each variant's forward pass and swapping only the "
                "backward pass through the softmax (tempered, its size only, its direction only, or the reverse), "
                "over seeds; write held-out losses as JSON (default: attention_course/data/scale_backward.json; "
                "about 10 minutes with --jobs 2).",
    flags=("--seeds", "--steps", "--variants", "--jobs", "--motion-every"))


def with_motion(result: BackwardGrid, every: int = 100) -> BackwardGrid:
    """``result`` with :func:`score_motion` of the unscaled model, one run per seed, as its ``motion``.

    Examples
    --------
    >>> from attention_course.chapters.scaling.training_grid import run_grid
    >>> r = run_grid(dataclasses.replace(BACKWARD.config, seeds=(0,), d_ks=(8,), steps=2, variants=("unscaled",),
    ...                                  motion_every=0))
    >>> with_motion(r, every=1).motion["median_change"].shape
    (1, 2)
    """
    d_k, steps = result.settings["d_k"], result.settings["steps"]
    runs = [score_motion(d_k, "unscaled", steps=steps, every=every, seed=int(s)) for s in result.seeds]
    motion = {k: np.array([r[k] for r in runs]) for k in runs[0]}  # each (S, K) or (S, K - 1)
    return dataclasses.replace(result, motion=motion, settings={**result.settings, "motion_every": int(every)})


def load_backward(path: Union[str, Path] = STORED_BACKWARD) -> tuple[BackwardGrid, dict]:
    """Read a stored :data:`BACKWARD` run: ``(result, meta)``; default, the shipped run.

    Examples
    --------
    >>> r, meta = load_backward()
    >>> r.variants[:2], r.eval_loss.shape == (len(r.variants), len(r.seeds))
    (('scaled', 'scaled, unscaled backward'), True)
    """
    return load_result(path, BackwardGrid)


def combine_backward(*grids: BackwardGrid) -> BackwardGrid:
    """Several stored runs of the same width, steps and seeds as one grid, variants in order (the first grid's ``motion``).

    Examples
    --------
    >>> from attention_course.chapters.scaling.training_grid import run_grid
    >>> small = dataclasses.replace(BACKWARD.config, seeds=(0,), d_ks=(8,), steps=2, motion_every=0)
    >>> a = run_grid(dataclasses.replace(small, variants=("unscaled",)))
    >>> b = run_grid(dataclasses.replace(small, variants=("unscaled, saturated rows tempered",)))
    >>> combine_backward(a, b).variants
    ('unscaled', 'unscaled, saturated rows tempered')
    """
    first = grids[0]
    same = ("d_k", "steps", "lr")
    for g in grids[1:]:
        if list(g.seeds) != list(first.seeds) or any(g.settings[k] != first.settings[k] for k in same):
            raise ValueError(f"grids differ in seeds or settings {same}: {first.seeds.tolist()} "
                             f"{[first.settings[k] for k in same]} against {g.seeds.tolist()} {[g.settings[k] for k in same]}")
    definitions = {k: v for g in grids for k, v in g.settings["definitions"].items()}
    cat = lambda name: np.concatenate([getattr(g, name) for g in grids])  # noqa: E731  (V, S, ...)
    return dataclasses.replace(first, variants=tuple(v for g in grids for v in g.variants), eval_loss=cat("eval_loss"),
                               saturated=cat("saturated"), seconds=cat("seconds"),
                               settings={**first.settings, "definitions": definitions})
