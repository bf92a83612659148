r"""Does a learned similarity find the relevant input direction? Two learned kernels against a tuned one (chapter 2).

On :func:`~attention_course.chapters.kernels.smoothing.sparse_sine_data` (only :math:`x_0` matters), three
Nadaraya-Watson smoothers fitted on the leave-one-out MSE: a tuned isotropic Gaussian (the control), a
learned metric :math:`\exp(-\lVert W(q - x_j)\rVert^2 / 2)` and dot-product attention
:math:`\operatorname{softmax}_j((qW_Q)\cdot(x_jW_K)/\sqrt{d_k})`. ``python -m attention_course metric-run``
stores :func:`compare_learned_kernels` as :data:`METRIC_RUN_DATA`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from ...core._backend import Array, ShapeError, shape_str, to_numpy
from ...core.attention import softmax
from ...models.experiments import Experiment, Runs, read_json, register, run
from ...models.records import DATA_DIR
from .learning import _adam, fit_metric
from .smoothing import mse, mse_by_bandwidth, nadaraya_watson, sparse_sine_data

__all__ = [
    "tuned_isotropic_sigma", "fit_dot_attention", "dot_attention_predict", "coordinate_weights",
    "load_metric_run",
]

#: The control's bandwidths: 61 values of sigma from 0.05 to 5, geometric.
SIGMA_GRID = np.geomspace(0.05, 5.0, 61)
#: Where ``python -m attention_course metric-run`` stores :func:`compare_learned_kernels`.
METRIC_RUN_DATA = DATA_DIR / "learned_metric.json"


def tuned_isotropic_sigma(x: Array, y: Array, sigmas: Sequence[float] = SIGMA_GRID) -> float:
    r"""The isotropic Gaussian bandwidth with the lowest leave-one-out MSE on ``(x, y)``, from ``sigmas``.

    .. math:: \hat\sigma = \arg\min_{\sigma} \frac1n \sum_i \bigl(\hat f_{\sigma, -i}(x_i) - y_i\bigr)^2

    Parameters
    ----------
    x : array, shape (n, d)
        the training inputs; each is left out of its own prediction
    y : array, shape (n,)
        their targets
    sigmas : sequence of float
        the candidate bandwidths (default :data:`SIGMA_GRID`)

    Examples
    --------
    >>> from attention_course.chapters.kernels.smoothing import sine_data
    >>> d = sine_data(n=40, noise=1.0, seed=0)
    >>> 0.1 < tuned_isotropic_sigma(d.x_train[:, None], d.y_train) < 1.0
    True
    """
    sig = np.asarray(sigmas, dtype=float)
    loo = mse_by_bandwidth(x, x, y, y, 1 / sig, leave_one_out=True)  # (len(sigmas),)
    return float(sig[int(np.argmin(loo))])


@dataclass(frozen=True)
class DotAttentionFit:
    """Learned projections of dot-product attention over the training points."""

    W_q: np.ndarray  # (d, d_k)
    W_k: np.ndarray  # (d, d_k)
    loss_history: np.ndarray  # (steps,), leave-one-out training MSE at each step


def _points(x: Array, y: Array) -> tuple[torch.Tensor, torch.Tensor]:
    """Training points as float64 tensors, x (n, d) and y (n,), n >= 2."""
    x_t = torch.as_tensor(np.asarray(to_numpy(x), dtype=np.float64))  # (n, d)
    y_t = torch.as_tensor(np.asarray(to_numpy(y), dtype=np.float64))  # (n,)
    if x_t.ndim != 2 or y_t.shape != (x_t.shape[0],) or x_t.shape[0] < 2:
        raise ShapeError(f"x has shape {shape_str(x_t)} and y {shape_str(y_t)}; expected (n, d) and (n,), n >= 2")
    return x_t, y_t


def _dot_scores(xq: torch.Tensor, xk: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    d_k = W.shape[-1]
    return (xq @ W[0]) @ (xk @ W[1]).T / d_k**0.5  # (T, S)


def fit_dot_attention(x: Array, y: Array, d_k: Optional[int] = None, steps: int = 1000, lr: float = 0.05,
                      seed: int = 0, init_scale: Optional[float] = None) -> DotAttentionFit:
    r"""Learn :math:`W_Q, W_K` (d, d_k) by full-batch Adam on the leave-one-out MSE, from a seeded :math:`N(0, 1/d)` start.

    .. math::

        \hat f(x_i) = \sum_{j \ne i} \operatorname{softmax}_j\!\Bigl(\frac{(x_i W_Q)\cdot(x_j W_K)}{\sqrt{d_k}}\Bigr) y_j

    Parameters
    ----------
    x : array, shape (n, d)
    y : array, shape (n,)
    d_k : int, optional (default ``d``)

    Examples
    --------
    >>> data = sparse_sine_data(n=30, seed=0)
    >>> fit = fit_dot_attention(data.x_train, data.y_train, steps=3)
    >>> fit.W_q.shape, fit.W_k.shape, fit.loss_history.shape
    ((5, 5), (5, 5), (3,))
    """
    x_t, y_t = _points(x, y)
    n, d = x_t.shape
    d_k = d if d_k is None else int(d_k)
    scale = d**-0.5 if init_scale is None else float(init_scale)
    init = torch.as_tensor(np.random.default_rng(seed).normal(scale=scale, size=(2, d, d_k)))  # (2, d, d_k)
    off_diag = ~torch.eye(n, dtype=torch.bool)  # (n, n): point i may not see itself

    def loss_fn(W: torch.Tensor) -> torch.Tensor:
        w = softmax(_dot_scores(x_t, x_t, W), axis=-1, mask=off_diag)  # (n, n), zero diagonal
        return ((w @ y_t - y_t) ** 2).mean()

    params, losses = _adam(loss_fn, init, steps, lr)
    W = params[-1].numpy()
    return DotAttentionFit(W[0], W[1], losses)


def dot_attention_predict(x_query: Array, x_train: Array, y_train: Array, fit: DotAttentionFit) -> np.ndarray:
    """Predictions (T,) of the learned dot-product attention at new points (every training point visible).

    Examples
    --------
    >>> fit = DotAttentionFit(np.zeros((2, 2)), np.zeros((2, 2)), np.zeros(0))  # all scores 0: the mean
    >>> dot_attention_predict(np.ones((1, 2)), np.zeros((3, 2)), np.array([1.0, 2.0, 6.0]), fit)
    array([3.])
    """
    W = torch.as_tensor(np.stack([fit.W_q, fit.W_k]))  # (2, d, d_k)
    xq, xk = (torch.as_tensor(np.asarray(to_numpy(a), dtype=np.float64)) for a in (x_query, x_train))
    w = softmax(_dot_scores(xq, xk, W), axis=-1)  # (T, S)
    return (w @ torch.as_tensor(np.asarray(to_numpy(y_train), dtype=np.float64))).numpy()


def coordinate_weights(M: Array, kind: str = "metric") -> np.ndarray:
    r"""How much each input coordinate moves the learned similarity, shape (d,).

    ``metric``: column norms :math:`\lVert W e_c\rVert`; ``bilinear`` (:math:`M = W_Q W_K^\top`):
    :math:`\sqrt{\lVert M_{c\cdot}\rVert^2 + \lVert M_{\cdot c}\rVert^2}`.

    Examples
    --------
    >>> coordinate_weights(np.diag([3.0, 0.0, 4.0]))
    array([3., 0., 4.])
    >>> coordinate_weights(np.array([[0.0, 3.0], [0.0, 0.0]]), "bilinear")
    array([3., 3.])
    """
    m = np.asarray(to_numpy(M), dtype=np.float64)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ShapeError(f"M has shape {shape_str(m)}; expected a square (d, d) matrix")
    if kind == "metric":
        return np.linalg.norm(m, axis=0)
    if kind == "bilinear":
        return np.sqrt((m**2).sum(1) + (m**2).sum(0))
    raise ValueError(f"kind must be 'metric' or 'bilinear'; got {kind!r}")


def _dominance(weights: np.ndarray) -> float:
    return float(weights[0] / weights[1:].max())  # x0 over the largest other coordinate


#: What :func:`compare_learned_kernels` records per draw.
KEYS = ("sigma", "mse_tuned", "mse_identity", "mse_mean", "mse_metric", "mse_dot", "dominance_metric",
        "dominance_dot", "x0_top_metric", "x0_top_dot")


@dataclass(frozen=True)
class MetricRunConfig:
    """The configuration of ``metric-run``; ``quick``: one draw, 5 steps each."""

    seeds: tuple = (0, 1, 2, 3, 4)
    n: int = 200
    metric_steps: int = 300
    dot_steps: int = 1000
    quick: bool = False

    def sizes(self) -> "MetricRunConfig":
        """This configuration, shrunk if ``quick``."""
        return replace(self, seeds=(0,), metric_steps=5, dot_steps=5, quick=False) if self.quick else self


def _draw(config: MetricRunConfig, seed: int) -> dict:
    """One draw: the tuned isotropic control, the learned metric and attention's learned dot product."""
    c = config.sizes()
    data = sparse_sine_data(n=c.n, d=5, n_test=1000, noise=0.1, seed=seed)
    x, y, xt, yt = data.x_train, data.y_train, data.x_test, data.y_test
    sigma = tuned_isotropic_sigma(x, y)
    W = fit_metric(x, y, steps=c.metric_steps, lr=0.1).W  # (5, 5)
    dot = fit_dot_attention(x, y, steps=c.dot_steps, lr=0.05, seed=seed)
    w_metric = coordinate_weights(W, "metric")
    w_dot = coordinate_weights(dot.W_q @ dot.W_k.T, "bilinear")
    row = {"sigma": sigma, "mse_tuned": mse(nadaraya_watson(xt, x, y, bandwidth=sigma)[0], yt),
           "mse_identity": mse(nadaraya_watson(xt, x, y)[0], yt), "mse_mean": float(np.var(yt)),
           "mse_metric": mse(nadaraya_watson(xt @ W.T, x @ W.T, y)[0], yt),
           "mse_dot": mse(dot_attention_predict(xt, x, y, dot), yt),
           "dominance_metric": _dominance(w_metric), "dominance_dot": _dominance(w_dot),
           "x0_top_metric": bool(np.argmax(w_metric) == 0), "x0_top_dot": bool(np.argmax(w_dot) == 0)}
    return {k: (row[k] if isinstance(row[k], bool) else float(row[k])) for k in KEYS}


