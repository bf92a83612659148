r"""Chapter 7's comparisons trained to convergence: the learned metric, the score arms, softmax against linear.

``python -m attention_course insight-metric --part PART`` (:data:`INSIGHT_METRIC`; its ``--help`` lists the
parts and the files in ``attention_course/data/`` they write) runs one of them, each trained by the
:class:`~attention_course.chapters.insight.convergence.ConvergenceRule` (learning rate picked from 3e-3 and
1e-2 on seed 0's validation batch) or one of the budgets of :mod:`~attention_course.chapters.insight.asymmetry`.

The pre-registered decisions (``asymmetric``, ``metric-learned``, ``softmax-over-linear`` in
``attention_course/data/claims.toml``) are :func:`decide_asymmetric_heads`, :func:`decide_metric_both` and
:func:`decide_softmax_linear`; :func:`weights_clause` is the rule of the ``partner`` part, reported beside
the frozen-input test.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Optional

import torch

from ...models.experiments import Experiment, Runs, read_json, register
from ...models.records import DATA_DIR
from .ablations import TEST_SEED, RecallTask, accuracy, task_of
from .asymmetry import CONVERGED, CYCLIC_BUDGET, METRIC_BUDGET, SPEED_LEVEL, steps_to, Arm, ArmModel, CyclicRecallTask, train_best, tune_best
from .convergence import ConvergenceRule, tune_converged
from .ingredients import Score, accuracy_table
from .mixers import Variant, mixing_mask

__all__ = [
    "LONG_RULE", "PARTNER", "load_partner", "load_long", "merged_linear", "PAIRS", "WIDTHS", "load_metric",
    "load_linear", "linear_table", "decide_softmax_linear",
    "ratio_threshold", "CYCLIC", "SIGNED", "load_signed", "weights_clause",
    "arm_runs", "arm_table", "decide_asymmetric_heads",
    "fixed_gap", "FIXED", "NON_PSD", "untrained_arms", "decide_metric_both",
    "speed_ratio", "decide_speed", "unconverged_heads", "SPEED_FACTOR",
    "arm_label", "variant_runs", "variant_table", "load_speed", "fine_speed", "decide_directed_weights",
    "unconverged_weights", "SYMMETRIC_WEIGHTS", "ROW_WEIGHTS", "SYMMETRIC_KEYS", "ROW_KEYS", "UNTIED_KEYS", "fixed_ceiling",
]

METRIC_FILE = DATA_DIR / "insight_metric.json"
LINEAR_FILE = DATA_DIR / "insight_linear.json"
PARTNER_FILE = DATA_DIR / "insight_partner.json"
LONG_FILE = DATA_DIR / "insight_linear_long.json"
SIGNED_FILE = DATA_DIR / "insight_signed.json"
HEADS_FILE = DATA_DIR / "insight_heads.json"
HEADS_TIED_FILE = DATA_DIR / "insight_heads_tied.json"
HEADS_OTHER_FILE = DATA_DIR / "insight_heads_other.json"
FROZEN_FILE = DATA_DIR / "insight_frozen.json"
CONVERGED_FILE = DATA_DIR / "insight_converged.json"
SPEED_FILE = DATA_DIR / "insight_speed.json"
#: The fixed metrics of the ``frozen`` part, and those of them that are not positive semi-definite.
FIXED, NON_PSD = ("identity", "fixed D", "frozen random"), ("fixed D", "frozen random")
RECALL, COPY, PARTNER = "recall (MQAR, 16 pairs)", "previous token", "partner recall (16 pairs)"
CYCLIC = "cyclic recall (16 pairs, cycles of 4)"
#: The symmetric indefinite score, W_K = W_Q D (learnable score scale as every metric variant).
SIGNED = "symmetric W_K = W_Q D"
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
_SIGNED = {SIGNED: Variant(signed=True, learn_scale=True)}
_TASKS = {RECALL: RecallTask("stacked_mqar", {"n_pairs": 16}), COPY: RecallTask("previous_token", {"length": 32}),
          PARTNER: RecallTask("partner_mqar", {"n_pairs": 16}),
          CYCLIC: CyclicRecallTask(kwargs={"n_pairs": 16, "cycle": 4})}
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


def signed_grid() -> list[tuple[str, str, int]]:
    """(task, variant, d_model) of the ``signed`` part: the symmetric indefinite score on the three other tasks.

    Examples
    --------
    >>> [t for t, _, _ in signed_grid()]
    ['recall (MQAR, 16 pairs)', 'partner recall (16 pairs)', 'previous token']
    """
    return [(t, SIGNED, 64) for t in (RECALL, PARTNER, COPY)]


def heads_grid(scores: Sequence[str] = ("untied", "signed"), tasks: Sequence[str] = (CYCLIC,)) -> list[tuple]:
    """(task, score, heads, frozen_inputs) of the ``heads`` parts: each score at 1 head of 64 and 2 heads of 32.

    Examples
    --------
    >>> heads_grid()
    [('cyclic recall (16 pairs, cycles of 4)', 'untied', 1, False), ('cyclic recall (16 pairs, cycles of 4)', 'signed', 1, False), ('cyclic recall (16 pairs, cycles of 4)', 'untied', 2, False), ('cyclic recall (16 pairs, cycles of 4)', 'signed', 2, False)]
    """
    return [(t, sc, h, False) for t in tasks for h in (1, 2) for sc in scores]


def frozen_grid() -> list[tuple]:
    """(task, score, heads, frozen_inputs) of the ``frozen`` part: learned and the fixed metrics, one head.

    Examples
    --------
    >>> g = frozen_grid(); len(g), g[0], g[-1][1:]
    (16, ('partner recall (16 pairs)', 'untied', 1, True), ('frozen random', 1, False))
    """
    return [(t, sc, 1, fr) for fr in (True, False) for t in (PARTNER, RECALL) for sc in ("untied", *FIXED)]


def long_grid(runs: Sequence[Mapping]) -> list[tuple[str, str, int]]:
    """The points the longer budget reruns, in the registered order: N > d (softmax, then linear), then plateau stops.

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
    return task_of(label, _TASKS)


