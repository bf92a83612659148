r"""Chapter 7's sliders: the lesson's inverse-temperature slider, and the evidence page's flagged sliders.

:func:`temperature_explorer` teaches (one lookup sharpening as :math:`\beta` grows); the others move
over stored runs and flag where a verdict's condition changes. They only read and draw.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Optional

import numpy as np

from ...figures.widgets import SliderFigure, static_fallback
from .ingredients import Score, covered_share, first_within, window_curve
from .converged_comparisons import ratio_threshold
from .figures import KIND_COLORS
from .position_content import MARGIN, ContentPositionScores, content_verdict

__all__ = ["window_explorer", "task_explorer", "metric_explorer", "pairs_explorer", "temperature_explorer",
           "content_explorer"]

#: How close to full attention a window must come to count as "enough" (the pre-registered 0.05).
WINDOW_MARGIN = 0.05
_ACC, _COVER = "#0072B2", "#999999"


def _error_y(scores: Sequence[Score]) -> dict:
    """Plotly error bars from the mean down to the worst seed and up to the best."""
    return {"type": "data", "symmetric": False, "array": [x.high - x.mean for x in scores],
            "arrayminus": [x.mean - x.low for x in scores]}


def _bar_frame(label: str, names: Sequence[str], scores: Sequence[Score], end: str = ".") -> dict:
    """One frame: a bar per name with its seeds' spread, and the means in the readout."""
    return {"data": [{"type": "bar", "x": list(names), "y": [x.mean for x in scores], "marker": {"color": _ACC},
                      "error_y": _error_y(scores)}],
            "readout": f"{label}: " + "; ".join(f"{v} <b>{x.mean:.2f}</b>" for v, x in zip(names, scores)) + end}


def window_explorer(table: Mapping[tuple[str, str], Score], task: str = "recall (MQAR, 16 pairs)",
                    n_pairs: int = 16) -> SliderFigure:
    """A slider over the window :math:`w`: trained recall against the covered share of queries.

    Examples
    --------
    >>> S = lambda m: Score(m, m - 0.01, m + 0.01, 3)
    >>> t = {("r", "window 4"): S(0.1), ("r", "window 16"): S(0.5), ("r", "softmax attention"): S(0.99)}
    >>> fig = window_explorer(t, "r")
    >>> fig.labels, fig.flip, fig.verdict
    (['w = 4', 'w = 16', 'w = 32 (all pairs)'], 2, 'all-pairs')
    """
    windows, scores = window_curve(table, task, full=2 * n_pairs)
    acc = np.array([s.mean for s in scores])
    cover = covered_share(n_pairs, windows)
    flip = first_within(list(acc), WINDOW_MARGIN)
    labels = [f"w = {w}" + (" (all pairs)" if w == 2 * n_pairs else "") for w in windows]
    frames = []
    for i, (w, s) in enumerate(zip(windows, scores)):
        colors = [_ACC if j == i else "#9ECAE1" for j in range(len(windows))]
        frames.append({
            "data": [{"type": "bar", "x": [str(v) for v in windows], "y": acc, "name": "trained recall",
                      "marker": {"color": colors},
                      "error_y": _error_y(scores)},
                     {"type": "scatter", "mode": "lines+markers", "x": [str(v) for v in windows], "y": cover,
                      "name": "keys inside the window", "line": {"color": _COVER, "dash": "dot"}}],
            "readout": (f"A window of <b>{w}</b> positions: recall {s.mean:.2f} (seeds {s.low:.2f}-{s.high:.2f}); "
                        f"the key of {cover[i]:.0%} of the queries lies inside it. Full attention: {acc[-1]:.2f}."),
        })
    layout = {"height": 380, "margin": {"l": 55, "r": 10, "t": 10, "b": 50}, "font": {"size": 13},
              "xaxis": {"title": {"text": "window w (positions a query may see)"}, "type": "category"},
              "yaxis": {"title": {"text": "accuracy / share"}, "range": [0, 1.05]},
              "legend": {"orientation": "h", "y": 1.12, "x": 0}}

    def draw(fig, ax):
        x = np.arange(len(windows))
        ax.bar(x, acc, color=_ACC, label="trained recall (mean of seeds)")
        ax.plot(x, cover, "o:", color=_COVER, label="keys inside the window")
        ax.set_xticks(x, [str(w) for w in windows])
        ax.set(xlabel="window w", ylabel="accuracy / share", ylim=(0, 1.05), title="Recall with a local window")
        ax.legend(fontsize=9, loc="upper left")

    return SliderFigure("ix-insight-window", "Shrink the window: when does recall come back?", labels, frames,
                        layout, static_fallback(draw),
                        "Recall accuracy of softmax attention restricted to a causal window of w positions, "
                        "against the share of queries whose key lies inside the window.",
                        start=0, control_label="window w", flip=flip,
                        flip_note="recall within 0.05 of full attention: the window covers every key",
                        verdict="all-pairs")


