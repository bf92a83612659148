r"""Train the tiny transformer with each score scale and measure what happens (chapter 6).

One experiment, :func:`train_one`: build a
:class:`~attention_course.models.tiny.TinyTransformer` with per-head width ``d_k`` and
score factor :math:`c(d_k)` (``"sqrt"`` :math:`1/\sqrt{d_k}`, ``"none"`` 1, ``"mup"``
:math:`1/d_k`, see :func:`~attention_course.core.attention.resolve_scale`), train it on
the induction task ``"repeated_sequences"`` and record its loss, the gradient of
:math:`W_Q, W_K`, the sharpness of its attention, the spread of the scores

.. math::

    \operatorname{std}\big(c\, q_i \cdot k_j\big), \quad j \le i,

before and after training, and its best previous-token and induction heads.
:func:`compare_scales` runs it over a grid of widths and scales and stacks the
records into a :class:`ScaleComparison`;

    python -m attention_course scaling-run --out attention_course/data/scaling_training.json

runs the fuller comparison of chapter 6 (about half an hour) and writes it as JSON,
which :func:`load_comparisons` reads back.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from functools import partial
from pathlib import Path
from typing import Optional, Union

import numpy as np
import torch

from ...core.attention import SCALES, Scale, causal_mask, resolve_scale
from ...models.tasks import Task, make_task
from ...models.probes import head_scores
from ...models.tiny import ModelConfig, TinyTransformer, qk_logits
from ...models.training import evaluate_loss, train_run
from ...models.records import machine_info
from ...models.records import DATA_DIR

try:  # a progress bar for the command line, if tqdm happens to be installed
    from tqdm import tqdm
except ImportError:  # pragma: no cover - depends on the environment
    tqdm = None

__all__ = [
    "ScaleRun",
    "train_one",
    "ScaleComparison",
    "compare_scales",
    "thin_comparison",
    "save_comparisons",
    "load_comparisons",
    "add_arguments",
    "cli",
]

#: The fuller training comparison of chapter 6, shipped with the package.
STORED_RUN = DATA_DIR / "scaling_training.json"

TASK = "repeated_sequences"
HELD_OUT_SEED = 12345  # the held-out batch, as in evaluate_loss and head_scores


@dataclass(frozen=True)
class ScaleRun:
    r"""What :func:`train_one` measures on one model; ``N`` steps, ``L`` layers.

    Attributes
    ----------
    factor : float
        The factor :math:`c(d_k)` on :math:`q \cdot k`.
    loss : (N,)
        Training loss before each update.
    grad_norm_qk : (N,)
        :math:`\big(\sum_\ell \lVert\nabla W_Q^{(\ell)}\rVert_F^2
        + \lVert\nabla W_K^{(\ell)}\rVert_F^2\big)^{1/2}` before each update.
    grad_norm_init, grad_norm_qk_init : float
        All-parameter and :math:`W_Q, W_K` gradient norms at step 0.
    max_weight : (N, L)
        Mean largest attention weight per row (queries ``t >= 1``), per layer.
    eval_loss : float
        Held-out loss after training.
    logit_std_init, logit_std_final : (L,)
        Standard deviation of the scaled scores :math:`c\,q\cdot k` that the softmax
        sees (pairs ``j <= i`` of the held-out batch), before and after training.
    previous_token, induction : (L,)
        Best head's score per layer after training
        (:func:`~attention_course.models.probes.head_scores`).
    """

    factor: float
    loss: np.ndarray
    grad_norm_qk: np.ndarray
    grad_norm_init: float
    grad_norm_qk_init: float
    max_weight: np.ndarray
    eval_loss: float
    logit_std_init: np.ndarray
    logit_std_final: np.ndarray
    previous_token: np.ndarray
    induction: np.ndarray


def _logit_std(model: TinyTransformer, tokens: torch.Tensor) -> np.ndarray:
    """Per layer, the std of the scaled scores over the causal pairs ``j <= i``; shape (L,)."""
    allowed = torch.from_numpy(causal_mask(tokens.shape[1]))  # (T, T), True = may attend
    return np.array([float(s[..., allowed].std()) for s in qk_logits(model, tokens)])  # (L,)


def train_one(
    d_k: int,
    scale: Scale,
    steps: int = 200,
    seed: int = 0,
    d_model: int = 32,
    n_heads: int = 1,
    n_layers: int = 2,
    lr: float = 1e-2,
    batch_size: int = 32,
    eval_batch: int = 256,
    task: Optional[Task] = None,
) -> ScaleRun:
    r"""Train one tiny transformer with width ``d_k`` and score factor :math:`c(d_k)`.

    The model is built with ``seed`` and trained with
    :func:`~attention_course.models.training.train_run` (AdamW, one thread, deterministic).
    Its initial ``W_Q, W_K`` entries have variance ``1/d_model`` whatever ``d_k``, so at
    initialisation :math:`\operatorname{Var}(q \cdot k) \approx d_k`; only ``scale`` and
    ``d_k`` differ between the runs of :func:`compare_scales`.

    Parameters
    ----------
    d_k : int
        Per-head width of queries and keys.
    scale : {"sqrt", "none", "mup"} or float
        See :func:`~attention_course.core.attention.resolve_scale`.
    steps, seed, lr, batch_size
        Passed to :func:`~attention_course.models.training.train_run`; ``seed`` also seeds
        the initialisation.
    d_model, n_heads, n_layers : int
        Model sizes (:class:`~attention_course.models.tiny.ModelConfig`).
    eval_batch : int, default 256
        Size of the held-out batch for ``eval_loss``, the score spread and the head scores.
    task : Task, optional
        Default: ``make_task("repeated_sequences")``.

    Returns
    -------
    ScaleRun

    Examples
    --------
    >>> run = train_one(8, "sqrt", steps=3, d_model=8, eval_batch=8)
    >>> run.loss.shape, run.max_weight.shape, round(run.factor, 3)
    ((3,), (3, 2), 0.354)
    """
    task = make_task(TASK) if task is None else task
    held_out = task(eval_batch, seed=HELD_OUT_SEED).inputs  # (eval_batch, T)
    cfg = ModelConfig(d_model=d_model, n_heads=n_heads, n_layers=n_layers, d_k=d_k, scale=scale)
    model = TinyTransformer(cfg, seed=seed)
    std_init = _logit_std(model, held_out)  # (L,)
    run = train_run(model, task, steps=steps, seed=seed, lr=lr, batch_size=batch_size)
    grad_qk = np.sqrt((run.grad_norm_q**2 + run.grad_norm_k**2).sum(axis=1))  # (steps,), sum over layers
    scores = head_scores(model, task, batch_size=eval_batch)  # each (L, h)
    return ScaleRun(
        factor=cfg.score_scale,
        loss=run.loss,
        grad_norm_qk=grad_qk,
        grad_norm_init=run.grad_norm[0],
        grad_norm_qk_init=grad_qk[0],
        max_weight=run.max_weight,
        eval_loss=evaluate_loss(model, task, batch_size=eval_batch),
        logit_std_init=std_init,
        logit_std_final=_logit_std(model, held_out),
        previous_token=scores["previous_token"].max(axis=1),  # (L,), best head per layer
        induction=scores["induction"].max(axis=1),
    )


@dataclass(frozen=True)
class ScaleComparison:
    r"""Result of :func:`compare_scales` (one seed): :class:`ScaleRun` fields on a grid.

    Axes: ``D = len(d_k)``, ``C = len(scales)``, ``N = len(step)``, ``L`` layers. Each
    measurement has the shape ``(D, C)`` followed by the shape it has in
    :class:`ScaleRun`: ``loss`` is (D, C, N), ``max_weight`` (D, C, N, L),
    ``eval_loss`` (D, C), ``logit_std_final`` (D, C, L). Curves are per training step,
    or block means after :func:`thin_comparison` (``step`` then holds the block centres).
    ``settings`` holds everything needed to rerun: model sizes, steps, lr, batch size, seed.
    """

    d_k: np.ndarray
    scales: tuple
    step: np.ndarray
    factor: np.ndarray
    loss: np.ndarray
    grad_norm_qk: np.ndarray
    grad_norm_init: np.ndarray
    grad_norm_qk_init: np.ndarray
    max_weight: np.ndarray
    eval_loss: np.ndarray
    logit_std_init: np.ndarray
    logit_std_final: np.ndarray
    previous_token: np.ndarray
    induction: np.ndarray
    settings: dict = field(default_factory=dict)

    def index(self, d_k: int, scale: Scale) -> tuple[int, int]:
        """Position ``(i, j)`` of a ``(d_k, scale)`` pair in the arrays."""
        if d_k not in self.d_k.tolist() or scale not in self.scales:
            raise KeyError(f"(d_k={d_k!r}, scale={scale!r}) not in d_k={self.d_k.tolist()}, "
                           f"scales={list(self.scales)}")
        return self.d_k.tolist().index(d_k), list(self.scales).index(scale)


def compare_scales(
    d_ks: Sequence[int] = (16, 64, 256),
    scales: Sequence[Scale] = SCALES,
    steps: int = 200,
    seed: int = 0,
    d_model: int = 32,
    n_heads: int = 1,
    n_layers: int = 2,
    lr: float = 1e-2,
    batch_size: int = 32,
    eval_batch: int = 256,
    progress: Optional[Callable[[Iterable], Iterable]] = None,
) -> ScaleComparison:
    """Run :func:`train_one` for every ``(d_k, scale)`` and stack the records.

    Every run uses the same ``seed``, so the models start from the same weights
    (up to their width) and see the same batches.

    Parameters
    ----------
    d_ks : sequence of int, default (16, 64, 256)
    scales : sequence of scale names or numbers, default ("sqrt", "none", "mup")
    steps, seed, d_model, n_heads, n_layers, lr, batch_size, eval_batch
        Passed to :func:`train_one`.
    progress : callable, optional
        Wraps the iterable of ``(d_k, scale)`` pairs, e.g. ``tqdm``; nothing is printed
        without it.

    Returns
    -------
    ScaleComparison

    Examples
    --------
    >>> r = compare_scales([8], ["sqrt", "none"], steps=2, d_model=8, eval_batch=8)
    >>> r.loss.shape, r.max_weight.shape, r.factor.round(3).tolist()
    ((1, 2, 2), (1, 2, 2, 2), [[0.354, 1.0]])
    """
    dims, scales = np.atleast_1d(np.asarray(d_ks)).tolist(), tuple(scales)
    if not dims or not scales:
        raise ValueError(f"d_ks={dims} and scales={list(scales)}; expected at least one of each")
    for d, c in itertools.product(dims, scales):
        resolve_scale(d, c)  # fail before any training, on a bad d_k (0, 2.5) or scale
    dims = [int(d) for d in dims]
    settings = dict(d_model=d_model, n_heads=n_heads, n_layers=n_layers, steps=int(steps), seed=int(seed),
                    lr=lr, batch_size=batch_size, eval_batch=eval_batch, task=TASK, optimizer="AdamW")
    task = make_task(TASK)
    grid = list(itertools.product(dims, scales))  # (d_k, scale) pairs, d_k-major
    train = {k: v for k, v in settings.items() if k not in ("task", "optimizer")}
    runs = {(d, c): train_one(d, c, task=task, **train) for d, c in (progress(grid) if progress else grid)}
    stacked = {f.name: np.array([[getattr(runs[d, c], f.name) for c in scales] for d in dims])
               for f in fields(ScaleRun)}  # each (D, C, ...): the ScaleRun field on the grid
    return ScaleComparison(d_k=np.array(dims), scales=scales, step=np.arange(int(steps)),
                           settings=settings, **stacked)


def thin_comparison(result: ScaleComparison, every: int) -> ScaleComparison:
    """Average the curves over blocks of ``every`` steps (a smaller file, smoother plots).

    ``step`` becomes the block centres; a last, shorter block is averaged too.
    Step-0 gradient norms stay in ``grad_norm_init`` and ``grad_norm_qk_init``.

    Examples
    --------
    >>> r = compare_scales([8], ["sqrt"], steps=5, d_model=8, eval_batch=8)
    >>> t = thin_comparison(r, 2)
    >>> t.step.tolist(), t.loss.shape
    ([0.5, 2.5, 4.0], (1, 1, 3))
    """
    if int(every) != every or every < 1:
        raise ValueError(f"every={every!r}; expected a positive integer")
    n = result.step.shape[0]
    blocks = [range(b, min(b + every, n)) for b in range(0, n, int(every))]  # step indices

    def block_means(x: np.ndarray, axis: int) -> np.ndarray:
        return np.stack([np.take(x, b, axis=axis).mean(axis=axis) for b in blocks], axis=axis)

    return replace(
        result,
        step=block_means(result.step.astype(float), 0),
        loss=block_means(result.loss, 2),
        grad_norm_qk=block_means(result.grad_norm_qk, 2),
        max_weight=block_means(result.max_weight, 2),
    )


def _round(x: np.ndarray, digits: int = 4) -> list:
    """Round to ``digits`` significant digits, for a compact JSON."""
    if np.issubdtype(np.asarray(x).dtype, np.integer):
        return np.asarray(x).tolist()
    x = np.asarray(x, dtype=float)
    out = np.vectorize(lambda v: float(f"{v:.{digits}g}"))(x) if x.size else x
    return np.asarray(out).tolist()


def save_comparisons(results: Sequence[ScaleComparison], path: Union[str, Path],
                     meta: Optional[dict] = None) -> None:
    """Write comparisons (e.g. one per seed) and ``meta`` (machine, timings) as JSON."""
    runs = []
    for r in results:
        d = asdict(r)
        runs.append({k: (v if k in ("scales", "settings") else _round(v)) for k, v in d.items()})
    doc = {"schema_version": 1, "meta": meta or {}, "runs": runs}
    with open(path, "w") as fh:
        json.dump(doc, fh)
        fh.write("\n")


def load_comparisons(path: Union[str, Path] = STORED_RUN) -> tuple[list[ScaleComparison], dict]:
    """Read what :func:`save_comparisons` wrote: ``(results, meta)``.

    The default is the fuller run of chapter 6, shipped with the package.

    Examples
    --------
    >>> results, meta = load_comparisons()
    >>> len(results), results[0].scales, results[0].loss.shape   # 3 seeds; (d_k, scale, blocks)
    (3, ('sqrt', 'none', 'mup'), (3, 3, 60))
    """
    with open(path) as fh:
        doc = json.load(fh)
    if doc.get("schema_version") != 1:
        raise ValueError(f"{path}: schema_version={doc.get('schema_version')!r}; expected 1")
    results = []
    for run in doc["runs"]:
        arrays = {k: np.array(v) for k, v in run.items() if k not in ("scales", "settings")}
        results.append(ScaleComparison(scales=tuple(run["scales"]), settings=run["settings"], **arrays))
    return results, doc["meta"]


# ------------------------------------------------------------------ command line
def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``scaling-run`` command's arguments."""
    p.add_argument("--out", default=str(STORED_RUN), help="JSON file to write (default: the shipped run)")
    p.add_argument("--d-k", type=int, nargs="+", default=[16, 64, 256], help="per-head widths d_k")
    p.add_argument("--scales", nargs="+", default=list(SCALES), help="score scales: sqrt, none, mup")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="one full comparison per seed")
    p.add_argument("--steps", type=int, default=600, help="AdamW steps per model")
    p.add_argument("--n-heads", type=int, default=4, help="heads per layer")
    p.add_argument("--lr", type=float, default=3e-3, help="learning rate")
    p.add_argument("--every", type=int, default=10, help="average the curves over blocks of this many steps")


