r"""Does a head look from a noun to an earlier noun of similar meaning? The meaning arm of ``head-relations``.

Seeded template sentences hold a noun :math:`T`, a later near-synonym :math:`Q` of it and two other nouns,
placed so that :math:`T` is neither the first noun nor the nearest one before :math:`Q`; each has a
minimal-pair copy with an unrelated noun :math:`U` in :math:`Q`'s slot. From :math:`Q`'s row a head *hits*
when its heaviest earlier word is :math:`T`,
:math:`\text{hit}(s) = \big[\arg\max_{j < q,\ j \notin \text{sinks}} C_{q j} = T\big]` on its content part
:math:`C`. The pipeline is agreement-head's (:mod:`.agreement`, :mod:`.agreement_models`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import lru_cache
from itertools import product
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch

from ...models.encoder import bert_encode
from ...models.experiments import Experiment, progress_bar, read_json, register
from ...models.perturb import scrambled_weights
from ...models.pretrained import minilm_tokenizer
from ...models.records import DATA_DIR
from ...models.smollm2 import smollm2_tokenizer
from .agreement import held_out_best, rule_hits, set_decision
from .agreement_models import MODELS, QUERY_KEY, AgreementRunConfig, _bits, invariance_changes, model_weights, read_set
from .roles import DECODER_MODELS, ROLES_DATA, head_role_scores, load_decoder_roles

__all__ = ["similarity_sentences", "load_similarity", "relations_verdict", "relations_verdict_of"]

#: Candidate (noun, near-synonym) pairs, written before any model read them; :func:`usable_pairs` keeps those
#: whose both words are one token in MiniLM and in SmolLM2. Either word may come first in a sentence.
SYNONYMS = (("doctor", "physician"), ("car", "vehicle"), ("child", "kid"), ("woman", "lady"), ("boat", "ship"),
            ("road", "street"), ("shop", "store"), ("film", "movie"), ("rock", "stone"), ("student", "pupil"),
            ("lawyer", "attorney"), ("picture", "photo"), ("city", "town"), ("forest", "woods"), ("sea", "ocean"),
            ("shore", "beach"), ("rug", "carpet"), ("boss", "manager"), ("baby", "infant"), ("path", "trail"),
            ("jacket", "coat"), ("plane", "aircraft"), ("author", "writer"), ("cop", "officer"),
            ("dad", "father"), ("mom", "mother"), ("hat", "cap"), ("bag", "sack"), ("house", "home"),
            ("trash", "garbage"), ("soldier", "warrior"), ("man", "guy"), ("king", "monarch"),
            ("couch", "sofa"), ("thief", "burglar"), ("truck", "lorry"), ("boy", "youngster"))
#: Nouns unrelated in meaning to every word of :data:`SYNONYMS`: the minimal pair's U.
UNRELATED = ("banana", "lemon", "tomato", "carrot", "piano", "violin", "guitar", "candle", "button", "kite",
             "pepper", "apple", "umbrella", "pineapple")
#: The two other nouns of a sentence (first, and nearest before Q): unrelated to the pairs and to U.
DISTRACTORS = ("letter", "key", "lamp", "clock", "phone", "bottle", "ticket", "ladder", "mirror", "ball", "bell",
               "rope", "flag", "chandelier")
#: Templates: ``N1`` the first noun, ``T``, ``N2`` the nearest noun before ``Q``; ``A`` an optional adjective
#: (half the time), ``D`` an optional adverb (half the time), ``P`` a preposition.
TEMPLATES = ("P the A N1 , the A T was next to the A N2 , and then the Q was gone .",
             "we saw the A N1 , the A T and the A N2 , but D the Q was gone .",
             "the A N1 was there , the A T was near the A N2 and the Q was D still there .",
             "after the A N1 , we took the A T to the A N2 ; later the Q was D fine .",
             "P the A N1 and the A T , i saw the A N2 , so the Q D stayed .",
             "they said the A N1 , the A T and the A N2 were old , but the Q was new .")
_ADJECTIVES = ("old", "small", "big", "new", "red")
_ADVERBS = ("really", "clearly", "soon")
_PREPOSITIONS = ("near", "behind", "with", "beside", "by")


def single_token_words(words: Sequence[str], tokenizers: Sequence = ()) -> list[str]:
    """The words that are one token in every tokenizer: MiniLM's WordPiece and SmolLM2's BPE with its leading space.

    ``tokenizers``: callables word -> token count; default both models' (loaded from the local weights).

    Examples
    --------
    >>> single_token_words(["dog", "sofa", "cat"], tokenizers=[lambda w: 1 + (w == "sofa")])
    ['dog', 'cat']
    >>> single_token_words(["physician", "sofa"])       # the real tokenizers: SmolLM2 splits " sofa"
    ['physician']
    """
    counts = list(tokenizers) or list(_token_counts())
    return [w for w in words if all(count(w) == 1 for count in counts)]


@lru_cache(maxsize=1)
def _token_counts() -> tuple:
    """Token counters of a word in MiniLM (without [CLS] and [SEP]) and in SmolLM2 (after a space)."""
    mini, smol = minilm_tokenizer(), smollm2_tokenizer()
    return (lambda w: len(mini(w)["input_ids"]) - 2, lambda w: len(smol.encode(" " + w).ids))


@lru_cache(maxsize=1)
def usable_words() -> dict:
    """:data:`SYNONYMS` (both words one token), :data:`UNRELATED` and :data:`DISTRACTORS`, filtered by
    :func:`single_token_words`: ``{"pairs", "unrelated", "distractors"}``."""
    flat = single_token_words([w for pair in SYNONYMS for w in pair])
    return {"pairs": tuple(p for p in SYNONYMS if p[0] in flat and p[1] in flat),
            "unrelated": tuple(single_token_words(UNRELATED)), "distractors": tuple(single_token_words(DISTRACTORS))}


def similarity_sentences(n: int, seed: int = 30, words: dict | None = None) -> list[dict]:
    """``n`` seeded sentences, each with a noun T, a later near-synonym Q and a minimal-pair copy.

    Positions count the words from 1. Each entry: ``"words"``, ``"pair_words"`` (U in Q's slot), ``"target"``
    (T), ``"query"`` (Q, and U in the copy), ``"first"`` (the first noun), ``"other"`` (the nearest noun before
    Q), ``"nouns"`` (the three before Q), ``"template"``, ``"t_word"``, ``"q_word"``, ``"u_word"``.
    ``words`` default to :func:`usable_words`. Template, pair, its order, U and the two other nouns are drawn
    from ``seed``.

    Examples
    --------
    >>> w = {"pairs": (("car", "vehicle"),), "unrelated": ("kite",), "distractors": ("lamp", "rope")}
    >>> s = similarity_sentences(1, seed=0, words=w)[0]
    >>> s["first"] < s["target"] < s["other"] < s["query"], s["words"][s["target"] - 1] in {"car", "vehicle"}
    (True, True)
    >>> [a for a, b in zip(s["words"], s["pair_words"]) if a != b], s["u_word"]
    (['vehicle'], 'kite')
    """
    words = usable_words() if words is None else words
    pairs, unrelated, distractors = words["pairs"], words["unrelated"], words["distractors"]
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        template = int(rng.integers(len(TEMPLATES)))
        t_word, q_word = pairs[rng.integers(len(pairs))][:: 1 if rng.random() < 0.5 else -1]
        n1, n2 = (str(x) for x in rng.choice(distractors, 2, replace=False))
        u_word = str(unrelated[rng.integers(len(unrelated))])
        sent, slots = [], {}
        for part in TEMPLATES[template].split(" "):
            if part in ("A", "D"):
                if rng.random() < 0.5:
                    sent.append(str(rng.choice(_ADJECTIVES if part == "A" else _ADVERBS)))
                continue
            fill = {"P": lambda: str(rng.choice(_PREPOSITIONS)), "N1": lambda: n1, "T": lambda: t_word,
                    "N2": lambda: n2, "Q": lambda: q_word}.get(part)
            sent.append(fill() if fill else part)
            if part in ("N1", "T", "N2", "Q"):
                slots[part] = len(sent)
        pair = list(sent)
        pair[slots["Q"] - 1] = u_word
        out.append({"words": sent, "pair_words": pair, "target": slots["T"], "query": slots["Q"],
                    "first": slots["N1"], "other": slots["N2"], "nouns": [slots["N1"], slots["T"], slots["N2"]],
                    "template": template, "t_word": t_word, "q_word": q_word, "u_word": u_word})
    return out


# ------------------------------------------------------------------ the run: every head of both models, and scrambled copies
def meaning_set(model: str, weights: Any, sentences: Sequence[dict], split_seeds: Sequence[int],
                sink_threshold: float = 0.5) -> dict:
    """One model on the meaning sentences and their minimal pairs: hit strings per head, sink shares and the
    held-out choice per split (:func:`.agreement.held_out_best`, the minimal pair as ``"pair_share"``).

    A hit on a sentence: Q's heaviest earlier word is T; on its minimal pair: U's is T; ``other_hits`` and
    ``first_hits``: the nearest other noun and the first noun instead.
    """
    pairs = [{**s, "words": s["pair_words"]} for s in sentences]
    read = read_set(model, weights, sentences, ("target", "other", "first"), query="query", before=True)
    pair = read_set(model, weights, pairs, ("target",), query="query", before=True)["hits"]["target"]
    hits = read["hits"]
    shares = read["sink_share"].mean(1)  # (heads,)
    rules = rule_hits(sentences, query="query", target="target")
    return {
        "sentences": [" ".join(s["words"]) for s in sentences],
        "pair_sentences": [" ".join(s["pair_words"]) for s in sentences],
        "target": [s["target"] for s in sentences], "query": [s["query"] for s in sentences],
        "sink_share": shares.round(6).tolist(),
        "query_sink": read["query_sink"].mean(1).round(6).tolist(),  # reported, not deciding
        "hits": _bits(hits["target"]), "other_hits": _bits(hits["other"]), "first_hits": _bits(hits["first"]),
        "pair_hits": _bits(pair),
        "splits": [held_out_best(hits["target"], rules, sp, hits["other"], hits["first"], eligible=shares < sink_threshold,
                                 also={"pair_share": pair}) for sp in split_seeds],
    }


@torch.no_grad()
def minilm_position(weights: Any, texts: Sequence[str]) -> dict:
    """MiniLM's top previous- and next-token heads on ``texts`` (:func:`.roles.head_role_scores`):
    ``{role: [flat head index (layer * 12 + head), score]}``."""
    tok = minilm_tokenizer()
    tokens, maps = [], []
    for text in texts:
        ids = tok(text)["input_ids"]
        att = bert_encode(weights, torch.tensor([ids])).attentions  # 6 x (1, 12, n, n)
        maps.append(torch.cat(att).double().numpy())  # (6, 12, n, n)
        tokens.append(tok.convert_ids_to_tokens(ids))
    scores = head_role_scores(maps, tokens)  # role -> (6, 12)
    return {r: [int(scores[r].argmax()), round(float(scores[r].max()), 6)] for r in ("previous token", "next token")}


#: The deciding configuration (claims.toml: head-relations, its meaning and position arms).
SIMILARITY_CONFIG = {"n": 384, "seed": 30, "split_seeds": [0, 1, 2, 3, 4], "sink_threshold": 0.5, "scramble_seed": 0,
                     "models": list(MODELS), "invariance_sentences": 24, "position_texts": 5}


def similarity_study(config: Optional[dict] = None, progress: Optional[bool] = None) -> dict:
    """The meaning arm of ``head-relations``: each model and its scrambled copy on the meaning sentences, the
    invariances, and MiniLM's position heads (trained and scrambled) on chapter 4's sentences.

    ``config`` overrides :data:`SIMILARITY_CONFIG`. Returns ``{"config", "position": {"MiniLM": {"trained",
    "scrambled"}}, "models": {name: {"meaning", "scrambled": {"meaning"}, "invariance"}}}``.
    """
    cfg = {**SIMILARITY_CONFIG, **(config or {})}
    sents = similarity_sentences(cfg["n"], cfg["seed"])
    out: dict = {"config": cfg, "position": {}, "models": {}}
    args = (cfg["split_seeds"], cfg["sink_threshold"])
    for model in progress_bar(cfg["models"], "models", len(cfg["models"]), progress):
        weights = model_weights(model)
        scrambled = scrambled_weights(weights, cfg["scramble_seed"], tensors=QUERY_KEY)
        if model == "MiniLM" and cfg["position_texts"]:
            texts = read_json(ROLES_DATA)["texts"][:cfg["position_texts"]]
            out["position"]["MiniLM"] = {"texts": texts, "trained": minilm_position(weights, texts),
                                         "scrambled": minilm_position(scrambled, texts)}
        record = {"meaning": meaning_set(model, weights, sents, *args),
                  "scrambled": {"meaning": meaning_set(model, scrambled, sents, *args)}}
        if cfg["invariance_sentences"]:
            record["invariance"] = invariance_changes(model, sents[:cfg["invariance_sentences"]], query="query",
                                                      target="target", before=True)
        out["models"][model] = record
    return out


#: Where ``python -m attention_course similarity-run`` stores :func:`similarity_study`.
SIMILARITY_PATH = DATA_DIR / "similarity.json"


def load_similarity(path: Optional[Path] = None) -> dict:
    """The stored :func:`similarity_study` (default :data:`SIMILARITY_PATH`)."""
    return read_json(path or SIMILARITY_PATH)


#: ``python -m attention_course similarity-run``: :func:`similarity_study` with its defaults.
SIMILARITY_RUN = register(Experiment(
    "similarity-run", replace(AgreementRunConfig(), n=SIMILARITY_CONFIG["n"], seed=SIMILARITY_CONFIG["seed"]), lambda config: similarity_study({"n": config.n, "seed": config.seed}),
    SIMILARITY_PATH, out_flag="--json",
    document=lambda config, runs, meta: {"machine": meta["machine"], **runs.records[0]},
    flags={"--n": dict(type=int, help="sentences"), "--seed": dict(type=int, help="the sentences' seed")},
    help="chapter 4's meaning test: does a head of MiniLM or SmolLM2 look from a noun to an earlier near-synonym?",
    description="Build seeded sentences with a noun T, a later near-synonym Q and two other nouns (T neither the "
                "first nor the nearest noun before Q), each with a minimal pair (an unrelated noun in Q's slot); "
                "read every head of all-MiniLM-L6-v2 and SmolLM2-135M (and of copies with scrambled W_Q and W_K) "
                "on its content part; pick the best non-sink head on half of the sentences and score it on the "
                "other half against fixed-offset, fixed-position, nearest-noun and first-noun rules, the other "
                "nouns and the minimal pair; check the invariances; score MiniLM's scrambled copy for the previous- "
                "and next-token roles; write JSON (default: 384 sentences, seed 30, "
                "attention_course/data/similarity.json; a few minutes on 2 cores)."))


# ------------------------------------------------------------------ the pre-registered rule
def position_tops(run: Mapping, decoder: Optional[Mapping] = None) -> dict:
    """Each model's top position heads, trained and scrambled: ``{model: {"trained"|"scrambled": {role: (flat
    head, score)}}}``; MiniLM's from the run, SmolLM2's previous token from ``decoder`` (default
    :func:`.roles.load_decoder_roles`; a causal row has no next token).

    Examples
    --------
    >>> dec = {"models": {"SmolLM2": {"previous token": np.eye(2)}, "scrambled": {"previous token": np.zeros((2, 2))}}}
    >>> position_tops({"position": {}}, dec)["SmolLM2"]["trained"]
    {'previous token': (0, 1.0)}
    """
    out = {m: {k: {r: (int(v[0]), float(v[1])) for r, v in d[k].items()} for k in ("trained", "scrambled")}
           for m, d in run["position"].items()}
    dec = load_decoder_roles() if decoder is None else decoder
    trained, scr = (np.asarray(dec["models"][m]["previous token"]) for m in DECODER_MODELS)
    out["SmolLM2"] = {"trained": {"previous token": (int(trained.argmax()), float(trained.max()))},
                      "scrambled": {"previous token": (int(scr.argmax()), float(scr.max()))}}
    return out


def meaning_decision(record: Mapping, level: float = 0.5, margin: float = 0.2) -> dict:
    """The rule on one model's meaning set (its stored splits): :func:`.agreement.set_decision` with the minimal
    pair's share (``"pair_share"``) as one more margin, and the ``heads`` picked.

    Examples
    --------
    >>> sp = {"head": 3, "head_share": 0.7, "offset_share": 0.2, "position_share": 0.1, "nearest_share": 0.0,
    ...       "first_share": 0.0, "other_share": 0.1, "first_other_share": 0.0, "pair_share": 0.3}
    >>> d = meaning_decision({"splits": [sp]})
    >>> d["passes"], d["heads"], meaning_decision({"splits": [sp]}, margin=0.45)["passes"]
    (True, [3], False)
    """
    splits = record["splits"]
    if not splits:
        return {"passes": False, "heads": []}
    return {**set_decision(splits, level=level, margin=margin, margin_over=["pair_share"]),
            "heads": sorted({s["head"] for s in splits})}


def _distinct(head_sets: Sequence[set]) -> bool:
    """Whether one head can be taken from each set with no head taken twice."""
    return any(len(set(pick)) == len(pick) for pick in product(*head_sets))


def relations_verdict(run: Mapping, agreement: Mapping, level: float = 0.5, margin: float = 0.2,
                      decoder: Optional[Mapping] = None, t: float = 0.5) -> dict:
    """The pre-registered verdict of ``head-relations`` (claims.toml: decision).

    Position passes in a model when its top previous- or next-token head scores above ``t`` and its scrambled
    copy's top does not; meaning when :func:`meaning_decision` passes and the scrambled copy's does not (if
    it does: *undecided*); syntax when agreement-head's verdict (``agreement``, from
    :func:`.agreement.agreement_verdict`) is *holds*. *holds* if all three pass, by three different heads
    (a head: a model and its flat index; one head from each relation's heads in the models where it passes);
    *holds when*, naming those that pass, otherwise; *undecided* if a scrambled copy passes meaning (or
    nothing passes, which the rule does not name).

    Returns ``{"verdict", "passing", "distinct", "heads", "position", "meaning", "scrambled"}``.

    Examples
    --------
    >>> sp = {"head": 3, "head_share": 0.7, "offset_share": 0.2, "position_share": 0.1, "pair_share": 0.3}
    >>> run = {"position": {"MiniLM": {"trained": {"previous token": [1, 0.9]}, "scrambled": {"previous token": [5, 0.2]}}},
    ...        "models": {"MiniLM": {"meaning": {"splits": [sp]}, "scrambled": {"meaning": {"splits": []}}}}}
    >>> dec = {"models": {"SmolLM2": {"previous token": np.zeros((2, 2))}, "scrambled": {"previous token": np.zeros((2, 2))}}}
    >>> agr = {"verdict": "holds", "passing": ["SmolLM2"], "models": {"SmolLM2": {"heads": [3]}}}
    >>> relations_verdict(run, agr, decoder=dec)["verdict"]
    'holds'
    >>> relations_verdict(run, {**agr, "verdict": "undecided"}, decoder=dec)["passing"]
    ['position', 'meaning']
    """
    tops = position_tops(run, decoder)
    position = {m: {"top": max(v[1] for v in d["trained"].values()), "scrambled": max(v[1] for v in d["scrambled"].values()),
                    "heads": sorted(h for h, s in d["trained"].values() if s > t)} for m, d in tops.items()}
    for d in position.values():
        d["passes"] = d["top"] > t and d["scrambled"] <= t
    meaning = {m: meaning_decision(r["meaning"], level, margin) for m, r in run["models"].items()}
    scrambled = {m: meaning_decision(r["scrambled"]["meaning"], level, margin) for m, r in run["models"].items()}
    heads = {"position": {(m, h) for m, d in position.items() if d["passes"] for h in d["heads"]},
             "meaning": {(m, h) for m, d in meaning.items() if d["passes"] for h in d["heads"]},
             "syntax": ({(m, h) for m in agreement["passing"] for h in agreement["models"][m]["heads"]}
                        if agreement["verdict"] == "holds" else set())}
    meaning_passes = [m for m, d in meaning.items() if d["passes"] and not scrambled[m]["passes"]]
    passing = [r for r, ok in (("position", any(d["passes"] for d in position.values())),
                               ("meaning", bool(meaning_passes)), ("syntax", bool(heads["syntax"]))) if ok]
    distinct = len(passing) == 3 and _distinct([heads["position"], {(m, h) for m, h in heads["meaning"] if m in meaning_passes},
                                                heads["syntax"]])
    if any(d["passes"] for d in scrambled.values()) or not passing:
        verdict = "undecided"
    elif distinct:
        verdict = "holds"
    else:
        verdict = "holds when"
    return {"verdict": verdict, "passing": passing, "distinct": distinct,
            "heads": {k: sorted(v) for k, v in heads.items()}, "position": position, "meaning": meaning,
            "scrambled": scrambled}


def relations_verdict_of(agreement: Mapping, decoder: Optional[Mapping] = None) -> Callable[..., dict]:
    """:func:`relations_verdict` with agreement-head's verdict (and the decoder's roles) fixed: the verdict
    function of a meaning run that :func:`.agreement_figures.sweep_verdicts` sweeps."""
    return lambda run, **kw: relations_verdict(run, agreement, decoder=decoder, **kw)
