"""Figures for chapter 10: the key/value cache's memory, and the Shakespeare run."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle
import numpy as np
from matplotlib.figure import Figure

from ...figures.style import book_figure
from ...models.smollm2 import DecoderConfig

__all__ = ["cache_bytes", "plot_cache_diagram", "plot_cache_memory", "plot_shakespeare"]

_OURS, _EST, _MHA = "#0072B2", "#444444", "#CC79A7"


def cache_bytes(config: DecoderConfig, tokens: int, bytes_per_value: int = 4, kv_heads=None) -> int:
    """Bytes of a key/value cache: ``2 x layers x kv_heads x d_head x tokens x bytes_per_value``.

    Examples
    --------
    >>> cache_bytes(DecoderConfig(), 2048) / 1e6                     # SmolLM2, float32
    94.37184
    >>> cache_bytes(DecoderConfig(), 2048, kv_heads=9) / 1e6         # one key/value head per query head
    283.11552
    """
    heads = config.n_kv_heads if kv_heads is None else kv_heads
    return 2 * config.n_layers * heads * config.d_head * tokens * bytes_per_value


@book_figure
def plot_cache_diagram(cached: int = 5, layers: tuple = ("layer 0", "layer 1")) -> Figure:
    """The key/value cache as a picture: per layer, a row of keys and a row of values, one column per position.

    The ``cached`` positions are grey; the new token adds one orange column to every row.

    Examples
    --------
    >>> fig = plot_cache_diagram()
    >>> [t.get_text() for t in fig.axes[0].texts][:2]
    ['keys', 'values']
    """
    fig, ax = plt.subplots(figsize=(6.6, 3.3), layout="constrained")
    new = "#E69F00"
    row_y = []
    for n, name in enumerate(layers):
        y0 = (len(layers) - 1 - n) * 2.9
        for r, what in enumerate(("keys", "values")):
            y = y0 + (1 - r) * 1.05
            row_y.append(y)
            ax.text(-0.25, y + 0.4, what, ha="right", va="center", fontsize=10.5)
            for s in range(cached + 1):
                ax.add_patch(Rectangle((s, y), 0.85, 0.8, facecolor=new if s == cached else "#D9D9D9",
                                       edgecolor="#444444", lw=0.8))
        ax.text(-2.0, y0 + 0.93, name, ha="right", va="center", fontsize=11, fontweight="bold")
        # the new token's query in this layer reads every key of the layer, then mixes every value
        qx, qy = cached + 2.3, y0 + 0.85
        ax.add_patch(Rectangle((qx, qy), 0.85, 0.8, facecolor="white", edgecolor=new, lw=1.6))
        ax.text(qx + 0.42, qy + 0.4, "q", ha="center", va="center", fontsize=11, color="#8a5a00")
        for target_y in (y0 + 1.45, y0 + 0.4):  # the keys row, then the values row
            ax.annotate("", xy=(cached + 0.95, target_y), xytext=(qx - 0.05, qy + 0.4),
                        arrowprops=dict(arrowstyle="->", color=new, lw=1.4))
        ax.text(qx + 1.05, qy + 0.4, "the new query\nreads all keys,\nmixes all values", ha="left", va="center",
                fontsize=10)
    for s in range(cached):
        ax.text(s + 0.42, -0.35, str(s), ha="center", va="top", fontsize=10)
    ax.text(cached + 0.42, -0.35, "S", ha="center", va="top", fontsize=10, color="#8a5a00", fontweight="bold")
    ax.text((cached - 1) / 2 + 0.42, -1.0, "kept from earlier steps", ha="center", va="top", fontsize=10)
    ax.text(cached + 0.42, -1.0, "new", ha="center", va="top", fontsize=10, color="#8a5a00")
    top = max(row_y) + 0.8
    ax.text(-2.0, top + 0.45, "... and so on for all L layers, and for each key/value head", ha="left",
            va="bottom", fontsize=10, color="#444444")
    ax.set(xlim=(-3.6, cached + 6.4), ylim=(-1.7, top + 1.0), aspect="equal")
    ax.axis("off")
    return fig


@book_figure
def plot_cache_memory(config: DecoderConfig, max_tokens: int = 2048) -> Figure:
    """The cache's size against the number of tokens, with SmolLM2's grouped key/value heads and with one per query head."""
    t = np.arange(0, max_tokens + 1, 64)
    fig, ax = plt.subplots(figsize=(6.0, 3.0), layout="constrained")
    for heads, color, name in ((config.n_heads, _MHA, f"{config.n_heads} key/value heads (one per query head)"),
                               (config.n_kv_heads, _OURS, f"{config.n_kv_heads} key/value heads (SmolLM2)")):
        mb = np.array([cache_bytes(config, int(n), kv_heads=heads) for n in t]) / 1e6
        ax.plot(t, mb, color=color, lw=2, label=name)
        ax.annotate(f"{mb[-1]:.0f} MB", (t[-1], mb[-1]), xytext=(-4, 6), textcoords="offset points", ha="right",
                    color=color)
    ax.set(xlabel="tokens in the cache", ylabel="cache size (MB, float32)", ylim=(0, None),
           title="The key/value cache grows with every token")
    ax.legend(loc="upper left", fontsize=9.5)
    return fig


@book_figure
def plot_shakespeare(run: dict) -> Figure:
    """Held-out loss (nats per character) against training steps, with the unigram and bigram baselines."""
    fig, ax = plt.subplots(figsize=(6.5, 3.2), layout="constrained")
    ax.plot(run["steps"], run["held_out"], "o-", color=_OURS, ms=4, lw=1.8, label="small GPT, held-out plays")
    for key, style, name in (("unigram", ":", "unigram (character frequencies)"),
                             ("bigram", "--", "bigram (previous character)")):
        ax.axhline(run[key], color=_EST, ls=style, lw=1.3, label=f"{name}: {run[key]:.2f}")
    ax.set(xlabel="training step", ylabel="held-out loss (nats / char)", ylim=(1.0, max(run["held_out"]) + 0.2),
           title="A small GPT learns Shakespeare")
    ax.legend(loc="upper right", fontsize=9.5)
    return fig