def _progress_lines(grid: Iterable, seed: int) -> Iterable:
    """Without tqdm: one line on stderr per ``(d_k, scale)`` run, as it starts."""
    for d, c in grid:
        print(f"seed {seed}: d_k={d}, scale={c}", file=sys.stderr, flush=True)
        yield d, c


def cli(args: argparse.Namespace, parser: Optional[argparse.ArgumentParser] = None) -> int:
    """Command line: the fuller training comparison of chapter 6, written as JSON."""
    arguments = {k: v for k, v in vars(args).items() if k not in ("command", "run", "parser")}
    meta = {"machine": machine_info(threads=1), "command": "python -m attention_course scaling-run",
            "arguments": arguments}
    wall, cpu = time.perf_counter(), time.process_time()
    results = []
    for seed in args.seeds:
        progress = (partial(tqdm, desc=f"seed {seed}", unit="run") if tqdm is not None
                    else partial(_progress_lines, seed=seed))
        comparison = compare_scales(args.d_k, args.scales, steps=args.steps, seed=seed,
                                    n_heads=args.n_heads, lr=args.lr, progress=progress)
        results.append(thin_comparison(comparison, args.every))
    meta.update(wall_seconds=round(time.perf_counter() - wall, 1), cpu_seconds=round(time.process_time() - cpu, 1))
    save_comparisons(results, args.out, meta)
    return 0
