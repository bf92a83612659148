"""Chapter 3's long run: is attention low-rank *in function*, on long inputs, against baselines?

``python -m attention_course lowrank-run`` (:data:`LOWRANK_RUN`) stores ``length``, ``minilm_swap``,
``tiny_swap`` and ``recall`` in ``attention_course/data/lowrank_function.json``; ``--verdicts`` runs the
deciding runs instead (:mod:`~attention_course.chapters.lowrank.verdict_measures`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from ...models.experiments import Experiment, Runs, read_json
from ...models.pretrained import minilm_tokenizer, minilm_weights
from ...models.records import DATA_DIR
from ...models.tasks import make_task
from ...models.tiny import ModelConfig, TinyTransformer
from ...models.training import masked_loss, train
from . import head_swap as sw
from .baselines import SENTENCES, centred_rank_k_error, sink_share, uniform_error
from .recall import recall_sweep
from .spectra import effective_rank, rank_k_error

__all__ = ["load"]

DEFAULT_PATH = DATA_DIR / "lowrank_function.json"


def _sentence_order(order: int) -> list[str]:
    """The sentences in the shipped order (0) or shuffled by ``numpy.random.default_rng(order)``."""
    return list(SENTENCES) if order == 0 else [SENTENCES[i] for i in np.random.default_rng(order).permutation(len(SENTENCES))]


def minilm_ids(n: int, order: int = 0) -> torch.Tensor:
    """Token ids ``(1, n)``: [CLS], the first ``n - 2`` WordPiece tokens of the sentences in ``order``
    (0: :func:`~attention_course.chapters.lowrank.baselines.long_text`), [SEP].
    """
    tokenizer = minilm_tokenizer()
    sentences = _sentence_order(order)
    # sentence by sentence (each well under 512 tokens, so the tokenizer does not warn); WordPiece
    # splits on whitespace first, so this equals tokenizing long_text() in one piece
    body = [i for s in sentences for i in tokenizer(s, add_special_tokens=False)["input_ids"]]
    if not 3 <= n <= len(body) + 2:
        raise ValueError(f"n={n}; expected 3 <= n <= {len(body) + 2} (the shipped text's length)")
    return torch.tensor([[tokenizer.cls_token_id, *body[: n - 2], tokenizer.sep_token_id]])  # (1, n)


def _transforms(k: int, causal: bool) -> dict:
    return {"rank": lambda w, layer: sw.rank_k_weights(w, min(k, w.shape[-1]), causal=causal),
            "topk": lambda w, layer: sw.topk_weights(w, min(k, w.shape[-1]))}


@torch.no_grad()
def length_sweep(ns: Sequence[int], k: int = 8) -> list[dict]:
    """Per-head statistics of MiniLM's attention at each length ``n`` (lists of 72 values, layer-major)."""
    W = minilm_weights()
    rows = []
    for n in ns:
        _, att = sw.bert_forward_with(W, minilm_ids(n))
        A = torch.cat(att).double().numpy().reshape(-1, n, n)  # (6 * 12, n, n)
        rows.append({"n": int(n), "effective_rank": effective_rank(A).tolist(),
                     "rank_error": rank_k_error(A, k).tolist(),
                     "centred_rank_error": centred_rank_k_error(A, k).tolist(),
                     "uniform_error": uniform_error(A).tolist(),
                     "sink_share": sink_share(A, [0, n - 1]).tolist()})
    return rows


@torch.no_grad()
def minilm_swap(ns: Sequence[int], ks: Sequence[int]) -> list[dict]:
    r"""Relative change :math:`\|H' - H\|_F / \|H\|_F` of MiniLM's last hidden states per replacement."""
    W = minilm_weights()
    rows = []
    for n in ns:
        ids = minilm_ids(n)
        ref = sw.bert_forward_with(W, ids)[0][-1]  # (1, n, d)

        def change(tf) -> float:
            return float((sw.bert_forward_with(W, ids, tf)[0][-1] - ref).norm() / ref.norm())

        row = {"n": int(n), "uniform": change(lambda w, layer: sw.uniform_weights(w))}
        for k in ks:
            for name, tf in _transforms(k, causal=False).items():
                row[f"{name}_{k}"] = change(tf)
        rows.append(row)
    return rows


