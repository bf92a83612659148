"""The stored data of two of chapter 5's sliders: linear probes through depth (:data:`PROBE_DATA`) and each
head's top key (:data:`TOP_KEY_DATA`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from ...models.encoder import bert_encode
from ...models.experiments import read_json, write_json
from ...models.perturb import scrambled_weights
from ...models.pretrained import attention_maps, minilm_tokenizer, minilm_weights
from ...models.records import DATA_DIR
from . import depth_probe
from .gnn import shared_top_key
from .topology_rules import RULE_DATA

__all__ = ["write_probe_data", "write_top_key_data"]

PROBE_DATA = DATA_DIR / "slider_depth_probe.json"
#: The neighbours chapter 5's word probes read: two and one words before, one and two after.
PROBE_OFFSETS = (-2, -1, 1, 2)
#: Chapter 5's random stacks: keyword arguments of :func:`attention_course.chapters.graphs.collapse.attention_stack`.
PROBE_STACKS = {"pure attention": {}, "+ skip": {"skip": True},
                "+ skip + MLP + LayerNorm": {"skip": True, "mlp": True, "layernorm": True},
                "+ skip, no exchange": {"skip": True}}
#: Per MiniLM head and sentence, the share of queries whose top key is the head's commonest one.
TOP_KEY_DATA = DATA_DIR / "slider_top_key.json"


def probe_data(max_depth: int = 24, seeds: Sequence[int] = range(3), digits: int = 4) -> dict:
    """Chapter 5's probe accuracies at every depth ``0..max_depth``: what :data:`PROBE_DATA` stores.

    Random stacks (:data:`PROBE_STACKS`, 75 sequences fit, 25 score) per seed, guessing each
    sequence's commonest label, and MiniLM and its scrambled copy on 160 template sentences
    (120 fit), reading the word at each of :data:`PROBE_OFFSETS`.
    """
    layers = list(range(max_depth + 1))
    acc = depth_probe.stack_probe_curves(PROBE_STACKS, layers, n_seq=100, n_train=75, seeds=seeds,
                                         mask={"+ skip, no exchange": np.eye(16, dtype=bool)})
    labels, _ = depth_probe.labelled_sequences(100, 16, 64, 16, seed=0)
    commonest = float(np.mean([np.bincount(l).max() / len(l) for l in labels[75:]]))
    tokenizer = minilm_tokenizer()
    ids = tokenizer(depth_probe.template_sentences(160, seed=0), return_tensors="pt")["input_ids"]
    W = minilm_weights()
    mini = {}
    for name, weights in (("MiniLM", W), ("scrambled", scrambled_weights(W, seed=0))):
        with torch.no_grad():
            states = [h.numpy() for h in bert_encode(weights, ids).hidden_states]  # 7 x (160, n, 384)
        mini[name] = np.round(depth_probe.encoder_probe(states, ids.numpy(), n_train=120, offsets=PROBE_OFFSETS,
                                                        words=range(1, 11)), digits).tolist()  # (4, 7)
    return {"layers": layers, "stacks": {k: np.round(v, digits).tolist() for k, v in acc.items()},
            "chance": round(commonest, 6), "n_test_tokens": 25 * 16, "minilm": mini}


def write_probe_data(path: Path = PROBE_DATA) -> dict:
    """Store :func:`probe_data` with its defaults at ``path`` (minutes)."""
    return write_json(probe_data(), path)


def top_key_data(sentences: Sequence[str], digits: int = 6) -> dict:
    """:func:`~attention_course.chapters.graphs.gnn.shared_top_key` of every MiniLM head on each sentence.

    Returns ``{"sentences", "shares", "shares_words"}``: (sentences, 72) shares, with [CLS] and
    [SEP] and on the words alone. What :data:`TOP_KEY_DATA` stores.
    """
    _, maps = attention_maps(list(sentences))  # one (6, 12, n, n) per sentence
    shares = [shared_top_key(m).ravel() for m in maps]  # (72,) each
    words = [shared_top_key(m[:, :, 1:-1, 1:-1]).ravel() for m in maps]  # without [CLS], [SEP]
    return {"sentences": list(sentences), "shares": np.round(shares, digits).tolist(),
            "shares_words": np.round(words, digits).tolist()}


def write_top_key_data(sentences: Optional[Sequence[str]] = None, path: Path = TOP_KEY_DATA) -> dict:
    """Store :func:`top_key_data` at ``path``; ``sentences`` default to chapter 5's four (:data:`RULE_DATA`'s)."""
    sentences = read_json(RULE_DATA)["sentences"] if sentences is None else sentences
    return write_json(top_key_data(sentences), path)
