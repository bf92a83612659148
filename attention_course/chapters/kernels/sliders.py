"""Chapter 2's sliders; flagged: ``learned-width`` (:func:`learned_width_explorer`), ``learned-metric``
(:func:`kernel_family_explorer`) and ``softmax-kernel`` (:func:`key_norm_explorer`).

They read stored sweeps (:mod:`~attention_course.chapters.kernels.self_weight`,
:mod:`~attention_course.chapters.kernels.kernel_family`) and only draw.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Optional

import numpy as np

from ...figures.widgets import PLOTLY_FONT, PredictReveal, SliderFigure, static_fallback
from ...models.experiments import read_json
from .kernel_family import load_family_sweep, passes_rule
from .learning import good_range_limit, learned_width_flip
from .metric_comparison import load_metric_run
from .qk_kernel import qk_locality
from .self_weight import LEARNED_WIDTH_DATA
from .smoothing import mse_by_bandwidth, nadaraya_watson, sine_data

__all__ = ["learned_width_explorer", "load_self_weight_sweep", "bandwidth_explorer", "without_verdict_link",
           "key_norm_explorer", "kernel_family_explorer"]



def load_self_weight_sweep(path: Path = LEARNED_WIDTH_DATA) -> dict:
    """The stored :func:`~attention_course.chapters.kernels.self_weight.self_weight_sweep`.

    Examples
    --------
    >>> s = load_self_weight_sweep()
    >>> s["alpha"][0], s["alpha"][-1], len(s["draws"])
    (0.0, 1.0, 10)
    """
    return read_json(path)


def learned_width_explorer(sweep: dict | None = None) -> SliderFigure:
    r"""Chapter 2: slide the self-weight :math:`\alpha` from leave-one-out (0) to self-included (1).

    Top: test MSE against :math:`w`, with the grid-best, leave-one-out and learned widths; bottom: the
    learned width's test MSE against :math:`\alpha`. The flag is
    :func:`~attention_course.chapters.kernels.learning.learned_width_flip`.

    Examples
    --------
    >>> fig = learned_width_explorer()
    >>> fig.labels[0], fig.verdict, fig.flip is not None
    ('α = 0 (leave-one-out)', 'learned-width', True)
    """
    s = load_self_weight_sweep() if sweep is None else sweep
    alphas, ws, errs = s["alpha"], s["w"], s["test_mse"]
    limit, flip = good_range_limit(s), learned_width_flip(s)
    ends = {0.0: " (leave-one-out)", 1.0: " (self-included)"}
    labels = [f"α = {a:g}{ends.get(a, '')}" for a in alphas]
    frames = []
    for i, (a, w, e) in enumerate(zip(alphas, ws, errs)):
        good = "inside" if e <= limit else "<b>outside</b>"
        frames.append({"data": [
            {"type": "scatter", "mode": "lines", "x": s["w_grid"], "y": s["grid_mse"], "name": "test MSE at w",
             "line": {"color": "#000000"}, "xaxis": "x", "yaxis": "y"},
            {"type": "scatter", "mode": "markers", "x": [s["w_best"]], "y": [s["mse_best"]], "name": "grid best",
             "marker": {"symbol": "star", "size": 13, "color": "#009E73"}, "xaxis": "x", "yaxis": "y"},
            {"type": "scatter", "mode": "markers", "x": [ws[0]], "y": [errs[0]], "name": "leave-one-out",
             "marker": {"size": 10, "color": "#0072B2"}, "xaxis": "x", "yaxis": "y"},
            {"type": "scatter", "mode": "markers", "x": [w], "y": [e], "name": "learned at α",
             "marker": {"size": 12, "color": "#D55E00", "symbol": "diamond"}, "xaxis": "x", "yaxis": "y"},
            {"type": "scatter", "mode": "lines+markers", "x": alphas, "y": errs, "showlegend": False,
             "line": {"color": "#D55E00"}, "marker": {"size": 5}, "xaxis": "x2", "yaxis": "y2"},
            {"type": "scatter", "mode": "lines", "x": [0, 1], "y": [limit, limit], "name": "good-range limit",
             "line": {"color": "#777777", "dash": "dot"}, "xaxis": "x2", "yaxis": "y2"},
            {"type": "scatter", "mode": "markers", "x": [a], "y": [e], "showlegend": False,
             "marker": {"size": 12, "color": "#D55E00", "symbol": "diamond"}, "xaxis": "x2", "yaxis": "y2"}],
            "readout": (f"α = {a:g}: learned w = {w:.2f} (leave-one-out {ws[0]:.2f}, grid-best {s['w_best']:.2f}); "
                        f"test MSE {e:.3f}, {e / s['mse_best']:.2f} times the grid-best {s['mse_best']:.3f}; "
                        f"the good range ends at {limit:.3f} ({np.median(s['draw_ratio']):.2f} times the best, the "
                        f"leave-one-out width's median ratio on {len(s['draws'])} further draws): {good}.")})
    layout = {"height": 600, "margin": {"l": 60, "r": 10, "t": 70, "b": 45}, "font": {"size": 13},
              "xaxis": {"type": "log", "domain": [0, 1], "title": {"text": "inverse width w (log scale)"}},
              "yaxis": {"domain": [0.5, 1], "type": "log", "title": {"text": "test MSE"}},
              "xaxis2": {"domain": [0, 1], "anchor": "y2", "title": {"text": "self-weight α"}, "range": [-0.03, 1.03]},
              "yaxis2": {"domain": [0, 0.33], "anchor": "x2", "title": {"text": "test MSE"}},
              "legend": {"orientation": "h", "y": 1.01, "yanchor": "bottom", "x": 0}}

    def draw(fig, ax):
        ax.plot(alphas, errs, "o-", color="#D55E00", label="learned width")
        ax.axhline(limit, color="0.5", ls=":", label="limit of the good range")
        ax.axhline(s["mse_best"], color="#009E73", ls="--", label="grid-best width")
        if flip is not None:
            ax.axvline(alphas[flip], color="0.4", lw=0.8)
        ax.set(xlabel="self-weight α (0 = leave-one-out, 1 = self-included)", ylabel="test MSE",
               title="Test error of the learned width")
        ax.legend()

    note = (f"the learned width's test MSE leaves the good range (above {limit:.3f}): the objective now "
            "rewards copying each point's own target")
    return SliderFigure("ix-kern-learned-width", "Let each point see its own target: what width is learned?",
                        labels, frames, layout, static_fallback(draw),
                        "Test MSE of the learned kernel width against the self-weight alpha: flat near the best "
                        "width for small alpha, rising above the good range as alpha approaches 1.",
                        start=0, control_label="self-weight α", flip=flip, flip_note=note, verdict="learned-width")


def bandwidth_explorer(w_values: Optional[Sequence[float]] = None, seed: int = 0) -> SliderFigure:
    """Chapter 2: the Gaussian Nadaraya-Watson fit at each inverse bandwidth :math:`w = 1/h`, with train and test error.

    The flip marker sits at the lowest test error.

    Examples
    --------
    >>> fig = bandwidth_explorer([0.5, 2.0, 10.0])
    >>> len(fig.frames), fig.labels[fig.flip]
    (3, 'w = 2')
    """
    ws = [0.3, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 6.0, 10.0, 30.0] if w_values is None else list(w_values)
    data = sine_data(seed=seed)
    grid = np.linspace(0, 5, 101)  # (101,)
    train_err = mse_by_bandwidth(data.x_train, data.x_train, data.y_train, data.y_train, ws)  # (len(ws),)
    test_err = mse_by_bandwidth(data.x_test, data.x_train, data.y_train, data.y_test, ws)  # (len(ws),)
    frames = []
    for w, e_tr, e_te in zip(ws, train_err, test_err):
        fit, _ = nadaraya_watson(grid, data.x_train, data.y_train, bandwidth=1 / w)
        frames.append({
            "data": [
                {"type": "scatter", "mode": "markers", "x": data.x_train, "y": data.y_train, "name": "training data",
                 "marker": {"color": "#777777", "size": 6}},
                {"type": "scatter", "mode": "lines", "x": data.x_test, "y": data.y_test, "name": "true curve (no noise)",
                 "line": {"color": "#000000", "dash": "dot"}},
                {"type": "scatter", "mode": "lines", "x": grid, "y": np.asarray(fit), "name": f"fit, w = {w:g}",
                 "line": {"color": "#D55E00", "width": 3}},
            ],
            "readout": (f"w = {w:g} (h = {1 / w:.2g}): training error {e_tr:.3f} (against the noisy points), "
                        f"test error {e_te:.3f} (against the true curve)"),
        })
    best = int(np.argmin(test_err))
    layout = {"height": 380, "margin": {"l": 50, "r": 10, "t": 10, "b": 45}, "font": PLOTLY_FONT,
              "xaxis": {"title": {"text": "x"}}, "yaxis": {"title": {"text": "y"}},
              "legend": {"orientation": "h", "y": -0.2}}

    def draw(fig, ax):
        fit, _ = nadaraya_watson(grid, data.x_train, data.y_train, bandwidth=1 / ws[best])
        ax.plot(data.x_train, data.y_train, "o", color="0.5", ms=4, label="training data")
        ax.plot(data.x_test, data.y_test, ":", color="k", label="true curve (no noise)")
        ax.plot(grid, np.asarray(fit), color="#D55E00", lw=2, label=f"fit, w = {ws[best]:g}")
        ax.set(xlabel="x", ylabel="y", title="Nadaraya-Watson at the width with the lowest test error")
        ax.legend()

    return SliderFigure("ix-kern-bandwidth", "Choose the inverse width w of the kernel smoother",
                        [f"w = {w:g}" for w in ws], frames, layout, static_fallback(draw),
                        "Noisy training points, the true curve and the Nadaraya-Watson fit at the inverse width with "
                        "the lowest test error.", start=best, control_label="inverse width w", flip=best,
                        flip_note="lowest test error; a larger w fits the noise, a smaller w flattens the curve")


def without_verdict_link(box: PredictReveal) -> PredictReveal:
    """``box`` with its answer's "See the verdict." link removed (a lesson's claim line gives the link).

    Examples
    --------
    >>> box = PredictReveal("ix-demo", "Which?", ["a", "b"], "a", 'It is a. <a href="p.html#claim-x">See the verdict.</a>')
    >>> without_verdict_link(box).answer_html
    'It is a.'
    """
    return replace(box, answer_html=_VERDICT_LINK.sub("", box.answer_html))


_VERDICT_LINK = re.compile(r'\s*<a href="[^"]*#claim-[\w-]+">See the verdict\.</a>')


def key_norm_explorer(ratios: Optional[Sequence[float]] = None, marks: Optional[dict] = None,
                      T: int = 24, S: int = 48, d: int = 16, seed: int = 0) -> SliderFigure:
    r"""Chapter 2: how far the keys' norms spread decides whether attention is a smoothing kernel.

    Keys of random direction, norms spread geometrically to max/min ``ratio`` (mean :math:`\sqrt d`); each
    frame shows one query's weights against distance, the readout
    :func:`~attention_course.chapters.kernels.qk_kernel.qk_locality`. ``marks``: label to ratio, flagged.

    Examples
    --------
    >>> fig = key_norm_explorer([1.0, 4.0], marks={"here": 3.9}, T=4, S=6, d=4)
    >>> fig.labels, fig.flips[0][0]
    (['max/min key norm = 1', 'max/min key norm = 4'], 1)
    """
    ratios = [1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.5, 8.0] if ratios is None else list(ratios)
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(T, d))  # (T, d)
    u = rng.normal(size=(S, d))
    u /= np.linalg.norm(u, axis=1, keepdims=True)  # (S, d) unit directions
    spread = rng.permutation(np.linspace(-0.5, 0.5, S))  # (S,) each key's place in the spread
    frames, rc = [], []
    for r in ratios:
        k = u * (np.sqrt(d) * r ** spread)[:, None]  # (S, d): norms from sqrt(d)/sqrt(r) to sqrt(d)*sqrt(r)
        loc = qk_locality(q, k)
        rc.append(float(loc["rank_corr"]))
        scores = q[0] @ k.T / np.sqrt(d)  # (S,) the first query's scores
        w = np.exp(scores - scores.max())
        w /= w.sum()
        frames.append({"data": [{
            "type": "scatter", "mode": "markers", "x": np.linalg.norm(q[0] - k, axis=1), "y": w,
            "marker": {"color": np.linalg.norm(k, axis=1), "colorscale": "Viridis", "size": 8,
                       "colorbar": {"title": {"text": "‖k‖"}}},
            "hovertemplate": "distance %{x:.2f}: weight %{y:.3f}<extra></extra>"}],
            "readout": (f"Over {T} queries: weight against nearness, median rank correlation {float(loc['rank_corr']):.2f}; "
                        f"the nearest key wins {float(loc['nearest_wins']):.0%} of the time (chance {1 / S:.0%}); "
                        f"the distance term explains {float(loc['distance_share']):.0%} of a row's score variance, "
                        f"the key-norm term {float(loc['norm_share']):.0%}.")})
    flips = [(int(np.argmin(np.abs(np.log(np.array(ratios) / v)))), label) for label, v in (marks or {}).items()]
    layout = {"height": 400, "margin": {"l": 55, "r": 10, "t": 10, "b": 45}, "font": PLOTLY_FONT,
              "xaxis": {"title": {"text": "distance ‖q − k‖ from the first query"}},
              "yaxis": {"title": {"text": "attention weight"}, "rangemode": "tozero"}}

    def draw(fig, ax):
        ax.plot(ratios, rc, "o-", color="#0072B2")
        for i, label in flips:
            ax.axvline(ratios[i], color="0.5", ls=":")
            ax.annotate(label, (ratios[i], min(rc)), rotation=90, va="bottom", ha="right", fontsize=9)
        ax.set(xscale="log", xlabel="largest / smallest key norm", ylabel="median rank correlation",
               title="Weight against nearness, as key norms spread")

    first = flips[0] if flips else (None, "")
    return SliderFigure("ix-kern-keynorms", "Spread the key norms: when is attention a smoothing kernel?",
                        [f"max/min key norm = {r:g}" for r in ratios], frames, layout, static_fallback(draw),
                        "Median rank correlation between attention weight and nearness, falling as the key "
                        "norms spread further apart.", start=0, control_label="key-norm spread",
                        flip=first[0], flip_note=first[1], more_flips=flips[1:],
                        verdict="softmax-kernel")


def kernel_family_explorer(sweep: dict | None = None, metric_run: dict | None = None) -> SliderFigure:
    """Chapter 2 (``learned-metric``): slide the key-norm penalty :math:`t` from the Gaussian kernel to the dot product.

    Top: draw 0's prediction along :math:`x_0`; bottom: tuned MSE over learned MSE per draw against
    :math:`t`. A last frame is attention's own :math:`W_Q, W_K` (``metric_run``). The flag sits where the
    rule first fails.

    Examples
    --------
    >>> fig = kernel_family_explorer()
    >>> fig.labels[0], fig.labels[-1], fig.verdict
    ('t = 1 (Gaussian)', "attention's W_Q, W_K", 'learned-metric')
    """
    s = load_family_sweep() if sweep is None else sweep
    run = load_metric_run() if metric_run is None else metric_run
    tuned = np.asarray(s["mse_tuned"])  # (seeds,)
    imp = [list(tuned / np.asarray(m)) for m in s["mse"]]  # P x (seeds,)
    doms, passes, curves = list(s["dominance"]), list(s["passes"]), list(s["curve"])
    ts = list(s["t"]) + [-0.15]  # attention's own kernel, drawn right of t = 0
    imp.append(list(np.asarray(run["mse_tuned"]) / np.asarray(run["mse_dot"])))
    doms.append(list(run["dominance_dot"]))
    passes.append(passes_rule(imp[-1], doms[-1]))
    curves.append(s["dot_curve"])
    ends = {1.0: " (Gaussian)", 0.0: " (dot product)"}
    labels = [f"t = {t:g}{ends.get(t, '')}" for t in s["t"]] + ["attention's W_Q, W_K"]
    med = [float(np.median(i)) for i in imp]
    x0 = np.asarray(s["x0"])
    frames = []
    for i, (t, lab) in enumerate(zip(ts, labels)):
        n_ok = int(np.sum((np.asarray(imp[i]) >= 3) & (np.asarray(doms[i]) >= 3)))
        peak = ("at the query" if t == 1 else "past the query, at Wx = Wq/t" if t > 0 else "nowhere: it grows along Wq")
        frames.append({"data": [
            {"type": "scatter", "mode": "lines", "x": x0, "y": np.sin(2 * x0), "name": "sin 2x₀ (the target)",
             "line": {"color": "#000000", "dash": "dot"}, "xaxis": "x", "yaxis": "y"},
            {"type": "scatter", "mode": "lines", "x": x0, "y": curves[i], "name": "learned kernel, draw 0",
             "line": {"color": "#D55E00", "width": 3}, "xaxis": "x", "yaxis": "y"},
            {"type": "scatter", "mode": "lines+markers", "x": ts, "y": med, "name": "median over draws",
             "line": {"color": "#0072B2"}, "marker": {"size": 5}, "xaxis": "x2", "yaxis": "y2"},
            {"type": "scatter", "mode": "lines", "x": [ts[-1], 1], "y": [3, 3], "name": "the rule's factor 3",
             "line": {"color": "#777777", "dash": "dot"}, "xaxis": "x2", "yaxis": "y2"},
            {"type": "scatter", "mode": "markers", "x": [t] * len(imp[i]), "y": imp[i], "name": "each draw",
             "marker": {"size": 9, "color": "#D55E00", "symbol": "diamond"}, "xaxis": "x2", "yaxis": "y2"}],
            "readout": (f"{lab}: the kernel peaks {peak}. Test MSE {min(imp[i]):.2f} to {max(imp[i]):.2f} times below "
                        f"the tuned width's, x₀'s weight {min(doms[i]):.1f} to {max(doms[i]):.1f} times the next "
                        f"coordinate's; both at least 3 in {n_ok} of {len(imp[i])} draws: the rule "
                        f"<b>{'passes' if passes[i] else 'fails'}</b>.")})
    flip = next((i for i, p in enumerate(passes) if not p), None)
    ticks = [1.0, 0.8, 0.6, 0.4, 0.2, 0.0, ts[-1]]
    layout = {"height": 580, "margin": {"l": 60, "r": 10, "t": 10, "b": 45}, "font": PLOTLY_FONT,
              "xaxis": {"domain": [0, 1], "range": [-2, 2], "title": {"text": "x₀ (other coordinates 0)"}},
              "yaxis": {"domain": [0.58, 1], "range": [-1.4, 1.4], "title": {"text": "prediction"}},
              "xaxis2": {"domain": [0, 1], "anchor": "y2", "range": [1.05, ts[-1] - 0.07], "tickvals": ticks,
                         "ticktext": [f"{v:g}" for v in ticks[:-1]] + ["W_Q, W_K"],
                         "title": {"text": "key-norm penalty t (1: Gaussian, 0: dot product)"}},
              "yaxis2": {"domain": [0, 0.4], "anchor": "x2", "type": "log", "title": {"text": "tuned MSE / learned"}},
              "legend": {"orientation": "h", "y": 1.01, "yanchor": "bottom", "x": 0}}

    def draw(fig, ax):
        ax.plot(ts[:-1], med[:-1], "o-", color="#0072B2", label="learned metric, median over draws")
        ax.plot([ts[-1]], [med[-1]], "D", color="#D55E00", label="attention's W_Q, W_K")
        ax.axhline(3, color="0.5", ls=":", label="the rule's factor 3")
        if flip is not None:
            ax.axvline(ts[flip], color="0.4", lw=0.8)
        ax.set_xticks(ticks, [f"{v:g}" for v in ticks[:-1]] + ["W_Q, W_K"])
        ax.set(yscale="log", xlim=(1.05, ts[-1] - 0.07), xlabel="key-norm penalty t (1: Gaussian, 0: dot product)",
               ylabel="tuned MSE / learned MSE", title="How much the learned kernel beats the tuned width")
        ax.legend()

    note = ("the learned kernel no longer beats the tuned width 3 times over, picking out x₀, in 4 of 5 draws: "
            "without the full key-norm term it cannot peak at the query")
    return SliderFigure("ix-kern-family", "From the Gaussian kernel to the dot product: does a learned metric help?",
                        labels, frames, layout, static_fallback(draw),
                        "Tuned-width test MSE over the learned kernel's, against the key-norm penalty t: about 100 "
                        "times better for the Gaussian kernel (t = 1), near 1 for the dot product and for attention's "
                        "own W_Q, W_K.", start=0, control_label="key-norm penalty t", flip=flip, flip_note=note,
                        verdict="learned-metric")
