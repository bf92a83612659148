"""SmolLM2-135M in the package's decoder against transformers' LlamaForCausalLM with the same weights:
every layer and position within the float32 estimate, the logits within theirs, the same greedy tokens.

The fast tier builds transformers' model from its config and our converted state dict (the extended tier
loads it from the GGUF file with transformers' own loader, and checks the stored reference the notebook
reads). A wrong model must fail the comparison: the test also runs one with llama.cpp's Q/K rows left
permuted.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from attention_course.chapters.decoder import (
    PROMPTS, decoder_estimates, encode, forward, greedy_with_gaps, hidden_states, logit_estimate,
    stored_reference,
)
from attention_course.chapters.decoder.reproduce import transformers_reference
from attention_course.models.smollm2 import load_smollm2, permute_for_llama_cpp
from hf_bridge import hf_state_dict

pytestmark = [pytest.mark.numerics, pytest.mark.usefixtures("one_torch_thread")]


@pytest.fixture(scope="module")
def hf_from_state_dict():
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.modeling_utils import no_init_weights

    c = load_smollm2().config
    cfg = LlamaConfig(vocab_size=c.vocab_size, hidden_size=c.d_model, intermediate_size=c.d_ff,
                      num_hidden_layers=c.n_layers, num_attention_heads=c.n_heads, num_key_value_heads=c.n_kv_heads,
                      rms_norm_eps=c.eps, rope_theta=c.rope_base, tie_word_embeddings=True,
                      max_position_embeddings=8192, attn_implementation="eager")
    with no_init_weights():
        model = LlamaForCausalLM(cfg)
    model.load_state_dict(hf_state_dict(load_smollm2()), assign=True)
    return model.eval()


def _compare(weights, model, prompt):
    ids = torch.tensor([encode(prompt)])
    states, logits = transformers_reference(ids, model)
    ours = hidden_states(weights, ids)
    gap = (ours.double() - states.double()).abs().amax(dim=-1).numpy()  # (L+1, 1, T)
    est = decoder_estimates(states, n=weights.config.d_ff)
    ours_logits = forward(weights, ids)[0]
    logit_gap = float((ours_logits.double() - logits.double()).abs().max())
    limit = logit_estimate(float(logits.abs().max()), weights.config.n_layers, weights.config.d_ff, weights.config.d_model)
    return gap, est, logit_gap, limit


@pytest.mark.parametrize("prompt", [PROMPTS[0], pytest.param(PROMPTS[1], marks=pytest.mark.extended),
                                    pytest.param(PROMPTS[2], marks=pytest.mark.extended)])
def test_every_layer_and_the_logits_agree_within_the_float32_estimate(hf_from_state_dict, prompt):
    gap, est, logit_gap, limit = _compare(load_smollm2(), hf_from_state_dict, prompt)
    assert (gap <= est / 2).all(), float((gap / est).max())  # measured: at most 0.2 of the estimate
    assert logit_gap < limit / 5  # measured: about 5e-5 against 2.2e-3


def test_a_model_with_the_rows_left_permuted_fails_the_comparison(hf_from_state_dict):
    """W_Q and W_K in llama.cpp's row order (as the file stores them), used with rotate-half RoPE."""
    w = load_smollm2()
    layers = [dataclasses.replace(l, W_q=permute_for_llama_cpp(l.W_q.T, 9).T, W_k=permute_for_llama_cpp(l.W_k.T, 3).T)
              for l in w.layers]
    wrong = dataclasses.replace(w, layers=layers)
    gap, est, logit_gap, limit = _compare(wrong, hf_from_state_dict, PROMPTS[0])
    assert (gap[1:] > est[1:]).any() and logit_gap > 100 * limit


@pytest.mark.extended
@pytest.mark.parametrize("i", range(len(PROMPTS)))
def test_greedy_tokens_equal_transformers_with_gaps_far_above_the_estimate(hf_from_state_dict, i):
    ids = torch.tensor([encode(PROMPTS[i])])
    tokens, gaps = greedy_with_gaps(load_smollm2(), ids, 8)
    with torch.no_grad():
        theirs = hf_from_state_dict.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=8,
                                             do_sample=False, pad_token_id=2)[0, ids.shape[1]:].tolist()
    assert tokens == theirs == stored_reference()[f"hf_greedy_{i}"].tolist()
    assert min(gaps) > 50 * logit_estimate(32.0, 30, 1536, 576)


def test_the_cached_decoder_gives_the_logits_of_recomputation_on_smollm2():
    w = load_smollm2()
    ids = torch.tensor([encode(PROMPTS[1])])
    full, full_cache = forward(w, ids)
    first, cache = forward(w, ids[:, :3])
    rest, cache = forward(w, ids[:, 3:], cache)
    limit = logit_estimate(float(full.abs().max()), 30, 1536, 576)
    assert float((torch.cat([first, rest], 1) - full).abs().max()) < limit / 5


@pytest.mark.extended
def test_the_stored_reference_is_transformers_gguf_model_today():
    """The notebook's stored states and logits: recomputed live from transformers' own GGUF load."""
    from attention_course.chapters.decoder.reproduce import transformers_model

    ref = stored_reference()
    ids = torch.from_numpy(ref["ids_0"])[None]
    states, logits = transformers_reference(ids, transformers_model())
    est = decoder_estimates(states, n=1536)[:, 0]  # (L+1, T)
    gap = np.abs(states[:, 0].double().numpy() - ref["states"].astype(np.float64)).max(axis=-1)
    assert (gap <= est).all()
    assert float(np.abs(logits[0, -1].numpy() - ref["logits"]).max()) < logit_estimate(32.0, 30, 1536, 576)
    for i, prompt in enumerate(PROMPTS):
        p = torch.tensor([encode(prompt)])
        assert p[0].tolist() == ref[f"ids_{i}"].tolist()
        out = transformers_model().generate(p, attention_mask=torch.ones_like(p), max_new_tokens=8, do_sample=False,
                                             pad_token_id=2)[0, p.shape[1]:].tolist()
        assert out == ref[f"hf_greedy_{i}"].tolist()
