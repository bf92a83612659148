"""The payoff and the decoder: the search ranks as transformers' model does; the causal model trains
with the course's one training loop and reads no later position, while any leak is named."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import torch

import attention_course as ac
from attention_course.core._backend import ShapeError
from attention_course.chapters.encoder.assemble import encode
from attention_course.chapters.encoder.causal import (
    CausalConfig, CausalLM, causal_leaks, dependence, describe_leaks,
)
from attention_course.chapters.encoder.search import (
    SENTENCES_FILE, embed, rank, reference_embeddings, search_sentences, similarities,
)

pytestmark = [pytest.mark.numerics, pytest.mark.usefixtures("one_torch_thread")]


# ------------------------------------------------------------------ search
def test_the_shipped_sentences():
    data = json.loads(SENTENCES_FILE.read_text(encoding="utf-8"))
    s = search_sentences()
    assert s.queries == tuple(data["queries"]) and s.corpus == tuple(data["corpus"])
    assert len(s.queries) == 3 and len(s.corpus) == 10 and len(set(s.corpus)) == 10


def test_our_ranking_is_transformers_and_cannot_flip_by_round_off():
    tokenizer, _ = ac.load_minilm()
    w = ac.minilm_weights()
    s = search_sentences()
    q, c = embed(s.queries, encode, w, tokenizer), embed(s.corpus, encode, w, tokenizer)
    q_ref, c_ref = reference_embeddings(s.queries), reference_embeddings(s.corpus)
    err = float((torch.cat([q, c]) - torch.cat([q_ref, c_ref])).abs().max())
    assert err < 1e-5  # float32 round-off of the encoder, averaged
    assert (rank(q, c) == rank(q_ref, c_ref)).all()
    sims = np.sort(similarities(q_ref, c_ref), axis=1)[:, ::-1]
    # a cosine moves by at most 2 * sqrt(d) * err between the two; the closest call is far above that
    assert (sims[:, :-1] - sims[:, 1:]).min() > 2 * np.sqrt(384) * err * 10
    assert rank(q, c)[:, 0].tolist() == [0, 6, 8]  # bread box, lizards, dead battery


def test_rank_and_similarities():
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    c = torch.tensor([[0.6, 0.8], [1.0, 0.0], [0.0, -1.0]])
    np.testing.assert_allclose(similarities(q, c), [[0.6, 1.0, 0.0], [0.8, 0.0, -1.0]], atol=1e-7)
    assert rank(q, c).tolist() == [[1, 0, 2], [0, 1, 2]]
    with pytest.raises(ShapeError, match=r"queries have shape \(2, 2\) and corpus \(3, 3\)"):
        similarities(q, torch.zeros(3, 3))


# ------------------------------------------------------------------ causal
def test_the_causal_model_trains_with_the_course_loop():
    task = ac.make_task("copy", length=8)
    model = CausalLM(CausalConfig(), seed=0)
    losses = ac.train(model, task, steps=200, seed=0)
    assert losses[0] > 4.0 and losses[-20:].mean() < 0.5  # measured 4.59 -> 0.04 (the chapter's run)
    assert ac.evaluate_loss(model, task) < 0.5


def test_no_output_depends_on_a_later_input_exactly():
    model = CausalLM(CausalConfig(n_layers=2), seed=1)
    x = model.embed(torch.randint(0, 64, (1, 12), generator=torch.Generator().manual_seed(0)))
    dep = dependence(model.from_embeddings, x)
    assert np.all(np.triu(dep, 1) == 0.0) and np.all(dep[np.tril_indices(12)] > 0)
    assert causal_leaks(dep) == []
    full = dependence(lambda h: model.from_embeddings(h, causal=False), x)
    assert len(causal_leaks(full)) == 12 * 11 // 2
    leaky = CausalLM(replace(model.config, causal=False), seed=1)
    assert describe_leaks(dependence(leaky.from_embeddings, leaky.embed(torch.zeros(1, 3, dtype=torch.long)))) == \
        "leak: position 0 depends on the later position 1 (3 of 3 later pairs leak)"


def test_a_leak_is_named_by_its_pair():
    """y_i = x_i + x_{i+2} for i < 2: positions 0 and 1 read two steps ahead."""
    def peeks(x):
        y = x.clone()
        y[:, :2] = y[:, :2] + x[:, 2:4]
        return y

    dep = dependence(peeks, torch.randn(1, 5, 3, generator=torch.Generator().manual_seed(0)))
    assert causal_leaks(dep) == [(0, 2), (1, 3)]
    assert describe_leaks(dep) == "leak: position 0 depends on the later position 2 (2 of 10 later pairs leak)"


def test_causal_model_interface_and_errors():
    model = CausalLM(CausalConfig(max_len=8), seed=0)
    logits, weights = model(torch.zeros(2, 5, dtype=torch.long))
    assert logits.shape == (2, 5, 64) and weights == []
    with pytest.raises(ShapeError, match=r"tokens have shape \(1, 9\); expected \(B, T\) with T <= 8"):
        model(torch.zeros(1, 9, dtype=torch.long))
    with pytest.raises(ValueError, match="no head mask"):
        model(torch.zeros(1, 2, dtype=torch.long), head_mask=torch.ones(2, 4))
    with pytest.raises(ValueError, match="d_model=30 is not divisible by n_heads=4"):
        CausalLM(CausalConfig(d_model=30))
    with pytest.raises(ShapeError, match=r"x has shape \(2, 3, 4\); expected \(1, T, d\)"):
        dependence(lambda x: x, torch.zeros(2, 3, 4))


def test_causal_model_uses_the_chapters_block():
    """Its layers are BertLayerWeights views of its parameters: the same tensors, trained in place."""
    model = CausalLM(CausalConfig(), seed=0)
    w = model.bert_weights()
    assert w.layers[0].W_q is model.layers[0].W_q and w.word_embeddings is model.word
    assert sum(p.numel() for p in model.parameters()) == sum(
        t.numel() for t in (w.word_embeddings, w.position_embeddings, w.ln_weight, w.ln_bias, model.W_U)
    ) + sum(t.numel() for L in w.layers for t in vars(L).values())
