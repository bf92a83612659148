r"""Is a trained head's kernel local? Its attention weights against query-key distances (chapter 2).

Within a row the query is fixed, and :math:`-\tfrac12\lVert q - k\rVert^2 = q\cdot k - \tfrac12\lVert q\rVert^2 - \tfrac12\lVert k\rVert^2`
splits each weight into a Gaussian kernel and a key-norm factor,

.. math::

    \alpha_j \;\propto\; e^{q\cdot k_j/\sqrt d}
    \;=\; e^{-\lVert q - k_j\rVert^2 / 2\sqrt d} \times e^{\lVert k_j\rVert^2 / 2\sqrt d} \times \text{const}_q ,

so the spread of the key norms is how far a head departs from a Gaussian smoother. :data:`MEASURES`
are the per-head measures of :func:`qk_locality`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ...core._backend import Array, ShapeError, shape_str, to_numpy
from ...models.decoder import decoder_pass
from ...models.smollm2 import load_smollm2, smollm2_tokenizer
from .attention_kernel import rank_correlation

__all__ = ["dot_product_factors", "gauge_sweep", "additive_scores", "key_sphere_spread", "query_blind_share", "diagonal_regauge"]

MEASURES = ("rank_corr", "nearest_wins", "blind_rank_corr", "blind_nearest_wins", "chance",
            "distance_share", "norm_share", "norm_ratio")


def key_norm_ratio(k: Array) -> np.ndarray:
    r"""Largest over smallest key norm, :math:`\max_j \lVert k_j\rVert / \min_j \lVert k_j\rVert`.

    Parameters
    ----------
    k : array, shape (..., S, d)

    Returns
    -------
    ndarray, shape (...)

    Examples
    --------
    >>> key_norm_ratio(np.array([[3.0, 4.0], [1.0, 0.0], [0.0, 2.0]]))  # norms 5, 1, 2
    array(5.)
    """
    keys = np.asarray(to_numpy(k), dtype=np.float64)
    if keys.ndim < 2 or keys.shape[-2] == 0:
        raise ShapeError(f"k has shape {shape_str(keys)}; expected (..., S, d) with S >= 1")
    norms = np.linalg.norm(keys, axis=-1)  # (..., S)
    return np.asarray(norms.max(-1) / norms.min(-1))


def _row_r2(y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Squared correlation of y with x after removing each row's mean, pooled over the rows (..., T, S) -> (...)."""
    yc, xc = y - y.mean(-1, keepdims=True), x - x.mean(-1, keepdims=True)  # (..., T, S)
    num = (yc * xc).sum((-2, -1)) ** 2
    x_var = (xc**2).sum((-2, -1))
    den = (yc**2).sum((-2, -1)) * x_var
    # x constant in every row up to round-off (relative spread below 1e-12, float64 noise is ~1e-16): share 0
    varies = (x_var > 1e-24 * (x**2).sum((-2, -1))) & (den > 0)
    return np.divide(num, den, out=np.zeros_like(num), where=varies)


