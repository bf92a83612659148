r"""Efficient attention: exact attention in blocks, two sparse patterns, and linear attention.

Exact attention builds the :math:`T \times S` matrix
:math:`A = \operatorname{softmax}(QK^\top/\sqrt{d_k})`: time and memory grow as
:math:`n^2`. The functions here avoid that matrix:

=============================  ======================================  ==================
function                       idea                                    exact?
=============================  ======================================  ==================
:func:`chunked_attention`      online softmax over key blocks          yes (any block size)
:func:`local_window_attention` band mask :math:`|i - j| \le w`          sparse
:func:`topk_attention`         keep the k largest scores per row       sparse
:func:`linear_attention`       :math:`\phi(x)=\mathrm{elu}(x)+1`,       a different model
                               :math:`\phi(Q)(\phi(K)^\top V)`
=============================  ======================================  ==================

Shapes: ``q (..., T, d_k)``, ``k (..., S, d_k)``, ``v (..., S, d_v)``, output
``(..., T, d_v)``; numpy or torch in, the same kind out. Boolean masks, ``True`` = may
attend; a query with no allowed key gets an output of exactly 0.
"""

from __future__ import annotations

import math
from typing import Callable, Optional

import numpy as np
import torch
import torch.nn.functional as F

from ._backend import Array, is_torch, shape_str
from .attention import _broadcast_or_raise, _check_qkv, resolve_scale

__all__ = [
    "online_softmax_step", "chunked_attention", "local_window_attention", "topk_attention",
    "elu_feature_map", "linear_attention", "linear_attention_quadratic",
]


# ------------------------------------------------------------------ helpers
def _prepare(q: Array, k: Array, v: Array):
    """Validate shapes, convert numpy to torch, and return a function that converts back."""
    _check_qkv(q, k, v)
    if is_torch(q):
        return q, k, v, (lambda out: out)
    q, k, v = (torch.from_numpy(np.ascontiguousarray(t)) for t in (q, k, v))
    return q, k, v, (lambda out: out.detach().numpy())


def _positive_int(name: str, value, limit: Optional[int], shapes: str, meaning: str) -> int:
    if isinstance(value, bool) or int(value) != value or value < 1 or (limit is not None and value > limit):
        upper = f" and <= {limit}" if limit is not None else ""
        raise ValueError(f"{name}={value!r} for {shapes}; expected an integer >= 1{upper} ({meaning})")
    return int(value)


def _shapes(q, k, v) -> str:
    return f"q {shape_str(q)}, k {shape_str(k)}, v {shape_str(v)}"


def _scale(q: torch.Tensor, scale: Optional[float]) -> float:
    return resolve_scale(q.shape[-1]) if scale is None else float(scale)


# --------------------------------------------------------- exact, chunked
def _online_softmax(q, k, v, scale, block_size, query_block_size, mask=None, band=(None, None)):
    """Exact attention, one key block at a time; never builds the (T, S) matrix."""
    T, S = q.shape[-2], k.shape[-2]
    lo, hi = band  # allowed offsets j - i in [lo, hi]; None = unbounded
    if mask is not None:
        while mask.ndim < 2:
            mask = mask[None]
        mask = mask.expand(*mask.shape[:-2], T, S)  # a view: no (T, S) copy is made
    outs = []
    for t0 in range(0, T, query_block_size):
        t1 = min(t0 + query_block_size, T)
        q_blk = q[..., t0:t1, :] * scale  # (..., tb, d_k)
        m = l = acc = None  # running max, running sum, running numerator
        s_start = 0 if lo is None else max(0, t0 + lo)
        s_stop = S if hi is None else min(S, t1 - 1 + hi + 1)
        for s0 in range(s_start, s_stop, block_size):
            s1 = min(s0 + block_size, s_stop)
            scores = q_blk @ k[..., s0:s1, :].transpose(-2, -1)  # $S = QK^\top/\sqrt{d_k}$ (..., tb, sb)
            if mask is not None:
                blk = mask[..., t0:t1, s0:s1]
                scores = scores.masked_fill(~blk, -math.inf) if blk.dtype == torch.bool else scores + blk
            if lo is not None or hi is not None:
                off = torch.arange(s0, s1)[None, :] - torch.arange(t0, t1)[:, None]  # (tb, sb): j - i
                ok = torch.ones_like(off, dtype=torch.bool)
                ok = ok if lo is None else ok & (off >= lo)
                ok = ok if hi is None else ok & (off <= hi)
                scores = scores.masked_fill(~ok, -math.inf)
            blk_max = scores.detach().amax(dim=-1, keepdim=True)  # (..., tb, 1); a constant for autograd
            m_new = blk_max if m is None else torch.maximum(m, blk_max)  # $m_j = \max(m_{j-1}, \max_s S_{ts})$
            m_safe = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))  # all masked so far
            # in place, so no second (tb, sb) block is allocated; autograd-safe (exp_ keeps its output)
            p = scores.sub_(m_safe).exp_()  # (..., tb, sb); masked entries give exactly 0
            pv = p @ v[..., s0:s1, :]  # (..., tb, d_v)
            if m is None:
                l, acc = p.sum(dim=-1, keepdim=True), pv
            else:
                alpha = torch.exp(m - m_safe)  # rescale the old statistics to the new max
                l = alpha * l + p.sum(dim=-1, keepdim=True)  # $\ell_j = e^{m_{j-1}-m_j}\ell_{j-1} + \sum_s p_{ts}$
                acc = alpha * acc + pv  # (..., tb, d_v)
            m = m_new
        if acc is None:  # no key block at all (a band that misses every key)
            batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
            outs.append(q.new_zeros(*batch, t1 - t0, v.shape[-1]))
            continue
        outs.append(acc / torch.where(l > 0, l, torch.ones_like(l)))  # fully masked row -> 0
    return torch.cat(outs, dim=-2)  # (..., T, d_v)


