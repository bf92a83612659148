r"""The agreement test on two trained models: the verb's row of every head, word by word, on its content part.

MiniLM and SmolLM2-135M read the same sentences; a word's weight is the sum of its tokens' (SmolLM2 may
split the first word) and the verb's query is its last token. The row is read on the head's *content
part* :math:`C` (the sinks removed, renormalised):
:math:`\text{hit}(s) = \big[\arg\max_{w \ne v} \sum_{t \in w} C_{v t} = \text{subject}\big]`.
:func:`agreement_study` is the deciding run, with copies whose W_Q and W_K are scrambled.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, Optional

import numpy as np
import torch

from ...models.decoder import decoder_pass
from ...models.encoder import bert_encode
from ...models.experiments import Experiment, progress_bar, register
from ...models.perturb import scrambled_weights
from ...models.pretrained import minilm_tokenizer, minilm_weights
from ...models.queries_keys import bert_queries_keys
from ...models.smollm2 import load_smollm2, smollm2_tokenizer
from ..lowrank.baselines import content_part, sink_share
from .agreement import (AGREEMENT_FIRST_PATH, AGREEMENT_PATH, _number_groups, crossed_sentences, held_out_best,
                        rule_hits, set_sentences)

__all__ = ["read_set"]

#: The two models and their sink positions for a text of ``n`` tokens.
MODELS = {"MiniLM": lambda n: [0, n - 1], "SmolLM2": lambda n: [0]}
#: The three sentence sets, in the order of the page.
SETS = ("plain", "attractor", "crossed")
#: The tensors the baseline scrambles: every layer's query and key matrices.
QUERY_KEY = ("W_q", "W_k")


def word_spans(text: str, offsets: Sequence[tuple[int, int]]) -> list[int]:
    """The word (counted from 1) of each token, from the tokens' character ``offsets`` in ``text``; 0 for a special token.

    A token belongs to the space-separated word holding its last character.

    Examples
    --------
    >>> word_spans("behind the dog", [(0, 2), (2, 6), (6, 10), (10, 14)])
    [1, 1, 2, 3]
    >>> word_spans("the dog", [(0, 0), (0, 3), (3, 7), (0, 0)])   # [CLS] the dog [SEP]
    [0, 1, 2, 0]
    """
    ends = np.cumsum([len(w) + 1 for w in text.split(" ")])  # one past each word's last character (+ its space)
    return [0 if e <= s else int(np.searchsorted(ends, e - 1, side="right")) + 1 for s, e in offsets]


def query_word_rows(weights: np.ndarray, words: Sequence[int], query: int, sinks: Sequence[int],
                    before: bool = False) -> np.ndarray:
    """Each head's weight from the query word on every word, on the head's content part; -1 where a word may not win.

    ``weights`` (heads, T, T); ``words`` the word of each token (:func:`word_spans`); ``query`` the query word
    (the verb in agreement-head), counted from 1; ``sinks`` token positions; ``before``: only the words before
    the query may win (an encoder's row also sees the later ones). Returns (heads, n_words + 1); column 0, the
    query, a word wholly inside the sinks and (with ``before``) every later word are -1.

    Examples
    --------
    >>> A = np.zeros((1, 4, 4)); A[0, 3] = [0.7, 0.2, 0.1, 0.0]      # causal row of the verb (word 3)
    >>> query_word_rows(A, [1, 1, 2, 3], query=3, sinks=[0]).round(3).tolist()   # word 1 keeps its 2nd token
    [[-1.0, 0.667, 0.333, -1.0]]
    >>> B = np.full((1, 4, 4), 0.25)                                  # an encoder's row sees word 3 too
    >>> query_word_rows(B, [0, 1, 2, 3], query=2, sinks=[0], before=True).round(3).tolist()
    [[-1.0, 0.333, -1.0, -1.0]]
    """
    words = np.asarray(words)
    q = int(np.flatnonzero(words == query).max())  # the query word's last token
    part = content_part(np.asarray(weights)[:, q:q + 1, :], sinks)  # (heads, 1, T - sinks)
    keep = np.setdiff1d(np.arange(words.size), sorted({int(p) % words.size for p in sinks}))  # (T - sinks,)
    n_words = int(words.max())
    rows = np.zeros((part.weights.shape[0], n_words + 1))  # (heads, n_words + 1)
    np.add.at(rows.T, words[keep], part.weights[:, 0, :].T)  # sum each word's tokens
    rows[:, 0] = -1.0
    rows[:, query] = -1.0
    rows[:, np.setdiff1d(np.arange(1, n_words + 1), words[keep])] = -1.0  # wholly inside the sinks
    if before:
        rows[:, query + 1:] = -1.0  # (heads, n_words + 1): later words may not win
    return rows


def query_sink_weight(weights: np.ndarray, words: Sequence[int], query: int, sinks: Sequence[int]) -> np.ndarray:
    """Each head's weight on the sinks in the query word's own row (its last token), before the sinks are set aside.

    Arguments as :func:`query_word_rows`; returns shape (heads,).

    Examples
    --------
    >>> A = np.zeros((1, 4, 4)); A[0, 3] = [0.7, 0.2, 0.1, 0.0]
    >>> query_sink_weight(A, [1, 1, 2, 3], query=3, sinks=[0]).round(3).tolist()
    [0.7]
    """
    words = np.asarray(words)
    q = int(np.flatnonzero(words == query).max())  # the query word's last token
    cols = sorted({int(p) % words.size for p in sinks})
    return np.asarray(weights)[:, q, cols].sum(-1)  # (heads,)


def _tokens(model: str, text: str) -> tuple[list[int], list[int]]:
    """Token ids and each token's word (0 = special) of ``text`` for ``model``."""
    if model == "MiniLM":
        enc = minilm_tokenizer()(text)
        ids = list(enc["input_ids"])
        n_words = len(text.split(" "))
        if len(ids) != n_words + 2:
            raise ValueError(f"{text!r} has {len(ids) - 2} MiniLM tokens for {n_words} words; expected one token per word")
        return ids, [0, *range(1, n_words + 1), 0]  # [CLS] w1 .. wn [SEP]
    enc = smollm2_tokenizer().encode(text)
    words = word_spans(text, enc.offsets)
    if sorted(set(words)) != list(range(1, len(text.split(" ")) + 1)) or len(words) - words.count(1) != len(text.split(" ")) - 1:
        raise ValueError(f"{text!r} gives SmolLM2 tokens {enc.tokens}; expected one token per word after the first")
    return list(enc.ids), words


@torch.no_grad()
def _maps(model: str, weights: Any, ids: list[int]) -> np.ndarray:
    """One sentence's maps, every head (L h, T, T) float64, layer-major."""
    x = torch.tensor([ids])  # (1, T)
    att = bert_encode(weights, x).attentions if model == "MiniLM" else decoder_pass(weights, x).attentions
    return torch.cat(att).double().numpy().reshape(-1, len(ids), len(ids))  # (L h, T, T)


def model_weights(model: str) -> Any:
    """The trained weights of ``model`` (one of :data:`MODELS`)."""
    if model not in MODELS:
        raise ValueError(f"model={model!r}; expected one of {list(MODELS)}")
    return minilm_weights() if model == "MiniLM" else load_smollm2()


def read_set(model: str, weights: Any, sentences: Sequence[dict], targets: Sequence[str], query: str = "verb",
             before: bool = False) -> dict:
    """Per head: hits on each of ``targets`` (bool (heads, sentences)), the sink share per sentence (heads, sentences)
    and the sink weight of the query word's row per sentence (heads, sentences; :func:`query_sink_weight`).

    Each sentence names its query word under ``query`` (agreement-head: the verb) and each target's position
    under its name; ``before``: only words before the query may win (:func:`query_word_rows`).
    """
    hits = {t: [] for t in targets}
    shares, query_sinks = [], []
    for s in sentences:
        ids, words = _tokens(model, " ".join(s["words"]))
        A = _maps(model, weights, ids)  # (heads, T, T)
        sinks = MODELS[model](len(ids))
        rows = query_word_rows(A, words, s[query], sinks, before)  # (heads, n_words + 1)
        best = rows.argmax(-1)  # (heads,)
        for t in targets:
            hits[t].append(best == s[t])
        shares.append(sink_share(A, sinks))  # (heads,): mean over every query
        query_sinks.append(query_sink_weight(A, words, s[query], sinks))  # (heads,): the query word's row only
    return {"hits": {t: np.stack(v, axis=1) for t, v in hits.items()}, "sink_share": np.stack(shares, axis=1),
            "query_sink": np.stack(query_sinks, axis=1)}


@torch.no_grad()
def invariance_changes(model: str, sentences: Sequence[dict], scale: float = 3.0, seed: int = 0, query: str = "verb",
                       target: str = "subject", before: bool = False) -> dict:
    """How many hits change when attention is left unchanged by its parameters.

    The maps are recomputed in float64 from each layer's queries and keys, then with ``q -> scale q,
    k -> k / scale`` and with one random vector added to every key. Returns the hits that change, per
    change, and those that differ from the model's own float32 maps. ``query``, ``target``, ``before``: as
    :func:`read_set` (a hit: the query word's heaviest word is the target).
    """
    weights = model_weights(model)
    gen = torch.Generator().manual_seed(seed)
    changed = {"q -> a q, k -> k / a": 0, "k -> k + c": 0, "float32 model maps": 0}
    for s in sentences:
        ids, words = _tokens(model, " ".join(s["words"]))
        x = torch.tensor([ids])
        if model == "MiniLM":
            W = weights.to(torch.float64)
            pairs = [(q[0], k[0]) for q, k in bert_queries_keys(W, bert_encode(W, x).hidden_states)]  # (h, T, d) each
            causal = False
        else:
            out = decoder_pass(weights.to(torch.float64), x, keep=("queries", "keys"))
            g = weights.config.group
            pairs = [(q[0], k[0].repeat_interleave(g, dim=0)) for q, k in zip(out.queries, out.keys)]
            causal = True
        sinks = MODELS[model](len(ids))

        def hits(transform) -> np.ndarray:
            maps = []
            for q, k in pairs:
                q2, k2 = transform(q, k)
                scores = q2 @ k2.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (h, T, T)
                if causal:
                    scores = scores.masked_fill(~torch.ones(len(ids), len(ids), dtype=torch.bool).tril(), float("-inf"))
                maps.append(torch.softmax(scores, dim=-1))  # (h, T, T), over the keys
            A = torch.cat(maps).numpy()  # (L h, T, T)
            return query_word_rows(A, words, s[query], sinks, before).argmax(-1) == s[target]

        shift = torch.randn(pairs[0][0].shape[-1], generator=gen, dtype=torch.float64)  # (d,)
        base = hits(lambda q, k: (q, k))
        changed["q -> a q, k -> k / a"] += int((hits(lambda q, k: (q * scale, k / scale)) != base).sum())
        changed["k -> k + c"] += int((hits(lambda q, k: (q, k + shift)) != base).sum())
        own = query_word_rows(_maps(model, weights, ids), words, s[query], sinks, before).argmax(-1) == s[target]
        changed["float32 model maps"] += int((own != base).sum())
    return {"changed": changed, "hits": len(sentences) * len(base), "scale": scale}


def _bits(h: np.ndarray) -> list[str]:
    return ["".join("1" if x else "0" for x in row) for row in h]


def study_set(model: str, weights: Any, name: str, n: int, seed: int, split_seeds: Sequence[int],
              sink_threshold: float = 0.5) -> dict:
    """One model on one set: sentences, hit strings per head, sink shares, and the held-out choice per split."""
    sents = set_sentences(name, n, seed)
    targets = ("subject",) + (("attractor",) if name != "plain" else ()) + (("first",) if name == "crossed" else ())
    read = read_set(model, weights, sents, targets)
    hits = read["hits"]
    shares = read["sink_share"].mean(1)  # (heads,)
    groups = _number_groups(sents) if name == "crossed" else None
    rules = rule_hits(sents)
    eligible = shares < sink_threshold
    return {
        "sentences": [" ".join(s["words"]) for s in sents],
        "subject": [s["subject"] for s in sents], "verb": [s["verb"] for s in sents],
        "number": [s["number"] for s in sents],
        "sink_share": shares.round(6).tolist(),
        "verb_sink": read["query_sink"].mean(1).round(6).tolist(),  # reported beside the sink share, not deciding
        "hits": _bits(hits["subject"]),
        "attractor_hits": _bits(hits["attractor"]) if "attractor" in hits else None,
        "first_hits": _bits(hits["first"]) if "first" in hits else None,
        "splits": [held_out_best(hits["subject"], rules, sp, hits.get("attractor"), hits.get("first"), groups,
                                 eligible=eligible) for sp in split_seeds],
    }


#: The deciding configuration (claims.toml: agreement-head).
STUDY_CONFIG = {"n": 384, "seed": 20, "split_seeds": [0, 1, 2, 3, 4], "sink_threshold": 0.5, "scramble_seed": 0,
                "models": list(MODELS), "sets": list(SETS), "invariance_sentences": 24}


def agreement_study(config: Optional[dict] = None, progress: Optional[bool] = None) -> dict:
    """The deciding run of ``agreement-head``: each model and its scrambled copy on the sentence sets.

    ``config`` overrides :data:`STUDY_CONFIG`. Returns ``{"config", "models": {name: {set: ...,
    "scrambled": {"crossed": ...}, "invariance": ...}}}``.
    """
    cfg = {**STUDY_CONFIG, **(config or {})}
    out: dict = {"config": cfg, "models": {}}
    args = (cfg["n"], cfg["seed"], cfg["split_seeds"], cfg["sink_threshold"])
    for model in cfg["models"]:
        weights = model_weights(model)
        record = {name: study_set(model, weights, name, *args)
                  for name in progress_bar(cfg["sets"], f"{model}: sentence sets", len(cfg["sets"]), progress)}
        record["scrambled"] = {"crossed": study_set(model, scrambled_weights(weights, cfg["scramble_seed"], tensors=QUERY_KEY),
                                                    "crossed", *args)}
        if cfg["invariance_sentences"]:
            record["invariance"] = invariance_changes(model, crossed_sentences(cfg["n"], cfg["seed"])[:cfg["invariance_sentences"]])
        out["models"][model] = record
    return out


@dataclass(frozen=True)
class AgreementRunConfig:
    """``agreement-run``'s sentence sets: ``n`` sentences each, built with ``seed`` (defaults: the deciding run);
    ``similarity-run`` takes it with its own seed."""

    n: int = STUDY_CONFIG["n"]
    seed: int = STUDY_CONFIG["seed"]


#: ``python -m attention_course agreement-run``: :func:`agreement_study` with its defaults; ``--n 96 --seed 0
#: --json attention_course/data/agreement_96.json`` repeats the first run, on 96 sentences.
AGREEMENT_RUN = register(Experiment(
    "agreement-run", AgreementRunConfig(), lambda config: agreement_study({"n": config.n, "seed": config.seed}),
    AGREEMENT_PATH, out_flag="--json", also=(AGREEMENT_FIRST_PATH,),
    document=lambda config, runs, meta: {"machine": meta["machine"], **runs.records[0]},
    flags={"--n": dict(type=int, help="sentences per set"), "--seed": dict(type=int, help="the sentences' seed")},
    help="chapter 4's agreement run: does a head of MiniLM or SmolLM2 look from the verb to its subject?",
    description="Build seeded subject-verb agreement sentences (plain, with an attractor noun, and crossed: the "
                "subject neither the first nor the nearest noun), read every head of all-MiniLM-L6-v2 and "
                "SmolLM2-135M (and of copies with scrambled W_Q and W_K) on its content part (sinks removed), "
                "score how often the verb's heaviest word is its subject, pick the best non-sink head on half of "
                "the sentences and score it on the other half against fixed-offset, fixed-position, nearest-noun "
                "and first-noun rules; check that rescaling queries and keys changes no hit; write JSON "
                "(default: 384 sentences per set, seed 20, attention_course/data/agreement.json; about four "
                "minutes on 2 cores; --n 96 --seed 0: about one minute)."))
