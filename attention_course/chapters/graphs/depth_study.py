r"""``depth-keeps-information``, one protocol for two models: what each layer of MiniLM and SmolLM2 keeps of a word's neighbours.

``python -m attention_course depth-probe`` (:data:`DEPTH_PROBE`) reads 1,120 of chapter 5's template
sentences with MiniLM (layers 0-6) and SmolLM2-135M (0-30, after its start token and a space), and
with each model's layer matrices scrambled. From each word's state after each layer,
:func:`~attention_course.chapters.graphs.depth_probe.word_probes` reads the word 2 and 1 before it
(and, in MiniLM, 1 and 2 after): the first 120, 360 and 1,000 sentences fit, sentences 1,000-1,119
score. It writes ``attention_course/data/depth_probe.json``, the words read right per held-out
sentence and each layer's cross-validated accuracy, from which the decision is computed:

.. math::

    F = a_L - a_{\ell^*}, \qquad \ell^* = \arg\max_{1 \le \ell \le L} \mathrm{cv}_\ell,

held-out accuracy after the last layer minus after the layer whose cross-validated accuracy on the
fitting sentences is highest (:func:`depth_rows`, :func:`depth_labels`, :func:`depth_verdict`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Union

import numpy as np
import torch

from ...core._backend import Array, ShapeError, to_numpy
from ...models.decoder import decoder_pass
from ...models.encoder import bert_encode
from ...models.experiments import Experiment, progress_bar, read_json, register
from ...models.perturb import scrambled_weights
from ...models.pretrained import minilm_tokenizer, minilm_weights
from ...models.records import DATA_DIR
from ...models.smollm2 import SMOLLM2_START, load_smollm2, smollm2_tokenizer
from .depth_probe import halves_difference, halves_label, last_minus_best, template_sentences, word_end_ids, word_probes

__all__ = ["load_depth_probe", "depth_rows", "depth_curves", "depth_labels", "depth_verdict", "margin_sweep"]

#: The stored run.
DEPTH_PROBE_DATA = DATA_DIR / "depth_probe.json"
#: Each model's offsets: a causal state has not seen the words after it.
OFFSETS = {"MiniLM": (-2, -1, 1, 2), "SmolLM2": (-2, -1)}
#: D's halves of each model's layers: (first, second).
HALVES = {"MiniLM": (range(1, 4), range(4, 7)), "SmolLM2": (range(1, 16), range(16, 31))}


@dataclass(frozen=True)
class DepthProbeConfig:
    """``depth-probe``: the sentences and split, the fitting sizes, the ridges, the control's seed, the models.

    ``layers`` limits the probes to those layers (negative: from the last; empty: every layer).
    """

    n_sentences: int = 1120
    n_train: int = 1000
    fit_sizes: tuple = (120, 360, 1000)
    seed: int = 0
    scramble_seed: int = 0
    ridges: tuple = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0)
    folds: int = 5
    batch: int = 40
    models: tuple = ("MiniLM", "SmolLM2")
    layers: tuple = ()


def _layer_states(encode: Callable[[torch.Tensor], Sequence[torch.Tensor]], ids: torch.Tensor,
                  batch: int) -> list[np.ndarray]:
    """Each layer's states (N, T, d) float32, the embeddings first, from ``encode(ids (b, T))``, ``batch`` at a time."""
    parts = []
    with torch.no_grad():
        for lo in range(0, len(ids), batch):
            parts.append([h.float().numpy() for h in encode(ids[lo:lo + batch])])  # L + 1 x (b, T, d)
    return [np.concatenate(layer, axis=0) for layer in zip(*parts)]  # L + 1 x (N, T, d)


def _model_inputs(model: str, sentences: Sequence[str]) -> tuple:
    """A model's weights, its encode function, token ids (N, T) and word positions (N, W)."""
    if model == "MiniLM":
        ids = minilm_tokenizer()(list(sentences), return_tensors="pt")["input_ids"]  # (N, T): [CLS] ... [SEP]
        if ids.shape[1] != 13:
            raise ValueError(f"MiniLM reads the sentences as {ids.shape[1]} tokens; expected [CLS], ten words, "
                             f"the full stop and [SEP]")
        ends = np.tile(np.arange(1, 11), (len(ids), 1))  # (N, 10): the ten words
        return minilm_weights(), lambda w, x: bert_encode(w, x).hidden_states, ids, ends
    if model == "SmolLM2":
        tok = smollm2_tokenizer()
        start = tok.token_to_id(SMOLLM2_START)
        ids, ends = word_end_ids(lambda t: tok.encode(t).ids, sentences, start=[start], pad=start)  # (N, T), (N, W)
        encode = lambda w, x: decoder_pass(w, x, keep=("hidden_states",)).hidden_states  # noqa: E731
        return load_smollm2(), encode, torch.from_numpy(ids), ends
    raise ValueError(f"model={model!r}; expected one of {sorted(OFFSETS)}")