#: The task-switch sliders: claim -> (variants shown, the variant compared with softmax, what flips).
TASK_SLIDERS = {
    "data-dependent": (("softmax attention", "fixed mixing (learned T x T)", "gated long convolution"),
                       "fixed mixing (learned T x T)", "fixed mixing matches attention: data dependence is not needed"),
    "asymmetric": (("softmax attention", "tied", "tied, self masked"),
                   "tied", "tied W_Q = W_K fails: the relation is directional"),
}


def task_explorer(table: Mapping[tuple[str, str], Score], claim: str) -> SliderFigure:
    """Switch the task (recall, previous token) and compare softmax with the variants of one claim; the flag sits
    where the compared variant crosses :data:`WINDOW_MARGIN` of softmax.

    Examples
    --------
    >>> S = lambda m: Score(m, m, m, 3)
    >>> t = {(task, v): S(1.0) for task in ("recall (MQAR, 16 pairs)", "previous token")
    ...      for v in ("softmax attention", "tied", "tied, self masked")}
    >>> t["previous token", "tied"] = S(0.02)
    >>> fig = task_explorer(t, "asymmetric")
    >>> fig.labels, fig.flip, fig.verdict
    (['recall', 'previous token'], 1, 'asymmetric')
    """
    variants, compared, note = TASK_SLIDERS[claim]
    tasks = (("recall", "recall (MQAR, 16 pairs)"), ("previous token", "previous token"))
    gaps_ = [table[t, "softmax attention"].mean - table[t, compared].mean for _, t in tasks]
    close = [abs(g) <= WINDOW_MARGIN for g in gaps_]
    flip = next((i for i, c in enumerate(close) if c != close[0]), None)
    frames = [_bar_frame(label, variants, [table[t, v] for v in variants]) for label, t in tasks]
    layout = {"height": 340, "margin": {"l": 55, "r": 10, "t": 10, "b": 90}, "font": {"size": 13},
              "yaxis": {"title": {"text": "held-out accuracy"}, "range": [0, 1.05]}}

    def draw(fig, ax):
        x = np.arange(len(variants))
        for k, (label, t) in enumerate(tasks):
            ax.bar(x + 0.4 * k - 0.2, [table[t, v].mean for v in variants], width=0.4, label=label)
        ax.set_xticks(x, [v.replace(" (learned T x T)", "") for v in variants], fontsize=8)
        ax.set(ylabel="held-out accuracy", ylim=(0, 1.05), title=f"Softmax against its ablations ({claim})")
        ax.legend(fontsize=9)

    return SliderFigure(f"ix-insight-{claim}", "Switch the task: which ingredient does it need?",
                        [label for label, _ in tasks], frames, layout, static_fallback(draw),
                        f"Held-out accuracy of softmax attention and its ablations for the claim {claim}, on recall "
                        "and on the previous-token copy.", start=0, control_label="task", flip=flip,
                        flip_note=note, verdict=claim)


# ------------------------------------------------------------------ metric-learned and softmax-over-linear
#: The tasks of the metric slider: (label, task, the two variants the pre-registered gap compares).
METRIC_TASKS = (
    ("recall", "recall (MQAR, 16 pairs)", ("learned W_Q, W_K", "W_Q = W_K = I")),
    ("previous token", "previous token", ("tied, self masked", "W_Q = W_K = I, self masked")),
    ("partner recall", "partner recall (16 pairs)", ("learned W_Q, W_K", "W_Q = W_K = I")),
)
#: The gap above which a learned metric counts as needed (the pre-registered 0.05).
METRIC_MARGIN = 0.05


