r"""Attention as kernel smoothing: the Nadaraya-Watson estimator (chapter 2).

.. math::

    \hat f(q) = \sum_j \frac{\kappa(q, x_j)}{\sum_{j'} \kappa(q, x_{j'})}\, y_j

is a softmax over :math:`\log\kappa`: attention with queries ``q``, keys ``x_j``, values ``y_j``.
Gaussian Nadaraya-Watson is softmax attention with scale :math:`1/\sigma^2` and key bias
:math:`-\lVert k\rVert^2/2\sigma^2` (:func:`gaussian_nw_as_attention`). Shapes: ``x_query`` (T,) or
(T, d), ``x_train`` (S,) or (S, d), ``y_train`` (S,) or (S, d_v), ``weights`` (T, S). Kernels, width
:math:`h > 0`:

================  ==============================================
``gaussian``      :math:`\exp(-\lVert q-k\rVert^2 / 2h^2)`
``laplace``       :math:`\exp(-\lVert q-k\rVert / h)`
``boxcar``        :math:`\mathbb 1[\lVert q-k\rVert < h]`
``epanechnikov``  :math:`\max(0,\ 1 - \lVert q-k\rVert^2 / h^2)`
``dot``           :math:`\exp(q\cdot k / h^2)` (the dot-product kernel of attention)
================  ==============================================

numpy in, numpy out; torch in, torch out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ...core._backend import Array, ShapeError, check_float, is_torch, shape_str, to_numpy
from ...core.attention import scaled_dot_product_attention, softmax

__all__ = [
    "sine_data", "sparse_sine_data", "nadaraya_watson", "gaussian_nw_as_attention", "nw_attention_gaps",
    "mse", "mse_by_bandwidth", "mse_by_bandwidth_over_seeds",
]

KERNELS = ("gaussian", "laplace", "boxcar", "epanechnikov", "dot")


@dataclass(frozen=True)
class RegressionData:
    """A regression task: noisy training pairs and a noiseless test set."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def sine_data(n: int = 40, noise: float = 1.0, seed: int = 0) -> RegressionData:
    r"""The 1-D task of d2l's attention pooling: :math:`y = 2\sin x + x + \varepsilon`, ``n`` sorted x in U(0, 5).

    The test set is the noiseless curve on 0, 0.1, ..., 4.9.

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


def sparse_sine_data(n: int = 200, d: int = 5, n_test: int = 1000, noise: float = 0.1, seed: int = 0
                    ) -> RegressionData:
    r"""A ``d``-D task where only the first coordinate matters: :math:`y = \sin(2x_0) + \varepsilon`, x uniform on :math:`[-2, 2]^d`.

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
    """Logarithm of the kernel between every query and every key, shape (T, S); ``-inf`` outside a window.

    Parameters
    ----------
    queries : array or tensor, shape (T,) or (T, d)
    keys : array or tensor, shape (S,) or (S, d)
    kernel : {'gaussian', 'laplace', 'boxcar', 'epanechnikov', 'dot'}
    bandwidth : float, :math:`h > 0`

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
    if kernel == "dot":
        return (q @ k_t) / h**2  # $q \cdot k / h^2$   (T, S)
    diff = q[:, None, :] - k[None, :, :]  # (T, S, d)
    sq = (diff**2).sum(-1)  # $\lVert q - k \rVert^2$   (T, S)
    if kernel == "gaussian":
        return -sq / (2 * h**2)
    if kernel == "laplace":
        return -(sq.sqrt() if is_torch(sq) else np.sqrt(sq)) / h
    inside = sq < h**2  # boxcar and Epanechnikov window   (T, S)
    if kernel == "epanechnikov":
        u = sq / h**2  # (T, S), in [0, 1) inside the window
        if is_torch(sq):  # log1p(-1) = -inf at the edge; clamping keeps u > 1 from giving NaN
            return torch.log1p(-u.clamp(max=1.0)).masked_fill(~inside, float("-inf"))
        with np.errstate(divide="ignore"):
            return np.where(inside, np.log1p(-np.minimum(u, 1.0)), -np.inf)
    if is_torch(sq):
        return torch.zeros_like(sq).masked_fill(~inside, float("-inf"))
    return np.where(inside, 0.0, -np.inf)


def kernel_matrix(queries: Array, keys: Array, kernel: str = "gaussian", bandwidth: float = 1.0) -> Array:
    r"""The kernel values :math:`\kappa(q_i, k_j)`, shape (T, S): ``exp(log_kernel(...))``.

    Examples
    --------
    >>> kernel_matrix(np.array([0.0]), np.array([0.5, 2.0]), "boxcar", 1.0)
    array([[1., 0.]])
    >>> kernel_matrix(np.array([0.0]), np.array([0.5, 2.0]), "epanechnikov", 1.0)
    array([[0.75, 0.  ]])
    """
    logk = log_kernel(queries, keys, kernel, bandwidth)
    return logk.exp() if is_torch(logk) else np.exp(logk)


def nadaraya_watson(x_query: Array, x_train: Array, y_train: Array, kernel: str = "gaussian",
                    bandwidth: float = 1.0, leave_one_out: bool = False) -> tuple[Array, Array]:
    r"""Nadaraya-Watson kernel regression; returns the predictions **and** the weights.

    .. math::

        \alpha_{ij} = \frac{\kappa(q_i, x_j)}{\sum_{j'} \kappa(q_i, x_{j'})}, \qquad
        \hat f(q_i) = \sum_j \alpha_{ij}\, y_j

    Parameters
    ----------
    x_query : array or tensor, shape (T,) or (T, d)
    x_train : array or tensor, shape (S,) or (S, d)
    y_train : array or tensor, shape (S,) or (S, d_v)
    kernel : {'gaussian', 'laplace', 'boxcar', 'epanechnikov', 'dot'}
    bandwidth : float, :math:`h > 0`
    leave_one_out : bool
        Query ``i`` is training point ``i`` (``T == S``) and :math:`\alpha_{ii} = 0`.

    Returns
    -------
    predictions : shape (T,) or (T, d_v); NaN for a query with all weights 0
    weights : shape (T, S), rows sum to 1 (or are all 0)

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

    Parameters
    ----------
    q : shape (T, d)
    k : shape (S, d)
    v : shape (S, d_v)
    bandwidth : float, :math:`\sigma > 0`

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


