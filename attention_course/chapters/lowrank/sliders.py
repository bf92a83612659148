r"""Chapter 3's sliders: :func:`lowrank_explorer` (the lesson) and three that push on a verdict.

:func:`soft_logits_explorer` (``low-rank``), :func:`rank_grid_explorer` (``structure-implies-low-rank``)
and :func:`efficient_structure_explorer` (``efficient-attention``) only read the stored runs and draw.
The structure sweep is stored in :data:`STRUCTURE_DATA`; regenerate it with::

    python -c "from attention_course.chapters.lowrank.approximation_error import write_structure_sweep; write_structure_sweep()"
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import numpy as np

from ...figures.style import method_color
from ...figures.widgets import PLOTLY_AXIS, PLOTLY_FONT, SliderFigure, static_fallback
from .approximation_error import BASELINES, low_rank_methods, lowrank_beats_baselines
from .figures import method_family
from .approximation_error import STRUCTURE_DATA
from .verdict_measures import load_verdicts
from .spectra import crossover_beta, singular_values, synthetic_attention, temperature_sweep

__all__ = ["efficient_structure_explorer", "load_structure_sweep", "lowrank_explorer", "soft_logits_explorer",
           "rank_grid_explorer"]

_FONT = {"size": 13}


# ------------------------------------------------------------------ efficient-attention
def load_structure_sweep(path: Path = STRUCTURE_DATA) -> dict:
    """The stored :func:`~attention_course.chapters.lowrank.approximation_error.structure_sweep`.

    Examples
    --------
    >>> s = load_structure_sweep()
    >>> s["t"][0], s["t"][-1], s["config"]["budget"]
    (0.0, 1.0, 32)
    """
    return json.loads(Path(path).read_text())


_SHORT = {"linear": "linear", "performer": "Performer", "linformer": "Linformer (E)",
          "linformer-pool": "Linformer (pool)", "nystrom": "Nyström", "local": "window", "top-k": "top-k"}


def _short(name: str) -> str:
    """A method's short label (the chapter's table), or the baseline's name without its gloss."""
    return name.replace(" (mean of values)", "") if name in BASELINES else _SHORT[method_family(name)]


