r"""Attention as kernel smoothing: the Nadaraya-Watson estimator, with a learned metric.

Given training pairs :math:`(x_j, y_j)` and a kernel :math:`\kappa`, the
Nadaraya-Watson estimate at a query :math:`q` is a weighted average of the targets:

.. math::

    \hat f(q) = \sum_j \frac{\kappa(q, x_j)}{\sum_{j'} \kappa(q, x_{j'})}\, y_j

Written with logits :math:`\log\kappa`, the weights are a softmax over the
training points, so this *is* attention with queries ``q``, keys ``x_j`` and
values ``y_j``. Two exact identities connect the two views:

* Gaussian kernel: :math:`-\lVert q-k\rVert^2/2\sigma^2 = (q\cdot k - \lVert k\rVert^2/2
  - \lVert q\rVert^2/2)/\sigma^2`; the :math:`\lVert q\rVert^2` term is constant over the
  keys and cancels in the softmax, so Gaussian Nadaraya-Watson is softmax attention
  with scale :math:`1/\sigma^2` and the additive bias :math:`-\lVert k\rVert^2/2\sigma^2`
  (:func:`gaussian_nw_as_attention`).
* When all keys have the same norm the bias is a constant too, and scaled dot-product
  attention is Gaussian Nadaraya-Watson with :math:`\sigma^2 = \sqrt{d}`.

Shape legend::

    x_query  (T,) or (T, d)    T query points (a 1-D input may drop the d axis)
    x_train  (S,) or (S, d)    S training points (the keys)
    y_train  (S,) or (S, d_v)  one target per training point (the values)
    weights  (T, S)            each row sums to 1 over the S training points

Kernels (``bandwidth`` is :math:`h > 0`):

============  ==============================================
``gaussian``  :math:`\exp(-\lVert q-k\rVert^2 / 2h^2)`
``laplace``   :math:`\exp(-\lVert q-k\rVert / h)`
``boxcar``    :math:`\mathbb 1[\lVert q-k\rVert < h]`
``softmax``   :math:`\exp(q\cdot k / h^2)` (the dot-product kernel of attention)
============  ==============================================

The estimators accept numpy arrays or torch tensors and return the same kind;
the two ``fit_*`` functions train with torch in float64 and return numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..core._backend import Array, ShapeError, check_float, is_torch, shape_str, to_numpy
from ..core.attention import scaled_dot_product_attention, softmax

__all__ = [
    "KERNELS", "RegressionData", "sine_data", "sparse_sine_data", "log_kernel",
    "kernel_matrix", "nadaraya_watson", "gaussian_nw_as_attention", "mse",
    "BandwidthFit", "fit_bandwidth", "MetricFit", "fit_metric",
]

KERNELS = ("gaussian", "laplace", "boxcar", "softmax")


# ------------------------------------------------------------------ data
@dataclass(frozen=True)
class RegressionData:
    """A regression task: noisy training pairs and a noiseless test set."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def sine_data(n: int = 40, noise: float = 1.0, seed: int = 0) -> RegressionData:
    r"""The 1-D task of d2l's attention-pooling section: :math:`y = 2\sin x + x + \varepsilon`.

    ``x_train`` holds ``n`` sorted draws from U(0, 5) and :math:`\varepsilon \sim N(0, \text{noise}^2)`;
    the test set is the noiseless curve on the grid 0, 0.1, ..., 4.9.

    Examples
    --------
    >>> data = sine_data(seed=0)
    >>> data.x_train.shape, data.y_train.shape, data.x_test.shape
    ((40,), (40,), (50,))
    """
    rng = np.random.default_rng(seed)
    x_train = np.sort(rng.uniform(0.0, 5.0, size=n))  # (n,)
    y_train = 2 * np.sin(x_train) + x_train + noise * rng.normal(size=n)  # (n,)
    x_test = np.arange(0.0, 5.0, 0.1)  # (50,)
    return RegressionData(x_train, y_train, x_test, 2 * np.sin(x_test) + x_test)


def sparse_sine_data(
    n: int = 200, d: int = 5, n_test: int = 1000, noise: float = 0.1, seed: int = 0
) -> RegressionData:
    r"""A ``d``-D task where only the first coordinate matters: :math:`y = \sin(2x_0) + \varepsilon`.

    Inputs are uniform on :math:`[-2, 2]^d`; the test targets are noiseless.

    Examples
    --------
    >>> data = sparse_sine_data(seed=0)
    >>> data.x_train.shape, data.y_train.shape, data.x_test.shape
    ((200, 5), (200,), (1000, 5))
    """
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2.0, 2.0, size=(n + n_test, d))  # (n + n_test, d)
    y = np.sin(2 * x[:, 0])  # (n + n_test,)
    y_train = y[:n] + noise * rng.normal(size=n)
    return RegressionData(x[:n], y_train, x[n:], y[n:])


