r"""Figures for chapter 6: why attention divides the scores by :math:`\sqrt{d_k}`.

Each helper draws what the chapter has measured and returns the :class:`matplotlib.figure.Figure`,
changing no global state; one colour per scale (:data:`SCALE_COLOR`). The lesson's figures are
:data:`LESSON_WIDTH` wide with :data:`LESSON_RC`'s type and the evidence page's use :data:`PHONE_RC`, so
that their text stays readable on a phone.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Optional, Union

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from ...core._backend import Array, ShapeError, shape_str, to_numpy
from ..lowrank.baselines import loglog_slope
from .measures import SaturationStats, VarianceSweep
from ...figures.style import book_figure

if TYPE_CHECKING:  # type hints only: figures take the experiment's results, not its code
    from .backward_swap import BackwardGrid
    from .saturation_training import SaturationGrid
    from .init_spread import InitSpread
    from .training import ScaleComparison

__all__ = [
    "plot_typical_row", "plot_score_histograms", "plot_gradient_vs_spread", "plot_training_watch",
    "plot_score_variance", "plot_minilm_scores", "plot_saturation", "plot_jacobian", "plot_full_comparison",
    "plot_scale_pair", "plot_saturation_training", "plot_backward_swap", "plot_init_spread",
]

SCALE_LABEL = {"sqrt": r"$1/\sqrt{d_k}$", "none": "none (1)", "mup": r"$1/d_k$ (muP)"}
SCALE_COLOR = {"sqrt": "tab:blue", "none": "tab:red", "mup": "tab:green"}
#: Further unscaled marks on one panel (a second and third width): darker and purple, told apart from tab:red.
UNSCALED_SHADES = ("#7A0000", "tab:purple")
GRAD_LABEL = r"$\|\nabla_{W_Q, W_K}\mathcal{L}\|$"


def _running_mean(x: np.ndarray, n: int) -> np.ndarray:
    return np.convolve(x, np.ones(n) / n, mode="valid")  # (len(x) - n + 1,): mean of n steps


def chapter_figure(func):
    """:func:`~attention_course.figures.style.book_figure` with :data:`PHONE_RC`'s type: every figure of the chapter."""
    @functools.wraps(func)
    def draw(*args, **kwargs):
        with plt.rc_context(PHONE_RC):
            return func(*args, **kwargs)
    return book_figure(draw)


#: The lesson's figures: narrower than the 7-in column, so a phone shrinks them less.
LESSON_WIDTH = 5.0
#: The evidence page's stacked figures (several panels in a column).
STACKED_WIDTH = 5.6
#: Type for every figure of the chapter (on top of the book's style): 12-pt labels, 11-pt ticks and legends.
PHONE_RC = {"font.size": 12, "axes.titlesize": 12.5, "axes.labelsize": 12, "xtick.labelsize": 11,
            "ytick.labelsize": 11, "legend.fontsize": 11}
#: The lesson's type: a little larger again, so that a legend's subscripts stay readable on a phone.
LESSON_RC = {**PHONE_RC, "xtick.labelsize": 11.5, "ytick.labelsize": 11.5, "legend.fontsize": 12}
WIDTH_COLOR = {4: "tab:orange", 64: "tab:purple", 1024: "tab:red"}


def _equal_shapes(expected: str, **arrays: Array) -> tuple[np.ndarray, np.ndarray]:
    """Two named inputs as float arrays of one ``expected`` shape, e.g. ``"(L, h)"``, or a ShapeError naming both."""
    (name_a, a), (name_b, b) = ((name, np.asarray(to_numpy(x), float)) for name, x in arrays.items())
    if a.ndim != len(expected.strip("(,)").split(", ")) or a.shape != b.shape:
        raise ShapeError(f"{name_a} has shape {shape_str(a)} and {name_b} {shape_str(b)}; "
                         f"expected equal shapes {expected}")
    return a, b


def _width_color(d: int, i: int) -> str:
    return WIDTH_COLOR.get(int(d), ("tab:orange", "tab:purple", "tab:red", "tab:brown")[i % 4])


