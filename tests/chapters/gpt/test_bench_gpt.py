"""The benchmark's decoders (no timing asserted: ratios are for the command, not for a test)."""

from __future__ import annotations

import pytest
import torch

from attention_course.chapters.gpt import BenchConfig, encode
from attention_course.chapters.gpt.bench import decode_recomputing, decoder_bench, greedy
from attention_course.models.smollm2 import load_smollm2

pytestmark = [pytest.mark.numerics, pytest.mark.usefixtures("one_torch_thread")]


@pytest.mark.extended  # a heavy model check; the cache's exactness is in make test (test_parts_decoder, test_reproduce_decoder)
def test_cached_and_recomputing_decoders_write_the_same_tokens():
    ids = torch.tensor([encode("The opposite of hot is")])
    assert greedy(load_smollm2(), ids, 6) == decode_recomputing(load_smollm2(), ids, 6)


@pytest.mark.extended
def test_the_benchmark_runs_and_its_decoders_agree():
    r = decoder_bench(BenchConfig(prompt_tokens=8, new_tokens=12))
    assert r["cached_equals_recomputing"] and r["tokens_equal_to_transformers"] == 12
    assert r["recomputing_over_cached"] > 0 and r["cached_over_transformers"] > 0