def run_metric_job(task_label: str, variant_name: str, d_model: int = 64, seeds=(0, 1, 2),
                   lrs=(3e-3, 1e-2), rule: ConvergenceRule = ConvergenceRule()) -> dict:
    """Train one configuration by the convergence rule (one thread) and return its record."""
    torch.set_num_threads(1)
    variant = {**METRIC_VARIANTS, **_SIGNED, **_MIXERS}[variant_name]
    task = _task(task_label)
    start = time.perf_counter()
    r = tune_converged(variant, task, seeds=seeds, lrs=lrs, d_model=d_model, rule=rule)
    return {"task": task_label, "variant": variant_name, "d_model": d_model,
            "n_pairs": task.kwargs.get("n_pairs"), **r, "seconds": round(time.perf_counter() - start, 1)}


#: An :class:`~attention_course.chapters.insight.asymmetry.Arm`'s other settings and their defaults.
ARM_DEFAULTS = {"weights": "row", "causal": True, "score_input": "token"}


def run_arm_job(task_label: str, score: str, heads: int, frozen_inputs: bool, seeds=(0, 1, 2),
                lrs=(3e-3, 1e-2), rule: ConvergenceRule = CYCLIC_BUDGET, **settings) -> dict:
    """Train one :class:`~attention_course.chapters.insight.asymmetry.Arm` on a task (one thread); its record
    carries the ``settings`` that differ from :data:`ARM_DEFAULTS`."""
    torch.set_num_threads(1)
    start = time.perf_counter()
    r = tune_best(Arm(score, heads, frozen_inputs, **settings), _task(task_label), seeds=seeds, lrs=lrs, rule=rule)
    extra = {k: v for k, v in settings.items() if ARM_DEFAULTS[k] != v}
    return {"task": task_label, "score": score, "heads": heads, "frozen_inputs": frozen_inputs, **extra, **r,
            "seconds": round(time.perf_counter() - start, 1)}


def arm_label(record: Mapping) -> str:
    """An arm's name in the stored files: its score, then what differs from :data:`ARM_DEFAULTS`.

    Examples
    --------
    >>> arm_label({"score": "signed"}), arm_label({"score": "signed", "weights": "symmetric", "causal": False})
    ('signed', 'signed, symmetric weights, no mask')
    >>> arm_label({"score": "signed", "causal": False}), arm_label({"score": "untied", "score_input": "key"})
    ('signed, row weights, no mask', 'untied, key only')
    """
    s = record["score"]
    if record.get("weights", "row") == "symmetric" or not record.get("causal", True):
        s += f", {record.get('weights', 'row')} weights"
    if not record.get("causal", True):
        s += ", no mask"
    if record.get("score_input", "token") == "key":
        s += ", key only"
    return s


def _arm_name(record: Mapping) -> str:
    return f"{arm_label(record)} {record['heads']}"


def _is_variant(record: Mapping) -> bool:
    return any(k in record for k in ARM_DEFAULTS)


def arm_runs(paths=None) -> list[dict]:
    """The score arms' records of the ``converged``, ``heads``, ``heads-tied``, ``heads-other`` and ``frozen`` parts,
    each arm once (a ``converged`` record replaces its 12,000-step one)."""
    paths = paths or tuple(p for p in (CONVERGED_FILE, HEADS_FILE, HEADS_TIED_FILE, HEADS_OTHER_FILE, FROZEN_FILE)
                           if p != CONVERGED_FILE or p.exists())
    seen, out = set(), []
    for r in (r for p in paths for r in read_json(p)["runs"] if not _is_variant(r)):  # the score arms only
        key = (r["task"], r["score"], r["heads"], r["frozen_inputs"])
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def variant_runs(path=CONVERGED_FILE) -> list[dict]:
    """The stored ``converged`` records of the arms whose weights, mask or score input differ from the defaults."""
    return [r for r in read_json(path)["runs"] if _is_variant(r)]


def variant_table(runs: Sequence[Mapping]) -> dict[tuple[str, str, int], Score]:
    """``(task, arm_label, heads) -> Score`` over each record's seeds.

    Examples
    --------
    >>> r = [{"task": CYCLIC, "score": "signed", "heads": 2, "weights": "symmetric", "causal": False,
    ...       "accuracy": [0.5, 0.6]}]
    >>> round(variant_table(r)[CYCLIC, "signed, symmetric weights, no mask", 2].mean, 2)
    0.55
    """
    return {(r["task"], arm_label(r), r["heads"]):
            accuracy_table([{"task": "", "variant": "", "accuracy": r["accuracy"]}])["", ""] for r in runs}


def arm_table(runs: Sequence[Mapping]) -> dict[tuple[str, str, int, bool], Score]:
    """``(task, score, heads, frozen_inputs) -> Score`` over each record's seeds.

    Examples
    --------
    >>> r = [{"task": CYCLIC, "score": "signed", "heads": 2, "frozen_inputs": False, "accuracy": [0.9, 1.0]}]
    >>> arm_table(r)[CYCLIC, "signed", 2, False].mean
    0.95
    """
    return {(r["task"], r["score"], r["heads"], r["frozen_inputs"]):
            accuracy_table([{"task": "", "variant": "", "accuracy": r["accuracy"]}])["", ""] for r in runs}