def efficient_structure_explorer(sweep: dict | None = None, target: float = 0.1) -> SliderFigure:
    r"""Chapter 3: slide the inputs from iid (:math:`t = 0`) to smooth and low-rank (:math:`t = 1`).

    Top: each method's error at this :math:`t`, the trivial answers dashed; bottom: the low-rank methods
    against :math:`t`. Flags: :func:`~attention_course.chapters.lowrank.approximation_error.lowrank_beats_baselines`,
    without and with ``target``.

    Examples
    --------
    >>> fig = efficient_structure_explorer()
    >>> fig.labels[0], fig.verdict, fig.flip is not None
    ('t = 0 (iid)', 'efficient-attention', True)
    """
    s = load_structure_sweep() if sweep is None else sweep
    ts, errs = s["t"], s["errors"]
    methods = [m for m in errs if m not in BASELINES]
    lowr = low_rank_methods(s)
    floor = np.min([errs[b] for b in BASELINES], axis=0)  # (mixes,) the better trivial answer
    flip, accurate = lowrank_beats_baselines(s), lowrank_beats_baselines(s, target)
    labels = [f"t = {t:g}" + {0.0: " (iid)", 1.0: " (smooth)"}.get(t, "") for t in ts]
    all_errs = np.array([errs[m] for m in errs])
    y_range = [np.log10(all_errs[all_errs > 0].min()) - 0.2, np.log10(all_errs.max()) + 0.2]
    frames = []
    for i, t in enumerate(ts):
        bars = {"type": "bar", "orientation": "h", "y": list(range(len(methods))), "x": [errs[m][i] for m in methods],
                "marker": {"color": [method_color(method_family(m)) for m in methods]}, "showlegend": False,
                "customdata": [_short(m) for m in methods],
                "hovertemplate": "%{customdata}: %{x:.3g}<extra></extra>", "xaxis": "x", "yaxis": "y"}
        lines = [{"type": "scatter", "mode": "lines", "x": [errs[b][i]] * 2, "y": [-0.5, len(methods) - 0.5],
                  "name": _short(b), "line": {"color": c, "dash": "dash"}, "xaxis": "x", "yaxis": "y"}
                 for b, c in zip(BASELINES, ("#777777", "#000000"))]
        trend = [{"type": "scatter", "mode": "lines", "x": ts, "y": errs[m], "name": _short(m), "showlegend": False,
                  "line": {"color": method_color(method_family(m))}, "xaxis": "x2", "yaxis": "y2"} for m in lowr]
        trend += [{"type": "scatter", "mode": "lines", "x": ts, "y": floor, "showlegend": False,
                   "line": {"color": "#777777", "dash": "dash"}, "xaxis": "x2", "yaxis": "y2"},
                  {"type": "scatter", "mode": "markers", "x": [t] * len(lowr), "y": [errs[m][i] for m in lowr],
                   "showlegend": False, "marker": {"size": 10, "color": [method_color(method_family(m)) for m in lowr]},
                   "xaxis": "x2", "yaxis": "y2"}]
        beat = [_short(m) for m in methods if errs[m][i] < floor[i]]
        frames.append({"data": [bars] + lines + trend, "readout": (
            f"t = {t:g}: exact A has effective rank {s['effective_rank'][i]:.1f} of {s['config']['n']}, best "
            f"rank-{s['config']['budget']} error {s['rank_error'][i]:.3f}. "
            + "; ".join(f"{_short(m)} {errs[m][i]:.3g}" for m in lowr)
            + f" against uniform {errs[BASELINES[0]][i]:.3g} and zeros {errs[BASELINES[1]][i]:.3g}. "
            + ("Beat both trivial answers: " + ", ".join(beat) + "." if beat else "No method beats both trivial answers."))})
    layout = {"height": 620, "margin": {"l": 60, "r": 10, "t": 40, "b": 45}, "font": _FONT,
              "xaxis": {"type": "log", "domain": [0, 1], "range": y_range, "dtick": 1,
                        "title": {"text": "relative error of the output"}},
              "yaxis": {"domain": [0.42, 1], "autorange": "reversed", "automargin": True,
                        "tickvals": list(range(len(methods))), "ticktext": [_short(m) for m in methods]},
              "xaxis2": {"domain": [0, 1], "anchor": "y2", "title": {"text": "mix t (0 = iid, 1 = smooth)"}},
              "yaxis2": {"domain": [0, 0.28], "anchor": "x2", "type": "log", "dtick": 1, "title": {"text": "error"}},
              "legend": {"orientation": "h", "y": 1.01, "yanchor": "bottom", "x": 0}}

    def draw(fig, ax):
        for m in lowr:
            ax.plot(ts, errs[m], "o-", ms=3, color=method_color(method_family(m)), label=_short(m))
        ax.plot(ts, floor, "--", color="0.5", label="better trivial answer")
        if flip is not None:
            ax.axvline(ts[flip], color="0.4", lw=0.8)
        ax.set(yscale="log", xlabel="mix t (0 = iid, 1 = smooth)", ylabel="relative error",
               title="Low-rank methods against the trivial answers")
        ax.legend()

    note = "from here on, Nyström and mean-pooled Linformer beat both uniform attention and zeros"
    more = [(accurate, f"both low-rank methods within {target:g} of exact attention")] if accurate is not None else []
    title = (f"From iid to low-rank inputs: when do efficient methods work? (n = {s['config']['n']}, "
             f"budget {s['config']['budget']})")
    return SliderFigure("ix-lowrank-efficient", title,
                        labels, frames, layout, static_fallback(draw),
                        "Relative error of Nystrom and mean-pooled Linformer against the mix from iid to smooth "
                        "inputs: above the trivial answers on iid inputs, far below them on smooth ones.",
                        start=0, control_label="input structure t", flip=flip, flip_note=note, more_flips=more,
                        verdict="efficient-attention")


