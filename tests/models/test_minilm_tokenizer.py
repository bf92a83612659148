"""The transformers-free route into MiniLM (tokenizer, weights, attention maps) against transformers itself."""
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attention_course.models import pretrained as P
from attention_course.models.encoder import bert_weights_from_state_dict

TEXTS = ["Attention is learned association.", "The cat that the dog chased ran up the tall tree.",
         "Hi!", "naïve café, résumé — Zürich's 1,024 tokens?!", "数学 and ∑ symbols", "   spaced   out   ", ""]


@pytest.fixture(scope="module")
def reference():
    return P.load_minilm()  # transformers' tokenizer and BertModel


@pytest.mark.slow
def test_tokenizer_gives_transformers_ids_in_every_form_the_course_uses(reference):
    ours, ref = P.minilm_tokenizer(), reference[0]
    assert isinstance(ours, P.WordPieceTokenizer)
    assert (ours.cls_token_id, ours.sep_token_id, ours.pad_token_id) == (ref.cls_token_id, ref.sep_token_id,
                                                                        ref.pad_token_id)
    for text in TEXTS:
        assert ours(text) == {k: list(v) for k, v in ref(text).items()}
        assert ours(text, add_special_tokens=False)["input_ids"] == ref(text, add_special_tokens=False)["input_ids"]
        assert ours.encode(text) == ref.encode(text)
        ids = ours(text)["input_ids"]
        assert ours.convert_ids_to_tokens(ids) == ref.convert_ids_to_tokens(ids)
    a, b = ours(TEXTS, padding=True, return_tensors="pt"), ref(TEXTS, padding=True, return_tensors="pt")
    assert a.keys() == set(b.keys())
    for k in a:
        assert a[k].dtype == torch.long and torch.equal(a[k], b[k]), k
    assert ours.convert_ids_to_tokens(101) == "[CLS]"


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(max_size=60), min_size=1, max_size=3))
def test_tokenizer_agrees_on_any_text(reference, texts):
    ours, ref = P.minilm_tokenizer(), reference[0]
    assert ours(texts, padding=True)["input_ids"] == ref(texts, padding=True)["input_ids"]
    assert ours(texts)["attention_mask"] == ref(texts)["attention_mask"]


def test_tokenizer_never_truncates_and_says_when_a_tensor_needs_padding():
    tok = P.minilm_tokenizer()
    assert len(tok("x " * 600)["input_ids"]) == 602  # tokenizer.json's 128-token cut is off
    with pytest.raises(ValueError, match=r"\[3, 5\] tokens.*padding=True"):
        tok(["a", "b c d"], return_tensors="pt")
    with pytest.raises(ValueError, match="return_tensors='np'"):
        tok("a", return_tensors="np")


@pytest.mark.slow
def test_weights_from_the_file_are_the_models_own(reference):
    model = reference[1]
    ref = bert_weights_from_state_dict(model.state_dict(), model.config.num_attention_heads, model.config.layer_norm_eps)
    ours = P.minilm_weights()
    assert (ours.num_heads, ours.layer_norm_eps) == (ref.num_heads, ref.layer_norm_eps)
    for name in ("word_embeddings", "position_embeddings", "token_type_embeddings", "ln_weight", "ln_bias"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), name
    for a, b in zip(ours.layers, ref.layers, strict=True):
        assert all(torch.equal(getattr(a, k), getattr(b, k)) for k in vars(a))
    ours.layers[0].W_q.zero_()  # each call returns its own tensors
    assert P.minilm_weights().layers[0].W_q.abs().sum() > 0


@pytest.mark.slow
@pytest.mark.numerics
def test_attention_maps_agree_with_transformers_eager_attention(reference):
    tokenizer, model = reference
    tokens, maps = P.attention_maps(TEXTS[:4])
    enc = tokenizer(TEXTS[:4], padding=True, return_tensors="pt")
    with torch.no_grad():
        ref = torch.stack(model(**enc, output_attentions=True).attentions, dim=1).double().numpy()  # (B, 6, 12, T, T)
    for b, (toks, m) in enumerate(zip(tokens, maps)):
        n = len(toks)
        assert toks == tokenizer.convert_ids_to_tokens(enc["input_ids"][b, :n].tolist())
        # two float32 implementations of the same forward pass: measured up to 8e-7 (AVX-512); weights are
        # <= 1 and six layers deep, 1e-5 is about 80 float32 epsilons
        np.testing.assert_allclose(m, ref[b, :, :, :n, :n], atol=1e-5, rtol=0)
