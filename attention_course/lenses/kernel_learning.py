r"""Learning the kernel of a Nadaraya-Watson smoother: its width, or a whole metric.

Attention learns its similarity; a kernel smoother can too. Both fits below
minimise a training mean squared error by full-batch Adam, in float64:

.. math::

    L(\theta) = \frac1n \sum_{i=1}^n \bigl(\hat f_\theta(x_i) - y_i\bigr)^2, \qquad
    \hat f_\theta(x_i) = \sum_{j} \alpha_{ij}(\theta)\, y_j ,

with :math:`\alpha_{ii} = 0` under **leave-one-out** (point ``i`` is predicted from
the others). Without it each point may copy its own target, the loss keeps falling
as the kernel narrows, and the learned width drifts towards interpolation.

=================  ===============================================  ================
function           kernel :math:`\kappa_\theta(q, k)`                 parameter
=================  ===============================================  ================
``fit_bandwidth``  :math:`\exp(-((q-k)w)^2/2)`                       ``w = 1/h``
``fit_metric``     :math:`\exp(-\lVert W(q-k)\rVert^2/2)`            ``W`` (d, d)
=================  ===============================================  ================

Both take numpy arrays and return numpy results; torch is used for the gradients.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..core._backend import Array, to_numpy
from .kernels import _as_points, mse, nadaraya_watson, sparse_sine_data

__all__ = ["BandwidthFit", "fit_bandwidth", "MetricFit", "fit_metric", "metric_over_draws"]


def _adam(
    loss_fn: Any, init: torch.Tensor, steps: int, lr: float, betas: tuple = (0.9, 0.999), eps: float = 1e-8
) -> tuple[list, np.ndarray]:
    r"""Full-batch Adam on one tensor, written out; returns (parameters after each step, losses).

    The update is torch.optim.Adam's with its defaults (a test checks it), spelled
    out here because torch.optim's first use imports torch._dynamo, which alone
    takes seconds: :math:`m \leftarrow \beta_1 m + (1-\beta_1) g`,
    :math:`v \leftarrow \beta_2 v + (1-\beta_2) g^2`,
    :math:`p \leftarrow p - \eta\, \hat m / (\sqrt{\hat v} + \epsilon)` with bias-corrected
    :math:`\hat m, \hat v`. ``params[0]`` is ``init``; ``losses[t]`` is the loss at ``params[t]``.
    """
    p = init.detach().clone().requires_grad_(True)
    m, v = torch.zeros_like(p), torch.zeros_like(p)
    params, losses = [p.detach().clone()], []
    for t in range(1, steps + 1):
        loss = loss_fn(p)
        (g,) = torch.autograd.grad(loss, p)
        m = betas[0] * m + (1 - betas[0]) * g
        v = betas[1] * v + (1 - betas[1]) * g**2
        m_hat, v_hat = m / (1 - betas[0] ** t), v / (1 - betas[1] ** t)
        with torch.no_grad():
            p -= lr * m_hat / (v_hat.sqrt() + eps)
        params.append(p.detach().clone())
        losses.append(loss.item())
    return params, np.array(losses)


@dataclass(frozen=True)
class BandwidthFit:
    """A learned scale ``w`` of the Gaussian kernel :math:`\\exp(-((q-k)w)^2/2)` (bandwidth ``1/w``)."""

    w: float
    w_history: np.ndarray  # (steps + 1,), w before each step and after the last
    loss_history: np.ndarray  # (steps,), training loss at each step


def fit_bandwidth(
    x: Array, y: Array, leave_one_out: bool = True, steps: int = 200, lr: float = 0.05, w_init: float = 1.0
) -> BandwidthFit:
    r"""Learn ``w`` in :math:`\kappa(q, k) = \exp(-((q-k)w)^2/2)` by full-batch Adam on the training MSE.

    With ``leave_one_out=True`` each training point is predicted from the others
    (:math:`\alpha_{ii} = 0`); without it, every point can explain itself, so the
    loss keeps falling as ``w`` grows and the fit turns into interpolation.

    Parameters
    ----------
    x : array, shape (n,) or (n, d)
    y : array, shape (n,)
    steps, lr, w_init
        Adam steps, learning rate and the starting value of ``w``.

    Examples
    --------
    >>> from attention_course.lenses.kernels import sine_data
    >>> data = sine_data(seed=0)
    >>> fit = fit_bandwidth(data.x_train, data.y_train, steps=5)
    >>> fit.w_history.shape, fit.loss_history.shape
    ((6,), (5,))
    """
    x_t = torch.as_tensor(to_numpy(x), dtype=torch.float64)  # (n,) or (n, d)
    y_t = torch.as_tensor(to_numpy(y), dtype=torch.float64)  # (n,)

    def loss_fn(w: torch.Tensor) -> torch.Tensor:
        pred, _ = nadaraya_watson(x_t * w, x_t * w, y_t, leave_one_out=leave_one_out)  # (n,)
        return ((pred - y_t) ** 2).mean()

    w_init_t = torch.tensor(float(w_init), dtype=torch.float64)
    params, losses = _adam(loss_fn, w_init_t, steps, lr)
    ws = np.abs(np.array([p.item() for p in params]))  # the kernel depends on w only through w^2
    return BandwidthFit(float(ws[-1]), ws, losses)


@dataclass(frozen=True)
class MetricFit:
    """A learned metric ``W`` of the kernel :math:`\\exp(-\\lVert W(q-k)\\rVert^2/2)`."""

    W: np.ndarray  # (d, d)
    loss_history: np.ndarray  # (steps,)


def fit_metric(
    x: Array, y: Array, steps: int = 300, lr: float = 0.1, leave_one_out: bool = True
) -> MetricFit:
    r"""Learn ``W`` in :math:`\kappa(q, k) = \exp(-\lVert W(q-k)\rVert^2/2)` by full-batch Adam.

    Since :math:`\lVert W(q-k)\rVert = \lVert Wq - Wk\rVert`, this is Gaussian
    Nadaraya-Watson on the projected points :math:`Wx`: attention with
    :math:`W_Q = W_K = W` and the key bias. ``W`` starts at the identity (no
    randomness) and the loss is the leave-one-out MSE by default. Predict with
    ``nadaraya_watson(x_query @ W.T, x_train @ W.T, y_train)``.

    Parameters
    ----------
    x : array, shape (n, d)
    y : array, shape (n,)

    Examples
    --------
    >>> from attention_course.lenses.kernels import sparse_sine_data
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


