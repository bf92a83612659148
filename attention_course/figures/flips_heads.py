r"""Chapter 4's flip slider: how strict must "one clear job" be before no head has one?

The verdict ``head-relations`` holds *when a head has one clear job*. A head's score for a role
(:func:`attention_course.lenses.roles.head_role_scores`) is the mean share of a word's weight on
the role's target: the previous token, the next token, the punctuation marks (relations), or
``[CLS]`` and ``[SEP]`` (the parking spots). The slider moves the threshold :math:`t` above which
a head counts as doing that job and shows, for each role, how many of the 72 heads clear it,

.. math::

    N_r(t) = \#\{(\ell, h) : s_r(\ell, h) > t\},

against what uniform attention clears: it scores the chance level :math:`c_r` (one key in
:math:`n`, or the share of punctuation) on every head, so it clears all 72 below :math:`c_r` and
none above. The flags sit where a role's count falls to uniform attention's 0
(:func:`~attention_course.lenses.roles.clear_job_flips`); the verdict flips where the last
relation does (:func:`~attention_course.lenses.roles.last_relation_flip`). The counts and flags
come from :mod:`attention_course.lenses.roles`; this module only reads the stored scores and draws.

The role ``broad`` (row entropy over :math:`\log n`) is left out: uniform attention scores 1 on
it, so a "clear" broad head is one with no particular job.

MiniLM's maps are float32 and differ in their last bits across CPUs, so the scores are stored
(:data:`ROLES_DATA`, written by :func:`attention_course.experiments.flip_data.role_scores_data`)
and the figure's HTML is the same on every machine.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Optional

import numpy as np

from ..lenses.roles import PARKING, RELATIONS, clear_job_counts, clear_job_flips, last_relation_flip
from .interactive import _FONT, _fallback
from .style import role_color
from .widgets import SliderFigure

__all__ = ["ROLES_DATA", "load_role_scores", "clear_job_explorer"]

#: The five sentences' role scores of chapter 4 (regenerate:
#: ``python -c "from attention_course.experiments import flip_data as f; f.write_role_scores()"``;
#: the texts are those of the chapter's role-score cell).
ROLES_DATA = Path(__file__).resolve().parents[1] / "data" / "flips_ch4_roles.json"
_SHORT = {"previous token": "previous", "next token": "next", "punctuation": "punctuation",
          "[CLS]": "[CLS]", "[SEP]": "[SEP]"}


def load_role_scores(path: Path = ROLES_DATA) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """The stored ``(scores, chance)``: role -> (layers, heads) array, role -> chance level.

    Examples
    --------
    >>> scores, chance = load_role_scores()
    >>> scores["[CLS]"].shape, round(chance["previous token"], 3)
    ((6, 12), 0.055)
    """
    with open(path, encoding="utf-8") as f:
        d = json.load(f)
    return {r: np.asarray(v, dtype=float) for r, v in d["scores"].items()}, dict(d["chance"])


def clear_job_explorer(scores: Optional[Mapping[str, np.ndarray]] = None,
                       chance: Optional[Mapping[str, float]] = None,
                       thresholds: Optional[Sequence[float]] = None) -> SliderFigure:
    r"""Chapter 4: move the threshold for "one clear job" and count the heads of each role.

    Each frame shows the 72 heads' scores per role (dots; coloured when above :math:`t`) with
    the threshold and each role's chance level, and the counts :math:`N_r(t)`
    (:func:`~attention_course.lenses.roles.clear_job_counts`) as bars beside uniform attention's.
    A flag marks each role's :func:`~attention_course.lenses.roles.clear_job_flips` index; the one
    of the last relation carries the verdict.

    Parameters
    ----------
    scores, chance : role -> (layers, heads) array and role -> float; default the stored
        :data:`ROLES_DATA` (:func:`load_role_scores`).
    thresholds : increasing values in (0, 1]; default 0.05, 0.10, ..., 1.00.

    Examples
    --------
    >>> fig = clear_job_explorer()
    >>> fig.labels[fig.start], fig.verdict, fig.labels[fig.flip]
    ('t = 0.5', 'head-relations', 't = 1')
    """
    if scores is None or chance is None:
        scores, chance = load_role_scores()
    thresholds = [round(0.05 * i, 2) for i in range(1, 21)] if thresholds is None else list(thresholds)
    if any(b <= a for a, b in zip(thresholds, thresholds[1:])):
        raise ValueError(f"thresholds {thresholds} must increase")
    roles = [r for r in RELATIONS + PARKING if r in scores]
    relations = [r for r in RELATIONS if r in scores]
    if not relations:
        raise ValueError(f"scores has roles {sorted(scores)}; expected at least one of {RELATIONS}")
    counts = clear_job_counts({r: scores[r] for r in roles}, chance, thresholds)
    flips = clear_job_flips(counts, roles)
    n_heads = int(np.asarray(scores[roles[0]]).size)
    names = [_SHORT.get(r, r) for r in roles]
    # Dots: each role's heads spread across its slot in a fixed order (head index), not at random.
    spread = np.linspace(-0.3, 0.3, n_heads)  # (L * H,)
    frames = []
    for i, t in enumerate(thresholds):
        traces = []
        for j, role in enumerate(roles):
            s = np.asarray(scores[role], dtype=float).ravel()  # (L * H,)
            for above, color in ((s > t, role_color(role)), (s <= t, "#BBBBBB")):  # clears t, or not
                traces.append({"type": "scatter", "mode": "markers", "x": (j + spread)[above], "y": s[above],
                               "showlegend": False, "marker": {"size": 5, "color": color},
                               "hovertemplate": f"{html.escape(role)}: %{{y:.3f}}<extra></extra>",
                               "xaxis": "x", "yaxis": "y"})
        traces.append({"type": "scatter", "mode": "markers", "x": list(range(len(roles))),
                       "y": [chance[r] for r in roles], "name": "uniform attention's score",
                       "marker": {"symbol": "line-ew-open", "size": 26, "color": "#000000", "line": {"width": 2}},
                       "xaxis": "x", "yaxis": "y"})
        traces.append({"type": "scatter", "mode": "lines", "x": [-0.5, len(roles) - 0.5], "y": [t, t],
                       "name": "threshold t", "line": {"color": "#000000", "dash": "dash"}, "xaxis": "x", "yaxis": "y"})
        traces.append({"type": "bar", "x": names, "y": [int(counts[r][i]) for r in roles], "name": "MiniLM heads",
                       "marker": {"color": [role_color(r) for r in roles]}, "xaxis": "x2", "yaxis": "y2",
                       "text": [str(int(counts[r][i])) for r in roles], "textposition": "outside"})
        traces.append({"type": "bar", "x": names, "y": [int(counts[f"uniform {r}"][i]) for r in roles],
                       "name": "uniform attention", "marker": {"color": "rgba(0,0,0,0)",
                                                              "line": {"color": "#000000", "width": 1.5}},
                       "xaxis": "x2", "yaxis": "y2"})
        rel = sum(int(counts[r][i]) for r in relations)
        frames.append({"data": traces, "readout": (
            f"Threshold t = {t:g}: heads with more than t of a word's weight on the target: "
            + ", ".join(f"{html.escape(r)} {int(counts[r][i])}" for r in roles)
            + f" (of {n_heads}); a clear relation for {rel} head{'s' if rel != 1 else ''}. Uniform attention scores "
            + ", ".join(f"{chance[r]:.2f}" for r in roles) + " on these roles, so it clears "
            + (f"{sum(int(counts[f'uniform {r}'][i] > 0) for r in roles)} of them." if t < max(chance[r] for r in roles)
               else "none of them."))})
    layout = {"height": 620, "margin": {"l": 55, "r": 10, "t": 10, "b": 30}, "font": _FONT, "barmode": "group",
              "xaxis": {"domain": [0, 1], "tickvals": list(range(len(roles))), "ticktext": names,
                        "range": [-0.5, len(roles) - 0.5], "showgrid": False, "zeroline": False},
              "yaxis": {"domain": [0.58, 1], "range": [0, 1.05], "title": {"text": "role score"}},
              "xaxis2": {"domain": [0, 1], "anchor": "y2"},
              "yaxis2": {"domain": [0, 0.3], "anchor": "x2", "range": [0, n_heads * 1.15],
                         "title": {"text": "heads above t"}},
              "legend": {"orientation": "h", "y": 0.52, "yanchor": "top", "x": 0}}
    last_rel, main = last_relation_flip(flips, relations)
    start = int(np.argmin(np.abs(np.asarray(thresholds) - 0.5)))  # the chapter's line: more than half
    marks = [(flips[r], f"no {r} head clears t any more, as under uniform attention") for r in roles
             if r != last_rel and flips[r] is not None and flips[r] > start]  # roles with a clear job at 0.5

    def draw(fig, ax):
        for r in roles:
            ax.plot(thresholds, counts[r], "o-", ms=3, color=role_color(r), label=r)
        ax.axvline(thresholds[start], color="0.5", ls=":")
        for i in sorted({i for i in (main, *(i for i, _ in marks)) if i is not None}):
            ax.axvline(thresholds[i], color="0.7", lw=1)  # the flags
        ax.set_yscale("symlog", linthresh=1)
        ax.set(xlabel="threshold t on the role score", ylabel="heads above t", ylim=(0, 1.2 * n_heads),
               title="Heads with one clear job, as the bar rises")
        ax.legend(ncols=2)

    return SliderFigure("ix-heads-clearjob", "How clear must a head's job be?",
                        [f"t = {t:g}" for t in thresholds], frames, layout, _fallback(draw),
                        "Number of MiniLM heads whose score for each role exceeds a threshold, falling as the "
                        "threshold rises; the previous-token head clears every threshold below 1.",
                        start=start, control_label="threshold t for a clear job",
                        flip=main, flip_note=(f"no head has a clear relation any more (the last, {last_rel}, "
                                              "drops out): as under uniform attention, and the verdict's "
                                              "'as some do' fails") if main is not None else "",
                        more_flips=marks, verdict="head-relations")
