r"""Does a head's graph move with the input? A matched fixed graph, sink heads as a bin, held-out sentences.

Chapter 5's ``learned-topology`` and ``unlike-gnns`` counts. A head putting at least half its
weight on the sinks is a *sink head*, a bin of its own; every other head is measured on its
content part (:func:`content_maps`), and bins are shares of all heads (:func:`bin_shares`). The
matched fixed graph for one length is the cross-entropy-optimal row-stochastic table, the mean
of the maps (:func:`fixed_table`),

.. math::

    \hat T = \arg\min_{T} -\frac1N \sum_s \sum_{i, j} A^{(s)}_{ij} \log T_{ij} = \frac1N \sum_s A^{(s)},

scored on held-out maps by the weight it misplaces, :math:`\tfrac12 \sum_j |A_{ij} - \hat T_{ij}|`
averaged over rows (:func:`table_miss`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from ...core._backend import Array, ShapeError, to_numpy
from ..heads.subspaces import total_variation
from ..lowrank.baselines import SINK_THRESHOLD, classify_heads, content_part, head_bins, sink_share
from .depth_probe import _SLOTS
from .gnn import shared_top_key

__all__ = ["bin_shares", "bin_sweep", "topology_verdict", "static_verdict"]


def template_halves(n_fit: int, n_held: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """Seeded template sentences in two sets with no word in common: ``n_fit`` to fit, ``n_held`` held out.

    Each slot's word list is cut in two (even and odd places), one half per set.

    Examples
    --------
    >>> fit, held = template_halves(3, 2, seed=0)
    >>> len(fit), len(held), fit[0].count(" ")
    (3, 2, 9)
    >>> set(" ".join(fit).split()) & set(" ".join(held).split())
    set()
    """
    rng = np.random.default_rng(seed)
    def draw(n: int, half: int) -> list[str]:
        return [" ".join(str(rng.choice(words[half::2])) for words in _SLOTS) + "." for _ in range(n)]
    return draw(n_fit, 0), draw(n_held, 1)


def content_maps(A: Array, sinks: Sequence[int], causal: bool = False) -> np.ndarray:
    r"""A head's content part: the sink rows and columns removed, each row renormalised, (..., m, m) float64.

    .. math::

        C_{ij} = \frac{A_{ij}}{\sum_{j' \notin \mathcal S} A_{ij'}}, \qquad i, j \notin \mathcal S

    ``A`` is (..., n, n); ``sinks`` e.g. ``[0, n - 1]`` ([CLS], [SEP]) or ``[0]``. A row with all its
    weight on the sinks gets uniform weights over the content keys it sees (``causal``: ``j <= i``).

    Examples
    --------
    >>> A = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.2, 0.2, 0.6]])  # causal, sink at 0
    >>> content_maps(A, [0], causal=True).round(2).tolist()
    [[1.0, 0.0], [0.25, 0.75]]
    >>> content_maps(np.array([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]), [0], causal=True).tolist()
    [[1.0, 0.0], [0.5, 0.5]]
    """
    a = np.asarray(to_numpy(A), dtype=float)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"A has shape {a.shape}; expected square maps (..., n, n)")
    n = a.shape[-1]
    keep = np.setdiff1d(np.arange(n), [int(p) % n for p in sinks])  # the content rows
    part = content_part(a[..., keep, :], sinks)
    m = len(keep)
    seen = np.tril(np.ones((m, m))) if causal else np.ones((m, m))  # (m, m) the content keys each row sees
    seen = seen / seen.sum(axis=-1, keepdims=True)
    return np.where(part.sink_rows[..., None], seen, part.weights)


def fixed_table(maps: Sequence[Array]) -> dict[int, np.ndarray]:
    r"""The matched fixed graph: per length :math:`m`, the mean of the (H, m, m) maps of that length.

    Examples
    --------
    >>> t = fixed_table([np.eye(2)[None], np.eye(2)[::-1][None]])
    >>> t[2].tolist()
    [[[0.5, 0.5], [0.5, 0.5]]]
    """
    by_length = defaultdict(list)
    for A in maps:
        a = np.asarray(to_numpy(A), dtype=float)
        if a.ndim != 3 or a.shape[-1] != a.shape[-2]:
            raise ShapeError(f"a map has shape {a.shape}; expected (H, m, m)")
        by_length[a.shape[-1]].append(a)
    if not by_length:
        raise ValueError("no maps to fit a table to")
    return {m: np.mean(group, axis=0) for m, group in by_length.items()}


def table_miss(table: dict[int, np.ndarray], maps: Sequence[Array]) -> np.ndarray:
    r"""Per head, the weight the table misplaces: total variation per row, mean over rows and maps, (H,).

    Examples
    --------
    >>> t = fixed_table([np.eye(2)[None]])
    >>> table_miss(t, [np.eye(2)[None], np.eye(2)[::-1][None]]).tolist()  # right once, wrong once
    [0.5]
    """
    out = []
    for A in maps:
        a = np.asarray(to_numpy(A), dtype=float)
        if a.shape[-1] not in table:
            raise ShapeError(f"a map of length {a.shape[-1]}; the table has lengths {sorted(table)}")
        out.append(total_variation(a, table[a.shape[-1]]).mean(axis=-1))  # (H,)
    return np.mean(out, axis=0)


def top_key_share(C: Array, skip: int = 0) -> np.ndarray:
    r"""Per head, the share of queries (rows from ``skip`` on) whose top key is the head's most common one, (H,).

    :math:`\max_c \frac1T \#\{i : \arg\max_j C_{ij} = c\}`; a GAT head (static attention) scores 1.

    Examples
    --------
    >>> C = np.array([[[1.0, 0.0, 0.0], [0.6, 0.4, 0.0], [0.1, 0.1, 0.8]]])  # causal content part
    >>> top_key_share(C, skip=1).tolist()
    [0.5]
    """
    c = np.asarray(to_numpy(C), dtype=float)[..., skip:, :]  # (H, T - skip, m)
    if c.ndim != 3 or c.shape[-2] == 0:
        raise ShapeError(f"C has shape {np.shape(C)}; expected (H, T, m) with more than {skip} rows")
    return shared_top_key(c)


def bin_shares(has_property: Array, sink_shares: Array, sink_threshold: float = SINK_THRESHOLD) -> dict[str, float]:
    """Shares of ALL heads with the property, without it, and sink heads (they sum to 1).

    Examples
    --------
    >>> bin_shares(np.array([True, False, True, True]), np.array([0.1, 0.2, 0.6, 0.0]))
    {'property': 0.5, 'no property': 0.25, 'sink': 0.25}
    """
    return head_bins(classify_heads(np.asarray(has_property, dtype=bool),
                                    np.asarray(sink_shares, dtype=float), sink_threshold))


def bin_sweep(values: Array, sink_shares: Array, lines: Sequence[float], above: bool = True) -> np.ndarray:
    """:func:`bin_shares` at every line: property = value >= line (``above``) or < line; (len(lines), 3).

    Columns in the order of :data:`~attention_course.chapters.lowrank.baselines.HEAD_BINS`.

    Examples
    --------
    >>> bin_sweep(np.array([0.1, 0.3, 0.5]), np.array([0.0, 0.0, 0.9]), [0.2, 0.4]).tolist()
    [[0.3333333333333333, 0.3333333333333333, 0.3333333333333333], [0.0, 0.6666666666666666, 0.3333333333333333]]
    """
    v = np.asarray(to_numpy(values), dtype=float)
    rows = []
    for t in lines:
        prop = v >= round(t, 12) if above else v < round(t, 12)
        rows.append(list(bin_shares(prop, sink_shares).values()))
    return np.array(rows)


def head_sink_shares(maps: Sequence[Array], sinks: Sequence[int]) -> np.ndarray:
    """Per head, the sink share (mean weight on ``sinks``) averaged over the maps, (H,).

    Examples
    --------
    >>> head_sink_shares([np.array([[[0.9, 0.1], [0.5, 0.5]]])], [0]).tolist()
    [0.7]
    """
    return np.mean([sink_share(np.asarray(to_numpy(A), dtype=float), sinks) for A in maps], axis=0)


def topology_verdict(bins: dict[str, float]) -> str:
    """``learned-topology``'s rule on MiniLM's bins (:func:`bin_shares`).

    ``"holds"`` if heads with the property are at least half of all heads; ``"wrong as stated"``
    if those without are at least as many; otherwise ``"holds when"``.

    Examples
    --------
    >>> topology_verdict({"property": 0.5, "no property": 0.1, "sink": 0.4})
    'holds'
    >>> topology_verdict({"property": 0.3, "no property": 0.1, "sink": 0.6})
    'holds when'
    >>> topology_verdict({"property": 0.2, "no property": 0.2, "sink": 0.6})
    'wrong as stated'
    """
    if bins["property"] >= 0.5:
        return "holds"
    return "wrong as stated" if bins["no property"] >= bins["property"] else "holds when"


def static_verdict(bins: dict[str, float]) -> str:
    """``unlike-gnns``' rule on MiniLM's bins, the property being static-like (one shared top key).

    ``"holds"`` if static-like heads are under half of all heads and fewer than those without the
    property; otherwise ``"holds when"``.

    Examples
    --------
    >>> static_verdict({"property": 0.1, "no property": 0.3, "sink": 0.6})
    'holds'
    >>> static_verdict({"property": 0.3, "no property": 0.3, "sink": 0.4})
    'holds when'
    """
    return "holds" if bins["property"] < 0.5 and bins["property"] < bins["no property"] else "holds when"
