"""Chapter 8's encoder against transformers' BertModel (all-MiniLM-L6-v2), layer by layer, in float32 and float64.

The float32 comparisons use the bound of reproduce.py, (l + 1) sqrt(d_ff) 2^-24 max|h|, and assert
it with a margin of ten (the measured gaps are 20 to 60 times below it); float64 agrees to 1e-12.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import attention_course as ac
from attention_course.chapters.encoder import exercises as bx
from attention_course.chapters.encoder.assemble import encode
from attention_course.chapters.encoder.block import block
from attention_course.chapters.encoder.embeddings import embeddings
from attention_course.chapters.encoder.feed_forward import feed_forward
from attention_course.chapters.encoder.reproduce import (
    float32_bound, first_departure, layer_bounds, layer_gaps, transformers_hidden_states,
)
from attention_course.chapters.encoder.search import search_sentences
from attention_course.chapters.encoder.self_attention import key_mask, self_attention

pytestmark = [pytest.mark.numerics, pytest.mark.usefixtures("one_torch_thread")]
TEXTS = ["The cat sat on the mat.", "Attention is learned association.", "A"]  # three lengths: padding


@pytest.fixture(scope="module")
def minilm():
    tokenizer, model = ac.load_minilm()
    enc = tokenizer(TEXTS, padding=True, return_tensors="pt")
    return tokenizer, model, ac.minilm_weights(), enc


@pytest.fixture(scope="module")
def model64(minilm):
    return copy.deepcopy(minilm[1]).double()


def _hf(model, enc, **kw):
    with torch.no_grad():
        return model(**enc, output_hidden_states=True, output_attentions=True, **kw)


def test_float32_every_layer_within_a_tenth_of_the_derived_bound(minilm):
    _, model, w, enc = minilm
    ref = torch.stack(_hf(model, enc).hidden_states)  # (7, B, T, 384)
    ours = encode(w, enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])
    bound = layer_bounds(ref, n=model.config.intermediate_size, attention_mask=enc["attention_mask"])
    gaps = layer_gaps(ours, ref, enc["attention_mask"])
    assert (gaps < bound / 10).all(), (gaps, bound)
    assert first_departure(ours, ref, enc["attention_mask"], bound) is None


def test_float64_every_layer_agrees_to_round_off(minilm, model64):
    _, _, w, enc = minilm
    ref = torch.stack(_hf(model64, enc).hidden_states)
    ours = encode(w.to(torch.float64), enc["input_ids"], enc["attention_mask"])
    assert (layer_gaps(ours, ref, enc["attention_mask"]) < 1e-12).all()


def test_each_step_against_transformers_modules_in_float64(minilm, model64):
    """Embeddings, every layer's attention weights, feed-forward and block, given transformers' own inputs."""
    _, _, w, enc = minilm
    w64 = w.to(torch.float64)
    out = _hf(model64, enc)
    real = enc["attention_mask"].bool()
    torch.testing.assert_close(embeddings(w64, enc["input_ids"], enc["token_type_ids"]),
                               model64.embeddings(input_ids=enc["input_ids"], token_type_ids=enc["token_type_ids"]))
    mask = key_mask(enc["attention_mask"])
    for i, (layer, hf_layer) in enumerate(zip(w64.layers, model64.encoder.layer)):
        h = out.hidden_states[i]
        _, weights = self_attention(h, layer, 12, mask)
        torch.testing.assert_close(weights, out.attentions[i], rtol=1e-10, atol=1e-12)
        with torch.no_grad():
            ff_ref = hf_layer.output.dense(hf_layer.intermediate(h))
        torch.testing.assert_close(feed_forward(h, layer), ff_ref, rtol=1e-10, atol=1e-11)
        y = block(h, layer, 12, mask, w64.layer_norm_eps)
        torch.testing.assert_close(y[real], out.hidden_states[i + 1][real], rtol=1e-10, atol=1e-11)


def test_the_tanh_gelu_leaves_the_bound_and_the_pre_ln_order_breaks_the_model(minilm):
    """The bound separates round-off from the smallest mistake, with a margin of 3."""
    _, model, w, enc = minilm
    ref = torch.stack(_hf(model, enc).hidden_states)
    bound = layer_bounds(ref, n=1536, attention_mask=enc["attention_mask"])
    tanh = layer_gaps(encode(w, enc["input_ids"], enc["attention_mask"], approximate="tanh"), ref, enc["attention_mask"])
    assert (tanh[1:] > 3 * bound[1:]).all(), (tanh, bound)
    pre = layer_gaps(encode(w, enc["input_ids"], enc["attention_mask"], norm="pre"), ref, enc["attention_mask"])
    assert pre[-1] > 1.0


def test_the_checks_tolerance_is_the_bound_at_minilms_last_layer(minilm):
    tokenizer, model, _, _ = minilm
    assert bx.ENCODER_ATOL == float32_bound(bx.MINILM_MAX_ABS, depth=7, n=1536)
    s = search_sentences()
    for texts in (list(bx.ENCODER_SENTENCES), list(s.queries + s.corpus), TEXTS):
        enc = tokenizer(texts, padding=True, return_tensors="pt")
        ref = transformers_hidden_states(enc["input_ids"], enc["attention_mask"])
        max_h = float(ref.abs().amax(-1)[:, enc["attention_mask"].bool()].max())
        assert max_h < bx.MINILM_MAX_ABS  # the size of the values the tolerance was derived from


def test_transformers_hidden_states_float64_leaves_the_cached_model_alone(minilm):
    _, model, _, enc = minilm
    h64 = transformers_hidden_states(enc["input_ids"], enc["attention_mask"], dtype=torch.float64)
    assert h64.dtype == torch.float64 and next(model.parameters()).dtype == torch.float32
    with pytest.raises(ValueError, match="expected torch.float32 or torch.float64"):
        transformers_hidden_states(enc["input_ids"], enc["attention_mask"], dtype=torch.float16)


def test_the_checks_minilm_case_is_transformers_output(minilm):
    tokenizer, model, _, _ = minilm
    case = bx._minilm_case()
    w, ids, am = case.args
    enc = tokenizer(list(bx.ENCODER_SENTENCES), padding=True, return_tensors="pt")
    assert torch.equal(ids, enc["input_ids"]) and int((1 - am).sum()) > 0  # one sentence is padded
    with torch.no_grad():
        ref = torch.stack(model(input_ids=ids, attention_mask=am, output_hidden_states=True).hidden_states)
    assert torch.equal(case.expected, ref)
    assert np.isclose(float(w.word_embeddings.double().sum()), float(ac.minilm_weights().word_embeddings.double().sum()))