@chapter_figure
def plot_score_histograms(scores: Mapping[int, Array]) -> Figure:
    r"""The lesson's first picture: dot products of random vectors, raw (top) and divided by :math:`\sqrt{d_k}` (bottom).

    Parameters
    ----------
    scores : dict of d_k -> array, shape (N,)
        Dot products of random vectors of width ``d_k`` with unit-variance entries; the bottom panel adds
        the standard normal density.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> fig = plot_score_histograms({d: rng.normal(0, d**0.5, 500) for d in (4, 64)})
    >>> [ax.get_xlabel() for ax in fig.axes]
    ['score $q\\cdot k$', 'scaled score $q\\cdot k\\,/\\sqrt{d_k}$']
    """
    if not scores:
        raise ValueError("scores is empty; expected {d_k: dot products} for at least one width")
    arrays = {int(d): np.asarray(to_numpy(s), float).ravel() for d, s in scores.items()}
    with plt.rc_context(LESSON_RC):
        fig, (ax, ax_s) = plt.subplots(2, 1, figsize=(LESSON_WIDTH, 5.8), layout="constrained")
        reach = max(4 * np.sqrt(d) for d in arrays)
        raw_bins, unit_bins = np.linspace(-reach, reach, 121), np.linspace(-4.5, 4.5, 61)
        for i, (d, s) in enumerate(arrays.items()):
            kw = dict(histtype="step", lw=1.8, color=_width_color(d, i), density=True)
            ax.hist(s, bins=raw_bins, label=f"$d_k$ = {d}", **kw)
            ax_s.hist(s / np.sqrt(d), bins=unit_bins, **kw)
        x = np.linspace(-4.5, 4.5, 200)
        ax_s.plot(x, np.exp(-x**2 / 2) / np.sqrt(2 * np.pi), "k--", lw=1.2, label="variance 1")
        ax.set(xlabel=r"score $q\cdot k$", ylabel="density", title="Raw scores: wider vectors, wider spread")
        ax_s.set(xlabel=r"scaled score $q\cdot k\,/\sqrt{d_k}$", ylabel="density",
                 title=r"Divided by $\sqrt{d_k}$: one spread at every width")
        ax.legend(loc="upper right")
        ax_s.legend(loc="upper right")
    return fig


@chapter_figure
def plot_gradient_vs_spread(sigmas: Array, through: Array, marks: Mapping[str, float] = {},
                            band: Optional[tuple[float, float]] = None) -> Figure:
    r"""How much gradient a softmax row passes back, against the spread :math:`\sigma` of its scores.

    Parameters
    ----------
    sigmas, through : array, shape (M,)
        The spreads and the median :math:`\lVert J\rVert_F` at each.
    marks : dict of label -> sigma
        Points to mark; a label starting with ``"scaled"`` in the scaled colour, the others in the unscaled
        one, then :data:`UNSCALED_SHADES`, each with its own marker.
    band : (lo, hi), optional
        The sensitive regime, shaded.

    Examples
    --------
    >>> s = np.geomspace(0.1, 50, 9)
    >>> fig = plot_gradient_vs_spread(s, np.exp(-np.log(s / 4) ** 2), {"scaled": 1.0, "unscaled, $d_k$ = 64": 8.0})
    >>> fig.axes[0].get_xscale(), len(fig.legends[0].get_texts())
    ('log', 2)
    """
    if band is not None and not 0 < band[0] < band[1]:
        raise ValueError(f"band={band} must be two spreads 0 < lo < hi")
    sigmas, through = _equal_shapes("(M,)", sigmas=sigmas, through=through)
    unscaled_styles = iter(zip((SCALE_COLOR["none"], *UNSCALED_SHADES), ("s", "D", "^", "v")))
    with plt.rc_context(LESSON_RC):
        fig, ax = plt.subplots(figsize=(LESSON_WIDTH, 3.6 + 0.3 * (len(marks) + (band is not None))), layout="constrained")
        ax.semilogx(sigmas, through, color="0.3", lw=2)
        if band is not None:
            ax.axvspan(*band, color="0.88", zorder=0, label="sensitive regime")
        for label, sg in marks.items():
            color, marker = (SCALE_COLOR["sqrt"], "o") if label.startswith("scaled") else next(unscaled_styles)
            ax.plot(sg, np.exp(np.interp(np.log(sg), np.log(sigmas), np.log(through))), marker, ms=10,
                    color=color, label=label, clip_on=False, zorder=3)
        top = float(through.max())
        ax.set(xlabel=r"spread $\sigma$ of the scores in a row", ylabel="median $\\|J\\|_F$:\ngradient let through",
               ylim=(-0.06 * top, 1.08 * top), title="The gradient a row lets through")
        if marks or band is not None:  # under the axes: the curve fills the panel's top
            fig.legend(loc="outside lower center", ncols=1)
    return fig


