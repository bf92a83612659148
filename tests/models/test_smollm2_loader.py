"""The SmolLM2 loader: llama.cpp's Q/K permutation undone exactly as transformers' GGUF loader undoes it,
the file's shape read into DecoderConfig, and (extended) every tensor equal to transformers' own load."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from attention_course.models.smollm2 import (
    DecoderConfig, load_smollm2, locate_smollm2, permute_for_llama_cpp, read_gguf,
    unpermute_from_llama_cpp,
)
from hf_bridge import hf_state_dict


def _llama_cpp_permute(weights: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf.py LlamaModel.permute, as written there (HF rows -> GGUF rows)."""
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


@pytest.mark.parametrize("heads,kv_heads", [(9, 9), (9, 3), (4, 1)])
def test_our_unpermute_is_transformers_and_inverts_llama_cpp(heads, kv_heads):
    from transformers.modeling_gguf_pytorch_utils import LlamaTensorProcessor

    rows = kv_heads * 8
    w = np.random.default_rng(0).standard_normal((rows, 5)).astype(np.float32)
    stored = _llama_cpp_permute(w, kv_heads)
    theirs = LlamaTensorProcessor({"num_attention_heads": heads, "num_key_value_heads": kv_heads}).process(
        stored, "blk.0.attn_k.weight").weights
    ours = unpermute_from_llama_cpp(torch.from_numpy(stored), kv_heads).numpy()
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(ours, w)
    np.testing.assert_array_equal(permute_for_llama_cpp(torch.from_numpy(w), kv_heads).numpy(), stored)


def test_a_bad_row_count_is_named():
    with pytest.raises(ValueError, match=r"w has shape \(10, 3\); expected rows divisible by 2 \* n_heads = 4"):
        unpermute_from_llama_cpp(torch.zeros(10, 3), 2)


def test_the_config_rejects_heads_that_do_not_divide():
    with pytest.raises(ValueError, match="n_kv_heads to divide n_heads"):
        DecoderConfig(n_heads=9, n_kv_heads=2)


def test_the_file_is_smollm2_135m():
    w = load_smollm2()
    # SmolLM2's values are the defaults, read from the file (its eps is float32's nearest to 1e-5)
    assert dataclasses.replace(w.config, eps=1e-5) == DecoderConfig() and abs(w.config.eps - 1e-5) < 1e-12
    assert sum(t.numel() for t in w.parameters()) == 134_515_008
    assert tuple(w.layers[0].W_q.shape) == (576, 576) and tuple(w.layers[0].W_k.shape) == (576, 192)
    assert all(t.dtype == torch.float32 for t in w.parameters())
    assert locate_smollm2().name == "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.mark.extended
def test_the_qk_rows_are_the_files_rows_unpermuted():
    meta, tensors = read_gguf()
    raw = torch.from_numpy(tensors["blk.4.attn_q.weight"])  # (out, in), llama.cpp's row order
    torch.testing.assert_close(load_smollm2().layers[4].W_q, unpermute_from_llama_cpp(raw, 9).T, rtol=0, atol=0)


@pytest.mark.extended
def test_every_tensor_equals_transformers_gguf_load():
    """transformers' own GGUF loader (dequantize, unpermute) gives bit-for-bit the same 273 tensors."""
    from attention_course.chapters.decoder.reproduce import transformers_model

    theirs = transformers_model().state_dict()
    ours = hf_state_dict(load_smollm2())
    assert set(theirs) == set(ours)
    differ = [k for k in theirs if not torch.equal(theirs[k], ours[k])]
    assert not differ, differ[:5]


@pytest.mark.extended
def test_the_tokenizer_matches_transformers_gguf_tokenizer():
    """Ours adds no start token (the file says add_bos_token = False); transformers' adds <|im_start|>."""
    from transformers import AutoTokenizer

    from attention_course.chapters.decoder.tokenizer import decode, encode

    path = locate_smollm2()
    theirs = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    for text in ("The capital of France is", "Hello, world! 123 4567\n\n  spaces", "naïve café — ok?"):
        assert [1] + encode(text) == theirs(text).input_ids, text
        assert decode(encode(text)) == text
