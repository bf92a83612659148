r"""Low-rank approximations of softmax attention: Performer, Linformer and Nyström.

Each replaces the :math:`T \times S` matrix :math:`A = \operatorname{softmax}(QK^\top/\sqrt{d_k})`
by a factorisation through a small inner dimension, so that time and memory grow
as :math:`n` times that dimension:

=============================  ==========================================  ===============
function                       idea                                        inner dimension
=============================  ==========================================  ===============
:func:`performer_attention`    positive random features (FAVOR+): an       ``num_features``
                               unbiased estimate of :math:`e^{q^\top k}`
:func:`linformer_attention`    project keys and values along the sequence  ``proj_dim``
:func:`nystrom_attention`      landmarks = segment means + pseudo-inverse  ``num_landmarks``
=============================  ==========================================  ===============

They are accurate exactly when :math:`A` is close to low rank (chapter 3). Shapes and
inputs as in :mod:`attention_course.core.efficient`.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
import torch

from ._backend import Array, ShapeError, is_torch, shape_str
from .efficient import _kernel_attention, _positive_int, _prepare, _scale, _shapes

__all__ = [
    "random_features", "performer_attention",
    "linformer_attention", "nystrom_attention",
]


# ---------------------------------------------------------------- Performer
def random_features(
    num_features: int, d: int, orthogonal: bool = True, seed: int = 0, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    r"""Random projection directions :math:`W \in \mathbb{R}^{m \times d}` for FAVOR+.

    iid: rows :math:`w_r \sim \mathcal N(0, I_d)`. Orthogonal: blocks of ``d`` exactly
    orthogonal directions (QR of a Gaussian matrix), each row rescaled to the norm of
    an independent Gaussian vector, so every row is still marginally :math:`\mathcal N(0, I_d)`.

    Examples
    --------
    >>> W = random_features(8, 4, orthogonal=True, seed=0)
    >>> W.shape, bool(abs(W[:4] @ W[:4].T - torch.diag((W[:4] ** 2).sum(1))).max() < 1e-12)
    (torch.Size([8, 4]), True)
    """
    num_features = _positive_int("num_features", num_features, None, f"d={d}", "random features")
    g = torch.Generator().manual_seed(int(seed))
    if not orthogonal:
        return torch.randn(num_features, d, generator=g, dtype=dtype)  # (m, d)
    G = torch.randn(math.ceil(num_features / d), d, d, generator=g, dtype=torch.float64)  # (blocks, d, d)
    Q, R = torch.linalg.qr(G)  # (blocks, d, d), one QR per block
    Q = Q * torch.sign(torch.diagonal(R, dim1=-2, dim2=-1))[:, None, :]  # sign fix: Q is Haar-distributed
    W = Q.transpose(-2, -1).reshape(-1, d)[:num_features]  # (m, d): unit rows, orthogonal within a block
    norms = torch.randn(num_features, d, generator=g, dtype=torch.float64).norm(dim=1)  # chi_d lengths
    return (W * norms[:, None]).to(dtype)


def performer_attention(
    q: Array, k: Array, v: Array, num_features: int = 256, orthogonal: bool = True,
    seed: int = 0, causal: bool = False, scale: Optional[float] = None,
) -> Array:
    r"""Performer attention with FAVOR+ positive random features (Choromanski et al. 2021).

    With :math:`q' = \sqrt{c}\,q`, :math:`k' = \sqrt{c}\,k` (:math:`c` = ``scale``),
    :math:`e^{c\,q^\top k} = e^{q'^\top k'} \approx \phi(q')^\top\phi(k')`, and the
    softmax becomes kernel attention, :math:`O(n\,m\,d)`:

    .. math::

        O = \frac{\phi(Q')\,(\phi(K')^\top V)}{\phi(Q')\,\phi(K')^\top\mathbf 1}

    For stability each query's features are divided by their largest value and all
    keys' features by one common largest value; both constants cancel in the ratio.

    Examples
    --------
    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> q, k, v = (0.5 * torch.randn(16, 8, generator=g, dtype=torch.float64) for _ in range(3))
    >>> performer_attention(q, k, v, num_features=64, seed=1).shape
    torch.Size([16, 8])
    """
    q, k, v, back = _prepare(q, k, v)
    W = random_features(num_features, q.shape[-1], orthogonal, seed, dtype=q.dtype)  # (m, d_k)
    root = math.sqrt(_scale(q, scale))
    qs, ks = q * root, k * root  # $q^\top k / \sqrt{d} = q'^\top k'$
    log_q = qs @ W.T - (qs**2).sum(-1, keepdim=True) / 2  # (..., T, m)
    log_k = ks @ W.T - (ks**2).sum(-1, keepdim=True) / 2  # (..., S, m)
    phi_q = torch.exp(log_q - log_q.amax(dim=-1, keepdim=True))  # per-query constant cancels
    phi_k = torch.exp(log_k - log_k.amax(dim=(-2, -1), keepdim=True))  # one constant for all keys
    return back(_kernel_attention(phi_q, phi_k, v, causal))


# ------------------------------------------------------------ low-rank methods
def linformer_attention(
    q: Array, k: Array, v: Array, proj_dim: int, seed: int = 0, scale: Optional[float] = None,
    projection: str = "gaussian", E: Optional[Array] = None, F_: Optional[Array] = None,
) -> Array:
    r"""Linformer-style attention: project keys and values along the sequence (Wang et al. 2020).

    .. math::

        O = \operatorname{softmax}\!\Big(\frac{Q (EK)^\top}{\sqrt{d_k}}\Big)\,(F V),
        \qquad E, F \in \mathbb{R}^{k \times S}

    The paper *learns* :math:`E, F`; here ``projection="gaussian"`` uses one seeded
    :math:`\mathcal N(0, 1/k)` matrix for both, ``"mean"`` averages ``k`` contiguous segments,
    or pass ``E`` (and ``F_``, default ``E``). Cost :math:`O(n k d)`.

    Examples
    --------
    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> q, k, v = (torch.randn(16, 8, generator=g, dtype=torch.float64) for _ in range(3))
    >>> exact = torch.softmax(q @ k.T / 8**0.5, dim=-1) @ v
    >>> E = torch.eye(16, dtype=torch.float64)  # no projection at all: exact
    >>> bool(torch.allclose(linformer_attention(q, k, v, proj_dim=16, E=E), exact, atol=1e-12))
    True
    >>> linformer_attention(q, k, v, proj_dim=4, projection="mean").shape
    torch.Size([16, 8])
    """
    q, k, v, back = _prepare(q, k, v)
    S = k.shape[-2]
    proj_dim = _positive_int("proj_dim", proj_dim, S, _shapes(q, k, v), "projected length, at most S")
    if E is None and projection == "mean":
        k_p, v_p = _segment_means(k, proj_dim), _segment_means(v, proj_dim)  # (..., k, d_k), (..., k, d_v)
    elif E is None and projection != "gaussian":
        raise ValueError(f"projection={projection!r}; expected 'gaussian' or 'mean'")
    else:
        if E is None:
            g = torch.Generator().manual_seed(int(seed))
            E = torch.randn(proj_dim, S, generator=g, dtype=torch.float64).to(q.dtype) / math.sqrt(proj_dim)
        E = E if is_torch(E) else torch.as_tensor(np.asarray(E), dtype=q.dtype)
        F_ = E if F_ is None else (F_ if is_torch(F_) else torch.as_tensor(np.asarray(F_), dtype=q.dtype))
        for name, P in (("E", E), ("F_", F_)):
            if tuple(P.shape) != (proj_dim, S):
                raise ShapeError(f"{name} has shape {shape_str(P)} but k has shape {shape_str(k)}; "
                                 f"expected ({proj_dim}, {S}) = (proj_dim, S)")
        k_p = E @ k  # (..., k, d_k) projected keys
        v_p = F_ @ v  # (..., k, d_v) projected values
    weights = torch.softmax((q @ k_p.transpose(-2, -1)) * _scale(q, scale), dim=-1)  # (..., T, k)
    return back(weights @ v_p)  # (..., T, d_v)


def _segment_means(x: torch.Tensor, m: int) -> torch.Tensor:
    """Means of ``m`` contiguous, near-equal segments along axis -2: (..., n, d) -> (..., m, d)."""
    n = x.shape[-2]
    if n % m == 0:
        return x.reshape(*x.shape[:-2], m, n // m, x.shape[-1]).mean(dim=-2)  # (..., m, d)
    bounds = np.linspace(0, n, m + 1).round().astype(int)
    return torch.stack([x[..., a:b, :].mean(dim=-2) for a, b in zip(bounds[:-1], bounds[1:])], dim=-2)


def nystrom_attention(
    q: Array, k: Array, v: Array, num_landmarks: int, scale: Optional[float] = None
) -> Array:
    r"""Nyström attention (Xiong et al. 2021) with segment-mean landmarks.

    With landmarks :math:`\tilde Q, \tilde K` (means of ``num_landmarks`` segments of
    the queries and keys) and :math:`\sigma` the row softmax of scaled scores,

    .. math::

        O = \sigma(Q\tilde K^\top)\; \sigma(\tilde Q\tilde K^\top)^{+}\; \big(\sigma(\tilde Q K^\top) V\big)

    where :math:`^{+}` is the pseudo-inverse. Cost :math:`O(n m d + m^3)`; exact with one
    landmark per token.

    Examples
    --------
    >>> import torch
    >>> q, k, v = torch.randn(3, 16, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    >>> exact = torch.softmax(q @ k.T / 8**0.5, dim=-1) @ v
    >>> bool(torch.allclose(nystrom_attention(q, k, v, num_landmarks=16), exact, atol=1e-10))  # a landmark per token
    True
    >>> nystrom_attention(q, k, v, num_landmarks=4).shape
    torch.Size([16, 8])
    """
    q, k, v, back = _prepare(q, k, v)
    T, S = q.shape[-2], k.shape[-2]
    m = _positive_int("num_landmarks", num_landmarks, min(T, S), _shapes(q, k, v),
                      "landmarks, at most min(T, S)")
    c = _scale(q, scale)
    q_l, k_l = _segment_means(q, m), _segment_means(k, m)  # (..., m, d_k) landmarks
    kernel_1 = torch.softmax(q @ k_l.transpose(-2, -1) * c, dim=-1)  # (..., T, m)
    kernel_2 = torch.softmax(q_l @ k_l.transpose(-2, -1) * c, dim=-1)  # (..., m, m)
    kernel_3 = torch.softmax(q_l @ k.transpose(-2, -1) * c, dim=-1)  # (..., m, S)
    return back(kernel_1 @ (torch.linalg.pinv(kernel_2) @ (kernel_3 @ v)))  # (..., T, d_v)