def online_softmax_step(m: Array, l: Array, acc: Array, scores: Array, v_blk: Array) -> tuple:
    r"""One step of the online softmax: fold a block of scores into the running statistics.

    .. math::

        m' = \max\big(m, \max_s S_s\big),\quad
        \ell' = e^{m - m'}\,\ell + \sum_s e^{S_s - m'},\quad
        O' = e^{m - m'}\,O + e^{S - m'}\,V

    Start from :math:`m = -\infty`, :math:`\ell = 0`, :math:`O = 0`; after the last
    block the attention output is :math:`O / \ell`. The same update runs inside
    :func:`chunked_attention` (there in place, for speed).

    Parameters
    ----------
    m, l : (..., T)
        Running max and running sum of :math:`e^{S - m}` per query.
    acc : (..., T, d_v)
        Running numerator :math:`\sum_s e^{S_s - m} v_s`.
    scores : (..., T, B)
        This block's scaled scores; ``-inf`` marks a masked key.
    v_blk : (..., B, d_v)
        This block's values.

    Returns
    -------
    (m_new, l_new, acc_new), numpy or torch like the inputs. Rows with no finite
    score so far keep :math:`m = -\infty`, :math:`\ell = 0`, :math:`O = 0`.

    Examples
    --------
    >>> import numpy as np
    >>> s = np.array([[1.0, 2.0, 3.0, 4.0]]); v = np.eye(4)
    >>> state = (np.array([-np.inf]), np.zeros(1), np.zeros((1, 4)))
    >>> for j in (0, 2):                       # two blocks of two keys
    ...     state = online_softmax_step(*state, s[:, j:j + 2], v[j:j + 2])
    >>> m, l, acc = state
    >>> (acc / l[:, None]).round(4)            # equals softmax([1, 2, 3, 4])
    array([[0.0321, 0.0871, 0.2369, 0.6439]])
    """
    xp = torch if is_torch(scores) else np
    blk_max = scores.amax(dim=-1) if is_torch(scores) else scores.max(axis=-1)  # (..., T)
    m_new = xp.maximum(m, blk_max)  # (..., T) running max
    m_safe = xp.where(xp.isfinite(m_new), m_new, xp.zeros_like(m_new))  # no finite score yet -> 0
    alpha = xp.exp(m - m_safe)  # (..., T) rescales the old statistics; exp(-inf) = 0
    p = xp.exp(scores - m_safe[..., None])  # (..., T, B)
    l_new = alpha * l + p.sum(-1)  # (..., T)
    acc_new = alpha[..., None] * acc + p @ v_blk  # (..., T, d_v)
    return m_new, l_new, acc_new


