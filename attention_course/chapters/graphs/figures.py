"""Figures for chapter 5: attention drawn as a graph, receptive fields, rank collapse, probes, two-hop runs.

Every helper labels its axes, returns the :class:`matplotlib.figure.Figure` and changes no global
matplotlib state; nodes sit on a line (arcs) or on a circle, without networkx.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import LogNorm, Normalize
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, Patch

from ...core._backend import Array, ShapeError, to_numpy
from ...figures.style import book_figure, new_axes

PAGE_WIDTH = 7.0  # inches: the book's column (about 688 px)
_NODE_COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7")  # one colour per number of nodes

__all__ = ["plot_attention_graph", "plot_maps_log", "plot_rank_collapse", "plot_rank_one_parts", "plot_head_grid", "plot_probe_curves", "plot_relative_depth_probe", "plot_depth_fades", "plot_margin_sweep", "plot_composition", "plot_head_budget", "plot_training_curves", "plot_hop_sweep", "plot_hop_threshold", "plot_head_bins"]


def _kept_edges(W: np.ndarray, threshold: float, top_k: Optional[int]) -> np.ndarray:
    """Boolean (T, T): weights above ``threshold``, among each row's ``top_k`` (diagonal included)."""
    keep = W > threshold
    if top_k is not None:
        rank = np.argsort(np.argsort(-W, axis=1, kind="stable"), axis=1)  # 0 = largest
        keep &= rank < top_k
    return keep


@book_figure
def plot_attention_graph(weights: Array, labels: Optional[Sequence[str]] = None, *, threshold: float = 0.1,
                         top_k: Optional[int] = None, layout: str = "arc", ax: Optional[Axes] = None, title: str = "",
                         cmap: str = "viridis", max_width: float = 6.0, colorbar: bool = True) -> Figure:
    """Draw one attention map (T, T) as a directed graph: an arrow j -> i carries ``weights[i, j]``.

    Width and colour follow the weight; a node's fill is its self weight ``weights[i, i]``. Only
    edges above ``threshold`` (and, with ``top_k``, among each row's ``top_k`` strongest, the self
    loop included: a kept one is a red outline) are drawn. ``layout="arc"`` puts nodes on a line,
    messages from earlier tokens above it; ``"circle"`` on a circle.

    Examples
    --------
    >>> fig = plot_attention_graph(np.array([[0.2, 0.8], [0.6, 0.4]]), ["a", "b"])
    >>> len(fig.axes[0].patches)  # two arrows
    2
    """
    W = to_numpy(weights).astype(float)
    if W.ndim != 2 or W.shape[0] != W.shape[1]:
        raise ShapeError(f"weights has shape {W.shape}; expected a square attention map (T, T)")
    if layout not in ("arc", "circle"):
        raise ValueError(f"layout={layout!r}; expected 'arc' or 'circle'")
    T = len(W)
    labels = [str(t) for t in range(T)] if labels is None else list(labels)
    if len(labels) != T:
        raise ShapeError(f"{len(labels)} labels for weights of shape {W.shape}; expected {T}")
    if layout == "arc":
        fig, ax = new_axes(ax, (min(PAGE_WIDTH, max(6.0, 0.75 * T)), 0.26 * T + 2.8))
        xy = np.stack([np.arange(T, dtype=float), np.zeros(T)], axis=1)  # (T, 2)
        rad = -0.5  # with arc3 this bends left-to-right arrows up, right-to-left down
    else:
        fig, ax = new_axes(ax, (5.4, 4.8))
        angle = np.pi / 2 - 2 * np.pi * np.arange(T) / T  # clockwise from the top
        xy = np.stack([np.cos(angle), np.sin(angle)], axis=1)  # (T, 2)
        rad = 0.12  # a slight bend separates i -> j from j -> i
    norm, colours = Normalize(0.0, 1.0), plt.get_cmap(cmap)
    kept = _kept_edges(W, threshold, top_k)
    self_kept = np.diag(kept) if top_k is not None else np.zeros(T, dtype=bool)
    keep = kept & ~np.eye(T, dtype=bool)  # self loops are shown by the node's fill colour
    order = np.argsort(W[keep])  # draw strong edges last, on top
    dst, src = np.nonzero(keep)  # edge src=j -> dst=i
    for i, j in zip(dst[order], src[order]):
        ax.add_patch(FancyArrowPatch(
            xy[j], xy[i], connectionstyle=f"arc3,rad={rad}", arrowstyle="-|>",
            mutation_scale=8 + 10 * W[i, j], lw=0.4 + max_width * W[i, j],
            color=colours(norm(W[i, j])), alpha=0.9, shrinkA=11, shrinkB=11, zorder=2,
        ))
    for (x, y), lab, w_self, own in zip(xy, labels, np.diag(W), self_kept):
        r, g, b, _ = colours(norm(w_self))
        dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.5  # perceived luminance
        ax.text(x, y, lab, ha="center", va="center", fontsize=10, zorder=3,  # 10 pt: legible on a phone
                color="white" if dark else "black",
                bbox=dict(boxstyle="round,pad=0.25", fc=(r, g, b),
                          ec="tab:red" if own else "0.3", lw=2.2 if own else 0.8))
    if layout == "arc":
        reach = 0.25 * (T - 1)  # height of the longest arc (a quarter of its span)
        ax.set(xlim=(-0.7, T - 0.3), ylim=(-reach - 0.5, reach + 0.5))
        ax.text(-0.6, reach, "from earlier tokens", color="0.35", va="top")
        ax.text(-0.6, -reach, "from later tokens", color="0.35", va="bottom")
    else:
        ax.set(xlim=(-1.25, 1.25), ylim=(-1.25, 1.25))
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(title)
    if colorbar:
        _weight_colorbar(fig, ax, cmap, horizontal=layout == "arc")
    return fig