def metric_explorer(table: Mapping[tuple[str, str], Score]) -> SliderFigure:
    """Switch the task and compare a learned query-key metric with the fixed one (``metric-learned``); the flag
    sits at the first task where the gap exceeds :data:`METRIC_MARGIN`.

    Examples
    --------
    >>> S = lambda m: Score(m, m, m, 3)
    >>> t = {(task, v): S(1.0) for _, task, pair in METRIC_TASKS for v in pair}
    >>> t["partner recall (16 pairs)", "W_Q = W_K = I"] = S(0.5)
    >>> fig = metric_explorer(t)
    >>> fig.labels, fig.flip, fig.verdict
    (['recall', 'previous token', 'partner recall'], 2, 'metric-learned')
    """
    gaps_ = [table[t, a].mean - table[t, b].mean for _, t, (a, b) in METRIC_TASKS]
    flip = next((i for i, g in enumerate(gaps_) if g > METRIC_MARGIN), None)
    frames = [_bar_frame(label, pair, [table[t, v] for v in pair], f". Gap {g:+.2f}.")
              for (label, t, pair), g in zip(METRIC_TASKS, gaps_)]
    layout = {"height": 340, "margin": {"l": 55, "r": 10, "t": 10, "b": 70}, "font": {"size": 13},
              "yaxis": {"title": {"text": "held-out accuracy"}, "range": [0, 1.05]}}

    def draw(fig, ax):
        x = np.arange(len(METRIC_TASKS))
        for k, name in enumerate(("learned", "fixed")):
            ax.bar(x + 0.4 * k - 0.2, [table[t, pair[k]].mean for _, t, pair in METRIC_TASKS], width=0.4,
                   label=f"{name} metric")
        ax.set_xticks(x, [label for label, _, _ in METRIC_TASKS])
        ax.set(ylabel="held-out accuracy", ylim=(0, 1.05), title="A learned metric against a fixed one")
        ax.legend(fontsize=9)

    return SliderFigure("ix-insight-metric", "Switch the task: when must the metric be learned?",
                        [label for label, _, _ in METRIC_TASKS], frames, layout, static_fallback(draw),
                        "Held-out accuracy with a learned query-key metric and with a fixed one (W_Q = W_K = I; "
                        "on the copy, tied against identity, both with the self-score masked), on three tasks.",
                        start=0, control_label="task", flip=flip,
                        flip_note="the identity falls behind: the match is another key, which no positive semi-definite "
                                  "score ranks first", verdict="metric-learned")


def pairs_explorer(table: Mapping[tuple[str, int, int], Score], pairs=(8, 16, 32, 64),
                   widths=(16, 32, 64)) -> SliderFigure:
    """A slider over the load N/d: softmax against linear attention at every width with that ratio; the flag sits
    at :func:`~attention_course.chapters.insight.converged_comparisons.ratio_threshold`.

    Examples
    --------
    >>> S = lambda m: Score(m, m, m, 2)
    >>> t = {("softmax attention", n, 16): S(0.99) for n in (4, 8, 16, 32)}
    >>> t.update({("linear attention", n, 16): S(a) for n, a in [(4, 0.98), (8, 0.95), (16, 0.6), (32, 0.3)]})
    >>> fig = pairs_explorer(t, pairs=(4, 8, 16, 32), widths=(16,))
    >>> fig.labels, fig.flip, fig.verdict
    (['N/d = 1/4', 'N/d = 1/2', 'N/d = 1', 'N/d = 2'], 2, 'softmax-over-linear')
    """
    ratios = sorted({Fraction(n, d) for n in pairs for d in widths})
    cut = ratio_threshold(table, pairs=pairs, widths=widths)
    flip = next((i for i, r in enumerate(ratios) if cut is not None and float(r) == cut), None)
    labels, frames = [], []
    for r in ratios:
        points = [(n, d) for d in widths for n in pairs if Fraction(n, d) == r]
        soft = [table["softmax attention", n, d] for n, d in points]
        lin = [table["linear attention", n, d] for n, d in points]
        names = [f"N = {n}, d = {d}" for n, d in points]
        labels.append(f"N/d = {r}")
        frames.append({
            "data": [{"type": "bar", "x": names, "y": [s.mean for s in soft], "name": "softmax attention",
                      "marker": {"color": _ACC}},
                     {"type": "bar", "x": names, "y": [s.mean for s in lin], "name": "linear attention",
                      "marker": {"color": "#E69F00"}}],
            "readout": f"N/d = {r}: " + "; ".join(f"{nm}: softmax <b>{s.mean:.2f}</b>, linear <b>{x.mean:.2f}</b>"
                                                    for nm, s, x in zip(names, soft, lin)) + ".",
        })
    layout = {"height": 360, "margin": {"l": 55, "r": 10, "t": 10, "b": 60}, "font": {"size": 13},
              "barmode": "group", "yaxis": {"title": {"text": "recall accuracy"}, "range": [0, 1.05]},
              "legend": {"orientation": "h", "y": 1.12, "x": 0}}

    def draw(fig, ax):
        x = np.arange(len(ratios))
        for k, (mixer, color) in enumerate((("softmax attention", _ACC), ("linear attention", "#E69F00"))):
            means = [np.mean([table[mixer, n, d].mean for d in widths for n in pairs if Fraction(n, d) == r])
                     for r in ratios]
            ax.plot(x, means, "o-", color=color, label=mixer)
        if cut is not None:
            ax.axvline(flip, color="0.5", ls=":")
        ax.set_xticks(x, [str(r) for r in ratios])
        ax.set(xlabel="pairs per dimension N/d", ylabel="recall (mean over widths)", ylim=(0, 1.05),
               title="Softmax against linear attention as N/d grows")
        ax.legend(fontsize=9)

    return SliderFigure("ix-insight-pairs", "Store more pairs per dimension: when does linear attention fall behind?",
                        labels, frames, layout, static_fallback(draw),
                        "Recall accuracy of softmax and linear attention on MQAR, at every width d whose number "
                        "of pairs N gives the chosen ratio N/d.", start=0, control_label="N/d", flip=flip,
                        flip_note="linear attention more than 0.1 behind at every width: its d x d state is full",
                        verdict="softmax-over-linear")


