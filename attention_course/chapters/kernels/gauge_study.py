"""The stored run behind softmax-kernel: is every dot-product head local in some gauge of its own space?

``python -m attention_course qk-gauge`` runs :func:`~.qk_kernel.gauge_sweep` on every head of
all-MiniLM-L6-v2 and SmolLM2-135M-Instruct over two texts of about 260 tokens: on the head's score table
factorised in :math:`d_k` dimensions at :data:`DECISION_GAUGES`, on two baselines (a free score table and,
for MiniLM, an additive score), and on its own and untrained queries and keys at :data:`DESCRIPTION_GAUGES`;
plus :func:`~.qk_kernel.key_sphere_spread`. About five minutes; stored as :data:`QK_GAUGE_DATA`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ...models.experiments import Experiment, Runs, read_json, register
from ...models.pretrained import SENTENCES
from ...models.queries_keys import minilm_queries_keys
from ...models.records import DATA_DIR
from .input_locality import minilm_hidden_attention
from .qk_kernel import (additive_scores, dot_product_factors, free_score_tables, gauge_sweep, key_sphere_spread,
                        smollm2_queries_keys)

__all__ = ["gauge_texts", "load_qk_gauge"]

QK_GAUGE_DATA = DATA_DIR / "qk_gauge.json"
DECISION_GAUGES = (1.0, 4.0, 16.0, 64.0, 1024.0)
DESCRIPTION_GAUGES = (0.25, 0.5, 1.0, 2.0, 4.0, 16.0)
MODELS = {"MiniLM": dict(d=32, sinks=(0, -1), causal=False), "SmolLM2": dict(d=64, sinks=(0,), causal=True)}


def gauge_texts(n_texts: int = 2) -> list[str]:
    """Chapter 3's 20 sentences joined into ``n_texts`` texts (ten sentences, about 260 tokens, each by default).

    Examples
    --------
    >>> [t.count(".") for t in gauge_texts()]
    [10, 10]
    """
    per = len(SENTENCES) // n_texts
    return [" ".join(SENTENCES[i * per:(i + 1) * per]) for i in range(n_texts)]


@dataclass(frozen=True)
class QKGaugeConfig:
    """The stored run's settings: ``n_texts`` texts, the additive baseline's width, the seed of every baseline."""

    n_texts: int = 2
    width: int = 128
    seed: int = 0


def _mean(parts: list[dict]) -> dict:
    return {m: np.mean([p[m] for p in parts], axis=0) for m in parts[0]}


def _model(config: QKGaugeConfig, model: str) -> dict:
    """One model's record: per-head arrays, as nested lists."""
    texts = gauge_texts(config.n_texts)
    spec = MODELS[model]
    d, sinks, causal = spec["d"], spec["sinks"], spec["causal"]
    runs = minilm_queries_keys(texts, dtype=torch.float64) if model == "MiniLM" else smollm2_queries_keys(texts)
    hidden = [h for h, _ in minilm_hidden_attention(texts)] if model == "MiniLM" else None
    rng = np.random.default_rng(config.seed)
    kw = dict(sinks=sinks, causal=causal)
    big = dict(kw, min_keys=2 * d + 2)  # rows with far more than d + 1 keys: where a non-dot-product can fail
    parts: dict[str, list] = {k: [] for k in ("decide", "free", "additive", "own", "untrained")}
    spread, spread_untrained = [], []
    for t, (q, k) in enumerate(runs):
        L = q @ np.swapaxes(k, -1, -2) / np.sqrt(d)  # (layers, heads, T, T) the head's logits
        parts["decide"].append(gauge_sweep(*dot_product_factors(L, d), DECISION_GAUGES, scores=L, **big))
        F = free_score_tables(L, seed=config.seed + t)
        parts["free"].append(gauge_sweep(*dot_product_factors(F, d), DECISION_GAUGES[-1:], scores=F, **big))
        if hidden is not None:  # one additive table per head, on its layer's input, spread matched to the head
            A = np.stack([additive_scores(hidden[t][layer], q.shape[1], config.width, 1.0, seed=config.seed + 100 * t
                                          + layer) for layer in range(q.shape[0])])  # (layers, heads, T, T)
            A *= L.std(axis=(-2, -1), keepdims=True)
            parts["additive"].append(gauge_sweep(*dot_product_factors(A, d), DECISION_GAUGES[-1:], scores=A, **big))
        parts["own"].append(gauge_sweep(q, k, DESCRIPTION_GAUGES, **kw))
        qu, ku = rng.standard_normal(q.shape), rng.standard_normal(k.shape)  # untrained heads, same shapes
        parts["untrained"].append(gauge_sweep(qu, ku, DESCRIPTION_GAUGES, **kw))
        content = [j for j in range(q.shape[-2]) if j not in {s % q.shape[-2] for s in sinks}]
        spread.append(key_sphere_spread(k, content))
        spread_untrained.append(key_sphere_spread(ku, content))
    out = {name: {m: v.tolist() for m, v in _mean(p).items()} for name, p in parts.items() if p}
    out["key_spread"] = np.mean(spread, 0).tolist()
    out["key_spread_untrained"] = np.mean(spread_untrained, 0).tolist()
    out["tokens"] = [int(q.shape[-2]) for q, _ in runs]
    out["d_k"] = d
    return {"model": model, **out}


def _document(config: QKGaugeConfig, runs: Runs, meta: dict) -> dict:
    return {"meta": meta, "decision_gauges": list(DECISION_GAUGES), "description_gauges": list(DESCRIPTION_GAUGES),
            "models": {r["model"]: r for r in runs.records}}


QK_GAUGE = register(Experiment(
    "qk-gauge", QKGaugeConfig(), _model, QK_GAUGE_DATA, grid=lambda c: [(m,) for m in MODELS],
    document=_document, out_flag="--json",
    help="chapter 2's softmax-kernel run: every head's locality in the gauges of its query-key space",
    description="For all-MiniLM-L6-v2 and SmolLM2 on two texts of about 260 tokens: every head's rank correlation "
                "of weight with query-key distance against the gauge a (q -> a q, k -> k / a), on its score table "
                "factorised in d_k dimensions, against a free score table and an additive score; its own and "
                "untrained heads at finite gauges; the gauge-free key-sphere spread (default: "
                "attention_course/data/qk_gauge.json; about five minutes)."))


def load_qk_gauge(path: Path = QK_GAUGE_DATA) -> dict:
    """The stored ``qk-gauge`` run: per model, per-head arrays (``decide``, ``free``, ``additive``, ``own``, ``untrained``)."""
    doc = read_json(path)
    for rec in doc["models"].values():
        for name, v in rec.items():
            if isinstance(v, dict):
                rec[name] = {m: np.asarray(x) for m, x in v.items()}
            elif name.startswith("key_spread"):
                rec[name] = np.asarray(v)
    return doc
