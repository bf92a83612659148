r"""Learning the kernel of a Nadaraya-Watson smoother, its width or a whole metric, by full-batch Adam (float64).

.. math::

    L(\theta) = \frac1n \sum_{i=1}^n \bigl(\hat f_\theta(x_i) - y_i\bigr)^2, \qquad
    \hat f_\theta(x_i) = \sum_{j} \alpha_{ij}(\theta)\, y_j ,

with :math:`\alpha_{ii} = 0` under leave-one-out; without it the learned width drifts towards
interpolation. :func:`fit_bandwidth` learns :math:`w = 1/h` of :math:`\exp(-((q-k)w)^2/2)`,
:func:`fit_metric` ``W`` (d, d) of :math:`\exp(-\lVert W(q-k)\rVert^2/2)`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ...core._backend import Array, ShapeError, to_numpy
from ...core.attention import softmax
from .smoothing import _as_points, log_kernel, nadaraya_watson, sparse_sine_data

__all__ = ["fit_bandwidth", "fit_bandwidths", "good_range_limit", "learned_width_flip", "fit_metric"]


def _adam(loss_fn: Any, init: torch.Tensor, steps: int, lr: float, betas: tuple = (0.9, 0.999), eps: float = 1e-8
         ) -> tuple[list, np.ndarray]:
    """Full-batch Adam on one tensor, written out; returns (parameters after each step, losses).

    torch.optim.Adam's update with its defaults (a test checks it); torch.optim's first use costs
    seconds. ``loss_fn`` may return one loss per independent problem: Adam is elementwise.
    """
    p = init.detach().clone().requires_grad_(True)
    m, v = torch.zeros_like(p), torch.zeros_like(p)
    params, losses = [p.detach().clone()], []
    for t in range(1, steps + 1):
        loss = loss_fn(p)  # a scalar, or one loss per independent problem (each depends on its own entries)
        (g,) = torch.autograd.grad(loss.sum(), p)
        m = betas[0] * m + (1 - betas[0]) * g
        v = betas[1] * v + (1 - betas[1]) * g**2
        m_hat, v_hat = m / (1 - betas[0] ** t), v / (1 - betas[1] ** t)
        with torch.no_grad():
            p -= lr * m_hat / (v_hat.sqrt() + eps)
        params.append(p.detach().clone())
        losses.append(loss.detach().numpy().copy())
    return params, np.array(losses)  # (steps,) or (steps, problems)


@dataclass(frozen=True)
class BandwidthFit:
    r"""A learned scale ``w`` of the Gaussian kernel :math:`\exp(-((q-k)w)^2/2)` (bandwidth ``1/w``)."""

    w: float
    w_history: np.ndarray  # (steps + 1,), w before each step and after the last
    loss_history: np.ndarray  # (steps,), training loss at each step


def fit_bandwidth(x: Array, y: Array, leave_one_out: bool = True, steps: int = 200, lr: float = 0.05, w_init: float = 1.0,
                  self_weight: float | None = None) -> BandwidthFit:
    r"""Learn ``w`` in :math:`\kappa(q, k) = \exp(-((q-k)w)^2/2)` by full-batch Adam on the training MSE.

    ``self_weight`` :math:`\alpha \in [0, 1]` replaces ``leave_one_out`` (0) / self-included (1):

    .. math::

        \hat y_i = \frac{\alpha\, y_i + \sum_{j \ne i} \kappa_w(x_i, x_j)\, y_j}
                        {\alpha + \sum_{j \ne i} \kappa_w(x_i, x_j)}

    Parameters
    ----------
    x : array, shape (n,) or (n, d); (n,) with ``self_weight``
    y : array, shape (n,)

    Examples
    --------
    >>> from attention_course.chapters.kernels.smoothing import sine_data
    >>> data = sine_data(seed=0)
    >>> fit = fit_bandwidth(data.x_train, data.y_train, steps=5)
    >>> fit.w_history.shape, fit.loss_history.shape
    ((6,), (5,))
    >>> fit_bandwidth(data.x_train, data.y_train, steps=5, self_weight=0.5).loss_history.shape
    (5,)
    """
    if self_weight is None:
        return fit_bandwidths([x], [y], leave_one_out, steps, lr, w_init)[0]
    x_t = torch.as_tensor(to_numpy(x), dtype=torch.float64)  # (n,)
    y_t = torch.as_tensor(to_numpy(y), dtype=torch.float64)  # (n,)
    loss_fn = _self_weight_loss(x_t, y_t, self_weight)
    w_init_t = torch.tensor(float(w_init), dtype=torch.float64)
    params, losses = _adam(loss_fn, w_init_t, steps, lr)
    ws = np.abs(np.array([p.item() for p in params]))  # the kernel depends on w only through w^2
    return BandwidthFit(float(ws[-1]), ws, losses)


def fit_bandwidths(xs: Sequence[Array], ys: Sequence[Array], leave_one_out: bool = True, steps: int = 200, lr: float = 0.05,
                   w_init: float = 1.0) -> list[BandwidthFit]:
    r""":func:`fit_bandwidth` on B data sets at once, one :math:`w_b` each: Adam on :math:`\sum_b L_b` gives each the same fit, faster.

    Parameters
    ----------
    xs : sequence of B arrays, each shape (n,) or (n, d), all the same shape
    ys : sequence of B arrays, each shape (n,)

    Returns
    -------
    list of B :class:`BandwidthFit`

    Examples
    --------
    >>> from attention_course.chapters.kernels.smoothing import sine_data
    >>> sets = [sine_data(seed=s) for s in (0, 1, 2)]
    >>> fits = fit_bandwidths([d.x_train for d in sets], [d.y_train for d in sets], steps=5)
    >>> len(fits), fits[2].w_history.shape
    (3, (6,))
    """
    if len(xs) == 0 or len(xs) != len(ys):
        raise ValueError(f"got {len(xs)} inputs xs and {len(ys)} targets ys; expected the same number, at least one")
    x_shapes, y_shapes = {np.shape(x) for x in xs}, {np.shape(y) for y in ys}
    if len(x_shapes) != 1 or y_shapes != {(np.shape(xs[0])[0],)}:
        raise ShapeError(f"xs have shapes {sorted(x_shapes)} and ys {sorted(y_shapes)}; "
                         f"expected every x of one shape (n,) or (n, d) and every y of shape (n,)")
    x_t = torch.stack([torch.as_tensor(to_numpy(_as_points(f"xs[{b}]", x)), dtype=torch.float64)
                       for b, x in enumerate(xs)])  # (B, n, d)
    y_t = torch.stack([torch.as_tensor(to_numpy(y), dtype=torch.float64) for y in ys])  # (B, n)
    n = x_t.shape[1]
    mask = ~torch.eye(n, dtype=torch.bool) if leave_one_out else None  # (n, n), True = may use

    def loss_fn(w: torch.Tensor) -> torch.Tensor:  # w: (B,)
        z = x_t * w[:, None, None]  # (B, n, d): the points scaled by each set's w
        sq = ((z[:, :, None, :] - z[:, None, :, :]) ** 2).sum(-1)  # $\lVert (x_i - x_j) w \rVert^2$   (B, n, n)
        weights = softmax(-sq / 2, axis=-1, mask=mask)  # (B, n, n), normalised over j (j != i under leave-one-out)
        pred = (weights * y_t[:, None, :]).sum(-1)  # (B, n)
        return ((pred - y_t) ** 2).mean(-1)  # (B,): one training MSE per set

    w0 = torch.full((len(xs),), float(w_init), dtype=torch.float64)  # (B,)
    params, losses = _adam(loss_fn, w0, steps, lr)  # losses: (steps, B)
    ws = np.abs(torch.stack(params).numpy())  # (steps + 1, B); the kernel depends on w only through w^2
    return [BandwidthFit(float(ws[-1, b]), ws[:, b].copy(), losses[:, b].copy()) for b in range(len(xs))]


def _self_weight_loss(x_t: torch.Tensor, y_t: torch.Tensor, self_weight: float) -> Any:
    """The training MSE of :func:`fit_bandwidth` with each point's own kernel weight times ``self_weight``."""
    if not 0 <= self_weight <= 1:
        raise ValueError(f"self_weight={self_weight!r}; expected a number in [0, 1] "
                         "(0 = leave-one-out, 1 = self-included)")
    if x_t.ndim != 1 or x_t.shape != y_t.shape:
        raise ValueError(f"x has shape {tuple(x_t.shape)} and y {tuple(y_t.shape)}; expected both (n,)")
    eye = torch.eye(len(x_t), dtype=torch.bool)  # (n, n)
    log_a = float(np.log(self_weight)) if self_weight > 0 else 0.0  # alpha = 0 is the mask below
    bias = eye.to(torch.float64) * log_a  # (n, n), log alpha on i = j (float64: no float32 rounding of log alpha)
    mask = ~eye if self_weight == 0 else None  # alpha = 0: the diagonal left out, True = may attend

    def loss_fn(w: torch.Tensor) -> torch.Tensor:
        logits = log_kernel(x_t * w, x_t * w) + bias  # $\log\kappa_w(x_i, x_j) + \log\alpha[i=j]$   (n, n)
        pred = softmax(logits, axis=-1, mask=mask) @ y_t  # (n,), softmax over the keys j
        return ((pred - y_t) ** 2).mean()

    return loss_fn


