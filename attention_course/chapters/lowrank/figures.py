"""Figures for chapter 3: is attention low-rank, sparse, or neither? Each returns its figure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ...core._backend import Array, ShapeError, shape_str, to_numpy
from ...figures.style import METHOD_COLORS, book_figure, method_color, new_axes
from .spectra import best_rank_k, topk_sparsify

__all__ = ["plot_attention_matrices",
           "plot_method_errors", "plot_recall", "METHOD_COLORS", "method_color",
           "plot_scaling", "plot_memory", "plot_rank_grid", "plot_real_methods"]


def _grid(name: str, x: Array, ndim: int, what: str) -> np.ndarray:
    a = np.asarray(to_numpy(x), dtype=float)
    if a.ndim != ndim or 0 in a.shape:
        raise ShapeError(f"{name} has shape {shape_str(a)}; expected {what}")
    return a


@book_figure
def plot_attention_matrices(matrices: Mapping[str, Array], k: int = 16, crop: Optional[int] = 64,
                            approximations: bool = True) -> Figure:
    r"""Attention matrices (rows) beside their best rank-``k`` and top-``k`` approximations (columns).

    One log colour scale spans four decades below the largest weight; zeros and negative entries
    take the bottom colour. ``matrices``: row label -> (n, n); ``crop`` shows only the first ``crop``
    queries and keys (the approximations and errors use the whole matrix). ``approximations=False``
    draws the matrices alone, side by side, each titled by its label.

    Examples
    --------
    >>> from attention_course.chapters.lowrank.spectra import synthetic_attention
    >>> fig = plot_attention_matrices({"soft": synthetic_attention(16, 4, 0.2), "sharp": synthetic_attention(16, 4, 4.0)},
    ...                               k=2, crop=None)
    >>> [ax.get_title() for ax in fig.axes[:3]]
    ['A', 'best rank 2', 'top 2 per row']
    >>> fig = plot_attention_matrices({"soft": synthetic_attention(16, 4, 0.2), "sharp": synthetic_attention(16, 4, 4.0)},
    ...                               crop=None, approximations=False)
    >>> [ax.get_title() for ax in fig.axes[:2]]
    ['soft', 'sharp']
    """
    mats = {name: _grid(f"matrices[{name!r}]", a, 2, "(n, n)") for name, a in matrices.items()}
    if not mats:
        raise ValueError("matrices is empty; expected {label: (n, n) attention matrix}")
    if not approximations:
        shown = {name: a[:crop, :crop] for name, a in mats.items()}  # crop=None keeps all
        vmax = max(float(a.max()) for a in shown.values())
        norm = LogNorm(vmin=vmax * 1e-4, vmax=vmax)
        fig, axes = plt.subplots(1, len(mats), figsize=(2.6 * len(mats) + 1.2, 2.9), squeeze=False,
                                 layout="constrained")
        for ax, (name, a) in zip(axes[0], shown.items()):
            im = ax.imshow(np.clip(a, norm.vmin, None), norm=norm, interpolation="nearest")
            ax.set(xticks=[], yticks=[], title=name, xlabel=f"key j (first {a.shape[1]})" if crop else "key j")
        axes[0][0].set_ylabel("query i")
        fig.colorbar(im, ax=axes, extend="min", shrink=0.9, label="attention weight (log scale)")
        return fig
    panels = {name: (a, best_rank_k(a, k), topk_sparsify(a, k)) for name, a in mats.items()}
    errors = {name: [float(np.linalg.norm(a - p) / np.linalg.norm(a)) for p in ps]  # rank k, top k
              for name, (a, *ps) in panels.items()}
    shown = {name: [p[:crop, :crop] for p in ps] for name, ps in panels.items()}  # crop=None keeps all
    vmax = max(float(p.max()) for ps in shown.values() for p in ps)
    norm = LogNorm(vmin=vmax * 1e-4, vmax=vmax)
    fig, axes = plt.subplots(len(mats), 3, figsize=(7.0, 2.0 * len(mats) + 0.3), squeeze=False,
                             layout="constrained")
    for row, (name, ps) in zip(axes, shown.items()):
        for j, (ax, p) in enumerate(zip(row, ps)):
            im = ax.imshow(np.clip(p, norm.vmin, None), norm=norm, interpolation="nearest")
            ax.set(xticks=[], yticks=[])
            if j:
                ax.text(0.03, 0.04, f"error {errors[name][j - 1]:.2f}", transform=ax.transAxes, va="bottom",
                        bbox={"facecolor": "white", "alpha": 0.85, "lw": 0})
        row[0].set_ylabel(f"{name}\nquery i")
    for ax, title in zip(axes[0], ("A", f"best rank {k}", f"top {k} per row")):
        ax.set_title(title)
    size = next(iter(shown.values()))[0].shape[1]
    for ax in axes[-1]:
        ax.set_xlabel(f"key j (first {size})" if crop else "key j")
    fig.colorbar(im, ax=axes, extend="min", shrink=0.9,
                 label="attention weight (log scale)")
    return fig


#: Label prefixes of :func:`attention_course.chapters.lowrank.approximation_error.approximation_errors`
#: -> the method family of :data:`attention_course.figures.style.METHOD_COLORS` (first match wins).
_FAMILY_PREFIXES = (("linformer, mean-pool", "linformer-pool"), ("linformer", "linformer"),
                    ("linear", "linear"), ("performer", "performer"), ("nystr", "nystrom"),
                    ("local", "local"), ("top-", "top-k"), ("uniform", "uniform"))


def method_family(label: str) -> str:
    """The method family (a key of ``METHOD_COLORS``) of an accuracy-table label.

    Examples
    --------
    >>> method_family("Linformer, mean-pool, k=32"), method_family("Nystrom, 32 landmarks")
    ('linformer-pool', 'nystrom')
    >>> method_family("zeros")
    Traceback (most recent call last):
    ...
    ValueError: no method family for 'zeros'; expected a label starting with one of [...]
    """
    low = label.lower()
    for prefix, family in _FAMILY_PREFIXES:
        if low.startswith(prefix):
            return family
    raise ValueError(f"no method family for {label!r}; expected a label starting with one of "
                     f"{[p for p, _ in _FAMILY_PREFIXES]}")


@book_figure
def plot_method_errors(
    errors: Mapping[str, Mapping[str, float]],
    baselines: Sequence[str] = ("uniform (mean of values)", "zeros"),
    target: float = 0.1, title: str = "",
) -> Figure:
    """One panel per input distribution: each method's relative error (log scale), in its colour.

    ``errors[method][distribution]``; the ``baselines`` keys are drawn as dashed lines, not bars;
    the dotted line is ``target``; errors of exactly 0 sit at the left edge.

    Examples
    --------
    >>> fig = plot_method_errors({"top-4 per query": {"iid": 0.1, "smooth": 0.5},
    ...                           "Nystrom, 4 landmarks": {"iid": 1e-3, "smooth": 2.0}, "zeros": {"iid": 1.0, "smooth": 1.0}})
    >>> fig.axes[0].get_xscale(), [ax.get_title() for ax in fig.axes], len(fig.axes[0].patches)
    ('log', ['iid inputs', 'smooth inputs'], 2)
    """
    lines = [b for b in baselines if b in errors]
    methods = [m for m in errors if m not in lines]
    if not methods:
        raise ValueError(f"errors has no method besides the baselines {lines}; expected {{method: {{distribution: error}}}}")
    colors = [method_color(method_family(m)) for m in methods]
    dists = list(dict.fromkeys(d for m in methods for d in errors[m]))
    vals = np.array([[float(errors[m].get(d, np.nan)) for d in dists] for m in methods])  # (methods, dists)
    positive = vals[vals > 0]
    left = 10 ** np.floor(np.log10(positive.min() if positive.size else 1e-3) - 0.3)
    ncols = min(2, len(dists))
    nrows = -(-len(dists) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(7.0, (0.26 * len(methods) + 0.9) * nrows + 0.6),
                             sharex=True, sharey=True, squeeze=False, layout="constrained")
    y = np.arange(len(methods))
    for j, (ax, dist) in enumerate(zip(axes.flat, dists)):
        ax.barh(y, np.where(vals[:, j] > 0, vals[:, j], left), color=colors, edgecolor="0.3", lw=0.4)
        ax.axvline(target, color="0.3", lw=0.8, ls=":", label=f"error {target:g}")
        for b, ls in zip(lines, ("--", "-.", (0, (5, 2, 1, 2)))):
            ax.axvline(max(errors[b].get(dist, np.nan), left), color="0.35", lw=1.3, ls=ls, label=_baseline_label(b))
        ax.set_title(f"{dist} inputs")
    for ax in axes.flat[len(dists):]:
        ax.set_visible(False)
    axes[0, 0].set(xscale="log", xlim=(left, None), yticks=y, yticklabels=methods)
    axes[0, 0].invert_yaxis()
    for ax in axes[-1]:
        ax.set_xlabel(r"relative error vs exact")
    fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="outside lower center", ncols=3)
    if title:
        fig.suptitle(title)
    return fig


@book_figure
def plot_recall(recall: Mapping) -> Figure:
    """Recall accuracy against the number of stored pairs, softmax vs linear memories, per key dimension.

    ``recall``: a :func:`~attention_course.chapters.lowrank.recall.recall_sweep` result.

    Examples
    --------
    >>> out = {"ns": [4, 8], "ds": [16], "seeds": [0], "softmax": [[[1.0], [1.0]]],
    ...        "linear": [[[0.5], [0.2]]], "linear_identity": [[[1.0], [0.9]]]}
    >>> len(plot_recall(out).axes[0].get_lines())
    3
    """
    ns = np.array(recall["ns"], dtype=float)
    fig, ax = plt.subplots(figsize=(6.5, 4.6), layout="constrained")
    styles = {"softmax": ("-", "softmax attention"), "linear_identity": ("--", "linear memory, identity features"),
              "linear": (":", "linear attention, elu+1")}
    for i, d in enumerate(recall["ds"]):
        for name, (ls, label) in styles.items():
            acc = np.asarray(recall[name][i]).mean(axis=-1)  # (len(ns),), mean over seeds
            ax.plot(ns, acc, ls, marker="o", ms=3, color=f"C{i}", label=f"{label}, d = {d}")
    ax.set(xscale="log", xlabel="stored key-value pairs n", ylabel="recall accuracy",
           title="Query with a stored key: is its own value\nthe nearest output?", ylim=(-0.02, 1.02))
    # two short legends (line style = memory, colour = key dimension) instead of one per line
    kinds = [Line2D([], [], color="0.3", ls=ls, label=label) for ls, label in styles.values()]
    dims = [Line2D([], [], color=f"C{i}", marker="o", ms=3, label=f"d = {d}") for i, d in enumerate(recall["ds"])]
    fig.legend(handles=kinds + dims, loc="outside lower center", ncols=2)
    return fig


def _baseline_label(name: str) -> str:
    """A baseline's legend label: "uniform (mean of values)" -> "baseline: uniform, mean of values"."""
    head, _, rest = name.partition(" (")
    return f"baseline: {head}, {rest.rstrip(')')}" if rest else f"baseline: {name}"


