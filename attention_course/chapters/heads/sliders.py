r"""Chapter 4's interactive figures: the "one clear job" threshold, the agreement sets, every MiniLM head, focus.

Each reads stored numbers (MiniLM's float32 maps differ in their last bits across CPUs), so the
figures' HTML is the same on every machine. The role ``broad`` is left out of the clear-job slider:
uniform attention scores 1 on it.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from ...figures.predictions import verdict_href
from ...figures.style import role_color
from ...figures.widgets import PLOTLY_AXIS, PLOTLY_FONT, PickerFigure, SliderFigure, static_fallback
from ...models.pretrained import attention_maps, minilm_weights
from ...models.records import DATA_DIR
from ..lowrank import focus as lowrank_focus
from ..lowrank.spectra import (
    effective_rank,
)
from ..mechanics.properties import effective_keys, row_entropy
from .roles import (
    PARKING,
    RELATIONS,
    ROLES,
    clear_job_counts,
    clear_job_flips,
    head_role_scores,
    last_relation_flip,
)
from .agreement import load_agreement, set_decision
from .roles import ROLES_DATA
from .subspaces import smallest_head_angles

__all__ = [
    "clear_job_explorer", "agreement_explorer", "stored_head_explorer", "minilm_head_explorer",
    "sentence_maps", "focus_explorer",
]

#: The roles' short names on the bars.
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

    Each frame: the heads' scores per role against :math:`t` and the chance level, and the counts
    :math:`N_r(t) = \#\{(\ell, h) : s_r(\ell, h) > t\}` beside uniform attention's. Flags: where each
    role's count falls to 0; the last relation's carries the verdict.
    ``scores``, ``chance`` default to the stored ones; ``thresholds`` increase (default 0.05, ..., 1.00).

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
    layout = {"height": 620, "margin": {"l": 55, "r": 10, "t": 10, "b": 30}, "font": PLOTLY_FONT, "barmode": "group",
              "xaxis": {"domain": [0, 1], "tickvals": list(range(len(roles))), "ticktext": names,
                        "range": [-0.5, len(roles) - 0.5], "showgrid": False, "zeroline": False},
              "yaxis": {"domain": [0.58, 1], "range": [0, 1.05], "title": {"text": "role score"}},
              "xaxis2": {"domain": [0, 1], "anchor": "y2"},
              "yaxis2": {"domain": [0, 0.3], "anchor": "x2", "range": [0, n_heads * 1.15],
                         "title": {"text": "heads above t"}},
              # below the role names, which a phone draws rotated down to y = 0.45
              "legend": {"orientation": "h", "y": 0.42, "yanchor": "top", "x": 0}}
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
                        [f"t = {t:g}" for t in thresholds], frames, layout, static_fallback(draw),
                        "Number of MiniLM heads whose score for each role exceeds a threshold, falling as the "
                        "threshold rises; the previous-token head clears every threshold below 1.",
                        start=start, control_label="threshold t for a clear job",
                        flip=main, flip_note=(f"no head has a clear relation any more (the last, {last_rel}, "
                                              "drops out): as under uniform attention, and the verdict's "
                                              "'as some do' fails") if main is not None else "",
                        more_flips=marks, verdict="head-relations")


#: The agreement run's sentence sets in slider order: (key, label, what stands between subject and verb).
AGREEMENT_SETS = (("plain", "0 nouns between", "no noun between subject and verb; the subject is the only noun"),
                  ("attractor", "1 noun between", "one noun of the other number between; the subject is the first noun"),
                  ("crossed", "1 between, 1 before", "one noun between and one before the subject; it is neither "
                                                     "the first nor the nearest noun"))

_AG_BARS = (("head_share", "best head → subject", "previous token"), ("offset_share", "fixed offset", "other"),
            ("position_share", "fixed position", "punctuation"), ("nearest_share", "nearest noun", "next token"),
            ("first_share", "first noun", "[CLS]"), ("other_share", "head → nearest other noun", "[SEP]"),
            ("first_other_share", "head → first noun", "[SEP]"))


def agreement_explorer(run: Optional[Mapping] = None, level: float = 0.5, margin: float = 0.2,
                       model: str = "SmolLM2") -> SliderFigure:
    r"""Chapter 4: move across the agreement sets (:data:`AGREEMENT_SETS`), the head against the rules.

    Each frame: the held-out shares (mean over the splits) with the level and the best position rule
    plus the margin; the flag sits at the first set where the head no longer beats the position rules.
    ``run`` is one model's record (default: ``model``'s in the stored run).

    Examples
    --------
    >>> fig = agreement_explorer()
    >>> fig.labels, fig.verdict, fig.labels[fig.flip]
    (['0 nouns between', '1 noun between', '1 between, 1 before'], 'agreement-head', '1 noun between')
    """
    run = load_agreement()["models"][model] if run is None else run
    sets = [s for s in AGREEMENT_SETS if s[0] in run]
    if not sets:
        raise ValueError(f"run has keys {sorted(run)}; expected at least one of {[s[0] for s in AGREEMENT_SETS]}")
    frames, decisions = [], []
    for key, label, what in sets:
        splits = run[key]["splits"]
        d = set_decision(splits, level=level, margin=margin)
        decisions.append(d)
        shown = [b for b in _AG_BARS if b[0] in splits[0]]
        means = [float(np.mean([sp[f] for sp in splits])) for f, _, _ in shown]
        names = [n for _, n, _ in shown]
        traces = [{"type": "bar", "orientation": "h", "x": means, "y": names, "name": "mean over splits",
                   "marker": {"color": [role_color(c) for _, _, c in shown]}, "showlegend": False,
                   "text": [f"{m:.3f}" for m in means], "textposition": "outside",
                   "hovertemplate": "%{y}: %{x:.3f}<extra></extra>"},
                  {"type": "scatter", "mode": "markers", "name": "single splits",
                   "x": [sp[f] for f, _, _ in shown for sp in splits],
                   "y": [n for _, n, _ in shown for _ in splits], "marker": {"size": 6, "color": "#000000"}},
                  {"type": "scatter", "mode": "lines", "name": f"level {level:g}", "x": [level, level],
                   "y": [names[0], names[-1]], "line": {"color": "#555555", "dash": "dot"}},
                  {"type": "scatter", "mode": "lines", "name": f"best position rule + {margin:g}",
                   "x": [d["position"] + margin] * 2, "y": [names[0], names[-1]],
                   "line": {"color": "#000000", "dash": "dash"}}]
        content = "" if np.isnan(d["content"]) else f", the better content rule {d['content']:.3f}"
        frames.append({"data": traces, "readout": (
            f"{html.escape(label)} ({html.escape(what)}): the head picked on half the sentences puts the verb's top "
            f"weight on the subject in {d['head']:.3f} of the other half; the better position rule {d['position']:.3f}"
            f"{content}; the head lands on another noun in {d['other']:.3f}. It "
            + ("beats" if d["beats_position"] else "does not beat")
            + f" the position rules (at least {level:g} and {margin:g} above them)"
            + ("" if np.isnan(d["content"]) else
               (", and passes the rule against all four" if d["passes"] else
                ", but does not pass the rule against all four rules and the other nouns")) + ".")})
    flip = next((i for i, d in enumerate(decisions) if i and decisions[i - 1]["beats_position"] != d["beats_position"]),
                None)
    layout = {"height": 430, "margin": {"l": 170, "r": 20, "t": 10, "b": 40}, "font": PLOTLY_FONT,
              "xaxis": {**PLOTLY_AXIS, "range": [0, 1.15], "title": {"text": "held-out share of verbs"}},
              "yaxis": {**PLOTLY_AXIS, "autorange": "reversed"},
              "legend": {"orientation": "h", "y": -0.2, "yanchor": "top", "x": 0}}

    def draw(fig, ax):
        x = np.arange(len(sets))
        for field, name, c in _AG_BARS[:5]:
            ax.plot(x, [np.mean([sp[field] for sp in run[k]["splits"]]) if field in run[k]["splits"][0] else np.nan
                        for k, _, _ in sets], "o-", color=role_color(c), label=name)
        ax.axhline(level, color="0.3", ls=":")
        if flip is not None:
            ax.axvline(flip, color="0.7", lw=1)
        ax.set_xticks(x, [lab for _, lab, _ in sets])
        ax.set(ylim=(-0.05, 1.05), xlim=(-0.45, len(sets) - 0.4), ylabel="held-out share of verbs",
               title="From the verb, is the heaviest word the subject?")
        ax.legend(fontsize=8, ncols=3, loc="upper center", bbox_to_anchor=(0.5, -0.12))

    note = ""
    if flip is not None:
        note = (f"the head no longer beats the position rules ({decisions[flip]['head']:.3f} against "
                f"{decisions[flip]['position']:.3f}); before, it did, where the nearest-noun rule also finds "
                "the subject")
    return SliderFigure("ix-heads-agreement", "Nouns between subject and verb", [lab for _, lab, _ in sets], frames,
                        layout, static_fallback(draw, (6.4, 3.8)), "Held-out share of verbs whose heaviest word is the subject, "
                        f"for the selected {model} head and four fixed rules, across three sentence sets.",
                        start=0, control_label="nouns between subject and verb", flip=flip, flip_note=note,
                        verdict="agreement-head")


#: The sentence of the head explorer: repeated words (the, cat), punctuation, two clauses.
EXPLORER_SENTENCE = "The cat sat on the mat, and then the cat slept."


#: MiniLM's maps for it, stored: float32 forward passes differ in their last bits across CPUs,
#: and the figure's HTML must be the same on every machine (nbval compares it).
EXPLORER_DATA = DATA_DIR / "head_explorer.json"


# ------------------------------------------------------------------ chapters 4, 5, 7
def head_explorer_data(text: str = EXPLORER_SENTENCE, digits: int = 4) -> dict:
    """MiniLM's attention maps for ``text``, rounded to ``digits`` decimals (what is stored).

    Returns ``{"text", "tokens", "maps" (6, 12, n, n), "query_angle" (6, 12)}``: each head's smallest
    angle (degrees) to another query subspace of its layer. Stored with ``json.dump`` at :data:`EXPLORER_DATA`.
    """
    tokens, maps = attention_maps(text)  # maps: (6, 12, n, n)
    w = minilm_weights().to(torch.float64)
    angles = [np.degrees(smallest_head_angles(L.W_q, w.num_heads)) for L in w.layers]  # 6 x (12, 12)
    nearest = [np.where(np.eye(len(a), dtype=bool), np.inf, a).min(axis=1) for a in angles]  # 6 x (12,)
    return {"text": text, "tokens": list(tokens), "maps": np.round(maps, digits).tolist(),
            "query_angle": np.round(np.stack(nearest), 2).tolist()}


def stored_head_explorer(start: tuple[int, int] = (0, 0), path: Path = EXPLORER_DATA,
                         lesson: bool = False) -> PickerFigure:
    """:func:`head_explorer` on the stored sentence, with the stored query-subspace angles; for a
    ``lesson``, each head's map and row measures only (no subspace angle, no links to verdicts).

    Examples
    --------
    >>> stored_head_explorer(start=(1, 5)).labels[17]
    'layer 2, head 6'
    """
    with open(path, encoding="utf-8") as f:
        d = json.load(f)
    return head_explorer(np.asarray(d["maps"], dtype=float), d["tokens"], start=start,
                         query_angle=None if lesson else np.asarray(d["query_angle"], dtype=float),
                         verdict_links=not lesson)


def load_head_explorer_data(path: Path = EXPLORER_DATA) -> tuple[list[str], np.ndarray]:
    """The stored ``(tokens, maps)`` of :data:`EXPLORER_SENTENCE`; maps shape (6, 12, n, n).

    Examples
    --------
    >>> tokens, maps = load_head_explorer_data()
    >>> tokens[:3], maps.shape[:2], bool(np.allclose(maps.sum(-1), 1, atol=1e-3))
    (['[CLS]', 'the', 'cat'], (6, 12), True)
    """
    with open(path, encoding="utf-8") as f:
        d = json.load(f)
    return d["tokens"], np.asarray(d["maps"], dtype=float)


def minilm_head_explorer(layer: int = 1, head: int = 1) -> PickerFigure:
    """Every MiniLM head on the explorer's sentence, opened at ``layer`` and ``head``, both counted
    from 1 as the lesson's text counts them (:func:`stored_head_explorer` counts from 0).

    Examples
    --------
    >>> fig = minilm_head_explorer(layer=2, head=6)
    >>> fig.labels[fig.start]
    'layer 2, head 6'
    >>> minilm_head_explorer(layer=0)
    Traceback (most recent call last):
    ...
    ValueError: layer 0 and head 1 are counted from 1; expected 1 <= layer <= 6 and 1 <= head <= 12
    """
    if not (1 <= layer <= 6 and 1 <= head <= 12):
        raise ValueError(f"layer {layer} and head {head} are counted from 1; expected 1 <= layer <= 6 and 1 <= head <= 12")
    return stored_head_explorer(start=(layer - 1, head - 1))


def sentence_maps() -> tuple[list[str], np.ndarray]:
    """MiniLM's attention maps of the explorer's sentence, :data:`EXPLORER_SENTENCE`: ``(tokens, maps)``
    with ``maps`` of shape (6 layers, 12 heads, n, n), rows the queries (as :func:`load_head_explorer_data`).

    Examples
    --------
    >>> tokens, maps = sentence_maps()
    >>> maps.shape[:2], maps.shape[2] == len(tokens)
    ((6, 12), True)
    """
    return load_head_explorer_data()


#: The verdicts the explorer's numbers bear on, each linked to its box (wherever the ledger puts it).
_CLAIM_LINKS = (("heads-specialise", "heads specialise (ch. 4)"),
                ("different-subspaces", "different subspaces (ch. 4)"),
                ("low-rank-real", "low rank in a trained model (ch. 3)"),
                ("learned-topology", "a learned graph (ch. 5)"),
                ("content-not-position", "content, not position (ch. 7)"))


def head_explorer(maps: np.ndarray, tokens: Sequence[str], start: tuple[int, int] = (0, 0),
                  query_angle: Optional[np.ndarray] = None, verdict_links: bool = True) -> PickerFigure:
    r"""Chapters 4, 5, 7: every MiniLM head on one sentence, with the course's measurements.

    ``maps`` (layers, heads, n, n) for ``tokens``; ``query_angle`` (layers, heads), optional, in degrees;
    ``verdict_links`` ends each readout with links to the verdicts. Each readout gives the head's row
    entropy, effective rank, strongest role and keys holding 80% of a row's weight.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> maps = rng.dirichlet(np.ones(4), size=(2, 3, 4))  # (2, 3, 4, 4)
    >>> fig = head_explorer(maps, ["[CLS]", "a", "b", "[SEP]"])
    >>> len(fig.frames), fig.labels[-1]
    (6, 'layer 2, head 3')
    """
    maps = np.asarray(maps, dtype=float)
    if maps.ndim != 4 or maps.shape[2] != maps.shape[3] or maps.shape[3] != len(tokens):
        raise ValueError(f"maps has shape {maps.shape}; expected (layers, heads, n, n) with n = len(tokens) "
                         f"= {len(tokens)}")
    L, H, n, _ = maps.shape
    scores = head_role_scores(maps, tokens)  # role -> (L, H)
    toks = [f"{i}:{t}" for i, t in enumerate(tokens)]
    links = " · ".join(f'<a href="{verdict_href(claim)}">{html.escape(text)}</a>' for claim, text in _CLAIM_LINKS)
    frames, labels = [], []
    for l in range(L):
        for h in range(H):
            A = maps[l, h]
            role = max(ROLES, key=lambda r: scores[r][l, h])
            frames.append({
                "data": [{"type": "heatmap", "z": A, "x": toks, "y": toks, "zmin": 0, "zmax": float(maps[l, h].max()),
                          "colorscale": "Viridis", "colorbar": {"title": {"text": "weight"}},
                          "hovertemplate": "%{y} attends to %{x}: %{z:.3f}<extra></extra>"}],
                "readout": (f"Layer {l + 1}, head {h + 1}: mean row entropy {row_entropy(A).mean():.2f} nats "
                            f"(uniform {np.log(n):.2f}); effective rank {float(effective_rank(A)):.1f} of {n}; "
                            f"strongest role <b style=\"color:{role_color(role)}\">{html.escape(role)}</b> "
                            f"({scores[role][l, h]:.2f} of a row's weight); 80% of a row's weight on "
                            f"{np.mean([len(keys) for keys in effective_keys(A)]):.1f} keys on average"
                            + ("" if query_angle is None else
                               f"; its query subspace is {query_angle[l, h]:.1f}° from the nearest other "
                               f"head's in its layer (0° = a shared direction)")
                            + (f".<br>Bears on: {links}" if verdict_links else ".")),
            })
            labels.append(f"layer {l + 1}, head {h + 1}")
    layout = {"height": 520, "margin": {"l": 80, "r": 10, "t": 10, "b": 80}, "font": PLOTLY_FONT,
              "xaxis": {**PLOTLY_AXIS, "title": {"text": "key"}, "tickangle": -45},
              "yaxis": {**PLOTLY_AXIS, "autorange": "reversed", "title": {"text": "query"}}}
    i0 = start[0] * H + start[1]

    def draw(fig, ax):
        im = ax.imshow(maps[start], vmin=0)
        ax.set(xticks=range(n), yticks=range(n), xticklabels=toks, yticklabels=toks, xlabel="key", ylabel="query",
               title=f"MiniLM layer {start[0] + 1}, head {start[1] + 1}")
        ax.tick_params(axis="x", labelrotation=90)
        fig.colorbar(im, ax=ax, label="weight")

    return PickerFigure("ix-heads-explorer", "Every MiniLM head on one sentence", labels, frames, layout,
                        static_fallback(draw, (6.0, 5.2)), "Heat map of one MiniLM head's attention weights on the "
                        "sentence, query tokens down, key tokens across.", start=i0, control_label="head")


#: The bins of a head in the focus count, their names on the figure and their colours.
_FOCUS_BINS = (("property", "focused", "#4c72b0"), ("no property", "not focused", "#bbbbbb"),
               ("sink", "sink heads", "#dd8452"))


def focus_explorer(focus: Mapping, threshold: float = 0.5) -> SliderFigure:
    """Slide k, the number of heaviest keys, and watch each model's focused heads and the verdict of ``few-relevant-positions``.

    Each frame: each model's heads in three bins beside its most focused scrambled copy, and the verdicts.
    Flags mark each k where the claim's verdict changes; the slider starts at the k fixed before the run.
    """
    cfg = focus["config"]
    ks, grid = list(cfg["ks"]), dict(ks=cfg["ks"], thresholds=cfg["thresholds"])
    verdicts = lowrank_focus.verdicts_over_k(focus, threshold)
    models = list(focus["models"])
    bins_k = [{m: lowrank_focus.bins_at(focus["models"][m]["trained"], k=k, threshold=threshold, **grid) for m in models}
              for k in ks]
    scr_k = [{m: max(lowrank_focus.bins_at(s, k=k, threshold=threshold, **grid)["property"]
                     for s in focus["models"][m]["scrambled"]) for m in models} for k in ks]
    frames = []
    for k, v, bins, scr in zip(ks, verdicts, bins_k, scr_k):
        traces = [{"type": "bar", "orientation": "h", "name": name, "y": models, "x": [bins[m][b] for m in models],
                   "marker": {"color": color}, "hovertemplate": f"{name}: %{{x:.3f}}<extra></extra>"}
                  for b, name, color in _FOCUS_BINS]
        traces.append({"type": "scatter", "mode": "markers", "name": "focused, scrambled W_Q, W_K (most)",
                       "y": models, "x": [scr[m] for m in models],
                       "marker": {"symbol": "line-ns-open", "size": 26, "color": "#000000", "line": {"width": 3}}})
        per = "; ".join(f"{m} {bins[m]['property']:.3f} focused, {bins[m]['no property']:.3f} not "
                        f"(scrambled at most {scr[m]:.3f}): {v[m]}" for m in models)
        frames.append({"data": traces, "readout": html.escape(f"k = {k} heaviest keys holding at least {threshold:g}: "
                                                             f"{per}. The claim: {v['claim']}.")})
    changes = [i for i in range(1, len(ks)) if verdicts[i]["claim"] != verdicts[i - 1]["claim"]]
    notes = [(i, f"the claim becomes {verdicts[i]['claim']} ("
                 + ", ".join(f"{m} {verdicts[i][m]}" for m in models) + ")") for i in changes]
    layout = {"height": 360, "barmode": "stack", "margin": {"l": 80, "r": 20, "t": 10, "b": 110}, "font": PLOTLY_FONT,
              "xaxis": {**PLOTLY_AXIS, "range": [0, 1], "title": {"text": "share of all heads"}},
              "yaxis": {**PLOTLY_AXIS, "autorange": "reversed"},
              "legend": {"orientation": "h", "y": -0.42, "yanchor": "top", "x": 0}}

    def draw(fig, ax):
        for m, style in zip(models, ("o-", "s-")):
            line, = ax.plot(ks, [b[m]["property"] for b in bins_k], style, label=f"{m}, focused")
            ax.plot(ks, [s[m] for s in scr_k], style[0] + ":", color=line.get_color(), mfc="none", label=f"{m}, scrambled")
        for i in changes:
            ax.axvline(ks[i] - 0.5, color="0.6", lw=1)
        ax.set(xlabel="k (heaviest keys)", ylabel="share of all heads", ylim=(0, 1.05), xticks=ks)
        ax.legend(fontsize=8, ncols=2, loc="upper left")

    start = ks.index(cfg.get("k", 3))
    first, rest = (notes[0], notes[1:]) if notes else ((None, ""), [])
    return SliderFigure("ix-heads-focus", "How many keys make a few?", [f"k = {k}" for k in ks], frames, layout,
                        static_fallback(draw, (6.4, 3.4)),
                        "Share of all heads focused on their k heaviest keys, trained and scrambled, for MiniLM and "
                        "SmolLM2 at k = 1 to 8.", start=start, control_label="heaviest keys k", flip=first[0],
                        flip_note=first[1], more_flips=rest, verdict="few-relevant-positions")