@chapter_figure
def plot_training_watch(result: ScaleComparison, window: int = 10, vocab_size: int = 64) -> Figure:
    """The lesson's training run of one width: loss (top, ``window``-step mean, held-out loss as a dot) and layer 1's sharpness (bottom).

    Examples
    --------
    >>> from attention_course.chapters.scaling.training import compare_scales
    >>> fig = plot_training_watch(compare_scales([8], ["sqrt", "none"], steps=4, d_model=8, eval_batch=8), window=2)
    >>> [ax.get_ylabel() for ax in fig.axes]
    ['loss (nats)', "layer 1's mean\\nlargest weight"]
    """
    if result.d_k.shape != (1,):
        raise ValueError(f"result has d_k={result.d_k.tolist()}; expected one width")
    d_k = int(result.d_k[0])
    steps = np.arange(result.loss.shape[-1])
    label = {"sqrt": r"with $1/\sqrt{d_k}$", "none": "without the scale"}
    with plt.rc_context(LESSON_RC):
        fig, (ax, ax_w) = plt.subplots(2, 1, figsize=(LESSON_WIDTH, 5.6), layout="constrained", sharex=True)
        for j, s in enumerate(result.scales):
            kw = dict(color=SCALE_COLOR.get(s), label=label.get(s, SCALE_LABEL.get(s, s)), lw=1.8)
            ax.plot(steps[window - 1:], _running_mean(result.loss[0, j], window), **kw)
            ax_w.plot(steps, result.max_weight[0, j, :, 0], **kw)
        ax.axhline(np.log(vocab_size), color="k", ls=":", lw=1.2, label=f"chance, ln {vocab_size}")
        for j, s in enumerate(result.scales):  # the held-out loss after training: one dot per scale, at the end
            ax.plot(steps[-1], result.eval_loss[0, j], "o", color=SCALE_COLOR.get(s), ms=8, mec="k", clip_on=False)
        ax.plot([], [], "o", color="0.7", mec="k", ms=8, label="held-out loss, at the end")  # the dots' legend
        ax.set(ylabel="loss (nats)", ylim=(0, None), title=f"Training at $d_k$ = {d_k}")
        ax_w.set(xlabel="training step", ylabel="layer 1's mean\nlargest weight", ylim=(0, 1.02))
        # under both panels, clear of every curve (the loss line crossed a legend inside the axes)
        fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncol=2, frameon=False)
    return fig


@chapter_figure
def plot_score_variance(sweep: VarianceSweep) -> Figure:
    r"""The variance of :math:`q\cdot k` and of :math:`q\cdot k/\sqrt{d_k}` against :math:`d_k`, with the closed form.

    ``sweep`` is an unscaled :func:`~attention_course.chapters.scaling.measures.variance_vs_dim`; the scaled
    variance is ``empirical / d_k``; error bars are 2 standard errors.

    Examples
    --------
    >>> from attention_course.chapters.scaling.measures import variance_vs_dim
    >>> fig = plot_score_variance(variance_vs_dim([1, 4, 16], n_samples=200))
    >>> [ax.get_yscale() for ax in fig.axes], fig.axes[0].get_xlabel()
    (['log'], 'key width $d_k$')
    """
    dims = sweep.d_k
    scaled = sweep.empirical / dims  # Var(q.k / sqrt(d_k)) from the same draws
    slope_raw, slope_scaled = loglog_slope(dims, sweep.empirical), loglog_slope(dims, scaled)
    with plt.rc_context(PHONE_RC):
        fig, ax = plt.subplots(figsize=(STACKED_WIDTH, 4.2), layout="constrained")
        ax.loglog(dims, sweep.theory, "k--", lw=1.2, label=r"closed form $d_k\,\sigma_q^2\sigma_k^2$")
        ax.errorbar(dims, sweep.empirical, yerr=2 * sweep.std_error, fmt="o", color=SCALE_COLOR["none"], ms=5,
                    label=f"$q\\cdot k$ (slope {slope_raw:.2f})")
        ax.errorbar(dims, scaled, yerr=2 * sweep.std_error / dims, fmt="s", color=SCALE_COLOR["sqrt"], ms=5,
                    label=f"$q\\cdot k/\\sqrt{{d_k}}$ (slope {round(slope_scaled, 2) + 0.0:.2f})")
        ax.set(xlabel=r"key width $d_k$", ylabel="variance of the score", title="Score variance (±2 s.e.)")
        ax.legend(loc="upper left")
    return fig


