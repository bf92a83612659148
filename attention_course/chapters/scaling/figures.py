r"""Figures for chapter 6: why attention divides the scores by :math:`\sqrt{d_k}`.

Every helper takes what the chapter has already measured (with
:mod:`attention_course.chapters.scaling.measures` or
:mod:`attention_course.chapters.scaling.training`), draws it at the book's column
width (7 in, 11 pt), labels its axes, returns the :class:`matplotlib.figure.Figure`
and changes no global matplotlib state. One colour per scale across the chapter:
:data:`SCALE_COLOR`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Optional, Union

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ...core._backend import Array, ShapeError, shape_str, to_numpy
from ..lowrank.baselines import loglog_slope
from .measures import SaturationStats, VarianceSweep
from ...figures.style import book_figure

if TYPE_CHECKING:  # type hints only: figures take the experiment's results, not its code
    from .backward_swap import BackwardGrid
    from .saturation_training import SaturationGrid
    from .training import ScaleComparison

__all__ = [
    "SCALE_LABEL", "SCALE_COLOR", "plot_score_variance", "plot_minilm_scores", "plot_saturation",
    "plot_jacobian", "plot_live_training", "plot_full_comparison", "plot_scale_pair", "plot_saturation_training",
    "BACKWARD_COLOR", "plot_backward_swap",
]

SCALE_LABEL = {"sqrt": r"$1/\sqrt{d_k}$", "none": "none (1)", "mup": r"$1/d_k$ (muP)"}
SCALE_COLOR = {"sqrt": "tab:blue", "none": "tab:red", "mup": "tab:green"}
GRAD_LABEL = r"$\|\nabla_{W_Q, W_K}\mathcal{L}\|$"


def _running_mean(x: np.ndarray, n: int) -> np.ndarray:
    return np.convolve(x, np.ones(n) / n, mode="valid")  # (len(x) - n + 1,): mean of n steps


@book_figure
def plot_score_variance(sweep: VarianceSweep, rng: Union[np.random.Generator, int] = 0,
                        hist_dims: Sequence[int] = (4, 64, 1024), n_hist: int = 5000) -> Figure:
    r"""Left: the variance of :math:`q\cdot k` and of :math:`q\cdot k/\sqrt{d_k}` against :math:`d_k`.

    Right: histograms of ``n_hist`` fresh unscaled scores :math:`q \cdot k` at each of
    ``hist_dims``, drawn from ``rng`` (a seed or a Generator, which is advanced).

    Parameters
    ----------
    sweep : VarianceSweep
        An unscaled :func:`~attention_course.chapters.scaling.measures.variance_vs_dim`; the scaled
        variance is ``empirical / d_k`` (the same draws divided by :math:`\sqrt{d_k}`),
        error bars are 2 standard errors.

    Examples
    --------
    >>> from attention_course.chapters.scaling.measures import variance_vs_dim
    >>> fig = plot_score_variance(variance_vs_dim([1, 4, 16], n_samples=200), hist_dims=(4,), n_hist=50)
    >>> [ax.get_yscale() for ax in fig.axes]
    ['log', 'log']
    """
    rng = np.random.default_rng(rng)
    dims = sweep.d_k
    scaled = sweep.empirical / dims  # Var(q.k / sqrt(d_k)) from the same draws
    slope_raw, slope_scaled = loglog_slope(dims, sweep.empirical), loglog_slope(dims, scaled)
    fig, (ax, ax_h) = plt.subplots(1, 2, figsize=(7, 3.6), layout="constrained")
    ax.loglog(dims, sweep.theory, "k--", lw=1, label=r"theory $d_k\,\sigma_q^2\sigma_k^2$")
    ax.errorbar(dims, sweep.empirical, yerr=2 * sweep.std_error, fmt="o", color=SCALE_COLOR["none"], ms=4,
                label=f"$q\\cdot k$ (slope {slope_raw:.2f})")
    ax.errorbar(dims, scaled, yerr=2 * sweep.std_error / dims, fmt="s", color=SCALE_COLOR["sqrt"], ms=4,
                label=f"$q\\cdot k/\\sqrt{{d_k}}$ (slope {round(slope_scaled, 2) + 0.0:.2f})")
    ax.set(xlabel="$d_k$", ylabel="variance of the score", title="Score variance (±2 s.e.)")
    ax.legend()
    bins = np.linspace(-128, 128, 129)
    for d, color in zip(hist_dims, ("tab:orange", "tab:purple", "tab:red", "tab:brown")):
        s = (rng.normal(size=(n_hist, d)) * rng.normal(size=(n_hist, d))).sum(-1)  # (n_hist,) q.k
        ax_h.hist(s, bins=bins, histtype="step", lw=1.5, color=color, density=True, label=f"$d_k$ = {d}")
    ax_h.set(xlabel=r"unscaled score $q\cdot k$", ylabel="density", yscale="log", ylim=(1e-5, 0.5),
             title=r"Scores spread like $\sqrt{d_k}$")
    ax_h.legend()
    return fig


@book_figure
def plot_minilm_scores(theory: Array, measured: Array, scores: Array, d_k: int) -> Figure:
    r"""A pretrained model's score variance per head against the prediction, and its scores.

    Parameters
    ----------
    theory, measured : array, shape (L, h)
        :func:`~attention_course.chapters.scaling.measures.pair_logit_variance` of every layer's heads.
    scores : array, shape (N,)
        Unscaled scores :math:`q_i \cdot k_j` of real token pairs; also drawn divided by
        :math:`\sqrt{d_k}`.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> fig = plot_minilm_scores(rng.uniform(1, 2, (2, 3)), rng.uniform(2, 3, (2, 3)), rng.normal(size=50), 32)
    >>> fig.axes[0].get_title(), fig.axes[2].get_ylabel()
    ('6 heads, $d_k$ = 32', 'layer')
    """
    theory, measured = np.asarray(to_numpy(theory), float), np.asarray(to_numpy(measured), float)
    if theory.ndim != 2 or theory.shape != measured.shape:
        raise ShapeError(f"theory has shape {shape_str(theory)} and measured {shape_str(measured)}; "
                         f"expected equal shapes (L, h)")
    n_layers, n_heads = theory.shape
    scores = np.asarray(to_numpy(scores), float).ravel()
    fig, (ax, ax_h) = plt.subplots(1, 2, figsize=(7, 3.6), layout="constrained")
    sc = ax.scatter(theory.ravel(), measured.ravel(), c=np.repeat(np.arange(1, n_layers + 1), n_heads),
                    cmap="viridis", s=18)
    lim = np.array([theory.min() * 0.7, measured.max() * 1.4])
    ax.plot(lim, lim, "k--", lw=1, label="measured = predicted")
    ax.set(xscale="log", yscale="log", xlabel=r"predicted $d_k\,\hat\sigma_q^2\hat\sigma_k^2$",
           ylabel=r"measured Var$(q_i\cdot k_j)$", title=f"{theory.size} heads, $d_k$ = {d_k}")
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


@book_figure
def plot_saturation(stats: Mapping[str, SaturationStats], n_keys: int = 64) -> Figure:
    """Entropy, largest weight and share of saturated rows against :math:`d_k`, one line per scale.

    Parameters
    ----------
    stats : dict of scale name -> SaturationStats
        :func:`~attention_course.chapters.scaling.measures.saturation_stats` over the same ``d_k``
        with ``n_keys`` keys and threshold 0.99.

    Examples
    --------
    >>> from attention_course.chapters.scaling.measures import saturation_stats
    >>> fig = plot_saturation({s: saturation_stats([4, 64], scale=s, n_batches=1) for s in ("none", "sqrt")})
    >>> [ax.get_ylabel() for ax in fig.axes]
    ['mean entropy (nats)', 'mean largest weight', 'share of rows > 0.99']
    """
    fields = (("entropy", "mean entropy (nats)", "Entropy of a row"),
              ("max_weight", "mean largest weight", "Largest weight in a row"),
              ("frac_saturated", "share of rows > 0.99", "Rows with largest weight > 0.99"))
    fig, axes = plt.subplots(3, 1, figsize=(7, 6.6), layout="constrained", sharex=True)
    for ax, (name, ylabel, title) in zip(axes, fields):
        for s, r in stats.items():
            ax.plot(r.d_k, getattr(r, name), "o-", ms=4, color=SCALE_COLOR.get(s), label=SCALE_LABEL.get(s, s))
        ax.set(ylabel=ylabel, title=f"{title}, {n_keys} keys")
        ax.set_xscale("log", base=2)
    axes[0].axhline(np.log(n_keys), color="k", ls=":", lw=1, label=f"uniform, ln {n_keys}")
    axes[1].axhline(1 / n_keys, color="k", ls=":", lw=1, label=f"uniform, 1/{n_keys}")
    axes[-1].set_xlabel("$d_k$")
    axes[0].legend(loc="center left", bbox_to_anchor=(1.0, 0.5))
    return fig


@book_figure
def plot_jacobian(stats: Mapping[str, SaturationStats], sigmas: Array, jacobian_norm: Array,
                  d_k: int = 64, unscaled_dims: Sequence[int] = (64, 1024),
                  band: Optional[tuple[float, float]] = None, floor: Optional[float] = None) -> Figure:
    r"""Median softmax Jacobian norm against :math:`d_k` (left) and against the score spread :math:`\sigma` (right).

    Parameters
    ----------
    stats : dict of scale name -> SaturationStats
        As for :func:`plot_saturation`; the left panel draws ``jacobian_norm``.
    sigmas, jacobian_norm : array, shape (M,)
        The median norm at ``d_k`` with scores of standard deviation ``sigmas``. Marked
        on it: the scaled scores (:math:`\sigma = 1`, any width) and unscaled ones at each
        of ``unscaled_dims`` (:math:`\sigma = \sqrt{d_k}`; hollow beyond ``d_k``).
    band, floor : optional
        A band of :math:`\sigma` to shade (the half-maximum band of
        :func:`~attention_course.chapters.scaling.sensitive_regime.half_maximum_band`) and the
        uniform row's norm, drawn dotted.

    Examples
    --------
    >>> from attention_course.chapters.scaling.measures import saturation_stats
    >>> sat = {s: saturation_stats([4, 64], scale=s, n_batches=1) for s in ("none", "sqrt")}
    >>> fig = plot_jacobian(sat, np.geomspace(0.1, 40, 5), np.linspace(0.1, 0.5, 5))
    >>> fig.axes[1].get_xscale(), len(fig.axes[1].get_legend().get_texts())
    ('log', 3)
    """
    sigmas, jac = np.asarray(to_numpy(sigmas), float), np.asarray(to_numpy(jacobian_norm), float)
    if sigmas.ndim != 1 or sigmas.shape != jac.shape:
        raise ShapeError(f"sigmas has shape {shape_str(sigmas)} and jacobian_norm {shape_str(jac)}; "
                         f"expected equal shapes (M,)")
    marks = [("scaled, any $d_k$", 1.0, "sqrt", True)]
    marks += [(f"unscaled, $d_k$ = {d}", float(np.sqrt(d)), "none", d <= d_k) for d in unscaled_dims]
    fig, (ax, ax_s) = plt.subplots(1, 2, figsize=(7, 3.6), layout="constrained")
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


@book_figure
def plot_live_training(result: ScaleComparison, window: int = 10, vocab_size: int = 64) -> Figure:
    """Loss, :math:`W_Q, W_K` gradient norm (``window``-step means) and the first layer's sharpness per step.

    ``result`` is an unthinned :class:`~attention_course.chapters.scaling.training.ScaleComparison`
    of one width; chance is :math:`\\ln` ``vocab_size``.

    Examples
    --------
    >>> from attention_course.chapters.scaling.training import compare_scales
    >>> fig = plot_live_training(compare_scales([8], ["sqrt", "none"], steps=4, d_model=8, eval_batch=8), window=2)
    >>> [ax.get_ylabel() for ax in fig.axes][::2]
    ['training loss (nats)', 'mean largest weight']
    """
    if result.d_k.shape != (1,):
        raise ValueError(f"result has d_k={result.d_k.tolist()}; expected one width")
    d_k = int(result.d_k[0])
    steps = np.arange(result.loss.shape[-1])
    fig, axes = plt.subplots(3, 1, figsize=(7, 7), layout="constrained", sharex=True)
    for j, s in enumerate(result.scales):
        kw = dict(color=SCALE_COLOR.get(s), label=SCALE_LABEL.get(s, s))
        axes[0].plot(steps[window - 1:], _running_mean(result.loss[0, j], window), **kw)
        axes[1].plot(steps[window - 1:], _running_mean(result.grad_norm_qk[0, j], window), **kw)
        axes[2].plot(steps, result.max_weight[0, j, :, 0], **kw)
    axes[0].axhline(np.log(vocab_size), color="k", ls=":", lw=1, label=f"chance, ln {vocab_size}")
    axes[0].set(ylabel="training loss (nats)", title=f"Loss, $d_k$ = {d_k} ({window}-step mean)")
    axes[1].set(ylabel=GRAD_LABEL, yscale="log", title=f"Gradient norm of $W_Q$ and $W_K$ ({window}-step mean)")
    axes[2].set(xlabel="step", ylabel="mean largest weight", ylim=(0, 1.02),
                title="Sharpness of layer 1's attention")
    axes[0].legend(loc="center left", bbox_to_anchor=(1.0, 0.5))
    return fig


@book_figure
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


@book_figure
def plot_scale_pair(scaled: Array, unscaled: Array, tokens: Sequence[str], d_k: int, title: str = "") -> Figure:
    r"""One head's attention matrix with the :math:`1/\sqrt{d_k}` (left) and without it (right).

    Both panels share one colour scale, 0 to the largest weight shown (1 when a row is
    one-hot), and one colour bar.

    Parameters
    ----------
    scaled, unscaled : array, shape (T, T)
        :func:`~attention_course.chapters.scaling.saturated_rows.scale_pair` of one head and sentence;
        rows are queries, columns keys.
    tokens : sequence of str, length T
    d_k : int
        The head's width, for the titles.

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


