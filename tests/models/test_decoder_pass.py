"""models/decoder.py, the forward pass chapters 3-7 read SmolLM2's attention from, against two references:
chapter 9's decoder (the learner's reference, exactly) and transformers' LlamaForCausalLM with eager attention
and output_attentions=True (the maps, the hidden states, the logits); on random models in float64 in the fast
tier, on SmolLM2-135M itself in the extended tier."""

from __future__ import annotations

import math

import pytest
import torch

from attention_course.chapters.decoder import forward, hidden_states
from attention_course.chapters.decoder.random_weights import TINY_DECODER, random_decoder
from attention_course.core._backend import ShapeError
from attention_course.models.decoder import KEEP, causal_uniform, decoder_pass, next_token_loss
from attention_course.models.smollm2 import DecoderConfig
from hf_bridge import hf_state_dict

pytestmark = [pytest.mark.numerics, pytest.mark.usefixtures("one_torch_thread")]

WIDER = DecoderConfig(vocab_size=20, d_model=24, n_layers=3, n_heads=6, n_kv_heads=3, d_ff=40, rope_base=100.0, eps=1e-6)


def _ids(B: int, T: int, seed: int = 0, vocab: int = 20) -> torch.Tensor:
    return torch.randint(0, vocab, (B, T), generator=torch.Generator().manual_seed(seed))


def _hf_llama(weights, max_positions: int = 64):
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.modeling_utils import no_init_weights

    c = weights.config
    cfg = LlamaConfig(vocab_size=c.vocab_size, hidden_size=c.d_model, intermediate_size=c.d_ff,
                      num_hidden_layers=c.n_layers, num_attention_heads=c.n_heads, num_key_value_heads=c.n_kv_heads,
                      rms_norm_eps=c.eps, rope_theta=c.rope_base, tie_word_embeddings=True,
                      max_position_embeddings=max_positions, attn_implementation="eager")
    with no_init_weights():
        model = LlamaForCausalLM(cfg)
    model.load_state_dict(hf_state_dict(weights), assign=True)
    return model.to(weights.embed.dtype).eval()


@pytest.mark.parametrize("cfg", [TINY_DECODER, WIDER])
def test_equals_chapter_9s_decoder(cfg):
    """The same operations in the same order: equal to float64 round-off (measured: 0 or a few ulps)."""
    w = random_decoder(5, cfg)
    ids = _ids(2, 11, seed=1)
    out = decoder_pass(w, ids, keep=KEEP)
    torch.testing.assert_close(out.hidden_states, hidden_states(w, ids), rtol=0, atol=1e-12)
    torch.testing.assert_close(out.logits, forward(w, ids)[0], rtol=0, atol=1e-12)


@pytest.mark.parametrize("cfg", [TINY_DECODER, WIDER])
def test_maps_hidden_states_and_logits_match_transformers(cfg):
    """transformers computes RoPE's angles in float32 (relative 6e-8), so float64 models agree to about 1e-7 in the
    maps and 1e-6 in values of order 10; 1e-5 leaves a margin (chapter 9's test uses the same)."""
    w = random_decoder(3, cfg)
    ids = _ids(2, 9)
    with torch.no_grad():
        ref = _hf_llama(w)(input_ids=ids, output_attentions=True, output_hidden_states=True)
    ours = decoder_pass(w, ids, keep=KEEP)
    assert len(ref.attentions) == cfg.n_layers
    for mine, theirs in zip(ours.attentions, ref.attentions):
        torch.testing.assert_close(mine, theirs, rtol=0, atol=1e-6)
    for l in range(cfg.n_layers):  # transformers' last hidden state is after the final norm
        torch.testing.assert_close(ours.hidden_states[l], ref.hidden_states[l], rtol=0, atol=1e-5)
    torch.testing.assert_close(ours.logits, ref.logits, rtol=0, atol=1e-5)


def test_the_comparison_can_fail():
    """Maps from unrotated queries and keys, or from keys repeated in the wrong order, leave transformers' maps."""
    w = random_decoder(4, WIDER)
    ids = _ids(1, 8, seed=2)
    with torch.no_grad():
        ref = _hf_llama(w)(input_ids=ids, output_attentions=True).attentions
    import attention_course.models.decoder as module

    original = module._rope
    module._rope = lambda x, base: x  # no rotation: position leaves the scores
    try:
        wrong = decoder_pass(w, ids).attentions
    finally:
        module._rope = original
    assert max(float((a - b).abs().max()) for a, b in zip(wrong, ref)) > 1e-2