@chapter_figure
def plot_minilm_scores(theory: Array, measured: Array, scores: Array, d_k: int) -> Figure:
    r"""A pretrained model's score variance per head against the prediction (top), and its scores (bottom).

    Parameters
    ----------
    theory, measured : array, shape (L, h)
        :func:`~attention_course.chapters.scaling.measures.pair_logit_variance` of every layer.
    scores : array, shape (N,)
        Unscaled scores of real token pairs; also drawn divided by :math:`\sqrt{d_k}`.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> fig = plot_minilm_scores(rng.uniform(1, 2, (2, 3)), rng.uniform(2, 3, (2, 3)), rng.normal(size=50), 32)
    >>> fig.axes[0].get_title(), fig.axes[2].get_ylabel()
    ('6 heads, $d_k$ = 32', 'layer')
    """
    theory, measured = _equal_shapes("(L, h)", theory=theory, measured=measured)
    n_layers, n_heads = theory.shape
    scores = np.asarray(to_numpy(scores), float).ravel()
    fig, (ax, ax_h) = plt.subplots(2, 1, figsize=(STACKED_WIDTH, 7.0), layout="constrained")
    sc = ax.scatter(theory.ravel(), measured.ravel(), c=np.repeat(np.arange(1, n_layers + 1), n_heads),
                    cmap="viridis", s=18)
    lim = np.array([theory.min() * 0.7, measured.max() * 1.4])
    ax.plot(lim, lim, "k--", lw=1, label="measured = predicted")
    ax.set(xscale="log", yscale="log", xlabel=r"predicted $d_k\,\hat\sigma_q^2\hat\sigma_k^2$",
           ylabel=r"measured Var$(q_i\cdot k_j)$", title=f"{theory.size} heads, $d_k$ = {d_k}")
    for axis in (ax.xaxis, ax.yaxis):  # label the decades only: minor labels collide at this width
        axis.set_minor_formatter(NullFormatter())
    fig.colorbar(sc, ax=ax, label="layer")
    ax.legend(loc="upper left")
    bins = np.linspace(-60, 60, 241)
    ax_h.hist(scores, bins=bins, histtype="step", lw=1.5, color=SCALE_COLOR["none"], density=True,
              label=r"$q\cdot k$")
    ax_h.hist(scores / np.sqrt(d_k), bins=bins, histtype="step", lw=1.5, color=SCALE_COLOR["sqrt"],
              density=True, label=rf"$q\cdot k/\sqrt{{{d_k}}}$ (used)")
    ax_h.set(xlabel="score", ylabel="density", yscale="log", title="All layers and heads")
    ax_h.legend()
    return fig


@chapter_figure
def plot_saturation(stats: Mapping[str, SaturationStats], n_keys: int = 64) -> Figure:
    """Entropy, largest weight and share of saturated rows against :math:`d_k`, one line per scale.

    ``stats`` maps a scale name to :func:`~attention_course.chapters.scaling.measures.saturation_stats` with
    ``n_keys`` keys and threshold 0.99.

    Examples
    --------
    >>> from attention_course.chapters.scaling.measures import saturation_stats
    >>> fig = plot_saturation({s: saturation_stats([4, 64], scale=s, n_batches=1) for s in ("none", "sqrt")})
    >>> [ax.get_ylabel() for ax in fig.axes]
    ['mean entropy (nats)', 'mean largest weight', 'share of rows > 0.99']
    >>> len(fig.legends[0].get_texts())  # two scales and the uniform row
    3
    """
    fields = (("entropy", "mean entropy (nats)", "Entropy of a row"),
              ("max_weight", "mean largest weight", "Largest weight in a row"),
              ("frac_saturated", "share of rows > 0.99", "Rows with largest weight > 0.99"))
    fig, axes = plt.subplots(3, 1, figsize=(STACKED_WIDTH, 7.4), layout="constrained", sharex=True)
    for ax, (name, ylabel, title) in zip(axes, fields):
        for s, r in stats.items():
            ax.plot(r.d_k, getattr(r, name), "o-", ms=4, color=SCALE_COLOR.get(s), label=SCALE_LABEL.get(s, s))
        ax.set(ylabel=ylabel, title=f"{title}, {n_keys} keys")
        ax.set_xscale("log", base=2)
    axes[0].axhline(np.log(n_keys), color="k", ls=":", lw=1, label=f"uniform, ln {n_keys}")
    axes[1].axhline(1 / n_keys, color="k", ls=":", lw=1, label=f"uniform, 1/{n_keys}")
    axes[-1].set_xlabel("$d_k$")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=2)
    return fig


