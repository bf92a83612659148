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


# ------------------------------------------------------------------ the hit reading on a hand-made map
def test_hit_reads_only_words_before_q_on_the_content_part():
    import numpy as np

    from attention_course.chapters.heads import agreement_models as am
    # [CLS] w1 w2 w3 w4(Q) w5 [SEP]: Q's row puts most on [CLS] (a sink), then on w5 (after Q), then w2
    A = np.zeros((2, 7, 7))
    A[0, 4] = [0.5, 0.05, 0.12, 0.08, 0.0, 0.2, 0.05]  # head 0: w5 heaviest overall, w2 heaviest before Q
    A[1, 4] = [0.1, 0.3, 0.1, 0.2, 0.0, 0.25, 0.05]    # head 1: w1 heaviest before Q
    words = [0, 1, 2, 3, 4, 5, 0]
    rows = am.query_word_rows(A, words, query=4, sinks=[0, -1], before=True)
    assert rows.argmax(-1).tolist() == [2, 1]
    np.testing.assert_allclose(rows[0, 1:4], A[0, 4, 1:4] / A[0, 4, 1:6].sum())  # renormalised without sinks
    assert (rows[:, 4:] == -1).all()
    assert am.query_word_rows(A, words, query=4, sinks=[0, -1]).argmax(-1).tolist() == [5, 1]  # without: w5 wins


# ------------------------------------------------------------------ the verdict on planted inputs
def _split(head, share, pair=0.1, rule=0.2, other=0.1):
    return {"head": head, "head_share": share, "offset_share": rule, "position_share": rule - 0.1,
            "nearest_share": 0.0, "first_share": 0.0, "other_share": other, "first_other_share": 0.0, "pair_share": pair}


def _run(meaning, scrambled, prev=0.9, prev_scr=0.2):
    pos = {"MiniLM": {"trained": {"previous token": [2, prev], "next token": [20, 0.3]},
                      "scrambled": {"previous token": [5, prev_scr], "next token": [6, 0.1]}}}
    return {"position": pos, "models": {"MiniLM": {"meaning": {"splits": [meaning] * 5},
                                                   "scrambled": {"meaning": {"splits": [scrambled] * 5}}}}}


_DEC = {"models": {"SmolLM2": {"previous token": [[0.0, 0.4]]}, "scrambled": {"previous token": [[0.1, 0.2]]}}}
_AGR = {"verdict": "holds", "passing": ["SmolLM2"], "models": {"SmolLM2": {"heads": [125]}}}


@pytest.mark.parametrize("meaning, scrambled, agreement, prev, expect, passing", [
    (_split(48, 0.8), _split(3, 0.2), _AGR, 0.9, "holds", ["position", "meaning", "syntax"]),
    (_split(48, 0.8, pair=0.7), _split(3, 0.2), _AGR, 0.9, "holds when", ["position", "syntax"]),  # minimal pair
    (_split(48, 0.8, rule=0.7), _split(3, 0.2), _AGR, 0.9, "holds when", ["position", "syntax"]),  # a rule
    (_split(48, 0.8, other=0.85), _split(3, 0.2), _AGR, 0.9, "holds when", ["position", "syntax"]),  # other noun
    (_split(48, 0.45), _split(3, 0.2), _AGR, 0.9, "holds when", ["position", "syntax"]),  # below the level
    (_split(48, 0.8), _split(3, 0.2), {**_AGR, "verdict": "undecided"}, 0.9, "holds when", ["position", "meaning"]),
    (_split(48, 0.8), _split(3, 0.2), _AGR, 0.4, "holds when", ["meaning", "syntax"]),  # no position head
    (_split(2, 0.8), _split(3, 0.2), _AGR, 0.9, "holds when", ["position", "meaning", "syntax"]),  # same head as position
    (_split(48, 0.8), _split(3, 0.8), _AGR, 0.9, "undecided", ["position", "syntax"]),  # a scrambled copy passes
])
def test_relations_verdict_branches(meaning, scrambled, agreement, prev, expect, passing):
    v = sim.relations_verdict(_run(meaning, scrambled, prev=prev), agreement, decoder=_DEC)
    assert v["verdict"] == expect and v["passing"] == passing


