"""Figures for chapter 2, attention as Nadaraya-Watson kernel smoothing: one colour per kernel (:data:`KERNEL_COLORS`).

Each draws results the chapter has computed, for the book's column
(:func:`~attention_course.figures.style.book_figure`), and returns the figure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ...core._backend import Array, ShapeError, shape_str, to_numpy
from ...figures.style import book_figure
from .learning import BandwidthFit
from .smoothing import RegressionData, kernel_matrix, mse

__all__ = [
    "plot_local_average", "plot_bandwidth_over_draws", "plot_bandwidth_fits", "plot_bandwidth_objectives", "plot_learned_metric",
    "plot_weights_on_keys", "plot_locality", "plot_input_locality", "plot_gauge_identity",
]

KERNEL_COLORS = {"gaussian": "tab:blue", "laplace": "tab:orange", "boxcar": "tab:green", "dot": "tab:red"}


def _vector(name: str, x: Array, n: Optional[int] = None) -> np.ndarray:
    a = np.asarray(to_numpy(x), dtype=float)
    if a.ndim != 1 or (n is not None and a.shape[0] != n):
        raise ShapeError(f"{name} has shape {shape_str(a)}; expected ({n if n is not None else 'n'},)")
    return a


@book_figure
def plot_local_average(data: RegressionData, query: float, bandwidth: float) -> Figure:
    r"""Kernel smoothing in one picture: points sized by their Gaussian weight for the query, and their average.

    Top: the points, as large and dark as :math:`\alpha_j(q) \propto e^{-(q - x_j)^2/2h^2}`, the true curve
    and the weighted average (a star). Bottom: the weights as stems under the kernel bump.

    Parameters
    ----------
    data : RegressionData, 1-D (:func:`~attention_course.chapters.kernels.smoothing.sine_data`)
    query : float
    bandwidth : float, :math:`h > 0`

    Examples
    --------
    >>> from attention_course.chapters.kernels.smoothing import sine_data
    >>> fig = plot_local_average(sine_data(seed=0), query=2.5, bandwidth=0.4)
    >>> [ax.get_ylabel() for ax in fig.axes]
    ['y', 'weight $\\alpha_j(q)$']
    >>> plt.close(fig)
    """
    if not bandwidth > 0:
        raise ValueError(f"bandwidth must be positive; got {bandwidth}")
    xs, ys = _vector("data.x_train", data.x_train), _vector("data.y_train", data.y_train)
    logits = -((query - xs) ** 2) / (2 * bandwidth**2)  # (S,)
    weights = np.exp(logits - logits.max())  # (S,)
    weights /= weights.sum()  # (S,) sum to 1
    estimate = float(weights @ ys)
    order = np.argsort(weights)  # draw the heaviest points last, on top
    fig, axes = plt.subplots(2, 1, figsize=(7, 5.2), layout="constrained", height_ratios=[2.2, 1], sharex=True)
    ax = axes[0]
    ax.plot(data.x_test, data.y_test, "k--", lw=1, label=r"true curve $2\sin x + x$")
    ax.scatter(xs[order], ys[order], s=12 + 260 * weights[order] / weights.max(), c=weights[order],
               cmap="Blues", vmin=-0.15 * weights.max(), edgecolors="0.35", linewidths=0.5,
               label="observations (size, colour: weight)")
    ax.axvline(query, color="tab:red", ls=":", lw=1.2)
    ax.plot([query], [estimate], marker="*", ms=17, color="tab:red", mec="k", ls="none",
            label=f"weighted average at q = {query:g}")
    ax.set(ylabel="y", title="Estimate the curve at q: average the nearby observations", ylim=(-2, 8.2))
    ax.legend(loc="upper left")
    curve = np.linspace(xs.min(), xs.max(), 400)  # (400,)
    bump = np.exp(-((query - curve) ** 2) / (2 * bandwidth**2))  # (400,) the kernel, peak 1
    axes[1].plot(curve, bump * weights.max(), color=KERNEL_COLORS["gaussian"], lw=1, label="kernel, scaled")
    axes[1].vlines(xs, 0, weights, color=KERNEL_COLORS["gaussian"], lw=2)
    axes[1].axvline(query, color="tab:red", ls=":", lw=1.2)
    axes[1].set(xlabel="x", ylabel=r"weight $\alpha_j(q)$", ylim=(0, 1.25 * weights.max()))
    axes[1].legend(loc="upper right")
    return fig


@book_figure
def plot_bandwidth_over_draws(w_values: Array, seed_mse: Array) -> Figure:
    """Test error at three inverse widths on many draws of the data: one line per draw, and the median.

    Parameters
    ----------
    w_values : array, shape (3,), wide to narrow
    seed_mse : array, shape (draws, 3)
        (:func:`~attention_course.chapters.kernels.smoothing.mse_by_bandwidth_over_seeds`).

    Examples
    --------
    >>> fig = plot_bandwidth_over_draws([0.3, 3, 30], np.array([[0.8, 0.2, 0.9], [0.9, 0.1, 0.7]]))
    >>> fig.axes[0].get_xscale()
    'log'
    >>> plt.close(fig)
    """
    w = _vector("w_values", w_values)
    errors = np.asarray(to_numpy(seed_mse), dtype=float)
    if errors.ndim != 2 or errors.shape[1] != len(w):
        raise ShapeError(f"seed_mse has shape {shape_str(errors)}; expected (draws, {len(w)}), one column per width")
    fig, ax = plt.subplots(figsize=(6, 3.6), layout="constrained")
    for row in errors:
        ax.semilogx(w, row, color="0.7", lw=0.8)
    ax.semilogx(w, np.median(errors, axis=0), "o-", color=KERNEL_COLORS["gaussian"], lw=2,
                label=f"median of {len(errors)} draws")
    ax.plot([], [], color="0.7", lw=0.8, label="one draw of the data")
    ax.set(xlabel="inverse bandwidth w = 1/h", ylabel="test MSE", xticks=w, xticklabels=[f"{v:g}" for v in w],
           title="Too wide, about right, too narrow: on every draw", ylim=(0, 1.15 * errors.max()))
    ax.legend(loc="upper center")
    return fig


@book_figure
def plot_bandwidth_fits(data: RegressionData, preds: Mapping[float, Array], w_grid: Array, sweep: Array,
                        seed_median: Optional[Array] = None) -> Figure:
    """Three Gaussian fits (too wide, near the best, too narrow) and the test error against :math:`w = 1/h`.

    Parameters
    ----------
    data : RegressionData
    preds : mapping of float to array, shape (T,)
        :math:`w` to the predictions on ``data.x_test``; the first three are drawn.
    w_grid, sweep : arrays, shape (G,), :math:`w` and the test MSE at each
    seed_median : array, shape (len(preds),), optional, the median test MSE over other draws

    Examples
    --------
    >>> from attention_course.chapters.kernels.smoothing import mse_by_bandwidth, nadaraya_watson, sine_data
    >>> data = sine_data(seed=0)
    >>> preds = {w: nadaraya_watson(data.x_test, data.x_train, data.y_train, bandwidth=1 / w)[0] for w in (0.3, 3, 30)}
    >>> grid = np.geomspace(0.1, 100, 9)
    >>> sweep = mse_by_bandwidth(data.x_test, data.x_train, data.y_train, data.y_test, grid)
    >>> fig = plot_bandwidth_fits(data, preds, grid, sweep)
    >>> len(fig.axes), fig.axes[3].get_xscale()
    (4, 'log')
    >>> plt.close(fig)
    """
    w_fit = list(preds)[:3]
    grid, errors = _vector("w_grid", w_grid), _vector("sweep", sweep)
    if errors.shape != grid.shape:
        raise ShapeError(f"sweep has shape {shape_str(errors)} but w_grid {shape_str(grid)}; expected one error per w")
    verdicts = ("too wide: blur", "near the best", "too narrow: noise")
    fig, axes = plt.subplots(2, 2, figsize=(7, 5.6), layout="constrained")
    axes = axes.ravel()
    for ax, w, verdict in zip(axes, w_fit, verdicts):
        ax.scatter(data.x_train, data.y_train, s=9, color="0.5", label="training data")
        ax.plot(data.x_test, data.y_test, "k--", lw=1, label="true curve (no noise)")
        ax.plot(data.x_test, _vector(f"preds[{w}]", preds[w], len(data.x_test)),
                color=KERNEL_COLORS["gaussian"], lw=2, label="fit")
        ax.set(xlabel="x", ylabel="y", title=f"w = {w:g} ({verdict})", ylim=(-2, 6))
    axes[0].legend(loc="lower right")
    ax = axes[3]
    ax.semilogx(grid, errors, color=KERNEL_COLORS["gaussian"], label="all widths")
    ax.semilogx(w_fit, [mse(preds[w], data.y_test) for w in w_fit], "o", mfc="none",
                color=KERNEL_COLORS["gaussian"], label="the three fits")
    best = int(np.argmin(errors))
    ax.axvline(grid[best], ymax=0.6, color="0.4", ls=":", lw=1, label="lowest test error")  # below the legend
    if seed_median is not None:
        ax.semilogx(w_fit, _vector("seed_median", seed_median, len(w_fit)), "o", color="tab:orange",
                    label="median, other draws")
    ax.set(xlabel="inverse bandwidth w = 1/h", ylabel="test MSE", title="Test error against w",
           ylim=(0, 1.6 * errors.max()))  # room for the legend above the curve
    ax.legend(loc="upper right")
    return fig


@book_figure
def plot_bandwidth_objectives(w_grid: Array, objectives: Mapping[str, Array], fit_loo: BandwidthFit,
                              fit_self: BandwidthFit) -> Figure:
    """Left: the two training objectives and the test error against :math:`w`; right: :math:`w` during training.

    Parameters
    ----------
    w_grid : array, shape (G,)
    objectives : mapping of ``"leave_one_out"``, ``"self_included"``, ``"test"`` to arrays, shape (G,)
    fit_loo, fit_self : BandwidthFit, with and without leave-one-out

    Examples
    --------
    >>> from attention_course.chapters.kernels.learning import fit_bandwidth
    >>> from attention_course.chapters.kernels.smoothing import sine_data
    >>> data = sine_data(seed=0)
    >>> fits = [fit_bandwidth(data.x_train, data.y_train, leave_one_out=loo, steps=3) for loo in (True, False)]
    >>> grid = np.array([1.0, 2.0, 4.0])
    >>> fig = plot_bandwidth_objectives(grid, {"leave_one_out": grid, "self_included": grid, "test": grid}, *fits)
    >>> fig.axes[1].get_xlabel()
    'Adam step'
    >>> plt.close(fig)
    """
    grid = _vector("w_grid", w_grid)
    styles = {
        "leave_one_out": ("training loss, leave-one-out", KERNEL_COLORS["gaussian"], "-"),
        "self_included": ("training loss, self included", "tab:red", "-"),
        "test": ("test MSE (noiseless curve)", "k", "--"),
    }
    missing = set(styles) - set(objectives)
    if missing:
        raise KeyError(f"objectives lacks {sorted(missing)}; expected keys {sorted(styles)}")
    fig, axes = plt.subplots(1, 2, figsize=(7, 4.4), layout="constrained")
    for key, (label, color, ls) in styles.items():
        axes[0].semilogx(grid, _vector(f"objectives[{key!r}]", objectives[key], len(grid)),
                         color=color, ls=ls, label=label)
    axes[0].axvline(fit_loo.w, color=KERNEL_COLORS["gaussian"], ls=":", lw=1, label="learned w, leave-one-out")
    axes[0].axvline(fit_self.w, color="tab:red", ls=":", lw=1, label="learned w, self included")
    axes[0].set(xlabel="inverse bandwidth w", ylabel="mean squared error", title="Two objectives, one test error")
    axes[1].plot(fit_loo.w_history, color=KERNEL_COLORS["gaussian"], label="leave-one-out: converges")
    axes[1].plot(fit_self.w_history, color="tab:red", label="self included: keeps growing")
    top = max(np.max(fit_loo.w_history), np.max(fit_self.w_history))
    # headroom above the curves so the legend sits clear of the rising red curve
    axes[1].set(xlabel="Adam step", ylabel="learned w", title="w during training", ylim=(0, 1.45 * top))
    axes[1].legend(loc="upper left")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=2)
    return fig


@book_figure
def plot_learned_metric(W: Array, x_test: Array, y_test: Array, pred_before: Array, pred_after: Array, before_label: str = "W = I"
                       ) -> Figure:
    r"""What a learned metric :math:`\kappa_W(q, k) = \exp(-\lVert W(q-k)\rVert^2/2)` found.

    Top: the column norms :math:`\lVert W e_c\rVert` and the kernel along each axis against :math:`W = I`;
    bottom: test predictions against :math:`x_0` before and after.

    Parameters
    ----------
    W : array, shape (d, d)
    x_test : array, shape (T, d)
    y_test, pred_before, pred_after : arrays, shape (T,)

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = rng.uniform(-2, 2, size=(30, 3))
    >>> y = np.sin(2 * x[:, 0])
    >>> fig = plot_learned_metric(np.diag([5.0, 0.1, 0.1]), x, y, 0 * y, y)
    >>> [ax.get_title() for ax in fig.axes][:1]
    ['The learned metric singles out $x_0$']
    >>> plt.close(fig)
    """
    Wm = np.asarray(to_numpy(W), dtype=float)
    x = np.asarray(to_numpy(x_test), dtype=float)
    if Wm.ndim != 2 or Wm.shape[0] != Wm.shape[1] or x.ndim != 2 or x.shape[1] != Wm.shape[1]:
        raise ShapeError(f"W has shape {shape_str(Wm)} and x_test {shape_str(x)}; expected (d, d) and (T, d)")
    d, T = Wm.shape[1], x.shape[0]
    y, before, after = (_vector(n, a, T) for n, a in
                        (("y_test", y_test), ("pred_before", pred_before), ("pred_after", pred_after)))
    col_norms = np.linalg.norm(Wm, axis=0)  # (d,) |W e_c|
    names = [f"$x_{j}$" for j in range(d)]
    delta = np.linspace(-2, 2, 401)  # (401,)
    fig, axes = plt.subplot_mosaic([["norms", "kernel"], ["pred", "pred"]], figsize=(7, 6.4),
                                   layout="constrained", height_ratios=[1, 0.9])
    ax = axes["norms"]
    ax.bar(names, col_norms, color=[KERNEL_COLORS["gaussian"]] + ["0.6"] * (d - 1))
    ax.axhline(1.0, color="k", ls=":", lw=1, label="start (W = I)")
    ax.set(xlabel="input coordinate", ylabel=r"column norm $\|W e_c\|$", title="The learned metric singles out $x_0$")
    ax.legend()
    ax = axes["kernel"]
    for j in range(d):
        shift = np.outer(delta, np.eye(d)[j])  # (401, d): move along coordinate j only
        ax.plot(delta, kernel_matrix(shift @ Wm.T, np.zeros((1, d)), "gaussian", 1.0)[:, 0],
                lw=2.2 if j == 0 else 1.2, color=KERNEL_COLORS["gaussian"] if j == 0 else "0.45")
    ax.plot(delta, np.exp(-delta**2 / 2), "k:", lw=1)
    # each curve labelled beside it (a legend would need the room above the curves)
    half_width = np.sqrt(2 * np.log(1 / 0.3)) / max(col_norms[0], 1e-12)  # where the x0 kernel is 0.3
    ax.annotate(f"along {names[0]}", (min(half_width + 0.15, 1.0), 0.3), color=KERNEL_COLORS["gaussian"],
                ha="left", va="center")  # a gap to the right of the curve, clear of the start's bell
    ax.annotate(f"along {names[1]} to {names[-1]}" if d > 2 else f"along {names[1]}", (-1.95, 1.06), color="0.3",
                ha="left", va="bottom")  # above the flat grey curves near 1
    ax.annotate("start\n(W = I)", (1.0, 0.82), ha="left", va="center")
    ax.set(xlabel=r"offset $\delta$ along coordinate $c$", ylabel=r"$\kappa_W(x, x + \delta e_c)$",
           title="Learned kernel: narrow in $x_0$ only", ylim=(-0.03, 1.3), yticks=np.arange(0, 1.01, 0.2))
    ax = axes["pred"]
    order = np.argsort(x[:, 0])  # (T,)
    ax.plot(x[order, 0], y[order], "k--", lw=1, label=r"true $\sin(2x_0)$")
    ax.scatter(x[:, 0], before, s=4, color="0.6", label=before_label)
    ax.scatter(x[:, 0], after, s=4, color=KERNEL_COLORS["gaussian"], label="learned W")
    ax.set(xlabel="$x_0$", ylabel="prediction", title="Test predictions against $x_0$", ylim=(-1.15, 1.5))
    ax.legend(markerscale=3, loc="upper center", ncol=3)
    return fig


@book_figure
def plot_weights_on_keys(points: Array, weights: Mapping[str, Array], query_index: int = 0) -> Figure:
    """One query's weights on 2-D keys, one panel per kernel; the query (a star) sits on key ``query_index``.

    Parameters
    ----------
    points : array, shape (S, 2), the keys
    weights : mapping of panel title to array, shape (S,)
    query_index : int

    Examples
    --------
    >>> pts = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    >>> fig = plot_weights_on_keys(pts, {"a": np.array([0.5, 0.3, 0.2]), "b": np.array([0.2, 0.7, 0.1])})
    >>> len(fig.axes), fig.axes[-1].get_ylabel()
    (3, 'weight (colours: 0 to the largest)')
    >>> plt.close(fig)
    """
    p = np.asarray(to_numpy(points), dtype=float)
    if p.ndim != 2 or p.shape[1] != 2:
        raise ShapeError(f"points has shape {shape_str(p)}; expected (S, 2)")
    rows = {title: _vector(f"weights[{title!r}]", w, len(p)) for title, w in weights.items()}
    vmax = max(w.max() for w in rows.values())
    fig, axes = plt.subplots(1, len(rows), figsize=(7, 3.8), layout="constrained", sharey=True, squeeze=False)
    axes = axes[0]
    for ax, (title, w) in zip(axes, rows.items()):
        sc = ax.scatter(p[:, 0], p[:, 1], c=w, s=40 + 600 * w, cmap="viridis", vmin=0, vmax=vmax, edgecolor="k")
        ax.plot(*p[query_index], "r*", ms=14, label=f"query (on key {query_index})")
        for j, (px, py) in enumerate(p):
            radius = np.sqrt(40 + 600 * w[j]) / 2  # the marker's radius in points
            if px > p[:, 0].max() - 0.6:  # the right-most keys: label below, inside the panel
                ax.annotate(f"k{j}: {w[j]:.2f}", (px, py), textcoords="offset points", xytext=(0, -radius - 2),
                            ha="center", va="top")
            else:
                ax.annotate(f"k{j}: {w[j]:.2f}", (px, py), textcoords="offset points", xytext=(8, 6))
        ax.set(xlabel="key coordinate 1", title=f"{title}\nlargest weight {w.max():.2f}, on k{w.argmax()}",
               aspect="equal", xlim=(p[:, 0].min() - 0.5, p[:, 0].max() + 1.0),
               ylim=(p[:, 1].min() - 0.5, p[:, 1].max() + 0.6))
    axes[0].set_ylabel("key coordinate 2")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center")
    fig.colorbar(sc, ax=list(axes), label="weight (colours: 0 to the largest)", shrink=0.7)
    return fig


_LOCALITY_COLORS = {"gaussian": "tab:blue", "dot": "tab:red", "unit": "tab:purple", "random": "tab:gray"}
_LOCALITY_LABELS = {"gaussian": "Gaussian", "dot": "dot product", "unit": "dot product, unit keys",
                    "random": "random scores"}


@book_figure
def plot_locality(results: Mapping[str, Mapping[str, Mapping[str, Array]]], n: int) -> Figure:
    """The two measures of :func:`~attention_course.chapters.kernels.attention_kernel.locality_over_draws`, mean ± sd over draws.

    Left: own key gets the largest weight (chance :math:`1/n` as a line); right: rank correlation of weight with nearness.

    Parameters
    ----------
    results : mapping of setting label to ``locality_over_draws``'s dict
    n : int, the number of keys

    Examples
    --------
    >>> r = {"own_key": {"gaussian": np.ones(3), "random": np.full(3, 0.1)},
    ...      "rank_corr": {"gaussian": np.ones(3), "random": np.zeros(3)}}
    >>> fig = plot_locality({"a setting": r}, n=10)
    >>> [ax.get_ylabel() for ax in fig.axes]
    ['own key gets the largest weight', 'rank correlation of weight with nearness']
    >>> plt.close(fig)
    """
    measures = {"own_key": "own key gets the largest weight", "rank_corr": "rank correlation of weight with nearness"}
    if not results:
        raise ValueError("results is empty; expected at least one setting")
    for label, r in results.items():
        if not set(measures) <= set(r):
            raise ValueError(f"results[{label!r}] has measures {sorted(r)}; expected {sorted(measures)}")
    kernels = list(next(iter(results.values()))["own_key"])
    width = 0.8 / len(kernels)
    fig, axes = plt.subplots(1, 2, figsize=(7, 4.4), layout="constrained")
    for ax, (measure, ylabel) in zip(axes, measures.items()):
        for i, kernel in enumerate(kernels):
            values = [_vector(f"results[{label!r}][{measure!r}][{kernel!r}]", r[measure][kernel])
                      for label, r in results.items()]
            x = np.arange(len(values)) + (i - (len(kernels) - 1) / 2) * width  # (settings,)
            ax.errorbar(x, [v.mean() for v in values], yerr=[v.std() for v in values], fmt="o", capsize=3,
                        color=_LOCALITY_COLORS.get(kernel), label=_LOCALITY_LABELS.get(kernel, kernel))
        ax.set_xticks(np.arange(len(results)), [label.replace(", ", ",\n") for label in results])
        ax.set(ylabel=ylabel, xlabel="key lengths, dimension", ylim=(-0.1, 1.08))
    axes[0].axhline(1 / n, color="k", ls=":", lw=1, label=f"chance 1/n = {1 / n:.2f}")
    axes[1].axhline(0, color="k", ls=":", lw=1)
    axes[0].set_title("Is the nearest key the winner?")
    axes[1].set_title("Does weight fall with distance?")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=3)
    return fig


_ATTENTION = "tab:red"


@book_figure
def plot_input_locality(rank_corr: Array, blind_rank_corr: Array, threshold: float = 0.5) -> Figure:
    """Per head: does weight fall with distance between the layer's inputs? A heat map, and attention against query-blind.

    Parameters
    ----------
    rank_corr, blind_rank_corr : array, shape (layers, heads)
        (:func:`~attention_course.chapters.kernels.input_locality.input_locality_by_head`, averaged over texts).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> fig = plot_input_locality(rng.uniform(-1, 1, (2, 3)), rng.uniform(-1, 1, (2, 3)))
    >>> fig.axes[0].get_ylabel(), fig.axes[0].get_yticklabels()[0].get_text()
    ('layer', '1')
    >>> plt.close(fig)
    """
    rc, bl = (np.asarray(to_numpy(a), dtype=float) for a in (rank_corr, blind_rank_corr))
    if rc.ndim != 2 or rc.shape != bl.shape:
        raise ShapeError(f"rank_corr {shape_str(rc)} and blind_rank_corr {shape_str(bl)}; expected the same "
                         f"(layers, heads) shape")
    L, H = rc.shape
    fig, (ax_map, ax_sc) = plt.subplots(1, 2, figsize=(7, 3.3), layout="constrained", width_ratios=(1.5, 1))
    im = ax_map.imshow(rc, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
    fig.colorbar(im, ax=ax_map, shrink=0.9, label="rank correlation")
    ax_map.set_xticks(range(H), labels=[str(h + 1) for h in range(H)])
    ax_map.set_yticks(range(L), labels=[str(layer + 1) for layer in range(L)])
    ax_map.set(xlabel="head", ylabel="layer", title="Weight against nearness in the input")
    lo = min(-0.5, float(min(rc.min(), bl.min())) - 0.05)
    ax_sc.plot([lo, 1], [lo, 1], color="k", lw=0.8, ls=":", label="equal")
    ax_sc.axhline(threshold, color=_ATTENTION, lw=0.8, ls="--", label=f"{threshold:g}")
    ax_sc.scatter(bl.ravel(), rc.ravel(), s=14, color=_ATTENTION, alpha=0.8)
    ax_sc.set(xlim=(lo, 1), ylim=(lo, 1), xlabel="query-blind weight", ylabel="attention",
              title="One dot per head")
    ax_sc.legend(loc="upper left", fontsize=9)
    return fig


@book_figure
def plot_gauge_identity(doc: Mapping, thresholds: Array, sink_threshold: float = 0.5) -> Figure:
    r"""The stored ``qk-gauge`` run: locality against the gauge with baselines, the decision against its threshold, the finite gauges and the key spread.

    Parameters
    ----------
    doc : mapping, :func:`~attention_course.chapters.kernels.gauge_study.load_qk_gauge`
    thresholds : array (N,), thresholds on :math:`\rho(a_{\max})`

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> h = lambda *s: {"rank_corr": rng.uniform(0.5, 1, s), "blind_rank_corr": rng.uniform(0, 0.5, s),
    ...                 "sink_share": rng.uniform(0, 0.6, s[:2])}
    >>> rec = {"decide": h(2, 3, 2), "free": h(2, 3, 1), "own": h(2, 3, 2), "untrained": h(2, 3, 2),
    ...        "key_spread": rng.uniform(0, 1, (2, 3)), "key_spread_untrained": rng.uniform(0, 1, (2, 3))}
    >>> doc = {"decision_gauges": [1.0, 1024.0], "description_gauges": [1.0, 2.0], "models": {"MiniLM": rec}}
    >>> len(plot_gauge_identity(doc, [0.9, 0.99]).axes)
    4
    """
    colors = {"MiniLM": _ATTENTION, "SmolLM2": "tab:purple"}
    fig = plt.figure(figsize=(7, 8.4), layout="constrained")
    top, mid, bottom = fig.subfigures(3, 1, height_ratios=(1.05, 0.9, 1))
    ax_a = top.subplots(1, 1)
    ax_t = mid.subplots(1, 1)
    ax_d, ax_s = bottom.subplots(1, 2)
    dg, sg = np.asarray(doc["decision_gauges"], float), np.asarray(doc["description_gauges"], float)
    top_spread = max(float(np.max(rec[k])) for rec in doc["models"].values() for k in ("key_spread", "key_spread_untrained"))
    bins = np.linspace(0, 1.05 * top_spread, 25)  # one set of bins for every histogram, up to the largest spread
    for model, rec in doc["models"].items():
        c = colors.get(model, "k")
        keep = np.asarray(rec["decide"]["sink_share"]).ravel() < sink_threshold  # non-sink heads
        rho = np.asarray(rec["decide"]["rank_corr"]).reshape(-1, dg.size)[keep]  # (heads, gauges)
        ax_a.semilogx(dg, np.median(rho, 0), "o-", color=c, label=f"{model}: median head")
        ax_a.semilogx(dg, rho.min(0), "v:", color=c, ms=4, label=f"{model}: lowest head")
        for name, m in (("free", "s"), ("additive", "D")):
            if name in rec:
                base = np.asarray(rec[name]["rank_corr"]).reshape(-1)
                ax_a.plot([dg[-1]], [np.median(base)], m, color=c, mfc="white", ms=7,
                          label=f"{model}: {'free score table' if name == 'free' else 'additive score'}")
                ax_t.plot(thresholds, [np.mean(base >= t) for t in thresholds], m + "--", color=c, mfc="white", ms=4,
                          label=f"{model}: {'free table' if name == 'free' else 'additive'}")
        ax_t.plot(thresholds, [np.mean(rho[:, -1] >= t) for t in thresholds], "o-", color=c, ms=4, label=f"{model} heads")
        own = np.asarray(rec["own"]["rank_corr"]).reshape(-1, sg.size)
        blind = np.asarray(rec["own"]["blind_rank_corr"]).reshape(-1, sg.size)
        keep_own = np.asarray(rec["own"]["sink_share"]).ravel() < sink_threshold
        ax_d.semilogx(sg, ((own >= 0.5) & (own > blind))[keep_own].mean(0), "o-", color=c, label=f"{model}, trained")
        un, ub = (np.asarray(rec["untrained"][m]).reshape(-1, sg.size) for m in ("rank_corr", "blind_rank_corr"))
        ax_d.semilogx(sg, ((un >= 0.5) & (un > ub)).mean(0), "o--", color=c, mfc="white", label=f"{model}, untrained")
        ax_s.hist(np.asarray(rec["key_spread"]).ravel(), bins, color=c, alpha=0.6, label=f"{model}, trained")
        ax_s.hist(np.asarray(rec["key_spread_untrained"]).ravel(), bins, color=c, histtype="step", lw=1.5,
                  label=f"{model}, untrained")
    ax_a.set_xticks(list(dg), [f"{a:g}" for a in dg])
    ax_a.set_xticks([], minor=True)
    ax_a.set(xlabel=r"gauge $a$: $q \to a\,q$, $k \to k/a$ from equal norms ($a$ = 1)", ylim=(0.4, 1.02),
             ylabel=r"rank corr. of weight with $-\|aq - k/a\|$", title="Every dot-product head is local at large $a$")
    ax_a.legend(fontsize=7.5, ncol=2, loc="lower center", bbox_to_anchor=(0.55, 0.0))  # clear of the markers at the right
    ax_t.set(xlabel=r"property threshold on $\rho$ at the largest $a$", ylabel="share with the property", ylim=(-0.02, 1.02),
             title="The decision against its threshold")
    ax_t.legend(fontsize=7.5, ncol=3, loc="center left")
    ax_d.set_xticks(list(sg), [f"{a:g}" for a in sg])
    ax_d.set_xticks([], minor=True)
    ax_d.set(xlabel="gauge $a$", ylabel=r"share local ($\rho \geq 0.5$)", ylim=(-0.02, 1.02), title="Finite gauges")
    ax_d.legend(fontsize=7)
    ax_s.set(xlabel=r"spread of $\|k\|^2$ after the best shift", ylabel="heads", title="Gauge-free: keys off a sphere")
    ax_s.legend(fontsize=7)
    return fig
