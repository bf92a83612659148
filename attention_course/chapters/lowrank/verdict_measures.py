"""The deciding runs of chapter 3's four verdicts: MiniLM's heads in five sentence orders, the rank grid.

``python -m attention_course lowrank-run --verdicts`` (part of :data:`LOWRANK_RUN`) stores them in
``attention_course/data/lowrank_verdicts.json``; :func:`load_verdicts` reads it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from ...models.experiments import Experiment, Runs, read_json, register
from ...models.pretrained import minilm_weights
from ...models.records import DATA_DIR
from . import head_swap as sw
from . import real_methods as rm
from .head_properties import head_properties
from .in_function import IN_FUNCTION, LowRankConfig, minilm_ids
from .rank_grid import centred_error_grid
from .spectra import _nonzero_spectrum, _tail_error, effective_rank, effective_rank_from_singular_values

__all__ = ["load_verdicts"]

VERDICT_PATH = DATA_DIR / "lowrank_verdicts.json"
GRID_DKS = (1, 2, 4, 8, 16, 32, 64)
GRID_BETAS = (0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0, 2.0, 4.0)
ORDERS = (0, 1, 2, 3, 4)


@torch.no_grad()
def _qk_logit_std(W, ids) -> list[float]:
    """Each head's mean over rows of the standard deviation of its logits q.k / sqrt(d_k) (72 values)."""
    out = []

    def grab(q, k, v, layer):
        L = (q @ k.transpose(-1, -2)).double() / q.shape[-1] ** 0.5  # (1, h, T, T)
        out.extend(L.std(dim=-1).mean(dim=-1)[0].tolist())
        return None

    sw.bert_forward_with(W, ids, attend=grab)
    return out


@torch.no_grad()
def head_study(n: int = 512, k: int = 32, orders=ORDERS, ns=(16, 32, 64, 128, 256, 512)) -> dict:
    """Per head at length ``n``, in each sentence order: rank-``k`` error, effective rank, mean row entropy, sink share and logit std; and the effective rank at each of ``ns``."""
    W = minilm_weights()
    rows = []
    for order in orders:
        ids = minilm_ids(n, order)
        A = torch.cat(sw.bert_forward_with(W, ids)[1]).double().numpy().reshape(-1, n, n)  # (72, n, n)
        props = head_properties(A, [0, n - 1])
        sv = _nonzero_spectrum(A)  # (72, n): one SVD per head for both the rank error and the effective rank
        rows.append({"order": int(order), "rank_error": _tail_error(sv, k).tolist(),
                     "effective_rank": effective_rank_from_singular_values(sv).tolist(),
                     "entropy": props["entropy"].tolist(),
                     "sink_share": props["sink_share"].tolist(), "logit_std": _qk_logit_std(W, ids)})
    growth = [{"n": int(m), "effective_rank": rows[0]["effective_rank"] if m == n and orders[0] == 0 else effective_rank(
        torch.cat(sw.bert_forward_with(W, minilm_ids(m))[1]).double().numpy().reshape(-1, m, m)).tolist()}
        for m in ns]
    return {"n": n, "k": k, "orders": rows, "growth": growth}


@torch.no_grad()
def efficient_study(n: int = 512, budget: int = 32, orders=ORDERS,
                    layer_sets=(("layers 5-6", (4, 5)), ("all layers", (0, 1, 2, 3, 4, 5)))) -> list[dict]:
    """Change of MiniLM's output when each method replaces attention in each layer set, per sentence order."""
    W = minilm_weights()
    rows = []
    for order in orders:
        ids = minilm_ids(n, order)
        ref = sw.bert_forward_with(W, ids)[0][-1]  # (1, n, d)
        for set_name, layers in layer_sets:
            for name, method in rm.replacements(budget, seed=int(order)).items():
                change, cos = rm.replace_layers(W, ids, method, layers, reference=ref)
                rows.append({"order": int(order), "layers": set_name, "method": name, "change": change, "cosine": cos})
    return rows


