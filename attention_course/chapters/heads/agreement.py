r"""Does a head track subject-verb agreement? The verb's heaviest key, against position-only rules.

Seeded sentences (plain, *attractor*, *crossed*: the subject neither the first nor the nearest noun);
a verb *hits* when its largest weight over the other words is on the subject,
:math:`\text{hit}(s) = \big[\arg\max_{j \notin \{\text{CLS}, \text{SEP}, v\}} a_{v j} = \text{subject}\big]`.
Rules score the same way: a fixed offset, a fixed position, the nearest noun, the first noun.
The head and the rules' values are picked on one half of the sentences and scored on the other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Optional

import numpy as np

from ...models.experiments import read_json
from ...models.records import DATA_DIR
from ..lowrank.baselines import classify_heads, head_bins

__all__ = ["crossed_sentences", "load_agreement", "head_property_bins", "head_on_set", "agreement_verdict"]

#: (singular, plural) subjects and attractors; each is one WordPiece token of MiniLM (tested).
NOUNS = (("dog", "dogs"), ("cat", "cats"), ("man", "men"), ("woman", "women"), ("child", "children"),
         ("teacher", "teachers"), ("student", "students"), ("car", "cars"), ("book", "books"),
         ("girl", "girls"), ("boy", "boys"), ("doctor", "doctors"), ("key", "keys"), ("house", "houses"),
         ("friend", "friends"), ("bird", "birds"))
#: (singular, plural) verbs with the words that may follow them.
VERBS = ((("is", "are"), ("here", "ready", "happy", "outside", "late")),
         (("was", "were"), ("here", "ready", "happy", "outside", "late")),
         (("has", "have"), ("left", "arrived", "gone", "won")),
         (("seems", "seem"), ("happy", "tired", "ready", "fine")),
         (("looks", "look"), ("happy", "tired", "ready", "fine")))
#: (singular, plural) verbs of the crossed set's relative clause.
TRANSITIVE = (("sees", "see"), ("likes", "like"), ("helps", "help"), ("follows", "follow"), ("watches", "watch"))
_PREFIXES = ((), ("i", "think"), ("they", "said"), ("we", "know", "that"))
_ADJECTIVES = ("old", "small", "big", "young", "new")
_ADVERBS = ("really", "certainly", "clearly", "still")
_PREPOSITIONS = ("near", "behind", "with", "beside")


def agreement_sentences(n: int, attractor: bool, seed: int = 0) -> list[dict]:
    """``n`` seeded agreement sentences, each ``{"words", "subject", "verb", "attractor"}``.

    Positions count the words from 1 (token positions after [CLS]). Plain: ``[prefix] the [adjective]
    subject [0-2 adverbs] verb rest .``; attractor: ``[prefix] the subject preposition the [adjective]
    noun [0-1 adverb] verb rest .``, the noun of the other number at ``"attractor"`` (else ``None``).

    Examples
    --------
    >>> s = agreement_sentences(2, attractor=True, seed=0)[0]
    >>> words = s["words"]
    >>> words[s["subject"] - 1] in {w for pair in NOUNS for w in pair}, s["subject"] < s["attractor"] < s["verb"]
    (True, True)
    """
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        number = int(rng.integers(2))  # 0 singular, 1 plural
        subj = NOUNS[rng.integers(len(NOUNS))][number]
        (verb_pair, rests) = VERBS[rng.integers(len(VERBS))]
        words = list(_PREFIXES[rng.integers(len(_PREFIXES))]) + ["the"]
        att = None
        if attractor:
            words += [subj, _PREPOSITIONS[rng.integers(len(_PREPOSITIONS))], "the"]
            subject = len(words) - 2
            if rng.random() < 0.5:
                words.append(_ADJECTIVES[rng.integers(len(_ADJECTIVES))])
            other = NOUNS[rng.integers(len(NOUNS))]
            while subj in other:
                other = NOUNS[rng.integers(len(NOUNS))]
            words.append(other[1 - number])
            att = len(words)
            words += list(rng.choice(_ADVERBS, int(rng.integers(2)), replace=False))
        else:
            if rng.random() < 0.5:
                words.append(_ADJECTIVES[rng.integers(len(_ADJECTIVES))])
            words.append(subj)
            subject = len(words)
            words += list(rng.choice(_ADVERBS, int(rng.integers(3)), replace=False))
        words.append(verb_pair[number])
        verb = len(words)
        words += [str(rng.choice(rests)), "."]
        nouns = [subject] if att is None else [subject, att]
        out.append({"words": [str(w) for w in words], "subject": subject, "verb": verb, "attractor": att,
                    "nouns": nouns, "number": number})
    return out


def crossed_sentences(n: int, seed: int = 0) -> list[dict]:
    """``n`` seeded sentences whose subject is neither the first noun nor the nearest before the verb.

    ``preposition the [adjective] noun1 , the [adjective] subject that the [adjective] noun2 verb2
    [0-2 adverbs] verb rest .``: noun2 (``"attractor"``) has the other number; the subject's and noun1's
    (``"first"``) numbers are counterbalanced. Entries as :func:`agreement_sentences`, plus ``"first"``.

    Examples
    --------
    >>> s = crossed_sentences(4, seed=0)
    >>> [x["first"] < x["subject"] < x["attractor"] < x["verb"] for x in s], [x["number"] for x in s]
    ([True, True, True, True], [0, 1, 0, 1])
    """
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        number, first_number = i % 2, (i // 2) % 2  # counterbalanced
        picks = rng.choice(len(NOUNS), 3, replace=False)  # three different nouns
        subj, n1, n2 = NOUNS[picks[0]][number], NOUNS[picks[1]][first_number], NOUNS[picks[2]][1 - number]
        (verb_pair, rests) = VERBS[rng.integers(len(VERBS))]
        adj = lambda: [str(_ADJECTIVES[rng.integers(len(_ADJECTIVES))])] if rng.random() < 0.5 else []  # noqa: E731
        words = [str(_PREPOSITIONS[rng.integers(len(_PREPOSITIONS))]), "the"] + adj() + [n1]
        first = len(words)
        words += [",", "the"] + adj() + [subj]
        subject = len(words)
        words += ["that", "the"] + adj() + [n2]
        att = len(words)
        words.append(TRANSITIVE[rng.integers(len(TRANSITIVE))][1 - number])  # agrees with noun2
        words += list(rng.choice(_ADVERBS, int(rng.integers(3)), replace=False))
        words.append(verb_pair[number])
        verb = len(words)
        words += [str(rng.choice(rests)), "."]
        out.append({"words": [str(w) for w in words], "subject": subject, "verb": verb, "attractor": att,
                    "first": first, "nouns": [first, subject, att], "number": number})
    return out


def rule_hits(sentences: Sequence[dict], max_value: int = 12, query: str = "verb", target: str = "subject") -> dict[str, np.ndarray]:
    """Hits of the position-only rules: ``offset[o - 1, s]`` (the target ``o`` words before the query word) and
    ``position[p - 1, s]`` (the target at position ``p``), for ``o, p = 1 .. max_value``; and, when the
    sentences list their ``"nouns"``, of the content rules ``nearest[0, s]`` (the nearest noun
    before the query is the target) and ``first[0, s]`` (the first noun is). ``query``, ``target``: the
    sentences' keys of the two positions (agreement-head: the verb and its subject).

    Examples
    --------
    >>> r = rule_hits([{"subject": 2, "verb": 3}], max_value=3)
    >>> r["offset"].ravel().tolist(), r["position"].ravel().tolist()
    ([True, False, False], [False, True, False])
    >>> r = rule_hits([{"subject": 2, "verb": 5, "nouns": [1, 2, 4]}], max_value=3)
    >>> r["nearest"].ravel().tolist(), r["first"].ravel().tolist()
    ([False], [False])
    """
    v = np.array([s[query] for s in sentences])
    subj = np.array([s[target] for s in sentences])
    vals = np.arange(1, max_value + 1)[:, None]  # (max_value, 1)
    out = {"offset": v[None] - vals == subj[None], "position": vals == subj[None]}
    if all("nouns" in s for s in sentences):
        out["nearest"] = np.array([[max(p for p in s["nouns"] if p < s[query]) == s[target] for s in sentences]])
        out["first"] = np.array([[min(s["nouns"]) == s[target] for s in sentences]])
    return out


def held_out_best(hits: np.ndarray, rules: dict[str, np.ndarray], split_seed: int,
                  other: Optional[np.ndarray] = None, first: Optional[np.ndarray] = None,
                  groups: Optional[dict[str, np.ndarray]] = None, eligible: Optional[np.ndarray] = None,
                  also: Optional[Mapping[str, np.ndarray]] = None) -> dict:
    """Pick the best head and the best value of each rule on a random half; score them on the other.

    ``hits`` bool (heads, sentences); ``other``, ``first``: hits on the attractor and the first noun,
    reported as ``other_share``, ``first_other_share``; ``groups``: name -> mask over sentences, every
    share again per group (``"<share>_<name>"``); ``eligible`` bool (heads,): the heads that may be picked;
    ``also``: key -> bool (heads, sentences), the picked head's share on the scored half of each, under its key
    (the meaning arm's minimal pair: ``"pair_share"``).

    Examples
    --------
    >>> hits = np.array([[1, 1, 1, 1], [1, 0, 1, 0]], bool)
    >>> r = held_out_best(hits, rule_hits([{"subject": 1, "verb": 2}] * 4, 2), split_seed=0)
    >>> r["head"], r["head_share"], r["offset_share"]
    (0, 1.0, 1.0)
    """
    n = hits.shape[1]
    perm = np.random.default_rng(split_seed).permutation(n)
    pick, score = perm[: n // 2], perm[n // 2:]
    eligible = np.ones(hits.shape[0], bool) if eligible is None else np.asarray(eligible, bool)
    if eligible.shape != hits.shape[:1] or not eligible.any():
        raise ValueError(f"eligible has shape {eligible.shape} and {int(eligible.sum())} True for {hits.shape[0]} heads; "
                         f"expected one bool per head, at least one True")
    selection = np.where(eligible, hits[:, pick].mean(1), -1.0)  # (heads,) an ineligible head is never picked
    head = int(selection.argmax())  # first of ties: the same under any permutation of equals
    out = {"head": head, "head_share": float(hits[head, score].mean()), "eligible": int(eligible.sum()),
           "head_share_selection": float(hits[head, pick].mean())}
    for name, r in rules.items():
        best = int(r[:, pick].mean(1).argmax())
        out[f"{name}_value"] = best + 1
        out[f"{name}_share"] = float(r[best, score].mean())
    nouns = [(key, on) for key, on in (("other_share", other), ("first_other_share", first)) if on is not None]
    for key, on in nouns + list((also or {}).items()):
        out[key] = float(on[head, score].mean())
    for g, mask in (groups or {}).items():
        sub = score[np.asarray(mask)[score]]
        out[f"head_share_{g}"] = float(hits[head, sub].mean())
        for name, r in rules.items():
            out[f"{name}_share_{g}"] = float(r[out[f"{name}_value"] - 1, sub].mean())
        for key, on in nouns:
            out[f"{key}_{g}"] = float(on[head, sub].mean())
    return out


POSITION_RULES, CONTENT_RULES = ("offset", "position"), ("nearest", "first")


def set_decision(splits: Sequence[Mapping], suffix: str = "", level: float = 0.5, margin: float = 0.2,
                 margin_over: Sequence[str] = ()) -> dict:
    """The pre-registered rule on one set of :func:`held_out_best` splits; ``suffix`` picks a group (``"_plural"``).

    Returns the split means ``head``, ``position``, ``content`` (``nan`` without one), ``other`` (0 without
    one), ``beats_position`` (head >= level and >= position + margin) and ``passes`` (that, >= content +
    margin, and > other). ``margin_over``: more split keys the head must beat by ``margin`` to pass (the
    meaning arm's ``"pair_share"``), their means under the same keys.

    Examples
    --------
    >>> sp = {"head_share": 0.9, "offset_share": 0.3, "position_share": 0.2, "nearest_share": 1.0}
    >>> d = set_decision([sp])
    >>> d["beats_position"], d["passes"]
    (True, False)
    >>> sp = {"head_share": 0.6, "offset_share": 0.1, "position_share": 0.2, "pair_share": 0.5}
    >>> set_decision([sp])["passes"], set_decision([sp], margin_over=["pair_share"])["passes"]
    (True, False)
    """
    mean = lambda key: float(np.mean([s[key + suffix] for s in splits]))  # noqa: E731
    have = splits[0]
    head = mean("head_share")
    position = max(mean(f"{r}_share") for r in POSITION_RULES)
    content = [mean(f"{r}_share") for r in CONTENT_RULES if f"{r}_share" in have]
    others = [mean(k) for k in ("other_share", "first_other_share") if k in have]
    content_best = max(content) if content else float("nan")
    other = max(others) if others else 0.0
    over = {k: mean(k) for k in margin_over}
    beats = head >= level and head >= position + margin - 1e-12
    passes = (beats and (not content or head >= content_best + margin - 1e-12) and head > other
              and all(head >= v + margin - 1e-12 for v in over.values()))
    return {"head": head, "position": position, "content": content_best, "other": other, **over,
            "beats_position": bool(beats), "passes": bool(passes)}


#: Where ``python -m attention_course agreement-run`` stores :func:`agreement_study`.
AGREEMENT_PATH = DATA_DIR / "agreement.json"


#: The first run of the same pipeline, on 96 sentences (seed 0): kept and reported beside the deciding one.
AGREEMENT_FIRST_PATH = DATA_DIR / "agreement_96.json"


def load_agreement(path: Optional[Path] = None, first: bool = False) -> dict:
    """The stored run (default :data:`AGREEMENT_PATH`; ``first=True``: :data:`AGREEMENT_FIRST_PATH`)."""
    return read_json(path or (AGREEMENT_FIRST_PATH if first else AGREEMENT_PATH))


# ------------------------------------------------------------------ the pre-registered rule on a stored run
def set_sentences(name: str, n: int, seed: int) -> list[dict]:
    """The sentences of set ``name`` (``"plain"``, ``"attractor"`` or ``"crossed"``), as the run built them."""
    if name not in ("plain", "attractor", "crossed"):
        raise ValueError(f"name={name!r}; expected 'plain', 'attractor' or 'crossed'")
    return crossed_sentences(n, seed) if name == "crossed" else agreement_sentences(n, name == "attractor", seed)


def _number_groups(sentences: Sequence[dict]) -> dict[str, np.ndarray]:
    """Masks of the sentences whose subject is singular, and plural (the crossed set's groups)."""
    num = np.array([s["number"] for s in sentences])
    return {"singular": num == 0, "plural": num == 1}


def _unbits(rows: Optional[Sequence[str]]) -> Optional[np.ndarray]:
    if rows is None or not len(rows):
        return None if rows is None else np.zeros((0, 0), bool)
    flat = np.frombuffer("".join(rows).encode("ascii"), dtype=np.uint8)  # (heads * sentences,) bytes
    return flat.reshape(len(rows), -1) == ord("1")  # (heads, sentences)


def _stored_sentences(record: Mapping, name: str, config: Mapping) -> list[dict]:
    """The sentences of set ``name`` under ``config``, checked against those a stored record lists."""
    sents = set_sentences(name, config["n"], config["seed"])
    if [" ".join(s["words"]) for s in sents] != list(record["sentences"]):
        raise ValueError(f"the stored {name} sentences are not those of n={config['n']}, seed={config['seed']}")
    return sents


def stored_splits(record: Mapping, name: str, config: Mapping, sink_threshold: Optional[float] = 0.5) -> list[dict]:
    """:func:`held_out_best` for every split seed, recomputed from a stored set's hit strings.

    Heads whose sink share is at least ``sink_threshold`` may not be picked (None: every head may).
    """
    sents = _stored_sentences(record, name, config)
    groups = _number_groups(sents) if name == "crossed" else None
    share = np.asarray(record["sink_share"])
    eligible = None if sink_threshold is None else share < sink_threshold
    if eligible is not None and not eligible.any():
        return []
    hits, rules = _unbits(record["hits"]), rule_hits(sents)
    other, first = _unbits(record.get("attractor_hits")), _unbits(record.get("first_hits"))
    return [held_out_best(hits, rules, sp, other, first, groups, eligible=eligible) for sp in config["split_seeds"]]


def model_decision(record: Mapping, config: Mapping, level: float = 0.5, margin: float = 0.2,
                   sink_threshold: Optional[float] = 0.5) -> dict:
    """The rule on one model's crossed set: ``passes`` (the whole set), ``passes_singular``, ``passes_plural``
    (within one subject number, same head and halves), the :func:`set_decision` means, and ``heads`` picked.

    A model with no eligible head does not pass.
    """
    splits = stored_splits(record, "crossed", config, sink_threshold)
    if not splits:
        return {"passes": False, "passes_singular": False, "passes_plural": False, "heads": [], "splits": []}
    d = set_decision(splits, level=level, margin=margin)
    out = {**d, "heads": sorted({s["head"] for s in splits}), "splits": splits}
    for g in ("singular", "plural"):
        d_g = set_decision(splits, f"_{g}", level, margin)
        out[f"passes_{g}"], out[g] = d_g["passes"], d_g
    return out


def head_has_property(record: Mapping, config: Mapping, level: float = 0.5, margin: float = 0.2) -> np.ndarray:
    """Per head, whether it passes the rule on all of a stored crossed set (rules' best values on all of it).

    A head has the property when its share on the subject is at least ``level``, at least ``margin`` above
    the best of the four rules, and above its share on each other noun. Returns bool (heads,).
    """
    sents = set_sentences("crossed", config["n"], config["seed"])
    hits = _unbits(record["hits"]).mean(1)  # (heads,)
    rules = rule_hits(sents)
    best_rule = max(float(r.mean(1).max()) for r in rules.values())
    other = np.maximum(_unbits(record["attractor_hits"]).mean(1), _unbits(record["first_hits"]).mean(1))
    return (hits >= level) & (hits >= best_rule + margin - 1e-12) & (hits > other)


def head_property_bins(record: Mapping, config: Mapping, level: float = 0.5, margin: float = 0.2,
                       sink_threshold: float = 0.5) -> dict[str, float]:
    """Shares of all heads with the property on a stored crossed set (:func:`head_has_property`), without it,
    and sink heads (sink share at least ``sink_threshold``): the course's three bins."""
    return head_bins(classify_heads(head_has_property(record, config, level, margin), record["sink_share"], sink_threshold))


def head_on_set(record: Mapping, name: str, config: Mapping, head: int) -> dict[str, float]:
    """One head, chosen elsewhere, on every sentence of a stored set: its ``"subject"`` share, its largest
    ``"other"`` noun share (0 without one) and the better ``"position"`` rule's, picked on all of them."""
    sents = _stored_sentences(record, name, config)
    others = [_unbits(record[k])[head].mean() for k in ("attractor_hits", "first_hits") if record.get(k) is not None]
    rules = rule_hits(sents)
    return {"subject": float(_unbits(record["hits"])[head].mean()), "other": float(max(others, default=0.0)),
            "position": max(float(rules[r].mean(1).max()) for r in POSITION_RULES)}


def agreement_verdict(run: Mapping, level: float = 0.5, margin: float = 0.2, sink_threshold: Optional[float] = 0.5) -> dict:
    """The pre-registered verdict of ``agreement-head`` on a stored run (claims.toml: decision).

    Returns ``{"verdict", "passing", "scrambled_passing", "groups", "models", "scrambled"}``: *holds* if a
    model passes and its scrambled copy does not; *holds when* if one passes only within one subject number
    (``groups``); *undecided* otherwise.

    Examples
    --------
    >>> agreement_verdict({"config": {}, "models": {}})["verdict"]
    'undecided'
    """
    cfg = run["config"]
    models = {m: model_decision(r["crossed"], cfg, level, margin, sink_threshold) for m, r in run["models"].items()}
    scrambled = {m: model_decision(r["scrambled"]["crossed"], cfg, level, margin, sink_threshold)
                 for m, r in run["models"].items()}
    passing = [m for m, d in models.items() if d["passes"]]
    scr_any = [m for m, d in scrambled.items() if d["passes"] or d["passes_singular"] or d["passes_plural"]]
    groups = {m: [g for g in ("singular", "plural") if d[f"passes_{g}"]] for m, d in models.items()}
    if [m for m in passing if m not in scr_any]:
        verdict = "holds"
    elif any(g and m not in scr_any for m, g in groups.items()):
        verdict = "holds when"
    else:
        verdict = "undecided"
    return {"verdict": verdict, "passing": passing, "scrambled_passing": scr_any,
            "groups": {m: g for m, g in groups.items() if g}, "models": models, "scrambled": scrambled}
