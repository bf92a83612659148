r"""``python -m attention_course insight-metric``: the learned metric, and softmax against linear attention as N grows.

Two parts, each trained by the :class:`~attention_course.chapters.insight.convergence.ConvergenceRule`
(learning rate picked from 3e-3 and 1e-2 on seed 0's validation batch, as ``insight-run`` does):

``metric`` (``attention_course/data/insight_metric.json``)
    d_model = 64, every variant with one learnable score scale started at :math:`1/\sqrt{d}`
    (:class:`~attention_course.chapters.insight.mixers.Variant` ``learn_scale``): learned
    :math:`W_Q, W_K`; :math:`W_Q = W_K = I`; tied :math:`W_Q = W_K`; on the copy also identity and
    tied with the self-score masked. Stacked MQAR (16 pairs) and the previous-token copy (32 tokens),
    seeds 0-2.
``linear`` (``attention_course/data/insight_linear.json``)
    Stacked MQAR with N = 8, 16, 32, 64 pairs at d_model = 16, 32, 64, softmax and linear (elu + 1)
    attention, seeds 0 and 1. Run one width at a time (``--widths 16``; each under 15 minutes on one
    thread); the file keeps the other widths' records.

``partner`` (``attention_course/data/insight_partner.json``)
    Partner recall (:func:`~attention_course.chapters.insight.recall_tasks.partner_mqar`, 16 pairs),
    d_model = 64: learned :math:`W_Q, W_K`, :math:`W_Q = W_K = I`, tied :math:`W_Q = W_K`, seeds 0-2.
``linear --long`` (``attention_course/data/insight_linear_long.json``)
    The N > d points and every point where a mixer stopped on the plateau, rerun by :data:`LONG_RULE`
    (at most 4,000 steps, no plateau stop before 2,000) in :func:`long_grid`'s order; the file is
    written after each point, so a run cut short keeps what it finished.

The two pre-registered decisions (``metric-learned``, ``softmax-over-linear`` in
``attention_course/data/claims.toml``) are :func:`decide_metric_learned` and :func:`decide_softmax_linear`.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Optional

import torch

from ...models.records import DATA_DIR, machine_info, progress_bar, write_json
from .ablations import RecallTask
from .convergence import ConvergenceRule, tune_converged
from .ingredients import Score, accuracy_table
from .mixers import Variant

__all__ = ["METRIC_VARIANTS", "METRIC_FILE", "LINEAR_FILE", "PARTNER_FILE", "LONG_FILE", "LONG_RULE", "PARTNER",
           "partner_grid", "long_grid", "accuracy_table_of", "load_partner", "load_long", "merged_linear", "PAIRS", "WIDTHS", "metric_grid", "linear_grid",
           "run_metric_job", "load_metric", "load_linear", "linear_table", "decide_metric_learned",
           "decide_softmax_linear", "partner_needs_untied", "ratio_threshold", "add_arguments", "cli"]

METRIC_FILE = DATA_DIR / "insight_metric.json"
LINEAR_FILE = DATA_DIR / "insight_linear.json"
PARTNER_FILE = DATA_DIR / "insight_partner.json"
LONG_FILE = DATA_DIR / "insight_linear_long.json"
RECALL, COPY, PARTNER = "recall (MQAR, 16 pairs)", "previous token", "partner recall (16 pairs)"
#: The longer budget of the softmax-over-linear rerun: at most 4,000 steps, no plateau stop before 2,000.
LONG_RULE = ConvergenceRule(max_steps=4000, plateau_from=2000)
PAIRS, WIDTHS = (8, 16, 32, 64), (16, 32, 64)

#: The metric variants, all with the learnable score scale.
METRIC_VARIANTS: dict[str, Variant] = {
    "learned W_Q, W_K": Variant(learn_scale=True),
    "W_Q = W_K = I": Variant(identity=True, learn_scale=True),
    "tied W_Q = W_K": Variant(tied=True, learn_scale=True),
    "W_Q = W_K = I, self masked": Variant(identity=True, mask_self=True, learn_scale=True),
    "tied, self masked": Variant(tied=True, mask_self=True, learn_scale=True),
}
_TASKS = {RECALL: RecallTask("stacked_mqar", {"n_pairs": 16}), COPY: RecallTask("previous_token", {"length": 32}),
          PARTNER: RecallTask("partner_mqar", {"n_pairs": 16})}
_MIXERS = {"softmax attention": Variant(), "linear attention": Variant(mixer="linear")}


def metric_grid() -> list[tuple[str, str, int]]:
    """(task, variant, d_model) of the ``metric`` part: three variants on recall, all five on the copy.

    Examples
    --------
    >>> len(metric_grid()), metric_grid()[0]
    (8, ('recall (MQAR, 16 pairs)', 'learned W_Q, W_K', 64))
    """
    names = list(METRIC_VARIANTS)
    return [(RECALL, v, 64) for v in names[:3]] + [(COPY, v, 64) for v in names]


def partner_grid() -> list[tuple[str, str, int]]:
    """(task, variant, d_model) of the ``partner`` part: learned, identity and tied on partner recall.

    Examples
    --------
    >>> [v for _, v, _ in partner_grid()]
    ['learned W_Q, W_K', 'W_Q = W_K = I', 'tied W_Q = W_K']
    """
    return [(PARTNER, v, 64) for v in list(METRIC_VARIANTS)[:3]]


def long_grid(runs: Sequence[Mapping]) -> list[tuple[str, str, int]]:
    """The points the longer budget reruns, in the registered order, from the 1,200-step ``runs``.

    Softmax at N > d, linear at N > d, then every other (mixer, N, d) of a point where either mixer
    stopped on the plateau.

    Examples
    --------
    >>> r = [{"variant": m, "n_pairs": n, "d_model": 16, "stopped": [s]} for m, n, s in
    ...      [("softmax attention", 8, "target"), ("linear attention", 8, "plateau"),
    ...       ("softmax attention", 32, "target"), ("linear attention", 32, "target")]]
    >>> [(v[0], n.split("(MQAR, ")[1][:2], d) for n, v, d in long_grid(r)]
    [('s', '32', 16), ('l', '32', 16), ('s', '8 ', 16), ('l', '8 ', 16)]
    """
    points = sorted({(r["n_pairs"], r["d_model"]) for r in runs}, key=lambda p: (p[1], p[0]))
    plateau = {(r["n_pairs"], r["d_model"]) for r in runs if "plateau" in r["stopped"]}
    over = [p for p in points if p[0] > p[1]]
    rest = [p for p in points if p in plateau and p not in over]
    label = "recall (MQAR, {} pairs)".format
    return ([(label(n), "softmax attention", d) for n, d in over] + [(label(n), "linear attention", d) for n, d in over]
            + [(label(n), m, d) for n, d in rest for m in _MIXERS])


def linear_grid(widths: Sequence[int] = WIDTHS, pairs: Sequence[int] = PAIRS) -> list[tuple[str, str, int]]:
    """(task, mixer, d_model) of the ``linear`` part.

    Examples
    --------
    >>> linear_grid((16,), (8,))
    [('recall (MQAR, 8 pairs)', 'softmax attention', 16), ('recall (MQAR, 8 pairs)', 'linear attention', 16)]
    """
    return [(f"recall (MQAR, {n} pairs)", m, d) for d in widths for n in pairs for m in _MIXERS]


def _task(label: str) -> RecallTask:
    if label in _TASKS:
        return _TASKS[label]
    return RecallTask("stacked_mqar", {"n_pairs": int(label.split("(MQAR, ")[1].split()[0])})


def run_metric_job(task_label: str, variant_name: str, d_model: int = 64, seeds=(0, 1, 2),
                   lrs=(3e-3, 1e-2), rule: ConvergenceRule = ConvergenceRule()) -> dict:
    """Train one configuration by the convergence rule (one thread) and return its record."""
    torch.set_num_threads(1)
    variant = METRIC_VARIANTS.get(variant_name) or _MIXERS[variant_name]
    task = _task(task_label)
    start = time.perf_counter()
    r = tune_converged(variant, task, seeds=seeds, lrs=lrs, d_model=d_model, rule=rule)
    return {"task": task_label, "variant": variant_name, "d_model": d_model,
            "n_pairs": task.kwargs.get("n_pairs"), **r, "seconds": round(time.perf_counter() - start, 1)}


def load_metric(path=METRIC_FILE) -> dict:
    """The stored ``metric`` part: ``{"meta", "runs": [record of run_metric_job, ...]}``."""
    with open(path) as fh:
        return json.load(fh)


def load_linear(path=LINEAR_FILE) -> dict:
    """The stored ``linear`` part: ``{"meta": {width: meta}, "runs": [...]}``."""
    with open(path) as fh:
        return json.load(fh)


def load_partner(path=PARTNER_FILE) -> dict:
    """The stored ``partner`` part: ``{"meta", "runs": [record of run_metric_job, ...]}``."""
    with open(path) as fh:
        return json.load(fh)


def load_long(path=LONG_FILE) -> dict:
    """The stored longer-budget reruns: ``{"meta", "runs": [...]}`` (records as in :func:`load_linear`)."""
    with open(path) as fh:
        return json.load(fh)


def merged_linear(runs: Sequence[Mapping], long_runs: Sequence[Mapping]) -> list[dict]:
    """The 1,200-step records with every rerun (mixer, N, d) replaced by its longer-budget record.

    Examples
    --------
    >>> a = [{"variant": "linear attention", "n_pairs": 8, "d_model": 16, "accuracy": [0.5]}]
    >>> merged_linear(a, [{**a[0], "accuracy": [0.9]}])[0]["accuracy"]
    [0.9]
    """
    key = lambda r: (r["variant"], r["n_pairs"], r["d_model"])  # noqa: E731
    new = {key(r): dict(r, budget="long") for r in long_runs}
    return [new.get(key(r), dict(r, budget="short")) for r in runs]


def accuracy_table_of(runs: Sequence[Mapping]) -> dict[tuple[str, str], Score]:
    """``(task, variant) -> Score`` over each record's seeds (the table the decisions read).

    Examples
    --------
    >>> accuracy_table_of([{"task": PARTNER, "variant": "W_Q = W_K = I", "accuracy": [0.5, 0.7]}])[PARTNER, "W_Q = W_K = I"].n
    2
    """
    return accuracy_table(list(runs))


def linear_table(runs: Sequence[Mapping]) -> dict[tuple[str, int, int], Score]:
    """``(mixer, N, d) -> Score`` over each record's seeds.

    Examples
    --------
    >>> r = [{"variant": "linear attention", "n_pairs": 8, "d_model": 16, "accuracy": [0.5, 0.7]}]
    >>> linear_table(r)["linear attention", 8, 16].mean
    0.6
    """
    return {(r["variant"], r["n_pairs"], r["d_model"]): accuracy_table([{**r, "task": ""}])["", r["variant"]]
            for r in runs}


# ------------------------------------------------------------------ the pre-registered decisions
def decide_metric_learned(t: Mapping[tuple[str, str], Score]) -> str:
    """``metric-learned``: gap_r = learned - identity on recall, gap_c = tied-masked - identity-masked on the copy,
    and, when ``t`` has partner recall, gap_p = learned - identity and gap_t = learned - tied there.

    Returns ``"holds when"`` with the condition "the match is not the embeddings' own similarity"
    when only gap_p exceeds 0.05; :func:`partner_needs_untied` says whether tied fails too.

    Examples
    --------
    >>> S = lambda m: Score(m, m, m, 3)
    >>> t = {(RECALL, "learned W_Q, W_K"): S(1.0), (RECALL, "W_Q = W_K = I"): S(0.99),
    ...      (COPY, "learned W_Q, W_K"): S(1.0), (COPY, "tied, self masked"): S(0.95),
    ...      (COPY, "W_Q = W_K = I, self masked"): S(0.5)}
    >>> decide_metric_learned(t)
    'holds when'
    >>> t[RECALL, "W_Q = W_K = I"] = S(1.0); t[COPY, "tied, self masked"] = S(0.5)
    >>> decide_metric_learned(t)
    'wrong as stated'
    >>> t.update({(PARTNER, "learned W_Q, W_K"): S(1.0), (PARTNER, "W_Q = W_K = I"): S(0.5)})
    >>> decide_metric_learned(t)
    'holds when'
    """
    partner = (PARTNER, "learned W_Q, W_K") in t
    tasks = (RECALL, COPY, PARTNER) if partner else (RECALL, COPY)
    if min(t[k, "learned W_Q, W_K"].mean for k in tasks) < 0.9:
        return "undecided"
    gap_r = t[RECALL, "learned W_Q, W_K"].mean - t[RECALL, "W_Q = W_K = I"].mean
    gap_c = t[COPY, "tied, self masked"].mean - t[COPY, "W_Q = W_K = I, self masked"].mean
    if not partner:
        if gap_r > 0.05 and gap_c > 0.05:
            return "holds"
        if gap_r <= 0.05 and gap_c <= 0.05:
            return "wrong as stated"
        return "holds when"
    gap_p = t[PARTNER, "learned W_Q, W_K"].mean - t[PARTNER, "W_Q = W_K = I"].mean
    if gap_r > 0.05 and gap_c > 0.05 and gap_p > 0.05:
        return "holds"
    if gap_r <= 0.05 and gap_c <= 0.05:
        return "holds when" if gap_p > 0.05 else "wrong as stated"
    return "undecided"


def partner_needs_untied(t: Mapping[tuple[str, str], Score]) -> bool:
    """Whether tied W_Q = W_K also fails partner recall: gap_t = learned - tied above 0.05.

    Examples
    --------
    >>> S = lambda m: Score(m, m, m, 3)
    >>> partner_needs_untied({(PARTNER, "learned W_Q, W_K"): S(1.0), (PARTNER, "tied W_Q = W_K"): S(0.5)})
    True
    """
    return t[PARTNER, "learned W_Q, W_K"].mean - t[PARTNER, "tied W_Q = W_K"].mean > 0.05


def decide_softmax_linear(t: Mapping[tuple[str, int, int], Score], pairs: Sequence[int] = PAIRS,
                          widths: Sequence[int] = WIDTHS) -> str:
    """``softmax-over-linear``: gap = softmax - linear at the informative points (N >= d, softmax >= 0.9) and N <= d/4.

    Examples
    --------
    >>> S = lambda m: Score(m, m, m, 2)
    >>> t = {("softmax attention", n, 16): S(0.99) for n in (4, 16, 32)}
    >>> t.update({("linear attention", 4, 16): S(0.97), ("linear attention", 16, 16): S(0.6),
    ...           ("linear attention", 32, 16): S(0.3)})
    >>> decide_softmax_linear(t, pairs=(4, 16, 32), widths=(16,))
    'holds when'
    """
    gap = {(n, d): t["softmax attention", n, d].mean - t["linear attention", n, d].mean
           for n in pairs for d in widths}
    informative = [(n, d) for n in pairs for d in widths if n >= d and t["softmax attention", n, d].mean >= 0.9]
    small = [(n, d) for n in pairs for d in widths if 4 * n <= d]
    if not informative:
        return "undecided"
    if all(gap[p] <= 0.05 for p in informative):
        return "wrong as stated"
    if all(gap[p] > 0.1 for p in informative):
        if all(gap[p] > 0.1 for p in small):
            return "holds"
        if all(gap[p] <= 0.05 for p in small):
            return "holds when"
    return "undecided"


def ratio_threshold(t: Mapping[tuple[str, int, int], Score], pairs: Sequence[int] = PAIRS,
                    widths: Sequence[int] = WIDTHS) -> Optional[float]:
    """The smallest tested N/d from which the gap is above 0.1 at every point (with softmax >= 0.9) of that ratio or more.

    Examples
    --------
    >>> S = lambda m: Score(m, m, m, 2)
    >>> t = {("softmax attention", n, 16): S(0.99) for n in (4, 8, 16, 32)}
    >>> t.update({("linear attention", n, 16): S(a) for n, a in [(4, 0.98), (8, 0.95), (16, 0.6), (32, 0.3)]})
    >>> ratio_threshold(t, pairs=(4, 8, 16, 32), widths=(16,))
    1.0
    """
    ratios = sorted({n / d for n in pairs for d in widths})
    gap = {(n, d): t["softmax attention", n, d].mean - t["linear attention", n, d].mean
           for n in pairs for d in widths if t["softmax attention", n, d].mean >= 0.9}
    best = None
    for r in reversed(ratios):
        if all(g > 0.1 for (n, d), g in gap.items() if n / d >= r):
            best = r
        else:
            break
    return best


# ------------------------------------------------------------------ the command
def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    p.add_argument("--part", choices=("metric", "linear", "partner"), required=True)
    p.add_argument("--long", action="store_true",
                   help="linear: rerun the N > d and plateau-stopped points by LONG_RULE into insight_linear_long.json")
    p.add_argument("--widths", type=int, nargs="+", default=list(WIDTHS), help="d_model of the linear part")
    p.add_argument("--pairs", type=int, nargs="+", default=list(PAIRS), help="N of the linear part")
    p.add_argument("--seeds", type=int, nargs="+", default=None,
                   help="default: 0 1 2 (metric), 0 1 (linear)")
    p.add_argument("--out", default=None, help="default: attention_course/data/insight_<part>.json")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def cli(args: argparse.Namespace, parser: Optional[argparse.ArgumentParser] = None) -> int:
    """Run the chosen part and write (or, for ``linear``, update) its JSON."""
    torch.set_num_threads(1)
    metric = args.part in ("metric", "partner")
    seeds = tuple(args.seeds or ((0, 1, 2) if metric else (0, 1)))
    long = args.part == "linear" and getattr(args, "long", False)
    files = {"metric": METRIC_FILE, "partner": PARTNER_FILE, "linear": LONG_FILE if long else LINEAR_FILE}
    out = args.out or files[args.part]
    rule = LONG_RULE if long else ConvergenceRule()
    if args.part == "metric":
        grid = metric_grid()
    elif args.part == "partner":
        grid = partner_grid()
    elif long:
        grid = [g for g in long_grid(load_linear()["runs"]) if g[2] in args.widths and _task(g[0]).kwargs["n_pairs"]
                in args.pairs]
    else:
        grid = linear_grid(args.widths, args.pairs)
    meta = {"machine": machine_info(threads=1), "command": "python -m attention_course insight-metric",
            "arguments": {k: (str(v) if k == "out" else v) for k, v in vars(args).items()
                          if k not in ("command", "run", "parser")}, "seeds": list(seeds)}
    start, runs = time.perf_counter(), []
    # --long in parts: each call keeps the records of the (width, pairs) it does not run, so each part stays
    # under 15 minutes on one thread (stored: d = 16 8 minutes, d = 32 10, d = 64 18, all with other work on
    # the machine; d = 64 in one call on a quiet machine: 4 minutes)
    kept, planned = ([], [])
    if long and Path(out).is_file():
        old = load_long(out)
        ours = lambda d, n: d in args.widths and n in args.pairs  # noqa: E731
        kept = [r for r in old["runs"] if not ours(r["d_model"], r["n_pairs"])]
        planned = [g for g in old.get("planned", []) if not ours(g[2], _task(g[0]).kwargs["n_pairs"])]
    for t, v, d in progress_bar(iter(grid), "insight-metric", len(grid), not args.quiet):
        runs.append(run_metric_job(t, v, d, seeds, rule=rule))
        if long:  # written after each point: a run cut short keeps what it finished
            meta["wall_seconds"] = round(time.perf_counter() - start, 1)
            write_json({"meta": meta, "runs": kept + runs, "planned": planned + [list(g) for g in grid]}, out)
    meta["wall_seconds"] = round(time.perf_counter() - start, 1)
    if long:
        write_json({"meta": meta, "runs": kept + runs, "planned": planned + [list(g) for g in grid]}, out)
        return 0
    if metric:
        write_json({"meta": meta, "runs": runs}, out)
        return 0
    try:
        old = load_linear(out)
    except FileNotFoundError:
        old = {"meta": {}, "runs": []}
    kept = [r for r in old["runs"] if r["d_model"] not in args.widths or r["n_pairs"] not in args.pairs]
    metas = {**old["meta"], **{str(d): meta for d in args.widths}}
    order = {(v, d, n): i for i, (v, d, n) in enumerate((m, d, n) for d in WIDTHS for n in PAIRS for m in _MIXERS)}
    merged = sorted(kept + runs, key=lambda r: order.get((r["variant"], r["d_model"], r["n_pairs"]), 1_000))
    write_json({"meta": metas, "runs": merged}, out)
    return 0
