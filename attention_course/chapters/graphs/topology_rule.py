r"""Is a head's graph rebuilt from the content, or placed by a fixed rule? Shuffles, baselines, a rule fit.

What :mod:`attention_course.chapters.graphs.topology`'s shuffle overlap is compared with: a fixed
rule per head that ignores the query's content,

.. math::

    \hat\alpha_{ij} = \operatorname{softmax}_j\big(a_h[\text{token}_j] + b_h[j] + c_h[j - i]\big),

fitted by cross-entropy (:func:`fit_fixed_rule`) and scored on held-out shuffles by the weight it
misplaces, :math:`\tfrac12 \sum_j |\alpha_{ij} - \hat\alpha_{ij}|` averaged over rows
(:func:`rule_miss`). :func:`rule_flip` gives chapter 5's ``learned-topology`` flag.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from ...core._backend import Array, ShapeError, to_numpy
from ...models.lbfgs import lbfgs
from ..heads.subspaces import total_variation
from .topology import shuffled_sentences

#: Runs texts through a model: ``encode(texts) -> (token ids per text, maps (L, H, n, n) per text)``,
#: e.g. ``lambda texts: encoder_maps(weights, tokenizer, texts)`` (:mod:`attention_course.models.perturb`).
Encode = Callable[[Sequence[str]], tuple[list, list]]

__all__ = ["RULES", "fit_fixed_rule", "rule_miss", "held_out_shuffles"]


def held_out_shuffles(encode: Encode, sentences: Sequence[str], *, n_shuffles: int = 5, n_fit: int = 4,
                      seed: int = 0) -> tuple[tuple[list, list], tuple[list, list]]:
    """Token ids and per-head maps (L * H, n, n) of each sentence's versions, split in two.

    The first ``n_fit`` versions (the original and ``n_fit - 1`` shuffles, seed ``seed + s``) fit
    a rule, the rest test it. Returns ``((fit_ids, fit_maps), (held_ids, held_maps))``.
    """
    fit, held = ([], []), ([], [])
    for s, sentence in enumerate(sentences):
        ids, maps = encode(shuffled_sentences(sentence, n_shuffles, seed + s)[0])
        for v, (i, m) in enumerate(zip(ids, maps)):
            part = fit if v < n_fit else held
            part[0].append(i)
            part[1].append(m.reshape(-1, *m.shape[-2:]))  # (L * H, n, n)
    return fit, held


#: The feature parts a rule may use: the key's token, its position, its offset from the query, and the
#: pair (query token, key token). Only ``"pair"`` lets the rule see the query's content.
RULE_PARTS = ("token", "position", "offset", "pair")
#: The rules chapter 5 compares (uniform attention is the floor): name -> parts.
RULES = {"key token": ("token",), "position + offset": ("position", "offset"),
         "key token + position + offset": ("token", "position", "offset"),
         "query token x key token + offset": ("pair", "offset")}


@dataclass(frozen=True)
class FixedRule:
    r"""Per-head scores for each feature part of a (query, key) pair.

    .. math::
        \hat\alpha_{ij} = \operatorname{softmax}_j\big(\sum_{p \in \text{parts}} \theta_h[\phi_p(i, j)]\big),

    with :math:`\phi_{token} = \text{token}_j`, :math:`\phi_{position} = j`, :math:`\phi_{offset} = j - i`
    and :math:`\phi_{pair} = (\text{token}_i, \text{token}_j)`.
    """

    token: dict  # token id -> column of ``theta``
    n_max: int  # the longest sequence seen: positions 0..n_max-1, offsets -(n_max-1)..n_max-1
    theta: np.ndarray  # (H, P): one column per feature
    parts: tuple = ("token", "position", "offset")
    pairs: dict = field(default_factory=dict)  # (query token, key token) -> column of ``theta``

    def _starts(self) -> dict:
        sizes = {"token": len(self.token), "position": self.n_max, "offset": 2 * self.n_max - 1,
                 "pair": len(self.pairs)}
        starts, at = {}, 0
        for part in RULE_PARTS:
            if part in self.parts:
                starts[part], at = at, at + sizes[part]
        return starts

    def features(self, ids: Sequence[int]) -> np.ndarray:
        """One-hot features (n, n, P) of every (query i, key j) pair; an unseen token or pair gets none."""
        n = len(ids)
        if n > self.n_max:
            raise ShapeError(f"a sequence of {n} tokens; the rule was fitted on at most {self.n_max}")
        F = np.zeros((n, n, self.theta.shape[1]))
        j = np.arange(n)
        at = self._starts()
        known = [k for k, t in enumerate(ids) if t in self.token]  # keys whose token was seen
        for i in range(n):
            if "token" in at:
                F[i, known, [at["token"] + self.token[ids[k]] for k in known]] = 1.0  # the key's token
            if "position" in at:
                F[i, j, at["position"] + j] = 1.0  # the key's position
            if "offset" in at:
                F[i, j, at["offset"] + (j - i) + self.n_max - 1] = 1.0  # its offset from the query
            if "pair" in at:
                seen = [k for k in range(n) if (ids[i], ids[k]) in self.pairs]
                F[i, seen, [at["pair"] + self.pairs[ids[i], ids[k]] for k in seen]] = 1.0  # (query, key) tokens
        return F

    def predict(self, ids: Sequence[int]) -> np.ndarray:
        """The rule's attention (H, n, n) on a sequence of token ids; rows sum to 1."""
        logits = np.einsum("ijp,hp->hij", self.features(ids), self.theta)  # (H, n, n)
        return torch.softmax(torch.as_tensor(logits), dim=-1).numpy()


