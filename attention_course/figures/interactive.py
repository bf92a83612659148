"""The book's interactive figures, one per chapter 1-6 and a head explorer for chapters 4, 5 and 7.

Each builder computes its frames with the package's own lenses (the same functions the
chapters' verdicts use), on a fixed grid and fixed seeds, and returns a
:class:`~attention_course.figures.widgets.SliderFigure` or
:class:`~attention_course.figures.widgets.PickerFigure`: HTML that draws with the book's
local plotly.js, with a static PNG fallback drawn by matplotlib. Traces are plain dicts in
plotly's JSON schema, so the package needs plotly only for its JavaScript file.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import matplotlib.pyplot as plt
import numpy as np
import torch

from ..core.attention import softmax
from ..lenses.kernels import mse, nadaraya_watson, sine_data
from ..lenses.lowrank import (crossover_beta, effective_rank, singular_values, synthetic_attention,
                              temperature_sweep)
from ..lenses.heads import smallest_head_angles
from ..lenses.qk_kernel import qk_locality
from ..lenses.roles import ROLES, head_role_scores
from ..lenses.topology import effective_keys
from ..lenses.scaling import softmax_jacobian_norm
from ..models.pretrained import attention_maps, minilm_weights
from ..models.tasks import toy_sentence
from .style import DPI, book_style, role_color
from .widgets import PickerFigure, SliderFigure

__all__ = ["temperature_explorer", "bandwidth_explorer", "key_norm_explorer", "lowrank_explorer", "scale_explorer",
           "head_explorer", "head_explorer_data", "load_head_explorer_data", "stored_head_explorer",
           "row_entropy",
           "EXPLORER_SENTENCE", "EXPLORER_DATA"]

#: The sentence of the head explorer: repeated words (the, cat), punctuation, two clauses.
EXPLORER_SENTENCE = "The cat sat on the mat, and then the cat slept."
#: MiniLM's maps for it, stored: float32 forward passes differ in their last bits across CPUs,
#: and the figure's HTML must be the same on every machine (nbval compares it).
EXPLORER_DATA = Path(__file__).resolve().parents[1] / "data" / "head_explorer.json"

_AXIS = {"showgrid": False, "zeroline": False}
_FONT = {"size": 13}


def row_entropy(A: np.ndarray) -> np.ndarray:
    r"""Entropy :math:`-\sum_j a_{ij}\log a_{ij}` of each row (nats); shape ``A.shape[:-1]``.

    Examples
    --------
    >>> row_entropy(np.full((2, 4), 0.25)).round(4).tolist()
    [1.3863, 1.3863]
    """
    A = np.asarray(A, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.where(A > 0, A * np.log(A), 0.0).sum(axis=-1)


def _fallback(draw, figsize=(6.4, 3.4)):
    with book_style():
        fig, ax = plt.subplots(figsize=figsize, layout="constrained", dpi=DPI)
        draw(fig, ax)
    plt.close(fig)  # only its PNG is kept; do not display it twice in a notebook
    return fig


# ------------------------------------------------------------------ chapter 1
def temperature_explorer(betas: Optional[Sequence[float]] = None, query: int = 2) -> SliderFigure:
    r"""Chapter 1: softmax at inverse temperature :math:`\beta` on one row and on the toy sentence.

    Frame :math:`\beta` shows :math:`\operatorname{softmax}(\beta\,QK^\top/\sqrt{d_k})` for the
    toy sentence (:func:`attention_course.models.tasks.toy_sentence`) and one query's row as
    bars; the readout gives the row's entropy against the uniform row's :math:`\log n`.

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
    layout = {"height": 560, "margin": {"l": 60, "r": 10, "t": 10, "b": 40}, "font": _FONT,
              "xaxis": {**_AXIS, "domain": [0, 0.85]}, "yaxis": {"domain": [0.62, 1], "range": [0, 1],
                                                               "title": {"text": "weight"}},
              "xaxis2": {**_AXIS, "domain": [0, 0.85], "anchor": "y2", "title": {"text": "key"}},
              "yaxis2": {**_AXIS, "domain": [0, 0.5], "autorange": "reversed", "title": {"text": "query"}},
              "showlegend": False}
    start = betas.index(1.0) if 1.0 in betas else 0

    def draw(fig, ax):
        A = np.asarray(softmax(betas[start] * logits, axis=-1))
        im = ax.imshow(A, vmin=0, vmax=1)
        ax.set(xticks=range(n), yticks=range(n), xticklabels=toks, yticklabels=toks, xlabel="key",
               ylabel="query", title=f"Attention weights at β = {betas[start]:g}")
        ax.tick_params(axis="x", labelrotation=45)
        fig.colorbar(im, ax=ax, label="weight")

    return SliderFigure("ix-mech-temperature", "Turn the temperature: one row and the whole matrix",
                        [f"β = {b:g}" for b in betas], frames, layout, _fallback(draw, (5.2, 4.2)),
                        "Heat map of the toy sentence's attention weights at beta = 1: each row spreads its "
                        "weight over several words.", start=start, control_label="inverse temperature β")


