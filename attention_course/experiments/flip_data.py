r"""The stored data of the flagged sliders: each function here runs MiniLM or trains, and writes one JSON.

The sliders of :mod:`attention_course.figures` (``flips_*``) only read these files, so the
chapters stay fast and their HTML is the same on every CPU (MiniLM runs in float32, whose last
bits differ across CPUs). One writer per file of ``attention_course/data/``:

==============================  ================================  ==========================================
file                            writer                            what it runs
==============================  ================================  ==========================================
``flips_ch2_learned_width``     :func:`write_self_weight_sweep`   Adam fits of the kernel width (seconds)
``flips_ch3_efficient``         :func:`write_structure_sweep`     every efficient method on mixed inputs (1 s)
``flips_ch4_roles``             :func:`write_role_scores`         MiniLM's role scores on five texts
``flips_ch5_rule``              :func:`write_rule_miss`           MiniLM and the fixed rule's fit
``flips_ch5_probe``             :func:`write_probe_data`          random stacks' and MiniLM's probes (minutes)
==============================  ================================  ==========================================

The texts of chapters 4 and 5 are read from the stored files themselves (they are those of the
chapters' cells). Run e.g.
``python -c "from attention_course.experiments import flip_data as f; f.write_role_scores()"``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from ..lenses import depth_probe, topology_rule
from ..lenses.approximation_error import structure_sweep
from ..lenses.kernel_learning import fit_bandwidth
from ..lenses.kernels import mse, mse_by_bandwidth, nadaraya_watson, sine_data
from ..lenses.roles import PARKING, RELATIONS, head_role_scores, uniform_role_baselines
from ..models.encoder import bert_encode
from ..models.perturb import encoder_maps, scrambled_weights
from ..models.pretrained import attention_maps, load_minilm, minilm_weights

__all__ = ["LEARNED_WIDTH_DATA", "STRUCTURE_DATA", "ROLES_DATA", "RULE_DATA", "PROBE_DATA", "ALPHAS", "W_GRID",
           "PROBE_STACKS", "self_weight_sweep", "role_scores_data", "rule_miss_data", "probe_data",
           "write_self_weight_sweep", "write_structure_sweep", "write_role_scores", "write_rule_miss",
           "write_probe_data"]

_DATA = Path(__file__).resolve().parents[1] / "data"
LEARNED_WIDTH_DATA = _DATA / "flips_ch2_learned_width.json"
STRUCTURE_DATA = _DATA / "flips_ch3_efficient.json"
ROLES_DATA = _DATA / "flips_ch4_roles.json"
RULE_DATA = _DATA / "flips_ch5_rule.json"
PROBE_DATA = _DATA / "flips_ch5_probe.json"
#: The self-weights of the chapter-2 slider: 0 (leave-one-out) to 1 (self-included).
ALPHAS = tuple(round(0.1 * i, 1) for i in range(11))
#: The chapter's grid of inverse widths w for the grid-best width (cell of fig-kern-objectives).
W_GRID = np.geomspace(0.3, 60, 121)
_FIT = {"steps": 300, "lr": 0.05, "w_init": 1.0}  # the chapter's fits
#: Chapter 5's random stacks: keyword arguments of :func:`attention_course.lenses.depth.attention_stack`.
PROBE_STACKS = {"pure attention": {}, "+ skip": {"skip": True},
                "+ skip + MLP + LayerNorm": {"skip": True, "mlp": True, "layernorm": True},
                "+ skip, no exchange": {"skip": True}}


def _write(doc: dict, path: Path) -> dict:
    """Store ``doc`` as the data files are stored (``indent=1``, a final newline) and return it."""
    Path(path).write_text(json.dumps(doc, indent=1) + "\n")
    return doc


# ------------------------------------------------------------------ chapter 2: learned-width
def _test_mse(data, w: float) -> float:
    return mse(nadaraya_watson(data.x_test, data.x_train, data.y_train, bandwidth=1 / w)[0], data.y_test)


def self_weight_sweep(alphas: Sequence[float] = ALPHAS, seed: int = 0, draws: Sequence[int] = range(1, 11),
                      **fit) -> dict:
    r"""Learned width and its test MSE at each self-weight, the grid-best width, and the draws' margin.

    Data: :func:`~attention_course.lenses.kernels.sine_data` (40 points, noise 1) with ``seed``;
    the width at self-weight :math:`\alpha` is
    :func:`~attention_course.lenses.kernel_learning.fit_bandwidth` ``(..., self_weight=alpha)``
    (300 Adam steps, rate 0.05, from 1). On each of ``draws`` (the chapter's further draws) the
    leave-one-out width is learned and its test MSE divided by the grid-best test MSE (grid
    :data:`W_GRID`): the margin of :func:`~attention_course.lenses.kernel_learning.good_range_limit`.

    Returns
    -------
    dict
        ``alpha``, ``w``, ``test_mse`` (one per alpha); ``w_grid``, ``grid_mse`` (the test MSE
        curve); ``w_best``, ``mse_best``; ``draws``, ``draw_ratio`` (leave-one-out over best, per draw).

    Examples
    --------
    >>> s = self_weight_sweep([0.0, 1.0], draws=[1], steps=3)
    >>> len(s["w"]), len(s["draw_ratio"]), s["mse_best"] <= min(s["test_mse"])
    (2, 1, True)
    """
    fit = {**_FIT, **fit}
    data = sine_data(n=40, noise=1.0, seed=seed)
    ws = [fit_bandwidth(data.x_train, data.y_train, self_weight=float(a), **fit).w for a in alphas]
    grid_mse = mse_by_bandwidth(data.x_test, data.x_train, data.y_train, data.y_test, W_GRID)  # (121,)
    ratios = []
    for s in draws:
        d_s = sine_data(n=40, noise=1.0, seed=s)
        w_s = fit_bandwidth(d_s.x_train, d_s.y_train, leave_one_out=True, **fit).w
        best_s = float(np.min(mse_by_bandwidth(d_s.x_test, d_s.x_train, d_s.y_train, d_s.y_test, W_GRID)))
        ratios.append(_test_mse(d_s, w_s) / best_s)
    best = int(np.argmin(grid_mse))
    return {"alpha": [float(a) for a in alphas], "w": ws, "test_mse": [_test_mse(data, w) for w in ws],
            "w_grid": W_GRID.tolist(), "grid_mse": np.asarray(grid_mse).tolist(), "w_best": float(W_GRID[best]),
            "mse_best": float(grid_mse[best]), "draws": list(draws), "draw_ratio": ratios, "seed": seed, "fit": fit}


def write_self_weight_sweep(path: Path = LEARNED_WIDTH_DATA) -> dict:
    """Run :func:`self_weight_sweep` with its defaults and store it at ``path`` (a few seconds)."""
    return _write(self_weight_sweep(), path)


# ------------------------------------------------------------------ chapter 3: efficient-attention
def write_structure_sweep(path: Path = STRUCTURE_DATA) -> dict:
    """Run :func:`~attention_course.lenses.approximation_error.structure_sweep` with its defaults and
    store it at ``path`` (about a second)."""
    return _write(structure_sweep(), path)


# ------------------------------------------------------------------ chapter 4: head-relations
def role_scores_data(texts: Sequence[str], digits: int = 4) -> dict:
    """MiniLM's role scores on ``texts`` and uniform attention's, rounded to ``digits`` decimals.

    Returns ``{"texts", "scores": {role: (6, 12) nested list}, "chance": {role: float}}`` for the
    roles in :data:`~attention_course.lenses.roles.RELATIONS` and
    :data:`~attention_course.lenses.roles.PARKING`: what :data:`ROLES_DATA` stores.
    """
    tokens, maps = attention_maps(list(texts))  # lists: tokens, (6, 12, n, n) each
    scores, chance = head_role_scores(maps, tokens), uniform_role_baselines(tokens)
    roles = RELATIONS + PARKING
    return {"texts": list(texts), "scores": {r: np.round(scores[r], digits).tolist() for r in roles},
            "chance": {r: round(float(chance[r]), 6) for r in roles}}


def write_role_scores(texts: Optional[Sequence[str]] = None, path: Path = ROLES_DATA) -> dict:
    """Store :func:`role_scores_data` at ``path``; ``texts`` default to the stored ones (chapter 4's)."""
    texts = json.loads(Path(path).read_text())["texts"] if texts is None else texts
    return _write(role_scores_data(texts), path)


# ------------------------------------------------------------------ chapter 5: learned-topology
def rule_miss_data(sentences: Sequence[str], digits: int = 4) -> dict:
    """The fixed rule's and uniform attention's miss per MiniLM head, as chapter 5 computes them.

    Fits :func:`~attention_course.lenses.topology_rule.fit_fixed_rule` on each sentence and three
    shuffles and scores it on two held-out shuffles. Returns ``{"sentences", "miss", "uniform"}``,
    each miss a list of 72 (layer-major), rounded to ``digits`` decimals: what :data:`RULE_DATA` stores.
    """
    tokenizer, _ = load_minilm()
    weights = minilm_weights()
    (fit_ids, fit_maps), (held_ids, held_maps) = topology_rule.held_out_shuffles(
        lambda texts: encoder_maps(weights, tokenizer, texts), sentences)
    rule = topology_rule.fit_fixed_rule(fit_maps, fit_ids)
    return {"sentences": list(sentences),
            "miss": np.round(topology_rule.rule_miss(rule, held_maps, held_ids), digits).tolist(),
            "uniform": np.round(topology_rule.uniform_miss(held_maps), digits).tolist()}


def write_rule_miss(sentences: Optional[Sequence[str]] = None, path: Path = RULE_DATA) -> dict:
    """Store :func:`rule_miss_data` at ``path``; ``sentences`` default to the stored ones (chapter 5's)."""
    sentences = json.loads(Path(path).read_text())["sentences"] if sentences is None else sentences
    return _write(rule_miss_data(sentences), path)


# ------------------------------------------------------------------ chapter 5: depth-keeps-information
def probe_data(max_depth: int = 24, seeds: Sequence[int] = range(3), digits: int = 4) -> dict:
    """Chapter 5's probe accuracies at every depth ``0..max_depth``: what :data:`PROBE_DATA` stores.

    Random stacks (:data:`PROBE_STACKS`; 100 sequences, 75 to fit, 25 to score, the last with the
    identity mask) per seed, guessing each sequence's commonest label (seed 0's held-out
    sequences), and MiniLM and its scrambled copy (seed 0) on 160 template sentences (120 to fit),
    each (own, previous, next) x 7 layers.
    """
    layers = list(range(max_depth + 1))
    acc = depth_probe.stack_probe_curves(PROBE_STACKS, layers, n_seq=100, n_train=75, seeds=seeds,
                                         mask={"+ skip, no exchange": np.eye(16, dtype=bool)})
    labels, _ = depth_probe.labelled_sequences(100, 16, 64, 16, seed=0)
    commonest = float(np.mean([np.bincount(l).max() / len(l) for l in labels[75:]]))
    tokenizer, _ = load_minilm()
    ids = tokenizer(depth_probe.template_sentences(160, seed=0), return_tensors="pt")["input_ids"]
    W = minilm_weights()
    mini = {}
    for name, weights in (("MiniLM", W), ("scrambled", scrambled_weights(W, seed=0))):
        with torch.no_grad():
            states = [h.numpy() for h in bert_encode(weights, ids).hidden_states]  # 7 x (160, n, 384)
        mini[name] = np.round(depth_probe.encoder_probe(states, ids.numpy(), n_train=120), digits).tolist()
    return {"layers": layers, "stacks": {k: np.round(v, digits).tolist() for k, v in acc.items()},
            "chance": round(commonest, 6), "n_test_tokens": 25 * 16, "minilm": mini}


def write_probe_data(path: Path = PROBE_DATA) -> dict:
    """Store :func:`probe_data` with its defaults at ``path`` (minutes)."""
    return _write(probe_data(), path)
