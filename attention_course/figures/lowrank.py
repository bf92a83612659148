"""Figures for chapter 3: is attention low-rank, sparse, or neither?

Every helper takes arrays that the chapter has already measured (with
:mod:`attention_course.lenses.lowrank` or :mod:`attention_course.core.efficient`), labels its
axes, adds a colour bar where colour carries a value, returns the
:class:`matplotlib.figure.Figure` and changes no global matplotlib state.
The benchmark figures live in :mod:`attention_course.figures.efficient`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ..core._backend import Array, ShapeError, shape_str, to_numpy
from ..lenses.lowrank import crossover_beta

__all__ = ["plot_temperature_sweep", "plot_exp_rank", "plot_cumulative_spectra", "plot_head_ranks",
           "plot_lowrank_vs_sparse", "plot_method_errors"]


def _grid(name: str, x: Array, ndim: int, what: str) -> np.ndarray:
    a = np.asarray(to_numpy(x), dtype=float)
    if a.ndim != ndim or 0 in a.shape:
        raise ShapeError(f"{name} has shape {shape_str(a)}; expected {what}")
    return a


def plot_temperature_sweep(sweep: Mapping[str, np.ndarray], k: int = 16) -> Figure:
    """Two panels against the inverse temperature: the ranks, and the rank-``k`` vs top-``k`` errors.

    Parameters
    ----------
    sweep : dict
        A :func:`attention_course.lenses.lowrank.temperature_sweep` result: arrays ``beta``,
        ``effective_rank``, ``stable_rank``, ``svd_error``, ``sparse_error`` of one length.
    k : int
        The rank and the entries kept per row that the sweep used (for the labels).

    Examples
    --------
    >>> from attention_course.lenses.lowrank import temperature_sweep
    >>> fig = plot_temperature_sweep(temperature_sweep([0.2, 1.0, 4.0], n=32, d=8, k=4), k=4)
    >>> [ax.get_title() for ax in fig.axes]
    ['How many modes does A need?', 'Low rank or sparse?']
    """
    beta = _grid("sweep['beta']", sweep["beta"], 1, "(n_betas,)")
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(7.0, 3.4), layout="constrained")
    ax1.plot(beta, sweep["effective_rank"], "o-", color="C0", ms=4, label="effective rank")
    ax1.plot(beta, sweep["stable_rank"], "s--", color="C2", ms=3, label="stable rank")
    ax1.set(xlabel=r"inverse temperature $\beta$", ylabel="rank", title="How many modes does A need?")
    ax1.legend(frameon=False, fontsize=9)
    ax2.plot(beta, sweep["svd_error"], "o-", color="C0", ms=4, label=f"best rank-{k} (SVD)")
    ax2.plot(beta, sweep["sparse_error"], "s-", color="C3", ms=4, label=f"top-{k} per row")
    cross = crossover_beta(sweep)
    if np.isfinite(cross):
        ax2.axvline(cross, color="0.5", lw=1, ls=":")
        ax2.annotate(rf"cross at $\beta\approx${cross:.2f}", (cross, 0.5), xytext=(6, 0),
                     textcoords="offset points", color="0.3", fontsize=9)
    ax2.set(xlabel=r"inverse temperature $\beta$", ylabel=r"relative error $\|A-\hat A\|_F/\|A\|_F$",
            title="Low rank or sparse?", ylim=(0, 1.02))
    ax2.legend(frameon=False, fontsize=9)
    return fig


def plot_exp_rank(demo: Mapping) -> Figure:
    r"""Singular values of a rank-1 logit matrix :math:`L`, of :math:`\exp(L)` and of its row softmax.

    Parameters
    ----------
    demo : dict
        The output of :func:`attention_course.lenses.lowrank.exp_rank_demo` (keys ``logits``,
        ``softmax``, ``singular_values`` of ``exp(L)``, ``rank_*``).

    Examples
    --------
    >>> from attention_course.lenses.lowrank import exp_rank_demo
    >>> fig = plot_exp_rank(exp_rank_demo(n=6))
    >>> fig.axes[0].get_yscale()
    'log'
    """
    logits = _grid("demo['logits']", demo["logits"], 2, "(n, n)")
    s_logits = np.linalg.svd(logits, compute_uv=False)  # (n,)
    s_exp = np.asarray(demo["singular_values"], dtype=float)  # (n,)
    s_soft = np.linalg.svd(np.asarray(demo["softmax"], dtype=float), compute_uv=False)  # (n,)
    idx = np.arange(1, logits.shape[0] + 1)
    floor = np.finfo(float).eps * s_logits[0] * logits.shape[0]  # below this: zero in float64
    fig, ax = plt.subplots(figsize=(6.4, 3.8), layout="constrained")
    ax.semilogy(idx, np.maximum(s_logits / s_logits[0], 1e-18), "o-", color="C0",
                label=f"logits $L = s\\,xx^\\top$ (rank {demo['rank_logits']})")
    ax.semilogy(idx, s_exp / s_exp[0], "s-", color="C3", label=f"$\\exp(L)$ (rank {demo['rank_exp']})")
    ax.semilogy(idx, s_soft / s_soft[0], "^--", color="C2", ms=5,
                label=f"row softmax of $L$ (rank {demo['rank_softmax']})")
    ax.axhline(floor / s_logits[0], color="0.5", lw=0.8, ls=":")
    ax.annotate("float64 round-off", (idx[-1], floor / s_logits[0]), xytext=(-4, 4),
                textcoords="offset points", ha="right", fontsize=8, color="0.4")
    ax.set(xlabel="index i", ylabel=r"$\sigma_i / \sigma_1$", xticks=idx,
           title="exp of a rank-1 matrix is full rank")
    ax.legend(frameon=False, fontsize=9, loc="center right")
    return fig


def plot_cumulative_spectra(
    cumulative: Array, k_mark: Optional[int] = None, title: str = ""
) -> Figure:
    r"""Linformer-style cumulative spectra: the share of :math:`\|A\|_F^2` kept by the top :math:`k` modes.

    Left: for each layer, the mean over heads (line) and the range over heads
    (band) of :math:`\sum_{i\le k}\sigma_i^2 / \sum_i \sigma_i^2` against :math:`k`.
    Right: its value at ``k_mark`` for every head (Wang et al. 2020, Fig. 1).

    Parameters
    ----------
    cumulative : array, shape (L, H, K)
        Cumulative energy fractions, rising to 1 along the last axis.
    k_mark : int, optional
        The :math:`k` shown in the heat map (default ``K // 4``, at least 1).

    Examples
    --------
    >>> c = np.cumsum(np.full((2, 3, 4), 0.25), axis=-1)
    >>> [ax.get_xlabel() for ax in plot_cumulative_spectra(c, k_mark=2).axes[:2]]
    ['number of singular values k', 'head']
    """
    c = _grid("cumulative", cumulative, 3, "(layers, heads, K) cumulative energy fractions")
    L, H, K = c.shape
    k_mark = max(1, K // 4) if k_mark is None else int(k_mark)
    if not 1 <= k_mark <= K:
        raise ValueError(f"k_mark={k_mark} for cumulative of shape {shape_str(c)}; expected 1 <= k_mark <= {K}")
    ks = np.arange(1, K + 1)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(7.0, 3.4), layout="constrained",
                                   gridspec_kw={"width_ratios": [1.15, 1.0]})
    colors = plt.get_cmap("viridis")(np.linspace(0.0, 0.9, L))
    for layer in range(L):
        ax1.fill_between(ks, c[layer].min(axis=0), c[layer].max(axis=0), color=colors[layer], alpha=0.15, lw=0)
        ax1.plot(ks, c[layer].mean(axis=0), color=colors[layer], lw=1.8, label=f"layer {layer + 1}")
    ax1.axvline(k_mark, color="0.5", lw=0.8, ls=":")
    ax1.set(xlabel="number of singular values k", ylabel=r"$\sum_{i\leq k}\sigma_i^2 \,/\, \|A\|_F^2$",
            ylim=(min(0.0, float(c.min())), 1.02), xlim=(1, K))
    ax1.set_title("Cumulative spectrum (band: range over heads)", fontsize=10)
    ax1.legend(frameon=False, fontsize=8, loc="lower right")
    im = ax2.imshow(c[:, :, k_mark - 1], cmap="magma", vmin=float(c[:, :, k_mark - 1].min()), vmax=1.0,
                    aspect="auto")
    ax2.set(xlabel="head", ylabel="layer", xticks=range(H), xticklabels=range(1, H + 1),
            yticks=range(L), yticklabels=range(1, L + 1))
    ax2.set_title(f"Share kept by the top {k_mark}", fontsize=10)
    fig.colorbar(im, ax=ax2, label=f"share of $\\|A\\|_F^2$ in top {k_mark}")
    if title:
        fig.suptitle(title, fontsize=11)
    return fig


def plot_head_ranks(erank: Array, n_tokens: Optional[float] = None, title: str = "") -> Figure:
    """Effective rank of every head: by layer (dots per head, line = mean) and as a layer x head map.

    Parameters
    ----------
    erank : array, shape (L, H)
        Effective rank of each head (e.g. averaged over sentences).
    n_tokens : float, optional
        Sequence length, drawn as the full-rank ceiling.

    Examples
    --------
    >>> fig = plot_head_ranks(np.arange(6.0).reshape(2, 3) + 1, n_tokens=10)
    >>> fig.axes[0].get_ylabel()
    'effective rank'
    """
    r = _grid("erank", erank, 2, "(layers, heads)")
    L, H = r.shape
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(7.0, 3.3), layout="constrained",
                                   gridspec_kw={"width_ratios": [0.8, 1.0]})
    jitter = np.linspace(-0.18, 0.18, H)
    for layer in range(L):
        ax1.scatter(layer + 1 + jitter, r[layer], s=14, color="C0", alpha=0.6, lw=0)
    ax1.plot(np.arange(1, L + 1), r.mean(axis=1), "o-", color="C3", label="mean over heads")
    if n_tokens is not None:
        ax1.axhline(n_tokens, color="0.5", lw=0.8, ls="--", label=f"full rank (n = {n_tokens:g})")
        ax1.set_ylim(0, n_tokens * 1.08)
    else:
        ax1.set_ylim(0, None)
    ax1.set(xlabel="layer", ylabel="effective rank", xticks=range(1, L + 1), title="Effective rank by layer")
    ax1.legend(frameon=False, fontsize=8, loc="upper right")
    im = ax2.imshow(r, cmap="viridis", aspect="auto")
    ax2.set(xlabel="head", ylabel="layer", xticks=range(H), xticklabels=range(1, H + 1),
            yticks=range(L), yticklabels=range(1, L + 1), title="Effective rank of each head")
    fig.colorbar(im, ax=ax2, label="effective rank")
    if title:
        fig.suptitle(title)
    return fig


def plot_lowrank_vs_sparse(
    rank_err: Array, topk_err: Array, k: int, reference: Optional[Mapping] = None,
    reference_label: str = "synthetic, varying $\\beta$", title: str = "",
) -> Figure:
    """One dot per head: the best rank-``k`` error against the top-``k`` sparse error.

    Below the diagonal a rank-``k`` approximation is better; above it, keeping the
    ``k`` largest weights of each row is. ``reference`` (a
    :func:`attention_course.lenses.lowrank.temperature_sweep` result with keys ``beta``,
    ``svd_error``, ``sparse_error``) is drawn as a curve through the same plane.

    Parameters
    ----------
    rank_err, topk_err : array, shape (L, H)
        Relative Frobenius errors per layer and head.

    Examples
    --------
    >>> fig = plot_lowrank_vs_sparse(np.full((2, 3), 0.1), np.full((2, 3), 0.3), k=4)
    >>> fig.axes[0].get_xlabel()
    'top-4 sparse error'
    """
    re = _grid("rank_err", rank_err, 2, "(layers, heads)")
    te = _grid("topk_err", topk_err, 2, "(layers, heads)")
    if re.shape != te.shape:
        raise ShapeError(f"rank_err has shape {shape_str(re)} but topk_err has shape {shape_str(te)}; "
                         f"expected the same (layers, heads)")
    L, H = re.shape
    fig, ax = plt.subplots(figsize=(6.8, 5.0), layout="constrained")
    top = 1.05 * max(float(re.max()), float(te.max()))
    if reference is not None:
        sx, sy = np.asarray(reference["sparse_error"]), np.asarray(reference["svd_error"])
        top = max(top, 1.05 * float(max(sx.max(), sy.max())))
        ax.plot(sx, sy, "-", color="0.6", lw=1.2, zorder=1, label=reference_label)
        for i in (0, len(sx) // 2, len(sx) - 1):
            ax.annotate(rf"$\beta$={float(reference['beta'][i]):.2g}", (sx[i], sy[i]), fontsize=8,
                        color="0.4", xytext=(4, -10), textcoords="offset points")
    ax.plot([0, top], [0, top], color="0.3", lw=0.8, ls="--", zorder=1)
    sc = ax.scatter(te.ravel(), re.ravel(), c=np.repeat(np.arange(1, L + 1), H), cmap="viridis",
                    s=28, edgecolors="white", linewidths=0.4, zorder=2)
    ax.text(0.60 * top, 0.66 * top, f"top-{k} better", ha="center", va="center", rotation=45,
            fontsize=9, color="0.3")
    ax.text(0.66 * top, 0.60 * top, f"rank-{k} better", ha="center", va="center", rotation=45,
            fontsize=9, color="0.3")
    ax.set(xlim=(0, top), ylim=(0, top), aspect="equal",
           xlabel=f"top-{k} sparse error", ylabel=f"best rank-{k} error (SVD)",
           title=title or "Low rank or sparse? One dot per head")
    fig.colorbar(sc, ax=ax, label="layer", ticks=range(1, L + 1), shrink=0.85)
    if reference is not None:
        ax.legend(frameon=False, fontsize=8, loc="upper right")
    return fig


def plot_method_errors(
    errors: Mapping[str, Mapping[str, float]], floor: float = 1e-16, title: str = ""
) -> Figure:
    """Grouped horizontal bars (log scale): each method's relative error on each input distribution.

    Parameters
    ----------
    errors : dict
        ``errors[method][distribution]`` = relative error against exact attention.
    floor : float
        Errors below it are drawn at ``floor`` (a log axis cannot show 0).

    Examples
    --------
    >>> fig = plot_method_errors({"a": {"x": 0.1, "y": 0.5}, "b": {"x": 1e-3, "y": 2.0}})
    >>> fig.axes[0].get_xscale(), len(fig.axes[0].patches)
    ('log', 4)
    """
    methods: Sequence[str] = list(errors)
    if not methods:
        raise ValueError("errors is empty; expected {method: {distribution: error}}")
    dists = list(dict.fromkeys(d for m in methods for d in errors[m]))
    y = np.arange(len(methods))
    height = 0.8 / len(dists)
    fig, ax = plt.subplots(figsize=(7.0, 0.45 * len(methods) + 1.4), layout="constrained")
    for j, dist in enumerate(dists):
        vals = np.array([max(float(errors[m].get(dist, np.nan)), floor) for m in methods])
        ax.barh(y + (j - (len(dists) - 1) / 2) * height, vals, height=height, color=f"C{j}", label=dist)
    ax.axvline(0.1, color="0.3", lw=0.8, ls=":")
    ax.axvline(1.0, color="0.3", lw=0.8, ls="--")
    ax.set_xscale("log")
    ax.set(yticks=y, yticklabels=methods, xlabel=r"relative error $\|O - O_{\mathrm{exact}}\|_F / \|O_{\mathrm{exact}}\|_F$",
           title=title or "Error of each approximation against exact attention")
    ax.invert_yaxis()
    ax.legend(frameon=False, fontsize=8, title="inputs", title_fontsize=8, loc="lower right")
    return fig