def chunked_attention(
    q: Array, k: Array, v: Array, mask: Optional[Array] = None, scale: Optional[float] = None,
    block_size: int = 256, query_block_size: Optional[int] = None, causal: bool = False,
) -> Array:
    r"""Exact attention with an online softmax over key blocks (Milakov & Gimelshein 2018; FlashAttention).

    For each key block :math:`j` the running max :math:`m`, running sum
    :math:`\ell` and running output :math:`O` are updated:

    .. math::

        m_j = \max(m_{j-1}, \max_s S^{(j)}_s),\quad
        \ell_j = e^{m_{j-1}-m_j}\ell_{j-1} + \sum_s e^{S^{(j)}_s - m_j},\quad
        O_j = e^{m_{j-1}-m_j} O_{j-1} + e^{S^{(j)} - m_j} V^{(j)}

    and the output is :math:`O/\ell`. Memory grows linearly in ``n``.

    Parameters
    ----------
    q, k, v : (..., T, d_k), (..., S, d_k), (..., S, d_v)
    mask : optional, broadcastable to (..., T, S)
        Boolean (``True`` = may attend) or float (added). A query with no allowed
        key gets output 0.
    scale : float, optional
        Default ``1/sqrt(d_k)``.
    block_size, query_block_size : int
        Keys per block; queries per block (default: all queries at once).
    causal : bool
        Query ``i`` attends to keys ``j <= i`` (top-left aligned, as :func:`causal_mask`);
        the mask is made block by block, and blocks above the diagonal are skipped.

    Examples
    --------
    >>> import torch
    >>> from attention_course.core.attention import scaled_dot_product_attention
    >>> g = torch.Generator().manual_seed(0)
    >>> q, k, v = (torch.randn(2, n, 8, generator=g, dtype=torch.float64) for n in (5, 7, 7))
    >>> out = chunked_attention(q, k, v, block_size=3)
    >>> out.shape, torch.allclose(out, scaled_dot_product_attention(q, k, v)[0], atol=1e-14)
    (torch.Size([2, 5, 8]), True)
    """
    q, k, v, back = _prepare(q, k, v)
    T, S = q.shape[-2], k.shape[-2]
    block_size = _positive_int("block_size", block_size, None, _shapes(q, k, v), "keys per block")
    qb = T if query_block_size is None else _positive_int(
        "query_block_size", query_block_size, None, _shapes(q, k, v), "queries per block")
    if mask is not None:
        mask = mask if is_torch(mask) else torch.as_tensor(np.asarray(mask))
        target = tuple(torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])) + (T, S)
        _broadcast_or_raise("mask", tuple(mask.shape), target, f"(..., {T}, {S}) for T={T}, S={S}")
        if mask.dtype != torch.bool:
            mask = mask.to(q.dtype)
    band = (None, 0) if causal else (None, None)
    return back(_online_softmax(q, k, v, _scale(q, scale), block_size, qb, mask, band))


def local_window_attention(
    q: Array, k: Array, v: Array, window: int, causal: bool = False,
    scale: Optional[float] = None, block_size: int = 64,
) -> Array:
    r"""Sliding-window attention: query :math:`i` attends to keys with :math:`|i - j| \le w`.

    With ``causal=True`` only :math:`i - w \le j \le i`. Online softmax over the tiles in the
    band: :math:`O(n w)`. Exact when ``window >= max(T, S)``.

    Examples
    --------
    >>> import torch
    >>> q = k = v = torch.eye(4, dtype=torch.float64)
    >>> local_window_attention(q, k, v, window=0).diagonal().round(decimals=4)  # attends to itself only
    tensor([1., 1., 1., 1.], dtype=torch.float64)
    """
    q, k, v, back = _prepare(q, k, v)
    if isinstance(window, bool) or int(window) != window or window < 0:
        raise ValueError(f"window={window!r} for {_shapes(q, k, v)}; expected an integer >= 0")
    block_size = _positive_int("block_size", block_size, None, _shapes(q, k, v), "tile size")
    band = (-int(window), 0 if causal else int(window))
    return back(_online_softmax(q, k, v, _scale(q, scale), block_size, block_size, None, band))


def topk_attention(
    q: Array, k: Array, v: Array, top_k: int, scale: Optional[float] = None
) -> Array:
    r"""Each query keeps its ``top_k`` largest scores and renormalises over them.

    .. math::

        O_t = \sum_{s \in \operatorname{top}_k(S_{t,:})} \frac{e^{S_{ts}}}{\sum_{s' \in \operatorname{top}_k} e^{S_{ts'}}} V_s

    The scores are computed densely (this shows the *pattern*, not a fast kernel).
    Exact when ``top_k = S``.

    Examples
    --------
    >>> import torch
    >>> q = torch.tensor([[1.0, 0.0]])
    >>> k, v = torch.tensor([[1.0, 0.0], [9.0, 0.0], [0.0, 0.0]]), torch.tensor([[1.0], [2.0], [3.0]])
    >>> topk_attention(q, k, v, top_k=1)  # only the best-matching key (the second) is kept
    tensor([[2.]])
    """
    q, k, v, back = _prepare(q, k, v)
    top_k = _positive_int("top_k", top_k, k.shape[-2], _shapes(q, k, v), "keys kept per query, at most S")
    scores = (q @ k.transpose(-2, -1)) * _scale(q, scale)  # (..., T, S)
    idx = scores.topk(top_k, dim=-1).indices  # (..., T, top_k): the kept keys
    keep = torch.zeros_like(scores, dtype=torch.bool).scatter(-1, idx, True)  # (..., T, S)
    weights = torch.softmax(scores.masked_fill(~keep, -math.inf), dim=-1)  # (..., T, S) over kept keys
    return back(weights @ v)  # (..., T, d_v)