# ------------------------------------------------------------------ kernels
def _check_kernel(kernel: str, bandwidth: Any) -> None:
    if kernel not in KERNELS:
        raise ValueError(f"unknown kernel {kernel!r}; expected one of {', '.join(map(repr, KERNELS))}")
    try:
        h = float(bandwidth)
    except (TypeError, ValueError):
        raise ValueError(f"bandwidth={bandwidth!r}; expected a positive number") from None
    if not (h > 0 and math.isfinite(h)):
        raise ValueError(f"bandwidth={bandwidth!r} must be positive and finite (it is the kernel's width h)")


def _as_points(name: str, x: Array) -> Array:
    """Return ``x`` as points of shape (n, d); a 1-D input is n scalar points."""
    check_float(name, x)
    if x.ndim == 1:
        return x[:, None]  # (n, 1)
    if x.ndim != 2:
        raise ShapeError(f"{name} has shape {shape_str(x)}; expected (n,) or (n, d) points")
    return x


def log_kernel(queries: Array, keys: Array, kernel: str = "gaussian", bandwidth: float = 1.0) -> Array:
    r"""Logarithm of the kernel between every query and every key, shape (T, S).

    Working with :math:`\log\kappa` lets a softmax do the normalisation stably.
    The boxcar kernel gives 0 inside the window and ``-inf`` outside.

    Parameters
    ----------
    queries : array or tensor, shape (T,) or (T, d)
    keys : array or tensor, shape (S,) or (S, d)
    kernel : {'gaussian', 'laplace', 'boxcar', 'softmax'}
    bandwidth : float
        The width :math:`h > 0` (see the module docstring for each formula).

    Examples
    --------
    >>> log_kernel(np.array([0.5, 1.0]), np.array([0.0, 2.0]), "gaussian", 1.0)
    array([[-0.125, -1.125],
           [-0.5  , -0.5  ]])
    """
    _check_kernel(kernel, bandwidth)
    q, k = _as_points("queries", queries), _as_points("keys", keys)
    if q.shape[1] != k.shape[1]:
        raise ShapeError(
            f"queries have shape {shape_str(queries)} and keys {shape_str(keys)}; "
            f"expected the same number of features d"
        )
    h = float(bandwidth)
    k_t = k.T  # (d, S)
    if kernel == "softmax":
        return (q @ k_t) / h**2  # $q \cdot k / h^2$   (T, S)
    diff = q[:, None, :] - k[None, :, :]  # (T, S, d)
    sq = (diff**2).sum(-1)  # $\lVert q - k \rVert^2$   (T, S)
    if kernel == "gaussian":
        return -sq / (2 * h**2)
    if kernel == "laplace":
        return -(sq.sqrt() if is_torch(sq) else np.sqrt(sq)) / h
    inside = sq < h**2  # boxcar window   (T, S)
    if is_torch(sq):
        return torch.zeros_like(sq).masked_fill(~inside, float("-inf"))
    return np.where(inside, 0.0, -np.inf)


def kernel_matrix(queries: Array, keys: Array, kernel: str = "gaussian", bandwidth: float = 1.0) -> Array:
    """The kernel values :math:`\\kappa(q_i, k_j)`, shape (T, S): ``exp(log_kernel(...))``.

    Examples
    --------
    >>> kernel_matrix(np.array([0.0]), np.array([0.5, 2.0]), "boxcar", 1.0)
    array([[1., 0.]])
    """
    logk = log_kernel(queries, keys, kernel, bandwidth)
    return logk.exp() if is_torch(logk) else np.exp(logk)