def _series(result: Mapping, name: str, key: str) -> list[tuple[int, float]]:
    """(n, value) pairs of one method, sorted by n, where the value is measured (not None, not 0)."""
    return sorted((r["n"], r[key]) for r in result["results"] if r["method"] == name and r[key])


@book_figure
def plot_scaling(result: Mapping, methods: Optional[Sequence[str]] = None, ax: Optional[Axes] = None) -> Figure:
    """Time against n on log-log axes, one line per method, with its fitted slopes in the legend.

    Exact methods solid, approximations dashed; slopes from the summary (raw and load-normalised).

    Examples
    --------
    >>> res = {"results": [{"method": "naive", "n": n, "time_s": n**2 * 1e-9, "exact": True} for n in (256, 512)],
    ...        "summary": {"slopes": {"naive": 2.0}, "slopes_load_normalised": {"naive": 2.0}},
    ...        "config": {"d": 64}, "machine": {"torch_threads": 1}}
    >>> plot_scaling(res).axes[0].get_xscale()
    'log'
    """
    names = methods or ["naive", "sdpa", "chunked", "linear", "performer-256", "nystrom-128", "linformer-pool-256"]
    s = result["summary"]
    fig, ax = new_axes(ax, (7.0, 4.6))
    for name in names:
        pts = _series(result, name, "time_s")
        if not pts:
            continue
        exact = next(r["exact"] for r in result["results"] if r["method"] == name)
        ax.loglog(*zip(*pts), "-" if exact else "--", marker="o", ms=3, color=method_color(name),
                  label=f"{name}: slope {s['slopes'].get(name, float('nan')):.2f} "
                        f"({s['slopes_load_normalised'].get(name, float('nan')):.2f})")
    ax.set(xlabel="sequence length n", ylabel="time per call (s)",
           title=f"Time vs n (d={result['config']['d']}, {result['machine']['torch_threads']} thread(s))")
    ax.legend(loc="upper left", title="slope (load-normalised)")
    return fig


