r"""Chapter 6's flagged slider for ``variance-dk``: how much correlation breaks :math:`\operatorname{Var}(q\cdot k) = d_k`.

Every number comes from :mod:`attention_course.lenses.correlated_scores` (the measured variance
with correlated entries, its closed form and the Monte-Carlo line); this module only draws:
:func:`correlation_explorer` flags the first correlation :math:`c` at which the independence
formula is rejected
(:func:`~attention_course.lenses.correlated_scores.independence_rejected`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Optional

import numpy as np

from ..lenses.correlated_scores import (
    CORRELATIONS,
    D_KS,
    correlated_dot_variance,
    correlated_variance_theory,
    correlation_grid,
    independence_rejected,
    minilm_correlation,
)
from ..lenses.scaling import VarianceSweep
from .interactive import _fallback
from .widgets import SliderFigure

__all__ = ["correlation_explorer"]

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
    (:func:`~attention_course.lenses.correlated_scores.correlated_dot_variance`, with error bars of
    :func:`~attention_course.lenses.correlated_scores.bonferroni_z` standard errors: a bar
    that misses 1 rejects the independence formula), the
    independence formula (1) and the closed form :math:`1 + (d_k - 1)c^2`. The flag sits at the
    first :math:`c` where the independence formula is rejected beyond the Monte-Carlo error
    (:func:`~attention_course.lenses.correlated_scores.independence_rejected`). ``minilm_ratio`` (the chapter's median measured-over-predicted
    ratio of MiniLM's heads, :math:`d_k` = ``minilm_d_k``) adds the frame
    :func:`~attention_course.lenses.correlated_scores.minilm_correlation` and a second flag (frame ``i``
    is :func:`~attention_course.lenses.correlated_scores.correlation_grid` ``[i]``): the correlation that would explain it, if all
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
                        labels, frames, layout, _fallback(draw),
                        "Largest deviation of the measured variance of q·k from d_k, in standard errors, against "
                        "the correlation between entries: below the Monte-Carlo line at 0, far above it from small "
                        "correlations on.", start=0, control_label="correlation c between entries",
                        flip=flip, flip_note="the independence formula Var(q·k) = d_k is rejected beyond the "
                                             "Monte-Carlo error (at the widest d_k first)",
                        more_flips=more, verdict="variance-dk")
