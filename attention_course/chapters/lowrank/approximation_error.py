r"""What each efficient method exploits: its output error against exact attention, beside the structure of A.

Every approximation of :mod:`attention_course.core.efficient` and :mod:`attention_course.core.approximations`
gets the same budget and is measured, on seeded inputs of four kinds (:func:`benchmark_inputs`, shared with
:mod:`~attention_course.chapters.lowrank.benchmarks`), by :math:`\|O - O_{\text{exact}}\|_F / \|O_{\text{exact}}\|_F`
next to the effective rank, rank-``budget`` and top-``budget`` errors of :math:`A`. The slider's inputs
move from iid (:math:`t = 0`) to smooth (:math:`t = 1`):
:math:`(q, k, v)_t = \sqrt{1 - t}\,(q, k, v)_{\text{iid}} + \sqrt{t}\,(q, k, v)_{\text{smooth}}`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

from ...core import approximations as approx
from ...core import efficient as eff
from ...core.attention import causal_mask, scaled_dot_product_attention
from ...models.experiments import write_json
from ...models.records import DATA_DIR
from .spectra import effective_rank, rank_k_error, topk_error

__all__ = ["approximation_errors", "chunked_gaps", "lowrank_beats_baselines", "write_structure_sweep"]

DISTRIBUTIONS = ("iid", "iid-soft", "smooth")


def benchmark_inputs(n: int, d: int = 64, distribution: str = "iid", seed: int = 0,
                     dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, ...]:
    """Seeded ``q, k, v`` of shape ``(1, 1, n, d)`` from one of :data:`DISTRIBUTIONS`.

    ``smooth``: a curve :math:`x(t) = \\sum_{f=1}^{8} a_f \\cos(2\\pi f t + \\varphi_f)/f`
    in :math:`\\mathbb{R}^d` sampled at ``t = i / n``, each coordinate scaled to unit
    variance, then ``q, k, v = x W_q, x W_k, x W_v`` with random orthogonal ``W``.

    Examples
    --------
    >>> [t.shape for t in benchmark_inputs(8, d=4, distribution="smooth")]
    [torch.Size([1, 1, 8, 4]), torch.Size([1, 1, 8, 4]), torch.Size([1, 1, 8, 4])]
    """
    g = torch.Generator().manual_seed(seed)
    if distribution in ("iid", "iid-soft"):
        q, k, v = (torch.randn(1, 1, n, d, generator=g, dtype=torch.float64) for _ in range(3))
        c = 0.5 if distribution == "iid-soft" else 1.0  # logits q.k / sqrt(d) have std about c^2
        return (c * q).to(dtype), (c * k).to(dtype), v.to(dtype)
    if distribution != "smooth":
        raise ValueError(f"distribution={distribution!r}; expected one of {DISTRIBUTIONS}")
    t = torch.arange(n, dtype=torch.float64) / n  # (n,)
    f = torch.arange(1, 9, dtype=torch.float64)  # (8,) frequencies
    amp = torch.randn(8, d, generator=g, dtype=torch.float64) / f[:, None]  # (8, d)
    phase = 2 * math.pi * torch.rand(8, d, generator=g, dtype=torch.float64)  # (8, d)
    x = (amp * torch.cos(2 * math.pi * f[:, None] * t[:, None, None] + phase)).sum(dim=1)  # (n, d)
    x = (x - x.mean(0)) / x.std(0)
    Ws = torch.linalg.qr(torch.randn(3, d, d, generator=g, dtype=torch.float64))[0]  # (3, d, d)
    return tuple((x @ W).to(dtype)[None, None] for W in Ws)  # 3 x (1, 1, n, d)


def approximation_methods(budget: int = 32, num_features: int = 256) -> dict[str, Callable]:
    """The approximations compared in chapter 3, each ``fn(q, k, v) -> output``, at one budget.

    The window's half-width is ``budget // 2``; the last two entries are the trivial baselines
    (:data:`BASELINES`).

    Examples
    --------
    >>> list(approximation_methods(8))[2:4]
    ['Linformer, Gaussian E, k=8', 'Linformer, mean-pool, k=8']
    """
    return {
        "linear (elu+1)": lambda q, k, v: eff.linear_attention(q, k, v),
        f"Performer, {num_features} features":
            lambda q, k, v: approx.performer_attention(q, k, v, num_features=num_features, seed=0),
        f"Linformer, Gaussian E, k={budget}": lambda q, k, v: approx.linformer_attention(q, k, v, proj_dim=budget, seed=0),
        f"Linformer, mean-pool, k={budget}":
            lambda q, k, v: approx.linformer_attention(q, k, v, proj_dim=budget, projection="mean"),
        f"Nystrom, {budget} landmarks": lambda q, k, v: approx.nystrom_attention(q, k, v, num_landmarks=budget),
        f"local window, w={budget // 2}": lambda q, k, v: eff.local_window_attention(q, k, v, window=budget // 2),
        f"top-{budget} per query": lambda q, k, v: eff.topk_attention(q, k, v, top_k=budget),
        "uniform (mean of values)": mean_of_values,
        "zeros": lambda q, k, v: torch.zeros(*q.shape[:-1], v.shape[-1], dtype=v.dtype),
    }


def mean_of_values(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    r"""Uniform attention, the baseline that ignores the queries and keys: every output is :math:`\bar v`.

    .. math::

        O_t = \frac1S \sum_{s=1}^{S} v_s, \qquad q: (..., T, d_k),\ v: (..., S, d_v) \to (..., T, d_v)

    Examples
    --------
    >>> mean_of_values(torch.zeros(1, 2, 1), None, torch.tensor([[[1.0], [3.0]]]))
    tensor([[[2.],
             [2.]]])
    """
    return v.mean(dim=-2, keepdim=True).expand(*q.shape[:-1], v.shape[-1]).clone()  # (..., T, d_v)


def approximation_errors(n: int = 256, d: int = 64, budget: int = 32, seed: int = 1) -> dict[str, dict]:
    r"""Relative output error of every :func:`approximation_methods` entry, and the structure of exact A.

    Inputs: the :data:`DISTRIBUTIONS` in float64, and ``iid-sharp`` (``iid`` with q and k doubled).
    Returns ``errors[method][inputs]`` and ``structure[inputs]`` of the exact ``(n, n)`` matrix.

    Examples
    --------
    >>> out = approximation_errors(n=16, d=8, budget=16)
    >>> list(out["structure"]), out["errors"]["top-16 per query"]["iid"] < 1e-12  # top-16 of 16 keys is exact
    (['iid', 'iid-soft', 'smooth', 'iid-sharp'], True)
    """
    methods = approximation_methods(budget)
    inputs = {dist: benchmark_inputs(n, d, dist, seed=seed, dtype=torch.float64) for dist in DISTRIBUTIONS}
    q, k, v = inputs["iid"]
    inputs["iid-sharp"] = (2 * q, 2 * k, v)  # logits of standard deviation about 4
    errors: dict[str, dict] = {name: {} for name in methods}
    structure: dict[str, dict] = {}
    for dist, (q, k, v) in inputs.items():
        exact_out, A = scaled_dot_product_attention(q, k, v)  # (1, 1, n, d), (1, 1, n, n)
        A = A[0, 0].numpy()  # (n, n)
        structure[dist] = {"effective_rank": float(effective_rank(A)),
                           "rank_error": float(rank_k_error(A, budget)), "topk_error": float(topk_error(A, budget))}
        for name, fn in methods.items():
            errors[name][dist] = float((fn(q, k, v) - exact_out).norm() / exact_out.norm())
    return {"errors": errors, "structure": structure}


def chunked_gaps(n: int = 1024, d: int = 64, blocks: Sequence[int] = (64, 128, 1000),
                 causal_block: int = 128, seed: int = 1) -> dict:
    r"""Largest entrywise gap :math:`\max |O_{\text{chunked}} - O_{\text{exact}}|` per key block size.

    On float64 ``iid`` inputs; key ``"causal"`` is causal chunked attention's gap. Every gap is round-off.

    Examples
    --------
    >>> gaps = chunked_gaps(n=64, d=8, blocks=(16, 50), causal_block=16)
    >>> list(gaps), max(gaps.values()) < 1e-13
    ([16, 50, 'causal'], True)
    """
    q, k, v = benchmark_inputs(n, d, "iid", seed=seed, dtype=torch.float64)
    exact_out, _ = scaled_dot_product_attention(q, k, v)
    gaps: dict = {block: float((eff.chunked_attention(q, k, v, block_size=block) - exact_out).abs().max())
                  for block in blocks}
    causal_out, _ = scaled_dot_product_attention(q, k, v, mask=causal_mask(n, n))
    gaps["causal"] = float((eff.chunked_attention(q, k, v, block_size=causal_block, causal=True)
                            - causal_out).abs().max())
    return gaps


# ------------------------------------------------------------------ from iid to low-rank inputs (the slider)
#: The efficient-attention slider's mixing weights t: 0 = iid inputs, 1 = smooth (low-rank) inputs.
MIX = tuple(round(0.05 * i, 2) for i in range(21))
#: The two trivial answers of :func:`approximation_methods` that every method must beat.
BASELINES = ("uniform (mean of values)", "zeros")


def mixed_inputs(n: int, d: int, t: float, seed: int = 1) -> tuple[torch.Tensor, ...]:
    r"""``q, k, v`` (each ``(1, 1, n, d)``, float64) at mix ``t``: :math:`\sqrt{1-t}` iid plus :math:`\sqrt t` smooth.

    Examples
    --------
    >>> q, k, v = mixed_inputs(8, 4, 0.0)
    >>> bool(torch.equal(q, benchmark_inputs(8, 4, "iid", seed=1, dtype=torch.float64)[0]))
    True
    """
    if not 0 <= t <= 1:
        raise ValueError(f"t={t!r}; expected a mixing weight in [0, 1] (0 = iid, 1 = smooth)")
    iid = benchmark_inputs(n, d, "iid", seed=seed, dtype=torch.float64)
    smooth = benchmark_inputs(n, d, "smooth", seed=seed, dtype=torch.float64)
    return tuple(np.sqrt(1 - t) * a + np.sqrt(t) * b for a, b in zip(iid, smooth))  # 3 x (1, 1, n, d)


def structure_sweep(mix: Sequence[float] = MIX, n: int = 256, d: int = 64, budget: int = 32, seed: int = 1) -> dict:
    r"""Every method's relative output error, and the structure of exact ``A``, at each mix ``t``.

    Returns ``t``, ``errors[method]`` (one per t), ``effective_rank``, ``rank_error`` and ``config``.

    Examples
    --------
    >>> s = structure_sweep([0.0, 1.0], n=16, d=8, budget=4)
    >>> s["errors"]["zeros"], len(s["effective_rank"])
    ([1.0, 1.0], 2)
    """
    methods = approximation_methods(budget)
    errors: dict[str, list] = {name: [] for name in methods}
    erank, rank_err = [], []
    for t in mix:
        q, k, v = mixed_inputs(n, d, float(t), seed)
        exact, A = scaled_dot_product_attention(q, k, v)  # (1, 1, n, d), (1, 1, n, n)
        A = A[0, 0].numpy()  # (n, n)
        erank.append(float(effective_rank(A)))
        rank_err.append(float(rank_k_error(A, budget)))
        for name, fn in methods.items():
            errors[name].append(float((fn(q, k, v) - exact).norm() / exact.norm()))
    return {"t": [float(t) for t in mix], "errors": errors, "effective_rank": erank, "rank_error": rank_err,
            "config": {"n": n, "d": d, "budget": budget, "seed": seed}}


def low_rank_methods(sweep: dict) -> list[str]:
    """The sweep's low-rank methods that the chapter finds accurate on low-rank inputs: Nyström and
    mean-pooled Linformer (the untrained Gaussian-projection Linformer is left out).

    Examples
    --------
    >>> low_rank_methods({"errors": {"Nystrom, 8 landmarks": [], "Linformer, mean-pool, k=8": [],
    ...                              "Linformer, Gaussian E, k=8": [], "zeros": []}})
    ['Nystrom, 8 landmarks', 'Linformer, mean-pool, k=8']
    """
    return [m for m in sweep["errors"] if m.lower().startswith(("nystr", "linformer, mean-pool"))]


def lowrank_beats_baselines(sweep: dict, target: float | None = None) -> int | None:
    """First index from which, at every later mix, every low-rank method's error is below both trivial answers.

    With ``target``, below ``target`` instead (the chapter's error target, 0.1): where they become accurate.

    Examples
    --------
    >>> s = {"errors": {"Nystrom, 4 landmarks": [3.0, 0.5, 2.0, 0.4, 0.05], "Linformer, mean-pool, k=4": [0.7] * 5,
    ...                 "uniform (mean of values)": [0.8] * 5, "zeros": [1.0] * 5}}
    >>> lowrank_beats_baselines(s), lowrank_beats_baselines(s, target=0.1)
    (3, None)
    """
    errs, lowr = sweep["errors"], low_rank_methods(sweep)
    missing = [b for b in BASELINES if b not in errs]
    if not lowr or missing:
        raise ValueError(f"the sweep has methods {list(errs)}; expected Nyström, mean-pooled Linformer and the "
                         f"trivial answers {list(BASELINES)}")
    worst = np.max([errs[m] for m in lowr], axis=0)  # (mixes,) the worse low-rank method
    line = np.min([errs[b] for b in BASELINES], axis=0) if target is None else np.full(len(worst), target)
    good = worst < line
    for i in range(len(good)):
        if good[i:].all():
            return i
    return None


#: The ``efficient-attention`` slider's data: :func:`structure_sweep` with its defaults.
STRUCTURE_DATA = DATA_DIR / "slider_efficient_inputs.json"


def write_structure_sweep(path: Path = STRUCTURE_DATA) -> dict:
    """Run :func:`structure_sweep` with its defaults and store it at ``path`` (about a second)."""
    return write_json(structure_sweep(), path)