def untrained_arms(keys: Sequence[tuple[str, str, int, bool]], seeds: Sequence[int] = (0, 1, 2)) -> dict:
    """Held-out accuracy per seed of each (task, score, heads, frozen_inputs) arm at its seeded start (no training).

    Examples
    --------
    >>> acc = untrained_arms([(RECALL, "signed", 2, False)], seeds=(0,))
    >>> 0.0 <= acc[RECALL, "signed", 2, False][0] < 0.1
    True
    """
    out = {}
    with torch.no_grad():
        for task_label, score, heads, frozen in keys:
            task = _task(task_label)
            out[task_label, score, heads, frozen] = [
                round(accuracy(ArmModel(Arm(score, heads, frozen), task.seq_len, seed=s), task, seed=TEST_SEED), 4)
                for s in seeds]
    return out


def load_metric(path=METRIC_FILE) -> dict:
    """The stored ``metric`` part: ``{"meta", "runs": [record of run_metric_job, ...]}``."""
    return read_json(path)


def load_linear(path=LINEAR_FILE) -> dict:
    """The stored ``linear`` part: ``{"meta": {width: meta}, "runs": [...]}``."""
    return read_json(path)


def load_partner(path=PARTNER_FILE) -> dict:
    """The stored ``partner`` part: ``{"meta", "runs": [record of run_metric_job, ...]}``."""
    return read_json(path)


def load_signed(path=SIGNED_FILE) -> dict:
    """The stored ``signed`` part: ``{"meta", "runs": [record of run_metric_job, ...]}``."""
    return read_json(path)


def load_long(path=LONG_FILE) -> dict:
    """The stored longer-budget reruns: ``{"meta", "runs": [...]}`` (records as in :func:`load_linear`)."""
    return read_json(path)


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
def weights_clause(t: Mapping[tuple[str, str], Score], threshold: float = 0.05) -> str:
    """``metric-learned``'s clause on the weights, from gap_t = learned - tied and gap_s = learned - signed on
    partner recall.

    Examples
    --------
    >>> S = lambda m: Score(m, m, m, 3)
    >>> t = {(PARTNER, "learned W_Q, W_K"): S(1.0), (PARTNER, "tied W_Q = W_K"): S(0.5), (PARTNER, SIGNED): S(0.99)}
    >>> weights_clause(t)
    'then only with an indefinite metric'
    >>> t[PARTNER, SIGNED] = S(0.6); weights_clause(t)
    'then only with untied W_Q, W_K'
    """
    learned = t[PARTNER, "learned W_Q, W_K"].mean
    gap_t, gap_s = learned - t[PARTNER, "tied W_Q = W_K"].mean, learned - t[PARTNER, SIGNED].mean
    if gap_t > threshold:
        return "then only with untied W_Q, W_K" if gap_s > threshold else "then only with an indefinite metric"
    return ""


#: The secondary reading of ``asymmetric``: the symmetric arm needs at least this many times the untied arm's steps.
SPEED_FACTOR = 5.0


def unconverged_heads(runs: Sequence[Mapping], score: str = "signed") -> set:
    """The head counts at which the ``score`` arm on cyclic recall stopped at its step cap on some seed.

    Examples
    --------
    >>> r = [{"task": CYCLIC, "score": "signed", "heads": 1, "stopped": ["plateau", "max steps"]}]
    >>> unconverged_heads(r)
    {1}
    """
    return {r["heads"] for r in runs if r["task"] == CYCLIC and r["score"] == score and "max steps" in r["stopped"]}


def speed_steps(record: Mapping, level: float = SPEED_LEVEL) -> list[int]:
    """Steps to the first validation check >= ``level``, per seed; the record's step cap if never (a lower bound).

    Examples
    --------
    >>> speed_steps({"curves": [[0.5, 0.96], [0.5, 0.6]], "rule": {"check_every": 100, "max_steps": 48000}})
    [200, 48000]
    """
    every, cap = record["rule"]["check_every"], record["rule"]["max_steps"]
    return [steps_to(c, level, every) or cap for c in record["curves"]]


def speed_ratio(runs: Sequence[Mapping], heads: int, level: float = SPEED_LEVEL) -> float:
    """r_H = mean steps to ``level`` of W_K = W_Q D over that of untied, on cyclic recall at ``heads`` heads.

    Examples
    --------
    >>> rule = {"check_every": 100, "max_steps": 48000}
    >>> r = [{"task": CYCLIC, "score": s, "heads": 1, "curves": c, "rule": rule}
    ...      for s, c in (("untied", [[0.5, 0.99]]), ("signed", [[0.5] * 9 + [0.95]]))]
    >>> speed_ratio(r, 1)
    5.0
    """
    mean = {r["score"]: sum(speed_steps(r, level)) / len(r["curves"]) for r in runs
            if r["task"] == CYCLIC and r["heads"] == heads and r["score"] in ("untied", "signed")}
    return mean["signed"] / mean["untied"]


def decide_speed(ratios: Mapping[int, float], factor: float = SPEED_FACTOR) -> str:
    """The secondary reading of ``asymmetric`` (faster with asymmetric scores) from r_1 and r_2.

    Examples
    --------
    >>> decide_speed({1: 60.0, 2: 3.0}), decide_speed({1: 60.0, 2: 8.0}), decide_speed({1: 2.0, 2: 8.0})
    ('holds when', 'holds', 'wrong as stated')
    """
    if ratios[1] >= factor:
        return "holds" if ratios[2] >= factor else "holds when"
    return "wrong as stated"