def fit_fixed_rule(maps: Sequence[Array], ids: Sequence[Sequence[int]], *, ridge: float = 1e-3,
                   max_iter: int = 200, parts: Sequence[str] = ("token", "position", "offset")) -> FixedRule:
    r"""Fit :class:`FixedRule` with the feature ``parts`` to every head at once (L-BFGS, float64).

    .. math::
        \min_\theta \; -\frac1N \sum_{\text{maps}} \sum_{i, j} \alpha_{ij} \log \hat\alpha_{ij}(\theta)
        + \lambda \|\theta\|^2

    ``maps``: each (H, n, n), n may differ; ``ids``: each map's token ids.

    Examples
    --------
    >>> prev = np.eye(4, k=-1); prev[0, 0] = 1  # a previous-token head
    >>> rule = fit_fixed_rule([prev[None]], [[5, 6, 7, 8]])
    >>> bool(rule_miss(rule, [prev[None]], [[8, 7, 6, 5]])[0] < 0.1)  # any words: same offsets
    True
    >>> follow = np.eye(4)[[1, 1, 3, 3]]  # each query reads the key of a fixed partner word
    >>> pair = fit_fixed_rule([follow[None]], [[5, 6, 7, 8]], parts=("pair",))
    >>> bool(rule_miss(pair, [follow[None]], [[5, 6, 7, 8]])[0] < 0.1)
    True
    """
    if len(maps) != len(ids) or not maps:
        raise ValueError(f"{len(maps)} maps and {len(ids)} id lists; expected the same, non-zero number")
    unknown = set(parts) - set(RULE_PARTS)
    if unknown or not parts:
        raise ValueError(f"parts={tuple(parts)}; expected a non-empty subset of {RULE_PARTS}")
    vocab = sorted({t for seq in ids for t in seq})
    pairs = sorted({(a, b) for seq in ids for a in seq for b in seq}) if "pair" in parts else []
    n_max = max(len(seq) for seq in ids)
    H = to_numpy(maps[0]).shape[0]
    empty = FixedRule({t: c for c, t in enumerate(vocab)}, n_max, np.zeros((H, 0)), tuple(parts),
                      {p: c for c, p in enumerate(pairs)})
    width = sum({"token": len(vocab), "position": n_max, "offset": 2 * n_max - 1, "pair": len(pairs)}[p]
                for p in set(parts))
    empty = replace(empty, theta=np.zeros((H, width)))
    data = []
    for A, seq in zip(maps, ids):
        A = to_numpy(A).astype(float)
        if A.shape != (H, len(seq), len(seq)):
            raise ShapeError(f"a map has shape {A.shape}; expected ({H}, {len(seq)}, {len(seq)}) for its ids")
        data.append((torch.as_tensor(empty.features(seq)), torch.as_tensor(A)))
    theta = torch.zeros(empty.theta.shape, dtype=torch.float64, requires_grad=True)
    def objective() -> torch.Tensor:
        loss = ridge * (theta**2).sum()
        for F, A in data:
            logits = torch.einsum("ijp,hp->hij", F, theta)  # (H, n, n), softmax over keys j
            loss = loss - (A * torch.log_softmax(logits, dim=-1)).sum() / len(data)
        return loss

    lbfgs(objective, [theta], max_iter=max_iter, tolerance_grad=1e-9)  # torch.optim.LBFGS's steps, strong Wolfe
    return replace(empty, theta=theta.detach().numpy())


def uniform_miss(maps: Sequence[Array]) -> np.ndarray:
    """Per head, the mean total-variation distance between the maps' rows and uniform rows: (H,).

    Examples
    --------
    >>> uniform_miss([np.eye(2)[None]]).tolist()
    [0.5]
    """
    return np.mean([total_variation(A, np.full(A.shape, 1.0 / A.shape[-1])).mean(axis=-1)
                    for A in map(lambda m: to_numpy(m).astype(float), maps)], axis=0)


def rule_miss(rule: FixedRule, maps: Sequence[Array], ids: Sequence[Sequence[int]]) -> np.ndarray:
    """Per head, the mean total-variation distance between the maps' rows and the rule's: (H,)."""
    return np.mean([total_variation(to_numpy(A), rule.predict(seq)).mean(axis=-1)
                    for A, seq in zip(maps, ids)], axis=0)


def placed_counts(miss: Array, masses: Sequence[float]) -> np.ndarray:
    r"""For each mass :math:`m`, the heads whose miss is below :math:`1 - m`; shape ``(len(masses),)`` int.

    Examples
    --------
    >>> placed_counts(np.array([0.05, 0.1, 0.25, 0.3]), [0.5, 0.8, 0.9]).tolist()
    [4, 2, 1]
    """
    miss = np.asarray(to_numpy(miss), dtype=float).ravel()  # (heads,)
    return np.array([(miss < round(1 - m, 12)).sum() for m in masses])  # rounded: 1 - 0.8 is not 0.2 in floats


def rule_flip(miss: Array, masses: Sequence[float]) -> int | None:
    r"""The first mass :math:`m` at which fewer than half of the heads have a miss below :math:`1 - m` (or ``None``).

    Examples
    --------
    >>> rule_flip(np.array([0.05, 0.1, 0.25, 0.3]), [0.5, 0.7, 0.8, 0.9])  # at 0.8 two of four still pass
    3
    """
    miss = np.asarray(to_numpy(miss), dtype=float).ravel()  # (heads,)
    low = [i for i, p in enumerate(placed_counts(miss, masses)) if 2 * p < miss.size]
    return low[0] if low else None