def _weight_colorbar(fig: Figure, ax: object, cmap: str, horizontal: bool = False) -> None:
    """One colour bar for the weights; below the axes when ``horizontal`` (a line of tokens needs the width)."""
    sm = plt.cm.ScalarMappable(norm=Normalize(0.0, 1.0), cmap=plt.get_cmap(cmap))
    label = r"weight $\alpha_{ij}$ (arrows; node fill = self weight)"
    if horizontal:
        fig.colorbar(sm, ax=ax, orientation="horizontal", location="bottom", shrink=0.6, aspect=35, pad=0.02,
                     label=label)
    else:
        fig.colorbar(sm, ax=ax, shrink=0.7, pad=0.01, label=label)



@book_figure
def plot_maps_log(maps: Mapping[str, Array], labels: Optional[Sequence[str]] = None, *, vmin: float = 1e-3,
                  title: str = "") -> Figure:
    """(T, T) attention-like maps side by side on one logarithmic colour scale (values below ``vmin`` clipped).

    Examples
    --------
    >>> fig = plot_maps_log({"a": np.full((3, 3), 1 / 3), "b": np.eye(3) * 0.9 + 0.05})
    >>> [ax.get_title() for ax in fig.axes[:2]], fig.axes[2].get_yscale()
    (['a', 'b'], 'log')
    """
    if not maps:
        raise ValueError("maps is empty; expected at least one (T, T) matrix")
    arrays = {name: to_numpy(m).astype(float) for name, m in maps.items()}
    for name, m in arrays.items():
        if m.ndim != 2:
            raise ShapeError(f"map {name!r} has shape {m.shape}; expected (T, S)")
    T = max(m.shape[0] for m in arrays.values())
    cell = min(0.36, (PAGE_WIDTH - 2.4) / (T * len(arrays)))  # inches per matrix entry
    fig, axes = plt.subplots(1, len(arrays), figsize=(cell * T * len(arrays) + 2.4, cell * T + 1.9),
                             layout="constrained", squeeze=False)
    norm = LogNorm(vmin=vmin, vmax=1.0)
    for ax, (name, m) in zip(axes[0], arrays.items()):
        im = ax.imshow(np.clip(m, vmin, 1.0), cmap="viridis", norm=norm)
        if labels is not None and len(labels) == m.shape[1]:
            ax.set_xticks(range(m.shape[1]), labels=list(labels), rotation=60, ha="right")
        if labels is not None and len(labels) == m.shape[0]:
            ax.set_yticks(range(m.shape[0]), labels=list(labels))
        ax.set_title(name)
        ax.set_xlabel("key j (sender)")
        ax.set_ylabel("query i (receiver)")
    fig.colorbar(im, ax=list(axes[0]), shrink=0.8, label="weight (log scale)")
    if title:
        fig.suptitle(title)
    return fig


@book_figure
def plot_rank_collapse(curves: Mapping[str, Array], ax: Optional[Axes] = None,
                       title: str = "Rank collapse in deep attention stacks",
                       floor: Optional[float] = float(np.finfo(float).eps)) -> Figure:
    """Distance to rank 1 against depth on a log scale, one line per stack.

    ``curves`` maps a label to an (L + 1,) array from
    :func:`attention_course.chapters.graphs.collapse.rank_collapse`; ``floor`` draws float64's resolution.

    Examples
    --------
    >>> fig = plot_rank_collapse({"pure": np.array([1.0, 0.5, 1e-3])})
    >>> fig.axes[0].get_yscale()
    'log'
    """
    fig, ax = new_axes(ax, (6.4, 4.2))
    markers = "osD^v<>"
    for (name, curve), marker in zip(curves.items(), markers * len(curves)):
        r = to_numpy(curve).astype(float)
        ax.semilogy(np.arange(len(r)), np.maximum(r, 1e-300), marker=marker, ms=4, lw=1.6,
                    label=name)
    if floor is not None:
        ax.axhline(floor, color="0.5", ls=":", lw=1)
        ax.text(ax.get_xlim()[1], floor, "float64 resolution ", ha="right", va="bottom", color="0.4")
    ax.set_xlabel("layer")
    ax.set_ylabel("distance to rank 1\n" r"$\|X - \mathbf{1}\bar{x}^\top\|_F\, /\, \|X\|_F$")  # x̄: the mean token
    ax.set_title(title)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend()
    return fig