def temperature_explorer(keys: np.ndarray, values: np.ndarray, query: np.ndarray, target: int,
                         betas: Optional[Sequence[float]] = None, start: Optional[int] = None) -> SliderFigure:
    r"""The lesson's slider: one lookup in a memory of sign keys, as the inverse temperature :math:`\beta` grows.

    Each frame shows the weights :math:`\operatorname{softmax}(\beta K \xi)` over the stored keys and reads out
    :math:`\sum_j w_j v_j` beside the stored value.

    Parameters
    ----------
    keys : array (M, d); values : array (M, d_v); query : array (d,); target : int
    betas : the inverse temperatures, one frame each (default: 0 to 2, with :math:`1/\sqrt d` among them)
    start : the frame shown first (default: the one closest to :math:`1/\sqrt d`)

    Examples
    --------
    >>> K = np.array([[1.0, 1, 1, 1], [1.0, -1, -1, 1]]); V = np.array([[1.0], [-1.0]])
    >>> fig = temperature_explorer(K, V, np.array([1.0, 1, 1, -1]), target=0, betas=[0.0, 1.0])
    >>> fig.labels, fig.flip is None, fig.verdict
    (['β = 0', 'β = 1'], True, '')
    """
    keys, values, query = (np.asarray(a, dtype=float) for a in (keys, values, query))
    M, d = keys.shape
    if values.shape[0] != M or query.shape != (d,):
        raise ValueError(f"keys {keys.shape}, values {values.shape}, query {query.shape}; "
                         "expected (M, d), (M, d_v), (d,)")
    if betas is None:
        betas = sorted({0.0, 0.02, 0.05, 0.1, round(1 / np.sqrt(d), 3), 0.3, 0.5, 1.0, 2.0})
    betas = [float(b) for b in betas]
    if start is None:
        start = int(np.argmin([abs(b - 1 / np.sqrt(d)) for b in betas]))
    scores = keys @ query  # (M,): agreements minus disagreements
    names = [f"key {j}" for j in range(M)]
    colours = ["#0072B2" if j == target else "#BBBBBB" for j in range(M)]
    frames, weights = [], []
    for b in betas:
        z = b * (scores - scores.max())
        w = np.exp(z) / np.exp(z).sum()  # (M,): softmax over the stored keys
        read = w @ values  # (d_v,)
        weights.append(w)
        ok = bool((np.sign(read) == values[target]).all())
        frames.append({
            "data": [{"type": "bar", "x": names, "y": w, "marker": {"color": colours}}],
            "readout": (f"β = {b:g}: key {target} gets <b>{w[target]:.2f}</b> of the weight. Read out: "
                        f"({', '.join(f'{x:+.2f}' for x in read)}); stored value {target}: "
                        f"({', '.join(f'{x:+.0f}' for x in values[target])}); signs "
                        + ("all match." if ok else "do not all match.")),
        })
    layout = {"height": 320, "margin": {"l": 55, "r": 10, "t": 10, "b": 50}, "font": {"size": 13},
              "yaxis": {"title": {"text": "weight"}, "range": [0, 1.05]}}
    shown = sorted({0, start, len(betas) - 1})

    def draw(fig, ax):
        x = np.arange(M)
        width = 0.8 / len(shown)
        for k, i in enumerate(shown):
            ax.bar(x + (k - (len(shown) - 1) / 2) * width, weights[i], width=width, label=f"β = {betas[i]:g}")
        ax.set_xticks(x, [str(j) for j in range(M)])
        ax.set(xlabel=f"stored key (the query was made from key {target})", ylabel="weight", ylim=(0, 1.05),
               title="Where the weight goes as β grows")
        ax.legend(fontsize=10)

    return SliderFigure("ix-insight-temperature", "Sharpen the lookup: the inverse temperature β",
                        [f"β = {b:g}" for b in betas], frames, layout, static_fallback(draw),
                        "The weight each stored key receives from one damaged query, for three inverse temperatures: "
                        "spread evenly at β = 0, concentrated on the matching key as β grows.",
                        start=start, control_label="inverse temperature β")


