"""How much of its own target may a point see? The learned width at each self-weight (chapter 2).

:func:`self_weight_sweep` learns the kernel width at each self-weight and measures the margin of
"a good width" over further draws; :func:`write_self_weight_sweep` stores it as
:data:`LEARNED_WIDTH_DATA`, which the ``learned-width`` slider (``sliders.learned_width_explorer``) reads::

    python -c "from attention_course.chapters.kernels.self_weight import write_self_weight_sweep; write_self_weight_sweep()"
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ...models.experiments import write_json
from ...models.records import DATA_DIR
from .learning import fit_bandwidth
from .smoothing import mse, mse_by_bandwidth, nadaraya_watson, sine_data

__all__ = ["write_self_weight_sweep"]


LEARNED_WIDTH_DATA = DATA_DIR / "slider_learned_width.json"


#: The self-weights of the chapter-2 slider: 0 (leave-one-out) to 1 (self-included).
ALPHAS = tuple(round(0.1 * i, 1) for i in range(11))


#: The chapter's grid of inverse widths w for the grid-best width (cell of fig-kern-objectives).
W_GRID = np.geomspace(0.3, 60, 121)


_FIT = {"steps": 300, "lr": 0.05, "w_init": 1.0}  # the chapter's fits


# ------------------------------------------------------------------ chapter 2: learned-width
def _test_mse(data, w: float) -> float:
    return mse(nadaraya_watson(data.x_test, data.x_train, data.y_train, bandwidth=1 / w)[0], data.y_test)


def self_weight_sweep(alphas: Sequence[float] = ALPHAS, seed: int = 0, draws: Sequence[int] = range(1, 11),
                      **fit) -> dict:
    """Learned width and its test MSE at each self-weight, the grid-best width, and the further draws' margin.

    On ``sine_data(n=40, noise=1, seed)``, :func:`~attention_course.chapters.kernels.learning.fit_bandwidth`
    at each ``self_weight``; on each of ``draws``, the leave-one-out width's test MSE over the grid-best's.

    Returns
    -------
    dict
        ``alpha``, ``w``, ``test_mse``; ``w_grid``, ``grid_mse``; ``w_best``, ``mse_best``; ``draws``, ``draw_ratio``.

    Examples
    --------
    >>> s = self_weight_sweep([0.0, 1.0], draws=[1], steps=3)
    >>> len(s["w"]), len(s["draw_ratio"]), s["mse_best"] <= min(s["test_mse"])
    (2, 1, True)
    """
    fit = {**_FIT, **fit}
    data = sine_data(n=40, noise=1.0, seed=seed)
    ws = [fit_bandwidth(data.x_train, data.y_train, self_weight=float(a), **fit).w for a in alphas]
    grid_mse = mse_by_bandwidth(data.x_test, data.x_train, data.y_train, data.y_test, W_GRID)  # (121,)
    ratios = []
    for s in draws:
        d_s = sine_data(n=40, noise=1.0, seed=s)
        w_s = fit_bandwidth(d_s.x_train, d_s.y_train, leave_one_out=True, **fit).w
        best_s = float(np.min(mse_by_bandwidth(d_s.x_test, d_s.x_train, d_s.y_train, d_s.y_test, W_GRID)))
        ratios.append(_test_mse(d_s, w_s) / best_s)
    best = int(np.argmin(grid_mse))
    return {"alpha": [float(a) for a in alphas], "w": ws, "test_mse": [_test_mse(data, w) for w in ws],
            "w_grid": W_GRID.tolist(), "grid_mse": np.asarray(grid_mse).tolist(), "w_best": float(W_GRID[best]),
            "mse_best": float(grid_mse[best]), "draws": list(draws), "draw_ratio": ratios, "seed": seed, "fit": fit}


def write_self_weight_sweep(path: Path = LEARNED_WIDTH_DATA) -> dict:
    """Run :func:`self_weight_sweep` with its defaults and store it at ``path`` (a few seconds)."""
    return write_json(self_weight_sweep(), path)