@book_figure
def plot_rank_one_parts(parts: Mapping[str, Array],
                        title: str = "Spread between tokens and shared part, absolute sizes") -> Figure:
    r"""The spread :math:`D = \|X - \mathbf 1 \bar x^\top\|_F` (left) and shared part :math:`S = \sqrt{T}\,\|\bar x\|`.

    ``parts`` maps a label to (seeds, L + 1, 2) from
    :func:`attention_course.chapters.graphs.collapse.rank_one_part_curves`: median line, seed range band.

    Examples
    --------
    >>> fig = plot_rank_one_parts({"a": np.ones((2, 3, 2))})
    >>> [a.get_yscale() for a in fig.axes]
    ['log', 'log']
    """
    fig, axes = plt.subplots(1, 2, figsize=(7.0, 3.4), sharex=True)
    for name, p in parts.items():
        p = to_numpy(p).astype(float)  # (seeds, L + 1, 2)
        layers = np.arange(p.shape[1])
        for k, ax in enumerate(axes):
            v = np.maximum(p[..., k], 1e-300)  # (seeds, L + 1)
            line, = ax.semilogy(layers, np.median(v, axis=0), lw=1.6, label=name)
            ax.fill_between(layers, v.min(axis=0), v.max(axis=0), color=line.get_color(), alpha=0.2, lw=0)
    for ax, label in zip(axes, (r"spread $D = \|X - 1\bar x^\top\|_F$", r"shared part $S = \sqrt{T}\,\|\bar x\|$")):
        ax.set_xlabel("layer")
        ax.set_ylabel(label)
        ax.grid(True, which="major", alpha=0.3)
    axes[0].legend()
    fig.suptitle(title)
    fig.tight_layout()
    return fig


@book_figure
def plot_head_grid(values: Array, *, label: str, title: str = "", vmax: Optional[float] = None) -> Figure:
    """One number per head as a (layers, heads) grid of coloured cells, each cell annotated.

    ``vmax`` (default: the largest value) tops the colour scale; name it in ``label``.

    Examples
    --------
    >>> fig = plot_head_grid(np.array([[0.1, 0.4], [0.2, 0.3]]), label="miss")
    >>> fig.axes[0].get_xlabel(), len(fig.axes[0].texts)
    ('head', 4)
    """
    V = to_numpy(values).astype(float)
    if V.ndim != 2:
        raise ShapeError(f"values has shape {V.shape}; expected (layers, heads)")
    n_layers, n_heads = V.shape
    top = float(V.max()) if vmax is None else vmax
    fig, ax = plt.subplots(figsize=(min(PAGE_WIDTH, 0.5 * n_heads + 1.6), 0.45 * n_layers + 1.3),
                           layout="constrained")
    im = ax.imshow(V, cmap="viridis", vmin=0.0, vmax=top, aspect="auto")
    for (l, h), v in np.ndenumerate(V):
        ax.text(h, l, f"{v:.2f}".lstrip("0"), ha="center", va="center", fontsize=10,  # 10 pt: legible on a phone
                color="white" if v < 0.55 * top else "black")
    ax.set_xticks(range(n_heads), labels=[str(h + 1) for h in range(n_heads)])
    ax.set_yticks(range(n_layers), labels=[str(l + 1) for l in range(n_layers)])
    ax.set(xlabel="head", ylabel="layer", title=title)
    fig.colorbar(im, ax=ax, label=label, shrink=0.9)
    return fig


@book_figure
def plot_probe_curves(stacks: Mapping[str, Array], layers: Sequence[int], encoder: Optional[Mapping[str, Array]] = None,
                      *, chance: float, title: str = "") -> Figure:
    """Linear-probe accuracy against depth: random stacks (left) and a trained encoder (right; none: one panel).

    ``stacks``: label -> (seeds, len(layers)) from
    :func:`~attention_course.chapters.graphs.depth_probe.stack_probe_curves` (median, range band);
    ``encoder``: label -> (n_layers + 1,) rows of
    :func:`~attention_course.chapters.graphs.depth_probe.encoder_probe`, dashed if "scrambled";
    ``chance``: a dotted line on the left.

    Examples
    --------
    >>> fig = plot_probe_curves({"a": np.ones((2, 3))}, [0, 1, 2], {"own": np.ones(4)}, chance=0.1)
    >>> [ax.get_xlabel() for ax in fig.axes]
    ['layer', 'layer']
    >>> len(plot_probe_curves({"a": np.ones((2, 3))}, [0, 1, 2], chance=0.1).axes)
    1
    """
    fig, axes = plt.subplots(1, 2 if encoder else 1, figsize=(PAGE_WIDTH if encoder else PAGE_WIDTH * 0.6, 4.9),
                             layout="constrained", squeeze=False)
    axes = axes[0]
    x = np.asarray(layers)
    for name, acc in stacks.items():
        a = to_numpy(acc).astype(float)  # (seeds, len(layers))
        line, = axes[0].plot(x, np.median(a, axis=0), marker="o", ms=3, lw=1.6, label=name)
        axes[0].fill_between(x, a.min(axis=0), a.max(axis=0), color=line.get_color(), alpha=0.2, lw=0)
    axes[0].axhline(chance, color="0.5", ls=":", lw=1)
    axes[0].set(xlabel="layer", ylabel="own label read back (held out)", ylim=(0, 1.05),
                title="Random stacks")
    colours: dict = {}  # one colour per read-out ("own", "previous", ...): the text after the last comma
    for name, acc in (encoder or {}).items():
        a = to_numpy(acc).astype(float)
        what = name.rpartition(", ")[2]
        colour = colours.setdefault(what, f"C{len(colours)}")
        axes[1].plot(np.arange(len(a)), a, marker="o", ms=3, lw=1.6, label=name, color=colour,
                     ls="--" if "scrambled" in name else "-")
    if encoder:
        axes[1].set(xlabel="layer", ylabel="token read back (held out)", ylim=(0, 1.05), title="MiniLM")
    for ax in axes:
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2))  # below the axes: no line is hidden
    if title:
        fig.suptitle(title)
    return fig


