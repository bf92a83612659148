"""Chapter 3's claims on two trained models: all-MiniLM-L6-v2 (encoder) and SmolLM2-135M (decoder).

:func:`heads_run` (``low-rank-real``) and :func:`decoder_trailing_run` (``trailing-noise``) are pure
functions of a configuration; ``python -m attention_course lowrank-two-models`` (:data:`LOWRANK_TWO_MODELS`)
stores them in :data:`TWO_MODELS_PATH` and :func:`load_two_models` reads them back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from ...models.decoder import causal_uniform, decoder_pass, next_token_loss
from ...models.encoder import bert_encode
from ...models.pretrained import minilm_weights
from ...models.queries_keys import bert_queries_keys
from ...models.experiments import Experiment, Runs, progress_bar, read_json, register
from ...models.records import DATA_DIR, machine_info
from ...models.smollm2 import load_smollm2, smollm2_tokenizer
from . import head_swap as sw
from .head_properties import content_measures
from .in_function import _sentence_order, minilm_ids
from .spectra import effective_rank
from .trailing import ORDERS_REMOVED, _costs, _kept_share, _transform

__all__ = ["load_two_models"]

TWO_MODELS_PATH = DATA_DIR / "lowrank_two_models.json"
#: The two models, with their sink positions as a function of n.
MODELS = {"MiniLM": lambda n: [0, n - 1], "SmolLM2": lambda n: [0]}
#: The deciding configuration of ``low-rank-real`` (claims.toml).
HEADS_CONFIG = {"n": 512, "k": 32, "orders": [0, 1, 2, 3, 4], "ns": [16, 32, 64, 128, 256, 512], "models": list(MODELS)}
#: The deciding configuration of SmolLM2's part of ``trailing-noise`` (claims.toml).
TRAILING_CONFIG = {"n": 128, "orders": [0, 1, 2, 3, 4], "draws": [0, 1, 2, 3, 4], "keeps": [0.9, 0.95, 0.99]}


def smollm2_ids(n: int, order: int = 0) -> torch.Tensor:
    """SmolLM2's token ids ``(1, n)`` of the sentences joined by spaces in ``order``, cut to the first ``n``.

    The same text as :func:`~attention_course.chapters.lowrank.in_function.minilm_ids`; the first token is the sink.
    """
    ids = smollm2_tokenizer().encode(" ".join(_sentence_order(order))).ids
    if not 2 <= n <= len(ids):
        raise ValueError(f"n={n}; expected 2 <= n <= {len(ids)} (the text's SmolLM2 tokens)")
    return torch.tensor([ids[:n]])  # (1, n)


@torch.no_grad()
def model_maps(model: str, n: int, order: int = 0) -> np.ndarray:
    """Every head's attention map on the text: ``(L * h, n, n)`` float64, layer-major (72 for MiniLM, 270 for SmolLM2)."""
    if model == "MiniLM":
        att = sw.bert_forward_with(minilm_weights(), minilm_ids(n, order))[1]  # L x (1, h, n, n)
    elif model == "SmolLM2":
        att = decoder_pass(load_smollm2(), smollm2_ids(n, order)).attentions  # L x (1, h, n, n), causal, after RoPE
    else:
        raise ValueError(f"model={model!r}; expected one of {list(MODELS)}")
    return torch.cat(att).double().numpy().reshape(-1, n, n)  # (L h, n, n)


def _uniform(model: str, n: int) -> np.ndarray:
    """Uniform attention over the keys each query may see, one map (1, n, n)."""
    if model == "SmolLM2":
        return causal_uniform(torch.zeros(1, n, n, dtype=torch.float64)).numpy()
    return np.full((1, n, n), 1.0 / n)


