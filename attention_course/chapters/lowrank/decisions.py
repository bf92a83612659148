"""Chapter 3's pre-registered decision rules (``claims.toml``) as functions of the stored runs.

Thresholds are parameters, so the evidence page can sweep them: ``low-rank-real``
(:func:`lowrank_bins`, :func:`decide_low_rank_real`), ``trailing-noise`` (:func:`trailing_passes`,
:func:`decide_trailing`) and ``patches-attend-nearby`` (:func:`near_shares`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional

import numpy as np

from .baselines import SINK_THRESHOLD, classify_heads, head_bins
from .head_properties import auc

__all__ = ["lowrank_bins", "entropy_auc", "decide_low_rank_real", "trailing_passes", "decide_trailing",
           "near_shares", "decide_patches", "combine_halves"]

#: low-rank-real holds in a model when at least this share of its non-sink heads are low-rank in every order.
MOST_NON_SINK = 2 / 3


def _has_property(order: Mapping, energy: float, measure: str, k: int) -> np.ndarray:
    if measure == "error":
        return np.asarray(order["energy"]) >= energy - 1e-12  # error <= sqrt(1 - energy)
    if measure in ("stable_rank", "effective_rank"):
        return np.asarray(order[measure]) <= k
    raise ValueError(f"measure={measure!r}; expected 'error', 'stable_rank' or 'effective_rank'")


def lowrank_bins(record: Mapping, energy: float = 0.99, sink_threshold: float = SINK_THRESHOLD,
                 measure: str = "error") -> list[dict]:
    """Per sentence order: the shares of ALL heads in each bin, and the share of non-sink heads that are low-rank.

    ``record`` is one model's entry of the ``heads`` run (:func:`~attention_course.chapters.lowrank.two_models.heads_run`).
    A head is low-rank when its content part's leading ``k`` singular values hold at least ``energy`` of its
    energy (``measure="error"``), or its content part's stable or effective rank is at most ``k``.

    Examples
    --------
    >>> rec = {"config": {"k": 2}, "orders": [{"energy": [0.995, 0.9, 0.999], "sink_share": [0.1, 0.2, 0.8],
    ...         "stable_rank": [1.5, 3.0, 1.0], "effective_rank": [4.0, 9.0, 2.0]}]}
    >>> b = lowrank_bins(rec)[0]
    >>> b["property"], b["no property"], b["sink"], b["non_sink_low"]
    (0.3333333333333333, 0.3333333333333333, 0.3333333333333333, 0.5)
    >>> lowrank_bins(rec, energy=0.9)[0]["non_sink_low"], lowrank_bins(rec, measure="stable_rank")[0]["non_sink_low"]
    (1.0, 0.5)
    """
    k = record["config"]["k"]
    out = []
    for order in record["orders"]:
        labels = classify_heads(_has_property(order, energy, measure, k), order["sink_share"], sink_threshold)
        bins = head_bins(labels)
        non_sink = bins["property"] + bins["no property"]
        out.append({**bins, "non_sink_low": bins["property"] / non_sink if non_sink else float("nan")})
    return out


def entropy_auc(record: Mapping, energy: float = 0.99, sink_threshold: float = SINK_THRESHOLD) -> Optional[float]:
    """AUC of the content part's mean row entropy for the low-rank non-sink heads against the others, pooled
    over orders, read in either direction (``max(AUC, 1 - AUC)``); None when either group is empty."""
    k = record["config"]["k"]
    ent, low = [], []
    for order in record["orders"]:
        keep = np.asarray(order["sink_share"]) < sink_threshold
        ent.extend(np.asarray(order["entropy"])[keep]), low.extend(_has_property(order, energy, "error", k)[keep])
    low = np.asarray(low, dtype=bool)
    if low.all() or not low.any():
        return None
    a = auc(ent, low)
    return max(a, 1 - a)


def model_verdict(record: Mapping, energy: float = 0.99, sink_threshold: float = SINK_THRESHOLD) -> str:
    """``low-rank-real``'s rule in one model: holds / holds when (entropy AUC >= 0.9) / wrong as stated."""
    shares = [b["non_sink_low"] for b in lowrank_bins(record, energy, sink_threshold)]
    if all(s >= MOST_NON_SINK for s in shares):
        return "holds"
    a = entropy_auc(record, energy, sink_threshold)
    return "holds when" if a is not None and a >= 0.9 else "wrong as stated"


def combine_models(verdicts: Mapping[str, str]) -> str:
    """Across models: one verdict if they agree; else *holds when* (the condition names the model where it holds).

    Examples
    --------
    >>> combine_models({"MiniLM": "wrong as stated", "SmolLM2": "wrong as stated"})
    'wrong as stated'
    >>> combine_models({"MiniLM": "wrong as stated", "SmolLM2": "holds"})
    'holds when'
    """
    values = set(verdicts.values())
    if len(values) == 1:
        return values.pop()
    return "holds when" if values & {"holds", "holds when"} else "undecided"


def decide_low_rank_real(models: Mapping[str, Mapping], energy: float = 0.99,
                         sink_threshold: float = SINK_THRESHOLD) -> tuple[str, dict[str, str]]:
    """``(verdict, {model: verdict})`` of ``low-rank-real`` at the given thresholds."""
    per = {name: model_verdict(rec, energy, sink_threshold) for name, rec in models.items()}
    return combine_models(per), per