def decide_asymmetric_heads(t: Mapping[tuple, Score], threshold: float = 0.05, unconverged: Collection[int] = ()) -> str:
    """``asymmetric``: gap_H = untied - (W_K = W_Q D) on cyclic recall at H = 1 and 2 heads (means over seeds).

    A gap above ``threshold`` at a head count in ``unconverged`` (step cap reached) leaves it undecided.

    Examples
    --------
    >>> S = lambda m: Score(m, m, m, 3)
    >>> t = {(CYCLIC, "untied", h, False): S(1.0) for h in (1, 2)}
    >>> t[CYCLIC, "signed", 1, False], t[CYCLIC, "signed", 2, False] = S(0.9), S(0.99)
    >>> decide_asymmetric_heads(t)
    'holds when'
    >>> t[CYCLIC, "signed", 2, False] = S(0.7); decide_asymmetric_heads(t)
    'holds'
    >>> t[CYCLIC, "signed", 1, False] = S(0.97); decide_asymmetric_heads(t)
    'undecided'
    >>> t[CYCLIC, "signed", 2, False] = S(0.97); decide_asymmetric_heads(t)
    'wrong as stated'
    >>> t[CYCLIC, "signed", 1, False] = S(0.9); decide_asymmetric_heads(t, unconverged={1})
    'undecided'
    """
    if min(t[CYCLIC, "untied", h, False].mean for h in (1, 2)) < 0.9:
        return "undecided"
    gap_1, gap_2 = (t[CYCLIC, "untied", h, False].mean - t[CYCLIC, "signed", h, False].mean for h in (1, 2))
    if any(g > threshold and h in unconverged for h, g in ((1, gap_1), (2, gap_2))):
        return "undecided"
    if gap_1 > threshold:
        return "holds" if gap_2 > threshold else "holds when"
    return "undecided" if gap_2 > threshold else "wrong as stated"


#: The arms of ``asymmetric``, no mask: W_K = W_Q D with symmetric weights or row softmax (scoring whole tokens), and
#: the deciding pair scoring key embeddings only: symmetric weights against ordinary attention (untied, row softmax).
SYMMETRIC_WEIGHTS, ROW_WEIGHTS = "signed, symmetric weights, no mask", "signed, row weights, no mask"
SYMMETRIC_KEYS, ROW_KEYS = SYMMETRIC_WEIGHTS + ", key only", ROW_WEIGHTS + ", key only"
UNTIED_KEYS = "untied, row weights, no mask, key only"


def unconverged_weights(runs: Sequence[Mapping], arm: str = SYMMETRIC_WEIGHTS) -> set:
    """Head counts at which the symmetric-weights ``arm`` stopped at its step cap on some seed (cyclic recall).

    Examples
    --------
    >>> r = [{"task": CYCLIC, "score": "signed", "heads": 1, "weights": "symmetric", "causal": False,
    ...       "stopped": ["plateau", "max steps"]}]
    >>> unconverged_weights(r)
    {1}
    """
    return {r["heads"] for r in runs if r["task"] == CYCLIC and arm_label(r) == arm and "max steps" in r["stopped"]}


def decide_directed_weights(t: Mapping[tuple[str, str, int], Score], threshold: float = 0.05,
                            unconverged: Collection[int] = (), symmetric: str = SYMMETRIC_WEIGHTS,
                            control: str = ROW_WEIGHTS) -> str:
    """``asymmetric``: gap_H = ``control`` - ``symmetric`` weights (no mask) on cyclic recall at H = 1, 2.

    ``t`` is :func:`variant_table`'s. Undecided if a control is below 0.9, if the symmetric weights cannot learn
    partner recall or MQAR, or if a gap comes from ``unconverged``. The deciding pair scores key embeddings only
    (``symmetric=SYMMETRIC_KEYS, control=UNTIED_KEYS``); the defaults are the pair scoring whole tokens.

    Examples
    --------
    >>> S = lambda m: Score(m, m, m, 3)
    >>> t = {(k, SYMMETRIC_WEIGHTS, h): S(1.0) for k in (PARTNER, RECALL) for h in (1, 2)}
    >>> t.update({(CYCLIC, ROW_WEIGHTS, h): S(0.97) for h in (1, 2)})
    >>> t.update({(CYCLIC, SYMMETRIC_WEIGHTS, 1): S(0.5), (CYCLIC, SYMMETRIC_WEIGHTS, 2): S(0.52)})
    >>> decide_directed_weights(t)
    'holds'
    >>> t[CYCLIC, SYMMETRIC_WEIGHTS, 2] = S(0.95); decide_directed_weights(t)
    'holds when a single head'
    >>> t[CYCLIC, SYMMETRIC_WEIGHTS, 1] = S(0.96); decide_directed_weights(t)
    'wrong as stated'
    >>> t[CYCLIC, SYMMETRIC_WEIGHTS, 2] = S(0.5); decide_directed_weights(t)
    'holds when several heads'
    >>> t[RECALL, SYMMETRIC_WEIGHTS, 1] = S(0.6); decide_directed_weights(t)
    'undecided'
    >>> del t[CYCLIC, ROW_WEIGHTS, 1]; decide_directed_weights(t)   # an arm not trained: nothing to decide on
    'undecided'
    >>> k = {(c, SYMMETRIC_KEYS, h): S(1.0) for c in (PARTNER, RECALL) for h in (1, 2)}
    >>> k.update({(CYCLIC, UNTIED_KEYS, h): S(1.0) for h in (1, 2)} | {(CYCLIC, SYMMETRIC_KEYS, h): S(0.51) for h in (1, 2)})
    >>> decide_directed_weights(k, symmetric=SYMMETRIC_KEYS, control=UNTIED_KEYS)
    'holds'
    """
    needed = [(CYCLIC, arm, h) for arm in (control, symmetric) for h in (1, 2)]
    if any(k not in t for k in needed + [(k, symmetric, h) for k in (PARTNER, RECALL) for h in (1, 2)]):
        return "undecided"
    if min(t[CYCLIC, control, h].mean for h in (1, 2)) < 0.9:
        return "undecided"
    if min(t[k, symmetric, h].mean for k in (PARTNER, RECALL) for h in (1, 2)) < 0.9:
        return "undecided"  # the symmetric normaliser cannot learn at all
    over = {h: t[CYCLIC, control, h].mean - t[CYCLIC, symmetric, h].mean > threshold for h in (1, 2)}
    if any(over[h] and h in unconverged for h in (1, 2)):
        return "undecided"
    if over[1] and over[2]:
        return "holds"
    if over[1]:
        return "holds when a single head"
    if over[2]:
        return "holds when several heads"
    return "wrong as stated"


