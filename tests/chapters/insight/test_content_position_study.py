"""chapters/insight/content_position_study.py: content-not-position's stored run, its invariance and its decision."""

from __future__ import annotations

import numpy as np
import pytest

from attention_course.chapters.graphs import topology_rules
from attention_course.chapters.insight import content_position_study as run
from attention_course.chapters.insight import position_content as pc
from attention_course.course.claims import by_id
from attention_course.models.smollm2 import smollm2_tokenizer
from attention_course.chapters.graphs.topology import shuffled_sentences


def test_every_word_is_one_token_in_both_models_in_every_order():
    tok = smollm2_tokenizer()
    for s, sentence in enumerate(run.SHUFFLE_SENTENCES):
        texts, perms = shuffled_sentences(sentence, 5, s)
        for text in texts:
            ids = tok.encode(run.DECODER_START + text).ids
            assert len(ids) == len(perms[0]) + 1 and ids[0] == tok.token_to_id("<|endoftext|>"), text
    assert len(tok.encode("<|endoftext|>" + "chased dog.").ids) == 5  # without the space, "chased" splits in two


def test_scaling_queries_and_keys_leaves_the_maps_and_the_count():
    """q -> 3q, k -> k/3: the same maps up to float32 round-off, so the same kind for every head."""
    config = run.ContentPositionConfig(n_sentences=2, n_shuffles=2)
    plain, scaled = (run.content_position_record(config, m) for m in ("MiniLM", "invariance"))
    assert scaled["max_map_gap"] < 1e-4
    doc = {"config": {"n_shuffles": 2}, "models": {"MiniLM": plain, "invariance": scaled}}
    a, b = (run.stored_scores(doc, m) for m in ("MiniLM", "invariance"))
    assert (a.head_labels() == b.head_labels()).all() and a.shares() == b.shares()
    wrong = run.stored_scores({**doc, "models": {"scrambled": run.content_position_record(config, "scrambled")}},
                              "scrambled")
    assert np.abs(wrong.by_offset - a.by_offset).max() > 0.1  # the comparison can fail


# ------------------------------------------------------------------ the stored run
def test_stored_run_structure():
    doc = run.load_content_position()
    assert doc["config"]["sentences"] == list(run.SHUFFLE_SENTENCES) and doc["config"]["n_shuffles"] == 5
    heads = {"MiniLM": 72, "scrambled": 72, "invariance": 72, "SmolLM2": 270}
    assert set(doc["models"]) == set(heads)
    for model, H in heads.items():
        rec = doc["models"][model]
        assert rec["heads"] == H
        for key in ("sink", "by_word", "by_offset", "offset_share"):
            v = np.array(rec[key])
            assert v.shape == (6, H) and v.min() >= -1 and v.max() <= 1, (model, key)
        assert 0 <= np.min(rec["sink"]) and np.max(rec["offset_share"]) <= 1
    assert doc["models"]["invariance"]["max_map_gap"] < 1e-4
    for key in ("sink", "by_word", "by_offset"):  # stored to 4 decimals
        np.testing.assert_allclose(doc["models"]["invariance"][key], doc["models"]["MiniLM"][key], atol=2e-4)


def test_the_stored_run_gives_the_ledgers_verdict():
    doc = run.load_content_position()
    shares = run.stored_scores(doc, "MiniLM").shares()
    assert pc.content_verdict(shares) == by_id("content-not-position").verdict
    heads = {k: round(v * 72) for k, v in shares.items()}  # MiniLM's 72 heads
    assert heads["content"] - heads["position"] >= 8 and heads["content"] <= 30  # clear of both other outcomes
    assert run.stored_scores(doc, "invariance").shares() == shares


@pytest.mark.extended  # recomputes the stored MiniLM and scrambled records (seconds)
def test_the_run_reproduces():
    doc = run.load_content_position()
    for model in ("MiniLM", "scrambled"):
        rec = run.content_position_record(run.ContentPositionConfig(), model)
        for key in ("sink", "by_word", "by_offset", "offset_share"):
            np.testing.assert_allclose(rec[key], doc["models"][model][key], atol=2e-3)


def test_the_smollm2_maps_are_chapter_fives():
    """The run reads SmolLM2 through chapter 5's loader, causal: nothing above the diagonal."""
    A = topology_rules.model_head_maps("SmolLM2", [run.DECODER_START + run.SHUFFLE_SENTENCES[0]])[0]
    assert A.shape == (270, 13, 13)
    assert np.abs(np.triu(A, 1)).max() == 0 and np.allclose(A.sum(-1), 1, atol=1e-5)