def _columns(config: MetricRunConfig, runs: Runs, meta: Optional[dict] = None) -> dict:
    """The draws' records as one list per key, and the settings."""
    c = config.sizes()
    out = {k: [r[k] for r in runs.records] for k in KEYS}
    out.update(seeds=list(c.seeds), n=c.n, metric_steps=c.metric_steps, dot_steps=c.dot_steps)
    return out


#: ``python -m attention_course metric-run``: five draws of the 5-D task.
METRIC_RUN = register(Experiment(
    "metric-run", MetricRunConfig(), _draw, METRIC_RUN_DATA, grid=lambda c: [(s,) for s in c.sizes().seeds],
    document=_columns, out_flag="--json",
    flags={"--quick": dict(action="store_true", help="a small smoke run (one draw, few steps)")},
    help="chapter 2's learned-metric run: tuned isotropic bandwidth, learned metric, dot product",
    description="On five draws of the 5-D task, tune an isotropic Gaussian bandwidth by leave-one-out, learn a "
                "metric W and attention's own W_Q, W_K on the leave-one-out loss, and store test errors and what "
                "each found as JSON (default: attention_course/data/learned_metric.json; about a minute)."))


def compare_learned_kernels(seeds: Sequence[int] = range(5), n: int = 200, metric_steps: int = 300,
                            dot_steps: int = 1000, progress: bool = False) -> dict:
    """On each draw: the tuned isotropic control, the learned metric and attention's learned dot product.

    Returns
    -------
    dict
        One list entry per seed for each of :data:`KEYS` (``dominance_*``: x0's weight over the largest
        other's; ``mse_identity``: W = I), and the settings.

    Examples
    --------
    >>> r = compare_learned_kernels([0], n=30, metric_steps=2, dot_steps=2)
    >>> len(r["mse_dot"]), r["mse_tuned"][0] > 0
    (1, True)
    """
    config = MetricRunConfig(seeds=tuple(int(s) for s in seeds), n=n, metric_steps=metric_steps, dot_steps=dot_steps)
    return _columns(config, run(METRIC_RUN, config, show=progress))


def load_metric_run(path: Path = METRIC_RUN_DATA) -> dict:
    """The stored :func:`compare_learned_kernels` run (``python -m attention_course metric-run``).

    Examples
    --------
    >>> load_metric_run()["seeds"]
    [0, 1, 2, 3, 4]
    """
    return read_json(path)