# ------------------------------------------------------------------ chapter 2
def bandwidth_explorer(bandwidths: Optional[Sequence[float]] = None, seed: int = 0) -> SliderFigure:
    r"""Chapter 2: the Gaussian Nadaraya-Watson fit at each bandwidth, with train and test error.

    The flip marker sits at the bandwidth with the smallest test error: narrower fits the noise,
    wider washes out the curve.

    Examples
    --------
    >>> fig = bandwidth_explorer([0.1, 0.5, 2.0])
    >>> len(fig.frames), fig.flip in (0, 1, 2)
    (3, True)
    """
    hs = [0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.7, 1.0, 1.5, 2.0] if bandwidths is None else list(bandwidths)
    data = sine_data(seed=seed)
    grid = np.linspace(0, 5, 101)  # (101,)
    frames, test_err = [], []
    for h in hs:
        fit, _ = nadaraya_watson(grid, data.x_train, data.y_train, bandwidth=h)
        train, _ = nadaraya_watson(data.x_train, data.x_train, data.y_train, bandwidth=h)
        test, _ = nadaraya_watson(data.x_test, data.x_train, data.y_train, bandwidth=h)
        e_tr, e_te = mse(train, data.y_train), mse(test, data.y_test)
        test_err.append(e_te)
        frames.append({
            "data": [
                {"type": "scatter", "mode": "markers", "x": data.x_train, "y": data.y_train, "name": "training data",
                 "marker": {"color": "#777777", "size": 6}},
                {"type": "scatter", "mode": "lines", "x": data.x_test, "y": data.y_test, "name": "true curve",
                 "line": {"color": "#000000", "dash": "dot"}},
                {"type": "scatter", "mode": "lines", "x": grid, "y": np.asarray(fit), "name": f"fit, h = {h:g}",
                 "line": {"color": "#D55E00", "width": 3}},
            ],
            "readout": f"bandwidth h = {h:g}: training error {e_tr:.3f}, test error {e_te:.3f}",
        })
    best = int(np.argmin(test_err))
    layout = {"height": 380, "margin": {"l": 50, "r": 10, "t": 10, "b": 45}, "font": _FONT,
              "xaxis": {"title": {"text": "x"}}, "yaxis": {"title": {"text": "y"}},
              "legend": {"orientation": "h", "y": -0.2}}

    def draw(fig, ax):
        fit, _ = nadaraya_watson(grid, data.x_train, data.y_train, bandwidth=hs[best])
        ax.plot(data.x_train, data.y_train, "o", color="0.5", ms=4, label="training data")
        ax.plot(data.x_test, data.y_test, ":", color="k", label="true curve")
        ax.plot(grid, np.asarray(fit), color="#D55E00", lw=2, label=f"fit, h = {hs[best]:g}")
        ax.set(xlabel="x", ylabel="y", title="Nadaraya-Watson at the best test bandwidth")
        ax.legend()

    return SliderFigure("ix-kern-bandwidth", "Choose the bandwidth of the kernel smoother",
                        [f"h = {h:g}" for h in hs], frames, layout, _fallback(draw),
                        "Noisy training points, the true curve and the Nadaraya-Watson fit at the bandwidth with "
                        "the lowest test error.", start=best, control_label="bandwidth h", flip=best,
                        flip_note="lowest test error; narrower fits noise, wider flattens the curve")