# ------------------------------------------------------------------ estimators
def nadaraya_watson(
    x_query: Array,
    x_train: Array,
    y_train: Array,
    kernel: str = "gaussian",
    bandwidth: float = 1.0,
    leave_one_out: bool = False,
) -> tuple[Array, Array]:
    r"""Nadaraya-Watson kernel regression; returns the predictions **and** the weights.

    .. math::

        \alpha_{ij} = \frac{\kappa(q_i, x_j)}{\sum_{j'} \kappa(q_i, x_{j'})}, \qquad
        \hat f(q_i) = \sum_j \alpha_{ij}\, y_j

    Parameters
    ----------
    x_query : array or tensor, shape (T,) or (T, d)
    x_train : array or tensor, shape (S,) or (S, d)
    y_train : array or tensor, shape (S,) or (S, d_v)
    kernel : {'gaussian', 'laplace', 'boxcar', 'softmax'}
    bandwidth : float
        The kernel width :math:`h > 0`.
    leave_one_out : bool
        Query ``i`` is training point ``i`` (so ``T == S``), and it may not use its
        own target: the weight :math:`\alpha_{ii}` is 0.

    Returns
    -------
    predictions : array or tensor, shape (T,) or (T, d_v)
        A query whose kernel weights are all 0 (a boxcar window with no training
        point, or ``leave_one_out`` with one point) has no estimate: NaN.
    weights : array or tensor, shape (T, S)
        Row ``i`` sums to 1 (or is all 0 for such a query).

    Examples
    --------
    >>> pred, w = nadaraya_watson(np.array([0.5]), np.array([0.0, 1.0, 3.0]), np.array([1.0, 3.0, 9.0]))
    >>> w.round(3), pred.round(3)
    (array([[0.488, 0.488, 0.024]]), array([2.17]))
    """
    check_float("y_train", y_train)
    n_x = int(x_train.shape[0]) if x_train.ndim else 0
    n_y = int(y_train.shape[0]) if y_train.ndim else 0
    if y_train.ndim not in (1, 2) or n_x != n_y:
        raise ShapeError(
            f"x_train has shape {shape_str(x_train)} ({n_x} points) but y_train has shape "
            f"{shape_str(y_train)}; expected one target per training point, y_train of shape ({n_x},) or ({n_x}, d_v)"
        )
    logits = log_kernel(x_query, x_train, kernel, bandwidth)  # (T, S)
    if leave_one_out:
        T, S = logits.shape
        if T != S:
            raise ShapeError(
                f"leave_one_out needs the queries to be the training points, but x_query has shape "
                f"{shape_str(x_query)} and x_train {shape_str(x_train)}; expected T == S"
            )
        off_diag = ~np.eye(S, dtype=bool)  # (S, S), True = may use; the diagonal is left out
        weights = softmax(logits, axis=-1, mask=off_diag)  # (T, S), normalised over j != i
    else:
        weights = softmax(logits, axis=-1)  # (T, S), normalised over the S training points
    predictions = weights @ y_train  # $\hat f = \alpha y$   (T,) or (T, d_v)
    empty = weights.sum(-1) == 0  # (T,) queries with no estimate
    if empty.any():
        empty = empty.reshape((-1,) + (1,) * (predictions.ndim - 1))  # broadcast over d_v
        where = torch.where if is_torch(predictions) else np.where
        predictions = where(empty, float("nan"), predictions)
    return predictions, weights


def gaussian_nw_as_attention(q: Array, k: Array, v: Array, bandwidth: float) -> tuple[Array, Array]:
    r"""Gaussian Nadaraya-Watson computed as softmax attention with a key bias.

    .. math::

        \hat f(Q) = \operatorname{softmax}\!\left(\frac{QK^\top - \tfrac12 \lVert k\rVert^2}{\sigma^2}\right) V

    i.e. :func:`~attention_course.core.attention.scaled_dot_product_attention` with
    ``scale = 1/sigma**2`` and the float mask :math:`-\lVert k_j\rVert^2 / 2\sigma^2`
    added to column ``j``. Equals ``nadaraya_watson(q, k, v, "gaussian", sigma)``.

    Parameters
    ----------
    q : array or tensor, shape (T, d)
    k : array or tensor, shape (S, d)
    v : array or tensor, shape (S, d_v)
    bandwidth : float
        :math:`\sigma > 0`.

    Returns
    -------
    output : shape (T, d_v)
    weights : shape (T, S)

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = rng.normal(size=(3, 2)), rng.normal(size=(4, 2)), rng.normal(size=(4, 1))
    >>> out, _ = gaussian_nw_as_attention(q, k, v, bandwidth=0.7)
    >>> bool(np.allclose(out, nadaraya_watson(q, k, v, bandwidth=0.7)[0], atol=1e-14))
    True
    """
    _check_kernel("gaussian", bandwidth)
    sigma2 = float(bandwidth) ** 2
    bias = -(k**2).sum(-1) / (2 * sigma2)  # $-\lVert k_j \rVert^2 / 2\sigma^2$   (S,)
    return scaled_dot_product_attention(q, k, v, mask=bias[None, :], scale=1.0 / sigma2)  # (T, d_v), (T, S)


def mse(predictions: Array, targets: Array) -> float:
    """Mean squared error as a Python float.

    Examples
    --------
    >>> mse(np.array([1.0, 2.0]), np.array([1.0, 4.0]))
    2.0
    """
    p, t = to_numpy(predictions), to_numpy(targets)
    if p.shape != t.shape:
        raise ShapeError(f"predictions have shape {p.shape} but targets {t.shape}; expected equal shapes")
    return float(np.mean((p - t) ** 2))


# ------------------------------------------------------------------ learning
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
