r"""How correlated entries break :math:`\operatorname{Var}(q\cdot k) = d_k` (chapter 6's ``variance-dk`` flip).

With equicorrelated entries :math:`q_i = \sqrt{1-c}\,z_i + \sqrt{c}\,w` (unit variance, pairwise
correlation :math:`c`), and keys likewise,

.. math::

    \operatorname{Var}(q\cdot k) = d_k\bigl(1 + (d_k - 1)\,c^2\bigr),

the independence formula only at :math:`c = 0`. :func:`independence_rejected` finds the first :math:`c`
at which some width's estimate leaves the formula beyond its Monte-Carlo error.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Optional, Union

import numpy as np

from ..mechanics.properties import first_crossing
from .measures import VarianceSweep, dot_variance_standard_error

__all__ = ["CORRELATIONS", "correlated_dot_variance", "independence_rejected", "correlation_grid"]

#: The slider's correlations between two entries of a query (and of a key); 0 is initialisation.
CORRELATIONS = (0.0, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3)
#: The chapter's widths d_k = 1 .. 1024.
D_KS = tuple(2 ** np.arange(11))


def correlated_variance_theory(d_k: Union[float, Sequence[float], np.ndarray], c: float) -> np.ndarray:
    r""":math:`\operatorname{Var}(q\cdot k) = d_k(1 + (d_k - 1)c^2)` for equicorrelated unit-variance entries.

    Examples
    --------
    >>> correlated_variance_theory([1, 32, 1024], 0.0).tolist(), float(correlated_variance_theory(32, 0.5))
    ([1.0, 32.0, 1024.0], 280.0)
    """
    d = np.asarray(d_k, dtype=float)
    return d * (1.0 + (d - 1.0) * c**2)


def correlated_dot_variance(corrs: Sequence[float], d_ks: Sequence[int] = D_KS, n_samples: int = 10000,
                            seed: int = 0) -> list[VarianceSweep]:
    r"""Measured :math:`\operatorname{Var}(q\cdot k)` for entries with correlation :math:`c`, one sweep per ``c``.

    The independent parts are :func:`~attention_course.chapters.scaling.measures.variance_vs_dim`'s draws
    (at :math:`c = 0` its estimates exactly), the shared factors from generator ``(seed, d_k, 1)``:

    .. math::

        q\cdot k = (1-c)\,z\cdot z' + \sqrt{c(1-c)}\,\Bigl(w_k\sum_i z_i + w_q\sum_i z'_i\Bigr) + c\,d_k\,w_q w_k .

    ``theory`` and ``std_error`` are those of the independence formula :math:`d_k`.

    Examples
    --------
    >>> s0, s3 = correlated_dot_variance([0.0, 0.3], d_ks=[4, 64], n_samples=2000)
    >>> s0.empirical.round(0), (s3.empirical / correlated_variance_theory([4, 64], 0.3)).round(1)
    (array([ 4., 65.]), array([1.1, 1. ]))
    """
    corrs = [float(c) for c in corrs]
    if any(not 0.0 <= c < 1.0 for c in corrs):
        raise ValueError(f"corrs={corrs}; expected correlations c with 0 <= c < 1")
    dims = [int(d) for d in d_ks]
    if not dims or any(d < 1 for d in dims):
        raise ValueError(f"d_ks={list(d_ks)}; expected positive widths")
    parts = []  # per d_k: z.z', sum z, sum z', w_q, w_k, each (n_samples,)
    for d in dims:
        rng = np.random.default_rng([seed, d])
        zz, sq, sk = np.empty(n_samples), np.empty(n_samples), np.empty(n_samples)
        for start in range(0, n_samples, 4096):  # the chunks of variance_vs_dim: the same draws
            m = min(4096, n_samples - start)
            z, zk = rng.normal(size=(m, d)), rng.normal(size=(m, d))  # (m, d_k) each
            zz[start:start + m], sq[start:start + m], sk[start:start + m] = (z * zk).sum(-1), z.sum(-1), zk.sum(-1)
        w_q, w_k = np.random.default_rng([seed, d, 1]).normal(size=(2, n_samples))  # (n_samples,) each
        parts.append((zz, sq, sk, w_q, w_k))
    theory = np.array(dims, dtype=float)  # d_k sigma_q^2 sigma_k^2 with unit variances
    se = np.array([d * dot_variance_standard_error(d, n_samples) for d in dims])
    out = []
    for c in corrs:
        emp = [np.var((1 - c) * zz + math.sqrt(c * (1 - c)) * (w_k * sq + w_q * sk) + c * d * w_q * w_k)
               for d, (zz, sq, sk, w_q, w_k) in zip(dims, parts)]
        out.append(VarianceSweep(np.array(dims), np.array(emp), theory, se))
    return out


def bonferroni_z(n_tests: int, alpha: float = 0.01) -> float:
    r"""Two-sided normal critical value :math:`\Phi^{-1}(1 - \alpha / (2 n))` for ``n_tests`` estimates at family-wise level ``alpha``.

    Examples
    --------
    >>> round(bonferroni_z(11), 2), round(bonferroni_z(1, alpha=0.05), 2)
    (3.32, 1.96)
    """
    if n_tests < 1 or not 0.0 < alpha < 1.0:
        raise ValueError(f"n_tests={n_tests}, alpha={alpha}; expected n_tests >= 1 and 0 < alpha < 1")
    return NormalDist().inv_cdf(1.0 - alpha / (2 * n_tests))


def independence_rejected(sweeps: Sequence[VarianceSweep], alpha: float = 0.01) -> tuple[np.ndarray, float, Optional[int]]:
    r"""Largest deviation from the independence formula per sweep, the line, and the first sweep over it.

    Returns ``(max_z, z_star, first)``: ``max_z[s]`` is :math:`\max_{d_k} |\widehat{\operatorname{Var}} - d_k| / \mathrm{se}`,
    ``z_star`` the :func:`bonferroni_z` line, ``first`` the first sweep above it or ``None``.

    Examples
    --------
    >>> sweeps = correlated_dot_variance([0.0, 0.3], d_ks=[4, 64], n_samples=2000)
    >>> z, line, first = independence_rejected(sweeps)
    >>> bool(z[0] < line), first
    (True, 1)
    """
    max_z = np.array([float(np.abs((s.empirical - s.theory) / s.std_error).max()) for s in sweeps])
    z_star = bonferroni_z(len(sweeps[0].d_k), alpha)
    return max_z, z_star, first_crossing(max_z, z_star)


def minilm_correlation(ratio: float, d_k: int = 32) -> float:
    r"""The entry correlation :math:`c` at which :math:`\operatorname{Var}(q\cdot k)/d_k = ` ``ratio``:
    :math:`c = \sqrt{(\text{ratio} - 1)/(d_k - 1)}`.

    Examples
    --------
    >>> round(minilm_correlation(1.93), 3)
    0.173
    """
    if not ratio >= 1.0 or d_k < 2:
        raise ValueError(f"ratio={ratio}, d_k={d_k}; expected a ratio >= 1 (equicorrelation cannot lower the "
                         "variance) and d_k >= 2")
    return math.sqrt((ratio - 1.0) / (d_k - 1.0))


def correlation_grid(corrs: Sequence[float] = CORRELATIONS, minilm_ratio: Optional[float] = None,
                     minilm_d_k: int = 32) -> list[float]:
    """The slider's correlations: ``corrs`` sorted, with :func:`minilm_correlation` added when a ratio is given.

    Examples
    --------
    >>> [round(c, 3) for c in correlation_grid([0.0, 0.3, 0.1], minilm_ratio=1.93)]
    [0.0, 0.1, 0.173, 0.3]
    """
    extra = set() if minilm_ratio is None else {minilm_correlation(minilm_ratio, minilm_d_k)}
    return sorted({float(c) for c in corrs} | extra)
