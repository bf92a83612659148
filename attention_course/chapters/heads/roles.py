r"""Head roles (Clark et al. 2019; chapters 4 and 7): every head's score for each role, against uniform attention.

MiniLM's heads for :data:`ROLES`; a decoder's (SmolLM2-135M) on causal rows for :data:`CAUSAL_ROLES`;
and the counts :math:`N_r(t) = \#\{(\ell, h) : s_r(\ell, h) > t\}` behind chapter 4's ``head-relations`` slider.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

import numpy as np
import torch

from ...core._backend import Array, ShapeError, to_numpy
from ...models.experiments import Experiment, read_json, register, write_json
from ...models.decoder import decoder_pass
from ...models.pretrained import attention_maps
from ...models.perturb import scrambled_weights
from ...models.smollm2 import SMOLLM2_START, DecoderWeights, load_smollm2, smollm2_tokenizer
from ...models.records import DATA_DIR
from ..mechanics.properties import row_entropy

__all__ = ["ROLES", "head_role_scores", "uniform_role_baselines", "top_heads", "CAUSAL_ROLES",
           "load_decoder_roles", "DECODER_MODELS"]

ROLES = ("previous token", "next token", "[CLS]", "[SEP]", "punctuation", "broad")
#: Roles that are a relation between words, and roles that park the weight on a special token.
RELATIONS = ("previous token", "next token", "punctuation")
PARKING = ("[CLS]", "[SEP]")
#: The roles a causal decoder's heads are scored for (:func:`causal_role_scores`): no next token.
CAUSAL_ROLES = ("previous token", "start token")
#: SmolLM2's start token, put before each text (its sink, the decoder's counterpart of [CLS]).
START_TOKEN = SMOLLM2_START


def _is_punct(token: str) -> bool:
    return not token.startswith("[") and not any(c.isalnum() for c in token)


def head_role_scores(maps: Union[Array, Sequence[Array]], tokens: Sequence) -> dict[str, np.ndarray]:
    r"""Score every head for six roles, averaged over the words of one or more texts.

    For a map :math:`A` (rows = queries) and the rows :math:`i` of the words between ``[CLS]`` and ``[SEP]``:

    ============== =====================================================================
    previous token :math:`A_{i,i-1}`
    next token     :math:`A_{i,i+1}`
    [CLS], [SEP]   :math:`A_{i,0}`, :math:`A_{i,n-1}`
    punctuation    :math:`\sum_{j \in \text{punct}} A_{ij}` (tokens with no letter or digit)
    broad          :math:`H(A_i)/\log n`: 1 for uniform attention, 0 for one key
    ============== =====================================================================

    ``maps`` (L, H, n, n) and ``tokens`` (n strings), or lists of them (one per text); returns role -> (L, H),
    the mean over all words of all texts.

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