def fixed_ceiling(score: str, task_label: str, keys_only: bool = False, seed: int = 0, batch_size: int = 512,
                  scales: Sequence[float] = tuple(10 ** (e / 4) for e in range(-12, 7))) -> float:
    r"""The most a fixed metric with frozen embeddings could recall, however long it trained: an upper bound.

    Only the scale :math:`c` can move, so the weights :math:`A = \operatorname{softmax}(c\, s)` are read out ideally
    (the value of largest total weight) and the best held-out accuracy over ``scales`` is returned.
    ``keys_only``: the score compares key embeddings only.

    Examples
    --------
    >>> c = fixed_ceiling("identity", RECALL, batch_size=64, scales=(0.1, 1.0))
    >>> 0.0 <= c <= 1.0
    True
    """
    task = _task(task_label)
    x, y, _ = task(batch_size, seed=TEST_SEED)  # (B, T, 2), (B, T)
    T, N = x.shape[1], x.shape[1] // 2
    m = ArmModel(Arm(score, 1, True), task.seq_len, seed=seed)
    with torch.no_grad():
        e_k = m.E_K[x[..., 0]]  # (B, T, d)
        seen = e_k if keys_only else e_k + m.E_V[x[..., 1]] + m.P[:T]  # (B, T, d)
        raw = (seen @ m.W_q) @ (seen @ m.W_k).transpose(1, 2) / m.d_model ** 0.5  # (B, T, T)
        values = torch.nn.functional.one_hot(x[..., 1], m.E_V.shape[0]).float()[..., :-1]  # (B, T, 64): blank -> 0
        causal = mixing_mask(T)
        best = 0.0
        for c in scales:
            A = torch.softmax((c * raw).masked_fill(~causal, float("-inf")), dim=-1)  # (B, T, T), rows over keys
            best = max(best, float(((A @ values).argmax(-1) == y)[:, N:].float().mean()))
    return round(best, 4)


def fixed_gap(t: Mapping[tuple, Score], task: str, frozen: bool, fixed: Sequence[str] = FIXED) -> float:
    """Learned W_Q, W_K minus the best of the ``fixed`` metrics (means over seeds) on ``task``.

    Examples
    --------
    >>> S = lambda m: Score(m, m, m, 3)
    >>> t = {(PARTNER, sc, 1, True): S(a) for sc, a in [("untied", 0.99), ("identity", 0.1), ("fixed D", 0.2),
    ...                                                  ("frozen random", 0.09)]}
    >>> round(fixed_gap(t, PARTNER, True), 2)
    0.79
    """
    return t[task, "untied", 1, frozen].mean - max(t[task, f, 1, frozen].mean for f in fixed)


def decide_metric_both(t: Mapping[tuple, Score], threshold: float = 0.05) -> str:
    """``metric-learned``: gap_F (embeddings frozen, against every fixed metric) and gap_L (learned, against the
    :data:`NON_PSD` ones), each above ``threshold`` on partner recall and MQAR.

    Examples
    --------
    >>> S = lambda m: Score(m, m, m, 3)
    >>> t = {(k, sc, 1, fr): S(0.1) for k in (PARTNER, RECALL) for sc in FIXED for fr in (True, False)}
    >>> t.update({(k, "untied", 1, fr): S(0.99) for k in (PARTNER, RECALL) for fr in (True, False)})
    >>> decide_metric_both(t)
    'holds'
    >>> t[RECALL, "frozen random", 1, False] = S(0.99); decide_metric_both(t)
    'holds when the inputs are given'
    >>> t[PARTNER, "fixed D", 1, True] = S(0.99); decide_metric_both(t)
    'wrong as stated'
    >>> t[RECALL, "frozen random", 1, False] = S(0.1); decide_metric_both(t)
    'holds when the embeddings learn'
    >>> t[RECALL, "untied", 1, False] = S(0.5); decide_metric_both(t)
    'undecided'
    """
    if min(t[k, "untied", 1, fr].mean for k in (PARTNER, RECALL) for fr in (True, False)) < 0.9:
        return "undecided"
    frozen = all(fixed_gap(t, k, True) > threshold for k in (PARTNER, RECALL))
    learned = all(fixed_gap(t, k, False, NON_PSD) > threshold for k in (PARTNER, RECALL))
    if frozen:
        return "holds" if learned else "holds when the inputs are given"
    return "holds when the embeddings learn" if learned else "wrong as stated"


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
@dataclass(frozen=True)
class ComparisonConfig:
    """The configuration of ``insight-metric`` (its flags); seeds default to 0 1 2, 0 1 for linear."""

    part: Optional[str] = None
    long: bool = False
    scores: tuple = ("untied", "signed", "tied")
    heads: tuple = (1, 2)
    widths: tuple = WIDTHS
    pairs: tuple = PAIRS
    seeds: Optional[tuple] = None
    weights: tuple = ()
    score_input: str = "token"

    def seed_list(self) -> tuple:
        return tuple(self.seeds or ((0, 1) if self.part == "linear" else (0, 1, 2)))


def _arm_job(config: ComparisonConfig, task_label: str, score: str, heads: int, frozen_inputs: bool,
             weights: str = "row", causal: bool = True, score_input: str = "token") -> dict:
    rule = {"frozen": METRIC_BUDGET, "converged": CONVERGED}.get(config.part, CYCLIC_BUDGET)
    return run_arm_job(task_label, score, heads, frozen_inputs, config.seed_list(), rule=rule, weights=weights,
                       causal=causal, score_input=score_input)


def _job(config: ComparisonConfig, task_label: str, variant_name: str, d_model: int) -> dict:
    rule = LONG_RULE if config.part == "linear" and config.long else ConvergenceRule()
    return run_metric_job(task_label, variant_name, d_model, config.seed_list(), rule=rule)