def load_verdicts(path: Optional[Path] = None) -> dict:
    """The stored deciding runs (default :data:`VERDICT_PATH`)."""
    return read_json(path or VERDICT_PATH)


# ------------------------------------------------------------------ the run as a configuration of the runner
def _sizes(config: LowRankConfig) -> dict:
    q = config.quick
    return {"orders": list(ORDERS[:1] if q else ORDERS), "n": 64 if q else 512,
            "head_ns": (16, 32, 64) if q else (16, 32, 64, 128, 256, 512), "seeds": [0] if q else [0, 1, 2, 3, 4],
            "d_ks": list(GRID_DKS[:3] if q else GRID_DKS), "grid_n": 64 if q else 256, "grid_k": 8 if q else 32,
            "by_n": [128] if q else [256, 512, 1024]}


def _betas(heads: dict) -> tuple:
    """The grid's sharpnesses: :data:`GRID_BETAS` and the median logit spread of the shipped order's 72 heads."""
    return (*GRID_BETAS, round(float(np.median(heads["orders"][0]["logit_std"])), 3))


def _next(config: LowRankConfig, runs: Runs) -> list[tuple]:
    """The heads first (the grid's sharpnesses include theirs); then the grid, the grid against n, the efficient methods."""
    if not runs.jobs:
        return [("heads",)]
    betas = _betas(runs.records[0])
    return [("grid", betas), *[("grid_by_n", m, betas) for m in _sizes(config)["by_n"]], ("efficient",)]


def _run(config: LowRankConfig, part: str, *args) -> object:
    """One part of the deciding runs (the grids get the sharpnesses from the heads' part)."""
    z = _sizes(config)
    if part == "heads":
        return head_study(n=z["n"], orders=z["orders"], ns=z["head_ns"])
    if part == "efficient":
        return efficient_study(n=z["n"], orders=z["orders"])
    if part == "grid":
        grid = centred_error_grid(z["d_ks"], list(args[0]), n=z["grid_n"], k=z["grid_k"], seeds=z["seeds"])
        return {key: val.tolist() for key, val in grid.items()}
    m, betas = args
    g = centred_error_grid([32], list(betas), n=m, k=z["grid_k"], seeds=z["seeds"])
    return {key: val[:, 0].tolist() for key, val in g.items()}  # (seeds, betas)


def _document(config: LowRankConfig, runs: Runs, meta: dict) -> dict:
    z = _sizes(config)
    part = {job[0] if job[0] != "grid_by_n" else job[:2]: r for job, r in zip(runs.jobs, runs.records)}
    heads = part["heads"]
    return {"machine": meta["machine"],
            "config": {"n": z["n"], "budget": 32, "orders": z["orders"], "grid_n": z["grid_n"], "grid_k": z["grid_k"],
                       "d_ks": z["d_ks"], "betas": list(_betas(heads)), "seeds": z["seeds"],
                       "beta_trained": float(np.median(heads["orders"][0]["logit_std"]))},  # shipped order, 72 heads
            "heads": heads, "grid": part["grid"],
            "grid_by_n": {str(m): part[("grid_by_n", m)] for m in z["by_n"]}, "efficient": part["efficient"]}


#: The deciding runs (``python -m attention_course lowrank-run --verdicts``).
VERDICTS = Experiment("lowrank-run --verdicts", LowRankConfig(verdicts=True), _run, VERDICT_PATH, next_jobs=_next,
                      document=_document, out_flag="--json", description="")

#: ``python -m attention_course lowrank-run``: is attention low-rank in function, or with ``--verdicts`` the deciding runs.
LOWRANK_RUN = register(replace(
    IN_FUNCTION, parts=(VERDICTS,), select=lambda c: [VERDICTS if c.verdicts else IN_FUNCTION],
    flags={"--quick": dict(action="store_true", help="a small smoke run"),
           "--verdicts": dict(action="store_true",
                              help=f"the deciding runs of chapter 3's verdicts instead, stored in {VERDICT_PATH.name} "
                                   "(about 3 minutes)")}))
