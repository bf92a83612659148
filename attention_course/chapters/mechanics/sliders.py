"""Chapter 1's sliders; flagged: ``convex-combination`` (:func:`dropout_explorer`) and ``square-matrix``
(:func:`cross_attention_explorer`).

Every number comes from :mod:`attention_course.chapters.mechanics.properties` in float64, and the flags from
its :func:`~attention_course.chapters.mechanics.properties.first_crossing` and
:func:`~attention_course.chapters.mechanics.properties.square_index`. This module only draws.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Optional

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ...core.attention import softmax
from ...figures.widgets import PLOTLY_AXIS, PLOTLY_FONT, SliderFigure, static_fallback
from ...models.tasks import toy_sentence
from .figures import plot_convex_hull
from .hull import convex_hull
from .properties import (
    DROPOUT_RATES,
    cross_attention_weights,
    dropout_outputs,
    first_crossing,
    hull_dropout_sweep,
    row_entropy,
    square_index,
)

__all__ = ["dropout_explorer", "plot_dropout_outputs", "cross_attention_explorer", "temperature_explorer"]

#: The sequence whose first ``T`` words ask and whose first ``S`` words answer (keys and values).
CROSS_TEXT = "the cat sat on the mat and then the cat slept"
_FONT = {"size": 13}
_OUT, _IN = "#D55E00", "#0072B2"


def _hull_trace(v: np.ndarray) -> dict:
    h = convex_hull(v)  # (H, 2), counter-clockwise
    loop = np.vstack([h, h[:1]])  # closed polygon
    return {"type": "scatter", "mode": "lines", "x": loop[:, 0], "y": loop[:, 1], "fill": "toself",
            "fillcolor": "rgba(0,114,178,0.08)", "line": {"color": "#777777"}, "name": "hull of the values",
            "hoverinfo": "skip", "xaxis": "x", "yaxis": "y"}


def _weights_heatmap(fig, ax, A: np.ndarray, key_labels, query_labels, title: str) -> None:
    """A static fallback: weights ``A`` (T, S) as a heat map, keys across and queries down."""
    im = ax.imshow(A, vmin=0, vmax=1)
    ax.set(xticks=range(A.shape[1]), yticks=range(A.shape[0]), xticklabels=key_labels, yticklabels=query_labels,
           xlabel="key", ylabel="query", title=title)
    ax.tick_params(axis="x", labelrotation=45)
    fig.colorbar(im, ax=ax, label="weight")


def dropout_explorer(rates: Sequence[float] = DROPOUT_RATES, n_problems: int = 500, seed: int = 1,
                     picture_seed: int = 0, T: int = 8, S: int = 3, draws: int = 10) -> SliderFigure:
    """Chapter 1: attention dropout at rate :math:`p` pushes outputs out of the values' hull.

    Each frame: one problem's values, hull and dropped-out outputs
    (:func:`~attention_course.chapters.mechanics.properties.dropout_outputs`, ``picture_seed``); below, the
    share outside over the chapter's problems
    (:func:`~attention_course.chapters.mechanics.properties.hull_dropout_sweep`). The flag sits at the first
    rate whose share exceeds the share at :math:`p = 0`.

    Examples
    --------
    >>> fig = dropout_explorer([0.0, 0.1, 0.3], n_problems=40)
    >>> fig.labels, fig.flip, fig.verdict
    (['p = 0', 'p = 0.1', 'p = 0.3'], 1, 'convex-combination')
    """
    rates = [float(p) for p in rates]
    if not rates or rates[0] != 0.0 or any(not 0.0 <= p < 1.0 for p in rates) or sorted(rates) != rates:
        raise ValueError(f"rates={rates}; expected increasing dropout rates in [0, 1) starting at 0 (the baseline)")
    outside = hull_dropout_sweep(rates, n_problems, seed)  # (R,)
    flip = first_crossing(outside, line=outside[0])
    v, outputs, insides = dropout_outputs(rates, picture_seed, T, S, draws)  # (S, 2), (R, draws*T, 2), (R, draws*T)
    hull = _hull_trace(v)
    frames, seen = [], [v, *outputs]
    for i, (p, o, inside) in enumerate(zip(rates, outputs, insides)):
        pts = [{"type": "scatter", "mode": "markers", "x": o[m, 0], "y": o[m, 1], "name": name,
                "marker": {"color": c, "size": 7}, "xaxis": "x", "yaxis": "y", "hoverinfo": "skip"}
               for m, name, c in ((inside, "output inside", _IN), (~inside, "output outside", _OUT))]
        frames.append({
            "data": [hull,
                     {"type": "scatter", "mode": "markers", "x": v[:, 0], "y": v[:, 1], "name": "values v_j",
                      "marker": {"color": "#000000", "size": 11, "symbol": "x"}, "hoverinfo": "skip",
                      "xaxis": "x", "yaxis": "y"},
                     *pts,
                     {"type": "scatter", "mode": "lines+markers", "x": rates, "y": outside, "name": "share outside",
                      "line": {"color": _OUT}, "marker": {"size": 5}, "xaxis": "x2", "yaxis": "y2", "showlegend": False},
                     {"type": "scatter", "mode": "markers", "x": [p], "y": [outside[i]], "marker": {"size": 12,
                      "color": _OUT}, "xaxis": "x2", "yaxis": "y2", "showlegend": False, "hoverinfo": "skip"}],
            "readout": (f"p = {p:g}: over {n_problems} random problems a share <b>{outside[i]:.3f}</b> of the "
                        f"outputs lies outside their values' hull (without dropout {outside[0]:.3f}). In the "
                        f"problem drawn above ({S} values, {T} queries, {draws} dropout draws): "
                        f"{int((~inside).sum())} of {inside.size} outputs outside."),
        })
    lo, hi = np.vstack(seen).min(0), np.vstack(seen).max(0)  # (2,) each: the same axes in every frame
    pad = 0.05 * (hi - lo)
    layout = {"height": 600, "margin": {"l": 55, "r": 10, "t": 10, "b": 45}, "font": _FONT,
              "xaxis": {"domain": [0, 1], "range": [lo[0] - pad[0], hi[0] + pad[0]]},
              "yaxis": {"domain": [0.52, 1], "range": [lo[1] - pad[1], hi[1] + pad[1]],
                        "title": {"text": "values and outputs (d_v = 2)"}},
              "xaxis2": {"domain": [0, 1], "anchor": "y2", "title": {"text": "attention-dropout rate p"}},
              "yaxis2": {"domain": [0, 0.24], "anchor": "x2", "rangemode": "tozero",
                         "title": {"text": "share outside"}},
              "legend": {"orientation": "h", "y": 0.46, "yanchor": "top", "x": 0}}

    def draw(fig, ax):
        ax.plot(rates, outside, "o-", color=_OUT)
        if flip is not None:
            ax.axvline(rates[flip], color="0.5", ls=":", label=f"first outputs outside, p = {rates[flip]:g}")
            ax.legend()
        ax.set(xlabel="attention-dropout rate p", ylabel="share outside the hull",
               title=f"Outputs outside the hull ({n_problems} problems)")

    return SliderFigure("ix-mech-dropout", "Turn on attention dropout: do the outputs stay in the hull?",
                        [f"p = {p:g}" for p in rates], frames, layout, static_fallback(draw, (5.2, 3.6)),
                        "Share of attention outputs outside the convex hull of their values against the dropout "
                        "rate: zero without dropout, rising with p.", start=0, control_label="attention-dropout rate p",
                        flip=flip, flip_note="outputs start to leave the hull: no longer a convex combination",
                        verdict="convex-combination")


def plot_dropout_outputs(p: float = 0.3, seed: int = 0, T: int = 8, S: int = 3, draws: int = 10,
                         ax: Optional[Axes] = None) -> Figure:
    """The dropout slider's picture at rate ``p``: values, hull and dropped-out outputs; the title counts those outside.

    Examples
    --------
    >>> fig = plot_dropout_outputs(0.3)
    >>> fig.axes[0].get_title()
    'Dropout p = 0.3: 44 of 80 outputs leave the hull'
    """
    v, outputs, inside = dropout_outputs([p], seed, T, S, draws)  # (S, 2), (1, draws*T, 2), (1, draws*T)
    n_out = int((~inside[0]).sum())
    return plot_convex_hull(v, outputs[0], ax=ax,
                            title=f"Dropout p = {p:g}: {n_out} of {inside.size} outputs leave the hull")


def cross_attention_explorer(T: int = 6, S_values: Optional[Sequence[int]] = None,
                             text: str = CROSS_TEXT) -> SliderFigure:
    r"""Chapter 1: ``T`` fixed queries attend to ``S`` keys; :math:`A` is :math:`T \times S`.

    Queries are the first ``T`` words of ``text``, keys its first ``S``
    (:func:`~attention_course.chapters.mechanics.properties.cross_attention_weights` on
    :func:`~attention_course.models.tasks.toy_sentence`, seed 0). The flag sits where :math:`A` is square.

    Examples
    --------
    >>> fig = cross_attention_explorer(T=3, S_values=[2, 3, 4])
    >>> fig.labels, fig.flip
    (['S = 2', 'S = 3', 'S = 4'], 1)
    """
    words = text.split()
    S_values = list(range(1, len(words) + 1)) if S_values is None else [int(s) for s in S_values]
    ex = toy_sentence(text, seed=0)
    mats = [cross_attention_weights(ex.X, ex.W_q, ex.W_k, T, S) for S in S_values]  # each (T, S)
    flip = square_index([A.shape for A in mats])
    S_max = max(S_values)
    rows = [f"{i}:{t}" for i, t in enumerate(words[:T])]
    frames = []
    for S, A in zip(S_values, mats):
        cols = [f"{j}:{t}" for j, t in enumerate(words[:S])]
        frames.append({
            "data": [{"type": "heatmap", "z": A, "x": cols, "y": rows, "zmin": 0, "zmax": 1, "colorscale": "Viridis",
                      "colorbar": {"title": {"text": "weight"}},
                      "hovertemplate": "%{y} attends to %{x}: %{z:.3f}<extra></extra>"}],
            "layout": {"xaxis": {"showgrid": False, "title": {"text": f"key (S = {S})"}, "tickangle": -45,
                                 "range": [-0.5, S_max - 0.5]}},
            "readout": (f"A has shape <b>{A.shape[0]} × {A.shape[1]}</b>: one row per query, one column per key"
                        + ("; square, as in self-attention: queries and keys are the same positions."
                           if A.shape[0] == A.shape[1] else
                           f"; not square: {S} key{'s' if S > 1 else ''} for {T} queries.")
                        + " Each row is still a distribution over the keys."),
        })
    layout = {"height": 420, "margin": {"l": 80, "r": 10, "t": 10, "b": 90}, "font": _FONT,
              "yaxis": {"showgrid": False, "autorange": "reversed", "title": {"text": "query"}}}
    i0 = flip if flip is not None else 0

    def draw(fig, ax):
        A = mats[-1]
        _weights_heatmap(fig, ax, A, words[:A.shape[1]], rows, f"Cross-attention: A is {T} × {A.shape[1]}")

    return SliderFigure("ix-mech-shape", "Change the number of keys: when is A square?",
                        [f"S = {S}" for S in S_values], frames, layout, static_fallback(draw, (5.2, 3.6)),
                        f"Heat map of {T} queries attending to {S_max} keys: a wide, not square, matrix of weights.",
                        start=i0, control_label="number of keys S",
                        flip=flip, flip_note="S = T: queries and keys from one sequence, A is square (n × n)",
                        verdict="square-matrix")


def temperature_explorer(betas: Optional[Sequence[float]] = None, query: int = 2) -> SliderFigure:
    r"""Chapter 1: :math:`\operatorname{softmax}(\beta\,QK^\top/\sqrt{d_k})` of the toy sentence at each inverse temperature :math:`\beta`.

    One query's row as bars, the matrix below; the readout gives the row's entropy against :math:`\log n`.

    Examples
    --------
    >>> fig = temperature_explorer([0.5, 1.0, 4.0])
    >>> fig.labels, fig.start
    (['β = 0.5', 'β = 1', 'β = 4'], 1)
    """
    betas = [0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0] if betas is None else list(betas)
    ex = toy_sentence()
    q, k = ex.X @ ex.W_q, ex.X @ ex.W_k  # (n, d_k) each
    logits = (q @ k.T) / np.sqrt(q.shape[1])  # (n, n)
    n, toks = len(ex.tokens), [f"{i}:{t}" for i, t in enumerate(ex.tokens)]
    frames = []
    for b in betas:
        A = np.asarray(softmax(b * logits, axis=-1))  # (n, n)
        h = row_entropy(A[query])
        frames.append({
            "data": [
                {"type": "bar", "x": toks, "y": A[query], "marker": {"color": "#0072B2"},
                 "hovertemplate": "%{x}: %{y:.3f}<extra></extra>", "xaxis": "x", "yaxis": "y"},
                {"type": "heatmap", "z": A, "x": toks, "y": toks, "zmin": 0, "zmax": 1,
                 "colorscale": "Viridis", "colorbar": {"title": {"text": "weight"}, "len": 0.55, "y": 0.27},
                 "hovertemplate": "%{y} attends to %{x}: %{z:.3f}<extra></extra>", "xaxis": "x2", "yaxis": "y2"},
            ],
            "readout": (f"Row of query <b>{html.escape(toks[query])}</b>: entropy {h:.3f} nats "
                        f"(uniform row: log {n} = {np.log(n):.3f}); largest weight {A[query].max():.3f}."),
        })
    layout = {"height": 560, "margin": {"l": 60, "r": 10, "t": 10, "b": 40}, "font": PLOTLY_FONT,
              "xaxis": {**PLOTLY_AXIS, "domain": [0, 0.85]}, "yaxis": {"domain": [0.62, 1], "range": [0, 1],
                                                               "title": {"text": "weight"}},
              "xaxis2": {**PLOTLY_AXIS, "domain": [0, 0.85], "anchor": "y2", "title": {"text": "key"}},
              "yaxis2": {**PLOTLY_AXIS, "domain": [0, 0.5], "autorange": "reversed", "title": {"text": "query"}},
              "showlegend": False}
    start = betas.index(1.0) if 1.0 in betas else 0

    def draw(fig, ax):
        A = np.asarray(softmax(betas[start] * logits, axis=-1))
        _weights_heatmap(fig, ax, A, toks, toks, f"Attention weights at β = {betas[start]:g}")

    return SliderFigure("ix-mech-temperature", "Turn the temperature: one row and the whole matrix",
                        [f"β = {b:g}" for b in betas], frames, layout, static_fallback(draw, (5.2, 4.2)),
                        "Heat map of the toy sentence's attention weights at beta = 1: each row spreads its "
                        "weight over several words.", start=start, control_label="inverse temperature β")
