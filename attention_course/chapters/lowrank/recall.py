r"""Associative recall without training: store n key-value pairs, query with a stored key.

Recall is correct when the stored value nearest (by cosine) to the output for :math:`q = k_i` is
:math:`v_i`. Linear attention (:math:`\phi = \operatorname{elu} + 1`) keeps one :math:`d \times d_v`
state, so recall must degrade once :math:`n` exceeds :math:`d`; softmax attention keeps all pairs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["recall_accuracy", "breaking_n"]


def _elu1(x: np.ndarray) -> np.ndarray:
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))  # elu(x) + 1 > 0


def recall_accuracy(n: int, d: int, d_v: int = 64, seed: int = 0) -> dict[str, float]:
    r"""Share of the ``n`` stored keys whose query recalls their own value, for softmax and linear attention.

    Every one of the ``n`` stored keys (dimension ``d``, also linear attention's feature dimension) is
    queried once. Returns accuracies in [0, 1] for ``softmax``, ``linear`` (elu + 1, normalised) and
    ``linear_identity`` (:math:`o = q^\top \sum_j k_j v_j^\top`, no normaliser); ``chance`` = 1/n.

    Examples
    --------
    >>> acc = recall_accuracy(n=8, d=32, seed=0)
    >>> acc["softmax"], acc["chance"]
    (1.0, 0.125)
    """
    if int(n) != n or n < 1 or int(d) != d or d < 1:
        raise ValueError(f"n={n!r}, d={d!r}; expected positive integers")
    rng = np.random.default_rng(seed)
    k = rng.normal(size=(n, d))  # (n, d) stored keys; the queries are the same keys
    v = rng.normal(size=(n, d_v))  # (n, d_v)
    s = k @ k.T / np.sqrt(d)  # $QK^T/\sqrt d$   (n queries, n keys)
    a = np.exp(s - s.max(axis=1, keepdims=True))
    o_soft = (a / a.sum(axis=1, keepdims=True)) @ v  # (n, d_v), softmax over the keys
    f = _elu1(k)  # (n, d) features of keys = features of queries
    state = f.T @ v  # $\sum_j \phi(k_j) v_j^T$   (d, d_v), rank <= min(d, d_v)
    o_lin = (f @ state) / (f @ f.sum(axis=0))[:, None]  # (n, d_v)
    o_id = k @ (k.T @ v)  # $\phi = $ identity, no normaliser: $q^T \sum_j k_j v_j^T$   (n, d_v)
    vn = v / np.linalg.norm(v, axis=1, keepdims=True)  # (n, d_v) unit values
    target = np.arange(n)
    return {name: float(((o @ vn.T).argmax(axis=1) == target).mean())  # nearest value by cosine
            for name, o in (("softmax", o_soft), ("linear", o_lin), ("linear_identity", o_id))} | {"chance": 1.0 / n}


def recall_sweep(ns: Sequence[int], ds: Sequence[int], seeds: Sequence[int] = (0, 1, 2),
                 d_v: int = 64) -> dict:
    """:func:`recall_accuracy` over stored pairs ``ns``, key dimensions ``ds`` and ``seeds``.

    Each accuracy is a nested list of shape (len(ds), len(ns), len(seeds)).

    Examples
    --------
    >>> out = recall_sweep([4, 256], [16], seeds=[0])
    >>> out["softmax"][0][0][0], out["linear"][0][1][0] < 0.5
    (1.0, True)
    """
    res = {name: [[[recall_accuracy(n, d, d_v, s)[name] for s in seeds] for n in ns] for d in ds]
           for name in ("softmax", "linear", "linear_identity")}
    return {"ns": list(map(int, ns)), "ds": list(map(int, ds)), "seeds": list(map(int, seeds))} | res


def breaking_n(ns: Sequence[int], accuracy: Sequence[float], level: float = 0.5) -> float:
    """The first ``n`` at which the accuracy falls below ``level`` (NaN if it never does).

    Examples
    --------
    >>> breaking_n([8, 16, 32, 64], [1.0, 0.9, 0.4, 0.1])
    32.0
    """
    below = np.flatnonzero(np.asarray(accuracy) < level)
    return float(np.asarray(ns)[below[0]]) if below.size else float("nan")