def good_range_limit(sweep: dict) -> float:
    r"""The largest test MSE still a good width: :math:`\text{MSE}_\text{best}\cdot\operatorname{median}_s r_s`, :math:`r_s` = ``sweep["draw_ratio"]``.

    Examples
    --------
    >>> round(good_range_limit({"mse_best": 0.2, "draw_ratio": [1.01, 1.10, 1.05]}), 6)
    0.21
    """
    if not sweep["draw_ratio"]:
        raise ValueError("the sweep has no further draws: the good range needs at least one draw_ratio")
    return float(sweep["mse_best"] * np.median(sweep["draw_ratio"]))


def learned_width_flip(sweep: dict) -> int | None:
    """Index of the first self-weight whose ``sweep["test_mse"]`` exceeds :func:`good_range_limit` (chapter 2's flag).

    Examples
    --------
    >>> learned_width_flip({"mse_best": 0.2, "draw_ratio": [1.1], "test_mse": [0.21, 0.215, 0.23, 0.3]})
    2
    """
    limit = good_range_limit(sweep)
    over = [i for i, m in enumerate(sweep["test_mse"]) if m > limit]
    return over[0] if over else None


@dataclass(frozen=True)
class MetricFit:
    r"""A learned metric ``W`` of the kernel :math:`\exp(-\lVert W(q-k)\rVert^2/2)`."""

    W: np.ndarray  # (d, d)
    loss_history: np.ndarray  # (steps,)