@chapter_figure
def plot_jacobian(stats: Mapping[str, SaturationStats], sigmas: Array, jacobian_norm: Array,
                  d_k: int = 64, unscaled_dims: Sequence[int] = (64, 1024),
                  band: Optional[tuple[float, float]] = None, floor: Optional[float] = None) -> Figure:
    r"""Median softmax Jacobian norm against :math:`d_k` (top) and against the score spread :math:`\sigma` (bottom).

    Parameters
    ----------
    stats : dict of scale name -> SaturationStats
    sigmas, jacobian_norm : array, shape (M,)
        The curve at ``d_k``; marked on it the scaled scores (:math:`\sigma = 1`) and the unscaled ones at
        ``unscaled_dims`` (:math:`\sigma = \sqrt{d_k}`; hollow beyond ``d_k``).
    band, floor : optional
        A band of :math:`\sigma` to shade and the uniform row's norm.

    Examples
    --------
    >>> from attention_course.chapters.scaling.measures import saturation_stats
    >>> sat = {s: saturation_stats([4, 64], scale=s, n_batches=1) for s in ("none", "sqrt")}
    >>> fig = plot_jacobian(sat, np.geomspace(0.1, 40, 5), np.linspace(0.1, 0.5, 5))
    >>> fig.axes[1].get_xscale(), len(fig.axes[1].get_legend().get_texts())
    ('log', 3)
    """
    sigmas, jac = _equal_shapes("(M,)", sigmas=sigmas, jacobian_norm=jacobian_norm)
    marks = [("scaled, any $d_k$", 1.0, "sqrt", True)]
    marks += [(f"unscaled, $d_k$ = {d}", float(np.sqrt(d)), "none", d <= d_k) for d in unscaled_dims]
    fig, (ax, ax_s) = plt.subplots(2, 1, figsize=(STACKED_WIDTH, 7.2), layout="constrained")
    for s, r in stats.items():
        ax.plot(r.d_k, r.jacobian_norm, "o-", ms=4, color=SCALE_COLOR.get(s), label=SCALE_LABEL.get(s, s))
    ax.set(xlabel="$d_k$", ylabel=r"median $\|J\|_F$", yscale="log", ylim=(1e-4, 1),
           title="Against $d_k$, 64 keys")
    ax.set_xscale("log", base=2)
    ax.legend()
    ax_s.semilogx(sigmas, jac, color="0.3")
    if band is not None:
        ax_s.axvspan(*band, color="0.85", zorder=0, label="half-maximum band")
    if floor is not None:
        ax_s.axhline(floor, color="k", ls=":", lw=1, label="uniform row")
    for label, sg, s, filled in marks:
        ax_s.plot(sg, np.interp(np.log(sg), np.log(sigmas), jac), "o", ms=8, color=SCALE_COLOR[s],
                  mfc=SCALE_COLOR[s] if filled else "none", label=label)
    ax_s.set(xlabel=r"std $\sigma$ of the scores", ylabel=r"median $\|J\|_F$",
             title="Against the spread of the scores")
    ax_s.legend()
    return fig


@chapter_figure
def plot_full_comparison(results: Sequence[ScaleComparison], vocab_size: int = 64) -> Figure:
    """Loss (top) and :math:`W_Q, W_K` gradient norm (bottom) per width: mean and range over runs (seeds).

    Examples
    --------
    >>> from attention_course.chapters.scaling.training import load_comparisons
    >>> fig = plot_full_comparison(load_comparisons()[0])
    >>> fig.axes[0].get_title(), fig.axes[3].get_yscale()
    ('$d_k$ = 16', 'log')
    """
    r0 = results[0]
    n_d = len(r0.d_k)
    fig, axes = plt.subplots(2, n_d, figsize=(7, 5), layout="constrained", sharex=True, sharey="row",
                             squeeze=False)
    for i, d in enumerate(r0.d_k):
        for j, s in enumerate(r0.scales):
            for row, name in enumerate(("loss", "grad_norm_qk")):
                curves = np.array([getattr(r, name)[i, j] for r in results])  # (runs, steps)
                axes[row, i].plot(r0.step, curves.mean(0), color=SCALE_COLOR.get(s), label=SCALE_LABEL.get(s, s))
                axes[row, i].fill_between(r0.step, curves.min(0), curves.max(0), color=SCALE_COLOR.get(s),
                                          alpha=0.2, lw=0)
        axes[0, i].axhline(np.log(vocab_size), color="k", ls=":", lw=1)
        axes[0, i].set(ylim=(0, 4.4), title=f"$d_k$ = {d}")
        axes[1, i].set(xlabel="step", yscale="log")
    axes[0, 0].set_ylabel("training loss (nats)")
    axes[1, 0].set_ylabel(GRAD_LABEL)
    fig.suptitle(f"Loss and gradient of $W_Q, W_K$: mean and range of {len(results)} seeds")
    fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="outside lower center", ncols=len(r0.scales))
    return fig