# ------------------------------------------------------------------ chapter 3
def lowrank_explorer(betas: Optional[Sequence[float]] = None, n: int = 48, d: int = 16, k: int = 8,
                     seed: int = 0, verdict: str = "") -> SliderFigure:
    r"""Chapter 3: a synthetic attention matrix at inverse temperature :math:`\beta`, its singular
    values, and its best rank-``k`` against its top-``k``-per-row error.

    ``crossover`` holds the interpolated :math:`\beta` where the errors cross. The flip marker sits on the first :math:`\beta` whose rank-``k`` error is above its top-``k`` error, the
    first frame past the crossover (:func:`crossover_beta`), so its numbers have crossed; ``verdict`` (a
    claim id, default none) links it to a verdict box. The slider starts at the softest :math:`\beta`.

    Examples
    --------
    >>> fig = lowrank_explorer([0.2, 1.0, 4.0], n=16, d=8, k=4)
    >>> len(fig.frames), fig.labels[0], fig.verdict, "data-verdict" in fig.to_html()
    (3, 'β = 0.2', '', False)
    """
    betas = [0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0] if betas is None else list(betas)
    sweep = temperature_sweep(betas, n=n, d=d, k=k, seed=seed)
    cross = crossover_beta(sweep)
    over = np.asarray(sweep["svd_error"]) > np.asarray(sweep["sparse_error"])  # (betas,) rank-k the worse
    flip = next((i for i in range(1, len(betas)) if over[i] and not over[i - 1]), None)
    frames = []
    for i, b in enumerate(betas):
        A = synthetic_attention(n, d, b, seed)  # (n, n)
        s = singular_values(A)  # (n,)
        first = float(s[0] ** 2 / np.sum(s**2))  # the first pattern's share of the energy, as the lesson counts
        frames.append({
            "data": [
                {"type": "heatmap", "z": A, "colorscale": "Viridis", "zmin": 0, "showscale": False,
                 "hovertemplate": "query %{y}, key %{x}: %{z:.3f}<extra></extra>", "xaxis": "x", "yaxis": "y"},
                {"type": "scatter", "mode": "lines+markers", "x": list(range(1, n + 1)), "y": s,
                 "marker": {"size": 4, "color": "#882255"}, "name": "singular values", "xaxis": "x2", "yaxis": "y2"},
                {"type": "scatter", "mode": "lines", "x": list(betas), "y": sweep["svd_error"], "name": f"rank-{k}",
                 "line": {"color": "#882255"}, "xaxis": "x3", "yaxis": "y3"},
                {"type": "scatter", "mode": "lines", "x": list(betas), "y": sweep["sparse_error"], "name": f"top-{k}",
                 "line": {"color": "#E69F00"}, "xaxis": "x3", "yaxis": "y3"},
                {"type": "scatter", "mode": "markers", "x": [b, b], "y": [sweep["svd_error"][i], sweep["sparse_error"][i]],
                 "marker": {"size": 10, "color": ["#882255", "#E69F00"]}, "showlegend": False,
                 "xaxis": "x3", "yaxis": "y3"},
            ],
            "readout": (f"β = {b:g}: the first singular value holds {first:.1%} of the energy; relative error of the best "
                        f"rank-{k} matrix {sweep['svd_error'][i]:.3f}, of keeping the top {k} per row "
                        f"{sweep['sparse_error'][i]:.3f}."),
        })
    layout = {"height": 620, "margin": {"l": 55, "r": 10, "t": 10, "b": 45}, "font": PLOTLY_FONT,
              "xaxis": {**PLOTLY_AXIS, "domain": [0, 0.45], "title": {"text": "key"}},
              "yaxis": {**PLOTLY_AXIS, "domain": [0.45, 1], "autorange": "reversed", "title": {"text": "query"}},
              "xaxis2": {"domain": [0.58, 1], "anchor": "y2", "title": {"text": "singular value index i"}},
              "yaxis2": {"domain": [0.45, 1], "anchor": "x2", "type": "log", "title": {"text": "σ<sub>i</sub>"}},
              "xaxis3": {"domain": [0, 1], "anchor": "y3", "title": {"text": "inverse temperature β"}},
              "yaxis3": {"domain": [0, 0.32], "anchor": "x3", "title": {"text": "relative error"}},
              # inside the lower panel's empty top-right corner, clear of the upper panel's axis title
              "legend": {"orientation": "h", "x": 1, "xanchor": "right", "y": 0.32, "yanchor": "top",
                         "bgcolor": "rgba(255,255,255,0.8)"}}

    def draw(fig, ax):
        ax.plot(sweep["beta"], sweep["svd_error"], "o-", color="#882255", label=f"best rank-{k}")
        ax.plot(sweep["beta"], sweep["sparse_error"], "s-", color="#E69F00", label=f"top-{k} per row")
        if np.isfinite(cross):
            ax.axvline(cross, color="0.4", ls=":", label=f"crossover β ≈ {cross:.2f}")
        ax.set(xlabel="inverse temperature β", ylabel="relative error", title="Low rank or sparse?")
        ax.legend()

    fig = SliderFigure("ix-lowrank-temperature", "Sharpen the attention: low rank or sparse?",
                        [f"β = {b:g}" for b in betas], frames, layout, static_fallback(draw),
                        f"Relative error of the best rank-{k} and the top-{k}-per-row approximations against the "
                        "inverse temperature; the rank-k error grows and the sparse error falls.",
                        start=0, control_label="inverse temperature β",
                        flip=flip, flip_note=f"the rank-{k} error is now above the top-{k} error: soft attention "
                                             "is low-rank, sharp attention sparse", verdict=verdict)
    fig.crossover = float(cross)  # the β where the two errors cross (interpolated), for the lesson's text
    return fig