def test_queries_and_keys_after_rope_give_the_maps():
    """softmax(q k^T / sqrt(d) + causal mask), from the returned q and k, is the returned map: they are the ones used."""
    w = random_decoder(7, WIDER)
    out = decoder_pass(w, _ids(2, 10, seed=3), keep=("attentions", "queries", "keys"))
    for A, q, k in zip(out.attentions, out.queries, out.keys):
        k = k.repeat_interleave(WIDER.group, dim=1)  # (B, h, T, d)
        scores = q @ k.transpose(-2, -1) / math.sqrt(WIDER.d_head)
        scores = scores.masked_fill(~torch.ones(10, 10, dtype=torch.bool).tril(), float("-inf"))
        torch.testing.assert_close(torch.softmax(scores, -1), A, rtol=0, atol=1e-14)
        assert float(A.triu(1).abs().max()) == 0.0  # causal
        torch.testing.assert_close(A.sum(-1), torch.ones_like(A.sum(-1)), rtol=0, atol=1e-14)


def test_transform_replaces_the_maps_and_keeps_the_models_own():
    w = random_decoder(2)
    ids = _ids(1, 7, seed=4)
    plain = decoder_pass(w, ids)
    same = decoder_pass(w, ids, transform=lambda a, layer: a)
    torch.testing.assert_close(same.logits, plain.logits, rtol=0, atol=0)
    seen = []
    blurred = decoder_pass(w, ids, transform=lambda a, layer: seen.append(layer) or causal_uniform(a))
    assert seen == [0, 1]
    assert float((blurred.logits - plain.logits).abs().max()) > 1e-3  # the maps are used
    torch.testing.assert_close(blurred.attentions[0], plain.attentions[0], rtol=0, atol=0)  # the model's own are kept
    with pytest.raises(ShapeError, match="transform of layer 0 returned shape"):
        decoder_pass(w, ids, transform=lambda a, layer: a[..., :-1])


def test_bad_inputs_are_named():
    w = random_decoder(0)
    with pytest.raises(ValueError, match="expected some of"):
        decoder_pass(w, _ids(1, 3), keep=("maps",))
    with pytest.raises(ShapeError, match=r"expected integer token ids \(B, T\)"):
        decoder_pass(w, torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="the vocabulary has 20 tokens"):
        decoder_pass(w, torch.tensor([[1, 25]]))


def test_next_token_loss_and_causal_uniform_by_hand():
    logits = torch.log(torch.tensor([[[0.5, 0.25, 0.25], [0.1, 0.1, 0.8], [1 / 3, 1 / 3, 1 / 3]]], dtype=torch.float64))
    ids = torch.tensor([[0, 1, 2]])  # targets 1 (p 0.25) and 2 (p 0.8)
    assert next_token_loss(logits, ids) == pytest.approx(-(math.log(0.25) + math.log(0.8)) / 2, rel=1e-12)
    U = causal_uniform(torch.zeros(2, 4, 4))
    assert U.shape == (2, 4, 4) and float(U[1, 3, 0]) == 0.25 and float(U[0, 1, 2]) == 0.0


@pytest.mark.extended
def test_smollm2s_maps_match_transformers_on_the_courses_texts():
    """SmolLM2-135M in float32, three of chapter 3's sentences: every layer's maps against transformers' eager maps.
    Both are float32 softmaxes of scores that agree to about 1e-4 (chapter 9's estimate of the stream's gap, through
    the norm and W_Q, W_K): maps agree to 1e-4 absolute; a model with llama.cpp's rows left permuted does not."""
    import dataclasses

    from attention_course.chapters.lowrank.baselines import SENTENCES
    from attention_course.models.smollm2 import load_smollm2, permute_for_llama_cpp, smollm2_tokenizer

    w = load_smollm2()
    model = _hf_llama(w, max_positions=8192)
    tok = smollm2_tokenizer()
    for text in SENTENCES[:3]:
        ids = torch.tensor([tok.encode(text).ids])
        with torch.no_grad():
            ref = model(input_ids=ids, output_attentions=True)
            ours = decoder_pass(w, ids)
        assert max(float((a - b).abs().max()) for a, b in zip(ours.attentions, ref.attentions)) < 1e-4
        assert float((ours.logits - ref.logits).abs().max()) < 1e-3
    layers = [dataclasses.replace(l, W_q=permute_for_llama_cpp(l.W_q.T, 9).T) for l in w.layers]
    with torch.no_grad():
        wrong = decoder_pass(dataclasses.replace(w, layers=layers), ids).attentions
    assert max(float((a - b).abs().max()) for a, b in zip(wrong, ref.attentions)) > 0.1