@chapter_figure
def plot_scale_pair(scaled: Array, unscaled: Array, tokens: Sequence[str], d_k: int, title: str = "") -> Figure:
    r"""One head's attention matrix with the :math:`1/\sqrt{d_k}` (left) and without it (right), on one colour scale.

    Parameters
    ----------
    scaled, unscaled : array, shape (T, T)
        :func:`~attention_course.chapters.scaling.saturated_rows.scale_pair`; rows are queries.
    tokens : sequence of str, length T
    d_k : int

    Examples
    --------
    >>> from attention_course.chapters.scaling.saturated_rows import scale_pair
    >>> rng = np.random.default_rng(0)
    >>> a, b = scale_pair(rng.normal(size=(4, 32)), rng.normal(size=(4, 32)))
    >>> fig = plot_scale_pair(a, b, ["the", "cat", "sat", "."], 32)
    >>> [ax.get_title() for ax in fig.axes[:2]]
    ['with $1/\\sqrt{32}$', 'without the scale']
    """
    scaled, unscaled = np.asarray(to_numpy(scaled), float), np.asarray(to_numpy(unscaled), float)
    T = len(tokens)
    if scaled.shape != (T, T) or unscaled.shape != (T, T):
        raise ShapeError(f"scaled has shape {shape_str(scaled)} and unscaled {shape_str(unscaled)}; "
                         f"expected ({T}, {T}) for {T} tokens")
    vmax = float(max(scaled.max(), unscaled.max()))
    fig, axes = plt.subplots(1, 2, figsize=(7, 3.9), layout="constrained", sharey=True)
    for ax, w, name in zip(axes, (scaled, unscaled), (f"with $1/\\sqrt{{{d_k}}}$", "without the scale")):
        im = ax.imshow(w, cmap="viridis", vmin=0, vmax=vmax)
        ax.set_xticks(range(T), tokens, rotation=90)
        ax.set(title=name, xlabel="key")
    axes[0].set_yticks(range(T), tokens)
    axes[0].set_ylabel("query")
    fig.colorbar(im, ax=axes, shrink=0.8, label=f"attention weight (0 to {vmax:.2f})")
    if title:
        fig.suptitle(title)
    return fig


def _band(ax, step: np.ndarray, curves: np.ndarray, **kw) -> None:
    """Mean over seeds (axis 0) as a line, min to max as a band; NaN entries are skipped."""
    with np.errstate(all="ignore"):
        ok = ~np.all(np.isnan(curves), axis=0)
        mean, lo, hi = (f(curves[:, ok], axis=0) for f in (np.nanmean, np.nanmin, np.nanmax))
    ax.plot(step[ok], mean, **kw)
    ax.fill_between(step[ok], lo, hi, color=kw.get("color"), alpha=0.2, lw=0)


VARIANT_STYLE = {"scaled": dict(color=SCALE_COLOR["sqrt"], label=r"$1/\sqrt{d_k}$"),
                 "unscaled": dict(color=SCALE_COLOR["none"], label="no scale"),
                 "unscaled, small W_Q init": dict(color="tab:orange", label=r"no scale, $W_Q$ starts $\sqrt{d_k}\times$ smaller")}


@chapter_figure
def plot_saturation_training(grid: SaturationGrid, d_k: int = 64, layer: int = 0, vocab_size: int = 64) -> Figure:
    r"""Held-out loss, share of saturated rows in ``layer``, and the gradient through them (dashed) and the others, over training.

    Lines are means over seeds, bands their range; ``grid`` from
    :func:`~attention_course.chapters.scaling.saturation_training.load_saturation`.

    Examples
    --------
    >>> from dataclasses import replace
    >>> from attention_course.chapters.scaling.saturation_training import SATURATION
    >>> from attention_course.chapters.scaling.training_grid import run_grid
    >>> g = run_grid(replace(SATURATION.config, seeds=(0,), d_ks=(8,), variants=("scaled", "unscaled"), steps=4))
    >>> fig = plot_saturation_training(g, d_k=8)
    >>> [ax.get_yscale() for ax in fig.axes]
    ['linear', 'linear', 'log']
    """
    step = grid.step.astype(float)
    x = np.maximum(step, 1.0)  # step 0 drawn at 1 on the log axis
    fig, axes = plt.subplots(3, 1, figsize=(STACKED_WIDTH, 7.4), layout="constrained", sharex=True)
    for v in grid.variants:
        loss, rows = grid.select(d_k, v)  # (S, K), (S, K, L, 4)
        kw = VARIANT_STYLE.get(v, dict(label=v))
        _band(axes[0], x, loss, **kw)
        _band(axes[1], x, rows[:, :, layer, 0], **kw)
        _band(axes[2], x, rows[:, :, layer, 2], **kw)
        _band(axes[2], x, rows[:, :, layer, 1], ls="--", **{**kw, "label": None})
    axes[0].axhline(np.log(vocab_size), color="k", ls=":", lw=1, label=f"chance, ln {vocab_size}")
    axes[0].set(ylabel="held-out loss (nats)", title=f"Training at $d_k$ = {d_k}: {len(grid.seeds)} seeds")
    axes[0].legend(loc="lower left")
    thr = grid.settings.get("threshold", 0.99)
    axes[1].set(ylabel="share saturated", ylim=(-0.02, 1.02), title=f"Layer {layer + 1}: rows with top weight > {thr}")
    axes[2].set(ylabel=r"mean $\|\partial\mathcal{L}/\partial x_i\|$", yscale="log", xscale="log",
                xlabel="step (log scale; step 0 drawn at 1)",
                title=f"Layer {layer + 1}: gradient per row at the softmax\nsaturated rows dashed, the others solid")
    return fig


