"""The meaning arm of head-relations: its sentences, the hit reading, the verdict and the stored run."""

from __future__ import annotations

import pytest

from attention_course.chapters.heads import similarity as sim
from attention_course.chapters.heads.agreement_models import _tokens


@pytest.fixture(scope="module")
def sentences():
    return sim.similarity_sentences(384, seed=30)


def test_filter_drops_words_split_by_either_tokenizer():
    # planted counters: one tokenizer splits "sofa", the other "lorry"; both must go
    counts = [lambda w: 1 + (w == "sofa"), lambda w: 2 if w == "lorry" else 1]
    assert sim.single_token_words(["couch", "sofa", "truck", "lorry"], counts) == ["couch", "truck"]
    # the real tokenizers, word by word: MiniLM without [CLS]/[SEP], SmolLM2 after a space
    mini, smol = sim._token_counts()
    kept = sim.usable_words()
    for w in {x for p in kept["pairs"] for x in p} | set(kept["unrelated"]) | set(kept["distractors"]):
        assert mini(w) == 1 and smol(w) == 1, w
    dropped = [p for p in sim.SYNONYMS if p not in kept["pairs"]]
    assert dropped and all(mini(a) > 1 or smol(a) > 1 or mini(b) > 1 or smol(b) > 1 for a, b in dropped)
    assert len(kept["pairs"]) >= 24 and len(kept["unrelated"]) >= 8 and len(kept["distractors"]) >= 8


def test_sentences_are_seeded(sentences):
    assert sentences == sim.similarity_sentences(384, seed=30)
    assert sentences != sim.similarity_sentences(384, seed=31)


def test_target_is_neither_first_nor_nearest_noun_before_q(sentences):
    words = sim.usable_words()
    nouns = {x for p in words["pairs"] for x in p} | set(words["distractors"])
    for s in sentences:
        w = s["words"]
        found = [i + 1 for i, x in enumerate(w) if x in nouns]
        assert found == s["nouns"] + [s["query"]]  # found in the words, not only in the labels
        before = [p for p in found if p < s["query"]]
        assert s["target"] != min(before) and s["target"] != max(before)
        t, q = w[s["target"] - 1], w[s["query"] - 1]
        assert (t, q) in words["pairs"] or (q, t) in words["pairs"]
        assert w[s["first"] - 1] in words["distractors"] and w[s["other"] - 1] in words["distractors"]


def test_minimal_pair_differs_only_in_q_slot(sentences):
    words = sim.usable_words()
    for s in sentences:
        diff = [i + 1 for i, (a, b) in enumerate(zip(s["words"], s["pair_words"])) if a != b]
        assert diff == [s["query"]] and len(s["words"]) == len(s["pair_words"])
        u = s["pair_words"][s["query"] - 1]
        assert u == s["u_word"] and u in words["unrelated"]
        assert u not in {x for p in words["pairs"] for x in p} | set(words["distractors"])


def test_every_word_is_one_token_and_q_is_not_t(sentences):
    for s in sentences:
        for text in (" ".join(s["words"]), " ".join(s["pair_words"])):
            ids, word_of = _tokens("MiniLM", text)  # raises unless one token per word
            _tokens("SmolLM2", text)  # raises unless one token per word after the first
        assert ids[s["target"]] != ids[s["query"]]  # MiniLM: token position = word position ([CLS] at 0)
    from attention_course.models.smollm2 import smollm2_tokenizer
    tok = smollm2_tokenizer()
    assert all(tok.encode(" " + s["t_word"]).ids != tok.encode(" " + s["q_word"]).ids for s in sentences)


def test_positions_vary(sentences):
    assert len({s["template"] for s in sentences}) == len(sim.TEMPLATES)
    assert len({s["target"] for s in sentences}) >= 4 and len({s["query"] - s["target"] for s in sentences}) >= 4