def nw_attention_gaps(q: Array, k: Array, v: Array, bandwidth: float) -> dict[str, float]:
    r""":math:`\max |\hat f - o|` between Gaussian Nadaraya-Watson and three attention outputs :math:`o`.

    ``package``: :func:`gaussian_nw_as_attention`; ``torch``: PyTorch's attention with the same scale and
    key bias as ``attn_mask``; ``no_bias``: :math:`\operatorname{softmax}(QK^\top/\sigma^2)V`, 0 only when
    all keys have one norm.

    Parameters
    ----------
    q : array, shape (T, d)
    k : array, shape (S, d)
    v : array, shape (S, d_v)
    bandwidth : float, :math:`\sigma > 0`

    Examples
    --------
    >>> q, k, v = np.zeros((1, 2)), np.array([[1.0, 0.0], [3.0, 0.0]]), np.array([[0.0], [1.0]])
    >>> gaps = nw_attention_gaps(q, k, v, bandwidth=1.0)
    >>> gaps["package"] < 1e-15, gaps["torch"] < 1e-15, round(gaps["no_bias"], 4)  # 0.5 - 1/(1+e^4)
    (True, True, 0.482)
    """
    q, k, v = (np.asarray(to_numpy(a), dtype=np.float64) for a in (q, k, v))
    sigma = float(bandwidth)
    nw, _ = nadaraya_watson(q, k, v, "gaussian", sigma)  # kernel formula, exp(-|q-k|^2 / 2 sigma^2)   (T, d_v)
    via_package, _ = gaussian_nw_as_attention(q, k, v, sigma)  # (T, d_v)
    bias = -(k**2).sum(-1) / (2 * sigma**2)  # $b_j = -\lVert k_j \rVert^2 / 2\sigma^2$   (S,)
    via_torch = F.scaled_dot_product_attention(
        *map(torch.as_tensor, (q, k, v)), attn_mask=torch.as_tensor(bias)[None, :], scale=sigma**-2
    ).numpy()  # (T, d_v), fused kernel, bias broadcast over the T queries
    no_bias, _ = scaled_dot_product_attention(q, k, v, scale=sigma**-2)  # (T, d_v)
    return {
        "package": float(np.abs(nw - via_package).max()),
        "torch": float(np.abs(nw - via_torch).max()),
        "no_bias": float(np.abs(nw - no_bias).max()),
    }


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


def mse_by_bandwidth(x_query: Array, x_train: Array, y_train: Array, y_query: Array, w_values: Iterable[float],
                     kernel: str = "gaussian", leave_one_out: bool = False) -> np.ndarray:
    r"""Mean squared error of Nadaraya-Watson at each inverse bandwidth :math:`w = 1/h`, shape (len(w_values),).

    .. math::

        \text{MSE}(w) = \frac1T \sum_{i=1}^T \bigl(\hat f_{h = 1/w}(q_i) - y_i\bigr)^2

    Parameters
    ----------
    x_query : array, shape (T,) or (T, d)
    x_train : array, shape (S,) or (S, d)
    y_train : array, shape (S,)
    y_query : array, shape (T,)
    w_values : iterable of positive float

    Examples
    --------
    >>> x, y = np.array([0.0, 1.0]), np.array([0.0, 1.0])
    >>> mse_by_bandwidth(np.array([0.0]), x, y, np.array([0.0]), [1.0, 3.0]).round(5).tolist()
    [0.14254, 0.00012]
    """
    return np.array([
        mse(nadaraya_watson(x_query, x_train, y_train, kernel, 1 / w, leave_one_out)[0], y_query) for w in w_values
    ])  # (len(w_values),)


def mse_by_bandwidth_over_seeds(w_values: Sequence[float], seeds: Iterable[int], n: int = 40, noise: float = 1.0
                               ) -> np.ndarray:
    """Test MSE of the Gaussian fit at each width on ``sine_data(n, noise, seed=s)`` per seed; (n_seeds, len(w_values)).

    Examples
    --------
    >>> errors = mse_by_bandwidth_over_seeds((0.3, 3.0, 30.0), seeds=range(1, 4))
    >>> errors.shape, bool(np.all(errors[:, 1] < errors[:, 0]))
    ((3, 3), True)
    """
    rows = []
    for seed in seeds:
        data = sine_data(n=n, noise=noise, seed=seed)
        rows.append(mse_by_bandwidth(data.x_test, data.x_train, data.y_train, data.y_test, w_values))
    return np.array(rows)  # (n_seeds, len(w_values))