@book_figure
def plot_relative_depth_probe(curves: Mapping[str, Array], offsets: Sequence[int], *, title: str = "") -> Figure:
    """Probe accuracy against relative depth (0 the embeddings, 1 the last layer), one panel per offset.

    ``curves`` maps a label to (len(offsets), L + 1) accuracies; a label containing "scrambled" is
    dashed in its model's colour (the text before its first space).

    Examples
    --------
    >>> fig = plot_relative_depth_probe({"A": np.ones((2, 7)), "B scrambled": np.zeros((2, 31))}, [-2, -1])
    >>> [ax.get_title() for ax in fig.axes], fig.axes[0].get_xlabel()
    (['2 words before', '1 word before'], 'relative depth (layer / layers)')
    """
    fig, axes = plt.subplots(1, len(offsets), figsize=(PAGE_WIDTH, 3.4), layout="constrained", sharey=True,
                             squeeze=False)
    colours: dict = {}
    for name, acc in curves.items():
        a = to_numpy(acc).astype(float)  # (offsets, L + 1)
        if a.ndim != 2 or len(a) != len(offsets):
            raise ShapeError(f"curve {name!r} has shape {a.shape}; expected ({len(offsets)}, L + 1)")
        colour = colours.setdefault(name.split(" ")[0], f"C{len(colours)}")
        x = np.arange(a.shape[1]) / (a.shape[1] - 1)  # (L + 1,): 0 the embeddings, 1 the last layer
        for ax, row in zip(axes[0], a):
            ax.plot(x, row, marker="o", ms=2.5, lw=1.5, color=colour, label=name,
                    ls="--" if "scrambled" in name else "-")
    for ax, o in zip(axes[0], offsets):  # four panels leave room for a short label only
        ax.set(xlabel="relative depth (layer / layers)" if len(offsets) <= 2 else "relative depth", ylim=(0, 1.05),
               title=f"{abs(o)} word{'s' if abs(o) > 1 else ''} {'before' if o < 0 else 'after'}")
        ax.grid(True, alpha=0.3)
    axes[0, 0].set_ylabel("word read back (held out)")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=min(len(labels), 4))
    if title:
        fig.suptitle(title)
    return fig


_OFFSET_WORDS = {-2: "2 before", -1: "1 before", 1: "1 after", 2: "2 after"}


def _row_names(rows: Mapping[str, Mapping[int, Any]]) -> list[tuple[str, int]]:
    return [(model, o) for model, by in rows.items() for o in by]


@book_figure
def plot_depth_fades(rows_by_fit: Mapping[int, Mapping[str, Mapping[int, Mapping]]], margin: float = 0.05,
                     title: str = "") -> Figure:
    """F (last layer minus the best layer, held out) with its 95% interval, per model and offset and fitting size.

    ``rows_by_fit`` maps a number of fitting sentences to
    :func:`~attention_course.chapters.graphs.depth_study.depth_rows`; the decision's band,
    ``-margin`` to ``+margin`` around 0, is shaded, and its line ``-margin`` dashed.

    Examples
    --------
    >>> rows = {n: {"A": {-1: {"F": (-0.1, -0.15, -0.05)}, 1: {"F": (0.0, -0.01, 0.01)}}} for n in (120, 1000)}
    >>> fig = plot_depth_fades(rows)
    >>> [t.get_text().splitlines() for t in fig.axes[0].get_xticklabels()], len(fig.axes[0].containers)
    ([['A', '1 before'], ['A', '1 after']], 2)
    """
    sizes = sorted(rows_by_fit)
    names = _row_names(rows_by_fit[sizes[-1]])
    fig, ax = plt.subplots(figsize=(PAGE_WIDTH, 3.6), layout="constrained")
    ax.axhspan(-margin, margin, color="0.85", lw=0)
    ax.axhline(-margin, color="0.2", ls="--", lw=1, label=f"-m = {-margin:g}")
    ax.axhline(0, color="0.5", lw=0.8)
    shift = np.linspace(-0.25, 0.25, len(sizes)) if len(sizes) > 1 else np.zeros(1)
    for j, n in enumerate(sizes):
        F = np.array([rows_by_fit[n][m][o]["F"] for m, o in names], dtype=float)  # (rows, 3): F, low, high
        x = np.arange(len(names)) + shift[j]
        ax.errorbar(x, F[:, 0], yerr=[F[:, 0] - F[:, 1], F[:, 2] - F[:, 0]], fmt="o", ms=4 if n == sizes[-1] else 3,
                    capsize=2, lw=1.4 if n == sizes[-1] else 0.9, label=f"{n:,} sentences fit")
    ax.set_xticks(np.arange(len(names)), [f"{m}\n{_OFFSET_WORDS.get(o, o)}" for m, o in names])
    ax.set_ylabel("F: last layer minus best layer")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(loc="lower right", fontsize="small", ncols=2)
    if title:
        ax.set_title(title)
    return fig


