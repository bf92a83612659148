"""The agreement sentences and the held-out choice of the best head (agreement-head, issue 26)."""

from __future__ import annotations

import numpy as np
import pytest

from attention_course.chapters.heads import agreement as ag

NOUN_WORDS = {w for pair in ag.NOUNS for w in pair}


@pytest.mark.parametrize("attractor", [False, True])
def test_sentences_are_seeded_and_agree(attractor):
    a, b = ag.agreement_sentences(40, attractor, seed=3), ag.agreement_sentences(40, attractor, seed=3)
    assert a == b and a != ag.agreement_sentences(40, attractor, seed=4)
    singular = {s for s, _ in ag.NOUNS} | {s for (s, _), _ in ag.VERBS}
    for s in a:
        w = s["words"]
        subj, verb = w[s["subject"] - 1], w[s["verb"] - 1]
        assert subj in NOUN_WORDS and (subj in singular) == (verb in singular)  # they agree
        between = w[s["subject"]:s["verb"] - 1]
        nouns_between = [x for x in between if x in NOUN_WORDS]
        if attractor:
            att = w[s["attractor"] - 1]
            assert nouns_between == [att] and (att in singular) != (subj in singular)  # the other number
        else:
            assert nouns_between == [] and s["attractor"] is None


def test_crossed_sentences_hide_the_subject_from_the_noun_rules():
    a = ag.crossed_sentences(96, seed=0)
    assert a == ag.crossed_sentences(96, seed=0) and a != ag.crossed_sentences(96, seed=1)
    singular = {s for s, _ in ag.NOUNS} | {s for (s, _), _ in ag.VERBS} | {s for s, _ in ag.TRANSITIVE}
    for s in a:
        w = s["words"]
        nouns = [i + 1 for i, x in enumerate(w) if x in NOUN_WORDS]
        assert nouns == s["nouns"] and len(nouns) == 3  # found in the words, not only in the labels
        subj, verb = w[s["subject"] - 1], w[s["verb"] - 1]
        before = [p for p in nouns if p < s["verb"]]
        assert s["subject"] != min(nouns) and s["subject"] != max(before)  # neither first nor nearest
        assert (subj in singular) == (verb in singular)  # the verb agrees with the subject
        assert (w[s["attractor"] - 1] in singular) != (subj in singular)  # the nearest noun does not
    numbers = [(s["number"], w in singular) for s in a for w in [s["words"][s["first"] - 1]]]
    assert {k: numbers.count(k) for k in set(numbers)} == {(0, True): 24, (0, False): 24, (1, True): 24, (1, False): 24}
    r = ag.rule_hits(a)
    assert not r["nearest"].any() and not r["first"].any()
    assert r["position"].mean(1).max() < 0.7 and r["offset"].mean(1).max() < 0.5  # places and distances vary


def test_sentences_vary_place_and_distance():
    s = ag.agreement_sentences(96, False, seed=0)
    assert len({x["subject"] for x in s}) >= 3 and len({x["verb"] - x["subject"] for x in s}) == 3


def test_every_word_is_one_minilm_token():
    # a whole word in WordPiece's vocabulary is one token (longest match first); the stored run
    # also checks the tokenizer's output sentence by sentence (agreement_study raises otherwise)
    from pathlib import Path

    from attention_course.models.pretrained import locate_minilm
    vocab_file = Path(locate_minilm()[0]) / "vocab.txt"
    if not vocab_file.exists():
        pytest.skip("MiniLM's vocab.txt is not a local file here")
    vocab = set(vocab_file.read_text(encoding="utf-8").split("\n"))
    words = set(NOUN_WORDS)
    for s in ag.agreement_sentences(96, True, 0) + ag.agreement_sentences(96, False, 0) + ag.crossed_sentences(96, 0):
        words |= set(s["words"])
    assert words <= vocab, sorted(words - vocab)


def test_verb_hits_skip_sinks_and_the_verb():
    w = np.zeros((1, 3, 6, 6))
    w[0, 0, 3, 0] = 0.9; w[0, 0, 3, 1] = 0.1  # mostly [CLS]: the heaviest word is still position 1
    w[0, 1, 3, 3] = 0.9; w[0, 1, 3, 2] = 0.1  # mostly itself: the heaviest other word is 2
    w[0, 2, 3, 5] = 0.8; w[0, 2, 3, 4] = 0.2  # [SEP], then the word after the verb
    hits = ag.verb_hits([w], [{"subject": 1, "verb": 3, "attractor": 2}])
    assert hits.ravel().tolist() == [True, False, False]
    assert ag.verb_hits([w], [{"subject": 1, "verb": 3, "attractor": 2}], "attractor").ravel().tolist() == [False, True, False]
    with pytest.raises(ValueError, match="2 maps for 1 sentences"):
        ag.verb_hits([w, w], [{"subject": 1, "verb": 3}])


def test_held_out_choice_does_not_see_the_scored_half():
    rng = np.random.default_rng(0)
    hits = rng.random((72, 96)) < 0.3  # no head is better than another in truth
    rules = ag.rule_hits(ag.agreement_sentences(96, False, 0))
    r = ag.held_out_best(hits, rules, split_seed=0)
    assert r["head_share_selection"] >= 0.4  # the best of 72 looks good on the half it was picked on
    assert abs(r["head_share"] - 0.3) < 0.2  # and falls back to its true rate on the other half
    # permuting heads changes which index is chosen, not the scores (one head clearly best)
    hits[5] = rng.random(96) < 0.9
    r = ag.held_out_best(hits, rules, split_seed=0)
    perm = rng.permutation(72)
    r2 = ag.held_out_best(hits[perm], rules, split_seed=0)
    assert perm[r2["head"]] == r["head"] and r2["head_share"] == r["head_share"]


@pytest.mark.extended
@pytest.mark.numerics
def test_stored_agreement_run_recomputes():
    """The shipped agreement.json from agreement_study (float32 model: at most one verb per head may flip)."""
    stored = ag.load_agreement()
    live = ag.agreement_study(n=stored["config"]["n"], seed=stored["config"]["seed"],
                              split_seeds=stored["config"]["split_seeds"])
    for key in ("plain", "attractor", "crossed"):
        assert live[key]["sentences"] == stored[key]["sentences"]
        flips = max(sum(a != b for a, b in zip(x, y)) for x, y in zip(live[key]["hits"], stored[key]["hits"]))
        assert flips <= 1
        assert [s["head"] for s in live[key]["splits"]] == [s["head"] for s in stored[key]["splits"]]
