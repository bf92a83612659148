"""The agreement figures: the best non-sink head of each model against the rules, and the decision against its thresholds."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ...figures.style import book_figure, role_color
from .agreement import agreement_verdict, model_decision

__all__ = ["plot_agreement", "plot_agreement_sweep", "sweep_changes", "sweep_verdicts", "MEANING_BARS", "MEANING_SWEEPS"]

#: The bars of :func:`plot_agreement`: (key of a held-out split, label, role colour).
_BARS = (("head_share", "best head → subject", "previous token"),
         ("head_share_plural", "  plural subjects", "next token"),
         ("head_share_singular", "  singular subjects", "next token"),
         ("position_share", "fixed position", "punctuation"), ("offset_share", "fixed offset", "other"),
         ("nearest_share", "nearest noun", "broad"), ("first_share", "first noun", "[CLS]"),
         ("other_share", "head → nearest other noun", "[SEP]"), ("first_other_share", "head → first noun", "[SEP]"))
#: The bars of the meaning arm (head-relations): from Q, the earlier near-synonym T.
MEANING_BARS = (("head_share", "best head → T", "previous token"),
                ("position_share", "fixed position", "punctuation"), ("offset_share", "fixed offset", "other"),
                ("nearest_share", "nearest noun", "broad"), ("first_share", "first noun", "[CLS]"),
                ("pair_share", "head → T from unrelated U", "next token"),
                ("other_share", "head → nearest other noun", "[SEP]"), ("first_other_share", "head → first noun", "[SEP]"))


def _name(model: str, head: int) -> str:
    per_layer = 12 if model == "MiniLM" else 9
    return f"L{head // per_layer + 1} H{head % per_layer + 1}"


@book_figure
def plot_agreement(run: Mapping, level: float = 0.5, margin: float = 0.2, key: str = "crossed",
                   bars: Sequence = _BARS, title: str = "From the verb, is the heaviest word the subject?",
                   xlabel: str = "held-out share of crossed sentences") -> Figure:
    """Held-out share of crossed sentences whose verb's heaviest word is the subject, one panel per model.

    Bars: means over the random halves (the head, the rules, the head on other nouns, the scrambled copy);
    dots: single halves. Dotted: ``level``; dashed: the best position rule plus ``margin``. ``key``: the set
    each model's record (and its ``"scrambled"`` one) holds; ``bars``: (split key, label, role colour), a bar
    drawn when the splits have its key (:data:`MEANING_BARS` for head-relations' ``"meaning"`` set).

    Examples
    --------
    >>> sp = {"head": 0, "head_share": 0.9, "offset_share": 0.3, "position_share": 0.3, "other_share": 0.1}
    >>> rec = {"crossed": {"splits": [sp]}, "scrambled": {"crossed": {"splits": [sp]}}}
    >>> fig = plot_agreement({"models": {"MiniLM": rec}}, margin=0.2)
    >>> [ax.get_title() for ax in fig.axes]
    ['MiniLM, picked L1 H1']
    """
    models = list(run["models"])
    fig, axes = plt.subplots(len(models), 1, figsize=(6.8, 0.9 + 2.5 * len(models)), layout="constrained",
                             sharex=True, squeeze=False)
    for ax, model in zip(axes[:, 0], models):
        rec = run["models"][model]
        splits, scrambled = rec[key]["splits"], rec["scrambled"][key]["splits"]
        shown = [(f, lab, role_color(c), splits) for f, lab, c in bars if f in splits[0]]
        shown.append(("head_share", "scrambled W_Q, W_K: best head", role_color("[CLS]"), scrambled))
        for i, (field, _, color, sp) in enumerate(shown):
            vals = np.array([s[field] for s in sp])
            ax.barh(i, vals.mean(), color=color, alpha=0.85)
            ax.plot(vals, np.full(len(vals), i), "o", ms=3.5, color="black")
        position = max(np.mean([s[f] for s in splits]) for f in ("offset_share", "position_share"))
        ax.axvline(level, color="0.3", ls=":")
        ax.axvline(position + margin, color="black", ls="--", lw=1)
        ax.set_yticks(range(len(shown)), [lab for _, lab, _, _ in shown])
        ax.invert_yaxis()
        heads = ", ".join(sorted({_name(model, s["head"]) for s in splits}))
        ax.set(title=f"{model}, picked {heads}", xlim=(0, 1))
    axes[-1, 0].set_xlabel(xlabel)
    fig.suptitle(title, fontsize=11.5)
    return fig


#: The thresholds the page sweeps: (keyword of :func:`agreement_verdict`, label, values, pre-registered value).
SWEEPS = (("level", "level", (0.3, 0.4, 0.5, 0.6, 0.7, 0.8), 0.5),
          ("margin", "margin over the rules", (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4), 0.2),
          ("sink_threshold", "sink threshold", (0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7), 0.5))
_VERDICTS = ("undecided", "holds when", "holds")


#: The meaning arm's thresholds (head-relations): level and margin, as :data:`SWEEPS`.
MEANING_SWEEPS = SWEEPS[:2]


def sweep_verdicts(run: Mapping, sweeps: Sequence = SWEEPS, verdict: Callable[..., Mapping] = agreement_verdict) -> dict:
    """The verdict at each swept value of each threshold, the others at their pre-registered values.

    ``verdict(run, **{keyword: value})`` gives the verdict (default agreement-head's). Returns ``{keyword:
    [(value, verdict), ...]}`` and, when the sink threshold is swept, under ``"no sink exclusion"`` the
    verdict when every head may be picked.
    """
    out = {key: [(v, verdict(run, **{key: v})["verdict"]) for v in values] for key, _, values, _ in sweeps}
    if any(key == "sink_threshold" for key, *_ in sweeps):
        out["no sink exclusion"] = verdict(run, sink_threshold=None)["verdict"]
    return out


def sweep_changes(data: Mapping, sweeps: Sequence = SWEEPS) -> str:
    """Where the swept verdict differs from the one at the values set in advance, in words.

    Examples
    --------
    >>> data = {"margin": [(0.0, "holds"), (0.1, "holds"), (0.2, "holds when"), (0.3, "undecided")],
    ...         "no sink exclusion": "holds when"}
    >>> sweep_changes(data, (("margin", "margin over the rules", (0.0, 0.1, 0.2, 0.3), 0.2),))
    'margin over the rules 0 to 0.1: holds; 0.3: undecided'
    """
    parts = []
    for key, label, values, chosen in sweeps:
        base = dict(data[key])[chosen]
        runs: list = []  # [first, last, verdict] of consecutive values with one verdict
        for v, verdict in data[key]:
            if runs and runs[-1][2] == verdict:
                runs[-1][1] = v
            else:
                runs.append([v, v, verdict])
        diff = [(f"{a:g}" if a == b else f"{a:g} to {b:g}") + f": {verdict}" for a, b, verdict in runs if verdict != base]
        if diff:
            parts.append(f"{label} " + "; ".join(diff))
        if "no sink exclusion" in data and key == "sink_threshold" and data["no sink exclusion"] != base:
            parts.append(f"no sink exclusion: {data['no sink exclusion']}")
    return "; ".join(parts) or "nowhere"


@book_figure
def plot_agreement_sweep(run: Mapping, sweeps: Sequence = SWEEPS, verdict: Callable[..., Mapping] = agreement_verdict) -> Figure:
    """The verdict against each threshold of the rule (the others at their pre-registered values), and the
    deciding shares against the margin: one panel per threshold. ``verdict``: as :func:`sweep_verdicts`.

    Examples
    --------
    >>> fig = plot_agreement_sweep({"config": {}, "models": {}}, sweeps=(("level", "level", (0.4, 0.5), 0.5),))
    >>> [ax.get_xlabel() for ax in fig.axes]
    ['level']
    """
    data = sweep_verdicts(run, sweeps, verdict)
    fig, axes = plt.subplots(1, len(sweeps), figsize=(6.8, 2.4), layout="constrained", sharey=True, squeeze=False)
    for ax, (key, label, values, chosen) in zip(axes[0], sweeps):
        ys = [_VERDICTS.index(v) for _, v in data[key]]
        ax.step(values, ys, where="mid", color=role_color("previous token"), lw=2)
        ax.plot(values, ys, "o", ms=4, color=role_color("previous token"))
        ax.axvline(chosen, color="0.3", ls=":")
        ax.set(xlabel=label, ylim=(-0.4, 2.4))
        ax.set_yticks(range(3), _VERDICTS)
    fig.suptitle("The verdict against each threshold (dotted: the value fixed in advance)", fontsize=11)
    return fig
