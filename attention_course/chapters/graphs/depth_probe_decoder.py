"""``depth-keeps-information`` on the decoder: linear probes on SmolLM2-135M's residual stream, layer by layer.

``python -m attention_course depth-probe-decoder`` (:data:`DEPTH_PROBE_DECODER`) reads 480 of chapter 5's
template sentences, fits the probes of :func:`~attention_course.chapters.graphs.depth_probe.causal_word_hits`
for the words 2 and 1 places before each word after each layer (360 fit, 120 score), against a control
with every layer matrix's entries permuted, and writes ``attention_course/data/depth_probe_decoder.json``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Union

import numpy as np
import torch

from ...models.decoder import decoder_pass
from ...models.experiments import Experiment, progress_bar, read_json, register
from ...models.perturb import DECODER_LAYER_MATRICES, scrambled_weights
from ...models.records import DATA_DIR, machine_info
from ...models.smollm2 import SMOLLM2_START, load_smollm2, smollm2_tokenizer
from .depth_probe import causal_word_hits, template_sentences, word_end_ids

__all__ = ["load_depth_probe_decoder"]

#: The stored run.
DEPTH_PROBE_DECODER_DATA = DATA_DIR / "depth_probe_decoder.json"


@dataclass(frozen=True)
class DepthProbeDecoderConfig:
    """``depth-probe-decoder``: chapter 5's sentences, split and offsets; the control's seed; the batch."""

    n_sentences: int = 480
    n_train: int = 360
    seed: int = 0
    offsets: tuple = (-2, -1)
    scramble_seed: int = 0
    batch: int = 20
    ridges: tuple = (1e-4, 1e-3, 1e-2, 1e-1, 1.0)
    folds: int = 5


def decoder_word_states(weights, ids: torch.Tensor, batch: int = 20) -> np.ndarray:
    """The residual stream of every layer, ``(L + 1, N, T, d)`` float32, the embeddings first, ``batch`` at a time."""
    parts = []
    with torch.no_grad():
        for lo in range(0, len(ids), batch):
            out = decoder_pass(weights, ids[lo:lo + batch], keep=("hidden_states",))
            parts.append(out.hidden_states.numpy())  # (L + 1, batch, T, d)
    return np.concatenate(parts, axis=1)  # (L + 1, N, T, d)


def depth_probe_decoder_record(config: DepthProbeDecoderConfig, digits: int = 4) -> dict:
    """Both models' accuracies (offsets, L + 1), keyed ``"SmolLM2"`` and ``"scrambled"``, with their ``"hits"``
    (offsets, L + 1, sentences), ``"ridge"`` (offsets, L + 1) and ``"n_read"`` per offset."""
    tok = smollm2_tokenizer()
    start = tok.token_to_id(SMOLLM2_START)
    sentences = template_sentences(config.n_sentences, seed=config.seed)
    ids, ends = word_end_ids(lambda t: tok.encode(t).ids, sentences, start=[start], pad=start)  # (N, T), (N, W)
    split = int((np.diff(np.concatenate([np.zeros((len(ends), 1), int), ends], axis=1), axis=1) > 1).sum())
    base = load_smollm2()
    record: dict = {"tokens": int(ids.shape[1]), "words": int(ends.shape[1]), "split_words": split,
                    "hits": {}, "ridge": {}}
    for name, weights in progress_bar((("SmolLM2", base), ("scrambled", scrambled_weights(base, config.scramble_seed))),
                                      "depth-probe-decoder", total=2):
        states = decoder_word_states(weights, torch.from_numpy(ids), config.batch)  # (L + 1, N, T, d)
        hits, ridge, n_read = causal_word_hits(list(states), ids, ends, config.n_train, config.offsets, config.ridges,
                                               config.folds)  # (offsets, L + 1, N - n_train), (offsets, L + 1)
        acc = hits.sum(axis=2) / (hits.shape[2] * np.array(n_read)[:, None])  # (offsets, L + 1)
        record[name] = np.round(acc, digits).tolist()
        record["hits"][name], record["ridge"][name] = hits.tolist(), ridge.tolist()
        record["n_read"] = n_read
    return record


def _one(config: DepthProbeDecoderConfig) -> dict:
    return {**depth_probe_decoder_record(config), "machine": machine_info(torch.get_num_threads())}


def _document(config: DepthProbeDecoderConfig, runs, meta: dict) -> dict:
    return {"config": {"n_sentences": config.n_sentences, "n_train": config.n_train, "seed": config.seed,
                       "offsets": list(config.offsets), "scramble_seed": config.scramble_seed,
                       "ridges": list(config.ridges), "folds": config.folds,
                       "scrambled": list(DECODER_LAYER_MATRICES), "start": SMOLLM2_START},
            **runs.records[0]}


def load_depth_probe_decoder(path: Union[str, Path] = DEPTH_PROBE_DECODER_DATA) -> dict:
    """Read the stored run: its ``config`` and, for ``"SmolLM2"`` and ``"scrambled"``, (offsets, 31) accuracies.

    Examples
    --------
    >>> doc = load_depth_probe_decoder()
    >>> np.shape(doc["SmolLM2"]), doc["config"]["offsets"], doc["split_words"]
    ((2, 31), [-2, -1], 0)
    """
    return read_json(path)


#: ``python -m attention_course depth-probe-decoder``: :func:`depth_probe_decoder_record`.
DEPTH_PROBE_DECODER = register(Experiment(
    "depth-probe-decoder", DepthProbeDecoderConfig(), _one, DEPTH_PROBE_DECODER_DATA, document=_document,
    flags={"--n-sentences": dict(type=int, help="template sentences (the first n_train fit the probes)"),
           "--n-train": dict(type=int, help="sentences that fit the probes; the rest score them")},
    help="chapter 5's depth probes on SmolLM2-135M and on SmolLM2 with scrambled layer matrices",
    description="Reads 480 of chapter 5's template sentences with SmolLM2-135M (after its start token) and with "
                "SmolLM2 whose layer matrices are scrambled, and fits least-squares probes that read the words "
                "1 and 2 places before each word from its residual stream after each of the 30 layers (360 "
                "sentences fit, 120 score; each ridge by 5-fold cross-validation), keeping the words read right "
                "per held-out sentence. Writes attention_course/data/depth_probe_decoder.json (minutes on 2 cores)."))
