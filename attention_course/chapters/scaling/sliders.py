r"""Chapter 6's flagged slider for ``variance-dk``: how much correlation breaks :math:`\operatorname{Var}(q\cdot k) = d_k`.

Every number comes from :mod:`attention_course.chapters.scaling.correlated_scores` (the measured variance
with correlated entries, its closed form and the Monte-Carlo line); this module only draws:
:func:`correlation_explorer` flags the first correlation :math:`c` at which the independence
formula is rejected
(:func:`~attention_course.chapters.scaling.correlated_scores.independence_rejected`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
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
from .measures import VarianceSweep, softmax_jacobian_norm

__all__ = ["correlation_explorer", "scale_explorer"]

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

    Each frame plots, against :math:`d_k`, the measured :math:`\operatorname{Var}(q\cdot k)/d_k`
    (:func:`~attention_course.chapters.scaling.correlated_scores.correlated_dot_variance`, with error bars of
    :func:`~attention_course.chapters.scaling.correlated_scores.bonferroni_z` standard errors: a bar
    that misses 1 rejects the independence formula), the
    independence formula (1) and the closed form :math:`1 + (d_k - 1)c^2`. The flag sits at the
    first :math:`c` where the independence formula is rejected beyond the Monte-Carlo error
    (:func:`~attention_course.chapters.scaling.correlated_scores.independence_rejected`). ``minilm_ratio`` (the chapter's median measured-over-predicted
    ratio of MiniLM's heads, :math:`d_k` = ``minilm_d_k``) adds the frame
    :func:`~attention_course.chapters.scaling.correlated_scores.minilm_correlation` and a second flag (frame ``i``
    is :func:`~attention_course.chapters.scaling.correlated_scores.correlation_grid` ``[i]``): the correlation that would explain it, if all
    of it came from correlated entries.

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
    # the legend sits under the lower panel, clear of the plotly toolbar (top right), also at 390 px
    layout = {"height": 600, "barmode": "overlay", "margin": {"l": 55, "r": 10, "t": 30, "b": 100}, "font": PLOTLY_FONT,
              "xaxis": {"domain": [0, 1], "title": {"text": "score q·k (or q·k/√d_k)"}},
              "yaxis": {"domain": [0.6, 1], "title": {"text": "count"}},
              "xaxis2": {"domain": [0, 1], "anchor": "y2", "range": [0, 1.02],
                         "title": {"text": "largest weight in the row"}},
              "yaxis2": {"domain": [0, 0.42], "anchor": "x2", "title": {"text": "rows"}},
              "legend": {"orientation": "h", "x": 0, "y": -0.14, "yanchor": "top"}}

    def draw(fig, ax):
        ax.plot(d_ks, share_un, "o-", color="#D55E00", label="without the scale")
        ax.set(xscale="log", xlabel="$d_k$", ylabel=f"share of rows with max weight > {threshold}",
               title="Saturated rows against $d_k$")
        ax.legend()

    return SliderFigure("ix-scale-dk", "Grow d_k with and without the scale",
                        [f"d_k = {d}" for d in d_ks], frames, layout, static_fallback(draw),
                        "Share of saturated softmax rows against d_k without the scale: it climbs towards one as "
                        "d_k grows.", start=d_ks.index(64) if 64 in d_ks else 0, control_label="key width d_k",
                        flip=d_ks.index(64) if 64 in d_ks else None,
                        flip_note="from here on the unscaled model failed to train in every run "
                                  "(chapter 6's verdict on training)",
                        more_flips=[(over[0], "most unscaled rows are saturated from the start")] if over else (),
                        verdict="scale-decides-training")
