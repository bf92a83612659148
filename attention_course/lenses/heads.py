r"""What single heads can express, how heads relate to the SVD, and what real heads do.

Three groups of tools, all pure functions (chapter 4):

* **The low-rank bottleneck** (Bhojanapalli et al. 2020). A head of dimension
  ``r`` produces :math:`\operatorname{softmax}(QK^\top)` with :math:`Q \in \mathbb{R}^{T\times r}`,
  :math:`K \in \mathbb{R}^{S\times r}`. :func:`fit_low_rank_attention` finds the
  closest such pattern to a target :math:`P` in KL divergence. With a fixed input
  :math:`X` of full row rank, :math:`Q = XW_Q` can be any matrix, so this is also the
  best a head :math:`\operatorname{softmax}(XW_QW_K^\top X^\top)` can do.
* **Heads against the SVD.** :func:`form_singular_values` (each head's bilinear form
  :math:`W_Q^{(i)}W_K^{(i)\top}` via its small factors), :func:`smallest_head_angles`
  (how much heads' subspaces overlap), :func:`head_score_matrices` and
  :func:`combine_head_patterns` (the softmax does not add up across heads).
* **Head roles** in a pretrained encoder (Clark et al. 2019): :func:`head_role_scores`
  and :func:`top_heads`, plus plot helpers for galleries of heads.

The multi-head machinery itself (splitting, ranks, principal angles,
reparametrisation) lives in :mod:`attention_course.core.multihead`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple, Optional, Union

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure

from ..core._backend import Array, ShapeError, shape_str, to_numpy
from ..core.attention import resolve_scale
from ..core.multihead import split_head_weights

__all__ = [
    "dirichlet_attention", "near_permutation", "row_kl", "LowRankFit", "fit_low_rank_attention",
    "form_singular_values", "smallest_head_angles", "random_subspace_angles", "head_score_matrices",
    "combine_head_patterns", "total_variation", "ROLES", "head_role_scores", "uniform_role_baselines",
    "top_heads", "mha_parameter_count", "plot_bottleneck", "plot_form_spectra", "plot_head_gallery",
    "plot_role_scores",
]  # fmt: skip


# ------------------------------------------------------------ the low-rank bottleneck
def dirichlet_attention(n: int, alpha: float = 1.0, seed: int = 0) -> np.ndarray:
    """A dense random attention matrix: each of the ``n`` rows drawn from Dirichlet(``alpha``).

    Examples
    --------
    >>> P = dirichlet_attention(4, seed=0)
    >>> P.shape, bool(np.allclose(P.sum(1), 1))
    ((4, 4), True)
    """
    return np.random.default_rng(seed).dirichlet(np.full(n, float(alpha)), size=n)  # (n, n)


def near_permutation(n: int, mass: float = 0.99, seed: int = 0) -> np.ndarray:
    """Row ``i`` puts ``mass`` on key ``perm[i]`` (a seeded permutation) and spreads the rest evenly.

    Examples
    --------
    >>> P = near_permutation(4, mass=0.97, seed=0)
    >>> P.max(1).round(2).tolist(), P.min(1).round(2).tolist()
    ([0.97, 0.97, 0.97, 0.97], [0.01, 0.01, 0.01, 0.01])
    """
    if not 0 < mass < 1 or n < 2:
        raise ValueError(f"mass={mass} and n={n}; expected 0 < mass < 1 and n >= 2")
    P = np.full((n, n), (1 - mass) / (n - 1))
    P[np.arange(n), np.random.default_rng(seed).permutation(n)] = mass
    return P  # (n, n)


def row_kl(P: Array, logits: Array) -> Array:
    r"""Mean over rows of :math:`\mathrm{KL}(P_i \,\|\, \operatorname{softmax}(L_i))` (nats).

    .. math:: \frac1T \sum_i \sum_j P_{ij} \left(\log P_{ij} - \log \operatorname{softmax}(L_i)_j\right)

    ``0 log 0`` counts as 0. numpy in, float out; torch in, a 0-d tensor out (differentiable).

    Examples
    --------
    >>> P = np.array([[0.5, 0.5], [1.0, 0.0]])
    >>> round(row_kl(P, np.zeros((2, 2))), 4)          # (0 + log 2) / 2
    0.3466
    """
    P_t, L_t = torch.as_tensor(P), torch.as_tensor(logits)
    if P_t.shape != L_t.shape or P_t.ndim != 2:
        raise ShapeError(f"P has shape {shape_str(P_t)} and logits {shape_str(L_t)}; "
                         f"expected the same (T, S)")
    log_q = torch.log_softmax(L_t.to(P_t.dtype), dim=-1)  # (T, S), normalised over the keys
    kl = (torch.xlogy(P_t, P_t) - P_t * log_q).sum(-1).mean()  # sum over keys, mean over queries
    return kl if isinstance(P, torch.Tensor) or isinstance(logits, torch.Tensor) else float(kl)


class LowRankFit(NamedTuple):
    """Result of :func:`fit_low_rank_attention`: the KL, the factors and the fitted pattern."""

    kl: float
    q: np.ndarray  # (T, r)
    k: np.ndarray  # (S, r)
    weights: np.ndarray  # (T, S) = softmax(q k^T)


def fit_low_rank_attention(P: Array, r: int, restarts: int = 2, seed: int = 0,
                           max_iter: int = 100) -> LowRankFit:
    r"""The closest single-head pattern of rank ``r`` to a target ``P``, in KL.

    .. math:: \min_{Q \in \mathbb{R}^{T\times r},\, K \in \mathbb{R}^{S\times r}}
              \frac1T\sum_i \mathrm{KL}\!\left(P_i \,\big\|\, \operatorname{softmax}(QK^\top)_i\right)

    Solved with L-BFGS in float64. The first start is the best rank-``r`` SVD
    approximation of :math:`\log P` with each row centred (softmax ignores row
    shifts); the other ``restarts - 1`` starts are seeded Gaussians. The best run
    is returned (an upper bound on the global minimum). Any ``P`` with positive
    entries is matched exactly at ``r = S - 1``; ``r = 0`` gives uniform rows.

    Parameters
    ----------
    P : shape (T, S), rows are distributions with positive entries
    r : int, 0 <= r <= S
    restarts, seed, max_iter : the number of starts, their seed, L-BFGS iterations per start

    Examples
    --------
    >>> P = dirichlet_attention(6, seed=0)
    >>> [round(fit_low_rank_attention(P, r).kl, 3) for r in (0, 5)]
    [0.332, 0.0]
    """
    P_t = torch.as_tensor(to_numpy(P), dtype=torch.float64)
    if P_t.ndim != 2 or (P_t <= 0).any() or not torch.allclose(P_t.sum(-1), torch.ones(1, dtype=P_t.dtype)):
        raise ValueError(f"P has shape {shape_str(P_t)}; expected a (T, S) matrix with positive "
                         f"entries whose rows sum to 1")
    T, S = P_t.shape
    if int(r) != r or not 0 <= r <= S:
        raise ValueError(f"r={r!r} with P of shape {(T, S)}; expected an integer 0 <= r <= S={S}")
    if r == 0:
        return LowRankFit(row_kl(P_t, torch.zeros(T, S)).item(), np.zeros((T, 0)), np.zeros((S, 0)),
                          np.full((T, S), 1.0 / S))
    log_p = torch.log(P_t)
    U, s, Vh = torch.linalg.svd(log_p - log_p.mean(-1, keepdim=True))  # row-centred log P
    starts = [(U[:, :r] * s[:r].sqrt(), Vh[:r].T * s[:r].sqrt())]  # (T, r), (S, r)
    g = torch.Generator().manual_seed(int(seed))
    starts += [(torch.randn(T, r, generator=g, dtype=torch.float64),
                torch.randn(S, r, generator=g, dtype=torch.float64)) for _ in range(restarts - 1)]
    best = None
    for q0, k0 in starts:
        q, k = q0.contiguous().requires_grad_(), k0.contiguous().requires_grad_()
        opt = torch.optim.LBFGS([q, k], lr=1.0, max_iter=max_iter, history_size=50,
                                tolerance_grad=1e-10, tolerance_change=1e-14, line_search_fn="strong_wolfe")

        def closure():
            opt.zero_grad()
            loss = row_kl(P_t, q @ k.T)  # q k^T: (T, S) logits of rank <= r
            loss.backward()
            return loss

        opt.step(closure)
        with torch.no_grad():
            kl = row_kl(P_t, q @ k.T).item()
        if best is None or kl < best[0]:
            best = (kl, q.detach(), k.detach())
        if kl < 1e-12:
            break  # an exact fit: no restart can improve on it
    kl, q, k = best
    return LowRankFit(max(kl, 0.0), q.numpy(), k.numpy(), torch.softmax(q @ k.T, -1).numpy())


# ------------------------------------------------------------ heads against the SVD
def form_singular_values(W_q: Array, W_k: Array, num_heads: int) -> np.ndarray:
    r"""Singular values of every head's bilinear form :math:`M_i = W_Q^{(i)} W_K^{(i)\top}`, shape (h, d_k).

    Computed from the thin factors: with QR factorisations :math:`W_Q^{(i)} = Q_a R_a`
    and :math:`W_K^{(i)} = Q_b R_b`, :math:`M_i = Q_a (R_a R_b^\top) Q_b^\top`, so the
    singular values of :math:`M_i` (d_model x d_model) are those of the small
    :math:`R_a R_b^\top` (d_k x d_k). Descending in each row.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> W_q, W_k = rng.normal(size=(2, 16, 8))
    >>> s = form_singular_values(W_q, W_k, 4)
    >>> s.shape, int((s > 1e-10).sum(1).min())          # 4 heads, each of rank d_k = 2
    ((4, 2), 2)
    """
    Wq_h = torch.as_tensor(to_numpy(split_head_weights(W_q, num_heads)), dtype=torch.float64)  # (h, d, d_k)
    Wk_h = torch.as_tensor(to_numpy(split_head_weights(W_k, num_heads)), dtype=torch.float64)  # (h, d, d_k)
    R_a, R_b = torch.linalg.qr(Wq_h).R, torch.linalg.qr(Wk_h).R  # (h, d_k, d_k) each
    return torch.linalg.svdvals(R_a @ R_b.transpose(1, 2)).numpy()  # (h, d_k)


def _cosines(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """Cosines of the principal angles between column spaces, batched: (..., n, p) -> (..., p)."""
    Q_a, Q_b = torch.linalg.qr(A).Q, torch.linalg.qr(B).Q  # orthonormal bases
    return torch.linalg.svdvals(Q_a.transpose(-2, -1) @ Q_b).clamp(0.0, 1.0)  # (..., p), descending


def smallest_head_angles(W: Array, num_heads: int, axis: int = 1) -> np.ndarray:
    r"""Smallest principal angle (radians) between every pair of heads' subspaces, shape (h, h).

    Head ``i``'s subspace is the span of its columns of ``W`` (``axis=1``: the input
    directions a query/key/value projection reads) or of its rows (``axis=0``, for
    ``W_o``). :math:`\theta_{\min} = \arccos \sigma_{\max}(Q_i^\top Q_j)`; 0 means the
    heads share a direction. The diagonal is 0. (All angles, accurate for tiny ones:
    :func:`~attention_course.core.multihead.head_subspace_angles`.)

    Examples
    --------
    >>> W = np.eye(6)[:, [0, 1, 2, 0]]                          # heads span {e0, e1} and {e2, e0}
    >>> np.degrees(smallest_head_angles(W, 2)).round(1).tolist()
    [[0.0, 0.0], [0.0, 0.0]]
    """
    blocks = torch.as_tensor(to_numpy(split_head_weights(W, num_heads, axis)), dtype=torch.float64)
    blocks = blocks if axis == 1 else blocks.transpose(1, 2)  # (h, n, d_head): subspaces as columns
    h = blocks.shape[0]
    A = blocks[:, None].expand(h, h, *blocks.shape[1:])  # (h, h, n, d_head): head i
    B = blocks[None, :].expand(h, h, *blocks.shape[1:])  # (h, h, n, d_head): head j
    theta = torch.arccos(_cosines(A, B)[..., 0]).numpy()  # (h, h), largest cosine = smallest angle
    np.fill_diagonal(theta, 0.0)
    return theta


def random_subspace_angles(n: int, p: int, n_pairs: int = 100, seed: int = 0) -> np.ndarray:
    """Smallest principal angles (radians) between ``n_pairs`` pairs of random ``p``-dim subspaces of R^n.

    The baseline for :func:`smallest_head_angles`: Gaussian matrices span uniformly random subspaces.

    Examples
    --------
    >>> a = random_subspace_angles(3, 2, n_pairs=5)         # two planes in R^3 always share a line
    >>> bool(np.allclose(a, 0, atol=1e-6))
    True
    """
    g = torch.Generator().manual_seed(int(seed))
    A, B = torch.randn(2, n_pairs, n, p, generator=g, dtype=torch.float64)  # (n_pairs, n, p) each
    return torch.arccos(_cosines(A, B)[..., 0]).numpy()  # (n_pairs,)


def head_score_matrices(x: Array, W_q: Array, W_k: Array, num_heads: int,
                        b_q: Optional[Array] = None, b_k: Optional[Array] = None) -> np.ndarray:
    r"""Each head's scaled scores, shape (h, T, T).

    .. math:: S_i = (XW_Q^{(i)} + b_Q^{(i)})(XW_K^{(i)} + b_K^{(i)})^\top / \sqrt{d_k}

    Parameters
    ----------
    x : shape (T, d_model), one sequence
    W_q, W_k : shape (d_model, h*d_k);  b_q, b_k : optional, shape (h*d_k,)

    Returns
    -------
    numpy.ndarray of float64, shape (h, T, T); ``softmax(S_i)`` is head ``i``'s attention.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x, W_q, W_k = rng.normal(size=(5, 8)), rng.normal(size=(8, 8)), rng.normal(size=(8, 8))
    >>> S = head_score_matrices(x, W_q, W_k, 4)
    >>> S.shape, bool(np.allclose(S.sum(0), x @ W_q @ W_k.T @ x.T / np.sqrt(2)))   # heads add up
    ((4, 5, 5), True)
    """
    x, W_q, W_k = (np.asarray(to_numpy(a), dtype=float) for a in (x, W_q, W_k))
    if x.ndim != 2 or W_q.shape != W_k.shape or W_q.shape[0] != x.shape[1] or W_q.shape[1] % num_heads:
        raise ShapeError(f"x has shape {x.shape}, W_q {W_q.shape}, W_k {W_k.shape}; expected (T, d_model) "
                         f"and two (d_model, h*d_k) with h={num_heads} dividing h*d_k")
    q = x @ W_q + (0.0 if b_q is None else to_numpy(b_q))  # (T, h*d_k)
    k = x @ W_k + (0.0 if b_k is None else to_numpy(b_k))  # (T, h*d_k)
    T, d_k = x.shape[0], W_q.shape[1] // num_heads
    q = q.reshape(T, num_heads, d_k).transpose(1, 0, 2)  # (h, T, d_k)
    k = k.reshape(T, num_heads, d_k).transpose(1, 0, 2)  # (h, T, d_k)
    return q @ k.transpose(0, 2, 1) * resolve_scale(d_k)  # (h, T, T)


def _softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)  # normalised over the last axis (keys)


def combine_head_patterns(scores: Array) -> dict[str, np.ndarray]:
    r"""Three ways to merge ``h`` heads' scores (h, T, S) into one pattern (T, S).

    * ``"softmax_of_sum"``: :math:`\operatorname{softmax}(\sum_i S_i)`, the pattern of one head
      whose bilinear form is the sum of the heads' forms;
    * ``"mean_of_softmaxes"``: :math:`\frac1h\sum_i \operatorname{softmax}(S_i)`, the heads'
      patterns averaged;
    * ``"normalised_product"``: :math:`\prod_i \operatorname{softmax}(S_i)`, each row renormalised.
      It equals ``softmax_of_sum`` exactly: summing scores multiplies patterns.

    Examples
    --------
    >>> S = np.array([[[4.0, 0.0]], [[0.0, 4.0]]])             # two heads that disagree
    >>> c = combine_head_patterns(S)
    >>> c["softmax_of_sum"].round(3).tolist(), c["mean_of_softmaxes"].round(3).tolist()
    ([[0.5, 0.5]], [[0.5, 0.5]])
    """
    s = np.asarray(to_numpy(scores), dtype=float)
    if s.ndim != 3:
        raise ShapeError(f"scores have shape {s.shape}; expected (h, T, S)")
    heads = _softmax(s)  # (h, T, S)
    log_prod = np.log(heads).sum(0)  # (T, S): log of the product of the heads' weights
    return {"softmax_of_sum": _softmax(s.sum(0)), "mean_of_softmaxes": heads.mean(0),
            "normalised_product": _softmax(log_prod)}


def total_variation(P: Array, Q: Array) -> float:
    r"""Mean over rows of the total-variation distance :math:`\frac12\sum_j |P_{ij} - Q_{ij}|` (0 to 1).

    Examples
    --------
    >>> total_variation(np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]]))
    1.0
    """
    P, Q = np.asarray(to_numpy(P), dtype=float), np.asarray(to_numpy(Q), dtype=float)
    if P.shape != Q.shape:
        raise ShapeError(f"P has shape {P.shape} and Q {Q.shape}; expected the same shape (..., S)")
    return float(0.5 * np.abs(P - Q).sum(-1).mean())


def mha_parameter_count(d_model: int, num_heads: int, bias: bool = True) -> int:
    r"""Parameters of multi-head attention with :math:`d_k = d_v = d_{model}/h`: :math:`4d^2 (+ 4d)`.

    Each head has :math:`3 \cdot d \cdot d/h` projection weights and :math:`d/h` rows of :math:`W_O`,
    so the count does not depend on ``num_heads``: heads split the width, they do not add to it.

    Examples
    --------
    >>> mha_parameter_count(384, 12), mha_parameter_count(384, 1)
    (591360, 591360)
    """
    if num_heads < 1 or d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return 4 * d_model * d_model + (4 * d_model if bias else 0)


# ------------------------------------------------------------ head roles (Clark et al. 2019)
ROLES = ("previous token", "next token", "[CLS]", "[SEP]", "punctuation", "broad")


def _is_punct(token: str) -> bool:
    return not token.startswith("[") and not any(c.isalnum() for c in token)


def head_role_scores(maps: Union[Array, Sequence[Array]], tokens: Sequence) -> dict[str, np.ndarray]:
    r"""Score every head for six roles, averaged over the words of one or more texts.

    For a map :math:`A` (rows = queries) and the query rows :math:`i` of the words
    between ``[CLS]`` (position 0) and ``[SEP]`` (position n-1):

    ============== =====================================================================
    previous token :math:`A_{i,i-1}`
    next token     :math:`A_{i,i+1}`
    [CLS], [SEP]   :math:`A_{i,0}`, :math:`A_{i,n-1}`
    punctuation    :math:`\sum_{j \in \text{punct}} A_{ij}` (tokens with no letter or digit)
    broad          :math:`H(A_i)/\log n`: 1 for uniform attention, 0 for one key
    ============== =====================================================================

    Parameters
    ----------
    maps : shape (L, H, n, n), or a list of them (one per text, n may differ)
    tokens : list of str (length n), or a list of such lists

    Returns
    -------
    dict role -> numpy.ndarray (L, H), the mean over all words of all texts.

    Examples
    --------
    >>> toks = ["[CLS]", "a", "b", ".", "[SEP]"]
    >>> prev = np.eye(5, k=-1)[None, None]; prev[..., 0, 0] = 1          # each word reads i - 1
    >>> s = head_role_scores(prev, toks)
    >>> float(s["previous token"][0, 0]), float(s["next token"][0, 0]), float(s["[CLS]"][0, 0])
    (1.0, 0.0, 0.3333333333333333)
    """
    single = isinstance(tokens[0], str) if len(tokens) else True
    maps_list, tokens_list = ([maps], [tokens]) if single else (list(maps), list(tokens))
    sums, count = {role: 0.0 for role in ROLES}, 0
    for A, toks in zip(maps_list, tokens_list):
        A = np.asarray(to_numpy(A), dtype=float)
        n = len(toks)
        if A.ndim != 4 or A.shape[-2:] != (n, n) or n < 3 or toks[0] != "[CLS]" or toks[-1] != "[SEP]":
            raise ShapeError(f"maps have shape {A.shape} for {n} tokens; expected (L, H, {n}, {n}) and "
                             f"tokens that start with [CLS] and end with [SEP] around at least one word")
        i = np.arange(1, n - 1)  # the words' rows
        rows = A[:, :, i]  # (L, H, n-2, n)
        punct = np.array([_is_punct(t) for t in toks])  # (n,)
        entropy = -(rows * np.log(np.clip(rows, 1e-300, None))).sum(-1)  # (L, H, n-2) nats
        per_row = {"previous token": A[:, :, i, i - 1], "next token": A[:, :, i, i + 1],
                   "[CLS]": rows[..., 0], "[SEP]": rows[..., n - 1],
                   "punctuation": rows[..., punct].sum(-1), "broad": entropy / np.log(n)}
        for role in ROLES:
            sums[role] = sums[role] + per_row[role].sum(-1)  # (L, H)
        count += n - 2
    return {role: sums[role] / count for role in ROLES}


def uniform_role_baselines(tokens: Sequence) -> dict[str, float]:
    """What :func:`head_role_scores` gives for uniform attention on the same texts (the chance level).

    Examples
    --------
    >>> round(uniform_role_baselines(["[CLS]", "a", "b", ".", "[SEP]"])["punctuation"], 3)
    0.2
    """
    tokens_list = [tokens] if isinstance(tokens[0], str) else list(tokens)
    n = np.array([len(t) for t in tokens_list], dtype=float)
    words = n - 2  # rows per text
    n_punct = np.array([sum(map(_is_punct, t)) for t in tokens_list])
    chance = float((words / n).sum() / words.sum())  # one key out of n, weighted by rows
    return {"previous token": chance, "next token": chance, "[CLS]": chance, "[SEP]": chance,
            "punctuation": float((words * n_punct / n).sum() / words.sum()), "broad": 1.0}


def top_heads(scores: Mapping[str, np.ndarray]) -> dict[str, tuple[int, int, float]]:
    """For each role, the (layer, head, score) of the highest-scoring head (0-based indices).

    Examples
    --------
    >>> top_heads({"broad": np.array([[0.1, 0.9], [0.3, 0.2]])})
    {'broad': (0, 1, 0.9)}
    """
    out = {}
    for role, s in scores.items():
        layer, head = np.unravel_index(int(np.argmax(s)), s.shape)
        out[role] = (int(layer), int(head), float(s[layer, head]))
    return out


# ------------------------------------------------------------ figures
def plot_bottleneck(ranks: Sequence[int], curves: Mapping[str, Sequence[float]], title: str = "",
                    floor: float = 1e-4) -> Figure:
    """Minimum KL against head dimension ``r``, one line per target, on a log axis.

    Values below ``floor`` (an exact fit) are drawn on the floor with a hollow marker.
    """
    fig, ax = plt.subplots(figsize=(6.2, 4.0), layout="constrained")
    for (name, kl), marker in zip(curves.items(), "osD^v"):
        kl = np.asarray(kl, dtype=float)
        line, = ax.plot(ranks, np.maximum(kl, floor), marker=marker, label=name)
        exact = kl < floor
        ax.plot(np.asarray(ranks)[exact], np.full(exact.sum(), floor), marker=marker, ls="none",
                mfc="white", mec=line.get_color(), ms=9)
    ax.set_yscale("log")
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(ranks), labels=[str(r) for r in ranks])
    ax.axhline(floor, color="0.6", lw=0.8, ls=":")
    ax.text(ranks[0], floor * 1.3, "exact fit (KL < %.0e)" % floor, fontsize=8, color="0.4")
    ax.set_xlabel("head dimension r (rank of $QK^\\top$)")
    ax.set_ylabel("minimum mean KL (nats)")
    ax.set_title(title)
    ax.legend()
    ax.grid(alpha=0.3, which="both")
    return fig


def plot_form_spectra(full: Array, heads: Array, title: str = "") -> Figure:
    """Singular values of the full bilinear form (one line) and of each head's form (thin lines)."""
    full, heads = to_numpy(full), to_numpy(heads)
    fig, ax = plt.subplots(figsize=(6.8, 4.0), layout="constrained")
    for i, s in enumerate(heads):
        ax.plot(np.arange(1, len(s) + 1), s, color="tab:orange", lw=0.9, alpha=0.7,
                label="each head $W_Q^{(i)}W_K^{(i)\\top}$" if i == 0 else None)
    ax.plot(np.arange(1, len(full) + 1), full, color="tab:blue", lw=2, label="full form $W_QW_K^\\top$")
    ax.axvline(heads.shape[1], color="0.5", ls="--", lw=0.8)
    ax.text(heads.shape[1] * 1.05, full.max() / 2, f"$d_k$ = {heads.shape[1]}", fontsize=9, color="0.3")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("index of the singular value")
    ax.set_ylabel("singular value")
    ax.set_title(title)
    ax.legend()
    ax.grid(alpha=0.3, which="both")
    return fig