_LABEL_COLOURS = {"kept": "#009E73", "undecided": "0.8", "fades": "#E69F00", "lost": "#D55E00"}


@book_figure
def plot_margin_sweep(sweep: Sequence[Mapping], chosen: float = 0.05, title: str = "") -> Figure:
    """Each model and offset's label (kept, undecided, fades, lost) against the margin m, and the verdict above.

    ``sweep`` is :func:`~attention_course.chapters.graphs.depth_study.margin_sweep`'s list; ``chosen``
    marks the margin fixed in advance.

    Examples
    --------
    >>> s = [{"margin": m, "labels": {"A": {-1: v}}, "verdict": w} for m, v, w in
    ...      [(0.02, "fades", "holds when"), (0.1, "kept", "holds")]]
    >>> fig = plot_margin_sweep(s)
    >>> [t.get_text() for t in fig.axes[0].get_yticklabels()]
    ['verdict', 'A, 1 before']
    """
    if not sweep:
        raise ValueError("sweep is empty; expected one margin_sweep result per margin")
    names = _row_names(sweep[0]["labels"])
    m = np.array([s["margin"] for s in sweep], dtype=float)
    edges = np.concatenate([[m[0] - (m[1] - m[0]) / 2 if len(m) > 1 else m[0] - 0.005],
                            (m[1:] + m[:-1]) / 2, [m[-1] + (m[-1] - m[-2]) / 2 if len(m) > 1 else m[0] + 0.005]])
    fig, ax = plt.subplots(figsize=(PAGE_WIDTH, 0.9 + 0.32 * (len(names) + 1)), layout="constrained")
    for j, s in enumerate(sweep):  # row 0 the verdict, rows 1.. each model and offset, top to bottom
        span = [edges[j], edges[j + 1]]
        ax.fill_between(span, -0.4, 0.4, color=_VERDICT_COLOURS.get(s["verdict"], "0.8"), lw=0)
        for i, (model, o) in enumerate(names, start=1):
            ax.fill_between(span, i - 0.4, i + 0.4, color=_LABEL_COLOURS[s["labels"][model][o]], lw=0)
    ax.axvline(chosen, color="0.1", ls="--", lw=1)
    ax.set_yticks(np.arange(len(names) + 1), ["verdict"] + [f"{model}, {_OFFSET_WORDS.get(o, o)}" for model, o in names])
    ax.set(xlim=(edges[0], edges[-1]), ylim=(len(names) + 0.5, -0.5), xlabel="margin m")
    handles = [Patch(color=c, label=k) for k, c in _LABEL_COLOURS.items()]
    handles += [Patch(color=c, label=f"verdict: {v}") for v, c in _VERDICT_COLOURS.items()
                if any(s["verdict"] == v for s in sweep)]
    fig.legend(handles=handles, loc="outside lower center", ncols=4, fontsize="small")
    if title:
        ax.set_title(title)
    return fig


@book_figure
def plot_composition(summary: Mapping[tuple, Mapping[str, float]], chance: Optional[float] = None,
                     baselines: Optional[Mapping[str, float]] = None, title: str = "",
                     ax: Optional[Axes] = None) -> Figure:
    """Held-out accuracy against the number of layers L, one line per number of hops k.

    ``summary`` maps (k, L) to ``mean``, ``min``, ``max`` over seeds
    (:func:`attention_course.chapters.graphs.composition.summarise`): markers the mean, bars the range.
    ``chance`` is dashed; ``baselines`` (label -> accuracy) are dotted.

    Examples
    --------
    >>> cell = lambda a: {"mean": a, "min": a, "max": a}
    >>> summary = {(1, 1): cell(1.0), (1, 2): cell(1.0), (2, 1): cell(0.3), (2, 2): cell(0.9)}
    >>> fig = plot_composition(summary, chance=0.125, title="t")
    >>> fig.axes[0].get_xlabel(), [t.get_text() for t in fig.legends[0].get_texts()][:2]
    ('number of layers L', ['k = 1 hop', 'k = 2 hops'])
    """
    if not summary:
        raise ValueError("summary is empty; expected {(k, L): {'mean': ..., 'min': ..., 'max': ...}}")
    own = ax is None
    fig, ax = new_axes(ax, (6.4, 4.4))
    hops = sorted({k for k, _ in summary})
    layers = sorted({L for _, L in summary})
    colours = plt.get_cmap("viridis")(np.linspace(0.0, 0.85, len(hops)))
    offsets = np.linspace(-0.03, 0.03, len(hops)) if len(hops) > 1 else [0.0]  # keep bars apart
    handles = []  # in drawing order: the k lines first, then the reference levels
    for k, colour, dx, marker in zip(hops, colours, offsets, "osD^vp"):
        Ls = [L for L in layers if (k, L) in summary]
        s = [summary[k, L] for L in Ls]
        mean = np.array([v["mean"] for v in s])
        err = np.array([[v["mean"] - v["min"] for v in s], [v["max"] - v["mean"] for v in s]])
        handles.append(ax.errorbar(np.array(Ls) + dx, mean, yerr=err, color=colour, marker=marker, capsize=3, lw=1.6,
                    label=f"k = {k} hop" + ("s" if k > 1 else "")))
    if chance is not None:
        handles.append(ax.axhline(chance, color="0.45", ls="--", lw=1, label=f"guess, 1/n = {chance:.3g}"))
    for (name, level), ls in zip((baselines or {}).items(), (":", "-.", (0, (1, 3)))):
        handles.append(ax.axhline(level, color="0.3", ls=ls, lw=1, label=f"{name}: {level:.2g}"))
    ax.set_xticks(layers)
    ax.set_xlim(layers[0] - 0.3, layers[-1] + 0.3)
    return _finish_accuracy_axes(ax, handles, "number of layers L", title, own, ylabel="held-out accuracy")


