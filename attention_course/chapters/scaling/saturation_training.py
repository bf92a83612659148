r"""Saturated rows and their gradient, through training, with and without the scale (chapter 6).

Row by row (a norm over a whole matrix is dominated by the unsaturated rows): for query row :math:`i`,
:math:`\partial\mathcal{L}/\partial x_i = p_i \odot (g_i - \langle p_i, g_i\rangle)`.
:func:`track_saturation` records the share of saturated rows and the mean gradient on them and on the
others; :func:`matched_loss_ratio` compares models at the same held-out loss. The stored runs are
``python -m attention_course scaling-saturation`` (``--d-k 64``, and ``--d-k 16 256 --variants scaled
unscaled --steps 1000``), read back by :func:`load_saturation`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, Optional, Union

import numpy as np
import torch

from ...models.experiments import load_result, significant
from ...models.records import DATA_DIR
from ...models.tasks import Task, make_task
from ...models.tiny import ModelConfig, TinyTransformer
from ...models.training import masked_loss, train
from .init_vs_step import VARIANTS, build_variant, score_gradients
from .training_grid import CHAPTER_6, HELD_OUT_SEED, TASK, ScalingGrid, grid_experiment

__all__ = ["STORED_SWEEP", "checkpoints", "init_row_ratio", "matched_loss_ratio", "load_saturation"]

#: A row is saturated when its largest weight exceeds this.
THRESHOLD = 0.99
#: The stored run of chapter 6, shipped with the package.
STORED_SATURATION = DATA_DIR / "scale_saturation.json"
#: The width sweep of chapter 6 (d_k = 16 and 256, scaled and unscaled), in the same format.
STORED_SWEEP = DATA_DIR / "scale_sweep.json"
FIRST_ROW = 1  # query 0 has one key under the causal mask: always "saturated", so it is left out


def checkpoints(steps: int) -> np.ndarray:
    """Steps at which :func:`track_saturation` measures: dense at first, then every 100.

    Examples
    --------
    >>> checkpoints(300).tolist()
    [0, 2, 4, 6, 8, 10, 15, 20, 25, 30, 40, 50, 60, 80, 100, 125, 150, 200, 250, 300]
    """
    early = [0, 2, 4, 6, 8, 10, 15, 20, 25, 30, 40, 50, 60, 80, 100, 125, 150, 200, 250]
    return np.array(sorted({s for s in early if s <= steps} | set(range(0, int(steps) + 1, 100)) | {int(steps)}))


def row_gradients(model: TinyTransformer, inputs: torch.Tensor, targets: torch.Tensor,
                  mask: torch.Tensor) -> tuple[float, list[np.ndarray], list[np.ndarray]]:
    r"""Loss, each row's largest weight and each row's :math:`\lVert\partial\mathcal{L}/\partial x_i\rVert`.

    Rows are the queries ``t >= 1`` that can reach the loss (the last layer: the counted positions; earlier
    layers: those at or before the last counted one).

    Returns
    -------
    loss : float
    max_weight, grad_norm : lists (one per layer) of 1-d arrays, one entry per row kept

    Examples
    --------
    >>> task = make_task("repeated_sequences")
    >>> model = TinyTransformer(ModelConfig(d_k=16, n_heads=1, scale="none"), seed=0)
    >>> loss, peak, g = row_gradients(model, *task(8, seed=0))
    >>> len(peak), peak[0].shape == g[0].shape, peak[1].size < peak[0].size   # layer 1: the loss rows only
    (2, True, True)
    """
    with torch.no_grad():
        logits, weights = model(inputs)  # (B, T, V), L x (B, h, T, T)
        loss = float(masked_loss(logits, targets, mask))
    grads = score_gradients(model, inputs, targets, mask)["score"]  # L x (B, h, T, T): dL/dx
    reach_last = mask.flip(-1).cummax(-1).values.flip(-1)  # (B, T): a counted position at or after t
    keep = [reach_last] * (len(weights) - 1) + [mask]  # per layer, (B, T)
    h = weights[0].shape[1]
    rows = [k[:, None, FIRST_ROW:].expand(-1, h, -1) for k in keep]  # L x (B, h, T - 1)
    peak = [w[:, :, FIRST_ROW:].amax(-1)[r].numpy() for w, r in zip(weights, rows)]  # largest weight per row
    norm = [torch.linalg.vector_norm(g[:, :, FIRST_ROW:], dim=-1)[r].numpy() for g, r in zip(grads, rows)]
    return loss, peak, norm


def summarise_rows(peak: np.ndarray, grad_norm: np.ndarray, threshold: float = THRESHOLD) -> np.ndarray:
    r"""``[share saturated, mean |dL/dx_i| over saturated rows, over the others, |dL/dx|_F]``.

    A mean over no rows is NaN.

    Examples
    --------
    >>> summarise_rows(np.array([0.995, 0.5, 0.3, 1.0]), np.array([0.0, 2.0, 4.0, 1.0])).tolist()
    [0.5, 0.5, 3.0, 4.58257569495584]
    """
    sat = peak > threshold
    mean = lambda x: float(x.mean()) if x.size else float("nan")  # noqa: E731
    return np.array([sat.mean(), mean(grad_norm[sat]), mean(grad_norm[~sat]), np.sqrt((grad_norm**2).sum())])


def init_row_ratio(d_k: int, seed: int = 0, batch_size: int = 256, n_heads: int = 1,
                   task: Optional[Task] = None) -> np.ndarray:
    r"""At initialisation, per layer: the share of rows saturated without the scale, and the gradient ratio on them.

    Two models with the same weights (``seed``) but the factor on :math:`q\cdot k`; per row, the ratio
    unscaled / scaled of :math:`\lVert\partial\mathcal{L}/\partial x_i\rVert` on the held-out batch.

    Returns
    -------
    np.ndarray, shape (L, 3)
        ``[share saturated, median ratio on saturated rows, median ratio on the others]``.

    Examples
    --------
    >>> init_row_ratio(64, seed=0, batch_size=16).shape
    (2, 3)
    """
    task = make_task(TASK) if task is None else task
    batch = task(batch_size, seed=HELD_OUT_SEED)
    rows = {s: row_gradients(TinyTransformer(ModelConfig(d_k=d_k, n_heads=n_heads, scale=s), seed=seed), *batch)
            for s in ("none", "sqrt")}
    out = []
    for peak, g_none, g_sqrt in zip(rows["none"][1], rows["none"][2], rows["sqrt"][2]):
        sat, ratio = peak > THRESHOLD, g_none / g_sqrt  # one entry per row
        med = lambda x: float(np.median(x)) if x.size else float("nan")  # noqa: E731
        out.append([sat.mean(), med(ratio[sat]), med(ratio[~sat])])
    return np.array(out)


@dataclass(frozen=True)
class SaturationRun:
    r"""What :func:`track_saturation` records: ``step`` (K,), held-out ``eval_loss`` (K,), ``rows`` (K, L, 4) of :func:`summarise_rows`."""

    step: np.ndarray
    eval_loss: np.ndarray
    rows: np.ndarray


def track_saturation(d_k: int = 64, scale: Union[str, float] = "none", q_init: Union[str, float] = 1,
                     q_lr: Union[str, float] = 1, seed: int = 0, task: Optional[Task] = None,
                     **training: Any) -> SaturationRun:
    """Train one variant and measure its rows at :func:`checkpoints`; one run of :data:`SATURATION`.

    :func:`~attention_course.chapters.scaling.init_vs_step.build_variant`'s model; the measurements (a callback
    on the held-out batch) leave the training unchanged. ``**training`` as in
    :func:`~attention_course.chapters.scaling.training.train_one`.

    Examples
    --------
    >>> run = track_saturation(8, *VARIANTS["unscaled"], steps=4, eval_batch=8)
    >>> run.step.tolist(), run.rows.shape
    ([0, 2, 4], (3, 2, 4))
    """
    t = replace(CHAPTER_6, **training)
    task = make_task(TASK) if task is None else task
    held_out = task(t.eval_batch, seed=HELD_OUT_SEED)
    model, optimizer = build_variant(d_k, scale, q_init, q_lr, seed=seed, d_model=t.d_model, n_heads=t.n_heads,
                                     n_layers=t.n_layers)
    when, losses, rows = set(checkpoints(t.steps).tolist()), [], []

    def measure(step: int, m: TinyTransformer, weights: Optional[list]) -> None:
        if step in when:
            loss, peak, norm = row_gradients(m, *held_out)
            losses.append(loss)
            rows.append([summarise_rows(p, g) for p, g in zip(peak, norm)])  # (L, 4)

    train(model, task, steps=t.steps, seed=seed, lr=t.lr, batch_size=t.batch_size, optimizer=optimizer,
          callback=measure)
    return SaturationRun(step=checkpoints(t.steps), eval_loss=np.array(losses), rows=np.array(rows))


@dataclass(frozen=True)
class SaturationGrid:
    """Result of :data:`SATURATION`: ``eval_loss`` (D, V, S, K), ``rows`` (D, V, S, K, L, 4), ``step`` (K,)."""

    d_k: np.ndarray
    variants: tuple
    seeds: np.ndarray
    step: np.ndarray
    eval_loss: np.ndarray
    rows: np.ndarray
    settings: dict = field(default_factory=dict)

    #: How the stored JSON rounds the fields (NaN: null).
    ROUNDING: ClassVar[dict] = {"eval_loss": significant(4), "rows": significant(4)}

    @classmethod
    def from_runs(cls, config: ScalingGrid, runs: dict[str, np.ndarray]) -> SaturationGrid:
        """The records of :func:`~attention_course.chapters.scaling.training_grid.run_grid` as they are stacked."""
        return cls(d_k=np.array(config.d_ks), variants=tuple(config.variants),
                   seeds=np.array(config.seeds), step=runs["step"][0, 0, 0], eval_loss=runs["eval_loss"],
                   rows=runs["rows"], settings=config.settings(threshold=THRESHOLD))

    def select(self, d_k: int, variant: str) -> tuple[np.ndarray, np.ndarray]:
        """``(eval_loss (S, K), rows (S, K, L, 4))`` of one width and variant."""
        if d_k not in self.d_k.tolist() or variant not in self.variants:
            raise KeyError(f"(d_k={d_k!r}, variant={variant!r}) not in d_k={self.d_k.tolist()}, "
                           f"variants={list(self.variants)}")
        i, j = self.d_k.tolist().index(d_k), self.variants.index(variant)
        return self.eval_loss[i, j], self.rows[i, j]


#: The saturation run of chapter 6 (``python -m attention_course scaling-saturation``): three
#: variants, three widths, 5 seeds, 2,000 steps. The stored files are this with ``d_ks=(64,)``
#: (:data:`STORED_SATURATION`), and with ``d_ks=(16, 256)``, two variants and 1,000 steps
#: (:data:`STORED_SWEEP`).
SATURATION = grid_experiment(
    "scaling-saturation",
    ScalingGrid(train=track_saturation, result=SaturationGrid, definitions=VARIANTS,
                variants=("scaled", "unscaled", "unscaled, small W_Q init"), d_ks=(16, 64, 256), steps=2000),
    STORED_SATURATION, also=(STORED_SWEEP,),
    help="chapter 6's saturation run: saturated rows and their gradient through training",
    description="Train the tiny transformer at d_k = 16, 64, 256 with and without the scale (and unscaled with "
                "W_Q started sqrt(d_k) times smaller) over seeds; at checkpoints record the share of saturated "
                "softmax rows and the gradient at the softmax's input on saturated and other rows; write JSON "
                "(default: attention_course/data/scale_saturation.json; minutes: the stored d_k = 64 run took "
                "about 20 on one thread).",
    flags=("--seeds", "--d-k", "--variants", "--steps", "--jobs"))


def matched_loss_ratio(loss_ref: np.ndarray, grad_ref: np.ndarray, loss: np.ndarray, grad: np.ndarray) -> np.ndarray:
    r"""``grad`` (M,) divided by the reference's gradient at the same held-out loss.

    The reference's gradient is interpolated linearly in its loss between the two checkpoints around the
    target, where its loss first falls below it; targets outside its range give NaN.

    Examples
    --------
    >>> matched_loss_ratio(np.array([4.0, 3.0, 1.0]), np.array([1.0, 2.0, 4.0]),
    ...                    np.array([3.5, 4.5]), np.array([0.15, 1.0])).round(3).tolist()
    [0.1, nan]
    """
    out = np.full(len(loss), np.nan)
    for m, (target, g) in enumerate(zip(loss, grad)):
        below = np.flatnonzero(loss_ref < target)
        if loss_ref[0] < target or not below.size:
            continue
        k = below[0]  # first checkpoint below the target; k - 1 is at or above it
        lo, hi = loss_ref[k], loss_ref[k - 1]
        w = (hi - target) / (hi - lo)
        out[m] = g / ((1 - w) * grad_ref[k - 1] + w * grad_ref[k])
    return out


def load_saturation(path: Union[str, Path] = STORED_SATURATION) -> tuple[SaturationGrid, dict]:
    """Read a stored :data:`SATURATION` run: ``(result, meta)``; default, the shipped run.

    Examples
    --------
    >>> r, meta = load_saturation()
    >>> r.variants[:2], r.rows.shape[-2:]
    (('scaled', 'unscaled'), (2, 4))
    """
    return load_result(path, SaturationGrid)
