r"""Chapter 7's flagged slider: shrink attention to a local window and watch recall follow the window.

The verdict ``all-pairs`` holds *when what a query must fetch can lie anywhere*. On stacked MQAR a
query's key sits 1 to 2N - 1 positions back; a causal window of :math:`w` positions sees it only when
the gap is below :math:`w`. The slider moves :math:`w` over the stored runs (softmax attention with
the window, three seeds each) and shows the trained accuracy beside the share of queries whose key
the window covers (:func:`~attention_course.chapters.insight.ingredients.covered_share`). The flag sits
at the first window whose accuracy is within 0.05 of full attention
(:func:`~attention_course.chapters.insight.ingredients.first_within`): there the verdict's condition,
"the window covers every dependency", is met. This module only reads and draws.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional

import numpy as np

from ...figures.widgets import SliderFigure, static_fallback
from .ingredients import Score, covered_share, first_within, window_curve

__all__ = ["window_explorer", "WINDOW_MARGIN"]

#: How close to full attention a window must come to count as "enough" (the pre-registered 0.05).
WINDOW_MARGIN = 0.05
_ACC, _COVER = "#0072B2", "#999999"


def window_explorer(table: Mapping[tuple[str, str], Score], task: str = "recall (MQAR, 16 pairs)",
                    n_pairs: int = 16) -> SliderFigure:
    """A slider over the window :math:`w`: trained recall against the covered share of queries.

    Examples
    --------
    >>> S = lambda m: Score(m, m - 0.01, m + 0.01, 3)
    >>> t = {("r", "window 4"): S(0.1), ("r", "window 16"): S(0.5), ("r", "softmax attention"): S(0.99)}
    >>> fig = window_explorer(t, "r")
    >>> fig.labels, fig.flip, fig.verdict
    (['w = 4', 'w = 16', 'w = 32 (all pairs)'], 2, 'all-pairs')
    """
    windows, scores = window_curve(table, task, full=2 * n_pairs)
    acc = np.array([s.mean for s in scores])
    cover = covered_share(n_pairs, windows)
    flip = first_within(list(acc), WINDOW_MARGIN)
    labels = [f"w = {w}" + (" (all pairs)" if w == 2 * n_pairs else "") for w in windows]
    frames = []
    for i, (w, s) in enumerate(zip(windows, scores)):
        colors = [_ACC if j == i else "#9ECAE1" for j in range(len(windows))]
        frames.append({
            "data": [{"type": "bar", "x": [str(v) for v in windows], "y": acc, "name": "trained recall",
                      "marker": {"color": colors},
                      "error_y": {"type": "data", "symmetric": False,
                                  "array": [x.high - x.mean for x in scores],
                                  "arrayminus": [x.mean - x.low for x in scores]}},
                     {"type": "scatter", "mode": "lines+markers", "x": [str(v) for v in windows], "y": cover,
                      "name": "keys inside the window", "line": {"color": _COVER, "dash": "dot"}}],
            "readout": (f"A window of <b>{w}</b> positions: recall {s.mean:.2f} (seeds {s.low:.2f}-{s.high:.2f}); "
                        f"the key of {cover[i]:.0%} of the queries lies inside it. Full attention: {acc[-1]:.2f}."),
        })
    layout = {"height": 380, "margin": {"l": 55, "r": 10, "t": 10, "b": 50}, "font": {"size": 13},
              "xaxis": {"title": {"text": "window w (positions a query may see)"}, "type": "category"},
              "yaxis": {"title": {"text": "accuracy / share"}, "range": [0, 1.05]},
              "legend": {"orientation": "h", "y": 1.12, "x": 0}}

    def draw(fig, ax):
        x = np.arange(len(windows))
        ax.bar(x, acc, color=_ACC, label="trained recall (mean of seeds)")
        ax.plot(x, cover, "o:", color=_COVER, label="keys inside the window")
        ax.set_xticks(x, [str(w) for w in windows])
        ax.set(xlabel="window w", ylabel="accuracy / share", ylim=(0, 1.05), title="Recall with a local window")
        ax.legend(fontsize=9, loc="upper left")

    return SliderFigure("ix-insight-window", "Shrink the window: when does recall come back?", labels, frames,
                        layout, static_fallback(draw),
                        "Recall accuracy of softmax attention restricted to a causal window of w positions, "
                        "against the share of queries whose key lies inside the window.",
                        start=0, control_label="window w", flip=flip,
                        flip_note="recall within 0.05 of full attention: the window covers every key",
                        verdict="all-pairs")