@book_figure
def plot_head_budget(table: Mapping[tuple, Mapping], threshold: float = 0.9, title: str = "",
                     ax: Optional[Axes] = None) -> Figure:
    """Held-out accuracy against the total number of heads: one colour per ``n``, one layer solid, two dashed.

    ``table`` maps (n, L, H) to ``accuracy`` (one per seed) and ``converged``
    (:func:`attention_course.chapters.graphs.head_budget.grid_table`). Markers are the mean, bars
    the seed range; a hollow marker is a run whose loss was still falling.

    Examples
    --------
    >>> t = {(8, 1, 4): {"accuracy": [0.4, 0.5], "converged": False}, (8, 2, 4): {"accuracy": [0.99], "converged": True}}
    >>> fig = plot_head_budget(t, title="t")
    >>> fig.axes[0].get_xlabel(), [x.get_text() for x in fig.legends[0].get_texts()][:2]
    ('heads in total (one layer of H, or two of H / 2)', ['n = 8, one layer', 'n = 8, two layers'])
    """
    if not table:
        raise ValueError("table is empty; expected {(n, L, H): {'accuracy': [...], 'converged': bool}}")
    own = ax is None
    fig, ax = new_axes(ax, (6.4, 4.6))
    nodes = sorted({n for n, _, _ in table})
    heads = sorted({H for _, _, H in table})
    colours = dict(zip(nodes, _NODE_COLOURS))
    handles = []
    for i, n in enumerate(nodes):
        shift = 0.07 * (i - (len(nodes) - 1) / 2)  # each n a little apart, so equal points stay visible
        for L, ls, dx in ((1, "-", shift - 0.03), (2, "--", shift + 0.03)):
            Hs = [H for H in heads if (n, L, H) in table]
            if not Hs:
                continue
            acc = [np.asarray(table[n, L, H]["accuracy"], dtype=float) for H in Hs]
            mean = np.array([a.mean() for a in acc])
            err = np.array([[m - a.min() for m, a in zip(mean, acc)], [a.max() - m for m, a in zip(mean, acc)]])
            x = np.log2(Hs) + dx
            line = ax.errorbar(x, mean, yerr=err, color=colours[n], ls=ls, marker="o" if L == 1 else "s",
                               capsize=3, lw=1.6, mfc=colours[n],
                               label=f"n = {n}, {'one layer' if L == 1 else 'two layers'}")
            handles.append(line)
            falling = [i for i, H in enumerate(Hs) if not table[n, L, H]["converged"]]
            ax.plot(x[falling], mean[falling], "o" if L == 1 else "s", ms=9, mfc="white", mec=colours[n], zorder=3)
    handles.append(ax.axhline(threshold, color="0.3", ls=":", lw=1, label=f"success: {threshold:g} on every seed"))
    handles.append(ax.plot([], [], "o", mfc="white", mec="0.3", label="loss still falling")[0])
    ax.set_xticks(np.log2(heads), [str(H) for H in heads])
    return _finish_accuracy_axes(ax, handles, "heads in total (one layer of H, or two of H / 2)", title, own)


def _accuracy_curve(ax: Axes, record: Mapping, **style: Any):
    """Draw one run's held-out accuracy against its steps (step 0 left out: it has no place on a log axis)."""
    steps = np.asarray(record["checks"], dtype=float)
    keep = steps > 0
    line, = ax.plot(steps[keep], np.asarray(record["check_accuracy"], dtype=float)[keep], **style)
    return line