def plot_head_gallery(panels: Mapping[str, tuple], ncols: int = 3, vmax: float = 1.0,
                      title: str = "", colorbar_label: str = "attention weight",
                      panel_size: float = 3.5) -> Figure:
    """A grid of attention heatmaps sharing one colour scale (capped at ``vmax``).

    ``panels`` maps a panel title to ``(matrix (T, S), tokens or None)`` (tokens label both axes).
    When every panel has the same tokens, only the outer panels carry tick labels.
    ``panel_size`` is the height of one panel in inches.
    """
    n = len(panels)
    ncols = min(ncols, n)
    nrows = -(-n // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=((panel_size + 0.1) * ncols + 0.8, panel_size * nrows),
                             layout="constrained", squeeze=False)
    token_lists = [None if t is None else list(t) for _, t in panels.values()]
    shared = all(t == token_lists[0] for t in token_lists) and n == nrows * ncols
    for ax, (name, (m, toks)) in zip(axes.flat, panels.items()):
        im = ax.imshow(to_numpy(m), cmap="viridis", vmin=0.0, vmax=vmax)
        ax.set_title(name, fontsize=10)
        if toks is not None:
            ax.set_xticks(range(len(toks)), labels=list(toks), rotation=90, fontsize=7)
            ax.set_yticks(range(len(toks)), labels=list(toks), fontsize=7)
        ax.set_xlabel("key (attended to)", fontsize=9)
        ax.set_ylabel("query", fontsize=9)
        if shared:
            ax.label_outer()  # tick labels and axis labels only on the left column and bottom row
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.colorbar(im, ax=axes, shrink=0.7, label=colorbar_label)
    if title:
        fig.suptitle(title)
    return fig


def plot_role_scores(scores: Mapping[str, np.ndarray], ncols: int = 3, title: str = "") -> Figure:
    """One layer x head heatmap per role on a shared 0-1 colour scale; layers and heads counted from 1."""
    n = len(scores)
    ncols = min(ncols, n)
    nrows = -(-n // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.9 * ncols + 0.8, 2.5 * nrows), layout="constrained",
                             squeeze=False)
    for ax, (role, s) in zip(axes.flat, scores.items()):
        im = ax.imshow(s, cmap="magma", vmin=0.0, vmax=1.0, aspect="auto")
        ax.set_title(role, fontsize=10)
        ax.set_xticks(range(s.shape[1]), labels=[str(h + 1) for h in range(s.shape[1])], fontsize=7)
        ax.set_yticks(range(s.shape[0]), labels=[str(layer + 1) for layer in range(s.shape[0])], fontsize=7)
        ax.set_xlabel("head", fontsize=9)
        ax.set_ylabel("layer", fontsize=9)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.colorbar(im, ax=axes, shrink=0.8, label="score")
    if title:
        fig.suptitle(title)
    return fig
