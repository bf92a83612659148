"""The stored qk-gauge run (softmax-kernel): its document, and a small configuration of it reproduced (extended tier)."""

import numpy as np
import pytest

from attention_course.chapters.kernels.gauge_run import (DECISION_GAUGES, QKGaugeConfig, _model, gauge_texts,
                                                         load_qk_gauge)


def test_stored_run_has_every_head_and_the_rule_reads_it():
    doc = load_qk_gauge()
    assert doc["decision_gauges"] == list(DECISION_GAUGES)
    shapes = {"MiniLM": (6, 12), "SmolLM2": (30, 9)}
    for model, rec in doc["models"].items():
        rho = rec["decide"]["rank_corr"]
        assert rho.shape == shapes[model] + (len(DECISION_GAUGES),)
        assert rec["key_spread"].shape == shapes[model]
        assert min(rec["tokens"]) > 2 * rec["d_k"] + 2  # rows long enough for a non-dot-product score to fail
        assert np.all(rho[..., -1] >= 0.99)  # the identity, in every head
        assert np.median(rec["free"]["rank_corr"]) < 0.9  # the free table fails
    assert np.median(doc["models"]["MiniLM"]["additive"]["rank_corr"]) >= 0.9  # the additive score does not


def test_texts_split_the_sentences():
    assert [t.count(".") for t in gauge_texts(4)] == [5, 5, 5, 5]


@pytest.mark.extended  # runs MiniLM over four texts (about two minutes)
def test_a_smaller_run_reproduces_the_decision():
    rec = _model(QKGaugeConfig(n_texts=4), "MiniLM")
    rho = np.asarray(rec["decide"]["rank_corr"])[..., -1]
    assert np.all(rho >= 0.99)
    assert np.median(rec["free"]["rank_corr"]) < 0.8  # 0.58 on the stored texts
    assert np.median(rec["additive"]["rank_corr"]) > 0.9  # 0.99 on the stored texts