def depth_probe_record(config: DepthProbeConfig) -> dict:
    """Per model and its scrambled copy (key ``"<model> scrambled"``): ``"layers"``, ``"offsets"``, ``"n_read"``
    and, per fitting size, ``"hits"`` (offsets, layers, held-out sentences), ``"cv"`` and ``"ridge"`` (offsets, layers)."""
    sentences = template_sentences(config.n_sentences, seed=config.seed)
    record: dict = {}
    jobs = [(m, s) for m in config.models for s in (False, True)]
    for model, scrambled in progress_bar(jobs, "depth-probe", total=len(jobs), show=None,
                                             label=lambda j: f"{j[0]}{' scrambled' if j[1] else ''}"):
        weights, encode, ids, ends = _model_inputs(model, sentences)
        if scrambled:
            weights = scrambled_weights(weights, config.scramble_seed)
        states = _layer_states(lambda x: encode(weights, x), ids, config.batch)  # L + 1 x (N, T, d)
        layers = sorted({l % len(states) for l in config.layers}) if config.layers else list(range(len(states)))
        split = int((np.diff(ends, axis=1) > 1).sum()) if model == "SmolLM2" else 0
        entry: dict = {"layers": layers, "offsets": list(OFFSETS[model]), "tokens": int(ids.shape[1]),
                       "split_words": split, "fits": {}}
        for n_fit in progress_bar(config.fit_sizes, f"{model} probes", total=len(config.fit_sizes), show=None):
            probes = word_probes([states[l] for l in layers], ids.numpy(), ends, config.n_train, OFFSETS[model],
                                 config.ridges, config.folds, n_fit=n_fit)
            entry["n_read"] = probes["n_read"]
            entry["fits"][str(n_fit)] = {"hits": probes["hits"].tolist(), "cv": np.round(probes["cv"], 6).tolist(),
                                         "ridge": probes["ridge"].tolist()}
        record[f"{model} scrambled" if scrambled else model] = entry
    return record


def _document(config: DepthProbeConfig, runs, meta: dict) -> dict:
    return {"config": {"n_sentences": config.n_sentences, "n_train": config.n_train,
                       "fit_sizes": list(config.fit_sizes), "seed": config.seed,
                       "scramble_seed": config.scramble_seed, "ridges": list(config.ridges), "folds": config.folds,
                       "models": list(config.models), "start": SMOLLM2_START},
            "models": runs.records[0], "meta": meta}


def load_depth_probe(path: Union[str, Path] = DEPTH_PROBE_DATA) -> dict:
    """Read the stored run: its ``config``, ``meta`` and, under ``"models"``, each model's probes.

    Examples
    --------
    >>> doc = load_depth_probe()
    >>> {name: np.shape(m["fits"]["1000"]["hits"]) for name, m in doc["models"].items()}
    {'MiniLM': (4, 7, 120), 'MiniLM scrambled': (4, 7, 120), 'SmolLM2': (2, 31, 120), 'SmolLM2 scrambled': (2, 31, 120)}
    """
    return read_json(path)


def best_layer(cv: Array) -> int:
    """The layer (1..L) with the highest cross-validated accuracy ``cv`` (L + 1,) on the fitting sentences; ties: the earlier.

    Examples
    --------
    >>> best_layer([0.9, 0.5, 0.8, 0.8, 0.6])  # the embeddings (layer 0) are not a candidate
    2
    """
    c = np.asarray(to_numpy(cv), dtype=float)
    if c.ndim != 1 or len(c) < 2:
        raise ShapeError(f"cv has shape {c.shape}; expected (L + 1,) with L >= 1")
    return 1 + int(c[1:].argmax())