def key_norm_explorer(ratios: Optional[Sequence[float]] = None, marks: Optional[dict] = None,
                      T: int = 24, S: int = 48, d: int = 16, seed: int = 0) -> SliderFigure:
    r"""Chapter 2: how far the keys' norms spread decides whether attention is a smoothing kernel.

    Queries have iid unit-variance entries; keys have random directions and norms spread
    geometrically so that the largest over the smallest is ``ratio`` (mean norm
    :math:`\sqrt d`). Each frame shows one query's weights against its distance to every key
    (colour: the key's norm) and the readout the measures of
    :func:`~attention_course.lenses.qk_kernel.qk_locality` over all queries. ``marks`` maps a
    label to a norm ratio (e.g. MiniLM's median head) to flag on the slider.

    Examples
    --------
    >>> fig = key_norm_explorer([1.0, 4.0], marks={"here": 3.9}, T=4, S=6, d=4)
    >>> fig.labels, fig.flips[0][0]
    (['max/min key norm = 1', 'max/min key norm = 4'], 1)
    """
    ratios = [1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.5, 8.0] if ratios is None else list(ratios)
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(T, d))  # (T, d)
    u = rng.normal(size=(S, d))
    u /= np.linalg.norm(u, axis=1, keepdims=True)  # (S, d) unit directions
    spread = rng.permutation(np.linspace(-0.5, 0.5, S))  # (S,) each key's place in the spread
    frames, rc = [], []
    for r in ratios:
        k = u * (np.sqrt(d) * r ** spread)[:, None]  # (S, d): norms from sqrt(d)/sqrt(r) to sqrt(d)*sqrt(r)
        loc = qk_locality(q, k)
        rc.append(float(loc["rank_corr"]))
        scores = q[0] @ k.T / np.sqrt(d)  # (S,) the first query's scores
        w = np.exp(scores - scores.max())
        w /= w.sum()
        frames.append({"data": [{
            "type": "scatter", "mode": "markers", "x": np.linalg.norm(q[0] - k, axis=1), "y": w,
            "marker": {"color": np.linalg.norm(k, axis=1), "colorscale": "Viridis", "size": 8,
                       "colorbar": {"title": {"text": "‖k‖"}}},
            "hovertemplate": "distance %{x:.2f}: weight %{y:.3f}<extra></extra>"}],
            "readout": (f"Over {T} queries: weight against nearness, median rank correlation {float(loc['rank_corr']):.2f}; "
                        f"the nearest key wins {float(loc['nearest_wins']):.0%} of the time (chance {1 / S:.0%}); "
                        f"the distance term explains {float(loc['distance_share']):.0%} of a row's score variance, "
                        f"the key-norm term {float(loc['norm_share']):.0%}.")})
    flips = [(int(np.argmin(np.abs(np.log(np.array(ratios) / v)))), label) for label, v in (marks or {}).items()]
    layout = {"height": 400, "margin": {"l": 55, "r": 10, "t": 10, "b": 45}, "font": _FONT,
              "xaxis": {"title": {"text": "distance ‖q − k‖ from the first query"}},
              "yaxis": {"title": {"text": "attention weight"}, "rangemode": "tozero"}}

    def draw(fig, ax):
        ax.plot(ratios, rc, "o-", color="#0072B2")
        for i, label in flips:
            ax.axvline(ratios[i], color="0.5", ls=":")
            ax.annotate(label, (ratios[i], min(rc)), rotation=90, va="bottom", ha="right", fontsize=9)
        ax.set(xscale="log", xlabel="largest / smallest key norm", ylabel="median rank correlation",
               title="Weight against nearness, as key norms spread")

    first = flips[0] if flips else (None, "")
    return SliderFigure("ix-kern-keynorms", "Spread the key norms: when is attention a smoothing kernel?",
                        [f"max/min key norm = {r:g}" for r in ratios], frames, layout, _fallback(draw),
                        "Median rank correlation between attention weight and nearness, falling as the key "
                        "norms spread further apart.", start=0, control_label="key-norm spread",
                        flip=first[0], flip_note=first[1], more_flips=flips[1:],
                        verdict="softmax-kernel")


