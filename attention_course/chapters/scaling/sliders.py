r"""Chapter 6's sliders: the lesson's :func:`width_explorer`, and the flagged ``variance-dk``
(:func:`correlation_explorer`), ``scale-decides-training`` (:func:`scale_explorer`), ``sensitive-regime``
(:func:`keys_explorer`) and ``gradient-vanishes`` (:func:`start_scale_explorer`). The numbers come from the
chapter's modules; this one only draws.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import numpy as np

from ...core.attention import softmax
from ...figures.widgets import PLOTLY_FONT, SliderFigure, static_fallback
from .correlated_scores import (
    CORRELATIONS,
    D_KS,
    correlated_dot_variance,
    correlated_variance_theory,
    correlation_grid,
    independence_rejected,
    minilm_correlation,
)
from .backward_swap import START_FACTORS, STORED_BACKWARD, STORED_BACKWARD_ROWS, STORED_BACKWARD_START, load_backward
from .measures import VarianceSweep, softmax_jacobian_norm
from .sensitive_regime import half_maximum_band, jacobian_at, jacobian_floor, jacobian_vs_spread

__all__ = [
    "correlation_explorer", "scale_explorer", "width_explorer", "KEY_COUNTS", "keys_explorer", "start_scale_runs",
    "start_scale_explorer",
]

#: The slider's numbers of keys (``sensitive-regime``), and the grid of spreads chapter 6 measures on.
KEY_COUNTS = (8, 12, 16, 20, 24, 32, 64, 256)
SPREADS = np.geomspace(0.05, 50, 61)
#: The widths of :func:`scale_explorer` and :func:`width_explorer`.
D_KS_SLIDER = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)

_FONT = {"size": 13}


def _log_range(s: VarianceSweep, dims: np.ndarray, c: float, z: float) -> list[float]:
    """A log10 y-range holding the ``z``-s.e. bars and the closed form, and at least 0.9 to 1.1 (one frame's axis)."""
    bars = np.concatenate([(s.empirical - z * s.std_error) / dims, (s.empirical + z * s.std_error) / dims,
                           correlated_variance_theory(dims, c) / dims])  # every height drawn
    return [math.log10(min(0.9, bars.min()) / 1.05), math.log10(max(1.1, bars.max()) * 1.05)]


def correlation_explorer(corrs: Sequence[float] = CORRELATIONS, minilm_ratio: Optional[float] = None,
                         minilm_d_k: int = 32, d_ks: Sequence[int] = D_KS, n_samples: int = 10000,
                         seed: int = 0, alpha: float = 0.01) -> SliderFigure:
    r"""Chapter 6: correlate the entries of :math:`q` and of :math:`k`, and watch :math:`\operatorname{Var}(q\cdot k)/d_k`.

    Each frame plots against :math:`d_k` the measured ratio with
    :func:`~attention_course.chapters.scaling.correlated_scores.bonferroni_z` standard-error bars, the
    independence formula (1) and the closed form :math:`1 + (d_k - 1)c^2`; the flag sits at the first
    rejected :math:`c`. ``minilm_ratio`` (MiniLM's median ratio at ``minilm_d_k``) adds the frame of the
    correlation that would explain it, and a second flag.

    Examples
    --------
    >>> fig = correlation_explorer([0.0, 0.3], minilm_ratio=1.93, d_ks=[4, 64], n_samples=2000)
    >>> fig.labels, fig.flip, fig.flips[1][0]
    (['c = 0', 'c = 0.173', 'c = 0.3'], 1, 1)
    """
    if not len(corrs) or min(corrs) != 0.0:
        raise ValueError(f"corrs={list(corrs)}; expected correlations starting at 0 (independent entries, the baseline)")
    c_mini = None if minilm_ratio is None else minilm_correlation(minilm_ratio, minilm_d_k)
    corrs = correlation_grid(corrs, minilm_ratio, minilm_d_k)
    sweeps = correlated_dot_variance(corrs, d_ks, n_samples, seed)
    max_z, z_star, flip = independence_rejected(sweeps, alpha)
    dims = sweeps[0].d_k.astype(float)
    grid = np.geomspace(dims[0], dims[-1], 60)  # (60,) for the closed-form curves
    i_d = int(np.argmin(np.abs(np.log(dims / minilm_d_k))))  # the width nearest MiniLM's
    y_axis = {"type": "log", "title": {"text": "Var(q·k) / d_k"}}
    frames = []
    for c, s, z in zip(corrs, sweeps, max_z):
        frames.append({
            "data": [
                {"type": "scatter", "mode": "lines", "x": grid, "y": np.ones_like(grid), "name": "independence: 1",
                 "line": {"color": "#777777", "dash": "dot"}},
                {"type": "scatter", "mode": "lines", "x": grid, "y": correlated_variance_theory(grid, c) / grid,
                 "name": "closed form 1 + (d_k − 1)c²", "line": {"color": "#0072B2"}},
                {"type": "scatter", "mode": "markers", "x": dims, "y": s.empirical / dims,
                 "name": f"measured, ± {z_star:.2f} s.e.",
                 "error_y": {"type": "data", "array": z_star * s.std_error / dims, "visible": True},
                 "marker": {"color": "#D55E00", "size": 8},
                 "hovertemplate": "d_k = %{x}: Var/d_k = %{y:.3f}<extra></extra>"}],
            "layout": {"yaxis": {**y_axis, "range": _log_range(s, dims, c, z_star)}},
            "readout": (f"c = {c:.3g}: largest deviation from Var(q·k) = d_k is <b>{z:.1f}</b> standard errors "
                        f"(line: {z_star:.2f}, {alpha:.0%} for all {len(dims)} widths together); at d_k = "
                        f"{int(dims[i_d])} Var(q·k)/d_k = {s.empirical[i_d] / dims[i_d]:.2f} "
                        f"(closed form {float(correlated_variance_theory(dims[i_d], c)) / dims[i_d]:.2f}), at d_k = "
                        f"{int(dims[-1])} {s.empirical[-1] / dims[-1]:.2f}."),
        })
    layout = {"height": 460, "margin": {"l": 60, "r": 10, "t": 10, "b": 45}, "font": _FONT,
              "xaxis": {"type": "log", "title": {"text": "d_k"}}, "yaxis": y_axis,
              "legend": {"orientation": "h", "y": -0.2, "yanchor": "top", "x": 0}}

    def draw(fig, ax):
        ax.plot(corrs, max_z, "o-", color="#D55E00", label="largest deviation over the widths")
        ax.axhline(z_star, color="0.4", ls=":", label=f"Monte-Carlo line, {z_star:.2f} s.e.")
        if flip is not None:
            ax.axvline(corrs[flip], color="#0072B2", ls="--", label=f"first rejected, c = {corrs[flip]:.3g}")
        ax.set_xscale("symlog", linthresh=0.01)
        ax.set(xlim=(0, 1.2 * corrs[-1]), xlabel="correlation c between two entries of q (and of k)", yscale="log",
               ylabel="|Var − d_k| / s.e.", title="When does Var(q·k) = d_k stop holding?")
        ax.legend()

    labels = [f"c = {c:.3g}" for c in corrs]
    mark = f"MiniLM's median ratio {minilm_ratio:g} at d_k = {minilm_d_k}, if it all came from correlated entries"
    more = [] if c_mini is None else [(corrs.index(c_mini), mark)]
    return SliderFigure("ix-scale-correlation", "Correlate the entries: when does Var(q·k) = d_k stop holding?",
                        labels, frames, layout, static_fallback(draw),
                        "Largest deviation of the measured variance of q·k from d_k, in standard errors, against "
                        "the correlation between entries: below the Monte-Carlo line at 0, far above it from small "
                        "correlations on.", start=0, control_label="correlation c between entries",
                        flip=flip, flip_note="the independence formula Var(q·k) = d_k is rejected beyond the "
                                             "Monte-Carlo error (at the widest d_k first)",
                        more_flips=more, verdict="variance-dk")


# ------------------------------------------------------------------ chapter 6
_SCALE_COLORS = (("unscaled", "#D55E00"), ("scaled", "#0072B2"))
#: The lesson's slider draws the scales in the colours of the lesson's figures (tab:red and tab:blue, ``SCALE_COLOR``).
_LESSON_SCALE_COLORS = (("unscaled", "#d62728"), ("scaled", "#1f77b4"))


def _dk_frames(d_ks: list[int], n: int, seed: int, threshold: float, n_batches: int,
               colors: tuple[tuple[str, str], ...] = _SCALE_COLORS):
    """The frames of :func:`scale_explorer` and :func:`width_explorer`, one per width.

    Returns ``(frames, share_un, first)``: the share of saturated unscaled rows per width, and per width
    ``{"unscaled"/"scaled": (first batch's scores (T, S), its rows' largest weights (T,))}``.
    """
    frames, share_un, first = [], [], []
    for d in d_ks:
        rng = np.random.default_rng([seed, d])  # the rows of saturation_stats and of the lesson
        q = rng.standard_normal((n_batches, n, d))  # (B, T, d_k)
        k = rng.standard_normal((n_batches, n, d))  # (B, S, d_k)
        raw = q @ k.transpose(0, 2, 1)  # (B, T, S)
        rows = {}
        for name, S in (("unscaled", raw), ("scaled", raw / np.sqrt(d))):
            A = np.asarray(softmax(S, axis=-1))  # (B, T, S), normalised over the S keys
            top = A.max(axis=-1)  # (B, T)
            rows[name] = (S[0], top[0], float((top > threshold).mean()),
                          float(np.median(softmax_jacobian_norm(A))))  # median ||J||_F over all B * T rows
        share_un.append(rows["unscaled"][2])
        first.append({name: rows[name][:2] for name in rows})
        traces = []
        for name, color in colors:
            S, top, _, _ = rows[name]
            traces.append({"type": "histogram", "x": S.ravel()[::4], "name": f"{name} scores", "opacity": 0.6,
                           "marker": {"color": color}, "nbinsx": 40, "xaxis": "x", "yaxis": "y"})
            traces.append({"type": "histogram", "x": top, "name": f"{name}: largest weight per row",
                           "marker": {"color": color}, "opacity": 0.6, "xbins": {"start": 0, "end": 1.0001, "size": 0.05},
                           "xaxis": "x2", "yaxis": "y2", "showlegend": False})
        frames.append({"data": traces, "readout": (
            f"d_k = {d}: score std {raw.std():.2f} unscaled, {raw.std() / np.sqrt(d):.2f} scaled; "
            f"over all {n_batches * n:,} rows, saturated (largest weight > {threshold}): "
            f"{rows['unscaled'][2]:.0%} unscaled, {rows['scaled'][2]:.0%} scaled; gradient let through, "
            f"median ‖J‖<sub>F</sub> over rows: {rows['unscaled'][3]:.2g} unscaled, {rows['scaled'][3]:.2g} scaled "
            f"(uniform row {np.sqrt(n - 1) / n:.2g}).")})
    return frames, share_un, first


# the legend sits under the lower panel, clear of the plotly toolbar (top right), also at 390 px
_DK_LAYOUT = {"height": 600, "barmode": "overlay", "margin": {"l": 55, "r": 10, "t": 30, "b": 100}, "font": PLOTLY_FONT,
              "xaxis": {"domain": [0, 1], "title": {"text": "score q·k (or q·k/√d_k)"}},
              "yaxis": {"domain": [0.6, 1], "title": {"text": "count"}},
              "xaxis2": {"domain": [0, 1], "anchor": "y2", "range": [0, 1.02],
                         "title": {"text": "largest weight in the row"}},
              "yaxis2": {"domain": [0, 0.42], "anchor": "x2", "title": {"text": "rows"}},
              "legend": {"orientation": "h", "x": 0, "y": -0.14, "yanchor": "top"}}


def scale_explorer(d_ks: Optional[Sequence[int]] = None, n: int = 64, seed: int = 0,
                   threshold: float = 0.99, flags: bool = True, n_batches: int = 64) -> SliderFigure:
    r"""Chapter 6: at each :math:`d_k`, the spread of the scores, the share of saturated rows and the softmax's Jacobian, with and without :math:`1/\sqrt{d_k}`.

    The rows of :func:`~attention_course.chapters.scaling.measures.saturation_stats` (seeded ``[seed, d_k]``);
    the histograms show the first batch. With ``flags`` (the evidence page), a flag at :math:`d_k = 64`
    (``scale-decides-training``) and one where most unscaled rows start saturated. The static image is the
    share of saturated rows against :math:`d_k`.

    Examples
    --------
    >>> fig = scale_explorer([4, 64, 1024], n=16, n_batches=4)
    >>> fig.labels, fig.flip, fig.verdict
    (['d_k = 4', 'd_k = 64', 'd_k = 1024'], 1, 'scale-decides-training')
    >>> plain = scale_explorer([4, 64, 1024], n=16, n_batches=4, flags=False)
    >>> plain.flip, plain.flips, plain.verdict
    (None, [], '')
    """
    d_ks = list(D_KS_SLIDER if d_ks is None else d_ks)
    frames, share_un, _ = _dk_frames(d_ks, n, seed, threshold, n_batches)
    over = [i for i, s in enumerate(share_un) if s > 0.5]
    flagged = dict(flip=d_ks.index(64) if 64 in d_ks else None,
                   flip_note="from here on the unscaled model failed to train in every run "
                             "(chapter 6's verdict on training)",
                   more_flips=[(over[0], "most unscaled rows are saturated from the start")] if over else (),
                   verdict="scale-decides-training")

    def draw(fig, ax):
        ax.plot(d_ks, share_un, "o-", color="#D55E00", label="without the scale")
        ax.set(xscale="log", xlabel="$d_k$", ylabel=f"share of rows with max weight > {threshold}",
               title="Saturated rows against $d_k$")
        ax.legend()

    return SliderFigure("ix-scale-dk", "Grow d_k with and without the scale",
                        [f"d_k = {d}" for d in d_ks], frames, _DK_LAYOUT, static_fallback(draw),
                        "Share of saturated softmax rows against d_k without the scale: it climbs towards one as "
                        "d_k grows.", start=d_ks.index(64) if 64 in d_ks else 0, control_label="key width d_k",
                        **(flagged if flags else {}))


def width_explorer(d_ks: Optional[Sequence[int]] = None, n: int = 64, seed: int = 0,
                   threshold: float = 0.99, n_batches: int = 64, start: int = 64) -> SliderFigure:
    r"""The lesson's slider: :func:`scale_explorer`'s frames without flags; its static image draws both panels at ``start``.

    Examples
    --------
    >>> fig = width_explorer([4, 64, 1024], n=16, n_batches=4)
    >>> fig.labels[fig.start], fig.flip, fig.verdict
    ('d_k = 64', None, '')
    >>> [ax.get_xlabel() for ax in fig.fallback.axes]
    ['score q·k (or q·k/√d_k)', 'largest weight in the row']
    """
    d_ks = list(D_KS_SLIDER if d_ks is None else d_ks)
    if start not in d_ks:
        raise ValueError(f"start={start} is not one of the widths d_ks={d_ks}")
    frames, _, first = _dk_frames(d_ks, n, seed, threshold, n_batches, _LESSON_SCALE_COLORS)
    i0 = d_ks.index(start)

    def draw(fig, ax):
        ax.remove()  # two panels, as the slider draws them
        top, bottom = fig.subplots(2, 1)
        for name, color in _LESSON_SCALE_COLORS:
            S, largest = first[i0][name]
            top.hist(S.ravel()[::4], bins=40, color=color, alpha=0.6, label=f"{name} scores")
            bottom.hist(largest, bins=np.linspace(0, 1, 21), color=color, alpha=0.6)
        top.set(xlabel="score q·k (or q·k/√d_k)", ylabel="count", title=f"One batch of {n} rows at $d_k$ = {start}")
        bottom.set(xlabel="largest weight in the row", ylabel="rows", xlim=(0, 1.02))
        top.legend()

    return SliderFigure("ix-scale-dk", "Grow d_k with and without the scale",
                        [f"d_k = {d}" for d in d_ks], frames, _DK_LAYOUT, static_fallback(draw, figsize=(6.4, 5.6)),
                        f"At d_k = {start}, one batch of {n} rows: the unscaled scores spread far wider than the "
                        "scaled ones, and many unscaled rows put almost all their weight on one key, while the scaled "
                        "rows' largest weights stay small.", start=i0, control_label="key width d_k")


def keys_explorer(n_keys: Sequence[int] = KEY_COUNTS, curves: Optional[dict] = None,
                  sigmas: Sequence[float] = SPREADS, n_rows: int = 1024, deciding: tuple = (64, 4096),
                  seed: int = 0) -> SliderFigure:
    r"""Chapter 6: with how many keys does :math:`\sigma = 1` sit inside the softmax's sensitive band?

    Frame ``S``: :func:`~attention_course.chapters.scaling.sensitive_regime.jacobian_vs_spread` (``deciding[1]``
    rows at ``S = deciding[0]``, else ``n_rows``), its floor, the half-maximum band and :math:`\sigma = 1`; the
    flag sits at the first ``S`` where :math:`\sigma = 1`'s place against the band changes. ``curves`` maps
    ``S`` to a curve already measured on ``sigmas``.

    Examples
    --------
    >>> fig = keys_explorer([8, 64], n_rows=64, deciding=(64, 64))
    >>> fig.labels, fig.flip
    (['8 keys', '64 keys'], 1)
    """
    curves = dict(curves or {})
    sig = np.asarray(sigmas, dtype=float)
    rows = {S: (deciding[1] if S == deciding[0] else n_rows) for S in n_keys}
    Js = [np.asarray(curves[S]) if S in curves else jacobian_vs_spread(sig, n_keys=S, n_rows=rows[S], seed=seed)
          for S in n_keys]  # each (len(sigmas),)
    top = 1.05 * max(float(J.max()) for J in Js)
    frames, bands, places = [], [], []
    for S, J in zip(n_keys, Js):
        floor, band, j1 = jacobian_floor(S), half_maximum_band(sig, J, jacobian_floor(S)), jacobian_at(sig, J)
        bands.append(band)
        where = "inside" if band.lo <= 1 <= band.hi else ("below" if band.lo > 1 else "above")
        places.append(where)
        frames.append({"data": [
            {"type": "scatter", "mode": "lines", "x": [band.lo, band.lo, band.hi, band.hi], "y": [0, top, top, 0],
             "fill": "toself", "fillcolor": "rgba(0,114,178,0.15)", "line": {"width": 0}, "name": "sensitive band",
             "hoverinfo": "skip"},
            {"type": "scatter", "mode": "lines", "x": sig, "y": J, "name": "median ‖J‖<sub>F</sub>",
             "line": {"color": "#0072B2", "width": 3}},
            {"type": "scatter", "mode": "lines", "x": [sig[0], sig[-1]], "y": [floor, floor], "name": "uniform row",
             "line": {"color": "#777777", "dash": "dot"}},
            {"type": "scatter", "mode": "lines+markers", "x": [1, 1], "y": [0, j1], "name": "σ = 1 (the scale)",
             "line": {"color": "#D55E00"}, "marker": {"size": [0, 11], "color": "#D55E00"}}],
            "readout": (f"{S} keys ({rows[S]:,} rows): the sensitive band runs from σ = {band.lo:.2f} to {band.hi:.2f} "
                        f"(peak {float(J.max()):.3f} at σ ≈ {band.peak:.1f}); at σ = 1 the median ‖J‖<sub>F</sub> is "
                        f"{j1:.3f}, uniform row {floor:.3f}. σ = 1 lies <b>{where}</b> the band of the most sensitive "
                        f"spreads.")})
    flip = next((i for i, v in enumerate(places) if v != places[0]), None)
    layout = {"height": 460, "margin": {"l": 60, "r": 10, "t": 80, "b": 45}, "font": PLOTLY_FONT,
              "xaxis": {"type": "log", "title": {"text": "spread σ of the logits (log scale)"}},
              "yaxis": {"range": [0, top], "title": {"text": "median ‖J‖_F"}},
              "legend": {"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0}}  # above: a phone wraps it

    def draw(fig, ax):
        ax.fill_between(n_keys, [b.lo for b in bands], [b.hi for b in bands], color="#0072B2", alpha=0.2,
                        label="sensitive band")
        ax.axhline(1, color="#D55E00", label="σ = 1 (the scale)")
        if flip is not None:
            ax.axvline(n_keys[flip], color="0.4", ls=":", label=f"{n_keys[flip]} keys: σ = 1 below the band")
        ax.set(xscale="log", yscale="log", xlabel="number of keys S", ylabel="spread σ",
               title="The sensitive band against the number of keys")
        ax.set_xticks(list(n_keys), [str(S) for S in n_keys], minor=False)
        ax.set_xticks([], minor=True)
        ax.set_yticks([0.5, 1, 2, 4, 8], ["0.5", "1", "2", "4", "8"], minor=False)
        ax.set_yticks([], minor=True)
        ax.legend(loc="upper left")

    i_dec = list(n_keys).index(deciding[0]) if deciding[0] in n_keys else None
    more = [] if i_dec is None or i_dec == flip else [(i_dec, "the chapter's deciding row length")]
    return SliderFigure("ix-scale-keys", "Add keys: does σ = 1 stay in the sensitive band?",
                        [f"{S} keys" for S in n_keys], frames, layout, static_fallback(draw),
                        "The band of logit spreads where the softmax Jacobian is at least half its peak, against the "
                        "number of keys: it contains σ = 1 for few keys and moves above it as keys are added.",
                        start=i_dec if i_dec is not None else 0, control_label="number of keys S", flip=flip,
                        flip_note="σ = 1 now lies below the sensitive band: the scale keeps the softmax unsaturated, "
                                  "not at its most sensitive spread", more_flips=more)


def start_scale_runs(rows: Optional[Path] = None, start: Optional[Path] = None,
                     true: Optional[Path] = None) -> dict:
    r"""The stored saturated-rows swap at each starting size of :math:`W_Q`, a factor :math:`a` of its own start.

    Returns
    -------
    dict
        ``factor`` (F,), increasing; ``eval_loss`` (F, seeds); ``true_factor``, ``true_loss`` (2, seeds), the true
        backward at the two ends; ``seeds``; ``d_k``.

    Examples
    --------
    >>> r = start_scale_runs()
    >>> r["factor"], len(r["seeds"])
    ([0.125, 0.25, 0.5, 0.707, 0.85, 1.0], 5)
    """
    grid_rows, _ = load_backward(STORED_BACKWARD_ROWS if rows is None else rows)
    grid_start, _ = load_backward(STORED_BACKWARD_START if start is None else start)
    grid_true, _ = load_backward(STORED_BACKWARD if true is None else true)
    d_k = int(grid_rows.settings["d_k"])
    for g in (grid_start, grid_true):
        if list(g.seeds) != list(grid_rows.seeds) or g.settings["steps"] != grid_rows.settings["steps"]:
            raise ValueError(f"runs differ in seeds or steps: {list(g.seeds)}, {g.settings['steps']} against "
                             f"{list(grid_rows.seeds)}, {grid_rows.settings['steps']}")
    loss = dict(zip(grid_rows.variants, grid_rows.eval_loss))
    loss.update(zip(grid_start.variants, grid_start.eval_loss))
    by_factor = {1 / math.sqrt(d_k): loss["small W_Q init, saturated rows tempered"],
                 1.0: loss["unscaled, saturated rows tempered"]}
    by_factor.update({a: loss[f"W_Q init x{a:g}, saturated rows tempered"] for a in START_FACTORS})
    factors = sorted(by_factor)
    true = dict(zip(grid_true.variants, grid_true.eval_loss))
    return {"factor": [float(a) for a in factors], "eval_loss": [list(map(float, by_factor[a])) for a in factors],
            "true_factor": [1 / math.sqrt(d_k), 1.0],
            "true_loss": [list(map(float, true["small W_Q init"])), list(map(float, true["unscaled"]))],
            "seeds": [int(s) for s in grid_rows.seeds], "d_k": d_k}


def start_scale_explorer(runs: Optional[dict] = None, trains_below: float = 1.0, need: int = 4) -> SliderFigure:
    r"""Chapter 6 (``gradient-vanishes``): start :math:`W_Q` at :math:`a` times its size; does restoring the saturated rows' gradient train?

    Each frame: every seed's held-out loss against :math:`a`. The rule: a start counts as small where at least
    ``need`` seeds end below ``trains_below`` nats; the flag sits at the first factor where they do not.

    Examples
    --------
    >>> fig = start_scale_explorer()
    >>> fig.labels[0], fig.verdict
    ('W_Q × 1/8 (√d_k smaller)', 'gradient-vanishes')
    """
    r = start_scale_runs() if runs is None else runs
    a, loss = r["factor"], [np.asarray(x) for x in r["eval_loss"]]
    n_ok = [int((x < trains_below).sum()) for x in loss]
    chance = math.log(64)
    frames = []
    for i, (f, x) in enumerate(zip(a, loss)):
        traces = [
            {"type": "scatter", "mode": "markers", "x": [v for v in a for _ in r["seeds"]],
             "y": [float(v) for y in loss for v in y], "name": "saturated rows tempered, each seed",
             "marker": {"size": 8, "color": "#0072B2", "opacity": 0.45}},
            {"type": "scatter", "mode": "markers", "x": [v for v in r["true_factor"] for _ in r["seeds"]],
             "y": [float(v) for y in r["true_loss"] for v in y], "name": "true backward, each seed",
             "marker": {"size": 8, "color": "#777777", "symbol": "x"}},
            {"type": "scatter", "mode": "lines", "x": [a[0] / 1.2, a[-1] * 1.2], "y": [trains_below] * 2,
             "name": f"trains: below {trains_below:g} nat", "line": {"color": "#009E73", "dash": "dash"}},
            {"type": "scatter", "mode": "lines", "x": [a[0] / 1.2, a[-1] * 1.2], "y": [chance] * 2,
             "name": "chance, ln 64", "line": {"color": "#777777", "dash": "dot"}},
            {"type": "scatter", "mode": "markers", "x": [f] * len(x), "y": x, "name": "this start",
             "marker": {"size": 13, "color": "#D55E00", "symbol": "diamond"}}]
        frames.append({"data": traces, "readout": (
            f"W_Q started at {f:g} of its own size (scores {f * math.sqrt(r['d_k']):g} times the scaled model's): "
            f"with the saturated rows' gradient restored, held-out loss {x.min():.2f} to {x.max():.2f} nats; "
            f"{n_ok[i]} of {len(x)} seeds train (below {trains_below:g}): the scores "
            f"<b>{'start small' if n_ok[i] >= need else 'do not start small'}</b> by the rule "
            f"(at least {need} of {len(x)}).")})
    flip = next((i for i, n in enumerate(n_ok) if n < need), None)
    names = {1 / math.sqrt(r["d_k"]): "1/8 (√d_k smaller)", 1.0: "1 (its own start)"}
    labels = [f"W_Q × {names.get(f, f'{f:g}')}" for f in a]
    ticks = [f for f in a if not any(f < g < 1.25 * f for g in a)]  # drop a tick crowded by the next one
    layout = {"height": 480, "margin": {"l": 60, "r": 10, "t": 100, "b": 45}, "font": PLOTLY_FONT,
              "xaxis": {"type": "log", "title": {"text": "W_Q's starting size, a times its own (log scale)"},
                        "tickvals": ticks, "ticktext": [f"{f:.3g}" for f in ticks]},
              "yaxis": {"range": [-0.1, 4.6], "title": {"text": "held-out loss after 1,000 steps (nats)"}},
              "legend": {"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0}}  # above: a phone wraps it

    def draw(fig, ax):
        ax.plot(a, n_ok, "o-", color="#0072B2", label="saturated rows tempered")
        ax.axhline(need - 0.5, color="0.5", ls=":", label=f"the rule: at least {need} of {len(r['seeds'])}")
        if flip is not None:
            ax.axvline(a[flip], color="0.4", lw=0.8)
        ax.set(xscale="log", xlabel="W_Q's starting size, a times its own", ylabel="seeds that train",
               ylim=(-0.3, len(r["seeds"]) + 0.3), title="Restoring the saturated rows' gradient, by starting size")
        ax.set_xticks(a, [f"{f:.3g}" for f in a], minor=False)
        ax.set_xticks([], minor=True)
        ax.legend()

    return SliderFigure("ix-scale-start", "Start the scores larger: does restoring the saturated rows' gradient still train?",
                        labels, frames, layout, static_fallback(draw),
                        "Seeds that train when only the saturated rows' gradient is restored, against the starting "
                        "size of W_Q: all of them from a small start, fewer from the model's own start.",
                        start=0, control_label="starting size of W_Q", flip=flip,
                        flip_note=f"fewer than {need} of {len(r['seeds'])} seeds train: the scores no longer start "
                                  "small enough for the restored gradient alone to rescue training",
                        verdict="gradient-vanishes")
