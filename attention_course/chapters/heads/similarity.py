r"""Does a head look from a noun to an earlier noun of similar meaning? The meaning arm of ``head-relations``.

Seeded template sentences hold a noun :math:`T`, a later near-synonym :math:`Q` of it and two other nouns,
placed so that :math:`T` is neither the first noun nor the nearest one before :math:`Q`; each has a
minimal-pair copy with an unrelated noun :math:`U` in :math:`Q`'s slot. From :math:`Q`'s row a head *hits*
when its heaviest earlier word is :math:`T`,
:math:`\text{hit}(s) = \big[\arg\max_{j < q,\ j \notin \text{sinks}} C_{q j} = T\big]` on its content part
:math:`C`. The pipeline is agreement-head's (:mod:`.agreement`, :mod:`.agreement_models`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

__all__ = ["SYNONYMS", "single_token_words", "similarity_sentences"]

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
    from ...models.pretrained import minilm_tokenizer
    from ...models.smollm2 import smollm2_tokenizer

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