# ------------------------------------------------------------------ low-rank
def _seed_band(x, lo, hi, mean, level: float, hover: str) -> list[dict]:
    """Plotly traces of one frame: the seeds' range as a band, their mean, and the ``level`` line."""
    return [
        {"type": "scatter", "mode": "lines", "x": list(x) + list(x[::-1]), "y": list(hi) + list(lo[::-1]),
         "fill": "toself", "fillcolor": "rgba(136,34,85,0.2)", "line": {"width": 0}, "name": "range over seeds",
         "hoverinfo": "skip"},
        {"type": "scatter", "mode": "lines+markers", "x": list(x), "y": list(mean), "name": "mean over seeds",
         "line": {"color": method_color("svd"), "width": 3}, "hovertemplate": hover},
        {"type": "scatter", "mode": "lines", "x": [x[0], x[-1]], "y": [level, level], "name": f"error {level:g}",
         "line": {"color": "#000000", "dash": "dot"}}]


def soft_logits_explorer(verdicts: dict | None = None, level: float = 0.1) -> SliderFigure:
    r"""Chapter 3: pick a logit standard deviation :math:`\beta`; see the centred rank-32 error of
    Gaussian attention of width :math:`d_k = 32` at every length :math:`n` of the stored run.

    Each frame is one column of the stored grid (``lowrank-run --verdicts``); the flag sits at the first
    :math:`\beta` whose error is not below ``level`` at every :math:`n`.

    Examples
    --------
    >>> fig = soft_logits_explorer()
    >>> fig.labels[0], fig.verdict, fig.labels[fig.flip]
    ('β = 0.05', 'low-rank', 'β = 0.15')
    """
    v = load_verdicts() if verdicts is None else verdicts
    cfg = v["config"]
    betas = np.asarray(cfg["betas"], dtype=float)
    order = np.argsort(betas)
    ns = sorted(int(n) for n in v["grid_by_n"])
    err = np.stack([np.asarray(v["grid_by_n"][str(n)]["error"], dtype=float)[:, order] for n in ns],
                   axis=1)  # (seeds, n, beta), beta increasing
    b, b_tr = betas[order], float(cfg["beta_trained"])
    mean, lo, hi = err.mean(axis=0), err.min(axis=0), err.max(axis=0)  # (n, beta)
    passes = (mean < level).all(axis=0)  # (beta,): below the level at every length
    flip = next((j for j in range(len(b)) if not passes[j]), None)
    labels = [f"β = {x:.2f} (MiniLM)" if abs(x - b_tr) < 1e-3 else f"β = {x:g}" for x in b]
    frames = []
    for j, x in enumerate(b):
        frames.append({"data": _seed_band(ns, lo[:, j], hi[:, j], mean[:, j], level,
                                          "n = %{x}: error %{y:.3f}<extra></extra>"),
            "readout": (f"{labels[j]}: centred rank-{cfg['grid_k']} error "
                        + ", ".join(f"{mean[i, j]:.3f} at n = {n}" for i, n in enumerate(ns))
                        + (f"; below {level:g} at every length." if passes[j] else
                           f"; {level:g} or more at some length."))})
    layout = {"height": 400, "margin": {"l": 60, "r": 10, "t": 50, "b": 45}, "font": _FONT,
              "xaxis": {"type": "log", "tickvals": ns, "ticktext": [str(n) for n in ns],
                        "title": {"text": "sequence length n"}, **PLOTLY_AXIS},
              "yaxis": {"range": [0, 1], "title": {"text": f"centred rank-{cfg['grid_k']} error"}, **PLOTLY_AXIS},
              "legend": {"orientation": "h", "y": 1.01, "yanchor": "bottom", "x": 0}}

    def draw(fig, ax):
        for i, n in enumerate(ns):
            ax.plot(b, mean[i], "o-", ms=4, color=method_color("svd"), alpha=0.4 + 0.6 * i / max(1, len(ns) - 1),
                    label=f"n = {n}")
        ax.axhline(level, color="0.3", ls=":")
        ax.axvline(b_tr, color=method_color("nystrom"), ls="--", label="MiniLM's sharpness")
        ax.set(xscale="log", xlabel="logit standard deviation β", ylabel=f"centred rank-{cfg['grid_k']} error",
               title="Gaussian attention of width 32, by length", ylim=(0, 1))
        ax.legend()

    note = (f"from here on, rank {cfg['grid_k']} misses {level:g} or more of the centred matrix at some length"
            if flip is not None else "")
    return SliderFigure("ix-lowrank-soft", "Soften the logits: when is attention close to rank 32 at every length?",
                        labels, frames, layout, static_fallback(draw, (6.4, 3.2)),
                        "Centred rank-32 error of Gaussian attention of width 32 against the logit standard "
                        "deviation, one line per length: below 0.1 only for the softest logits, close to 1 at "
                        "MiniLM's sharpness.", start=0, control_label="logit standard deviation β", flip=flip,
                        flip_note=note, verdict="low-rank")