def plot_training_curves(runs: Sequence[Mapping], chance: Optional[Mapping[int, float]] = None,
                         threshold: float = 0.9, title: str = "", ax: Optional[Axes] = None) -> Figure:
    """Held-out accuracy against training steps (log scale), one line per run.

    Colour is ``n``, one layer solid and two dashed, ``chance[n]`` dotted. ``runs`` are records of
    :func:`attention_course.chapters.graphs.head_budget.run_matched`.

    Examples
    --------
    >>> r = {"n_nodes": 8, "n_layers": 2, "n_heads": 2, "seed": 0, "checks": [0, 250, 500],
    ...      "check_accuracy": [0.1, 0.5, 0.99]}
    >>> fig = plot_training_curves([r], chance={8: 1 / 8}, title="t")
    >>> fig.axes[0].get_xscale(), [x.get_text() for x in fig.legends[0].get_texts()][0]
    ('log', 'n = 8, 2 x 2 heads, seed 0')
    """
    if not runs:
        raise ValueError("runs is empty; expected records with 'checks' and 'check_accuracy'")
    own = ax is None
    fig, ax = new_axes(ax, (6.4, 4.6))
    nodes = sorted({r["n_nodes"] for r in runs})
    colours = dict(zip(nodes, _NODE_COLOURS))
    handles = [_accuracy_curve(ax, r, color=colours[r["n_nodes"]], ls="-" if r["n_layers"] == 1 else "--", lw=1.4,
                               alpha=0.9 if r["seed"] == 0 else 0.6,
                               label=f"n = {r['n_nodes']}, {r['n_layers']} x {r['n_heads']} heads, seed {r['seed']}")
               for r in runs]
    for n, p in sorted((chance or {}).items()):
        ax.axhline(p, color=colours.get(n, "0.5"), ls=":", lw=1)
    handles.append(ax.axhline(threshold, color="0.3", ls=":", lw=1, label=f"success: {threshold:g}"))
    ax.set_xscale("log")
    return _finish_accuracy_axes(ax, handles, "training steps (log scale)", title, own)