def causal_role_scores(maps: Union[Array, Sequence[Array]]) -> dict[str, np.ndarray]:
    r"""Score every head of a decoder for the previous-token and the start-token role, over causal rows.

    For a causal map :math:`A` (rows = queries; :math:`A_{ij} = 0` for keys :math:`j > i`) of a text
    whose position 0 is the start token:

    ============== ====================== ==============================================================
    previous token :math:`A_{i,i-1}`      rows :math:`i \ge 2` (row 1's previous token is the start token)
    start token    :math:`A_{i,0}`        rows :math:`i \ge 1`
    ============== ====================== ==============================================================

    Row 0 sees only itself and is left out; there is no next-token role.
    ``maps``: shape (L, H, n, n) with n >= 3, or a list of them (one per text); returns role -> (L, H),
    the mean over the rows of all texts.

    Examples
    --------
    >>> prev = np.eye(4, k=-1)[None, None]; prev[..., 0, 0] = 1     # each row reads i - 1
    >>> s = causal_role_scores(prev)
    >>> float(s["previous token"][0, 0]), round(float(s["start token"][0, 0]), 3)
    (1.0, 0.333)
    """
    maps_list = list(maps) if isinstance(maps, (list, tuple)) else [maps]
    sums, rows = {"previous token": 0.0, "start token": 0.0}, {"previous token": 0, "start token": 0}
    for A in maps_list:
        A = np.asarray(to_numpy(A), dtype=float)
        if A.ndim != 4 or A.shape[-1] != A.shape[-2] or A.shape[-1] < 3:
            raise ShapeError(f"maps have shape {A.shape}; expected (L, H, n, n) with n >= 3 (start token and two more)")
        if np.triu(A, k=1).any():
            raise ValueError(f"maps of shape {A.shape} put weight on keys j > i; expected causal maps (key j <= query i)")
        n = A.shape[-1]
        prev = np.diagonal(A, offset=-1, axis1=-2, axis2=-1)  # (L, H, n-1): A[i, i-1] for i = 1 .. n-1
        sums["previous token"] = sums["previous token"] + prev[..., 1:].sum(-1)  # (L, H): rows i >= 2
        sums["start token"] = sums["start token"] + A[:, :, 1:, 0].sum(-1)  # (L, H): rows i >= 1
        rows["previous token"] += n - 2
        rows["start token"] += n - 1
    return {role: sums[role] / rows[role] for role in CAUSAL_ROLES}


def causal_uniform_baselines(lengths: Sequence[int]) -> dict[str, float]:
    r"""What :func:`causal_role_scores` gives for uniform attention over each causal row: the chance level.

    The mean of :math:`1/(i+1)` over the role's rows of all texts (``lengths`` include the start token).

    Examples
    --------
    >>> c = causal_uniform_baselines([4])
    >>> round(c["previous token"], 4), round(c["start token"], 4)      # (1/3 + 1/4) / 2, (1/2 + 1/3 + 1/4) / 3
    (0.2917, 0.3611)
    """
    if not len(lengths) or min(lengths) < 3:
        raise ValueError(f"lengths {list(lengths)}; expected at least one text of n >= 3 tokens")
    chance = {}
    for role, first in (("previous token", 2), ("start token", 1)):
        per_row = np.concatenate([1.0 / (np.arange(first, n) + 1) for n in lengths])  # (rows,): 1 / (i + 1)
        chance[role] = float(per_row.mean())
    return chance


def start_token_ids(texts: Sequence[str]) -> list[list[int]]:
    """SmolLM2's token ids of each text after its start token (:data:`START_TOKEN`): position 0 is the sink.

    Examples
    --------
    >>> ids = start_token_ids(["The cat sat."])
    >>> ids[0][0] == smollm2_tokenizer().token_to_id(START_TOKEN), len(ids[0])
    (True, 5)
    """
    tok = smollm2_tokenizer()
    start = tok.token_to_id(START_TOKEN)
    return [[start, *tok.encode(text).ids] for text in texts]


@torch.no_grad()
def decoder_maps(weights: DecoderWeights, ids: Sequence[Sequence[int]]) -> list[np.ndarray]:
    """Every head's causal map of each text, (L, H, n, n) float64, from a Llama-style decoder's own forward pass.

    ``ids``: one list of token ids per text.

    Examples
    --------
    >>> from attention_course.chapters.decoder.random_weights import random_decoder
    >>> [m.shape for m in decoder_maps(random_decoder(0), [[3, 1, 4], [1, 5, 9, 2]])]
    [(2, 4, 3, 3), (2, 4, 4, 4)]
    """
    out = []
    for row in ids:
        att = decoder_pass(weights, torch.tensor([list(row)])).attentions  # L x (1, H, n, n)
        out.append(torch.cat(att).double().numpy())  # (L, H, n, n)
    return out


def clear_job_counts(scores: Mapping[str, np.ndarray], chance: Mapping[str, float],
                     thresholds: Sequence[float]) -> dict[str, np.ndarray]:
    r"""For each role, the heads scoring above each threshold, and uniform attention's count.

    Returns ``{role: (len(thresholds),) int}`` and ``{"uniform " + role: ...}`` (all heads while
    :math:`t < c_r`, none after).

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
    """For each role, the first threshold index from which its count stays at 0 (``None``: it never does).

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

    A relation that never drops (``None``) is last of all.

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

    Returns ``{"texts", "scores": {role: (6, 12) nested list}, "chance": {role: float}}`` (:data:`ROLES_DATA`).
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


