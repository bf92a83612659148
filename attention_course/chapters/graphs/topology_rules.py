r"""Chapter 5's rule comparison: which fixed rule places each MiniLM head's weight?

Every rule of :data:`~attention_course.chapters.graphs.topology_rule.RULES` is fitted to every
MiniLM head on four sentences and three shuffles each and scored on two held-out shuffles
(``python -m attention_course topology-rules``, :data:`TOPOLOGY_RULES`); the ``rule-mass``
slider's data is :func:`rule_miss_data` (:data:`RULE_DATA`). The matched fixed graph with sink
heads as a bin is ``topology-matched`` (:data:`TOPOLOGY_MATCHED`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional, Union

import numpy as np
import torch

from ...models.decoder import decoder_pass
from ...models.experiments import Experiment, keep_other_models, read_json, register, write_json
from ...models.perturb import encoder_maps, scrambled_weights
from ...models.pretrained import minilm_tokenizer, minilm_weights
from ...models.records import DATA_DIR, machine_info
from ...models.smollm2 import load_smollm2, smollm2_tokenizer
from . import topology_rule
from . import topology_rule_table as tt

__all__ = ["write_rule_miss", "load_rules", "load_matched"]

#: The ``rule-mass`` slider's data: the default rule's and uniform attention's miss per head (:func:`rule_miss_data`).
RULE_DATA = DATA_DIR / "slider_rule_miss.json"
#: Chapter 5's rule comparison (``python -m attention_course topology-rules``).
RULES_DATA = DATA_DIR / "topology_rules.json"


def _held_out_maps(sentences: Sequence[str]) -> tuple:
    """MiniLM's ids and maps of each sentence and three shuffles (to fit) and two others (to score)."""
    tokenizer, weights = minilm_tokenizer(), minilm_weights()
    return topology_rule.held_out_shuffles(lambda texts: encoder_maps(weights, tokenizer, texts), sentences)


def rule_miss_data(sentences: Sequence[str], digits: int = 4) -> dict:
    """The fixed rule's and uniform attention's miss per MiniLM head: what :data:`RULE_DATA` stores.

    Returns ``{"sentences", "miss", "uniform"}``, each miss a list of 72 (layer-major).
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

    Returns ``{"sentences", "uniform", "rules": {name: miss}}``, each miss a list of 72 (layer-major).
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


# ------------------------------------------------------------------ the matched fixed graph, sink heads a bin
#: ``learned-topology`` and ``unlike-gnns`` under the one sink treatment (``python -m attention_course topology-matched``).
MATCHED_DATA = DATA_DIR / "topology_matched.json"
#: The models the matched run measures: MiniLM, MiniLM with scrambled matrices, MiniLM with q x 3 and k / 3, SmolLM2.
MATCHED_MODELS = ("MiniLM", "scrambled", "invariance", "SmolLM2")


@dataclass(frozen=True)
class MatchedConfig:
    """``topology-matched``: ``n_fit`` and ``n_held`` template sentences (disjoint words), their ``seed``, the ``models``."""

    n_fit: int = 60
    n_held: int = 30
    seed: int = 0
    models: tuple = MATCHED_MODELS


def _scaled_qk(weights, a: float = 3.0):
    """MiniLM with every head's queries scaled by ``a`` and keys by ``1 / a``: the same attention."""
    return replace(weights, layers=[replace(l, W_q=l.W_q * a, b_q=l.b_q * a, W_k=l.W_k / a, b_k=l.b_k / a)
                                    for l in weights.layers])


def model_head_maps(model: str, texts: Sequence[str]) -> list[np.ndarray]:
    """Every head's map of each text, (L * H, n, n) float64 layer-major: 72 heads for MiniLM, 270 for SmolLM2.

    ``model`` is one of :data:`MATCHED_MODELS`; SmolLM2's maps are causal, after RoPE, its first token the sink.
    """
    if model == "SmolLM2":
        w, tok = load_smollm2(), smollm2_tokenizer()
        out = []
        for text in texts:
            with torch.no_grad():
                att = decoder_pass(w, torch.tensor([tok.encode(text).ids])).attentions  # L x (1, h, n, n)
            out.append(torch.cat(att).double().numpy().reshape(-1, *att[0].shape[-2:]))
        return out
    weights = minilm_weights()
    weights = {"MiniLM": weights, "scrambled": scrambled_weights(weights, seed=0),
               "invariance": _scaled_qk(weights)}[model]
    _, maps = encoder_maps(weights, minilm_tokenizer(), texts)
    return [m.reshape(-1, *m.shape[-2:]) for m in maps]


