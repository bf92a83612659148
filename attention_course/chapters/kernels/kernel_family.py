r"""From the Gaussian kernel to attention's dot product: one learned kernel family, one knob :math:`t` (chapter 2).

.. math::

    s_t(q, x_j) = (Wq)\cdot(Wx_j) - \tfrac{t}{2}\lVert Wx_j\rVert^2, \qquad
    \hat f(q) = \sum_j \operatorname{softmax}_j\bigl(s_t(q, x_j)\bigr)\, y_j

:math:`t = 1` is the Gaussian kernel of the metric :math:`W`, :math:`t = 0` the plain dot product, which
no :math:`W` makes local. :func:`family_sweep` applies the ``learned-metric`` rule at each :math:`t`;
it is stored as :data:`KERNEL_FAMILY_DATA` (about a minute)::

    python -c "from attention_course.chapters.kernels.kernel_family import write_family_sweep; write_family_sweep()"
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from ...core._backend import Array, to_numpy
from ...core.attention import softmax
from ...models.experiments import read_json, write_json
from ...models.records import DATA_DIR
from .learning import _adam
from .metric_comparison import _points, coordinate_weights, dot_attention_predict, fit_dot_attention, tuned_isotropic_sigma
from .smoothing import mse, nadaraya_watson, sparse_sine_data

__all__ = ["write_family_sweep", "load_family_sweep"]

#: Where :func:`write_family_sweep` stores the slider's data.
KERNEL_FAMILY_DATA = DATA_DIR / "slider_kernel_family.json"
#: The key-norm penalties t of the slider, from the Gaussian kernel (1) to the dot product (0).
PENALTIES = tuple(round(1 - 0.1 * i, 1) for i in range(11))


def family_scores(zq: torch.Tensor, zk: torch.Tensor, t: float) -> torch.Tensor:
    r"""Scores :math:`z_q\cdot z_j - \tfrac t2\lVert z_j\rVert^2` of projected queries (T, d) and keys (S, d); (T, S).

    Examples
    --------
    >>> z = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    >>> family_scores(z[:1], z, 1.0).tolist()   # -||z_j||^2 / 2 from the origin: the Gaussian's exponent
    [[0.0, -1.0]]
    """
    return zq @ zk.T - 0.5 * t * (zk**2).sum(-1)  # (T, S)


def fit_family(x: Array, y: Array, t: float, steps: int = 300, lr: float = 0.1) -> np.ndarray:
    r"""Learn ``W`` (d, d) of the kernel :math:`s_t` by full-batch Adam on the leave-one-out MSE, from the identity.

    .. math:: \min_W \frac1n\sum_i \Bigl(\sum_{j\ne i}\operatorname{softmax}_j\, s_t(x_i, x_j)\, y_j - y_i\Bigr)^2

    Examples
    --------
    >>> data = sparse_sine_data(n=30, seed=0)
    >>> fit_family(data.x_train, data.y_train, 0.5, steps=3).shape
    (5, 5)
    """
    if not 0 <= t <= 1:
        raise ValueError(f"t={t}; expected a key-norm penalty in [0, 1]")
    x_t, y_t = _points(x, y)
    off_diag = ~torch.eye(x_t.shape[0], dtype=torch.bool)  # (n, n): point i may not see itself

    def loss_fn(W: torch.Tensor) -> torch.Tensor:
        z = x_t @ W.T  # $z = Wx$   (n, d)
        w = softmax(family_scores(z, z, t), axis=-1, mask=off_diag)  # (n, n), zero diagonal
        return ((w @ y_t - y_t) ** 2).mean()

    params, _ = _adam(loss_fn, torch.eye(x_t.shape[1], dtype=torch.float64), steps, lr)
    return params[-1].numpy()


def family_predict(x_query: Array, x_train: Array, y_train: Array, W: Array, t: float) -> np.ndarray:
    """Predictions (T,) of the kernel :math:`s_t` with metric ``W`` (d, d), every training point visible.

    Examples
    --------
    >>> family_predict(np.zeros((1, 2)), np.eye(2), np.array([1.0, 3.0]), np.eye(2), 1.0)   # equidistant: the mean
    array([2.])
    """
    x_t, y_t = _points(x_train, y_train)
    Wt = torch.as_tensor(np.asarray(to_numpy(W), dtype=np.float64))  # (d, d)
    zq = torch.as_tensor(np.asarray(to_numpy(x_query), dtype=np.float64)) @ Wt.T  # (T, d)
    return (softmax(family_scores(zq, x_t @ Wt.T, t), axis=-1) @ y_t).numpy()


def passes_rule(improvement: Sequence[float], dominance: Sequence[float], factor: float = 3.0,
                need: int = 4) -> bool:
    """The ``learned-metric`` rule for one kernel: both ratios at least ``factor`` in at least ``need`` draws.

    Examples
    --------
    >>> passes_rule([90, 50, 2, 80, 70], [12, 30, 9, 4, 20]), passes_rule([1.0] * 5, [9.0] * 5)
    (True, False)
    """
    ok = (np.asarray(improvement) >= factor) & (np.asarray(dominance) >= factor)
    return int(ok.sum()) >= need


def family_sweep(penalties: Sequence[float] = PENALTIES, seeds: Sequence[int] = range(5), n: int = 200,
                 steps: int = 300, lr: float = 0.1, dot_steps: int = 1000, grid: int = 41) -> dict:
    """At each penalty ``t`` and draw: the learned kernel's test MSE, the tuned width's, and :math:`x_0`'s dominance.

    Data as the ``learned-metric`` run. Draw 0's predictions on ``grid`` queries along :math:`x_0` are kept,
    also for attention's own :math:`W_Q, W_K`.

    Returns
    -------
    dict
        ``t`` (P,); ``mse`` and ``dominance`` (P, seeds); ``mse_tuned`` (seeds,); ``passes`` (P,);
        ``x0`` (grid,), ``curve`` (P, grid), ``dot_curve`` (grid,); the settings.

    Examples
    --------
    >>> s = family_sweep([1.0, 0.0], seeds=[0], n=30, steps=2, dot_steps=2, grid=5)
    >>> len(s["mse"]), len(s["curve"][0])
    (2, 5)
    """
    x0 = np.linspace(-2, 2, grid)  # (grid,)
    q = np.zeros((grid, 5))
    q[:, 0] = x0  # (grid, 5): queries along x0
    out: dict = {"t": [float(t) for t in penalties], "mse": [], "dominance": [], "curve": []}
    data = [sparse_sine_data(n=n, d=5, n_test=1000, noise=0.1, seed=s) for s in seeds]
    out["mse_tuned"] = [mse(nadaraya_watson(d.x_test, d.x_train, d.y_train,
                                            bandwidth=tuned_isotropic_sigma(d.x_train, d.y_train))[0], d.y_test)
                        for d in data]
    for t in penalties:
        Ws = [fit_family(d.x_train, d.y_train, t, steps=steps, lr=lr) for d in data]  # each (5, 5)
        out["mse"].append([mse(family_predict(d.x_test, d.x_train, d.y_train, W, t), d.y_test) for d, W in zip(data, Ws)])
        out["dominance"].append([float(c[0] / c[1:].max()) for c in (coordinate_weights(W) for W in Ws)])
        out["curve"].append(family_predict(q, data[0].x_train, data[0].y_train, Ws[0], t).tolist())
    improvement = np.array(out["mse_tuned"])[None, :] / np.array(out["mse"])  # (P, seeds)
    out["passes"] = [passes_rule(i, d) for i, d in zip(improvement, out["dominance"])]
    dot = fit_dot_attention(data[0].x_train, data[0].y_train, steps=dot_steps, lr=0.05, seed=int(seeds[0]))
    out.update(x0=x0.tolist(), dot_curve=dot_attention_predict(q, data[0].x_train, data[0].y_train, dot).tolist(),
               seeds=[int(s) for s in seeds], n=n, steps=steps, lr=lr, dot_steps=dot_steps)
    return out


def write_family_sweep(path: Path = KERNEL_FAMILY_DATA) -> dict:
    """Run :func:`family_sweep` with its defaults and store it as JSON at ``path``."""
    torch.set_num_threads(1)
    sweep = family_sweep()
    write_json(sweep, path)
    return sweep


def load_family_sweep(path: Path = KERNEL_FAMILY_DATA) -> dict:
    """The stored :func:`family_sweep`.

    Examples
    --------
    >>> s = load_family_sweep()
    >>> s["t"][0], s["t"][-1], len(s["seeds"])
    (1.0, 0.0, 5)
    """
    return read_json(path)