# ------------------------------------------------------- kernel (linear) attention
def elu_feature_map(x: torch.Tensor) -> torch.Tensor:
    r"""The feature map of Katharopoulos et al. (2020): :math:`\phi(x) = \mathrm{elu}(x) + 1 > 0`."""
    return F.elu(x) + 1.0


def _kernel_attention(phi_q, phi_k, v, causal: bool):
    """Normalised kernel attention phi(Q)(phi(K)^T V) / phi(Q) sum_s phi(K_s), in O(n)."""
    if not causal:
        kv = phi_k.transpose(-2, -1) @ v  # $\phi(K)^\top V$   (..., r, d_v)
        z = phi_k.sum(dim=-2)  # $\sum_s \phi(K_s)$   (..., r)
        num = phi_q @ kv  # (..., T, d_v)
        den = (phi_q @ z.unsqueeze(-1))  # (..., T, 1)
        return num / den
    T, S = phi_q.shape[-2], phi_k.shape[-2]
    # running sums over keys: $S_j = \sum_{s \le j} \phi(K_s) V_s^\top$, $z_j = \sum_{s \le j} \phi(K_s)$
    kv = torch.cumsum(phi_k.unsqueeze(-1) * v.unsqueeze(-2), dim=-3)  # (..., S, r, d_v)
    z = torch.cumsum(phi_k, dim=-2)  # (..., S, r)
    idx = torch.arange(T).clamp(max=S - 1)  # query i sees keys j <= i (top-left aligned)
    num = torch.einsum("...tr,...trd->...td", phi_q, kv[..., idx, :, :])  # (..., T, d_v)
    den = torch.einsum("...tr,...tr->...t", phi_q, z[..., idx, :]).unsqueeze(-1)  # (..., T, 1)
    return num / den


def linear_attention(
    q: Array, k: Array, v: Array, causal: bool = False,
    feature_map: Callable[[torch.Tensor], torch.Tensor] = elu_feature_map,
) -> Array:
    r"""Linear attention (Katharopoulos et al. 2020), computed through associativity.

    .. math::

        O_t = \frac{\phi(q_t)^\top \sum_s \phi(k_s) v_s^\top}{\phi(q_t)^\top \sum_s \phi(k_s)}
        \quad\Longrightarrow\quad O = \frac{\phi(Q)\,(\phi(K)^\top V)}{\phi(Q)\,\phi(K)^\top \mathbf 1}

    Cost :math:`O(n\, r\, d_v)`; with ``causal=True`` the sums run over :math:`s \le t` (running
    sums). A different model from softmax attention, not an approximation of it.

    Examples
    --------
    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> q, k, v = (torch.randn(6, 4, generator=g, dtype=torch.float64) for _ in range(3))
    >>> out = linear_attention(q, k, v)
    >>> out.shape, torch.allclose(out, linear_attention_quadratic(q, k, v)[0])
    (torch.Size([6, 4]), True)
    """
    q, k, v, back = _prepare(q, k, v)
    return back(_kernel_attention(feature_map(q), feature_map(k), v, causal))


def linear_attention_quadratic(
    q: Array, k: Array, v: Array, mask: Optional[Array] = None,
    feature_map: Callable[[torch.Tensor], torch.Tensor] = elu_feature_map,
) -> tuple[Array, Array]:
    r"""The same model as :func:`linear_attention`, computed the :math:`O(n^2)` way.

    .. math::

        W = \frac{\phi(Q)\phi(K)^\top \odot M}{(\phi(Q)\phi(K)^\top \odot M)\mathbf 1}, \qquad O = WV

    Returns ``(output, weights)``; a reference for tests and for plotting the weights.
    Boolean mask, ``True`` = may attend; a fully masked row gets weights and output 0.
    """
    q, k, v, back = _prepare(q, k, v)
    sim = feature_map(q) @ feature_map(k).transpose(-2, -1)  # (..., T, S), all > 0
    if mask is not None:
        mask = mask if is_torch(mask) else torch.as_tensor(np.asarray(mask))
        sim = sim * mask.to(sim.dtype)
    den = sim.sum(dim=-1, keepdim=True)  # (..., T, 1)
    weights = sim / torch.where(den > 0, den, torch.ones_like(den))  # rows sum to 1
    return back(weights @ v), back(weights)
