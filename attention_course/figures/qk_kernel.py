r"""Figure for chapter 2: is a trained model's attention a smoothing kernel in its own query-key space?

Draws the per-head measures of :func:`attention_course.lenses.qk_kernel.locality_by_head`
for the book's column (:func:`~attention_course.figures.style.book_figure`).
"""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ..core._backend import Array, ShapeError, shape_str, to_numpy
from ..lenses.qk_kernel import MEASURES
from .style import book_figure

__all__ = ["plot_qk_locality"]

_ATTENTION, _BLIND, _NORM = "tab:red", "0.55", "tab:orange"


def _measures(loc: Mapping[str, Array]) -> dict[str, np.ndarray]:
    missing = [m for m in MEASURES if m not in loc]
    if missing:
        raise KeyError(f"loc lacks {missing}; expected the measures of locality_by_head: {list(MEASURES)}")
    arrays = {m: np.asarray(to_numpy(loc[m]), dtype=float) for m in MEASURES}
    shape = arrays["rank_corr"].shape
    for m, a in arrays.items():
        if a.ndim < 2 or a.shape != shape:
            raise ShapeError(f"loc[{m!r}] has shape {shape_str(a)}; expected (sentences, heads...) = "
                             f"{shape_str(np.empty(shape))} like loc['rank_corr'], with at least 2 axes")
    return arrays


@book_figure
def plot_qk_locality(loc: Mapping[str, Array]) -> Figure:
    r"""Four views of locality over a model's heads, from :func:`~attention_course.lenses.qk_kernel.locality_by_head`.

    Each head's measure is averaged over the sentences first. Top left: histogram over
    heads of the rank correlation of weight with nearness :math:`-\lVert q - k\rVert`, for
    the attention weights and for the query-blind weight (random scores give 0).
    Top right: how often the nearest key gets the largest weight, with the chance
    level :math:`1/S`. Bottom left: the share of the within-row logit variance
    explained by the distance term and by the key-norm term. Bottom right: per
    sentence, the median over heads of the first two measures.

    Parameters
    ----------
    loc : mapping
        The measures of :data:`~attention_course.lenses.qk_kernel.MEASURES`, each an array
        of shape (sentences, ...) with the heads on the other axes, e.g. (20, 6, 12).

    Examples
    --------
    >>> from attention_course.lenses.qk_kernel import locality_by_head
    >>> rng = np.random.default_rng(0)
    >>> loc = locality_by_head([(rng.normal(size=(2, 3, 8, 4)), rng.normal(size=(2, 3, 8, 4))) for _ in range(3)])
    >>> fig = plot_qk_locality(loc)
    >>> [ax.get_title() for ax in fig.axes][:2]
    ['Does weight fall with distance?', 'Is the nearest key the winner?']
    >>> plt.close(fig)
    """
    a = _measures(loc)
    n_sent = a["rank_corr"].shape[0]
    head = {m: v.reshape(n_sent, -1).mean(0) for m, v in a.items()}  # (heads,) mean over sentences
    n_heads = head["rank_corr"].size
    fig, axes = plt.subplots(2, 2, figsize=(7, 6.2), layout="constrained")
    (ax_rc, ax_near), (ax_share, ax_sent) = axes
    bins = np.linspace(-0.4, 1.0, 29)  # (29,) edges 0.05 apart
    ax_rc.hist(head["blind_rank_corr"], bins=bins, color=_BLIND, alpha=0.7, label="query-blind weight")
    ax_rc.hist(head["rank_corr"], bins=bins, color=_ATTENTION, alpha=0.7, label="attention")
    ax_rc.axvline(0, color="k", ls=":", lw=1, label="random scores")
    ax_rc.set(xlabel="rank correlation of\nweight with nearness", ylabel="heads",
              title="Does weight fall with distance?")
    ax_rc.set_ylim(0, 1.5 * ax_rc.get_ylim()[1])  # room for the legend
    ax_rc.legend(loc="upper left")
    bins01 = np.linspace(0, 1, 21)  # (21,)
    ax_near.hist(head["blind_nearest_wins"], bins=bins01, color=_BLIND, alpha=0.7, label="query-blind weight")
    ax_near.hist(head["nearest_wins"], bins=bins01, color=_ATTENTION, alpha=0.7, label="attention")
    chance = float(np.median(head["chance"]))
    ax_near.axvline(chance, color="k", ls=":", lw=1, label=f"chance 1/S = {chance:.2f}")
    ax_near.set(xlabel="share of queries whose\nnearest key wins", ylabel="heads", title="Is the nearest key the winner?")
    ax_near.set_ylim(0, 1.6 * ax_near.get_ylim()[1])
    ax_near.legend(loc="upper center")
    ax_share.hist(head["distance_share"], bins=bins01, color=_ATTENTION, alpha=0.7,
                  label=r"distance, $-\|q-k\|^2/2\sqrt{d}$")
    ax_share.hist(head["norm_share"], bins=bins01, color=_NORM, alpha=0.7, label=r"key norm, $\|k\|^2/2\sqrt{d}$")
    ax_share.set(xlabel="share of a row's logit\nvariance explained", ylabel="heads", title="What the scores follow")
    ax_share.set_ylim(0, 1.45 * ax_share.get_ylim()[1])
    ax_share.legend(loc="upper center")
    sent = {m: np.median(v.reshape(n_sent, -1), axis=1) for m, v in a.items()}  # (sentences,) median over heads
    x = np.arange(1, n_sent + 1)
    ax_sent.plot(x, sent["rank_corr"], "o", color=_ATTENTION, label="rank corr.")
    ax_sent.plot(x, sent["nearest_wins"], "s", mfc="none", color=_ATTENTION, label="nearest wins")
    ax_sent.plot(x, sent["blind_rank_corr"], "o", color=_BLIND, label="query-blind")
    ax_sent.plot(x, sent["chance"], "k:", lw=1, label="chance")
    ax_sent.set(xlabel="sentence", ylabel=f"median over {n_heads} heads", ylim=(0, 1.05),
                title="The same in every sentence")
    ax_sent.legend(loc="lower center", ncols=2, columnspacing=1.0)
    return fig