# ------------------------------------------------------------------ structure-implies-low-rank
def rank_grid_explorer(verdicts: dict | None = None, level: float = 0.1) -> SliderFigure:
    r"""Chapter 3: pick a head width :math:`d_k`; see the centred rank-32 error of Gaussian attention against :math:`\beta`.

    Each frame is one row of the stored grid (``lowrank-run --verdicts``); the flag sits at the first
    width whose error at MiniLM's sharpness is ``level`` or more.

    Examples
    --------
    >>> fig = rank_grid_explorer()
    >>> fig.labels[0], fig.verdict, fig.labels[fig.flip]
    ('d_k = 1', 'structure-implies-low-rank', 'd_k = 4')
    """
    v = load_verdicts() if verdicts is None else verdicts
    cfg = v["config"]
    d_ks, betas, b_tr = cfg["d_ks"], np.asarray(cfg["betas"], dtype=float), float(cfg["beta_trained"])
    order = np.argsort(betas)
    err = np.asarray(v["grid"]["error"], dtype=float)[:, :, order]  # (seeds, d_k, beta), beta increasing
    b = betas[order]
    mean, lo, hi = err.mean(axis=0), err.min(axis=0), err.max(axis=0)  # (d_k, beta)
    j_tr = int(np.argmin(np.abs(b - b_tr)))
    flip = next((i for i in range(len(d_ks)) if mean[i, j_tr] >= level), None)
    frames = []
    for i, d in enumerate(d_ks):
        band = _seed_band(b, lo[i], hi[i], mean[i], level, "β = %{x:.2f}: error %{y:.3f}<extra></extra>")
        frames.append({"data": band + [
            {"type": "scatter", "mode": "lines", "x": [b_tr, b_tr], "y": [0, 1], "name": "MiniLM's sharpness",
             "line": {"color": method_color("nystrom"), "dash": "dash"}}],
            "readout": (f"d_k = {d}: centred rank-{cfg['grid_k']} error {mean[i, j_tr]:.3f} at MiniLM's sharpness "
                        f"β = {b_tr:.2f}, {mean[i, 0]:.3f} at β = {b[0]:g}; below {level:g} up to β = "
                        + (f"{b[mean[i] < level].max():.2g}." if (mean[i] < level).any() else "none of the grid."))})
    layout = {"height": 420, "margin": {"l": 60, "r": 10, "t": 50, "b": 45}, "font": _FONT,
              "xaxis": {"type": "log", "title": {"text": "logit standard deviation β"}, **PLOTLY_AXIS},
              "yaxis": {"range": [0, 1], "title": {"text": f"centred rank-{cfg['grid_k']} error"}, **PLOTLY_AXIS},
              "legend": {"orientation": "h", "y": 1.01, "yanchor": "bottom", "x": 0}}

    def draw(fig, ax):
        ax.plot(d_ks, mean[:, j_tr], "o-", color=method_color("svd"))
        ax.axhline(level, color="0.3", ls=":")
        ax.set(xscale="log", xlabel="head width d_k", ylabel=f"centred rank-{cfg['grid_k']} error",
               title=f"Gaussian attention at MiniLM's sharpness (β = {b_tr:.2f})")
        ax.set_xticks(d_ks, [str(d) for d in d_ks])

    note = (f"from d_k = {d_ks[flip]} on, rank {cfg['grid_k']} misses {level:g} or more of the centred matrix at "
            "MiniLM's sharpness") if flip is not None else ""
    return SliderFigure("ix-lowrank-grid", "Pick a head width: how low-rank is its attention as it sharpens?",
                        [f"d_k = {d}" for d in d_ks], frames, layout, static_fallback(draw, (6.4, 3.0)),
                        "Centred rank-32 error of Gaussian attention at MiniLM's sharpness against the head width: "
                        "near 0 for widths 1 and 2, rising above 0.1 from width 4.", start=len(d_ks) - 2,
                        control_label="head width d_k", flip=flip, flip_note=note, verdict="structure-implies-low-rank")