def _maps_from(q: torch.Tensor, k: torch.Tensor, causal: bool) -> np.ndarray:
    """softmax(q k^T / sqrt(d)) in float64, optionally causal: q (h, T, d), k (h, T, d) -> (h, T, T)."""
    q, k = q.double(), k.double()
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (h, T, T)
    if causal:
        scores = scores.masked_fill(~torch.ones(q.shape[1], q.shape[1], dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(scores, dim=-1).numpy()  # (h, T, T), over the keys


@torch.no_grad()
def invariance_gap(model: str, n: int, k: int, layer: int, scale: float = 3.0, seed: int = 0) -> dict:
    """Largest change of the content measures when attention is left unchanged by its parameters.

    The layer's maps recomputed in float64 with ``q -> scale q, k -> k / scale`` and with one random vector
    added to every key; per change, the largest change of ``rank_error``, ``entropy``, ``sink_share``.
    """
    if model == "MiniLM":
        W = minilm_weights().to(torch.float64)
        ids = minilm_ids(n)
        q, kk = bert_queries_keys(W, bert_encode(W, ids).hidden_states)[layer]  # (1, h, n, d) each
        q, kk, causal = q[0], kk[0], False
    else:
        w = load_smollm2()
        out = decoder_pass(w, smollm2_ids(n), keep=("queries", "keys"))
        q, kk, causal = out.queries[layer][0], out.keys[layer][0].repeat_interleave(w.config.group, dim=0), True
    sinks = MODELS[model](n)
    shift = torch.randn(q.shape[-1], generator=torch.Generator().manual_seed(seed), dtype=torch.float64)  # (d,)
    base = content_measures(_maps_from(q, kk, causal), sinks, k)
    gaps = {}
    for name, (qq, kq) in {"q -> a q, k -> k / a": (q.double() * scale, kk.double() / scale),
                            "k -> k + c": (q.double(), kk.double() + shift)}.items():
        other = content_measures(_maps_from(qq, kq, causal), sinks, k)
        gaps[name] = max(float(np.abs(other[key] - base[key]).max()) for key in ("rank_error", "entropy", "sink_share"))
    return gaps


def heads_run(config: Optional[dict] = None, progress: Optional[bool] = None) -> dict:
    """``low-rank-real`` on both models: per order and head, the content measures; the growth with n; baselines.

    ``config`` overrides :data:`HEADS_CONFIG` (keys ``n``, ``k``, ``orders``, ``ns``, ``models``).
    Returns ``{"config", "models": {name: {"sinks", "orders": [{order, measures...}], "full_rank_error",
    "growth": [{n, effective_rank}], "uniform": measures, "invariance": gaps}}}``.
    """
    cfg = {**HEADS_CONFIG, **(config or {})}
    n, k = cfg["n"], cfg["k"]
    out = {"config": cfg, "models": {}}
    for model in cfg["models"]:
        sinks = MODELS[model](n)
        rows = []
        for order in progress_bar(cfg["orders"], f"{model}: heads by sentence order", len(cfg["orders"]), progress):
            A = model_maps(model, n, order)  # (heads, n, n)
            m = content_measures(A, sinks, k)
            full = np.linalg.svd(A, compute_uv=False)  # (heads, n): the whole map's spectrum, for comparison
            e = full**2
            rows.append({"order": int(order), **{key: v.tolist() for key, v in m.items()},
                         "full_rank_error": np.sqrt(np.clip(1 - e[:, :k].sum(-1) / e.sum(-1), 0, None)).tolist()})
            del A
        growth = [{"n": int(m_), "effective_rank": effective_rank(model_maps(model, m_, 0)).tolist()}
                  for m_ in progress_bar(cfg["ns"], f"{model}: effective rank against n", len(cfg["ns"]), progress)]
        uniform = {key: float(v[0]) for key, v in content_measures(_uniform(model, n), sinks, k).items()}
        out["models"][model] = {"sinks": sinks, "orders": rows, "growth": growth, "uniform": uniform,
                                "invariance": invariance_gap(model, n, k, layer=3)}
    return out


@torch.no_grad()
def decoder_trailing_run(config: Optional[dict] = None, progress: Optional[bool] = None) -> dict:
    """SmolLM2's part of ``trailing-noise``: next-token loss with each removal, per order and kept share.

    ``config`` overrides :data:`TRAILING_CONFIG`; each row's ``cost`` is each removal's rise in loss
    divided by uniform attention's.
    """
    cfg = {**TRAILING_CONFIG, **(config or {})}
    w = load_smollm2()
    rows = []
    for order in progress_bar(cfg["orders"], "SmolLM2: trailing values by sentence order", len(cfg["orders"]), progress):
        ids = smollm2_ids(cfg["n"], order)

        def loss(tf=None) -> float:
            return next_token_loss(decoder_pass(w, ids, transform=tf, keep=()).logits, ids)

        exact, uniform = loss(), loss(lambda a, layer: causal_uniform(a))
        maps = decoder_pass(w, ids).attentions  # L x (1, h, n, n)
        for keep in cfg["keeps"]:
            row = {"order": int(order), "keep": keep, "exact": exact, "uniform": uniform,
                   "kept": _kept_share(maps, keep, cfg["n"]),
                   "trailing": loss(_transform("trailing", keep, 0, True)),
                   "leading": loss(_transform("leading", keep, 0, True)),
                   "random": [loss(_transform("random", keep, d, True)) for d in cfg["draws"]]}
            row["cost"] = _costs(row, exact)
            rows.append(row)
    assert set(rows[0]["cost"]) == set(ORDERS_REMOVED)
    return {"config": cfg, "rows": rows}


def load_two_models(path: Optional[Path] = None) -> dict:
    """The stored runs (default :data:`TWO_MODELS_PATH`)."""
    return read_json(path or TWO_MODELS_PATH)


@dataclass(frozen=True)
class TwoModelsConfig:
    """The configuration of ``lowrank-two-models``: ``part`` (``"heads"`` or ``"trailing"``), the ``models`` the
    heads part runs (one at a time keeps each call under 15 minutes), ``quick`` a small smoke run."""

    part: str = "heads"
    models: tuple = tuple(MODELS)
    quick: bool = False

    def heads(self) -> dict:
        """:data:`HEADS_CONFIG` as this configuration runs it."""
        return {**HEADS_CONFIG, **(_QUICK["heads"] if self.quick else {}), "models": list(self.models)}

    def trailing(self) -> dict:
        """:data:`TRAILING_CONFIG` as this configuration runs it."""
        return {**TRAILING_CONFIG, **(_QUICK["trailing"] if self.quick else {})}


_QUICK = {"heads": {"n": 64, "orders": [0], "ns": [16, 64]},
          "trailing": {"n": 32, "orders": [0], "draws": [0], "keeps": [0.9]}}


def _grid(config: TwoModelsConfig) -> list[tuple]:
    if config.part == "heads":
        return [("heads", model) for model in config.models]
    return [("trailing", order) for order in config.trailing()["orders"]]


def _one(config: TwoModelsConfig, part: str, what) -> dict:
    """One model's heads record, or one sentence order's trailing rows."""
    if part == "heads":
        cfg = {**config.heads(), "models": [what]}
        return {**heads_run(cfg)["models"][what], "machine": machine_info(1), "config": cfg}
    return decoder_trailing_run({**config.trailing(), "orders": [what]})


def _document(config: TwoModelsConfig, runs: Runs, meta: dict) -> dict:
    if config.part == "heads":
        return {"heads": {"machine": meta["machine"], "models": {job[1]: r for job, r in zip(runs.jobs, runs.records)}}}
    return {"trailing": {"machine": meta["machine"], "config": config.trailing(),
                         "rows": [row for r in runs.records for row in r["rows"]]}}


def _keep_the_others(doc: dict, previous: dict) -> dict:
    """The part just run replaces its own record; the other part, and the heads of models not run, stay."""
    out = {**previous, **doc}
    if "heads" in doc:
        out["heads"] = {**doc["heads"], "models": {**previous.get("heads", {}).get("models", {}),
                                                   **doc["heads"]["models"]}}
    return out


def _problem(config: TwoModelsConfig) -> Optional[str]:
    unknown = [m for m in config.models if m not in MODELS]
    return f"--models {' '.join(unknown)}; expected some of {' '.join(MODELS)}" if unknown else None


#: ``python -m attention_course lowrank-two-models``: one part a call, each kept beside the other in one file.
LOWRANK_TWO_MODELS = register(Experiment(
    "lowrank-two-models", TwoModelsConfig(), _one, TWO_MODELS_PATH, grid=_grid, document=_document,
    merge=_keep_the_others, check=_problem, out_flag="--json",
    flags={"--part": dict(choices=("heads", "trailing"), required=True,
                          help="which run (each keeps the other's record)"),
           "--models": dict(nargs="+", choices=list(MODELS),
                            help="--part heads: which models (run one at a time to stay under 15 minutes each)"),
           "--quick": dict(action="store_true", help="a small smoke run")},
    help="chapter 3 on two models: heads' content-part rank, and SmolLM2's trailing singular values",
    description="--part heads: MiniLM and SmolLM2-135M on the shipped text at n = 512 in five orders, every head's "
                "sink share and the rank and entropy of its content part, the effective rank against n, uniform "
                "attention and an invariance check (--models MiniLM, then --models SmolLM2: each under 15 minutes); "
                "--part trailing: SmolLM2's next-token loss with each map's trailing singular values removed against "
                "the same energy removed at random or from the leading values, at kept shares 0.9, 0.95, 0.99 (about "
                "6 minutes). Writes attention_course/data/lowrank_two_models.json, keeping the other part."))