# ------------------------------------------------------------------ chapter 3
def lowrank_explorer(betas: Optional[Sequence[float]] = None, n: int = 48, d: int = 16, k: int = 8,
                     seed: int = 0) -> SliderFigure:
    r"""Chapter 3: a synthetic attention matrix at inverse temperature :math:`\beta`, its singular
    values, and its best rank-``k`` against its top-``k``-per-row error.

    The flip marker sits at the grid point nearest the crossover (:func:`crossover_beta`): below
    it the rank-``k`` approximation is the better one, above it the sparse one.

    Examples
    --------
    >>> fig = lowrank_explorer([0.2, 1.0, 4.0], n=16, d=8, k=4)
    >>> len(fig.frames), fig.labels[0]
    (3, 'β = 0.2')
    """
    betas = [0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0] if betas is None else list(betas)
    sweep = temperature_sweep(betas, n=n, d=d, k=k, seed=seed)
    cross = crossover_beta(sweep)
    flip = int(np.argmin(np.abs(np.asarray(betas) - cross))) if np.isfinite(cross) else None
    frames = []
    for i, b in enumerate(betas):
        A = synthetic_attention(n, d, b, seed)  # (n, n)
        s = singular_values(A)  # (n,)
        frames.append({
            "data": [
                {"type": "heatmap", "z": A, "colorscale": "Viridis", "zmin": 0, "showscale": False,
                 "hovertemplate": "query %{y}, key %{x}: %{z:.3f}<extra></extra>", "xaxis": "x", "yaxis": "y"},
                {"type": "scatter", "mode": "lines+markers", "x": list(range(1, n + 1)), "y": s,
                 "marker": {"size": 4, "color": "#882255"}, "name": "singular values", "xaxis": "x2", "yaxis": "y2"},
                {"type": "scatter", "mode": "lines", "x": list(betas), "y": sweep["svd_error"], "name": f"rank-{k}",
                 "line": {"color": "#882255"}, "xaxis": "x3", "yaxis": "y3"},
                {"type": "scatter", "mode": "lines", "x": list(betas), "y": sweep["sparse_error"], "name": f"top-{k}",
                 "line": {"color": "#E69F00"}, "xaxis": "x3", "yaxis": "y3"},
                {"type": "scatter", "mode": "markers", "x": [b, b], "y": [sweep["svd_error"][i], sweep["sparse_error"][i]],
                 "marker": {"size": 10, "color": ["#882255", "#E69F00"]}, "showlegend": False,
                 "xaxis": "x3", "yaxis": "y3"},
            ],
            "readout": (f"β = {b:g}: effective rank {sweep['effective_rank'][i]:.1f} of {n}; relative error of the best "
                        f"rank-{k} matrix {sweep['svd_error'][i]:.3f}, of keeping the top {k} per row "
                        f"{sweep['sparse_error'][i]:.3f}."),
        })
    layout = {"height": 620, "margin": {"l": 55, "r": 10, "t": 10, "b": 45}, "font": _FONT,
              "xaxis": {**_AXIS, "domain": [0, 0.45], "title": {"text": "key"}},
              "yaxis": {**_AXIS, "domain": [0.45, 1], "autorange": "reversed", "title": {"text": "query"}},
              "xaxis2": {"domain": [0.58, 1], "anchor": "y2", "title": {"text": "singular value index i"}},
              "yaxis2": {"domain": [0.45, 1], "anchor": "x2", "type": "log", "title": {"text": "σ<sub>i</sub>"}},
              "xaxis3": {"domain": [0, 1], "anchor": "y3", "title": {"text": "inverse temperature β"}},
              "yaxis3": {"domain": [0, 0.32], "anchor": "x3", "title": {"text": "relative error"}},
              "legend": {"orientation": "h", "y": 0.36, "x": 0.5}}

    def draw(fig, ax):
        ax.plot(sweep["beta"], sweep["svd_error"], "o-", color="#882255", label=f"best rank-{k}")
        ax.plot(sweep["beta"], sweep["sparse_error"], "s-", color="#E69F00", label=f"top-{k} per row")
        if np.isfinite(cross):
            ax.axvline(cross, color="0.4", ls=":", label=f"crossover β ≈ {cross:.2f}")
        ax.set(xlabel="inverse temperature β", ylabel="relative error", title="Low rank or sparse?")
        ax.legend()

    return SliderFigure("ix-lowrank-temperature", "Sharpen the attention: low rank or sparse?",
                        [f"β = {b:g}" for b in betas], frames, layout, _fallback(draw),
                        f"Relative error of the best rank-{k} and the top-{k}-per-row approximations against the "
                        "inverse temperature; the rank-k error grows and the sparse error falls.",
                        start=betas.index(1.0) if 1.0 in betas else 0, control_label="inverse temperature β",
                        flip=flip, flip_note="rank-k and top-k errors cross: soft attention is low-rank, "
                                             "sharp attention sparse", verdict="low-rank")