def matched_record(fit_maps: Sequence[np.ndarray], held_maps: Sequence[np.ndarray], causal: bool,
                   digits: int = 4) -> dict:
    """Per head (lists, layer-major): sink share, the fixed table's held-out and fitted miss, uniform's, top-key share.

    Sinks are the first and last token, or the first (``causal``); every measure but the sink share
    is on the content part; the top-key share is the median over all sentences.
    """
    sinks = [0] if causal else [0, -1]
    C_fit = [tt.content_maps(m, sinks, causal) for m in fit_maps]  # each (H, m, m)
    C_held = [tt.content_maps(m, sinks, causal) for m in held_maps]
    table = tt.fixed_table(C_fit)
    m = C_held[0].shape[-1]
    uniform = np.tril(np.ones((m, m))) if causal else np.ones((m, m))
    uniform = {m: np.broadcast_to(uniform / uniform.sum(-1, keepdims=True), C_held[0].shape)}
    top = np.median([tt.top_key_share(C, skip=1 if causal else 0) for C in C_fit + C_held], axis=0)
    r = lambda x: np.round(np.asarray(x, dtype=float), digits).tolist()
    return {"sink": r(tt.head_sink_shares(list(fit_maps) + list(held_maps), sinks)),
            "miss": r(tt.table_miss(table, C_held)), "fit_miss": r(tt.table_miss(table, C_fit)),
            "uniform": r(tt.table_miss(uniform, C_held)), "top_share": r(top),
            "n_tokens": sorted({int(x.shape[-1]) for x in list(fit_maps) + list(held_maps)})}


def _matched_one(config: MatchedConfig, model: str) -> dict:
    fit, held = tt.template_halves(config.n_fit, config.n_held, config.seed)
    maps = model_head_maps(model, fit + held)
    record = matched_record(maps[:len(fit)], maps[len(fit):], causal=model == "SmolLM2")
    if model == "invariance":  # the same maps as MiniLM's, up to float32 round-off
        plain = model_head_maps("MiniLM", fit + held)
        record["max_map_gap"] = float(max(np.abs(a - b).max() for a, b in zip(maps, plain)))
    return {**record, "machine": machine_info(1)}


def _matched_document(config: MatchedConfig, runs, meta: dict) -> dict:
    fit, held = tt.template_halves(config.n_fit, config.n_held, config.seed)
    return {"config": {"n_fit": config.n_fit, "n_held": config.n_held, "seed": config.seed},
            "sentences": {"fit": fit, "held": held},
            "models": {job[0]: rec for job, rec in zip(runs.jobs, runs.records)}}


def load_matched(path: Union[str, Path] = MATCHED_DATA) -> dict:
    """Read the stored matched run: ``{"config", "sentences", "models": {model: per-head lists}}``.

    Examples
    --------
    >>> doc = load_matched()
    >>> len(doc["models"]["MiniLM"]["miss"]), len(doc["sentences"]["held"])
    (72, 30)
    """
    return read_json(path)


#: ``python -m attention_course topology-matched``: :func:`matched_record` for each of :data:`MATCHED_MODELS`.
TOPOLOGY_MATCHED = register(Experiment(
    "topology-matched", MatchedConfig(), _matched_one, MATCHED_DATA, grid=lambda c: [(m,) for m in c.models],
    document=_matched_document, merge=keep_other_models, out_flag="--json",
    flags={"--models": dict(nargs="+", choices=list(MATCHED_MODELS), help="which models (default: all four)"),
           "--n-fit": dict(type=int, help="template sentences to fit the fixed table on"),
           "--n-held": dict(type=int, help="held-out template sentences (no word in common)")},
    help="chapter 5's matched fixed graph and top-key shares, sink heads a bin (MiniLM, scrambled, SmolLM2)",
    description="For MiniLM, MiniLM with scrambled matrices, MiniLM with queries x 3 and keys / 3, and SmolLM2-135M: "
                "every head's sink share and, on its content part, the weight a per-length fixed table (the mean "
                "of the fitted maps) misplaces on held-out template sentences of other words, and the share of "
                "queries sharing one top key. Writes attention_course/data/topology_matched.json (about a minute)."))
