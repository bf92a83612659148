r"""Do most tokens attend to a few relevant positions? The weight on a query's heaviest content keys.

.. math::

    m_k(i) = \max_{|J| = k,\ J \cap \mathcal S = \emptyset}\ \sum_{j \in J} a_{ij}

with :math:`\mathcal S` the sinks; a row is *focused* when :math:`m_k(i) \ge 1/2`. Rows are read on each
head's content part (:mod:`~attention_course.chapters.lowrank.baselines`) and a head is focused when more
than half of its kept rows are; :func:`focus_models_study` is the deciding run (MiniLM, SmolLM2 and copies
with scrambled W_Q, W_K).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple, Optional

import numpy as np
import torch

from ...core._backend import ShapeError, shape_str, to_numpy
from ...models.decoder import decoder_pass
from ...models.experiments import progress_bar
from ...models.perturb import scrambled_weights
from ...models.pretrained import minilm_tokenizer, minilm_weights
from ...models.smollm2 import load_smollm2, smollm2_tokenizer
from ..mechanics.properties import row_entropy
from . import head_swap as sw
from .baselines import HEAD_BINS, SINK_THRESHOLD, classify_heads, content_part, head_bins
from .decisions import combine_models

__all__ = ["focus_verdict", "claim_verdict", "verdicts_over_k"]

#: The sweep stored beside the deciding k = 3 and line 0.5.
KS = (1, 2, 3, 4, 5, 6, 7, 8)
THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
#: The tensors the baseline scrambles: every layer's query and key matrices.
QUERY_KEY = ("W_q", "W_k")


def row_perplexity(A) -> np.ndarray:
    r"""Each row's perplexity :math:`\exp\big(-\sum_j a_{ij} \ln a_{ij}\big)`: how many keys it spreads over.

    A row spread evenly over :math:`k` keys gives :math:`k`.

    Examples
    --------
    >>> row_perplexity(np.array([[1.0, 0, 0, 0], [0.25, 0.25, 0.25, 0.25]])).round(6).tolist()
    [1.0, 4.0]
    """
    a = np.asarray(to_numpy(A), dtype=np.float64)
    return np.exp(row_entropy(a))  # (..., T)


class FocusCounts(NamedTuple):
    """What :func:`focus_counts` returns for one text: counts per head, to be summed over texts."""

    focused: np.ndarray  # (H, len(ks), len(thresholds)) kept rows whose content part is focused
    decided: np.ndarray  # (H, len(ks), len(thresholds)) kept rows: not a sink's, more than k / threshold content keys
    adjacent: np.ndarray  # (H,) focused kept rows at the deciding (k, threshold) whose heaviest content key is next to the query
    sink: np.ndarray  # (H,) the weight every row puts on the sinks, summed over rows
    rows: int  # rows in all (the sinks' own included)


def focus_counts(A, sinks: Sequence[int], ks: Sequence[int] = KS, thresholds: Sequence[float] = THRESHOLDS,
                 causal: bool = False, k: int = 3, threshold: float = 0.5) -> FocusCounts:
    r"""Count each head's focused rows on its content part, for every ``k`` in ``ks`` and line in ``thresholds``.

    With :math:`C` the head's :func:`~attention_course.chapters.lowrank.baselines.content_part`, row :math:`i` is

    .. math::

        \text{focused}_{k,\theta}(i) = \Big[\, m_k(C_i) \ge \theta \,\Big], \qquad
        \text{kept}_{k,\theta}(i) = \big[\, i \notin \mathcal S,\ n_i\,\theta > k \,\big],

    with :math:`n_i` the content keys query :math:`i` may see: with :math:`n_i \theta \le k`, uniform
    attention would already count as focused.

    Parameters
    ----------
    A : array, shape (H, T, T), one text's maps
    sinks : sequence of int, ``[0, T - 1]`` for [CLS] and [SEP], ``[0]`` for a decoder
    ks, thresholds : the sweep's grid; ``k`` and ``threshold`` (in it) decide ``adjacent``
    causal : bool, query ``i`` sees keys ``j <= i`` only

    Examples
    --------
    >>> n = 10; U = np.full((1, n, n), 1 / n)            # uniform over 8 words and 2 sinks
    >>> c = focus_counts(U, [0, n - 1], ks=[3], thresholds=[0.5], k=3, threshold=0.5)
    >>> int(c.decided[0, 0, 0]), int(c.focused[0, 0, 0]), float(c.sink[0]) / c.rows
    (8, 0, 0.2)
    >>> P = np.eye(n, k=-1)[None]; P[0, 0, 0] = 1          # previous token
    >>> c = focus_counts(P, [0, n - 1], ks=[3], thresholds=[0.5], k=3, threshold=0.5)
    >>> int(c.decided[0, 0, 0]), int(c.focused[0, 0, 0]), int(c.adjacent[0])  # the first word's row is all sink
    (7, 7, 7)
    """
    a = np.asarray(to_numpy(A), dtype=np.float64)
    if a.ndim != 3 or a.shape[1] != a.shape[2]:
        raise ShapeError(f"A has shape {shape_str(a)}; expected one text's maps (H, T, T)")
    ks_, ts = np.asarray(ks, dtype=int), np.asarray(thresholds, dtype=float)
    if k not in ks_ or threshold not in ts or ks_.min() < 1 or not (0 < ts).all() or not (ts <= 1).all():
        raise ValueError(f"k={k}, threshold={threshold}, ks={ks_.tolist()}, thresholds={ts.tolist()}; expected ks >= 1, "
                         f"thresholds in (0, 1], with k in ks and threshold in thresholds")
    H, T, _ = a.shape
    sink_set = sorted({int(p) % T for p in sinks})
    part = content_part(a, sink_set)  # weights (H, T, S'), sink_rows (H, T)
    keys = np.setdiff1d(np.arange(T), sink_set)  # (S',) each content key's position
    seen = np.tril(np.ones((T, T), dtype=bool)) if causal else np.ones((T, T), dtype=bool)  # (T, S) True = may attend
    n_content = seen[:, keys].sum(-1)  # (T,)
    desc = np.cumsum(-np.sort(-part.weights, axis=-1), axis=-1)  # (H, T, S'), heaviest keys first, summed
    mass = desc[..., np.minimum(ks_, keys.size) - 1]  # (H, T, K): m_k of each row
    query = ~np.isin(np.arange(T), sink_set)[None] & ~part.sink_rows  # (H, T) rows that can be judged at all
    wide = n_content[:, None, None] * ts[None, None, :] > ks_[None, :, None] * (1 + 1e-12)  # (T, K, Θ): n_i θ > k
    decided = query[..., None, None] & wide[None]  # (H, T, K, Θ)
    focused = decided & (mass[..., None] >= ts - 1e-12)  # (H, T, K, Θ)
    ik, it = list(ks_).index(k), list(ts).index(threshold)
    top = keys[part.weights.argmax(-1)]  # (H, T) heaviest content key, as a position
    near = np.abs(top - np.arange(T)) == 1  # (H, T)
    return FocusCounts(focused.sum(1), decided.sum(1), (focused[..., ik, it] & near).sum(-1),
                       a[..., sink_set].sum(-1).sum(-1), T)


def focused_heads(focused, decided, sink_shares, sink_threshold: float = SINK_THRESHOLD,
                  majority: float = 0.5) -> dict[str, float]:
    r"""Shares of all heads that are focused, not focused and sink heads (:data:`~attention_course.chapters.lowrank.baselines.HEAD_BINS`).

    A head is focused when more than ``majority`` of its kept rows are. ``focused``, ``decided``
    (:func:`focus_counts` summed over texts) and ``sink_shares`` are (H,); NaN for all three bins
    when a head that is not a sink has no kept row.

    Examples
    --------
    >>> focused_heads([9, 2, 9, 0], [10, 10, 10, 10], [0.1, 0.1, 0.6, 0.2])
    {'property': 0.25, 'no property': 0.5, 'sink': 0.25}
    """
    f, d, s = (np.asarray(x, dtype=float) for x in (focused, decided, sink_shares))
    if not f.shape == d.shape == s.shape or f.ndim != 1:
        raise ShapeError(f"focused {shape_str(f)}, decided {shape_str(d)}, sink_shares {shape_str(s)}; expected (H,) each")
    if ((d == 0) & (s < sink_threshold)).any():
        return dict.fromkeys(HEAD_BINS, float("nan"))
    return head_bins(classify_heads(f > majority * d, s, sink_threshold))


def sentence_ids(model: str, sentence: str) -> torch.Tensor:
    """Token ids ``(1, T)`` of one sentence: MiniLM's with [CLS] and [SEP], SmolLM2's with no start token.

    Examples
    --------
    >>> sentence_ids("MiniLM", "the dog runs").tolist()
    [[101, 1996, 3899, 3216, 102]]
    """
    if model == "MiniLM":
        return torch.tensor([minilm_tokenizer()(sentence)["input_ids"]])  # (1, T)
    if model == "SmolLM2":
        return torch.tensor([smollm2_tokenizer().encode(sentence).ids])  # (1, T)
    raise ValueError(f"model={model!r}; expected 'MiniLM' or 'SmolLM2'")


@torch.no_grad()
def sentence_maps(model: str, weights, sentence: str) -> np.ndarray:
    """Every head's map on one sentence, ``(L h, T, T)`` float64, layer-major (SmolLM2's causal, after RoPE)."""
    ids = sentence_ids(model, sentence)
    att = (sw.bert_forward_with(weights, ids)[1] if model == "MiniLM"
           else decoder_pass(weights, ids).attentions)  # L x (1, h, T, T)
    return torch.cat(att).double().numpy().reshape(-1, ids.shape[1], ids.shape[1])  # (L h, T, T)


def _pattern(name: str, T: int) -> np.ndarray:
    """Uniform (causal when ``name`` says so) or previous-token attention over ``T`` tokens, one map (1, T, T)."""
    if name == "uniform":
        return np.full((1, T, T), 1.0 / T)
    if name == "causal uniform":
        tri = np.tril(np.ones((T, T)))
        return (tri / tri.sum(-1, keepdims=True))[None]
    prev = np.eye(T, k=-1)
    prev[0, 0] = 1.0  # the first token has no previous one: itself
    return prev[None]


def _summed(counts: Sequence[FocusCounts]) -> dict:
    rows = sum(c.rows for c in counts)
    return {"focused": sum(c.focused for c in counts).tolist(), "decided": sum(c.decided for c in counts).tolist(),
            "adjacent": sum(c.adjacent for c in counts).tolist(), "sink_share": (sum(c.sink for c in counts) / rows).tolist(),
            "rows": int(rows)}


#: The deciding configuration of ``few-relevant-positions`` (claims.toml).
FOCUS_CONFIG = {"k": 3, "threshold": 0.5, "ks": list(KS), "thresholds": list(THRESHOLDS), "seeds": [0, 1, 2],
                "scrambled": list(QUERY_KEY), "majority": 0.5, "sink_threshold": SINK_THRESHOLD}


def focus_models_study(sentences: Sequence[str], models: Sequence[str] = ("MiniLM", "SmolLM2"),
                       config: Optional[dict] = None, progress: Optional[bool] = None) -> dict:
    """The deciding run of ``few-relevant-positions``: both models, their scrambled copies and the patterns.

    Per model, summed :class:`FocusCounts` of the trained heads, of one scrambled copy per seed, and of
    uniform and previous-token attention; the median perplexity of the trained model's kept rows.
    """
    cfg = {**FOCUS_CONFIG, **(config or {})}
    opts = dict(ks=cfg["ks"], thresholds=cfg["thresholds"], k=cfg["k"], threshold=cfg["threshold"])
    out = {"config": {**cfg, "n_sentences": len(sentences)}, "models": {}}
    for model in models:
        causal = model == "SmolLM2"
        base = minilm_weights() if model == "MiniLM" else load_smollm2()
        record: dict = {"heads": None, "tokens": [], "scrambled": []}
        for seed in progress_bar([None, *cfg["seeds"]], f"{model}: trained, then scrambled", len(cfg["seeds"]) + 1, progress):
            w = base if seed is None else scrambled_weights(base, seed, tensors=tuple(cfg["scrambled"]))
            counts, perplexity = [], []
            for s in sentences:
                A = sentence_maps(model, w, s)  # (heads, T, T)
                sinks = [0] if causal else [0, A.shape[-1] - 1]
                counts.append(focus_counts(A, sinks, causal=causal, **opts))
                if seed is None:  # the effective number of content keys of the kept rows at the deciding k, line
                    T = A.shape[-1]
                    n_content = np.arange(T) if causal else np.full(T, T - len(sinks))  # (T,)
                    rows = ~np.isin(np.arange(T), sinks) & (n_content * cfg["threshold"] > cfg["k"])  # (T,)
                    perplexity.append(row_perplexity(content_part(A, sinks).weights[:, rows]).ravel())
                    record["tokens"].append(int(T))
            if seed is None:
                record.update(heads=int(A.shape[0]), trained=_summed(counts),
                              perplexity_median=float(np.median(np.concatenate(perplexity))))
            else:
                record["scrambled"].append({"seed": int(seed), **_summed(counts)})
        for name in ("causal uniform" if causal else "uniform", "previous token"):
            counts = [focus_counts(_pattern(name, T), [0] if causal else [0, T - 1], causal=causal, **opts)
                      for T in record["tokens"]]
            record["uniform" if "uniform" in name else "previous"] = _summed(counts)
        out["models"][model] = record
    out["erank_median"] = out["models"][models[0]]["perplexity_median"]
    return out


def bins_at(counts: dict, k: int = 3, threshold: float = 0.5, sink_threshold: float = SINK_THRESHOLD,
            majority: float = 0.5, ks: Sequence[int] = KS, thresholds: Sequence[float] = THRESHOLDS) -> dict[str, float]:
    """:func:`focused_heads` of one stored record (``trained``, a ``scrambled`` copy, ``uniform``) at one point of the sweep.

    Examples
    --------
    >>> rec = {"focused": [[[3]], [[0]]], "decided": [[[4]], [[4]]], "sink_share": [0.1, 0.2]}
    >>> bins_at(rec, ks=[3], thresholds=[0.5])
    {'property': 0.5, 'no property': 0.5, 'sink': 0.0}
    """
    ik, it = list(ks).index(k), list(thresholds).index(threshold)
    return focused_heads(np.asarray(counts["focused"])[:, ik, it], np.asarray(counts["decided"])[:, ik, it],
                         counts["sink_share"], sink_threshold, majority)


def focus_verdict(bins: Mapping[str, float], scrambled_focused: float) -> str:
    """``few-relevant-positions``' rule for one model, fixed before its run.

    ``"holds"`` if focused heads are over half; ``"holds when"`` if fewer but more than the unfocused;
    ``"wrong as stated"`` otherwise, or when a scrambled copy has as many (``scrambled_focused``, the
    largest share). ``bins``: shares of all heads (:func:`bins_at`).

    Examples
    --------
    >>> focus_verdict({"property": 0.6, "no property": 0.1, "sink": 0.3}, 0.2)
    'holds'
    >>> focus_verdict({"property": 0.38, "no property": 0.03, "sink": 0.59}, 0.19)
    'holds when'
    >>> focus_verdict({"property": 0.38, "no property": 0.03, "sink": 0.59}, 0.4)
    'wrong as stated'
    """
    if bins["property"] <= scrambled_focused:
        return "wrong as stated"
    if bins["property"] > 0.5:
        return "holds"
    return "holds when" if bins["property"] > bins["no property"] else "wrong as stated"


def claim_verdict(per_model: Mapping[str, str]) -> str:
    """The claim's verdict from the models' (:func:`focus_verdict`): theirs if they agree, else ``"holds when"``.

    Examples
    --------
    >>> claim_verdict({"MiniLM": "wrong as stated", "SmolLM2": "wrong as stated"})
    'wrong as stated'
    >>> claim_verdict({"MiniLM": "wrong as stated", "SmolLM2": "holds when"})
    'holds when'
    """
    return combine_models(per_model)


def verdicts_over_k(focus: Mapping, threshold: float = 0.5) -> list[dict[str, str]]:
    """Each model's verdict and the claim's at every k of a stored focus run (line ``threshold``, sink threshold 0.5).
    """
    grid = dict(ks=focus["config"]["ks"], thresholds=focus["config"]["thresholds"])
    out = []
    for k in focus["config"]["ks"]:
        per = {m: focus_verdict(bins_at(rec["trained"], k=k, threshold=threshold, **grid),
                                max(bins_at(s, k=k, threshold=threshold, **grid)["property"] for s in rec["scrambled"]))
               for m, rec in focus["models"].items()}
        out.append({**per, "claim": claim_verdict(per)})
    return out
