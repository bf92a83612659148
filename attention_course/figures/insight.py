"""Figures for chapter 7: one head through the four lenses, and the claims ledger by verdict.

:func:`plot_head_lenses` draws what :func:`attention_course.lenses.insight.head_lenses`
computed; :func:`plot_verdicts` counts the claims it is given (the chapter passes
:data:`attention_course.course.claims.CLAIMS`: figures do not import the course layer).
Each helper returns the :class:`matplotlib.figure.Figure` and changes no global state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ..lenses.insight import HeadLenses
from .graphs import plot_attention_graph
from .mechanics import plot_attention

__all__ = ["plot_head_lenses", "plot_verdicts"]


def plot_head_lenses(lens: HeadLenses, title: str = "") -> Figure:
    """Draw the four views of :func:`head_lenses` in one 2 x 2 figure.

    Returns the Figure; nothing global is changed.

    Examples
    --------
    >>> from attention_course.lenses.insight import head_lenses
    >>> rng = np.random.default_rng(0)
    >>> maps = rng.dirichlet(np.ones(5), size=(1, 4, 5))
    >>> fig = plot_head_lenses(head_lenses(maps, list("abcde"), rng.normal(size=(8, 8)), 0, 1, k=2))
    >>> len(fig.axes) >= 4
    True
    """
    fig = plt.figure(figsize=(16, 10.5), layout="constrained")
    axes = fig.subplot_mosaic([["kernel", "rank", "subspace"], ["graph", "graph", "notes"]],
                              height_ratios=[1.0, 0.9])
    name = f"layer {lens.layer + 1}, head {lens.head + 1}"
    tokens = list(lens.tokens)

    plot_attention(lens.weights, tokens, tokens, ax=axes["kernel"],
                   title="Kernel smoothing: row $i$ = query $i$'s weights on the values")

    ax = axes["rank"]
    idx = np.arange(1, lens.singular_values.shape[1] + 1)
    for i, s in enumerate(lens.singular_values):
        if i != lens.head:
            ax.semilogy(idx, s, color="0.75", lw=1, label="other heads of the layer" if i == 0 or
                        (lens.head == 0 and i == 1) else None)
    ax.semilogy(idx, lens.singular_values[lens.head], "o-", color="tab:red", lw=2, ms=4, label=name)
    ax.axvline(lens.effective_rank[lens.head], color="tab:red", ls="--", lw=1)
    ax.text(lens.effective_rank[lens.head], 1.3, f" effective rank {lens.effective_rank[lens.head]:.1f}",
            color="tab:red", fontsize=9, va="bottom")
    ax.set(xlabel="index $i$", ylabel=r"$\sigma_i / \sigma_1$", ylim=(1e-4, 3),
           title=f"Low rank: singular values of $A$ (n = {len(idx)})")
    ax.legend(frameon=False, loc="lower left")
    ax.grid(alpha=0.3, which="both")

    ax = axes["subspace"]
    heads = np.arange(1, len(lens.angles) + 1)
    colors = ["tab:red" if i == lens.head else "tab:blue" for i in range(len(heads))]
    ax.bar(heads, lens.angles, color=colors)
    ax.axhline(lens.random_angle, color="k", ls="--", lw=1,
               label=f"random subspaces ({lens.random_angle:.1f}°)")
    ax.text(lens.head + 1, 1.5, "itself", rotation=90, ha="center", va="bottom", fontsize=9, color="tab:red")
    ax.set_xticks(heads)
    ax.set(xlabel="head of the same layer", ylabel="smallest principal angle (degrees)", ylim=(0, 90),
           title="Subspaces: angle to each head's query subspace")
    ax.legend(frameon=False, loc="upper right")

    plot_attention_graph(lens.weights, tokens, threshold=lens.threshold, ax=axes["graph"],
                         title=f"Message passing: the {lens.n_edges} edges with weight > {lens.threshold}")
    ax = axes["notes"]
    ax.axis("off")
    others = np.delete(lens.angles, lens.head)
    erank = lens.effective_rank[lens.head]
    notes = [
        ("kernel", f"largest weight {lens.weights.max():.2f}; rows sum to 1 within "
                   f"{np.abs(lens.weights.sum(axis=1) - 1).max():.0e}"),
        ("low rank", f"effective rank {erank:.1f} of {len(tokens)};\n"
                     f"rank-{lens.k} error {lens.rank_k_error:.1%}"),
        ("subspaces", f"median angle {np.median(others):.1f}°\n(random: {lens.random_angle:.1f}°)"),
        ("graph", f"{lens.n_edges} of {lens.weights.size} edges above {lens.threshold};\n"
                  f"{int((lens.weights == 0).sum())} weights exactly zero"),
    ]
    for row, (lens_name, text) in enumerate(notes):
        y = 0.92 - 0.24 * row
        ax.text(0.0, y, lens_name, fontsize=11, fontweight="bold", va="top", transform=ax.transAxes)
        ax.text(0.0, y - 0.07, text, fontsize=10, va="top", transform=ax.transAxes)
    ax.set_title(f"What each lens reads off {name}")
    if title:
        fig.suptitle(title, fontsize=14)
    return fig


def plot_verdicts(claims: Iterable, sections: Mapping[int, str], verdicts: Sequence[str],
                  colours: Sequence[str] = ("tab:green", "tab:orange", "tab:red"),
                  title: str = "The essay's claims, by section and verdict") -> Figure:
    """Stacked bars: how many claims of each essay section got each verdict.

    Parameters
    ----------
    claims : iterable of objects with ``.section`` (a key of ``sections``) and ``.verdict``
        E.g. :data:`attention_course.course.claims.CLAIMS`.
    sections : mapping section number -> name, in the order of the bars (top to bottom)
    verdicts : the verdicts, in the order they are stacked
    colours : one colour per verdict, in the same order

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
    fig, ax = plt.subplots(figsize=(8.5, 4.2), layout="constrained")
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
    ax.legend(title="verdict", loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    return fig
