r"""Chapter 2's flagged slider for the ``learned-width`` verdict: how much of its own target may a point see?

The verdict says a Gaussian kernel's width can be learned by gradient descent *when the
objective leaves each point out*. The condition is binary (leave-one-out or not); the slider
moves it continuously: point :math:`i` is predicted with its own kernel weight multiplied by
:math:`\alpha` (:func:`~attention_course.lenses.kernel_learning.fit_bandwidth` with
``self_weight``; :math:`\alpha = 0` is leave-one-out, :math:`\alpha = 1` self-included). For
each :math:`\alpha` the width is learned by the chapter's full-batch Adam, and the test MSE of
the learned width is compared with the grid-best width's. The flag sits at the first
:math:`\alpha` whose learned width leaves the good range
(:func:`~attention_course.lenses.kernel_learning.learned_width_flip`,
:func:`~attention_course.lenses.kernel_learning.good_range_limit`).

The fits (Adam over 300 steps, a width still rising at the self-included end) are precomputed
by :func:`attention_course.experiments.flip_data.self_weight_sweep` and stored in
:data:`LEARNED_WIDTH_DATA`; this module only reads and draws them. Regenerate with::

    python -c "from attention_course.experiments import flip_data as f; f.write_self_weight_sweep()"
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..lenses.kernel_learning import good_range_limit, learned_width_flip
from .interactive import _fallback
from .widgets import SliderFigure

__all__ = ["LEARNED_WIDTH_DATA", "learned_width_explorer", "load_self_weight_sweep"]

#: The stored sweep over the self-weight alpha (chapter 2, seed 0, and the further draws' margin).
LEARNED_WIDTH_DATA = Path(__file__).resolve().parents[1] / "data" / "flips_ch2_learned_width.json"


def load_self_weight_sweep(path: Path = LEARNED_WIDTH_DATA) -> dict:
    """The stored :func:`~attention_course.experiments.flip_data.self_weight_sweep`.

    Examples
    --------
    >>> s = load_self_weight_sweep()
    >>> s["alpha"][0], s["alpha"][-1], len(s["draws"])
    (0.0, 1.0, 10)
    """
    return json.loads(Path(path).read_text())


def learned_width_explorer(sweep: dict | None = None) -> SliderFigure:
    r"""Chapter 2: slide the self-weight :math:`\alpha` from leave-one-out (0) to self-included (1).

    Top: test MSE against the inverse width :math:`w` (the grid), with the grid-best width,
    the leave-one-out width and the width learned at this :math:`\alpha`. Bottom: the learned
    width's test MSE against :math:`\alpha`, with the good range's limit. The flag
    (:func:`~attention_course.lenses.kernel_learning.learned_width_flip`) marks where the learned width stops being a good one.

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