def trailing_passes(rows: Sequence[Mapping], keep: float = 0.9) -> dict:
    """One model's trailing-noise test at kept share ``keep``: mean costs and whether the trailing values are irrelevant.

    Irrelevant: the trailing removal costs at most 0.1 of uniform attention's cost and at most half of what
    the same energy removed at random costs (means over seeds or orders).

    Examples
    --------
    >>> rows = [{"keep": 0.9, "cost": {"trailing": 0.3, "random": 0.2, "leading": 0.5}},
    ...         {"keep": 0.99, "cost": {"trailing": 0.01, "random": 0.05, "leading": 0.1}}]
    >>> trailing_passes(rows, 0.9)["irrelevant"], trailing_passes(rows, 0.99)["irrelevant"]
    (False, True)
    """
    chosen = [r for r in rows if abs(r.get("keep", 0.9) - keep) < 1e-9]
    if not chosen:
        raise ValueError(f"no rows at keep={keep}; the run has {sorted({r.get('keep', 0.9) for r in rows})}")
    cost = {name: float(np.mean([r["cost"][name] for r in chosen])) for name in ("trailing", "random", "leading")}
    return {**cost, "irrelevant": cost["trailing"] <= 0.1 and cost["trailing"] <= 0.5 * cost["random"], "n": len(chosen)}


def decide_trailing(models: Mapping[str, Sequence[Mapping]], keep: float = 0.9) -> tuple[str, dict[str, bool]]:
    """``(verdict, {model: irrelevant})``: holds in every model, holds when in some, wrong as stated in none.

    Examples
    --------
    >>> r = lambda t: [{"keep": 0.9, "cost": {"trailing": t, "random": 0.5, "leading": 0.5}}]
    >>> decide_trailing({"a": r(0.05), "b": r(0.4)})
    ('holds when', {'a': True, 'b': False})
    """
    per = {name: trailing_passes(rows, keep)["irrelevant"] for name, rows in models.items()}
    n = sum(per.values())
    return ("holds" if n == len(per) else "holds when" if n else "wrong as stated"), per


def near_shares(doc: Mapping, most: float = 0.5, alpha: Optional[float] = None, which: str = "layers") -> list[float]:
    """Per layer, the share of heads (pooled over seeds) whose neighbourhood or content-neighbourhood mass is above
    ``most`` and beats its shuffled null at ``p < alpha`` (the vision run's rule, with *most* a parameter)."""
    alpha = doc["alpha"] if alpha is None else alpha
    runs = doc["runs"]
    out = []
    for layer in range(len(runs[0][which])):
        near = [(m[layer]["mass"][i] > most and m[layer]["p_mass"][i] < alpha)
                or (m[layer]["content_mass"][i] > most and m[layer]["p_content_mass"][i] < alpha)
                for m in (r[which] for r in runs) for i in range(len(m[layer]["mass"]))]
        out.append(float(np.mean(near)))
    return out


def decide_patches(doc: Mapping, most: float = 0.5) -> tuple[str, bool]:
    """``(verdict, counts)`` of ``patches-attend-nearby`` on a stored vision run.

    The run counts if the mean test accuracy is at least 0.9, every seed's at least 0.85, and the untrained
    models' share of near heads is below 0.05 in every layer; then holds (more than half near in every layer),
    holds when (in some layer), wrong as stated (in none); a run that does not count is undecided.

    Examples
    --------
    >>> layer = lambda m: {"mass": [m], "p_mass": [0.001], "content_mass": [0.0], "p_content_mass": [1.0]}
    >>> doc = {"alpha": 0.005, "runs": [{"test_accuracy": 0.95, "layers": [layer(0.6), layer(0.2)],
    ...                                  "untrained": [layer(0.1), layer(0.1)]}]}
    >>> decide_patches(doc), decide_patches({**doc, "runs": [{**doc["runs"][0], "test_accuracy": 0.5}]})
    (('holds when', True), ('undecided', False))
    """
    acc = [r["test_accuracy"] for r in doc["runs"]]
    counts = bool(np.mean(acc) >= 0.9 and min(acc) >= 0.85 and max(near_shares(doc, most, which="untrained")) < 0.05)
    if not counts:
        return "undecided", False
    near = [s > 0.5 for s in near_shares(doc, most)]
    return ("holds" if all(near) else "holds when" if any(near) else "wrong as stated"), True


def combine_halves(*verdicts: str) -> str:
    """A claim made of parts decided elsewhere: holds if all hold; wrong as stated if any is; undecided if any is
    (and none is wrong); holds when otherwise (each part holds, some under a condition).

    Examples
    --------
    >>> combine_halves("holds when", "holds"), combine_halves("holds when", "wrong as stated")
    ('holds when', 'wrong as stated')
    >>> combine_halves("undecided", "holds"), combine_halves("holds", "holds")
    ('undecided', 'holds')
    """
    if "wrong as stated" in verdicts:
        return "wrong as stated"
    if "undecided" in verdicts:
        return "undecided"
    return "holds" if all(v == "holds" for v in verdicts) else "holds when"