def _meta(config: ComparisonConfig, meta: dict) -> dict:
    return {**{k: meta[k] for k in ("machine", "command", "arguments")}, "seeds": list(config.seed_list()),
            "wall_seconds": meta["wall_seconds"]}


def _ours(config: ComparisonConfig, d: int, n: Optional[int]) -> bool:
    return d in config.widths and n in config.pairs


def _runs_document(config: ComparisonConfig, runs: Runs, meta: dict) -> dict:
    return {"meta": _meta(config, meta), "runs": runs.records}


def _linear_document(config: ComparisonConfig, runs: Runs, meta: dict) -> dict:
    return {"meta": {str(d): _meta(config, meta) for d in config.widths}, "runs": runs.records}


def _keep_other_widths(doc: Mapping, previous: Mapping) -> dict:
    """The linear part of some widths merged into the stored file: its other widths' records and metas kept."""
    ran = {(r["d_model"], r["n_pairs"]) for r in doc["runs"]}
    widths, pairs = {d for d, _ in ran}, {n for _, n in ran}
    kept = [r for r in previous["runs"] if r["d_model"] not in widths or r["n_pairs"] not in pairs]
    order = {(v, d, n): i for i, (v, d, n) in enumerate((m, d, n) for d in WIDTHS for n in PAIRS for m in _MIXERS)}
    merged = sorted(kept + list(doc["runs"]), key=lambda r: order.get((r["variant"], r["d_model"], r["n_pairs"]), 1_000))
    return {"meta": {**previous["meta"], **doc["meta"]}, "runs": merged}


def converged_grid(config: ComparisonConfig) -> list[tuple]:
    """The ``converged`` part's arms that ``config`` runs, longest first (W_K = W_Q D, tied, untied; 1 head first).

    With ``weights`` or ``score_input="key"`` the rows carry ``(weights, causal, score_input)`` after the first four.

    Examples
    --------
    >>> [(sc, h) for _, sc, h, _ in converged_grid(ComparisonConfig(part="converged", scores=("untied", "signed")))]
    [('signed', 1), ('signed', 2), ('untied', 1), ('untied', 2)]
    >>> [(t[:7], w, h) for t, _, h, _, w, _, _ in converged_grid(ComparisonConfig(weights=("row", "symmetric"),
    ...                                                                              heads=(2,)))]
    [('cyclic ', 'symmetric', 2), ('partner', 'symmetric', 2), ('recall ', 'symmetric', 2), ('cyclic ', 'row', 2)]
    >>> [(sc, w, h) for t, sc, h, _, w, _, _ in converged_grid(ComparisonConfig(weights=("untied",), heads=(1,)))]
    [('untied', 'row', 1)]
    >>> converged_grid(ComparisonConfig(score_input="key", scores=("signed",), heads=(1,)))
    [('cyclic recall (16 pairs, cycles of 4)', 'signed', 1, False, 'row', True, 'key')]
    """
    scores, heads = config.scores or ("untied", "signed", "tied"), sorted(config.heads or (1, 2))
    if config.weights:  # "untied": ordinary attention (untied score, row softmax), no mask
        return [(t, "untied" if w == "untied" else "signed", h, False, "row" if w == "untied" else w, False,
                 config.score_input) for w in ("symmetric", "row", "untied")
                if w in config.weights for t in ((CYCLIC, PARTNER, RECALL) if w == "symmetric" else (CYCLIC,))
                for h in heads]
    if config.score_input == "key":
        chosen = config.scores if config.scores and len(config.scores) < 3 else ("untied", "signed")
        return [(CYCLIC, sc, h, False, "row", True, "key") for sc in ("signed", "untied") if sc in chosen for h in heads]
    return [(CYCLIC, sc, h, False) for sc in ("signed", "tied", "untied") if sc in scores for h in heads]


def _arm_order(record: Mapping) -> tuple:
    """Where a record goes in the ``converged`` file: the score arms first, then the other arms by name and task."""
    if not _is_variant(record):
        order = [(sc, h) for sc in ("signed", "tied", "untied") for h in (1, 2)]
        return (0, order.index((record["score"], record["heads"])) if (record["score"], record["heads"]) in order
                else 99, "")
    return (1, 0, f"{arm_label(record)} {record['heads']} {record['task']}")


def _keep_other_arms(doc: Mapping, previous: Mapping) -> dict:
    """Some arms of the ``converged`` part merged into the stored file: the other arms' records and metas kept.

    Examples
    --------
    >>> T = CYCLIC
    >>> old = {"meta": {"arms": {"untied 1": {"a": 1}, "signed 1": {"a": 1}}},
    ...        "runs": [{"task": T, "score": "untied", "heads": 1}, {"task": T, "score": "signed", "heads": 1}]}
    >>> new = {"meta": {"arms": {"signed 1": {"a": 2}}}, "runs": [{"task": T, "score": "signed", "heads": 1, "new": 1}]}
    >>> merged = _keep_other_arms(new, old)
    >>> [(r["score"], "new" in r) for r in merged["runs"]], merged["meta"]["arms"]
    ([('signed', True), ('untied', False)], {'untied 1': {'a': 1}, 'signed 1': {'a': 2}})
    """
    def key(r: Mapping) -> tuple:
        return r["task"], _arm_name(r)

    ran = {key(r) for r in doc["runs"]}
    runs = [r for r in previous["runs"] if key(r) not in ran] + list(doc["runs"])
    arms = {**previous.get("meta", {}).get("arms", {}), **doc["meta"]["arms"]}
    return {"meta": {"arms": arms}, "runs": sorted(runs, key=_arm_order)}


def _converged_document(config: ComparisonConfig, runs: Runs, meta: dict) -> dict:
    m = _meta(config, meta)
    return {"meta": {"arms": {_arm_name(r): m for r in runs.records}}, "runs": runs.records}