#: One colour per backward pass in :func:`plot_backward_swap`.
BACKWARD_COLOR = {"true": "0.25", "tempered": "tab:green", "size": "tab:purple", "direction": "tab:brown",
                  "saturated": "tab:orange"}
BACKWARD_LABEL = {"true": "true backward", "tempered": "tempered backward (size and direction)",
                  "size": "true direction, tempered size", "direction": "tempered direction, true size",
                  "saturated": "tempered on saturated rows only"}


@chapter_figure
def plot_backward_swap(grid: BackwardGrid, vocab_size: int = 64) -> Figure:
    r"""Held-out loss of every backward-swap run: one row per variant, one dot per seed, a bar at the mean.

    Examples
    --------
    >>> from attention_course.chapters.scaling.backward_swap import load_backward
    >>> fig = plot_backward_swap(load_backward()[0])
    >>> fig.axes[0].get_xlabel()
    'held-out loss after training (nats)'
    """
    kinds = [grid.settings["definitions"][v][3] for v in grid.variants]
    n = len(grid.variants)
    fig, ax = plt.subplots(figsize=(7, 0.32 * n + 1.8), layout="constrained")
    y = np.arange(n)[::-1]  # first variant on top
    seen = set()
    for yi, v, kind, loss in zip(y, grid.variants, kinds, grid.eval_loss):
        label = None if kind in seen else BACKWARD_LABEL[kind]
        seen.add(kind)
        ax.scatter(loss, np.full(loss.shape, yi), s=22, color=BACKWARD_COLOR[kind], alpha=0.8, label=label, zorder=3)
        ax.plot([loss.mean()] * 2, [yi - 0.3, yi + 0.3], color=BACKWARD_COLOR[kind], lw=2)
    ax.axvline(np.log(vocab_size), color="k", ls=":", lw=1)
    ax.text(np.log(vocab_size), n - 0.4, f"chance, ln {vocab_size}", ha="right", va="bottom")
    ax.set_yticks(y, [v.replace("W_Q", "$W_Q$") for v in grid.variants])
    ax.set_ylim(-0.7, n + 0.2)
    ax.set(xlabel="held-out loss after training (nats)", ylabel="variant",
           title=f"Backward swap\n$d_k$ = {grid.settings['d_k']}, {len(grid.seeds)} seeds, "
                 f"{grid.settings['steps']} steps")
    ax.grid(axis="x", alpha=0.3)
    fig.legend(loc="outside lower center", ncol=2, frameon=False)
    return fig


#: The decisions :func:`plot_typical_row` draws, bottom to top.
VERDICT_STEPS = ("wrong as stated", "holds when S", "holds when typical", "holds", "undecided")