@book_figure
def plot_memory(result: Mapping, methods: Sequence[str] = ("naive", "sdpa", "chunked", "linear", "nystrom-128"),
                ax: Optional[Axes] = None) -> Figure:
    """Peak memory (MiB) against n on log-log axes, one line per method.

    Examples
    --------
    >>> res = {"results": [{"method": "chunked", "n": n, "peak_bytes": 2**20 * n} for n in (256, 512)],
    ...        "config": {"memory_method": "rss"}}
    >>> plot_memory(res).axes[0].get_ylabel()
    'peak memory (MiB)'
    """
    fig, ax = new_axes(ax, (6.4, 4.2))
    for name in methods:
        pts = _series(result, name, "peak_bytes")
        if pts:
            ns, peaks = zip(*pts)
            ax.loglog(ns, [p / 2**20 for p in peaks], marker="o", ms=3, color=method_color(name), label=name)
    how = {"rss": "measured peak RSS rise", "analytic": "largest intermediate (analytic)"}
    ax.set(xlabel="sequence length n", ylabel="peak memory (MiB)",
           title=f"Memory vs n: {how.get(result['config']['memory_method'], '')}")
    ax.legend()
    return fig


@book_figure
def plot_rank_grid(error: Array, d_ks: Sequence[int], betas: Sequence[float], k: int,
                   beta_mark: Optional[float] = None, level: float = 0.1) -> Figure:
    """Heat map of the centred rank-``k`` error of Gaussian attention on a ``(d_k, beta)`` grid.

    Parameters
    ----------
    error : array, shape (len(d_ks), len(betas)), the error (e.g. a mean over seeds)
    d_ks, betas : the grid's head widths (rows) and logit standard deviations (columns)
    k : int, the rank kept (for the labels)
    beta_mark : float, optional, a column to outline (the sharpness of trained heads)
    level : float, cells below it are marked as low-rank

    Examples
    --------
    >>> fig = plot_rank_grid(np.array([[0.01, 0.2], [0.05, 0.6]]), [1, 32], [0.1, 1.0], k=32, beta_mark=1.0)
    >>> fig.axes[0].get_xlabel(), fig.axes[0].get_ylabel()
    ('logit standard deviation β (sharpness)', 'head width d_k')
    """
    e = _grid("error", error, 2, "(d_ks, betas)")
    if e.shape != (len(d_ks), len(betas)):
        raise ShapeError(f"error has shape {shape_str(e)}; expected ({len(d_ks)}, {len(betas)}) for d_ks x betas")
    order = np.argsort(betas)
    b, e = np.asarray(betas, dtype=float)[order], e[:, order]
    fig, ax = plt.subplots(figsize=(6.8, 4.2), layout="constrained")
    im = ax.imshow(e, cmap="magma_r", vmin=0, vmax=1, aspect="auto", origin="lower")
    for (i, j), val in np.ndenumerate(e):
        ax.text(j, i, f"{val:.2f}", ha="center", va="center", fontsize=8,
                color="white" if val > 0.55 else "black", fontweight="bold" if val < level else "normal")
    ax.set_xticks(range(len(b)), [f"{x:.2g}" for x in b], rotation=45)
    ax.set_yticks(range(len(d_ks)), [str(d) for d in d_ks])
    if beta_mark is not None:
        j = int(np.argmin(np.abs(b - beta_mark)))
        ax.add_patch(plt.Rectangle((j - 0.5, -0.5), 1, len(d_ks), fill=False, lw=2, ec=method_color("nystrom")))
    ax.set(xlabel="logit standard deviation β (sharpness)", ylabel="head width d_k",
           title=f"Gaussian attention: centred rank-{k} error (bold: below {level:g})")
    fig.colorbar(im, ax=ax, label=f"centred rank-{k} error")
    return fig


