"""SmolLM2's tokenizer, read from its GGUF file: text to token ids and back (byte-level BPE, no start token)."""

from __future__ import annotations

from ...models.smollm2 import smollm2_tokenizer

__all__ = ["encode", "decode"]


def encode(text: str) -> list[int]:
    """Token ids of ``text`` (no start token is added).

    Examples
    --------
    >>> encode("The capital of France is")                 # doctest: +SKIP
    [504, 3575, 282, 4649, 314]
    """
    return smollm2_tokenizer().encode(text).ids


def decode(ids) -> str:
    """The text of token ids (a list, or a 1-d tensor)."""
    return smollm2_tokenizer().decode([int(i) for i in ids], skip_special_tokens=False)
