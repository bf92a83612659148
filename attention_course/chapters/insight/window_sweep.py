r"""Chapter 7's window exercise: train the copy at several gaps with the learner's window mask, and plot.

A window of :math:`w` lets query position :math:`t` read key position :math:`s` when
:math:`0 \le t - s < w`: itself and the :math:`w - 1` positions before it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Optional

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ...exercises import evaluate
from ...figures.style import book_figure
from .ablations import window_copy_accuracy

__all__ = ["window_copy_sweep"]

#: The sequence length of the copy task that :func:`window_copy_sweep` trains on.
LENGTH = 16


def window_copy_sweep(mask_fn: Callable, gaps: Iterable[int] = (1, 2, 3),
                      windows: Iterable[int] = range(1, 7)) -> Optional[Figure]:
    r"""Train softmax attention on the copy at each gap with each window ``mask_fn`` builds, and plot.

    First ``mask_fn`` goes through the ``window-mask`` exercise's check. If it fails, the check's
    message is printed and nothing is trained (returns None). Once it passes, ``mask_fn`` builds the
    window's mask, :math:`0 \le t - s < w`, and each (gap, window) and each gap's full attention is
    trained once with that mask (:func:`~attention_course.chapters.insight.ablations.window_copy_accuracy`,
    a fraction of a second each) and the held-out accuracies are plotted.

    Parameters
    ----------
    mask_fn : callable (T, w) -> (T, T) boolean array, True where query t may read key s
    gaps : the copy's gaps g (the answer sits g positions back)
    windows : the windows w to train

    Returns
    -------
    Figure or None

    Examples
    --------
    >>> window_copy_sweep(lambda T, w: np.ones((T, T), dtype=bool), gaps=(1,), windows=(2,))  # doctest: +ELLIPSIS
    Not trained: your mask does not pass check("window-mask", ...) yet. your window also reads positions after the query...
    """
    result = evaluate("window-mask", mask_fn)  # the exercise's own check: it never raises
    if not result.passed:
        print(f'Not trained: your mask does not pass check("window-mask", ...) yet. {result.message}')
        return None
    gaps, windows = list(gaps), list(windows)
    accuracies = {g: {w: window_copy_accuracy(w, gap=g, length=LENGTH) for w in (None, *windows)} for g in gaps}
    return plot_window_sweep(accuracies)


@book_figure
def plot_window_sweep(accuracies: Mapping[int, Mapping[Optional[int], float]]) -> Figure:
    """Held-out accuracy of the copy against the window, one line per gap; full attention (key None) as
    one dashed reference line at its lowest accuracy over the gaps (one line per gap drew the same line
    on top of itself): every gap's full attention copies at least that well.

    Examples
    --------
    >>> fig = plot_window_sweep({1: {None: 1.0, 1: 0.02, 2: 1.0}, 2: {None: 1.0, 1: 0.02, 2: 0.03}})
    >>> [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    ['gap 1', 'gap 2', 'full attention (its worst gap)']
    >>> sum(ln.get_linestyle() == "--" for ln in fig.axes[0].get_lines())
    1
    """
    fig, ax = plt.subplots(figsize=(6.4, 3.2), layout="constrained")
    for i, (gap, acc) in enumerate(accuracies.items()):
        ws = sorted(w for w in acc if w is not None)
        ax.plot(ws, [acc[w] for w in ws], "o-", ms=4, label=f"gap {gap}", zorder=3 - 0.1 * i)
    full = [acc[None] for acc in accuracies.values() if None in acc]
    if full:
        ax.axhline(min(full), color="0.4", ls="--", lw=1, label="full attention (its worst gap)")
    ax.set(xlabel="window w (positions each query may read)", ylabel="held-out accuracy", ylim=(-0.03, 1.05),
           title="The copy at each gap")
    ax.set_xticks(sorted({w for acc in accuracies.values() for w in acc if w is not None}))
    ax.legend(loc="center right")
    return fig