@book_figure
def plot_real_methods(rows: Sequence[Mapping], methods: Sequence[str], layer_sets: Sequence[str],
                      level: float = 0.95) -> Figure:
    """Pooled cosine of MiniLM's output with each method in place of attention, one panel per layer set.

    Parameters
    ----------
    rows : list of dict with ``layers``, ``method``, ``cosine`` (one per sentence order)
    methods : names to draw, top to bottom
    layer_sets : the ``layers`` values, one panel each
    level : float, the dotted line (the cosine that counts as keeping the output)

    Examples
    --------
    >>> rows = [{"layers": "all", "method": m, "cosine": c} for m, c in (("Nystrom", 0.1), ("zeros", 0.4))]
    >>> plot_real_methods(rows, ["Nystrom", "zeros"], ["all"]).axes[0].get_xlabel()
    'pooled-output cosine'
    """
    colors = {"Nystrom": "nystrom", "Linformer pool": "linformer-pool", "Performer": "performer", "top-k": "top-k",
              "rank-k of A": "svd", "uniform": "uniform", "zeros": "uniform"}
    fig, axes = plt.subplots(1, len(layer_sets), figsize=(6.8, 3.6), layout="constrained", sharey=True, squeeze=False)
    for ax, ls in zip(axes[0], layer_sets):
        for i, m in enumerate(methods):
            vals = [r["cosine"] for r in rows if r["layers"] == ls and r["method"] == m]
            ax.plot(vals, [i] * len(vals), "o", ms=5, alpha=0.6, color=method_color(colors.get(m, "uniform")))
            ax.plot([np.mean(vals)], [i], "|", ms=14, mew=2, color="black")
        ax.axvline(level, color="0.3", ls=":")
        ax.set(title=f"{ls} replaced", xlim=(min(0.0, ax.get_xlim()[0]), 1.02), xlabel="pooled-output cosine")
        ax.set_yticks(range(len(methods)), list(methods))
    axes[0, 0].invert_yaxis()
    return fig