def fit_metric(x: Array, y: Array, steps: int = 300, lr: float = 0.1, leave_one_out: bool = True) -> MetricFit:
    r"""Learn ``W`` in :math:`\kappa(q, k) = \exp(-\lVert W(q-k)\rVert^2/2)` by full-batch Adam, from the identity.

    Gaussian Nadaraya-Watson on :math:`Wx`; predict with ``nadaraya_watson(x_query @ W.T, x_train @ W.T, y_train)``.

    Parameters
    ----------
    x : array, shape (n, d)
    y : array, shape (n,)

    Examples
    --------
    >>> from attention_course.chapters.kernels.smoothing import sparse_sine_data
    >>> data = sparse_sine_data(n=50, seed=0)
    >>> fit = fit_metric(data.x_train, data.y_train, steps=3)
    >>> fit.W.shape, fit.loss_history.shape
    ((5, 5), (3,))
    """
    x_t = _as_points("x", torch.as_tensor(to_numpy(x), dtype=torch.float64))  # (n, d)
    y_t = torch.as_tensor(to_numpy(y), dtype=torch.float64)  # (n,)

    def loss_fn(W: torch.Tensor) -> torch.Tensor:
        z = x_t @ W.T  # $z = Wx$   (n, d)
        pred, _ = nadaraya_watson(z, z, y_t, leave_one_out=leave_one_out)  # (n,)
        return ((pred - y_t) ** 2).mean()

    params, losses = _adam(loss_fn, torch.eye(x_t.shape[1], dtype=torch.float64), steps, lr)  # W_0 = I
    return MetricFit(params[-1].numpy(), losses)