# ------------------------------------------------------------------ SmolLM2's roles, stored (about 30 s)
#: SmolLM2's causal role scores on chapter 4's sentences, and its scrambled copy's (``decoder-roles``).
DECODER_ROLES_DATA = DATA_DIR / "decoder_roles.json"
#: The stored texts' models: SmolLM2-135M, and a copy with every W_Q and W_K permuted (seed 0).
DECODER_MODELS = ("SmolLM2", "scrambled")


def decoder_role_data(texts: Sequence[str], digits: int = 4) -> dict:
    """SmolLM2's and its scrambled copy's :func:`causal_role_scores` on ``texts``, whole and per text, rounded.

    Returns ``{"texts", "lengths", "chance", "models": {model: {role: (30, 9), role + " per text": [(30, 9)]}}}``.
    """
    weights = load_smollm2()
    ids = start_token_ids(texts)
    models = {"SmolLM2": weights, "scrambled": scrambled_weights(weights, seed=0, tensors=("W_q", "W_k"))}
    out = {"texts": list(texts), "lengths": [len(i) for i in ids],
           "chance": {r: round(c, 6) for r, c in causal_uniform_baselines([len(i) for i in ids]).items()}, "models": {}}
    for name, w in models.items():
        maps = decoder_maps(w, ids)  # list of (30, 9, n, n)
        whole, each = causal_role_scores(maps), [causal_role_scores(m) for m in maps]
        out["models"][name] = {**{r: np.round(whole[r], digits).tolist() for r in CAUSAL_ROLES},
                               **{f"{r} per text": [np.round(e[r], digits).tolist() for e in each] for r in CAUSAL_ROLES}}
    return out


def load_decoder_roles(path: Path = DECODER_ROLES_DATA) -> dict:
    """The stored :func:`decoder_role_data`, its scores as arrays: ``doc["models"][model][role]`` (30, 9),
    ``doc["models"][model][role + " per text"]`` (texts, 30, 9).

    Examples
    --------
    >>> doc = load_decoder_roles()
    >>> doc["models"]["SmolLM2"]["start token"].shape, doc["models"]["scrambled"]["previous token per text"].shape
    ((30, 9), (5, 30, 9))
    """
    doc = read_json(path)
    doc["models"] = {m: {k: np.asarray(v, dtype=float) for k, v in d.items()} for m, d in doc["models"].items()}
    return doc


@dataclass(frozen=True)
class DecoderRolesConfig:
    """``decoder-roles``: the first ``n_texts`` of chapter 4's sentences (those of :data:`ROLES_DATA`)."""

    n_texts: int = 5


def _decoder_roles(config: DecoderRolesConfig) -> dict:
    return decoder_role_data(read_json(ROLES_DATA)["texts"][:config.n_texts])


#: ``python -m attention_course decoder-roles``: :func:`decoder_role_data` on chapter 4's five sentences.
DECODER_ROLES = register(Experiment(
    "decoder-roles", DecoderRolesConfig(), _decoder_roles, DECODER_ROLES_DATA, out_flag="--json", indent=None,
    document=lambda config, runs, meta: runs.records[0],
    flags={"--n-texts": dict(type=int, help="how many of the chapter's sentences")},
    help="chapter 4's head roles in SmolLM2-135M: previous token and start token, on causal rows",
    description="Score every head of SmolLM2-135M (and of a copy with its W_Q and W_K scrambled, seed 0) on chapter "
                "4's five sentences, each after its start token, for the previous-token role (rows i >= 2) and the "
                "start token (rows i >= 1), with uniform attention over each causal row as the chance level; write "
                "JSON (default: attention_course/data/decoder_roles.json; about 30 seconds on 2 cores)."))