def qk_locality(q: Array, k: Array) -> dict[str, np.ndarray]:
    r"""Locality of scaled dot-product attention in its own query-key space, per head.

    With scores :math:`s_{ij} = q_i\cdot k_j/\sqrt d`, distances :math:`D_{ij} = \lVert q_i - k_j\rVert`,
    distance term :math:`g_{ij} = -D_{ij}^2/2\sqrt d` and key-norm term :math:`b_j = \lVert k_j\rVert^2/2\sqrt d`:

    =============================  ==========================================================
    ``rank_corr``                  median over queries of the rank correlation of the weights with :math:`-D_{ij}`
    ``nearest_wins``               fraction of queries whose largest weight is on the nearest key
    ``blind_rank_corr``,           the same two for the query-blind weight (each key's mean weight
    ``blind_nearest_wins``         over all queries)
    ``chance``                     :math:`1/S`
    ``distance_share``             squared correlation of :math:`s` with :math:`g`, rows centred and pooled
    ``norm_share``                 the same with :math:`b`
    ``norm_ratio``                 :func:`key_norm_ratio`
    =============================  ==========================================================

    Parameters
    ----------
    q : array, shape (..., T, d)
    k : array, shape (..., S, d), S >= 2, the same leading axes

    Returns
    -------
    dict of arrays, shape (...), one per entry of :data:`MEASURES`

    Examples
    --------
    Keys of equal norm: the dot product is a Gaussian kernel in the distance.

    >>> rng = np.random.default_rng(0)
    >>> k = rng.normal(size=(6, 3)); k /= np.linalg.norm(k, axis=-1, keepdims=True)
    >>> loc = qk_locality(rng.normal(size=(4, 3)), k)
    >>> {m: round(float(loc[m]), 3) for m in ("rank_corr", "nearest_wins", "distance_share", "norm_share")}
    {'rank_corr': 1.0, 'nearest_wins': 1.0, 'distance_share': 1.0, 'norm_share': 0.0}
    """
    qa, ka = (np.asarray(to_numpy(a), dtype=np.float64) for a in (q, k))
    if qa.ndim < 2 or ka.ndim != qa.ndim or qa.shape[:-2] != ka.shape[:-2] or qa.shape[-1] != ka.shape[-1] \
            or ka.shape[-2] < 2:
        raise ShapeError(f"q has shape {shape_str(qa)} and k has shape {shape_str(ka)}; expected (..., T, d) "
                         f"and (..., S, d) with the same leading axes and d, and S >= 2")
    d, S = qa.shape[-1], ka.shape[-2]
    scores = qa @ np.swapaxes(ka, -2, -1) / np.sqrt(d)  # $q_i\cdot k_j/\sqrt d$   (..., T, S), softmax over S
    dist2 = ((qa[..., :, None, :] - ka[..., None, :, :]) ** 2).sum(-1)  # $\lVert q_i - k_j\rVert^2$   (..., T, S)
    g = -dist2 / (2 * np.sqrt(d))  # distance term   (..., T, S)
    b = np.broadcast_to((ka**2).sum(-1)[..., None, :] / (2 * np.sqrt(d)), g.shape)  # key-norm term   (..., T, S)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)  # (..., T, S) attention weights
    blind = np.broadcast_to(weights.mean(-2, keepdims=True), weights.shape)  # (..., T, S) same row for every query
    nearest = dist2.argmin(-1)  # (..., T)
    return {
        "rank_corr": np.median(rank_correlation(scores, -dist2), axis=-1),
        "nearest_wins": np.mean(scores.argmax(-1) == nearest, axis=-1),
        "blind_rank_corr": np.median(rank_correlation(blind, -dist2), axis=-1),
        "blind_nearest_wins": np.mean(blind.argmax(-1) == nearest, axis=-1),
        "chance": np.full(scores.shape[:-2], 1 / S),
        "distance_share": _row_r2(scores, g),
        "norm_share": _row_r2(scores, b),
        "norm_ratio": key_norm_ratio(ka),
    }


