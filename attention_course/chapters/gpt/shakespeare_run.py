"""The stored Shakespeare run: a small GPT trained from scratch on 35 plays, scored on 3 held out.

:func:`shakespeare_run` (a :class:`ShakespeareConfig` in, a JSON-able dict out) is stored by
``python -m attention_course shakespeare-run`` in :data:`SHAKESPEARE_FILE`; the chapter also trains :data:`LIVE`.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from ...models.experiments import Experiment, progress_bar, read_json, register
from ...models.records import DATA_DIR
from ...models.smollm2 import DecoderConfig
from ...models.training import train
from .loss import next_token_loss
from .shakespeare import CharTask, bigram_loss, corpus, unigram_loss
from .small_gpt import SmallGPT, generate_text

__all__ = ["LIVE", "held_out_loss", "stored_shakespeare"]

SHAKESPEARE_FILE = DATA_DIR / "shakespeare_run.json"


@dataclass(frozen=True)
class ShakespeareConfig:
    """One run: the model's shape, the training loop's settings, where to evaluate and sample."""

    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    n_kv_heads: int = 2
    d_ff: int = 344
    context: int = 96
    batch_size: int = 32
    steps: int = 1000
    lr: float = 3e-3
    seed: int = 0
    eval_every: int = 100
    eval_windows: int = 64
    sample_at: tuple = (0, 100, 300, 1000)
    sample_chars: int = 300
    prompt: str = "ROMEO:\n"
    threads: int = 1

    def model_config(self, vocab_size: int) -> DecoderConfig:
        return DecoderConfig(vocab_size=vocab_size, d_model=self.d_model, n_layers=self.n_layers, n_heads=self.n_heads,
                             n_kv_heads=self.n_kv_heads, d_ff=self.d_ff, rope_base=10000.0, eps=1e-5)


#: The chapter's live run: a few seconds on one thread.
LIVE = ShakespeareConfig(d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=172, context=64, batch_size=16,
                         steps=300, eval_every=300, eval_windows=32, sample_at=(300,), sample_chars=200, threads=1)
#: The stored run (see :data:`SHAKESPEARE_FILE`).
STORED = ShakespeareConfig()


@torch.no_grad()
def held_out_loss(model: SmallGPT, held_out: torch.Tensor, context: int, windows: int, loss=next_token_loss) -> float:
    """Mean next-token loss (nats per character) over ``windows`` fixed, evenly spaced windows of the held-out plays."""
    starts = torch.linspace(0, len(held_out) - context - 1, windows).long()  # (W,)
    batch = held_out[starts[:, None] + torch.arange(context)[None, :]]  # (W, T)
    logits, _ = model(batch)  # (W, T, V)
    return float(loss(logits, batch))


def shakespeare_run(config: ShakespeareConfig = STORED, block=None, show_progress: Optional[bool] = None) -> dict:
    """Train :class:`SmallGPT` on the training plays with :func:`train`; evaluate and sample along the way.

    ``show_progress``: a bar on stderr (by default only under the command). Returns a dict: the config, the corpus sizes, ``unigram`` and ``bigram`` held-out losses,
    ``steps`` and ``held_out`` (the curve), ``train_loss`` (every step), ``samples`` ({step: text}).
    """
    c = corpus()
    V = c.tokenizer.vocab_size
    kwargs = {} if block is None else {"block": block}
    model = SmallGPT(config.model_config(V), seed=config.seed, **kwargs)
    task = CharTask(c.train, config.context)
    marks = {config.steps, *range(0, config.steps + 1, config.eval_every), *config.sample_at}
    steps, curve, samples = [], [], {}
    prompt = c.tokenizer.encode(config.prompt)
    bar = iter(progress_bar(range(config.steps + 1), "shakespeare-run", total=config.steps + 1, show=show_progress))

    @torch.no_grad()
    def measure(step: int, model: SmallGPT, weights) -> None:  # train's callback: after `step` updates
        next(bar, None)
        if step not in marks:
            return
        steps.append(step)
        curve.append(held_out_loss(model, c.held_out, config.context, config.eval_windows))
        if step in config.sample_at:
            ids = generate_text(model, prompt, config.sample_chars, config.context, seed=config.seed)
            samples[str(step)] = c.tokenizer.decode(ids)

    start = time.perf_counter()
    losses = train(model, task, steps=config.steps, seed=config.seed, lr=config.lr, batch_size=config.batch_size,
                   num_threads=config.threads, callback=measure).tolist()
    return {"config": dataclasses.asdict(config), "train_chars": len(c.train), "held_out_chars": len(c.held_out),
            "held_out_plays": list(c.held_out_plays), "vocab_size": V,
            "parameters": sum(p.numel() for p in model.parameters()),
            "unigram": unigram_loss(c.train, c.held_out, V), "bigram": bigram_loss(c.train, c.held_out, V),
            "uniform": math.log(V), "steps": steps, "held_out": curve, "train_loss": losses, "samples": samples,
            "seconds": round(time.perf_counter() - start, 1)}


def stored_shakespeare() -> dict:
    """The stored run (:data:`SHAKESPEARE_FILE`)."""
    return read_json(SHAKESPEARE_FILE)


def _stored_run(config: ShakespeareConfig) -> dict:
    """The run the command stores: ``config``, sampled also at its last step."""
    at = tuple(s for s in config.sample_at if s < config.steps) + (config.steps,)
    return shakespeare_run(dataclasses.replace(config, sample_at=at))


#: ``python -m attention_course shakespeare-run``: :data:`STORED`, with its training steps as a flag.
SHAKESPEARE_RUN = register(Experiment(
    "shakespeare-run", STORED, _stored_run, SHAKESPEARE_FILE, out_flag="--json",
    document=lambda config, runs, meta: {"machine": meta["machine"], **runs.records[0]},
    flags={"--steps": dict(type=int, help="training steps")},
    help="chapter 10's stored run: a small GPT trained on Shakespeare, against unigram and bigram",
    description="Train a small GPT from scratch on 35 plays with the course's training loop, score it on 3 "
                "held-out plays against unigram and bigram baselines, sample along the way, and store JSON "
                "(attention_course/data/shakespeare_run.json; at most 10 minutes on 2 cores)."))