def content_explorer(scores: Mapping[str, ContentPositionScores], margins: Sequence[float],
                     chosen: float = MARGIN, decides: Optional[str] = None, beside: Sequence[str] = ()) -> SliderFigure:
    """A slider over the margin between the two correlations: each model's kinds of head and the verdict.

    Flags mark each margin where a model's verdict changes (``decides``, default the first model, gives the
    claim's; the baselines in ``beside`` are not flagged); the slider starts at ``chosen``.

    Examples
    --------
    >>> def model(w, o):
    ...     return ContentPositionScores(np.zeros((1, 1, 4)), np.array([[w]]), np.array([[o]]),
    ...                                  np.zeros((1, 1, 4)), np.zeros((1, 1, 4), int), 1)
    >>> fig = content_explorer({"A": model([0.9, 0.6, 0.5, 0.1], [0.1, 0.1, 0.1, 0.5])}, [0.2, 0.3, 0.5], chosen=0.2)
    >>> fig.labels, fig.flip, fig.verdict
    (['margin 0.2', 'margin 0.3', 'margin 0.5'], 2, 'content-not-position')
    """
    models = list(scores)
    decides = decides or models[0]
    shares = [{m: scores[m].shares(margin_tol=g) for m in models} for g in margins]
    verdicts = [{m: content_verdict(sh[m]) for m in models} for sh in shares]
    labels = [f"margin {g:g}" for g in margins]
    frames = []
    for g, sh, v in zip(margins, shares, verdicts):
        traces = [{"type": "bar", "orientation": "h", "name": f"{kind} heads", "y": models,
                   "x": [sh[m][kind] for m in models], "marker": {"color": KIND_COLORS[kind]},
                   "hovertemplate": f"{kind}: %{{x:.3f}}<extra></extra>"}
                  for kind in ("sink", "content", "position", "mixed")]
        per = "; ".join(f"{m}: content {sh[m]['content']:.2f}, position {sh[m]['position']:.2f}, "
                        f"sink {sh[m]['sink']:.2f}, <b>{v[m]}</b>" for m in models)
        frames.append({"data": traces, "readout": f"The word correlation must win by more than {g:g}. {per}."})
    flips = [(i, f"{m} now gives {verdicts[i][m]}" + (", the claim's verdict" if m == decides else
                                                      f" ({decides}: {verdicts[i][decides]})"))
             for i in range(1, len(margins)) for m in models
             if m not in beside and verdicts[i][m] != verdicts[i - 1][m]]
    layout = {"height": 380, "barmode": "stack", "margin": {"l": 130, "r": 20, "t": 10, "b": 120}, "font": {"size": 13},
              "xaxis": {"range": [0, 1], "title": {"text": "share of all heads"}}, "yaxis": {"autorange": "reversed"},
              "legend": {"orientation": "h", "y": -0.45, "yanchor": "top", "x": 0}}  # below the axis title at 390 px

    def draw(fig, ax):
        for m, style in zip(models, ("o-", "s--", "^:")):
            for kind in ("content", "position"):
                ax.plot(margins, [sh[m][kind] for sh in shares], style, color=KIND_COLORS[kind], label=f"{m}, {kind}")
        for i, _ in flips:
            ax.axvline((margins[i - 1] + margins[i]) / 2, color="0.6", lw=1)
        ax.axhline(0.5, color="0.3", ls="--", lw=0.8)
        ax.set(xlabel="margin between the two correlations", ylabel="share of all heads", ylim=(0, 1.05))
        ax.legend(fontsize=8, ncols=2)

    start = list(margins).index(chosen)
    first, rest = (flips[0], flips[1:]) if flips else ((None, ""), [])
    return SliderFigure("ix-insight-content", "Move the margin: content heads, position heads and the verdict",
                        labels, frames, layout, static_fallback(draw, (6.4, 3.4)),
                        "Stacked bars of the shares of all heads that are sink, content, position and mixed heads, "
                        "one bar per model, at the chosen margin.", start=start, control_label="margin",
                        flip=first[0], flip_note=first[1], more_flips=rest, verdict="content-not-position")
