r"""Head roles in a pretrained encoder (Clark et al. 2019; chapters 4 and 7).

:func:`head_role_scores` scores every head of every layer for six roles
(:data:`ROLES`), :func:`uniform_role_baselines` gives what uniform attention
scores on the same texts (the chance level) and :func:`top_heads` picks the
best head per role.

How strict must "one clear job" be? :func:`clear_job_counts` counts the heads whose score
for a role exceeds a threshold :math:`t`, :math:`N_r(t) = \#\{(\ell, h) : s_r(\ell, h) > t\}`,
beside uniform attention's count (all heads while :math:`t < c_r`, none after);
:func:`clear_job_flips` finds where each role's count falls to uniform attention's 0, and
:func:`last_relation_flip` where the last relation (:data:`RELATIONS`) does: chapter 4's
``head-relations`` flag.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Optional, Union

import numpy as np

from ...core._backend import Array, ShapeError, to_numpy
from ...models.experiments import read_json, write_json
from ...models.pretrained import attention_maps
from ...models.records import DATA_DIR
from ..mechanics.properties import row_entropy

__all__ = ["ROLES", "head_role_scores", "uniform_role_baselines", "top_heads"]

ROLES = ("previous token", "next token", "[CLS]", "[SEP]", "punctuation", "broad")
#: Roles that are a relation between words, and roles that park the weight on a special token.
RELATIONS = ("previous token", "next token", "punctuation")
PARKING = ("[CLS]", "[SEP]")


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
        entropy = row_entropy(rows)  # (L, H, n-2) nats
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


def clear_job_counts(scores: Mapping[str, np.ndarray], chance: Mapping[str, float],
                     thresholds: Sequence[float]) -> dict[str, np.ndarray]:
    r"""For each role, the heads scoring above each threshold, and uniform attention's count.

    Returns ``{role: (len(thresholds),) int}`` for MiniLM and ``{"uniform " + role: ...}``:
    uniform attention scores ``chance[role]`` on every head, so it counts all of them while
    :math:`t < c_r` and none after.

    Examples
    --------
    >>> s = {"[CLS]": np.array([[0.9, 0.2], [0.6, 0.05]])}
    >>> c = clear_job_counts(s, {"[CLS]": 0.1}, [0.05, 0.5, 0.95])
    >>> c["[CLS]"].tolist(), c["uniform [CLS]"].tolist()
    ([3, 2, 0], [4, 0, 0])
    """
    t = np.asarray(thresholds, dtype=float)  # (K,)
    if t.ndim != 1 or not len(t):
        raise ValueError(f"thresholds has shape {t.shape}; expected a non-empty 1-d sequence")
    out = {}
    for role, s in scores.items():
        s = np.asarray(s, dtype=float).ravel()  # (L * H,)
        out[role] = (s[None, :] > t[:, None]).sum(axis=1)  # (K,)
        out[f"uniform {role}"] = np.where(chance[role] > t, s.size, 0)  # (K,)
    return out


def clear_job_flips(counts: Mapping[str, np.ndarray], roles: Sequence[str]) -> dict[str, Optional[int]]:
    """For each role, the first threshold index from which its count stays at uniform attention's 0.

    ``None`` if some head still clears the largest threshold.

    Examples
    --------
    >>> clear_job_flips({"next token": np.array([5, 1, 0, 0]), "[CLS]": np.array([9, 3, 1, 1])},
    ...                 ["next token", "[CLS]"])
    {'next token': 2, '[CLS]': None}
    """
    out = {}
    for role in roles:
        c = np.asarray(counts[role])
        later = np.flatnonzero(c > 0)  # indices where some head still clears
        out[role] = None if len(later) and later[-1] == len(c) - 1 else (int(later[-1]) + 1 if len(later) else 0)
    return out


def last_relation_flip(flips: Mapping[str, Optional[int]], relations: Sequence[str]) -> tuple[str, Optional[int]]:
    """The relation whose :func:`clear_job_flips` index comes last, and that index: where ``head-relations`` flips.

    The verdict holds while some head has a clear relation, so it flips where the last relation
    drops to uniform attention's count; a relation that never drops (``None``) is last of all.

    Examples
    --------
    >>> last_relation_flip({"previous token": 19, "next token": 12, "punctuation": 9}, RELATIONS)
    ('previous token', 19)
    >>> last_relation_flip({"previous token": None, "next token": 12}, ["previous token", "next token"])
    ('next token', 12)
    """
    if not relations:
        raise ValueError("no relations given; expected at least one of " + ", ".join(RELATIONS))
    last = max(relations, key=lambda r: -1 if flips[r] is None else flips[r])
    return last, flips[last]


#: MiniLM's role scores behind the ``head-relations`` slider (:func:`role_scores_data`).
ROLES_DATA = DATA_DIR / "slider_role_scores.json"


def role_scores_data(texts: Sequence[str], digits: int = 4) -> dict:
    """MiniLM's role scores on ``texts`` and uniform attention's, rounded to ``digits`` decimals.

    Returns ``{"texts", "scores": {role: (6, 12) nested list}, "chance": {role: float}}`` for the
    roles in :data:`RELATIONS` and :data:`PARKING`: what :data:`ROLES_DATA` stores.
    """
    tokens, maps = attention_maps(list(texts))  # lists: tokens, (6, 12, n, n) each
    scores, chance = head_role_scores(maps, tokens), uniform_role_baselines(tokens)
    roles = RELATIONS + PARKING
    return {"texts": list(texts), "scores": {r: np.round(scores[r], digits).tolist() for r in roles},
            "chance": {r: round(float(chance[r]), 6) for r in roles}}


def write_role_scores(texts: Optional[Sequence[str]] = None, path: Path = ROLES_DATA) -> dict:
    """Store :func:`role_scores_data` at ``path``; ``texts`` default to the stored ones (chapter 4's)."""
    texts = read_json(path)["texts"] if texts is None else texts
    return write_json(role_scores_data(texts), path)
