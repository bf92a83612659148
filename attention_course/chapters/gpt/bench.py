"""How much the key/value cache saves, and how the package's decoder compares with ``transformers``.

:func:`decoder_bench` (a :class:`BenchConfig` in, a JSON-able dict out) times greedy decoding of
SmolLM2-135M on one thread, side by side: the package's cached decoder, the same model recomputing the
prefix at every step, and ``transformers``' ``generate``; it reports ratios, which survive a change of
machine better than seconds. ``python -m attention_course decoder-bench`` prints them.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import torch

from ...models.experiments import Experiment, read_json, register
from ...models.records import DATA_DIR
from ...models.smollm2 import load_smollm2
from ..decoder.model import forward
from ..decoder.reproduce import transformers_model
from ..decoder.tokenizer import encode
from .generation import greedy

__all__ = ["BenchConfig", "stored_bench"]

#: Where ``decoder-bench`` stores its ratios.
BENCH_FILE = DATA_DIR / "decoder_bench.json"

_TEXT = ("Attention is a way for each word in a sentence to look at the other words and decide which of them "
         "matter for its meaning. A transformer stacks many layers of it, and each layer")


@dataclass(frozen=True)
class BenchConfig:
    """The benchmark's fixed settings: prompt length (tokens of a fixed text) and tokens generated."""

    prompt_tokens: int = 32
    new_tokens: int = 256
    threads: int = 1
    repeats: int = 1


@torch.no_grad()
def decode_recomputing(weights, ids: torch.Tensor, n_new: int) -> list:
    """Greedy decoding without a cache: the whole prefix through the model at every step."""
    out = []
    for _ in range(n_new):
        logits, _ = forward(weights, ids)  # (1, T, V), every position again
        nxt = logits[:, -1].argmax(dim=-1, keepdim=True)
        out.append(int(nxt))
        ids = torch.cat([ids, nxt], dim=1)
    return out


def _timed(fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - start, out


def decoder_bench(config: BenchConfig = BenchConfig()) -> dict:
    """Time the three decoders (best of ``repeats``) and return their ratios and whether their tokens agree."""
    threads = torch.get_num_threads()
    torch.set_num_threads(config.threads)
    try:
        weights, model = load_smollm2(), transformers_model()
        ids = torch.tensor([encode(_TEXT)[: config.prompt_tokens]])  # (1, prompt_tokens)
        n = config.new_tokens

        def hf():
            with torch.no_grad():
                out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n,
                                     do_sample=False, pad_token_id=2)
            return out[0, ids.shape[1]:].tolist()

        greedy(weights, ids, 2), hf() if n <= 2 else None  # warm up (first calls allocate)
        times = {"cached": [], "recomputing": [], "transformers": []}
        tokens = {}
        for _ in range(config.repeats):
            for name, fn in (("cached", lambda: greedy(weights, ids, n)),
                             ("recomputing", lambda: decode_recomputing(weights, ids, n)), ("transformers", hf)):
                seconds, tokens[name] = _timed(fn)
                times[name].append(seconds)
        best = {k: min(v) for k, v in times.items()}
        agree = sum(1 for a, b in zip(tokens["cached"], tokens["transformers"]) if a == b)
        return {"config": dataclasses.asdict(config),
                "recomputing_over_cached": best["recomputing"] / best["cached"],
                "cached_over_transformers": best["cached"] / best["transformers"],
                "cached_equals_recomputing": tokens["cached"] == tokens["recomputing"],
                "tokens_equal_to_transformers": agree, "new_tokens": n}
    finally:
        torch.set_num_threads(threads)


def stored_bench() -> dict:
    """The stored ratios (:data:`BENCH_FILE`)."""
    return read_json(BENCH_FILE)


def _report(r: dict) -> str:
    c = r["config"]
    return (f"SmolLM2-135M, greedy, one thread, {c['prompt_tokens']}-token prompt, {c['new_tokens']} new tokens:\n"
            f"  recomputing the prefix / cached decoder: {r['recomputing_over_cached']:.1f}x slower\n"
            f"  cached decoder / transformers' generate: {r['cached_over_transformers']:.2f}x the time\n"
            f"  cached and recomputed tokens equal: {r['cached_equals_recomputing']}; "
            f"{r['tokens_equal_to_transformers']}/{r['new_tokens']} equal to transformers'")


#: ``python -m attention_course decoder-bench``: :func:`decoder_bench`, its ratios printed and stored.
DECODER_BENCH = register(Experiment(
    "decoder-bench", BenchConfig(), lambda config: decoder_bench(config), BENCH_FILE, out_flag="--json",
    document=lambda config, runs, meta: {"machine": meta["machine"], **runs.records[0]}, report=_report,
    flags={"--repeats": dict(type=int, help="runs of each decoder; the best time counts")},
    help="chapter 10's benchmark: cached decoding against recomputation and transformers' generate",
    description="Greedy decoding of SmolLM2-135M on one thread, measured side by side: the package's cached "
                "decoder, the same model recomputing the whole prefix at every step, and transformers' generate; "
                "prints the ratios (prompt length and token count fixed; a few minutes)."))