@chapter_figure
def plot_typical_row(sigmas: Array, ratios: Mapping[int, Mapping[str, Array]], thetas: Array,
                     verdicts: Sequence[str], theta: float = 0.5, unscaled: Sequence[float] = (8.0, 16.0, 32.0)
                     ) -> Figure:
    r"""The gradient a row passes over the uniform row's, :math:`R(\sigma)`, per statistic (top); the decision against :math:`\theta` (bottom).

    Parameters
    ----------
    sigmas : array, shape (M,)
    ratios : dict S -> dict statistic ("median", "mean") -> array (M,)
        From :func:`~attention_course.chapters.scaling.sensitive_regime.flow_ratio`.
    thetas : array, shape (N,)
    verdicts : sequence of str, length N
        :func:`~attention_course.chapters.scaling.sensitive_regime.typical_row_verdict` at each threshold.

    Examples
    --------
    >>> s = np.geomspace(0.1, 40, 9)
    >>> fig = plot_typical_row(s, {16: {"median": np.exp(-s), "mean": 1 / (1 + s)}}, [0.3, 0.7], ["holds", "holds"])
    >>> len(fig.axes)
    2
    """
    sigmas = np.asarray(to_numpy(sigmas), float)
    fig, (ax, ax_t) = plt.subplots(2, 1, figsize=(STACKED_WIDTH, 7.4), layout="constrained",
                                   height_ratios=(1.6, 1))
    shades = plt.cm.viridis(np.linspace(0.1, 0.85, len(ratios)))
    for (S, curves), c in zip(ratios.items(), shades):
        for stat, ls in (("median", "-"), ("mean", "--")):
            if stat in curves:
                ax.loglog(sigmas, np.asarray(curves[stat], float), ls, color=c,
                          label=f"S = {S}, {stat}" if stat == "median" or S == list(ratios)[0] else None)
    ax.axhline(theta, color="k", ls=":", lw=1, label=rf"$\theta$ = {theta}")
    ax.axhline(1.0, color="0.6", lw=0.8)
    ax.axvline(1.0, color=SCALE_COLOR["sqrt"], lw=2, label=r"scaled, $\sigma$ = 1")
    for u in unscaled:
        ax.axvline(u, color=SCALE_COLOR["none"], lw=2 if u == max(unscaled) else 1, alpha=1 if u == max(unscaled) else 0.5)
    ax.text(max(unscaled), 1.5e-4, rf" $\sigma=\sqrt{{d_k}}$" "\n" rf" $d_k$ = {', '.join(f'{u**2:.0f}' for u in unscaled)}",
            color=SCALE_COLOR["none"], fontsize=8, ha="right")
    ax.set(xlabel=r"std $\sigma$ of the logits", ylabel="gradient passed / uniform row's", ylim=(1e-4, 10),
           title="What a row passes back, against the spread")
    ax.legend(fontsize=8, ncol=2, loc="lower left")
    y = [VERDICT_STEPS.index(v) for v in verdicts]
    ax_t.step(np.asarray(thetas, float), y, where="mid", color="k")
    ax_t.axvline(theta, color="k", ls=":", lw=1)
    ax_t.set_yticks(range(len(VERDICT_STEPS)), ["wrong as stated", "holds when S small", "holds when typical row",
                                                  "holds", "undecided"], fontsize=8)
    ax_t.set(xlabel=r"threshold $\theta$", ylim=(-0.5, len(VERDICT_STEPS) - 0.5), title="The decision against its threshold")
    return fig

@chapter_figure
def plot_init_spread(results: Sequence["InitSpread"], trained: Optional[float] = None, d_trained: int = 32) -> Figure:
    r"""Median within-row spread of a query's scores against :math:`d_k`, unscaled and scaled, at initialisation.

    ``results``: :func:`~attention_course.chapters.scaling.init_spread.init_spread` per layer input (each seed
    thin, the median thick); ``trained``: a trained model's median scaled spread, marked at ``d_trained``.

    Examples
    --------
    >>> from attention_course.chapters.scaling.init_spread import init_spread
    >>> r = init_spread(np.random.default_rng(0).normal(size=(2, 10, 16)), None, [4, 16], [0, 1])
    >>> fig = plot_init_spread([r], trained=1.3)
    >>> fig.axes[0].get_xscale(), len(fig.axes[0].get_legend().get_texts())
    ('log', 3)
    """
    if not results:
        raise ValueError("results is empty; expected one InitSpread per layer input")
    dims = results[0].dims
    fig, ax = plt.subplots(figsize=(STACKED_WIDTH, 4.4), layout="constrained")
    ax.axhspan(1 / 3, 3, color="0.92", zorder=0)
    for key, color, label in (("unscaled", SCALE_COLOR["none"], r"$q\cdot k$"),
                              ("scaled", SCALE_COLOR["sqrt"], r"$q\cdot k/\sqrt{d_k}$")):
        curves = np.concatenate([getattr(r, key) for r in results])  # (layers x seeds, widths)
        ax.loglog(dims, curves.T, color=color, lw=0.6, alpha=0.35)
        ax.loglog(dims, np.median(curves, axis=0), "o-", color=color, lw=2, ms=5, label=f"{label}, fresh random $W_Q, W_K$")
    if trained is not None:
        ax.plot([d_trained], [trained], "D", color="k", ms=7, label="trained MiniLM, scaled")
    ax.set(xlabel=r"key width $d_k$", ylabel="spread of a query's scores", title="Real inputs, random projections")
    ax.set_xticks(dims, [str(int(d)) for d in dims])
    ax.set_yticks([0.1, 0.2, 1 / 3, 0.5, 1, 2, 3, 5, 10], ["0.1", "0.2", "1/3", "0.5", "1", "2", "3", "5", "10"])
    ax.set_ylim(min(0.15, ax.get_ylim()[0]), max(12, ax.get_ylim()[1]))
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_minor_formatter(NullFormatter())
    ax.legend(loc="upper left", fontsize=10.5)
    return fig
