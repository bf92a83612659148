"""Figures for chapter 7: the memory capacities, the ingredient ablations, heads by kind, and the ledger by verdict.

Each helper returns the :class:`matplotlib.figure.Figure` and changes no global state; :func:`plot_verdicts`
is given the claims (figures do not import the course layer).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Optional

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

from .memory import capacity, exponential_law, outer_product_law
from .take_away import TAKE_AWAY_ROWS, TAKE_AWAY_TASKS
from ...figures.style import book_figure, method_color

__all__ = [
    "plot_head_kinds", "plot_verdicts", "plot_memory", "plot_ingredients", "plot_linear_capacity",
    "plot_lookup", "plot_retrieval", "plot_shuffled_heads", "plot_kind_shares", "plot_kind_sweep", "plot_take_away",
]

#: One colour per kind of head (Okabe & Ito): content, position, sink, mixed.
KIND_COLORS = {"content": "#0072B2", "position": "#D55E00", "sink": "#E69F00", "mixed": "#CC79A7"}


@book_figure
def plot_head_kinds(by_word: np.ndarray, by_offset: np.ndarray, labels: np.ndarray,
                    counts: Mapping[str, Sequence[int]], baselines: Mapping[str, tuple[float, float]],
                    control: Optional[tuple[np.ndarray, np.ndarray]] = None,
                    margin: float = 0.2) -> Figure:
    """Left: each head's two follow scores, coloured by kind; right: the kinds counted per sentence.

    Parameters
    ----------
    by_word, by_offset : arrays (L, H)
        Mean follow scores over sentences.
    labels : array (L, H) of str
    counts : mapping kind -> per-sentence counts (S,)
    baselines : mapping name -> (by_word, by_offset) of a baseline head, drawn as black markers
    control : (by_word, by_offset), optional
        A control model's heads, drawn as grey crosses.
    margin : float
        The classification margin (dashed lines).

    Examples
    --------
    >>> w, o = np.array([[0.9, 0.1]]), np.array([[0.1, 0.8]])
    >>> fig = plot_head_kinds(w, o, np.array([["content", "position"]]),
    ...                       {"content": [1, 1], "position": [1, 0], "sink": [0, 1], "mixed": [0, 0]},
    ...                       {"uniform": (0.0, 0.0)})
    >>> [int(p.get_height()) for p in fig.axes[1].patches][:2]     # content heads in sentences 1, 2
    [1, 1]
    >>> fig.legends[0].get_texts()[0].get_text()
    'content'
    """
    fig, (ax, ax_c) = plt.subplots(1, 2, figsize=(7.0, 4.4), width_ratios=[1.2, 1.0], layout="constrained")
    lim = (-0.35, 1.05)
    ax.plot(lim, np.add(lim, margin), color="0.6", ls="--", lw=1)
    ax.plot(lim, np.subtract(lim, margin), color="0.6", ls="--", lw=1)
    if control is not None:
        ax.scatter(np.ravel(control[0]), np.ravel(control[1]), marker="x", s=18, color="0.55", lw=0.8,
                   label="head of a weight-shuffled model", zorder=1)
    labels = np.asarray(labels)
    for kind, colour in KIND_COLORS.items():
        sel = labels == kind
        ax.scatter(by_word[sel], by_offset[sel], s=22, color=colour, label=kind, edgecolor="white",
                   lw=0.4, zorder=2)
    for name, (w, o) in baselines.items():
        ax.scatter([w], [o], marker="s", s=40, color="black", zorder=3)
        right = w > 0.5  # label on the inner side, so that it stays inside the axes
        ax.annotate(name, (w, o), xytext=(-6 if right else 6, 6), textcoords="offset points",
                    ha="right" if right else "left", va="bottom",
                    bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none", "alpha": 0.85})
    ax.set(xlim=lim, ylim=lim, xlabel="follows the words (correlation)",
           ylabel="follows the offsets (correlation)", title="Each head (mean over sentences)")
    ax.set_aspect("equal")
    n_sent = len(next(iter(counts.values())))
    x, bottom = np.arange(1, n_sent + 1), np.zeros(n_sent)
    for kind, colour in KIND_COLORS.items():
        values = np.asarray(counts.get(kind, np.zeros(n_sent)), dtype=float)
        ax_c.bar(x, values, bottom=bottom, color=colour, edgecolor="white")
        bottom += values
    ax_c.set_xticks(x)
    ax_c.set(xlabel="sentence", ylabel="number of heads", title="Kinds of head, per sentence")
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncol=3,
               handletextpad=0.3, columnspacing=1.0)
    return fig


@book_figure
def plot_verdicts(claims: Iterable, sections: Mapping[int, str], verdicts: Sequence[str],
                  colours: Sequence[str] = ("tab:green", "tab:orange", "tab:red", "tab:gray"),
                  title: str = "The essay's claims, by section and verdict") -> Figure:
    """Stacked bars: how many claims of each essay section got each verdict.

    Parameters
    ----------
    claims : iterable of objects with ``.section`` (a key of ``sections``) and ``.verdict``
    sections : mapping section number -> name, bars top to bottom
    verdicts, colours : the verdicts in the order they are stacked, one colour each

    Examples
    --------
    >>> from types import SimpleNamespace as C
    >>> claims = [C(section=1, verdict="holds"), C(section=2, verdict="wrong"), C(section=2, verdict="holds")]
    >>> fig = plot_verdicts(claims, {1: "One", 2: "Two"}, ("holds", "wrong"))
    >>> [int(p.get_width()) for p in fig.axes[0].patches]     # (section, verdict) bars, verdict by verdict
    [1, 1, 0, 1]
    """
    claims = list(claims)
    counts = np.array([[sum(c.section == s and c.verdict == v for c in claims) for v in verdicts]
                       for s in sections])  # (n_sections, n_verdicts)
    fig, ax = plt.subplots(figsize=(6.8, 4.4), layout="constrained")
    left = np.zeros(len(sections))
    labels = [f"{s}. {name}" for s, name in sections.items()]
    for j, (v, colour) in enumerate(zip(verdicts, colours)):
        bars = ax.barh(labels, counts[:, j], left=left, color=colour, label=v, edgecolor="white")
        ax.bar_label(bars, labels=[str(n) if n else "" for n in counts[:, j]], label_type="center",
                     color="white", fontweight="bold")
        left += counts[:, j]
    ax.invert_yaxis()
    ax.set_xlabel("number of claims")
    ax.set_ylabel("essay section")
    ax.set_xticks(range(int(left.max()) + 1))
    ax.set_title(title)
    fig.legend(*ax.get_legend_handles_labels(), title="verdict", loc="outside lower center", ncol=len(verdicts))
    return fig


_MEMORY_COLORS = {"softmax, beta = 1": "#0072B2", "softmax, beta = 1/sqrt(d)": "#56B4E9",
                  "outer product (linear)": "#D55E00"}


@book_figure
def plot_memory(doc: Mapping, d_curve: int = 32, level: float = 0.9, title: str = "") -> Figure:
    r"""Left: exact retrieval against the number of stored patterns at one ``d``; right: capacity against ``d``.

    ``doc`` is :func:`~attention_course.chapters.insight.memory.capacity_sweep`'s result; the right panel draws the
    worst seed's capacity (open marker: a lower bound) beside the laws :math:`d/(4\ln d)` and :math:`e^{\alpha d}`.

    Examples
    --------
    >>> from attention_course.chapters.insight.memory import capacity_sweep
    >>> fig = plot_memory(capacity_sweep(dims=(16, 32), max_log2=(3, 4), n_queries=20), d_curve=16)
    >>> [ax.get_xlabel() for ax in fig.axes]
    ['stored patterns M', 'dimension d']
    """
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(7.0, 3.3), layout="constrained")
    dims = [int(d) for d in doc["dims"]]
    for name, curves in doc["curves"].items():
        c = curves[str(d_curve)]
        acc = np.asarray(c["accuracy"])  # (seeds, sizes)
        ax.plot(c["sizes"], acc.mean(0), "o-", ms=3, color=_MEMORY_COLORS.get(name), label=name)
        ax.fill_between(c["sizes"], acc.min(0), acc.max(0), color=_MEMORY_COLORS.get(name), alpha=0.2)
        caps = [min(capacity(a, curves[str(d)]["sizes"], level) for a in curves[str(d)]["accuracy"]) for d in dims]
        top = [curves[str(d)]["sizes"][-1] for d in dims]
        full = [cp >= t for cp, t in zip(caps, top)]
        bx.plot(dims, caps, "-", color=_MEMORY_COLORS.get(name), lw=1)
        for d, cp, f in zip(dims, caps, full):
            bx.plot([d], [max(cp, 0.7)], "^" if f else "o", ms=7, color=_MEMORY_COLORS.get(name),
                    mfc="none" if f else _MEMORY_COLORS.get(name))
    ax.axhline(level, color="0.5", ls=":", lw=1)
    ax.set(xscale="log", xlabel="stored patterns M", ylabel="share retrieved exactly",
           title=f"Retrieval at d = {d_curve}")
    ax.set_xscale("log", base=2)
    ax.legend(fontsize=8, loc="lower left")
    grid = np.linspace(min(dims), max(dims), 50)
    bx.plot(grid, [exponential_law(d, doc["flip"]) for d in grid], "--", color="#0072B2", lw=1,
            label=r"$e^{\alpha d}$ (exponential)")
    bx.plot(grid, [outer_product_law(d) for d in grid], "--", color="#D55E00", lw=1, label=r"$d/(4 \ln d)$")
    bx.plot(grid, grid, ":", color="0.5", lw=1, label="M = d")
    bx.set_yscale("log", base=2)
    bx.set(xlabel="dimension d", ylabel=f"capacity (>= {level:.0%} exact)", title="Capacity against d",
           xticks=dims)
    bx.legend(fontsize=8, loc="upper left")
    if title:
        fig.suptitle(title)
    return fig


@book_figure
def plot_ingredients(table: Mapping, rows: Sequence[tuple[str, str]], tasks: Sequence[tuple[str, str]],
                     title: str = "", spread: bool = True) -> Figure:
    """Heat map: ingredient taken away (rows) x task (columns), mean accuracy over seeds, spread annotated.

    ``table`` maps ``(task, variant)`` to a ``Score``; ``rows`` are ``(label, variant)``, ``tasks``
    ``(label, task)``; a cell not run is grey. ``spread=False``: the mean only.

    Examples
    --------
    >>> from attention_course.chapters.insight.ingredients import Score
    >>> t = {("r", "a"): Score(0.9, 0.8, 1.0, 3)}
    >>> fig = plot_ingredients(t, [("A", "a"), ("B", "b")], [("recall", "r")])
    >>> fig.axes[0].get_xticklabels()[0].get_text(), len(fig.axes)
    ('recall', 2)
    """
    M = np.full((len(rows), len(tasks)), np.nan)
    height = (0.56 if spread else 0.4) * len(rows) + 1.4
    fig, ax = plt.subplots(figsize=(4.8 + 0.7 * len(tasks), height), layout="constrained")
    for i, (_, variant) in enumerate(rows):
        for j, (_, task) in enumerate(tasks):
            s = table.get((task, variant))
            if s is None:
                continue
            M[i, j] = s.mean
            text = f"{s.mean:.2f}\n{s.low:.2f}-{s.high:.2f}" if spread else f"{s.mean:.2f}"
            ax.text(j, i, text, ha="center", va="center", fontsize=10, linespacing=1.0,
                    color="white" if s.mean < 0.6 else "black")
    cmap = plt.get_cmap("viridis").with_extremes(bad="#DDDDDD")
    im = ax.imshow(np.ma.masked_invalid(M), cmap=cmap, vmin=0, vmax=1, aspect="auto")
    fig.colorbar(im, ax=ax, label="accuracy on unseen sequences")
    ax.set_xticks(range(len(tasks)), [t for t, _ in tasks])
    ax.set_yticks(range(len(rows)), [r for r, _ in rows])
    ax.set_xlabel("task (cell: mean, then worst-best seed)" if spread else "task (cell: mean over seeds)")
    ax.set_title(title or "Take one ingredient away")
    return fig


@book_figure
def plot_take_away(table: Mapping, title: str = "") -> Figure:
    """The lesson's bars: one ingredient taken away per row, held-out accuracy on recall and the copy side by side.

    Examples
    --------
    >>> from attention_course.chapters.insight.ingredients import Score
    >>> fig = plot_take_away({("recall (MQAR, 16 pairs)", "tied"): Score(0.98, 0.97, 0.99, 3),
    ...                       ("previous token", "tied"): Score(0.02, 0.01, 0.03, 3)})
    >>> fig.axes[0].get_legend_handles_labels()[1], [round(float(p.get_width()), 2) for p in fig.axes[0].patches]
    (['recall, 16 pairs', 'copy, 32 tokens'], [0.98, 0.02])
    """
    rows, tasks = TAKE_AWAY_ROWS, TAKE_AWAY_TASKS
    colours = ("#0072B2", "#E69F00")  # Okabe & Ito blue and orange: recall, copy
    fig, ax = plt.subplots(figsize=(7.0, 0.55 * len(rows) + 1.3), layout="constrained")
    bar = 0.8 / len(tasks)
    for j, ((task_label, task), colour) in enumerate(zip(tasks, colours)):
        for i, (_, variant) in enumerate(rows):
            y = i + (j - (len(tasks) - 1) / 2) * bar
            s = table.get((task, variant))
            if s is None:
                ax.text(0.01, y, "recall only", va="center", fontsize=10, color="0.4", style="italic")
                continue
            labelled = task_label in ax.get_legend_handles_labels()[1]
            ax.barh(y, s.mean, height=bar * 0.92, color=colour, label=None if labelled else task_label)
            ax.text(s.mean + 0.01, y, f"{s.mean:.2f}", va="center", fontsize=10)
    ax.set_yticks(range(len(rows)), [r for r, _ in rows])
    ax.invert_yaxis()
    ax.set(xlim=(0, 1.12), xlabel="accuracy on unseen sequences (mean of three runs)")
    ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0])
    ax.set_ylabel("ingredient taken away")
    fig.legend(loc="outside upper center", ncol=len(tasks))
    if title:
        ax.set_title(title)
    return fig


@book_figure
def plot_linear_capacity(table: Mapping, pairs: Sequence[int], widths: Sequence[int], title: str = "") -> Figure:
    """Recall against the number of pairs N, one panel per width d: softmax and linear attention.

    ``table`` maps ``(mixer, N, d)`` to a ``Score``: the mean over seeds, bars to the worst and best seed.
    The dotted line is N = d.

    Examples
    --------
    >>> from attention_course.chapters.insight.ingredients import Score
    >>> t = {(m, n, 16): Score(a, a, a, 2) for m, a in (("softmax attention", 1.0), ("linear attention", 0.5))
    ...      for n in (8, 32)}
    >>> fig = plot_linear_capacity(t, (8, 32), (16,))
    >>> fig.axes[0].get_title(), fig.axes[0].get_xlabel()
    ('d = 16', 'pairs N')
    """
    fig, axes = plt.subplots(1, len(widths), figsize=(7.0, 3.0), sharey=True, layout="constrained", squeeze=False)
    for ax, d in zip(axes[0], widths):
        for mixer, colour in (("softmax attention", method_color("sdpa")), ("linear attention", method_color("linear"))):
            ns = [n for n in pairs if (mixer, n, d) in table]
            s = [table[mixer, n, d] for n in ns]
            mean = np.array([x.mean for x in s])
            err = np.array([[x.mean - x.low for x in s], [x.high - x.mean for x in s]])
            ax.errorbar(ns, mean, yerr=err, fmt="o-", ms=4, capsize=2, color=colour, label=mixer)
        ax.axvline(d, color="0.5", ls=":", lw=1.2)
        ax.text(d, 0.08, " N = d", color="0.35", fontsize=9, ha="left", va="center")
        ax.set_xscale("log", base=2)
        ax.set_xticks(list(pairs), [str(n) for n in pairs])
        ax.set(title=f"d = {d}", xlabel="pairs N", ylim=(-0.03, 1.05))
    axes[0][0].set_ylabel("held-out recall")
    fig.legend(*axes[0][0].get_legend_handles_labels(), loc="outside lower center", ncol=2)
    if title:
        fig.suptitle(title)
    return fig


_SIGNS = ListedColormap(["#D55E00", "#56B4E9"], name="signs")  # -1, +1


@book_figure
def plot_lookup(keys: np.ndarray, query: np.ndarray, target: int, title: str = "") -> Figure:
    """The memory picture: stored sign keys (rows), a damaged query below them, and how well each key matches it.

    Parameters
    ----------
    keys : array (M, d) of +-1
    query : array (d,) of +-1
        Key ``target`` with some signs flipped (outlined).
    target : int

    Examples
    --------
    >>> K = np.array([[1.0, -1, 1, 1], [-1, -1, 1, -1]])
    >>> fig = plot_lookup(K, np.array([1.0, -1, 1, -1]), target=0)
    >>> [int(p.get_width()) for p in fig.axes[1].patches]    # signs that agree with the query
    [3, 3]
    """
    keys, query = np.asarray(keys, dtype=float), np.asarray(query, dtype=float)
    M, d = keys.shape
    if query.shape != (d,) or not 0 <= target < M:
        raise ValueError(f"keys {keys.shape}, query {query.shape}, target {target}; expected (M, d), (d,), 0 <= target < M")
    agree = (keys == query).sum(axis=1)  # (M,): signs each key shares with the query
    grid = np.vstack([keys, np.full((1, d), np.nan), query[None]])  # (M + 2, d): keys, a gap, the query
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(6.8, 0.3 * (M + 2) + 1.3), width_ratios=[2.2, 1.0],
                                 sharey=True, layout="constrained")
    ax.imshow(np.ma.masked_invalid(grid), cmap=_SIGNS, vmin=-1, vmax=1, aspect="auto")
    for j in np.flatnonzero(query != keys[target]):  # the damaged signs
        ax.add_patch(plt.Rectangle((j - 0.5, M + 0.5), 1, 1, fill=False, ec="black", lw=1.6))
    labels = [f"key {i}" for i in range(M)] + ["", "query"]
    ax.set_yticks(range(M + 2), labels)
    ax.set_xticks([0, d - 1], ["1", str(d)])
    ax.set_xlabel(f"sign 1 ... {d} (orange -1, blue +1)")
    ax.spines[["left", "bottom"]].set_visible(False)
    ax.tick_params(length=0)
    colours = ["#0072B2" if i == target else "#BBBBBB" for i in range(M)]
    bx.barh(range(M), agree, color=colours)
    for i, a in enumerate(agree):
        bx.text(a + 0.3, i, str(int(a)), va="center", fontsize=10)
    bx.axvline(d / 2, color="0.5", ls=":", lw=1)
    bx.tick_params(left=False)
    bx.set(xlim=(0, d * 1.15), xlabel=f"signs shared (of {d})")
    bx.set_title(title or "Match with the query", fontsize=11)
    ax.set_title("Stored keys, and a damaged query")
    return fig


@book_figure
def plot_retrieval(sizes: Sequence[int], shares: Mapping[str, Sequence[float]], d: int, level: float = 0.9,
                   title: str = "") -> Figure:
    """Share of damaged cues recalled exactly against the number of stored patterns, one line per memory.

    ``shares``: memory name -> one share per size (``recall_shares``). Dotted: the 90% level and M = d.

    Examples
    --------
    >>> from attention_course.chapters.insight.memory import recall_shares
    >>> fig = plot_retrieval([1, 2, 4, 8], recall_shares(8, [1, 2, 4, 8], n_cues=20), d=8)
    >>> fig.axes[0].get_xlabel(), len(fig.axes[0].get_legend().get_texts())
    ('stored patterns M', 3)
    """
    fig, ax = plt.subplots(figsize=(6.4, 3.3), layout="constrained")
    for name, share in shares.items():
        ax.plot(sizes, share, "o-", ms=4, color=_MEMORY_COLORS.get(name), label=name)
    ax.axhline(level, color="0.5", ls=":", lw=1)
    ax.axvline(d, color="0.5", ls=":", lw=1)
    ax.text(d, 0.5, " M = d", color="0.35", fontsize=10, ha="left")
    ax.set_xscale("log", base=2)
    ax.set(xlabel="stored patterns M", ylabel="share recalled exactly", ylim=(-0.03, 1.05),
           title=title or f"Recall from one memory step at d = {d}")
    ax.legend(loc="lower left")
    return fig


@book_figure
def plot_shuffled_heads(words: Sequence[Sequence[str]], maps: Sequence[np.ndarray],
                        heads: Mapping[str, tuple[int, int]], title: str = "") -> Figure:
    """Two heads on a sentence and on a shuffle of its words: rows are queries, columns keys, both labelled.

    Each head has its own colour scale (0 to its largest weight, rounded up to a tenth).

    Parameters
    ----------
    words : two word lists, the sentence and its shuffle
    maps : two arrays (L, H, m, m)
    heads : mapping name -> (layer, head), 0-based; one row of panels per head

    Examples
    --------
    >>> A = np.eye(3, k=-1)[None, None] + 0.0; A[..., 0, 0] = 1.0
    >>> fig = plot_shuffled_heads([["a", "b", "c"], ["c", "a", "b"]], [A, A], {"previous word": (0, 0)})
    >>> [t.get_text() for t in fig.axes[1].get_xticklabels()], fig.axes[-1].get_ylabel()
    (['c', 'a', 'b'], 'weight')
    """
    if len(words) != 2 or len(maps) != 2:
        raise ValueError(f"got {len(words)} word lists and {len(maps)} maps; expected the sentence and one shuffle")
    fig, axes = plt.subplots(len(heads), 2, figsize=(7.0, 3.35 * len(heads) + 0.4), layout="constrained",
                             squeeze=False)
    for r, (name, (layer, head)) in enumerate(heads.items()):
        top = max(float(np.asarray(A)[layer, head].max()) for A in maps)
        vmax = min(1.0, np.ceil(top * 10) / 10) if top > 0 else 1.0  # each head on its own scale, 0 to vmax
        for c, (w, A) in enumerate(zip(words, maps)):
            ax = axes[r][c]
            im = ax.imshow(np.asarray(A)[layer, head], cmap="Blues", vmin=0, vmax=vmax)
            ax.set_xticks(range(len(w)), w, rotation=90)
            ax.set_yticks(range(len(w)), w)
            ax.tick_params(length=0, labelsize=11)
            ax.set_title(f"{name}, {'sentence' if c == 0 else 'shuffled'}", fontsize=11)  # short: clear of the colour bar
        fig.colorbar(im, ax=axes[r], label="weight", shrink=0.9)  # the head's scale, shared by its two panels
    fig.supxlabel("key (the word read)", fontsize=11)
    fig.supylabel("query (the word reading)", fontsize=11)
    if title:
        fig.suptitle(title)
    return fig


@book_figure
def plot_kind_shares(shares: Mapping[str, Mapping[str, float]], title: str = "") -> Figure:
    """One stacked bar per model: the shares of its heads by kind; dashed, half of all heads.

    Examples
    --------
    >>> fig = plot_kind_shares({"A": {"content": 0.5, "position": 0.1, "sink": 0.3, "mixed": 0.1}})
    >>> [round(float(p.get_width()), 2) for p in fig.axes[0].patches]     # sink, content, position, mixed
    [0.3, 0.5, 0.1, 0.1]
    """
    models = list(shares)
    fig, ax = plt.subplots(figsize=(7.0, 0.75 * len(models) + 1.5), layout="constrained")
    y, left = np.arange(len(models)), np.zeros(len(models))
    for kind in ("sink", "content", "position", "mixed"):
        widths = np.array([shares[m][kind] for m in models])
        bars = ax.barh(y, widths, left=left, color=KIND_COLORS[kind], edgecolor="white", label=f"{kind} heads")
        for bar, w in zip(bars, widths):
            if w >= 0.06:  # the share written on the bar when it has room
                ax.text(bar.get_x() + w / 2, bar.get_y() + bar.get_height() / 2, f"{w:.2f}", ha="center",
                        va="center", color="white" if kind != "sink" else "black", fontsize=10)
        left += widths
    ax.axvline(0.5, color="0.3", ls="--", lw=1)
    ax.set_yticks(y, models)
    ax.invert_yaxis()
    ax.set(xlim=(0, 1), xlabel="share of all heads", title=title or "What each head follows when the words are shuffled")
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncol=4, handletextpad=0.3,
               columnspacing=1.0)
    return fig


@book_figure
def plot_kind_sweep(panels: Sequence[tuple[str, Sequence[float], float, Mapping[str, Sequence[float]]]],
                    title: str = "") -> Figure:
    """Shares of all heads against a threshold, one panel per threshold; the chosen value dotted, half of all heads dashed.

    ``panels`` holds ``(xlabel, values, chosen, {line name: shares})``; a line's colour is its last word's
    kind, a name starting with ``"SmolLM2"`` dashed.

    Examples
    --------
    >>> fig = plot_kind_sweep([("margin", [0.1, 0.2], 0.2, {"MiniLM content": [0.4, 0.3]})])
    >>> fig.axes[0].get_xlabel(), fig.axes[0].lines[0].get_ydata().tolist()
    ('margin', [0.4, 0.3])
    """
    fig, axes = plt.subplots(1, len(panels), figsize=(7.0, 3.4), sharey=True, layout="constrained", squeeze=False)
    for ax, (xlabel, values, chosen, lines) in zip(axes[0], panels):
        for name, ys in lines.items():
            kind = name.split()[-1]
            ax.plot(values, ys, marker="o" if name.startswith("MiniLM") else "s", ms=4,
                    ls="--" if name.startswith("SmolLM2") else "-", color=KIND_COLORS.get(kind, "0.4"), label=name)
        ax.axvline(chosen, color="0.5", ls=":", lw=1)
        ax.axhline(0.5, color="0.3", ls="--", lw=0.8)
        ax.set(xlabel=xlabel, ylim=(0, 1))
    axes[0][0].set_ylabel("share of all heads")
    fig.legend(*axes[0][0].get_legend_handles_labels(), loc="outside lower center", ncol=4, handletextpad=0.3,
               columnspacing=1.0)
    if title:
        fig.suptitle(title)
    return fig