@book_figure
def plot_saturation_training(grid: SaturationGrid, d_k: int = 64, layer: int = 0, vocab_size: int = 64) -> Figure:
    r"""Held-out loss, share of saturated rows and the gradient through them, over training.

    Top: held-out loss. Middle: share of rows with largest weight above the threshold, in
    ``layer``. Bottom: mean :math:`\lVert\partial\mathcal{L}/\partial x_i\rVert` at the
    softmax's input over saturated rows (dashed) and over the other rows (solid), in
    ``layer``. Lines are means over seeds, bands their range; one colour per variant.

    Parameters
    ----------
    grid : SaturationGrid
        :func:`~attention_course.chapters.scaling.saturation_training.run_saturation` or
        :func:`~attention_course.chapters.scaling.saturation_training.load_saturation`.

    Examples
    --------
    >>> from attention_course.chapters.scaling.saturation_training import run_saturation
    >>> g = run_saturation([0], d_ks=[8], variants=["scaled", "unscaled"], steps=4)
    >>> fig = plot_saturation_training(g, d_k=8)
    >>> [ax.get_yscale() for ax in fig.axes]
    ['linear', 'linear', 'log']
    """
    step = grid.step.astype(float)
    x = np.maximum(step, 1.0)  # step 0 drawn at 1 on the log axis
    fig, axes = plt.subplots(3, 1, figsize=(7, 7.2), layout="constrained", sharex=True)
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
    axes[1].set(ylabel="share saturated", ylim=(-0.02, 1.02), title=f"Rows with largest weight > {thr}, layer {layer + 1}")
    axes[2].set(ylabel=r"mean $\|\partial\mathcal{L}/\partial x_i\|$", yscale="log", xscale="log",
                xlabel="step (log scale; step 0 drawn at 1)",
                title=f"Gradient per row at the softmax, layer {layer + 1}: saturated (dashed), others (solid)")
    return fig