# ------------------------------------------------------------------ learning speed, checked every 10 steps
#: Steps to 0.95 measured finely: a check every 10 steps, stop at the first check >= 0.95 (from step 10), else at 3,000.
SPEED_RULE = ConvergenceRule(check_every=10, min_steps=10, max_steps=3000, target=SPEED_LEVEL, window=300,
                             plateau_from=10**6)


def speed_grid(config: ComparisonConfig) -> list[tuple]:
    """(task, score, heads, lr) of the ``speed`` part: untied and W_K = W_Q D at 2 heads, at both learning rates.

    Examples
    --------
    >>> [(sc, lr) for _, sc, _, lr in speed_grid(ComparisonConfig(part="speed"))]
    [('untied', 0.003), ('untied', 0.01), ('signed', 0.003), ('signed', 0.01)]
    """
    return [(CYCLIC, sc, 2, lr) for sc in ("untied", "signed") for lr in (3e-3, 1e-2)]


def _speed_job(config: ComparisonConfig, task_label: str, score: str, heads: int, lr: float) -> dict:
    """Each seed trained at ``lr`` by :data:`SPEED_RULE`: steps to the first validation check >= 0.95."""
    torch.set_num_threads(1)
    start = time.perf_counter()
    runs = [train_best(Arm(score, heads), _task(task_label), lr, seed=s, rule=SPEED_RULE)[1]
            for s in config.seed_list()]
    return {"task": task_label, "score": score, "heads": heads, "lr": lr, "seeds": list(config.seed_list()),
            "steps_to": [steps_to(r["curve"], SPEED_LEVEL, SPEED_RULE.check_every) for r in runs],
            "curves": [r["curve"] for r in runs], "rule": asdict(SPEED_RULE),
            "seconds": round(time.perf_counter() - start, 1)}


def load_speed(path=SPEED_FILE) -> dict:
    """The stored ``speed`` part: ``{"meta", "runs": [record of _speed_job, ...]}``."""
    return read_json(path)


def fine_speed(runs: Sequence[Mapping], heads: int = 2, lrs: Optional[Mapping[str, float]] = None) -> dict[str, float]:
    """r_H = mean steps to 0.95 of W_K = W_Q D over untied's, from the finely checked runs, at each shared
    learning rate and at each arm's own (``lrs``, by score).

    Examples
    --------
    >>> r = [{"score": s, "heads": 2, "lr": lr, "steps_to": n} for s, lr, n in
    ...      [("untied", 0.003, [100, 120]), ("untied", 0.01, [50, 50]), ("signed", 0.003, [240, 240]),
    ...       ("signed", 0.01, [100, 110])]]
    >>> fine_speed(r)
    {'0.003': 2.1818, '0.01': 2.1}
    >>> fine_speed(r, lrs={"untied": 0.01, "signed": 0.003})["own"]
    4.8
    """
    mean = {(r["score"], float(r["lr"])): sum(r["steps_to"]) / len(r["steps_to"]) for r in runs
            if r["heads"] == heads and None not in r["steps_to"]}
    out = {str(lr): round(mean["signed", lr] / mean["untied", lr], 4)
           for lr in sorted({lr for _, lr in mean}) if ("signed", lr) in mean and ("untied", lr) in mean}
    if lrs is not None:
        out["own"] = round(mean["signed", float(lrs["signed"])] / mean["untied", float(lrs["untied"])], 4)
    return out


def _long_jobs(config: ComparisonConfig) -> list[tuple]:
    return [g for g in long_grid(load_linear()["runs"]) if _ours(config, g[2], _task(g[0]).kwargs["n_pairs"])]


def _long_document(config: ComparisonConfig, runs: Runs, meta: dict) -> dict:
    return {"meta": _meta(config, meta), "runs": runs.records, "planned": [list(g) for g in _long_jobs(config)]}


def _keep_other_points(doc: Mapping, previous: Mapping) -> dict:
    """A part of the long rerun merged into the stored file: the records and plan of the points it did not run kept."""
    mine = {(g[2], _task(g[0]).kwargs["n_pairs"]) for g in doc["planned"]}
    kept = [r for r in previous["runs"] if (r["d_model"], r["n_pairs"]) not in mine]
    planned = [g for g in previous.get("planned", []) if (g[2], _task(g[0]).kwargs["n_pairs"]) not in mine]
    return {"meta": doc["meta"], "runs": kept + list(doc["runs"]), "planned": planned + list(doc["planned"])}


_PART = dict(description="", out_flag="--out")
#: ``insight-metric --part metric``: the learned metric on recall and the copy (minutes).
METRIC = Experiment("insight-metric", ComparisonConfig(part="metric"), _job, METRIC_FILE,
                    grid=lambda c: metric_grid(), document=_runs_document, **_PART)
#: ``insight-metric --part partner``: partner recall (about 2 minutes).
PARTNER_RECALL = replace(METRIC, out=PARTNER_FILE, grid=lambda c: partner_grid())
#: ``insight-metric --part signed``: the symmetric indefinite score on MQAR, partner recall and the copy (minutes).
SIGNED_PART = replace(METRIC, out=SIGNED_FILE, grid=lambda c: signed_grid())
#: ``insight-metric --part heads``: cyclic recall, untied and W_K = W_Q D at 1 and 2 heads (minutes).
HEADS = Experiment("insight-metric", ComparisonConfig(part="heads"), _arm_job, HEADS_FILE,
                   grid=lambda c: heads_grid(), document=_runs_document, save_each=True, **_PART)