def trained_induction_models(seeds: Sequence[int], steps: int = 600) -> Iterator[tuple[int, TinyTransformer, torch.Tensor, Callable]]:
    """Chapter 4's induction model (2 layers) trained for ``steps`` steps once per seed.

    Yields ``(seed, model, inputs, loss)``: ``inputs`` is evaluate_loss's held-out batch and ``loss(tf)``
    its loss with each layer's weights replaced by ``tf(weights, layer)`` (``None``: unchanged).
    """
    task = make_task("repeated_sequences")
    inputs, targets, mask = task(256, seed=12345)  # the held-out batch of evaluate_loss
    for seed in seeds:
        model = TinyTransformer(ModelConfig(n_layers=2), seed=seed)
        train(model, task, steps=steps, seed=seed)

        def loss(tf=None, model=model) -> float:
            with torch.no_grad():
                return float(masked_loss(sw.tiny_forward_with(model, inputs, tf), targets, mask))

        yield int(seed), model, inputs, loss


def tiny_swap(seeds: Sequence[int], ks: Sequence[int], steps: int = 600) -> list[dict]:
    """Held-out loss of chapter 4's induction model per replacement, one row per training seed."""
    rows = []
    for seed, _, _, loss in trained_induction_models(seeds, steps):
        row = {"seed": seed, "exact": loss(), "uniform": loss(lambda w, layer: sw.uniform_weights(w, causal=True))}
        for k in ks:
            for name, tf in _transforms(k, causal=True).items():
                row[f"{name}_{k}"] = loss(tf)
        rows.append(row)
    return rows


@dataclass(frozen=True)
class LowRankConfig:
    """The configuration of ``lowrank-run``: ``quick`` shrinks every measurement to a smoke test;
    ``verdicts`` runs the deciding runs of the chapter's verdicts instead."""

    quick: bool = False
    verdicts: bool = False

    def sizes(self) -> dict:
        """The lengths ``ns``, ranks ``ks``, the swaps' lengths, seeds and steps, and the recall sweep's sizes."""
        q = self.quick
        return {"ns": [16, 32, 64] if q else [16, 32, 64, 128, 256, 512],
                "ks": [2, 8] if q else [1, 2, 4, 8, 16, 32],
                "swap_ns": [32, 64] if q else [32, 128, 512], "seeds": [0] if q else [0, 1, 2, 3, 4],
                "tiny_steps": 20 if q else 600,
                "recall_ns": [4, 8, 16] if q else [4, 8, 16, 32, 64, 128, 256, 512, 1024],
                "recall_ds": [16] if q else [16, 32, 64]}


#: The four measurements of the run, in the order they are stored.
PARTS = ("length", "minilm_swap", "tiny_swap", "recall")


def _measure(config: LowRankConfig, part: str) -> list:
    """One of the run's four measurements (:data:`PARTS`)."""
    z = config.sizes()
    if part == "length":
        return length_sweep(z["ns"])
    if part == "minilm_swap":
        return minilm_swap(z["swap_ns"], z["ks"])
    if part == "tiny_swap":
        return tiny_swap(z["seeds"], [k for k in z["ks"] if k <= 16], steps=z["tiny_steps"])
    return recall_sweep(z["recall_ns"], z["recall_ds"], seeds=z["seeds"])


def _document(config: LowRankConfig, runs: Runs, meta: dict) -> dict:
    z = config.sizes()
    return {"machine": meta["machine"], "config": {"k": 8, "ns": z["ns"], "ks": z["ks"], "tiny_steps": z["tiny_steps"]},
            **{job[0]: record for job, record in zip(runs.jobs, runs.records)}}


#: Is attention low-rank in function (``python -m attention_course lowrank-run``): the four measurements.
IN_FUNCTION = Experiment(
    "lowrank-run", LowRankConfig(), _measure, DEFAULT_PATH, grid=lambda c: [(p,) for p in PARTS], document=_document,
    out_flag="--json", help="chapter 3's long run: effective rank against n, rank-k/top-k swaps, recall",
    description="Run MiniLM on the shipped long text (n = 16..512) and the induction model (5 seeds) with every "
                "head's attention replaced by rank-k, top-k or uniform weights, plus the associative-recall sweep; "
                "store JSON in attention_course/data/lowrank_function.json (7 minutes). With --verdicts, the "
                "deciding runs of the chapter's four verdicts instead (lowrank_verdicts.json; about 3 minutes).")


def load(path: Optional[Path] = None) -> dict:
    """The stored run (default :data:`DEFAULT_PATH`)."""
    return read_json(path or DEFAULT_PATH)
