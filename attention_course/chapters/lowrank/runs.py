r"""Chapter 3's long run: is attention low-rank *in function*, on long inputs, against baselines?

It measures, and stores as JSON (``attention_course/data/lowrank_function.json``):

* ``length``: all-MiniLM-L6-v2 on the chapter's sentences joined
  (:func:`~attention_course.chapters.lowrank.baselines.long_text`) and cut to
  :math:`n` = 16 ... 512 tokens: each head's effective rank, rank-8 error with and
  without the mean row, the uniform matrix's error, and the weight on [CLS] and [SEP];
* ``minilm_swap``: the relative change of MiniLM's final hidden states when every head's
  attention is replaced by its rank-:math:`k` truncation, its top-:math:`k` rows, or
  uniform weights (the baseline), at several :math:`n`;
* ``tiny_swap``: the held-out loss of the induction model of chapter 4 (2 layers,
  600 steps) with the same replacements (rank-:math:`k` kept causal), over seeds;
* ``recall``: :func:`~attention_course.chapters.lowrank.recall.recall_sweep`.

Run ``python -m attention_course.chapters.lowrank.runs`` (7 minutes on a loaded 2-core machine).

The structure sweep behind the ``efficient-attention`` slider (:func:`write_structure_sweep`,
stored as :data:`STRUCTURE_DATA`) is written here too.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Optional

import numpy as np
import torch
from tqdm import tqdm

from ...models.pretrained import minilm_tokenizer, minilm_weights
from ...models.records import DATA_DIR, machine_info, write_json
from ...models.tasks import make_task
from ...models.tiny import ModelConfig, TinyTransformer
from ...models.training import masked_loss, train
from . import head_swap as sw
from .approximation_error import structure_sweep
from .baselines import SENTENCES, centred_rank_k_error, sink_share, uniform_error
from . import real_methods as rm
from .head_properties import head_properties
from .rank_grid import centred_error_grid
from .recall import recall_sweep
from .spectra import (_nonzero_spectrum, _tail_error, effective_rank, effective_rank_from_singular_values,
                      rank_k_error)

__all__ = ["DEFAULT_PATH", "minilm_ids", "length_sweep", "minilm_swap", "tiny_swap", "run", "load", "add_arguments", "cli", "main", "STRUCTURE_DATA", "write_structure_sweep",
           "VERDICT_PATH", "GRID_DKS", "GRID_BETAS", "head_study", "efficient_study", "verdict_run", "load_verdicts"]

DEFAULT_PATH = DATA_DIR / "lowrank_function.json"


def minilm_ids(n: int, order: int = 0) -> torch.Tensor:
    """Token ids ``(1, n)``: [CLS], the first ``n - 2`` WordPiece tokens of
    :func:`~attention_course.chapters.lowrank.baselines.long_text`, [SEP].

    ``order`` 0 keeps the shipped order of the sentences; another value shuffles them with
    ``numpy.random.default_rng(order)`` (the same sentences, another text).
    """
    tokenizer = minilm_tokenizer()
    sentences = list(SENTENCES) if order == 0 else [SENTENCES[i] for i in np.random.default_rng(order).permutation(len(SENTENCES))]
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

    Yields ``(seed, model, inputs, loss)``: ``inputs`` is the held-out batch of
    :func:`~attention_course.models.training.evaluate_loss` (256 sequences) and ``loss(tf)`` its
    held-out loss with each layer's attention weights replaced by ``tf(weights, layer)``
    (``None``: unchanged).
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


def run(quick: bool = False) -> dict:
    """All four measurements; ``quick`` shrinks them to a smoke test."""
    ns = [16, 32, 64] if quick else [16, 32, 64, 128, 256, 512]
    ks = [2, 8] if quick else [1, 2, 4, 8, 16, 32]
    torch.set_num_threads(1)
    return {"machine": machine_info(),
            "config": {"k": 8, "ns": ns, "ks": ks, "tiny_steps": 600},
            "length": length_sweep(ns),
            "minilm_swap": minilm_swap(ns[-2:] if quick else [32, 128, 512], ks),
            "tiny_swap": tiny_swap([0] if quick else [0, 1, 2, 3, 4], [k for k in ks if k <= 16],
                                   steps=20 if quick else 600),
            "recall": recall_sweep([4, 8, 16] if quick else [4, 8, 16, 32, 64, 128, 256, 512, 1024],
                                   [16] if quick else [16, 32, 64], seeds=[0] if quick else [0, 1, 2, 3, 4])}


def load(path: Optional[Path] = None) -> dict:
    """The stored run (default :data:`DEFAULT_PATH`)."""
    return json.loads(Path(path or DEFAULT_PATH).read_text())


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command-line options of ``python -m attention_course lowrank``."""
    parser.add_argument("--json", type=Path, default=DEFAULT_PATH, help="where to store the run")
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    parser.add_argument("--verdicts", action="store_true",
                        help=f"the deciding runs of issue 26 instead, stored in {VERDICT_PATH.name} (about 3 minutes)")