def _finish_accuracy_axes(ax: Axes, handles: list, xlabel: str, title: str, own: bool,
                          ylabel: str = "held-out accuracy, two hops") -> Figure:
    """Labels, limits and legend shared by the accuracy figures (below the axes when the figure is ours)."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(-0.03, 1.03)
    ax.grid(alpha=0.3)
    if own:
        ax.figure.legend(handles=handles, loc="outside lower center", ncols=2)
    else:
        ax.legend(handles=handles, loc="best")
    ax.set_title(title)
    return ax.figure


@book_figure
def plot_hop_sweep(runs: Sequence[Mapping], threshold: float = 0.9, title: str = "") -> Figure:
    """Held-out accuracy against training steps for ``L`` layers on ``k = L`` hops: one panel per depth.

    Colour is ``n`` (its guess line 1/n dotted), line style the learning rate, seed 0 thick.
    ``runs`` are :func:`attention_course.chapters.graphs.hop_sweep.sweep_run` records.

    Examples
    --------
    >>> r = lambda L, n, lr: {"kind": "sweep", "n_nodes": n, "n_layers": L, "hops": L, "lr": lr, "seed": 0,
    ...                       "checks": [0, 250, 500], "check_accuracy": [0.1, 0.5, 0.99]}
    >>> fig = plot_hop_sweep([r(1, 8, 0.01), r(2, 16, 0.003)], title="t")
    >>> len(fig.axes), fig.axes[1].get_title(), fig.axes[0].get_xscale()
    (2, 'L = 2 layers, k = 2 hops', 'log')
    """
    runs = [r for r in runs if r.get("kind", "sweep") == "sweep"]
    if not runs:
        raise ValueError("runs has no sweep records; expected dicts with 'n_layers', 'checks' and 'check_accuracy'")
    layers = sorted({r["n_layers"] for r in runs})
    nodes = sorted({r["n_nodes"] for r in runs})
    lrs = sorted({r["lr"] for r in runs})
    colours = dict(zip(nodes, _NODE_COLOURS))
    styles = dict(zip(lrs, (":", "--", "-", "-.")))
    fig, axes = plt.subplots(1, len(layers), figsize=(PAGE_WIDTH, 3.4), sharey=True, layout="constrained",
                             squeeze=False)
    for ax, L in zip(axes[0], layers):
        for r in sorted((r for r in runs if r["n_layers"] == L), key=lambda r: (r["n_nodes"], r["lr"], r["seed"])):
            _accuracy_curve(ax, r, color=colours[r["n_nodes"]], ls=styles[r["lr"]], lw=1.8 if r["seed"] == 0 else 0.9,
                            alpha=0.95 if r["seed"] == 0 else 0.7)
        for n in nodes:
            ax.axhline(1 / n, color=colours[n], ls=":", lw=0.9)
        ax.axhline(threshold, color="0.3", ls=(0, (1, 3)), lw=1)
        ax.set_xscale("log")
        ax.set_title(f"L = {L} layer{'s' if L > 1 else ''}, k = {L} hop{'s' if L > 1 else ''}")
        ax.set_xlabel("training steps")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("held-out accuracy")
    axes[0][0].set_ylim(-0.03, 1.03)
    handles = [plt.Line2D([], [], color=colours[n], lw=1.8, label=f"n = {n}") for n in nodes]
    handles += [plt.Line2D([], [], color="0.3", ls=styles[lr], lw=1.4, label=f"lr {lr:g}") for lr in lrs]
    handles += [plt.Line2D([], [], color="0.3", lw=0.9, label="seed 1 (thin)"),
                plt.Line2D([], [], color="0.3", ls=(0, (1, 3)), lw=1, label=f"pass: {threshold:g}"),
                plt.Line2D([], [], color="0.5", ls=":", lw=0.9, label="guess, 1/n")]
    fig.legend(handles=handles, loc="outside lower center", ncols=5)
    if title:
        fig.suptitle(title)
    return fig


_VERDICT_COLOURS = {"holds": "#009E73", "holds when": "#E69F00", "wrong as stated": "#D55E00"}


@book_figure
def plot_hop_threshold(thresholds: Sequence[float], decisions: Sequence[Mapping], chosen: float = 0.9,
                       title: str = "", ax: Optional[Axes] = None) -> Figure:
    """Cells ``(L, n)`` that pass against the pass line, the background coloured by the verdict.

    ``decisions`` holds one :func:`attention_course.chapters.graphs.hop_sweep.sweep_decision` result
    per threshold; ``chosen`` marks the line fixed in advance.

    Examples
    --------
    >>> d = lambda ok, v: {"passes": {(1, 8): True, (2, 8): ok}, "verdict": v}
    >>> fig = plot_hop_threshold([0.5, 0.9, 0.99], [d(True, "holds"), d(True, "holds"), d(False, "holds when")])
    >>> fig.axes[0].get_xlabel()
    'pass line (held-out accuracy on every seed)'
    """
    if len(thresholds) != len(decisions) or not decisions:
        raise ValueError(f"thresholds has {len(thresholds)} values and decisions {len(decisions)}; expected the "
                         f"same positive number")
    own = ax is None
    fig, ax = new_axes(ax, (PAGE_WIDTH * 0.85, 4.0))
    t = np.asarray(thresholds, dtype=float)
    layers = sorted({L for L, _ in decisions[0]["passes"]})
    edges = np.concatenate([[t[0]], (t[1:] + t[:-1]) / 2, [t[-1]]])  # each line's band
    for lo, hi, d in zip(edges[:-1], edges[1:], decisions):
        ax.axvspan(lo, hi, color=_VERDICT_COLOURS[d["verdict"]], alpha=0.18, lw=0)
    for L, marker in zip(layers, "osD^"):
        count = [sum(ok for (L2, _), ok in d["passes"].items() if L2 == L) for d in decisions]
        total = sum(1 for L2, _ in decisions[0]["passes"] if L2 == L)
        ax.step(t, count, where="mid", marker=marker, ms=3, lw=1.5, label=f"L = {L}: cells passing (of {total})")
    ax.axvline(chosen, color="0.2", ls="--", lw=1, label=f"line fixed in advance: {chosen:g}")
    handles = ax.get_legend_handles_labels()[0]
    handles += [Patch(color=colour, alpha=0.18, label=f"verdict: {verdict}") for verdict, colour in
                _VERDICT_COLOURS.items() if any(d["verdict"] == verdict for d in decisions)]
    ax.set_xlabel("pass line (held-out accuracy on every seed)")
    ax.set_ylabel("numbers of nodes passing")
    ax.set_xlim(t[0], t[-1])
    ax.set_ylim(-0.2, max(sum(1 for L2, _ in decisions[0]["passes"] if L2 == L) for L in layers) + 0.4)
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.grid(alpha=0.3)
    ax.set_title(title)
    if own:
        fig.legend(handles=handles, loc="outside lower center", ncols=2)
    else:
        ax.legend(handles=handles, loc="best")
    return fig


_BIN_COLOURS = ("#0072B2", "#E69F00", "0.75")  # property, no property, sink


@book_figure
def plot_head_bins(lines: Sequence[float], sweeps: Mapping[str, Array], *, chosen: float,
                   labels: Sequence[str] = ("property", "no property", "sink head"), xlabel: str = "line",
                   title: str = "") -> Figure:
    """Shares of all heads per bin (property, no property, sink) against the deciding line, one panel per model.

    ``sweeps`` maps a model to (len(lines), 3) from
    :func:`attention_course.chapters.graphs.topology_rule_table.bin_sweep`.

    Examples
    --------
    >>> s = np.array([[0.5, 0.2, 0.3], [0.3, 0.4, 0.3]])
    >>> fig = plot_head_bins([0.1, 0.2], {"A": s, "B": s}, chosen=0.2)
    >>> len(fig.axes), fig.axes[0].get_ylabel()
    (2, 'share of all heads')
    """
    t = np.asarray(lines, dtype=float)
    if not sweeps or any(np.shape(s) != (len(t), 3) for s in sweeps.values()):
        raise ShapeError(f"sweeps has shapes {[np.shape(s) for s in sweeps.values()]}; expected ({len(t)}, 3) each")
    fig, axes = plt.subplots(1, len(sweeps), figsize=(PAGE_WIDTH, 3.3), sharey=True, layout="constrained", squeeze=False)
    for ax, (name, s) in zip(axes[0], sweeps.items()):
        s = np.asarray(to_numpy(s), dtype=float)
        ax.stackplot(t, s.T, colors=_BIN_COLOURS, labels=labels, step="mid" if len(t) < 4 else None, alpha=0.9)
        ax.axvline(chosen, color="0.1", ls="--", lw=1)
        ax.axhline(0.5, color="0.1", ls=":", lw=1)
        ax.set(xlim=(t[0], t[-1]), ylim=(0, 1), title=name, xlabel=xlabel)
    axes[0][0].set_ylabel("share of all heads")
    handles, names = axes[0][0].get_legend_handles_labels()
    handles += [plt.Line2D([], [], color="0.1", ls="--", lw=1), plt.Line2D([], [], color="0.1", ls=":", lw=1)]
    names += [f"line fixed in advance ({chosen:g})", "half of all heads"]
    fig.legend(handles, names, loc="outside lower center", ncol=3, fontsize=9)
    if title:
        fig.suptitle(title)
    return fig