def metric_over_draws(seeds, n: int = 200, steps: int = 300, lr: float = 0.1) -> dict[str, np.ndarray]:
    r"""Learn the metric on several draws of the 5-D task; how much it helps, and what it finds.

    For each seed, draws :func:`~attention_course.lenses.kernels.sparse_sine_data` (only
    :math:`x_0` matters), fits ``W`` with :func:`fit_metric` from the identity, and measures
    the test MSE with ``W = I`` and with the learned ``W``.

    Returns
    -------
    dict of arrays, each of shape (len(seeds),)
        ``improvement``: test MSE with W = I over test MSE with the learned W;
        ``dominance``: the column norm of :math:`x_0` over the largest other column norm;
        ``top_is_x0``: whether :math:`x_0`'s column has the largest norm.

    Examples
    --------
    >>> r = metric_over_draws([1], n=40, steps=5)
    >>> sorted(r), r["improvement"].shape
    (['dominance', 'improvement', 'top_is_x0'], (1,))
    """
    improvement, dominance, top = [], [], []
    for seed in seeds:
        data = sparse_sine_data(n=n, d=5, n_test=1000, noise=0.1, seed=seed)
        before = mse(nadaraya_watson(data.x_test, data.x_train, data.y_train)[0], data.y_test)
        W = fit_metric(data.x_train, data.y_train, steps=steps, lr=lr).W  # (5, 5)
        after = mse(nadaraya_watson(data.x_test @ W.T, data.x_train @ W.T, data.y_train)[0], data.y_test)
        norms = np.linalg.norm(W, axis=0)  # (5,): how far coordinate j moves a point
        improvement.append(before / after)
        dominance.append(norms[0] / norms[1:].max())
        top.append(int(np.argmax(norms)) == 0)
    return {"improvement": np.array(improvement), "dominance": np.array(dominance), "top_is_x0": np.array(top)}