def cli(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Run and store; return the exit code."""
    if args.verdicts:
        path = VERDICT_PATH if args.json == DEFAULT_PATH else args.json
        write_json(verdict_run(quick=args.quick), path)
        print(f"stored {path}")
        return 0
    out = run(quick=args.quick)
    args.json.write_text(json.dumps(out, indent=1))
    print(f"stored {args.json}")
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    """Entry point of ``python -m attention_course.chapters.lowrank.runs``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    return cli(parser.parse_args(argv), parser)


if __name__ == "__main__":
    raise SystemExit(main())


STRUCTURE_DATA = DATA_DIR / "slider_efficient_inputs.json"


# ------------------------------------------------------------------ chapter 3: efficient-attention
def write_structure_sweep(path: Path = STRUCTURE_DATA) -> dict:
    """Run :func:`~attention_course.chapters.lowrank.approximation_error.structure_sweep` with its defaults and
    store it at ``path`` (about a second)."""
    return write_json(structure_sweep(), path)


# ------------------------------------------------------------------ chapter 3: the deciding runs (issue 26)
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
    for order in tqdm(orders, desc="heads, by sentence order"):
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
        for m in tqdm(ns, desc="effective rank against n")]
    return {"n": n, "k": k, "orders": rows, "growth": growth}


@torch.no_grad()
def efficient_study(n: int = 512, budget: int = 32, orders=ORDERS,
                    layer_sets=(("layers 5-6", (4, 5)), ("all layers", (0, 1, 2, 3, 4, 5)))) -> list[dict]:
    """Change of MiniLM's output when each method replaces attention in each layer set, per sentence order."""
    W = minilm_weights()
    rows = []
    for order in tqdm(orders, desc="efficient methods, by sentence order"):
        ids = minilm_ids(n, order)
        ref = sw.bert_forward_with(W, ids)[0][-1]  # (1, n, d)
        for set_name, layers in layer_sets:
            for name, method in rm.replacements(budget, seed=int(order)).items():
                change, cos = rm.replace_layers(W, ids, method, layers, reference=ref)
                rows.append({"order": int(order), "layers": set_name, "method": name, "change": change, "cosine": cos})
    return rows


def verdict_run(quick: bool = False) -> dict:
    """The deciding runs of chapter 3's four verdicts (issue 26); ``quick`` shrinks them to a smoke test."""
    torch.set_num_threads(1)
    orders = ORDERS[:1] if quick else ORDERS
    n = 64 if quick else 512
    heads = head_study(n=n, orders=orders, ns=(16, 32, 64) if quick else (16, 32, 64, 128, 256, 512))
    beta_trained = float(np.median(heads["orders"][0]["logit_std"]))  # shipped order, all 72 heads
    betas = [*GRID_BETAS, round(beta_trained, 3)]
    seeds = [0] if quick else [0, 1, 2, 3, 4]
    grid = centred_error_grid(GRID_DKS[:3] if quick else GRID_DKS, betas, n=64 if quick else 256, k=8 if quick else 32,
                              seeds=seeds)
    by_n = {}
    for m in tqdm([128] if quick else [256, 512, 1024], desc="d_k = 32 against n"):
        g = centred_error_grid([32], betas, n=m, k=8 if quick else 32, seeds=seeds)
        by_n[str(m)] = {key: val[:, 0].tolist() for key, val in g.items()}  # (seeds, betas)
    return {"machine": machine_info(),
            "config": {"n": n, "budget": 32, "orders": list(orders), "grid_n": 64 if quick else 256, "grid_k": 32,
                       "d_ks": list(GRID_DKS[:3] if quick else GRID_DKS), "betas": betas, "seeds": seeds,
                       "beta_trained": beta_trained},
            "heads": heads, "grid": {key: val.tolist() for key, val in grid.items()}, "grid_by_n": by_n,
            "efficient": efficient_study(n=n, orders=orders)}


def load_verdicts(path: Optional[Path] = None) -> dict:
    """The stored deciding runs (default :data:`VERDICT_PATH`)."""
    return json.loads(Path(path or VERDICT_PATH).read_text())
