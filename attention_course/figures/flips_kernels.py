r"""Chapter 2's flagged slider for the ``learned-width`` verdict: how much of its own target may a point see?

The verdict says a Gaussian kernel's width can be learned by gradient descent *when the
objective leaves each point out*. The condition is binary (leave-one-out or not); this module
moves it continuously. Point :math:`i` is predicted with its own kernel weight multiplied by
:math:`\alpha`,

.. math::

    \hat y_i = \frac{\alpha\, y_i + \sum_{j \ne i} \kappa_w(x_i, x_j)\, y_j}
                    {\alpha + \sum_{j \ne i} \kappa_w(x_i, x_j)}, \qquad
    \kappa_w(q, k) = e^{-((q - k) w)^2 / 2},

which is a softmax over the log-kernel with a bias :math:`\log\alpha` on the diagonal:
:math:`\alpha = 0` is leave-one-out (the diagonal masked), :math:`\alpha = 1` the
self-included objective (:math:`\kappa_w(x_i, x_i) = 1`). For each :math:`\alpha` the width
:math:`w` is learned by the chapter's full-batch Adam (same steps, rate and start), and the
test MSE of the learned width is compared with the grid-best width's.

The *good range* is read off further draws of the data: on each, the leave-one-out width's test
MSE over the grid-best width's; the median of these ratios times the grid-best MSE is the limit
(the median, not the largest: on two of the ten draws leave-one-out itself lands at twice the best).
The flag sits at the first :math:`\alpha` whose learned width exceeds it
(:func:`learned_width_flip`).

The fits (Adam over 300 steps, a width still rising at the self-included end) are precomputed
and stored in :data:`LEARNED_WIDTH_DATA`; regenerate with::

    python -c "from attention_course.figures import flips_kernels as f; f.write_self_weight_sweep()"
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from ..core.attention import softmax
from ..lenses.kernel_learning import BandwidthFit, _adam, fit_bandwidth
from ..lenses.kernels import (
    log_kernel,
    mse,
    mse_by_bandwidth,
    nadaraya_watson,
    sine_data,
)
from .interactive import _fallback
from .widgets import SliderFigure

__all__ = [
    "ALPHAS",
    "LEARNED_WIDTH_DATA",
    "W_GRID",
    "fit_bandwidth_self_weight",
    "good_range_limit",
    "learned_width_explorer",
    "learned_width_flip",
    "load_self_weight_sweep",
    "self_weight_sweep",
    "write_self_weight_sweep",
]

#: The stored sweep over the self-weight alpha (chapter 2, seed 0, and the further draws' margin).
LEARNED_WIDTH_DATA = Path(__file__).resolve().parents[1] / "data" / "flips_ch2_learned_width.json"
#: The self-weights of the slider: 0 (leave-one-out) to 1 (self-included).
ALPHAS = tuple(round(0.1 * i, 1) for i in range(11))
#: The chapter's grid of inverse widths w for the grid-best width (cell of fig-kern-objectives).
W_GRID = np.geomspace(0.3, 60, 121)
_FIT = {"steps": 300, "lr": 0.05, "w_init": 1.0}  # the chapter's fits


def fit_bandwidth_self_weight(x: np.ndarray, y: np.ndarray, self_weight: float, steps: int = 300,
                              lr: float = 0.05, w_init: float = 1.0) -> BandwidthFit:
    r"""Learn ``w`` of :math:`\exp(-((q-k)w)^2/2)` with each point's own kernel weight times ``self_weight``.

    The loss is :math:`\frac1n\sum_i (\hat y_i - y_i)^2` with :math:`\hat y_i` of the module
    docstring: a softmax over :math:`\log\kappa_w(x_i, x_j) + \log\alpha\,[i = j]`. ``self_weight``
    0 is :func:`~attention_course.lenses.kernel_learning.fit_bandwidth` with ``leave_one_out=True``,
    1 with ``leave_one_out=False``; full-batch Adam in float64, as there.

    Parameters
    ----------
    x, y : array, shape (n,)
    self_weight : float in [0, 1]

    Examples
    --------
    >>> data = sine_data(seed=0)
    >>> fit = fit_bandwidth_self_weight(data.x_train, data.y_train, 0.5, steps=5)
    >>> fit.w_history.shape, fit.loss_history.shape
    ((6,), (5,))
    """
    if not 0 <= self_weight <= 1:
        raise ValueError(f"self_weight={self_weight!r}; expected a number in [0, 1] "
                         "(0 = leave-one-out, 1 = self-included)")
    x_t = torch.as_tensor(np.asarray(x, dtype=float))  # (n,)
    y_t = torch.as_tensor(np.asarray(y, dtype=float))  # (n,)
    if x_t.ndim != 1 or x_t.shape != y_t.shape:
        raise ValueError(f"x has shape {tuple(x_t.shape)} and y {tuple(y_t.shape)}; expected both (n,)")
    eye = torch.eye(len(x_t), dtype=torch.bool)  # (n, n)
    log_a = float(np.log(self_weight)) if self_weight > 0 else 0.0  # alpha = 0 is the mask below
    bias = eye.to(torch.float64) * log_a  # (n, n), log alpha on i = j (float64: no float32 rounding of log alpha)
    mask = ~eye if self_weight == 0 else None  # alpha = 0: the diagonal left out, True = may attend

    def loss_fn(w: torch.Tensor) -> torch.Tensor:
        logits = log_kernel(x_t * w, x_t * w) + bias  # $\log\kappa_w(x_i, x_j) + \log\alpha[i=j]$   (n, n)
        pred = softmax(logits, axis=-1, mask=mask) @ y_t  # (n,), softmax over the keys j
        return ((pred - y_t) ** 2).mean()

    params, losses = _adam(loss_fn, torch.tensor(float(w_init), dtype=torch.float64), steps, lr)
    ws = np.abs(np.array([p.item() for p in params]))  # the kernel depends on w only through w^2
    return BandwidthFit(float(ws[-1]), ws, losses)


def _test_mse(data, w: float) -> float:
    return mse(nadaraya_watson(data.x_test, data.x_train, data.y_train, bandwidth=1 / w)[0], data.y_test)


def self_weight_sweep(alphas: Sequence[float] = ALPHAS, seed: int = 0, draws: Sequence[int] = range(1, 11),
                      **fit) -> dict:
    r"""Learned width and its test MSE at each self-weight, the grid-best width, and the draws' margin.

    Data: :func:`~attention_course.lenses.kernels.sine_data` (40 points, noise 1) with ``seed``;
    on each of ``draws`` (the chapter's further draws) the leave-one-out width is learned with
    :func:`~attention_course.lenses.kernel_learning.fit_bandwidth` and its test MSE divided by
    the grid-best test MSE (grid :data:`W_GRID`).

    Returns
    -------
    dict
        ``alpha``, ``w``, ``test_mse`` (one per alpha); ``w_grid``, ``grid_mse`` (the test MSE
        curve); ``w_best``, ``mse_best``; ``draws``, ``draw_ratio`` (leave-one-out over best, per draw).

    Examples
    --------
    >>> s = self_weight_sweep([0.0, 1.0], draws=[1], steps=3)
    >>> len(s["w"]), len(s["draw_ratio"]), s["mse_best"] <= min(s["test_mse"])
    (2, 1, True)
    """
    fit = {**_FIT, **fit}
    data = sine_data(n=40, noise=1.0, seed=seed)
    ws = [fit_bandwidth_self_weight(data.x_train, data.y_train, float(a), **fit).w for a in alphas]
    grid_mse = mse_by_bandwidth(data.x_test, data.x_train, data.y_train, data.y_test, W_GRID)  # (121,)
    ratios = []
    for s in draws:
        d_s = sine_data(n=40, noise=1.0, seed=s)
        w_s = fit_bandwidth(d_s.x_train, d_s.y_train, leave_one_out=True, **fit).w
        best_s = float(np.min(mse_by_bandwidth(d_s.x_test, d_s.x_train, d_s.y_train, d_s.y_test, W_GRID)))
        ratios.append(_test_mse(d_s, w_s) / best_s)
    best = int(np.argmin(grid_mse))
    return {"alpha": [float(a) for a in alphas], "w": ws, "test_mse": [_test_mse(data, w) for w in ws],
            "w_grid": W_GRID.tolist(), "grid_mse": np.asarray(grid_mse).tolist(), "w_best": float(W_GRID[best]),
            "mse_best": float(grid_mse[best]), "draws": list(draws), "draw_ratio": ratios, "seed": seed, "fit": fit}


def write_self_weight_sweep(path: Path = LEARNED_WIDTH_DATA) -> dict:
    """Run :func:`self_weight_sweep` with its defaults and store it as JSON at ``path`` (a few seconds)."""
    sweep = self_weight_sweep()
    Path(path).write_text(json.dumps(sweep, indent=1) + "\n")
    return sweep


def load_self_weight_sweep(path: Path = LEARNED_WIDTH_DATA) -> dict:
    """The stored :func:`self_weight_sweep`.

    Examples
    --------
    >>> s = load_self_weight_sweep()
    >>> s["alpha"][0], s["alpha"][-1], len(s["draws"])
    (0.0, 1.0, 10)
    """
    return json.loads(Path(path).read_text())


def good_range_limit(sweep: dict) -> float:
    r"""The largest test MSE still counted as a good width: :math:`\text{MSE}_\text{best}\cdot\operatorname{median}_s r_s`.

    :math:`r_s` is the leave-one-out width's test MSE over the grid-best width's on further
    draw :math:`s`: how far from the best the objective that the verdict endorses typically lands.

    Examples
    --------
    >>> round(good_range_limit({"mse_best": 0.2, "draw_ratio": [1.01, 1.10, 1.05]}), 6)
    0.21
    """
    if not sweep["draw_ratio"]:
        raise ValueError("the sweep has no further draws: the good range needs at least one draw_ratio")
    return float(sweep["mse_best"] * np.median(sweep["draw_ratio"]))


def learned_width_flip(sweep: dict) -> int | None:
    """Index of the first self-weight whose learned width's test MSE exceeds :func:`good_range_limit`.

    Examples
    --------
    >>> learned_width_flip({"mse_best": 0.2, "draw_ratio": [1.1], "test_mse": [0.21, 0.215, 0.23, 0.3]})
    2
    """
    limit = good_range_limit(sweep)
    over = [i for i, m in enumerate(sweep["test_mse"]) if m > limit]
    return over[0] if over else None


def learned_width_explorer(sweep: dict | None = None) -> SliderFigure:
    r"""Chapter 2: slide the self-weight :math:`\alpha` from leave-one-out (0) to self-included (1).

    Top: test MSE against the inverse width :math:`w` (the grid), with the grid-best width,
    the leave-one-out width and the width learned at this :math:`\alpha`. Bottom: the learned
    width's test MSE against :math:`\alpha`, with the good range's limit. The flag
    (:func:`learned_width_flip`) marks where the learned width stops being a good one.

    Examples
    --------
    >>> fig = learned_width_explorer()
    >>> fig.labels[0], fig.verdict, fig.flip is not None
    ('α = 0 (leave-one-out)', 'learned-width', True)
    """
    s = load_self_weight_sweep() if sweep is None else sweep
    alphas, ws, errs = s["alpha"], s["w"], s["test_mse"]
    limit, flip = good_range_limit(s), learned_width_flip(s)
    ends = {0.0: " (leave-one-out)", 1.0: " (self-included)"}
    labels = [f"α = {a:g}{ends.get(a, '')}" for a in alphas]
    frames = []
    for i, (a, w, e) in enumerate(zip(alphas, ws, errs)):
        good = "inside" if e <= limit else "<b>outside</b>"
        frames.append({"data": [
            {"type": "scatter", "mode": "lines", "x": s["w_grid"], "y": s["grid_mse"], "name": "test MSE at w",
             "line": {"color": "#000000"}, "xaxis": "x", "yaxis": "y"},
            {"type": "scatter", "mode": "markers", "x": [s["w_best"]], "y": [s["mse_best"]], "name": "grid best",
             "marker": {"symbol": "star", "size": 13, "color": "#009E73"}, "xaxis": "x", "yaxis": "y"},
            {"type": "scatter", "mode": "markers", "x": [ws[0]], "y": [errs[0]], "name": "leave-one-out",
             "marker": {"size": 10, "color": "#0072B2"}, "xaxis": "x", "yaxis": "y"},
            {"type": "scatter", "mode": "markers", "x": [w], "y": [e], "name": "learned at α",
             "marker": {"size": 12, "color": "#D55E00", "symbol": "diamond"}, "xaxis": "x", "yaxis": "y"},
            {"type": "scatter", "mode": "lines+markers", "x": alphas, "y": errs, "showlegend": False,
             "line": {"color": "#D55E00"}, "marker": {"size": 5}, "xaxis": "x2", "yaxis": "y2"},
            {"type": "scatter", "mode": "lines", "x": [0, 1], "y": [limit, limit], "name": "good-range limit",
             "line": {"color": "#777777", "dash": "dot"}, "xaxis": "x2", "yaxis": "y2"},
            {"type": "scatter", "mode": "markers", "x": [a], "y": [e], "showlegend": False,
             "marker": {"size": 12, "color": "#D55E00", "symbol": "diamond"}, "xaxis": "x2", "yaxis": "y2"}],
            "readout": (f"α = {a:g}: learned w = {w:.2f} (leave-one-out {ws[0]:.2f}, grid-best {s['w_best']:.2f}); "
                        f"test MSE {e:.3f}, {e / s['mse_best']:.2f} times the grid-best {s['mse_best']:.3f}; "
                        f"the good range ends at {limit:.3f} ({np.median(s['draw_ratio']):.2f} times the best, the "
                        f"leave-one-out width's median ratio on {len(s['draws'])} further draws): {good}.")})
    layout = {"height": 600, "margin": {"l": 60, "r": 10, "t": 70, "b": 45}, "font": {"size": 13},
              "xaxis": {"type": "log", "domain": [0, 1], "title": {"text": "inverse width w (log scale)"}},
              "yaxis": {"domain": [0.5, 1], "type": "log", "title": {"text": "test MSE"}},
              "xaxis2": {"domain": [0, 1], "anchor": "y2", "title": {"text": "self-weight α"}, "range": [-0.03, 1.03]},
              "yaxis2": {"domain": [0, 0.33], "anchor": "x2", "title": {"text": "test MSE"}},
              "legend": {"orientation": "h", "y": 1.01, "yanchor": "bottom", "x": 0}}

    def draw(fig, ax):
        ax.plot(alphas, errs, "o-", color="#D55E00", label="learned width")
        ax.axhline(limit, color="0.5", ls=":", label="limit of the good range")
        ax.axhline(s["mse_best"], color="#009E73", ls="--", label="grid-best width")
        if flip is not None:
            ax.axvline(alphas[flip], color="0.4", lw=0.8)
        ax.set(xlabel="self-weight α (0 = leave-one-out, 1 = self-included)", ylabel="test MSE",
               title="Test error of the learned width")
        ax.legend()

    note = (f"the learned width's test MSE leaves the good range (above {limit:.3f}): the objective now "
            "rewards copying each point's own target")
    return SliderFigure("ix-kern-learned-width", "Let each point see its own target: what width is learned?",
                        labels, frames, layout, _fallback(draw),
                        "Test MSE of the learned kernel width against the self-weight alpha: flat near the best "
                        "width for small alpha, rising above the good range as alpha approaches 1.",
                        start=0, control_label="self-weight α", flip=flip, flip_note=note, verdict="learned-width")