# ------------------------------------------------------------------ chapter 6
def scale_explorer(d_ks: Optional[Sequence[int]] = None, n: int = 64, seed: int = 0,
                   threshold: float = 0.99) -> SliderFigure:
    r"""Chapter 6: at each :math:`d_k`, the spread of the scores, the share of saturated rows and
    the size of the softmax's Jacobian (the gradient it lets through), with and without the
    :math:`1/\sqrt{d_k}` scale (queries and keys with unit-variance entries).

    A row is *saturated* when its largest weight exceeds ``threshold``. One flag sits at
    :math:`d_k = 64`, from which the unscaled model failed to train in every run of chapter 6
    (the ``scale-decides-training`` verdict), another at the first :math:`d_k` where most
    unscaled rows are saturated at initialisation.

    Examples
    --------
    >>> fig = scale_explorer([4, 64, 1024], n=16)
    >>> fig.labels
    ['d_k = 4', 'd_k = 64', 'd_k = 1024']
    """
    d_ks = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024] if d_ks is None else list(d_ks)
    rng = np.random.default_rng(seed)
    frames, share_un = [], []
    for d in d_ks:
        q, k = rng.normal(size=(n, d)), rng.normal(size=(n, d))  # (n, d) each
        raw = q @ k.T  # (n, n)
        rows = {}
        for name, S in (("unscaled", raw), ("scaled", raw / np.sqrt(d))):
            A = np.asarray(softmax(S, axis=-1))  # (n, n)
            rows[name] = (S, A.max(axis=-1), float((A.max(axis=-1) > threshold).mean()),
                          float(np.median(softmax_jacobian_norm(A))))  # median ||J||_F over rows
        share_un.append(rows["unscaled"][2])
        traces = []
        for j, (name, color) in enumerate((("unscaled", "#D55E00"), ("scaled", "#0072B2"))):
            S, top, _, _ = rows[name]
            traces.append({"type": "histogram", "x": S.ravel()[::4], "name": f"{name} scores", "opacity": 0.6,
                           "marker": {"color": color}, "nbinsx": 40, "xaxis": "x", "yaxis": "y"})
            traces.append({"type": "histogram", "x": top, "name": f"{name}: largest weight per row",
                           "marker": {"color": color}, "opacity": 0.6, "xbins": {"start": 0, "end": 1.0001, "size": 0.05},
                           "xaxis": "x2", "yaxis": "y2", "showlegend": False})
        frames.append({"data": traces, "readout": (
            f"d_k = {d}: score std {rows['unscaled'][0].std():.2f} unscaled, {rows['scaled'][0].std():.2f} scaled; "
            f"saturated rows (largest weight > {threshold}): {rows['unscaled'][2]:.0%} unscaled, "
            f"{rows['scaled'][2]:.0%} scaled; softmax Jacobian, median ‖J‖<sub>F</sub> over rows: "
            f"{rows['unscaled'][3]:.2g} unscaled, {rows['scaled'][3]:.2g} scaled (uniform row "
            f"{np.sqrt(n - 1) / n:.2g}).")})
    over = [i for i, s in enumerate(share_un) if s > 0.5]
    layout = {"height": 560, "barmode": "overlay", "margin": {"l": 55, "r": 10, "t": 10, "b": 45}, "font": _FONT,
              "xaxis": {"domain": [0, 1], "title": {"text": "score q·k (or q·k/√d_k)"}},
              "yaxis": {"domain": [0.6, 1], "title": {"text": "count"}},
              "xaxis2": {"domain": [0, 1], "anchor": "y2", "range": [0, 1.02],
                         "title": {"text": "largest weight in the row"}},
              "yaxis2": {"domain": [0, 0.42], "anchor": "x2", "title": {"text": "rows"}},
              "legend": {"orientation": "h", "y": 1.12}}

    def draw(fig, ax):
        ax.plot(d_ks, share_un, "o-", color="#D55E00", label="without the scale")
        ax.set(xscale="log", xlabel="$d_k$", ylabel=f"share of rows with max weight > {threshold}",
               title="Saturated rows against $d_k$")
        ax.legend()

    return SliderFigure("ix-scale-dk", "Grow d_k with and without the scale",
                        [f"d_k = {d}" for d in d_ks], frames, layout, _fallback(draw),
                        "Share of saturated softmax rows against d_k without the scale: it climbs towards one as "
                        "d_k grows.", start=d_ks.index(64) if 64 in d_ks else 0, control_label="key width d_k",
                        flip=d_ks.index(64) if 64 in d_ks else None,
                        flip_note="from here on the unscaled model failed to train in every run "
                                  "(chapter 6's verdict on training)",
                        more_flips=[(over[0], "most unscaled rows are saturated from the start")] if over else (),
                        verdict="scale-decides-training")


