r"""``content-not-position``'s deciding run: every head of MiniLM and SmolLM2-135M under word shuffles.

``python -m attention_course content-position`` (:data:`CONTENT_POSITION`) scores every head of MiniLM,
its scrambled and rescaled controls and SmolLM2-135M on :data:`SHUFFLE_SENTENCES` and five shuffles of
each, into ``attention_course/data/content_position.json``; :func:`load_content_position` reads it and
:func:`stored_scores` rebuilds one model's
:class:`~attention_course.chapters.insight.position_content.ContentPositionScores`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Union

import numpy as np

from ...models.experiments import Experiment, keep_other_models, read_json, register
from ...models.records import DATA_DIR, machine_info
from ...models.smollm2 import SMOLLM2_START
from ..graphs.topology_rules import model_head_maps
from .position_content import ContentPositionScores, content_position_scores

__all__ = ["load_content_position", "stored_scores"]

#: Chapter 5's sentence, then five more; every word is one token in MiniLM's and SmolLM2's tokenizers.
SHUFFLE_SENTENCES = (
    "The cat that the dog chased ran up the tall tree.",
    "A young girl gave her old friend a red book at school.",
    "My brother played the piano while our mother sang a song.",
    "The farmer sold ten fresh eggs to the man from the city.",
    "She wrote a long letter to her sister before the train left.",
    "We walked along the river and watched the boats in the rain.",
)
#: The models the run scores: MiniLM, scrambled MiniLM, MiniLM with q x 3 and k / 3, SmolLM2.
MODELS = ("MiniLM", "scrambled", "invariance", "SmolLM2")
#: What SmolLM2 reads before each version: its end-of-text token (the sink) and a space.
DECODER_START = SMOLLM2_START + " "
#: The stored run.
CONTENT_POSITION_DATA = DATA_DIR / "content_position.json"
#: The per-head scores a record stores, one list per sentence (layer-major heads).
_FIELDS = ("sink", "by_word", "by_offset", "offset_share", "best_offset")


@dataclass(frozen=True)
class ContentPositionConfig:
    """``content-position``: the first ``n_sentences`` of :data:`SHUFFLE_SENTENCES`, ``n_shuffles`` each, the ``models``."""

    n_sentences: int = len(SHUFFLE_SENTENCES)
    n_shuffles: int = 5
    seed: int = 0
    models: tuple = MODELS


def _maps_of(model: str):
    """``maps_of(texts) -> (None, maps)`` for :func:`content_position_scores`: each map (1, heads, n, n), layer-major."""
    start = DECODER_START if model == "SmolLM2" else ""

    def maps_of(texts: Sequence[str]):
        maps = model_head_maps(model, [start + t for t in texts])  # each (heads, n, n) float64
        return None, [m[None] for m in maps]  # (1, heads, n, n)
    return maps_of


def content_position_record(config: ContentPositionConfig, model: str, digits: int = 4) -> dict:
    """One model's per-sentence scores (each field: sentences x heads, layer-major), rounded to ``digits``."""
    sentences = list(SHUFFLE_SENTENCES[:config.n_sentences])
    sc = content_position_scores(_maps_of(model), sentences, config.n_shuffles, config.seed,
                                 causal=model == "SmolLM2")
    r = lambda x: np.round(np.asarray(x, dtype=float)[:, 0], digits).tolist()  # (S, 1, heads) -> S x heads
    record = {"heads": int(sc.sink.shape[-1]), **{k: r(getattr(sc, k)) for k in _FIELDS}}
    record["best_offset"] = np.asarray(sc.best_offset)[:, 0].astype(int).tolist()
    if model == "invariance":  # the same maps as MiniLM's, up to float32 round-off
        texts = sentences[:2]
        record["max_map_gap"] = float(max(np.abs(a - b).max() for a, b in
                                          zip(model_head_maps("invariance", texts), model_head_maps("MiniLM", texts))))
    return record


def _one(config: ContentPositionConfig, model: str) -> dict:
    return {**content_position_record(config, model), "machine": machine_info(1)}


def _document(config: ContentPositionConfig, runs, meta: dict) -> dict:
    return {"config": {"sentences": list(SHUFFLE_SENTENCES[:config.n_sentences]), "n_shuffles": config.n_shuffles,
                       "seed": config.seed, "decoder_start": DECODER_START},
            "models": {job[0]: rec for job, rec in zip(runs.jobs, runs.records)}}


def load_content_position(path: Union[str, Path] = CONTENT_POSITION_DATA) -> dict:
    """Read the stored run: ``{"config", "models": {model: per-sentence, per-head scores}}``.

    Examples
    --------
    >>> doc = load_content_position()
    >>> doc["models"]["MiniLM"]["heads"], doc["models"]["SmolLM2"]["heads"], len(doc["config"]["sentences"])
    (72, 270, 6)
    """
    return read_json(path)


def stored_scores(doc: dict, model: str) -> ContentPositionScores:
    """One model's stored record as :class:`ContentPositionScores` (arrays (S, 1, heads)).

    Examples
    --------
    >>> sc = stored_scores(load_content_position(), "MiniLM")
    >>> sc.by_word.shape, sc.n_shuffles
    ((6, 1, 72), 5)
    """
    rec = doc["models"][model]
    arrays = {k: np.asarray(rec[k], dtype=int if k == "best_offset" else float)[:, None] for k in _FIELDS}
    return ContentPositionScores(**arrays, n_shuffles=doc["config"]["n_shuffles"])


#: ``python -m attention_course content-position``: :func:`content_position_record` for each of :data:`MODELS`.
CONTENT_POSITION = register(Experiment(
    "content-position", ContentPositionConfig(), _one, CONTENT_POSITION_DATA, grid=lambda c: [(m,) for m in c.models],
    document=_document, merge=keep_other_models,  # models not run keep their records
    flags={"--models": dict(nargs="+", choices=list(MODELS), help="which models (default: all four)"),
           "--n-sentences": dict(type=int, help="how many of the six sentences"),
           "--n-shuffles": dict(type=int, help="seeded shuffles of each sentence")},
    help="chapter 7's content-or-position count: every head of MiniLM, scrambled MiniLM and SmolLM2 under word shuffles",
    description="For MiniLM, MiniLM with scrambled matrices, MiniLM with queries x 3 and keys / 3, and SmolLM2-135M: "
                "every head's sink share and, on its content part, how well its rows follow the words and the "
                "offsets when the words of six sentences are shuffled (five shuffles each; SmolLM2 compares only "
                "the pairs visible in both orders). Writes attention_course/data/content_position.json (about a "
                "minute on 2 cores, most of it SmolLM2)."))
