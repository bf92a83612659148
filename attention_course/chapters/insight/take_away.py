"""The lesson's table of ingredients taken away: the ablation grid with the learned-metric runs beside it.

:func:`take_away_table` merges the three result files into one ``(task, variant) -> Score`` table;
:data:`TAKE_AWAY_ROWS` and :data:`TAKE_AWAY_TASKS` are what the lesson draws.
"""

from __future__ import annotations

from .ablation_grid import load_ablations
from .converged_comparisons import PARTNER, load_metric, load_partner
from .ingredients import COPY, RECALL, Score, accuracy_table

__all__ = ["take_away_table"]

#: The lesson's rows: (label, variant in :func:`take_away_table`), named by the ingredient taken away.
TAKE_AWAY_ROWS = (
    ("nothing (softmax attention)", "softmax attention"),
    ("input-dependence: fixed $T \\times T$ mixing", "fixed mixing (learned T x T)"),
    ("reach: window of 4", "window 4"),
    ("reach: window of 8", "window 8"),
    ("reach: window of 16", "window 16"),
    ("gradient: argmax", "argmax, no gradient"),
    ("tied $W_Q = W_K$", "tied"),
    ("tied, each token barred from itself", "tied, self masked"),
    ("softmax: linear attention", "linear attention"),
)

#: The lesson's tasks: (label, task).
TAKE_AWAY_TASKS = (("recall, 16 pairs", RECALL), ("copy, 32 tokens", COPY))


def take_away_table() -> dict[tuple[str, str], Score]:
    """Mean, worst and best accuracy over seeds for every ``(task, variant)`` the lesson draws.

    The ablation grid's variants keep their names; a learned-metric variant gets ``", scale learned"``
    appended; partner recall's learned :math:`W_Q, W_K` is filed under ``"softmax attention"``.

    Examples
    --------
    >>> t = take_away_table()
    >>> round(t["previous token", "tied"].mean, 2), round(t["previous token", "W_Q = W_K = I, scale learned"].mean, 2)
    (0.02, 0.99)
    """
    table = accuracy_table(load_ablations()["runs"])
    table.update({(t, f"{v}, scale learned"): s for (t, v), s in accuracy_table(load_metric()["runs"]).items()})
    partner = accuracy_table(load_partner()["runs"])
    for row, variant in (("softmax attention", "learned W_Q, W_K"), ("tied W_Q = W_K, scale learned", "tied W_Q = W_K"),
                         ("W_Q = W_K = I, scale learned", "W_Q = W_K = I")):
        table[PARTNER, row] = partner[PARTNER, variant]
    return table