#: ``insight-metric --part heads-tied``: cyclic recall, tied W_Q = W_K at 1 and 2 heads (minutes).
HEADS_TIED = replace(HEADS, out=HEADS_TIED_FILE, grid=lambda c: heads_grid(("tied",)))
#: ``insight-metric --part heads-other``: partner recall and MQAR, untied and W_K = W_Q D at 1 and 2 heads.
HEADS_OTHER = replace(HEADS, out=HEADS_OTHER_FILE, grid=lambda c: heads_grid(tasks=(PARTNER, RECALL)))
#: ``insight-metric --part frozen``: learned against fixed metrics, embeddings frozen and learned (minutes).
FROZEN = replace(HEADS, out=FROZEN_FILE, grid=lambda c: frozen_grid())
#: ``insight-metric --part converged``: cyclic recall, every arm to convergence (one arm a call, up to ~12 minutes).
CONVERGED_PART = replace(HEADS, config=ComparisonConfig(part="converged"), out=CONVERGED_FILE, grid=converged_grid,
                         document=_converged_document, merge=_keep_other_arms)
#: ``insight-metric --part speed``: steps to 0.95 at 2 heads, untied and W_K = W_Q D, checked every 10 steps (minutes).
SPEED_PART = Experiment("insight-metric", ComparisonConfig(part="speed"), _speed_job, SPEED_FILE, grid=speed_grid,
                        document=_runs_document, **_PART)
#: ``insight-metric --part linear``: softmax against linear attention at the widths given (minutes each),
#: merged into the file (the other widths kept).
LINEAR = Experiment("insight-metric", ComparisonConfig(part="linear"), _job, LINEAR_FILE,
                    grid=lambda c: linear_grid(c.widths, c.pairs), document=_linear_document, merge=_keep_other_widths,
                    **_PART)
#: ``insight-metric --part linear --long``: the N > d and plateau-stopped points by :data:`LONG_RULE`,
#: written after each point (a run cut short keeps what it finished) and merged with the other parts' points.
LONG = Experiment("insight-metric", ComparisonConfig(part="linear", long=True), _job, LONG_FILE, grid=_long_jobs,
                  document=_long_document, merge=_keep_other_points, save_each=True, **_PART)


def _select(config: ComparisonConfig) -> list[Experiment]:
    if config.part == "linear":
        return [LONG if config.long else LINEAR]
    return [{"metric": METRIC, "signed": SIGNED_PART, "heads": HEADS, "heads-tied": HEADS_TIED,
             "heads-other": HEADS_OTHER, "frozen": FROZEN, "converged": CONVERGED_PART,
             "speed": SPEED_PART}.get(config.part, PARTNER_RECALL)]


#: ``python -m attention_course insight-metric``: one part a call.
INSIGHT_METRIC = register(replace(
    METRIC, config=ComparisonConfig(), select=_select, parts=(PARTNER_RECALL, SIGNED_PART, HEADS, HEADS_TIED, HEADS_OTHER, FROZEN, CONVERGED_PART,
                                                        SPEED_PART, LINEAR, LONG),
    flags={"--part": dict(choices=("metric", "linear", "partner", "signed", "heads",
                                            "heads-tied", "heads-other", "frozen", "converged", "speed"),
                         required=True,
                         help="which comparison"),
           "--scores": dict(nargs="+", choices=("untied", "signed", "tied"),
                            help="converged: the score forms to run (all three when not given)"),
           "--heads": dict(type=int, nargs="+", choices=(1, 2), help="converged: the head counts (1 2 when not given)"),
           "--weights": dict(nargs="+", choices=("symmetric", "row", "untied"),
                             help="converged: W_K = W_Q D with no mask, symmetric weights (also on partner recall and "
                                  "MQAR) or row softmax, on cyclic recall; untied: an untied score's row softmax, "
                                  "no mask"),
           "--score-input": dict(choices=("token", "key"), default="token",
                                 help="converged: what the score reads, the whole token or the key embedding only"),
           "--long": dict(action="store_true", help="linear: rerun the N > d and plateau-stopped points by LONG_RULE "
                                                    "into insight_linear_long.json"),
           "--widths": dict(type=int, nargs="+", help="d_model of the linear part"),
           "--pairs": dict(type=int, nargs="+", help="N of the linear part"),
           "--seeds": dict(type=int, nargs="+", help="0 1 2 (metric, partner, signed, heads, frozen) or 0 1 (linear) when not given")},
    help="chapter 7's converged runs: the learned metric, and softmax against linear attention as N grows",
    description="Train each variant by a stated convergence rule: --part metric (learned W_Q, W_K against W_Q = W_K "
                "= I and tied, all with a learnable score scale started at 1/sqrt(d), on recall and the copy; "
                "attention_course/data/insight_metric.json) or --part linear (softmax and linear attention on MQAR "
                "with N = 8-64 pairs at the --widths given; attention_course/data/insight_linear.json, updated per "
                "width; minutes each); --part partner (partner recall, where a key fetches its partner's value; "
                "insight_partner.json, about 2 minutes); "
                "--part signed (W_K = W_Q D on MQAR, partner recall and the copy; "
                "insight_signed.json, minutes); --part heads, heads-tied, heads-other (cyclic recall, then partner recall "
                "and MQAR, at 1 head of 64 and 2 heads of 32, up to 12,000 steps, best validation check kept; "
                "insight_heads*.json); --part converged (cyclic recall, every arm until converged, up to 48,000 steps, one arm a "
                "call with --scores and --heads; insight_converged.json; with --weights symmetric row, symmetric weights "
                "against row softmax of the same symmetric score, no mask; with --score-input key, scores that read the "
                "key embedding only); --part speed (steps to 0.95 at 2 heads, checked every 10 steps; "
                "insight_speed.json); --part frozen (learned against fixed metrics, embeddings frozen and learned, "
                "up to 4,000 steps; insight_frozen.json); --part linear --long (the N > d and plateau-stopped points "
                "again, up to 4,000 steps; insight_linear_long.json, written per point; run it in parts, each "
                "keeping the others' records: --widths 16, then --widths 32 (8 and 10 minutes on one thread), then "
                "--widths 64 (4 minutes on a quiet machine; or in two parts, --pairs 8 32 and --pairs 64, on a busy "
                "one))."))