# ------------------------------------------------------------------ locality in one canonical gauge
def canonical_gauge(q: Array, k: Array, keys: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    r"""Queries and keys in the one gauge where query-key distance is defined: keys centred, equal rms norms.

    .. math::

        \hat k_j = (k_j - \bar k)/a^*, \qquad \hat q_i = a^* q_i, \qquad
        a^* = \sqrt{\operatorname{rms}_j \lVert k_j - \bar k\rVert / \operatorname{rms}_i \lVert q_i\rVert},

    with :math:`\bar k` and the key rms over ``keys``. Every weight is kept (scores move by a constant per row),
    and every :math:`(aq, k/a + c)` maps to the same :math:`(\hat q, \hat k)`.

    Parameters
    ----------
    q : array, shape (..., T, d)
    k : array, shape (..., S, d)
    keys : sequence of int, the keys the centre and rms are taken over

    Returns
    -------
    (q_hat, k_hat) : float64 arrays of the shapes of q and k

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> q, k = rng.normal(size=(4, 3)), rng.normal(size=(5, 3))
    >>> a, b = canonical_gauge(q, k, range(5)), canonical_gauge(3 * q, k / 3 + 1.0, range(5))
    >>> bool(np.allclose(a[0], b[0]) and np.allclose(a[1], b[1]))
    True
    """
    qa, ka = (np.asarray(to_numpy(x), dtype=np.float64) for x in (q, k))
    idx = list(keys)
    if qa.ndim < 2 or ka.ndim != qa.ndim or qa.shape[-1] != ka.shape[-1] or not idx:
        raise ShapeError(f"q has shape {shape_str(qa)}, k {shape_str(ka)} and {len(idx)} keys; expected (..., T, d) "
                         f"and (..., S, d) with the same d, and at least one key")
    kc = ka - ka[..., idx, :].mean(-2, keepdims=True)  # (..., S, d) centred on the chosen keys
    rms_k = np.sqrt((kc[..., idx, :] ** 2).sum(-1).mean(-1))[..., None, None]  # (..., 1, 1)
    rms_q = np.sqrt((qa**2).sum(-1).mean(-1))[..., None, None]  # (..., 1, 1)
    a = np.sqrt(rms_k / rms_q)
    return qa * a, kc / a


def smollm2_queries_keys(texts: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
    """SmolLM2-135M-Instruct's queries and keys after RoPE, (30, 9, T, 64) per text, keys repeated over the query groups.

    Each text runs alone (no special tokens; its first token is the sink) with the Q4_1 weights of
    :func:`~attention_course.models.smollm2.load_smollm2` (quantized and instruction-tuned: a caveat).
    """
    w, tok = load_smollm2(), smollm2_tokenizer()
    out = []
    for text in texts:
        res = decoder_pass(w, torch.tensor([tok.encode(text).ids]), keep=("queries", "keys"))
        q = torch.stack([x[0] for x in res.queries])  # (L, h, T, d) after RoPE
        k = torch.stack([x[0].repeat_interleave(w.config.group, dim=0) for x in res.keys])  # (L, h, T, d)
        out.append((q.double().numpy(), k.double().numpy()))
    return out


# ------------------------------------------------------------------ the identity: every dot product is local in some gauge
def dot_product_factors(scores: Array, d: int) -> tuple[np.ndarray, np.ndarray]:
    r"""The best ``d``-dimensional dot-product factorisation of a score table, :math:`L \approx \tilde q\,\tilde k^\top`.

    Truncated SVD of the row-centred table, :math:`L - \bar L_{i\cdot} = U\Sigma V^\top`,
    :math:`\tilde q = U_{:d}\Sigma_{:d}^{1/2}`, :math:`\tilde k = V_{:d}\Sigma_{:d}^{1/2}`: exact (up to row
    constants, which change no weight) for a dot-product head's table, an approximation otherwise.

    Parameters
    ----------
    scores : array, shape (..., T, S)
    d : int, 1 <= d <= min(T, S)

    Returns
    -------
    (q_tilde, k_tilde) : float64 arrays (..., T, d) and (..., S, d)

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> q, k = rng.normal(size=(6, 2)), rng.normal(size=(5, 2))
    >>> qt, kt = dot_product_factors(q @ k.T, 2)
    >>> L = q @ k.T
    >>> qt.shape, kt.shape, bool(np.allclose(qt @ kt.T, L - L.mean(1, keepdims=True)))
    ((6, 2), (5, 2), True)
    """
    L = np.asarray(to_numpy(scores), dtype=np.float64)
    if L.ndim < 2 or not 1 <= int(d) <= min(L.shape[-2:]):
        raise ShapeError(f"scores has shape {shape_str(L)} and d={d}; expected (..., T, S) with 1 <= d <= min(T, S)")
    L = L - L.mean(-1, keepdims=True)  # a constant per row changes no weight (e.g. one vector added to every key)
    U, s, Vt = np.linalg.svd(L, full_matrices=False)  # (..., T, r), (..., r), (..., r, S)
    r = np.sqrt(s[..., : int(d)])  # (..., d)
    return U[..., :, : int(d)] * r[..., None, :], np.swapaxes(Vt[..., : int(d), :], -1, -2) * r[..., None, :]


def gauge_sweep(q: Array, k: Array, gauges: Sequence[float], scores: Array | None = None, sinks: Sequence[int] = (),
                causal: bool = False, min_keys: int = 3) -> dict[str, np.ndarray]:
    r"""Per head and per gauge :math:`a`: does the weight fall with :math:`\lVert a\hat q_i - \hat k_j/a\rVert`?

    Weights :math:`\operatorname{softmax}_j(L_{ij})` over the visible keys, :math:`L = q k^\top/\sqrt d` or
    ``scores``; sinks removed; :math:`(\hat q, \hat k)` is :func:`canonical_gauge` over the content keys. As

    .. math::

        -\lVert a\hat q_i - \hat k_j/a\rVert^2 = -a^2\lVert \hat q_i\rVert^2 + 2\,\hat q_i\cdot\hat k_j
        - \lVert \hat k_j\rVert^2/a^2 ,

    every dot-product head is local at large :math:`a`.

    Parameters
    ----------
    q, k : arrays, shape (..., T, d), self-attention
    gauges : sequence of float, the factors :math:`a`
    scores : array, shape (..., T, T), optional
    sinks : sequence of int, sink positions (negative from the end)
    causal : bool, query ``i`` sees keys ``j <= i``
    min_keys : int, rows with fewer visible content keys are skipped

    Returns
    -------
    dict
        ``rank_corr`` and ``blind_rank_corr`` (query-blind weight), medians over rows, (..., len(gauges));
        ``sink_share`` (...).

    Examples
    --------
    A free score table is no dot product of 2-d vectors; its rank-12 factors rank the keys exactly.

    >>> rng = np.random.default_rng(0)
    >>> L = rng.normal(size=(12, 12))
    >>> rho = [float(gauge_sweep(*dot_product_factors(L, r), [1024.0], scores=L)["rank_corr"][0]) for r in (2, 12)]
    >>> rho[0] < 0.9, round(rho[1], 6)
    (True, 1.0)
    """
    qa, ka = (np.asarray(to_numpy(x), dtype=np.float64) for x in (q, k))
    if qa.ndim < 2 or qa.shape[:-2] != ka.shape[:-2] or qa.shape[-2] != ka.shape[-2] or qa.shape[-1] != ka.shape[-1]:
        raise ShapeError(f"q has shape {shape_str(qa)} and k {shape_str(ka)}; expected (..., T, d) both, the same T")
    T, d = qa.shape[-2:]
    L = qa @ np.swapaxes(ka, -2, -1) / np.sqrt(d) if scores is None else np.asarray(to_numpy(scores), np.float64)
    if L.shape != qa.shape[:-1] + (T,):
        raise ShapeError(f"scores has shape {shape_str(L)}; expected {qa.shape[:-1] + (T,)} (..., T, T)")
    sink = sorted({s % T for s in sinks})
    content = [j for j in range(T) if j not in sink]
    if len(content) < max(min_keys, 2):
        raise ShapeError(f"T={T} with sinks {sink} leaves {len(content)} content keys; expected at least {min_keys}")
    allowed = np.tril(np.ones((T, T), dtype=bool)) if causal else np.ones((T, T), dtype=bool)  # True = may attend
    L = np.where(allowed, L, -np.inf)
    w = np.exp(L - L.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)  # (..., T, S) softmax over the keys
    sink_share = w[..., sink].sum(-1).mean(-1) if sink else np.zeros(w.shape[:-2])
    c = w[..., content]  # (..., T, C) content part (ranks need no renormalising)
    ok = allowed[:, content]  # (T, C)
    blind = (c / np.maximum(c.sum(-1, keepdims=True), 1e-300) * ok).sum(-2) / np.maximum(ok.sum(0), 1)  # (..., C)
    qh, kh = canonical_gauge(qa, ka, content)
    kh = kh[..., content, :]  # (..., C, d)
    rows = [i for i in range(T) if ok[i].sum() >= min_keys]
    if not rows:
        raise ShapeError(f"no row of T={T} sees {min_keys} content keys; lower min_keys")
    rc = np.empty(qa.shape[:-2] + (len(rows), len(gauges)))
    bl = np.empty_like(rc)
    for r, i in enumerate(rows):
        cols = np.flatnonzero(ok[i])
        ci, bi = c[..., i, cols], blind[..., cols]  # (..., n_i)
        for g, a in enumerate(gauges):
            near = -np.linalg.norm(a * qh[..., i, None, :] - kh[..., cols, :] / a, axis=-1)  # (..., n_i)
            rc[..., r, g] = rank_correlation(ci[..., None, :], near[..., None, :])[..., 0]
            bl[..., r, g] = rank_correlation(bi[..., None, :], near[..., None, :])[..., 0]
    return {"rank_corr": np.median(rc, axis=-2), "blind_rank_corr": np.median(bl, axis=-2), "sink_share": sink_share}


def free_score_tables(scores: Array, seed: int = 0) -> np.ndarray:
    """Synthesizer-style baseline: independent Gaussian scores per head, with the std of the head's ``scores``.

    Examples
    --------
    >>> free_score_tables(np.ones((2, 3, 5, 5)) * np.arange(5)).shape
    (2, 3, 5, 5)
    """
    L = np.asarray(to_numpy(scores), dtype=np.float64)
    sd = L.std(axis=(-2, -1), keepdims=True)  # (..., 1, 1)
    return np.random.default_rng(seed).standard_normal(L.shape) * sd


def additive_scores(h: Array, n_tables: int, width: int = 128, spread: float = 1.0, seed: int = 0) -> np.ndarray:
    r"""Additive (MLP) scores :math:`L_{ij} = v\cdot\tanh(W h_i + U h_j)`, random :math:`W, U, v`, each table std ``spread``.

    Parameters
    ----------
    h : array, shape (T, d_model)

    Returns
    -------
    np.ndarray, shape (n_tables, T, T)

    Examples
    --------
    >>> additive_scores(np.random.default_rng(0).normal(size=(6, 8)), 2, width=4).shape
    (2, 6, 6)
    """
    x = np.asarray(to_numpy(h), dtype=np.float64)
    if x.ndim != 2:
        raise ShapeError(f"h has shape {shape_str(x)}; expected (T, d_model)")
    rng = np.random.default_rng(seed)
    T, D = x.shape
    out = np.empty((int(n_tables), T, T))
    for t in range(int(n_tables)):
        W, U = rng.standard_normal((2, D, width)) / np.sqrt(D)  # (d_model, width) each
        v = rng.standard_normal(width)  # (width,)
        L = np.tanh((x @ W)[:, None, :] + (x @ U)[None, :, :]) @ v  # (T, T): $v\cdot\tanh(Wh_i + Uh_j)$
        out[t] = L / L.std() * spread
    return out


def key_sphere_spread(k: Array, keys: Sequence[int]) -> np.ndarray:
    r"""Gauge-free distance of the keys from one sphere: residual spread of :math:`\lVert k\rVert^2` after the best shift.

    Least squares :math:`\lVert k_j\rVert^2 \approx 2c\cdot k_j + b` over ``keys``; the residual's std over the
    mean squared distance to the centroid. 0 on a sphere, about :math:`\sqrt{2/d}` for Gaussian keys.

    Parameters
    ----------
    k : array, shape (..., S, d)
    keys : sequence of int, more than d + 1 of them

    Returns
    -------
    np.ndarray, shape (...)

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> u = rng.normal(size=(50, 3)); u /= np.linalg.norm(u, axis=1, keepdims=True)
    >>> float(key_sphere_spread(2 * u + 5.0, range(50))) < 1e-12, round(float(key_sphere_spread(rng.normal(size=(4000, 8)), range(4000))), 1)
    (True, 0.5)
    """
    ka = np.asarray(to_numpy(k), dtype=np.float64)
    idx = list(keys)
    if ka.ndim < 2 or len(idx) <= ka.shape[-1] + 1:
        raise ShapeError(f"k has shape {shape_str(ka)} and {len(idx)} keys; expected (..., S, d) and more than d + 1 keys")
    x = ka[..., idx, :]  # (..., n, d)
    x = x - x.mean(-2, keepdims=True)  # centred: the fit and the scale do not depend on the shift
    y = (x**2).sum(-1)  # (..., n)
    A = np.concatenate([x, np.ones(x.shape[:-1] + (1,))], -1)  # (..., n, d + 1)
    sol = np.linalg.pinv(A) @ y[..., None]  # (..., d + 1, 1) least squares, one fit per head
    res = y - (A @ sol)[..., 0]  # (..., n)
    return res.std(-1) / y.mean(-1)


def query_blind_share(scores: Array) -> np.ndarray:
    r"""Share of a score table's row-centred energy that does not depend on the query (its column effect).

    .. math:: \tilde L = L - \bar L_{i\cdot}, \quad c_j = \operatorname{mean}_i \tilde L_{ij}, \quad
        \text{share} = T\lVert c\rVert^2 / \lVert\tilde L\rVert_F^2

    Parameters
    ----------
    scores : array, shape (..., T, S)

    Returns
    -------
    np.ndarray, shape (...), in [0, 1]

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> L = rng.normal(size=(200, 200))
    >>> round(float(query_blind_share(L)), 3), round(float(query_blind_share(L + 5 * rng.normal(size=200))), 2)
    (0.006, 0.96)
    """
    L = np.asarray(to_numpy(scores), dtype=np.float64)
    if L.ndim < 2:
        raise ShapeError(f"scores has shape {shape_str(L)}; expected (..., T, S)")
    L = L - L.mean(-1, keepdims=True)  # (..., T, S) row-centred
    col = L.mean(-2, keepdims=True)  # (..., 1, S) the query-blind part
    return L.shape[-2] * (col**2).sum((-2, -1)) / np.maximum((L**2).sum((-2, -1)), 1e-300)


def diagonal_regauge(q: Array, k: Array, spread: float = 1.0, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    r"""A random diagonal change :math:`q \to Aq`, :math:`k \to A^{-1}k`, :math:`A = \operatorname{diag}(e^{z})`, :math:`z_m \sim N(0, \text{spread}^2)`.

    Every score stays; distances and norms move.

    Parameters
    ----------
    q : array, shape (..., T, d)
    k : array, shape (..., S, d)

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> q, k = rng.normal(size=(5, 4)), rng.normal(size=(7, 4))
    >>> qa, ka = diagonal_regauge(q, k)
    >>> bool(np.allclose(qa @ ka.T, q @ k.T)), bool(np.allclose(qa, q))
    (True, False)
    """
    qa, ka = (np.asarray(to_numpy(x), dtype=np.float64) for x in (q, k))
    if qa.ndim < 2 or qa.shape[-1] != ka.shape[-1]:
        raise ShapeError(f"q has shape {shape_str(qa)} and k {shape_str(ka)}; expected (..., T, d) and (..., S, d)")
    A = np.exp(spread * np.random.default_rng(seed).standard_normal(qa.shape[-1]))  # (d,) the diagonal
    return qa * A, ka / A