def depth_rows(doc: dict, n_fit: int = 1000, n_boot: int = 2000, seed: int = 0) -> dict:
    """Every model and offset's deciding numbers from a stored run, fitted on the first ``n_fit`` sentences.

    Returns model -> offset -> ``{"best", "F", "D", "acc", "last", "scrambled_last"}``: the best
    layer (:func:`best_layer` of the cross-validated accuracies), F and D each as ``(value, low, high)``
    with a 95% interval from ``n_boot`` seeded resamples of the held-out sentences
    (:func:`~attention_course.chapters.graphs.depth_probe.last_minus_best`,
    :func:`~attention_course.chapters.graphs.depth_probe.halves_difference`), the held-out accuracy
    per layer (``"acc"``, ``"scrambled_acc"``), and the last layer's, the model's and its scrambled copy's.

    Examples
    --------
    >>> rows = depth_rows(load_depth_probe(), n_boot=200)
    >>> sorted(rows), sorted(rows["SmolLM2"])
    (['MiniLM', 'SmolLM2'], [-2, -1])
    """
    out: dict = {}
    for model in [m for m in doc["models"] if not m.endswith(" scrambled")]:
        entry, control = doc["models"][model], doc["models"][f"{model} scrambled"]
        if entry["layers"] != list(range(len(entry["layers"]))):
            raise ValueError(f"{model} was probed at layers {entry['layers']}; expected every layer from 0")
        first, second = HALVES.get(model, (range(1, len(entry["layers"]) // 2 + 1),
                                           range(len(entry["layers"]) // 2 + 1, len(entry["layers"]))))
        fit, scr = entry["fits"][str(n_fit)], control["fits"][str(n_fit)]
        out[model] = {}
        for k, o in enumerate(entry["offsets"]):
            hits, n_read = np.asarray(fit["hits"][k]), entry["n_read"][k]  # (L + 1, M)
            acc = hits.sum(axis=1) / (hits.shape[1] * n_read)  # (L + 1,)
            scr_hits = np.asarray(scr["hits"][k])
            scr_acc = scr_hits.sum(axis=1) / (scr_hits.shape[1] * n_read)  # (L + 1,)
            best = best_layer(fit["cv"][k])
            out[model][o] = {"best": best, "acc": acc, "scrambled_acc": scr_acc,
                             "F": last_minus_best(hits, n_read, n_boot, seed, best=best),
                             "D": halves_difference(hits, n_read, first, second, n_boot, seed),
                             "last": float(acc[-1]),
                             "scrambled_last": float(scr_acc[-1])}
    return out


def depth_curves(rows: Mapping[str, Mapping[int, dict]], offsets: Sequence[int]) -> dict:
    """Held-out accuracy per layer, name -> (len(offsets), L + 1), for each model and its scrambled copy.

    An offset a model does not read (a decoder's words after) is a row of NaN, which a plot leaves out.

    Examples
    --------
    >>> rows = {"A": {-1: {"acc": np.array([0.1, 0.9]), "scrambled_acc": np.array([0.1, 0.2])}}}
    >>> {k: v.tolist() for k, v in depth_curves(rows, [-1, 1]).items()}
    {'A': [[0.1, 0.9], [nan, nan]], 'A scrambled': [[0.1, 0.2], [nan, nan]]}
    """
    out = {}
    for model, by in rows.items():
        n = len(next(iter(by.values()))["acc"])
        for name, key in ((model, "acc"), (f"{model} scrambled", "scrambled_acc")):
            out[name] = np.array([by[o][key] if o in by else np.full(n, np.nan) for o in offsets])  # (offsets, L + 1)
    return out


def depth_labels(rows: Mapping[str, Mapping[int, dict]], margin: float = 0.05) -> dict:
    """Each model and offset's label by the ledger's rule: ``"lost"``, ``"kept"``, ``"fades"`` or ``"undecided"``.

    :func:`~attention_course.chapters.graphs.depth_probe.halves_label` on F's interval: lost if the
    last layer is within ``margin`` of the scrambled model's; kept if F's interval lies above
    ``-margin``; fades if below; else undecided.

    Examples
    --------
    >>> row = {"F": (-0.2, -0.25, -0.15), "last": 0.6, "scrambled_last": 0.2}
    >>> depth_labels({"A": {-1: row}}), depth_labels({"A": {-1: row}}, margin=0.3)
    ({'A': {-1: 'fades'}}, {'A': {-1: 'kept'}})
    """
    return {model: {o: halves_label(r["F"], r["last"], r["scrambled_last"], margin) for o, r in by.items()}
            for model, by in rows.items()}


def depth_verdict(labels: Mapping[str, Mapping[int, str]]) -> tuple[str, dict]:
    """The claim's verdict from every model's offset labels, and the offsets it names (model -> offsets).

    In this order: ``"holds"`` if every offset of every model is kept; ``"wrong as stated"`` if most
    offsets (more than half) of some model are lost, naming the lost ones; ``"holds when"`` (in the
    first layers) if any offset fades, naming the fading ones; else ``"undecided"``.

    Examples
    --------
    >>> depth_verdict({"A": {-1: "kept", 1: "kept"}, "B": {-1: "kept"}})
    ('holds', {})
    >>> depth_verdict({"A": {-1: "fades", 1: "kept"}, "B": {-1: "undecided"}})
    ('holds when', {'A': [-1]})
    >>> depth_verdict({"A": {-1: "lost", 1: "lost", 2: "fades"}, "B": {-1: "kept"}})
    ('wrong as stated', {'A': [-1, 1]})
    >>> depth_verdict({"A": {-1: "lost", 1: "kept"}, "B": {-1: "undecided"}})
    ('undecided', {})
    """
    if all(v == "kept" for by in labels.values() for v in by.values()):
        return "holds", {}
    lost = {m: [o for o, v in by.items() if v == "lost"] for m, by in labels.items()}
    lost = {m: offs for m, offs in lost.items() if 2 * len(offs) > len(labels[m])}
    if lost:
        return "wrong as stated", lost
    fades = {m: [o for o, v in by.items() if v == "fades"] for m, by in labels.items()}
    fades = {m: offs for m, offs in fades.items() if offs}
    return ("holds when", fades) if fades else ("undecided", {})


def margin_sweep(rows: Mapping[str, Mapping[int, dict]], margins: Sequence[float]) -> list[dict]:
    """:func:`depth_labels` and :func:`depth_verdict` at each margin: ``{"margin", "labels", "verdict", "named"}`` each.

    Examples
    --------
    >>> row = {"F": (-0.04, -0.06, -0.03), "last": 0.6, "scrambled_last": 0.2}
    >>> [s["verdict"] for s in margin_sweep({"A": {-1: row}}, [0.02, 0.05, 0.1])]
    ['holds when', 'undecided', 'holds']
    """
    out = []
    for m in margins:
        labels = depth_labels(rows, float(m))
        verdict, named = depth_verdict(labels)
        out.append({"margin": float(m), "labels": labels, "verdict": verdict, "named": named})
    return out


def _one(config: DepthProbeConfig) -> dict:
    return depth_probe_record(config)


#: ``python -m attention_course depth-probe``: :func:`depth_probe_record`.
DEPTH_PROBE = register(Experiment(
    "depth-probe", DepthProbeConfig(), _one, DEPTH_PROBE_DATA, document=_document, indent=None,
    flags={"--n-sentences": dict(type=int, help="template sentences (sentences n_train onwards score the probes)"),
           "--n-train": dict(type=int, help="the sentences the fits are drawn from, first to last"),
           "--fit-sizes": dict(type=int, nargs="+", help="fit on the first n of the n_train sentences, each n"),
           "--models": dict(nargs="+", choices=sorted(OFFSETS), help="the models probed (each with its scrambled copy)"),
           "--layers": dict(type=int, nargs="+", help="probe only these layers (-1: the last; default: every layer)")},
    help="chapter 5's depth probes, one protocol for MiniLM and SmolLM2-135M, each against its scrambled copy",
    description="Reads 1,120 of chapter 5's template sentences with MiniLM and SmolLM2-135M and with each model's "
                "layer matrices scrambled, and fits least-squares probes that read the words 2 and 1 before each "
                "word (and, in MiniLM, 1 and 2 after) from its state after each layer: the first 120, 360 and 1,000 "
                "sentences fit (each ridge from 1e-6 to 1 by 5-fold cross-validation), the last 120 score. Keeps "
                "the words read right per held-out sentence and each layer's cross-validated accuracy. Writes "
                "attention_course/data/depth_probe.json (about eleven minutes on 2 busy cores)."))
