r"""Chapter 5's rule comparison: which fixed rule places each MiniLM head's weight?

Every rule of :data:`~attention_course.chapters.graphs.topology_rule.RULES` (uniform; key token;
position + offset; key token + position + offset; query token x key token + offset) is fitted
to every head of all-MiniLM-L6-v2 on each of four sentences and three shuffles of it, and scored
on two held-out shuffles by the weight it misplaces (mean total variation over rows;
:func:`~attention_course.chapters.graphs.topology_rule.rule_miss`). ``python -m attention_course
topology-rules`` (:data:`TOPOLOGY_RULES`) writes it to ``attention_course/data/topology_rules.json``;
:func:`load_rules` reads it back. The ``rule-mass`` slider's data is the default rule (key token +
position + offset) and uniform attention the same way (:func:`rule_miss_data`, :data:`RULE_DATA`,
which also holds chapter 5's four sentences).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Optional, Union

import numpy as np

from ...models.experiments import Experiment, read_json, register, write_json
from ...models.perturb import encoder_maps
from ...models.pretrained import minilm_tokenizer, minilm_weights
from ...models.records import DATA_DIR
from . import topology_rule

__all__ = ["write_rule_miss", "load_rules"]

#: The ``rule-mass`` slider's data: the default rule's and uniform attention's miss per head (:func:`rule_miss_data`).
RULE_DATA = DATA_DIR / "slider_rule_miss.json"
#: Chapter 5's rule comparison (``python -m attention_course topology-rules``).
RULES_DATA = DATA_DIR / "topology_rules.json"


def _held_out_maps(sentences: Sequence[str]) -> tuple:
    """MiniLM's maps of each sentence and three shuffles (to fit), and of two other shuffles (to score).

    Returns ``((fit_ids, fit_maps), (held_ids, held_maps))`` of
    :func:`~attention_course.chapters.graphs.topology_rule.held_out_shuffles`.
    """
    tokenizer, weights = minilm_tokenizer(), minilm_weights()
    return topology_rule.held_out_shuffles(lambda texts: encoder_maps(weights, tokenizer, texts), sentences)


def rule_miss_data(sentences: Sequence[str], digits: int = 4) -> dict:
    """The fixed rule's and uniform attention's miss per MiniLM head, as chapter 5 computes them.

    Fits :func:`~attention_course.chapters.graphs.topology_rule.fit_fixed_rule` on each sentence and three
    shuffles and scores it on two held-out shuffles. Returns ``{"sentences", "miss", "uniform"}``,
    each miss a list of 72 (layer-major), rounded to ``digits`` decimals: what :data:`RULE_DATA` stores.
    """
    (fit_ids, fit_maps), (held_ids, held_maps) = _held_out_maps(sentences)
    rule = topology_rule.fit_fixed_rule(fit_maps, fit_ids)
    return {"sentences": list(sentences),
            "miss": np.round(topology_rule.rule_miss(rule, held_maps, held_ids), digits).tolist(),
            "uniform": np.round(topology_rule.uniform_miss(held_maps), digits).tolist()}


def write_rule_miss(sentences: Optional[Sequence[str]] = None, path: Path = RULE_DATA) -> dict:
    """Store :func:`rule_miss_data` at ``path``; ``sentences`` default to the stored ones (chapter 5's)."""
    sentences = read_json(path)["sentences"] if sentences is None else sentences
    return write_json(rule_miss_data(sentences), path)


def rules_data(sentences: Sequence[str], digits: int = 4) -> dict:
    """Every rule of :data:`~attention_course.chapters.graphs.topology_rule.RULES` fitted to each MiniLM head.

    Fitted on each sentence and three shuffles, scored on two held-out shuffles. Returns
    ``{"sentences", "uniform", "rules": {name: miss}}``, each miss a list of 72 (layer-major): the
    weight the rule misplaces (mean total variation over rows).
    """
    (fit_ids, fit_maps), (held_ids, held_maps) = _held_out_maps(sentences)
    rules = {}
    for name, parts in topology_rule.RULES.items():
        rule = topology_rule.fit_fixed_rule(fit_maps, fit_ids, parts=parts)
        rules[name] = np.round(topology_rule.rule_miss(rule, held_maps, held_ids), digits).tolist()
    return {"sentences": list(sentences), "uniform": np.round(topology_rule.uniform_miss(held_maps), digits).tolist(),
            "rules": rules}


def load_rules(path: Union[str, Path] = RULES_DATA) -> dict:
    """Read the stored rule comparison: ``{"sentences", "uniform", "rules": {name: 72 misses}}``.

    Examples
    --------
    >>> doc = load_rules()
    >>> sorted(doc["rules"])[0], len(doc["uniform"])
    ('key token', 72)
    """
    return read_json(path)


def _rules(config: None) -> dict:
    return rules_data(read_json(RULE_DATA)["sentences"])  # chapter 5's four sentences


#: ``python -m attention_course topology-rules``: :func:`rules_data` on chapter 5's four sentences.
TOPOLOGY_RULES = register(Experiment(
    "topology-rules", None, _rules, RULES_DATA, document=lambda config, runs, meta: runs.records[0],
    help="chapter 5's rule comparison: which rule places each MiniLM head's weight",
    description="Fit five rules (uniform; key token; position + offset; key token + position + offset; query token "
                "x key token + offset) to every head of all-MiniLM-L6-v2 on four sentences and three shuffles each, "
                "and write the weight each misplaces on two held-out shuffles as JSON (default: "
                "attention_course/data/topology_rules.json; minutes: five rules x 72 heads, fitted by L-BFGS)."))