# ------------------------------------------------------------------ chapters 4, 5, 7
def head_explorer_data(text: str = EXPLORER_SENTENCE, digits: int = 4) -> dict:
    """MiniLM's attention maps for ``text``, rounded to ``digits`` decimals (what is stored).

    Returns ``{"text", "tokens", "maps", "query_angle"}``: ``maps`` a nested list of shape
    (6, 12, n, n); ``query_angle`` (6, 12), in degrees, the smallest principal angle between a
    head's query subspace (its columns of W_Q) and that of any other head of its layer.
    Write it with ``json.dump`` to :data:`EXPLORER_DATA` after changing the sentence.
    """
    tokens, maps = attention_maps(text)  # maps: (6, 12, n, n)
    w = minilm_weights().to(torch.float64)
    angles = [np.degrees(smallest_head_angles(L.W_q, w.num_heads)) for L in w.layers]  # 6 x (12, 12)
    nearest = [np.where(np.eye(len(a), dtype=bool), np.inf, a).min(axis=1) for a in angles]  # 6 x (12,)
    return {"text": text, "tokens": list(tokens), "maps": np.round(maps, digits).tolist(),
            "query_angle": np.round(np.stack(nearest), 2).tolist()}


def stored_head_explorer(start: tuple[int, int] = (0, 0), path: Path = EXPLORER_DATA) -> PickerFigure:
    """:func:`head_explorer` on the stored sentence, with the stored query-subspace angles.

    Examples
    --------
    >>> stored_head_explorer(start=(1, 5)).labels[17]
    'layer 2, head 6'
    """
    with open(path, encoding="utf-8") as f:
        d = json.load(f)
    return head_explorer(np.asarray(d["maps"], dtype=float), d["tokens"], start=start,
                         query_angle=np.asarray(d["query_angle"], dtype=float))


def load_head_explorer_data(path: Path = EXPLORER_DATA) -> tuple[list[str], np.ndarray]:
    """The stored ``(tokens, maps)`` of :data:`EXPLORER_SENTENCE`; maps shape (6, 12, n, n).

    Examples
    --------
    >>> tokens, maps = load_head_explorer_data()
    >>> tokens[:3], maps.shape[:2], bool(np.allclose(maps.sum(-1), 1, atol=1e-3))
    (['[CLS]', 'the', 'cat'], (6, 12), True)
    """
    with open(path, encoding="utf-8") as f:
        d = json.load(f)
    return d["tokens"], np.asarray(d["maps"], dtype=float)


_CLAIM_LINKS = (("04_multi_head.html#claim-heads-specialise", "heads specialise (ch. 4)"),
                ("04_multi_head.html#claim-different-subspaces", "different subspaces (ch. 4)"),
                ("03_low_rank.html#claim-low-rank-real", "low rank in a trained model (ch. 3)"),
                ("05_message_passing.html#claim-learned-topology", "a learned graph (ch. 5)"),
                ("07_insight.html#claim-content-not-position", "content, not position (ch. 7)"))