def test_position_fails_when_the_scrambled_copy_scores_too():
    v = sim.relations_verdict(_run(_split(48, 0.8), _split(3, 0.2), prev_scr=0.6), _AGR, decoder=_DEC)
    assert v["verdict"] == "holds when" and v["passing"] == ["meaning", "syntax"]
    assert v["position"]["MiniLM"]["scrambled"] == 0.6 and not v["position"]["MiniLM"]["passes"]


def test_sweep_moves_the_verdict_through_the_level_and_margin():
    from attention_course.chapters.heads import agreement_figures as af
    data = af.sweep_verdicts(_run(_split(48, 0.55, pair=0.3), _split(3, 0.2)), af.MEANING_SWEEPS,
                             sim.relations_verdict_of(_AGR, _DEC))
    assert dict(data["level"]) == {0.3: "holds", 0.4: "holds", 0.5: "holds", 0.6: "holds when", 0.7: "holds when",
                                   0.8: "holds when"}
    assert dict(data["margin"])[0.25] == "holds" and dict(data["margin"])[0.3] == "holds when"
    assert "no sink exclusion" not in data


# ------------------------------------------------------------------ the stored run
@pytest.fixture(scope="module")
def stored():
    return sim.load_similarity()


def test_stored_run_agrees_with_its_hits_and_the_verdict(stored, sentences):
    import numpy as np

    from attention_course.chapters.heads import agreement as ag
    cfg = stored["config"]
    assert cfg["n"] == 384 and cfg["seed"] == 30 and cfg["split_seeds"] == [0, 1, 2, 3, 4]
    bits = lambda rows: np.array([[c == "1" for c in r] for r in rows])  # noqa: E731
    rules = ag.rule_hits(sentences, query="query", target="target")
    assert not rules["nearest"].any() and not rules["first"].any()  # 0 by construction
    for model in ("MiniLM", "SmolLM2"):
        for rec in (stored["models"][model]["meaning"], stored["models"][model]["scrambled"]["meaning"]):
            assert rec["sentences"] == [" ".join(s["words"]) for s in sentences]
            assert rec["pair_sentences"] == [" ".join(s["pair_words"]) for s in sentences]
            eligible = np.asarray(rec["sink_share"]) < cfg["sink_threshold"]
            again = [ag.held_out_best(bits(rec["hits"]), rules, sp, bits(rec["other_hits"]), bits(rec["first_hits"]),
                                      eligible=eligible, also={"pair_share": bits(rec["pair_hits"])})
                     for sp in cfg["split_seeds"]]
            assert again == rec["splits"]
        assert all(v == 0 for k, v in stored["models"][model]["invariance"]["changed"].items() if k != "float32 model maps")
    pos = stored["position"]["MiniLM"]
    assert set(pos) == {"texts", "trained", "scrambled"} and len(pos["texts"]) == 5
    agreement = ag.agreement_verdict(ag.load_agreement())
    v = sim.relations_verdict(stored, agreement)
    for model, d in v["meaning"].items():  # the deciding numbers, from the stored splits
        splits = stored["models"][model]["meaning"]["splits"]
        assert d["head"] == pytest.approx(np.mean([s["head_share"] for s in splits]))
        assert d["pair_share"] == pytest.approx(np.mean([s["pair_share"] for s in splits]))
        assert d["passes"] == (d["head"] >= 0.5 and d["head"] >= max(d["position"], d["content"]) + 0.2 - 1e-12
                               and d["head"] >= d["pair_share"] + 0.2 - 1e-12 and d["head"] > d["other"])
    assert v["verdict"] in ("holds", "holds when", "undecided")


@pytest.mark.extended
@pytest.mark.numerics
def test_small_similarity_run_reproduces_the_stored_one(stored):
    """The first 16 sentences through both models and their scrambled copies (float32: one flip per head allowed)."""
    live = sim.similarity_study({"n": 16, "invariance_sentences": 2}, progress=False)
    assert live["position"]["MiniLM"] == stored["position"]["MiniLM"]
    for model, rec in live["models"].items():
        for part in (lambda r: r["meaning"], lambda r: r["scrambled"]["meaning"]):
            a, b = part(rec), part(stored["models"][model])
            assert a["sentences"] == b["sentences"][:16]
            for key in ("hits", "pair_hits", "other_hits"):
                assert max(sum(x != y for x, y in zip(h, g[:16])) for h, g in zip(a[key], b[key])) <= 1
        assert all(v == 0 for k, v in rec["invariance"]["changed"].items() if k != "float32 model maps")