#: One colour per backward pass in :func:`plot_backward_swap`.
BACKWARD_COLOR = {"true": "0.25", "tempered": "tab:green", "size": "tab:purple", "direction": "tab:brown",
                  "saturated": "tab:orange"}
BACKWARD_LABEL = {"true": "true backward", "tempered": "tempered backward (size and direction)",
                  "size": "true direction, tempered size", "direction": "tempered direction, true size",
                  "saturated": "tempered on saturated rows only"}


@book_figure
def plot_backward_swap(grid: BackwardGrid, vocab_size: int = 64) -> Figure:
    r"""Held-out loss of every backward-swap run: one row per variant, one dot per seed.

    Rows are :func:`~attention_course.chapters.scaling.backward_swap.run_backward`'s variants in
    order, top to bottom; the colour says which backward pass trained the model
    (:data:`BACKWARD_COLOR`), a short bar marks the mean over seeds, and a dotted line the
    chance level :math:`\ln V`.

    Parameters
    ----------
    grid : BackwardGrid
        :func:`~attention_course.chapters.scaling.backward_swap.run_backward` or
        :func:`~attention_course.chapters.scaling.backward_swap.load_backward`.

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
           title=f"Backward swap: $d_k$ = {grid.settings['d_k']}, {len(grid.seeds)} seeds, "
                 f"{grid.settings['steps']} steps")
    ax.grid(axis="x", alpha=0.3)
    fig.legend(loc="outside lower center", ncol=2, frameon=False)
    return fig