def head_explorer(maps: np.ndarray, tokens: Sequence[str], start: tuple[int, int] = (0, 0),
                  query_angle: Optional[np.ndarray] = None) -> PickerFigure:
    r"""Chapters 4, 5, 7: every MiniLM head on one sentence, with the course's measurements.

    Parameters
    ----------
    maps : array, shape (layers, heads, n, n)
        Attention weights for one sentence (:func:`attention_course.models.pretrained.attention_maps`).
    tokens : sequence of str, length n
    query_angle : array, shape (layers, heads), optional
        Each head's smallest principal angle (degrees) to another head's query subspace in
        its layer (chapter 4's measure), shown in the readout when given.

    The readout of each head gives its mean row entropy, the effective rank of its matrix, its
    strongest role (:mod:`attention_course.lenses.roles`) and the mean number of keys holding 80%
    of a row's weight, and links the verdicts these numbers bear on.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> maps = rng.dirichlet(np.ones(4), size=(2, 3, 4))  # (2, 3, 4, 4)
    >>> fig = head_explorer(maps, ["[CLS]", "a", "b", "[SEP]"])
    >>> len(fig.frames), fig.labels[-1]
    (6, 'layer 2, head 3')
    """
    maps = np.asarray(maps, dtype=float)
    if maps.ndim != 4 or maps.shape[2] != maps.shape[3] or maps.shape[3] != len(tokens):
        raise ValueError(f"maps has shape {maps.shape}; expected (layers, heads, n, n) with n = len(tokens) "
                         f"= {len(tokens)}")
    L, H, n, _ = maps.shape
    scores = head_role_scores(maps, tokens)  # role -> (L, H)
    toks = [f"{i}:{t}" for i, t in enumerate(tokens)]
    links = " · ".join(f'<a href="{href}">{html.escape(text)}</a>' for href, text in _CLAIM_LINKS)
    frames, labels = [], []
    for l in range(L):
        for h in range(H):
            A = maps[l, h]
            role = max(ROLES, key=lambda r: scores[r][l, h])
            frames.append({
                "data": [{"type": "heatmap", "z": A, "x": toks, "y": toks, "zmin": 0, "zmax": float(maps[l, h].max()),
                          "colorscale": "Viridis", "colorbar": {"title": {"text": "weight"}},
                          "hovertemplate": "%{y} attends to %{x}: %{z:.3f}<extra></extra>"}],
                "readout": (f"Layer {l + 1}, head {h + 1}: mean row entropy {row_entropy(A).mean():.2f} nats "
                            f"(uniform {np.log(n):.2f}); effective rank {float(effective_rank(A)):.1f} of {n}; "
                            f"strongest role <b style=\"color:{role_color(role)}\">{html.escape(role)}</b> "
                            f"({scores[role][l, h]:.2f} of a row's weight); 80% of a row's weight on "
                            f"{np.mean([len(keys) for keys in effective_keys(A)]):.1f} keys on average"
                            + ("" if query_angle is None else
                               f"; its query subspace is {query_angle[l, h]:.1f}° from the nearest other "
                               f"head's in its layer (0° = a shared direction)")
                            + f".<br>Bears on: {links}"),
            })
            labels.append(f"layer {l + 1}, head {h + 1}")
    layout = {"height": 520, "margin": {"l": 80, "r": 10, "t": 10, "b": 80}, "font": _FONT,
              "xaxis": {**_AXIS, "title": {"text": "key"}, "tickangle": -45},
              "yaxis": {**_AXIS, "autorange": "reversed", "title": {"text": "query"}}}
    i0 = start[0] * H + start[1]

    def draw(fig, ax):
        im = ax.imshow(maps[start], vmin=0)
        ax.set(xticks=range(n), yticks=range(n), xticklabels=toks, yticklabels=toks, xlabel="key", ylabel="query",
               title=f"MiniLM layer {start[0] + 1}, head {start[1] + 1}")
        ax.tick_params(axis="x", labelrotation=90)
        fig.colorbar(im, ax=ax, label="weight")

    return PickerFigure("ix-heads-explorer", "Every MiniLM head on one sentence", labels, frames, layout,
                        _fallback(draw, (6.0, 5.2)), "Heat map of one MiniLM head's attention weights on the "
                        "sentence, query tokens down, key tokens across.", start=i0, control_label="head")
