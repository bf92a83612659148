r"""Chapter 5's sliders: where the "holds when" verdicts on graphs change.

* :func:`rule_mass_explorer` (``learned-topology``): the mass :math:`m` of the effective graph;
  a fixed rule places a head's graph when its miss is below :math:`1 - m`.
* :func:`hops_explorer` (``l-hops``): the depth :math:`L`: reach under a banded mask, and the
  stored accuracy of :math:`k`-hop pointer chasing.
* :func:`top_key_explorer` (``unlike-gnns``): the line :math:`t` above which a head is static-like.
* :func:`probe_depth_explorer` (``depth-keeps-information``): the depth at which probes fall to guessing.

Numbers and flags come from the chapter's measure modules; MiniLM's and the fixed rule's are
read from stored data (:data:`RULE_DATA`, :data:`PROBE_DATA`, :data:`TOP_KEY_DATA`), so the
figures' HTML is the same on every CPU.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Optional

import numpy as np

from ...figures.widgets import PLOTLY_FONT, PickerFigure, SliderFigure, static_fallback
from ...models.experiments import read_json
from ..heads.sliders import stored_head_explorer  # chapter 4's explorer of MiniLM's heads
from .depth_probe import guess_depth, guessing_line
from .propagation import band_width, banded_mask, banded_stack_reach, hops_flip, receptive_field
from .gnn import static_counts, static_flip
from .slider_data import PROBE_DATA, TOP_KEY_DATA
from .topology_rules import RULE_DATA
from .topology_rule import placed_counts, rule_flip

__all__ = ["rule_mass_explorer", "hops_explorer", "probe_depth_explorer", "top_key_explorer", "minilm_head_explorer"]

_COLORS = {"pure attention": "#D55E00", "+ skip": "#0072B2", "+ skip + MLP + LayerNorm": "#009E73",
           "+ skip, no exchange": "#777777", "MiniLM, previous word": "#CC79A7",
           "MiniLM, next word": "#E69F00", "scrambled, previous word": "#BBBBBB"}


# ------------------------------------------------------------------ learned-topology
def load_rule_miss(path: Path = RULE_DATA) -> tuple[np.ndarray, np.ndarray]:
    """The stored ``(miss, uniform)``, each (72,): the rule's and uniform attention's miss per head.

    Examples
    --------
    >>> miss, uniform = load_rule_miss()
    >>> miss.shape, bool(np.median(miss) < np.median(uniform))
    ((72,), True)
    """
    d = read_json(path)
    return np.asarray(d["miss"], dtype=float), np.asarray(d["uniform"], dtype=float)


def _heads_and_counts_layout(heads_title: str, score_title: str, score_range: list, line_title: str,
                             n: int) -> dict:
    """The layout of a two-panel head slider: every head's score, sorted (top), and how many heads pass
    the line at each of its values (bottom)."""
    return {"height": 620, "margin": {"l": 55, "r": 10, "t": 10, "b": 45}, "font": PLOTLY_FONT,
            "xaxis": {"domain": [0, 1], "title": {"text": heads_title}},
            "yaxis": {"domain": [0.58, 1], "range": score_range, "title": {"text": score_title}},
            "xaxis2": {"domain": [0, 1], "anchor": "y2", "title": {"text": line_title}},
            "yaxis2": {"domain": [0, 0.27], "anchor": "x2", "range": [0, n * 1.05], "title": {"text": "heads"}},
            "legend": {"orientation": "h", "y": 0.47, "yanchor": "top", "x": 0}}


def _sorted_heads(scores: np.ndarray, ok: np.ndarray, colors: tuple[str, str], hover: str, line: float,
                  line_name: str) -> list[dict]:
    """The top panel's traces: the heads' sorted scores, ``colors[0]`` where ``ok`` else ``colors[1]``, and the line."""
    n = len(scores)
    return [{"type": "bar", "x": list(range(1, n + 1)), "y": scores, "showlegend": False,
             "marker": {"color": [colors[0] if o else colors[1] for o in ok]},
             "hovertemplate": hover, "xaxis": "x", "yaxis": "y"},
            {"type": "scatter", "mode": "lines", "x": [0.5, n + 0.5], "y": [line, line], "name": line_name,
             "line": {"color": "#000000", "dash": "dash"}, "xaxis": "x", "yaxis": "y"}]


def _half_and_here(values: Sequence[float], n: int, value: float, count: int, color: str) -> list[dict]:
    """The bottom panel's line at half of the ``n`` heads, and the marker of this frame's count."""
    return [{"type": "scatter", "mode": "lines", "x": [values[0], values[-1]], "y": [n / 2, n / 2],
             "name": "half of the heads", "line": {"color": "#000000", "dash": "dot"}, "xaxis": "x2", "yaxis": "y2"},
            {"type": "scatter", "mode": "markers", "x": [value], "y": [count], "showlegend": False,
             "marker": {"size": 12, "color": color}, "xaxis": "x2", "yaxis": "y2"}]


def rule_mass_explorer(miss: Optional[np.ndarray] = None, uniform: Optional[np.ndarray] = None,
                       masses: Optional[Sequence[float]] = None) -> SliderFigure:
    r"""Chapter 5: the effective graph's mass, and the heads whose graph a fixed rule places.

    Examples
    --------
    >>> fig = rule_mass_explorer()
    >>> fig.labels[fig.flip], fig.verdict
    ('mass 0.8', 'learned-topology')
    """
    if miss is None or uniform is None:
        miss, uniform = load_rule_miss()
    miss, uniform = np.asarray(miss, dtype=float).ravel(), np.asarray(uniform, dtype=float).ravel()
    if miss.shape != uniform.shape or not miss.size:
        raise ValueError(f"miss has shape {miss.shape} and uniform {uniform.shape}; expected the same (heads,)")
    masses = [round(0.5 + 0.05 * i, 2) for i in range(10)] if masses is None else list(masses)
    if any(not 0 < m < 1 for m in masses):
        raise ValueError(f"masses {masses} must lie strictly between 0 and 1")
    n, order = miss.size, np.argsort(miss, kind="stable")  # (heads,) sorted by miss
    passed = placed_counts(miss, masses)  # (len(masses),) heads the rule places at each mass
    flip = rule_flip(miss, masses)
    frames = []
    for i, m in enumerate(masses):
        ok = miss[order] < round(1 - m, 12)
        frames.append({"data": [
            *_sorted_heads(miss[order], ok, ("#0072B2", "#E69F00"), "head %{x}: miss %{y:.3f}<extra></extra>",
                           1 - m, "1 − mass"),
            {"type": "scatter", "mode": "lines", "x": [0.5, n + 0.5], "y": [np.median(uniform)] * 2,
             "name": "uniform attention (median)", "line": {"color": "#777777", "dash": "dot"}, "xaxis": "x", "yaxis": "y"},
            {"type": "scatter", "mode": "lines+markers", "x": masses, "y": passed, "name": "heads placed by the rule",
             "line": {"color": "#0072B2"}, "xaxis": "x2", "yaxis": "y2"},
            *_half_and_here(masses, n, m, int(passed[i]), "#0072B2")],
            "readout": (f"Mass {m:g}: the effective graph keeps the keys holding {m:.0%} of each row and leaves out "
                        f"{1 - m:.2f}. The fixed rule, blind to the query's content, misses less than that on "
                        f"{int(passed[i])} of {n} heads (blue); the median head's miss is {np.median(miss):.2f}, "
                        f"uniform attention's {np.median(uniform):.2f}.")})
    layout = _heads_and_counts_layout("heads, sorted by the rule's miss", "weight missed (TV)", [0, 0.65],
                                      "mass m of the effective graph", n)

    def draw(fig, ax):
        ax.plot(masses, passed, "o-", color="#0072B2", label="heads the rule places")
        ax.axhline(n / 2, color="0.3", ls=":", label="half of the heads")
        ax.set(xlabel="mass m of the effective graph", ylabel=f"heads (of {n}) with miss < 1 − m",
               title="Where a fixed rule places the effective graph")
        ax.legend()

    return SliderFigure("ix-graph-rulemass", "How much of the weight does a fixed rule place?",
                        [f"mass {m:g}" for m in masses], frames, layout, static_fallback(draw),
                        "Number of MiniLM heads whose effective graph a fixed rule reproduces, against the mass "
                        "that defines the graph: it falls from all heads at half the mass to a few at 95%.",
                        start=flip if flip is not None else 0, control_label="mass of the effective graph",
                        flip=flip, flip_note=("from this mass on, the fixed rule misses more than the graph leaves "
                                              "out on most heads: their effective graph needs which query meets "
                                              "which key; below it, a fixed rule places most heads' graphs"),
                        verdict="learned-topology")


# ------------------------------------------------------------------ l-hops
def hops_explorer(summary: Mapping[tuple[int, int], Mapping[str, float]], n_nodes: int, T: int = 16,
                  window: int = 2, d_model: int = 4, max_layers: int = 4, max_hops: int = 4) -> SliderFigure:
    r"""Chapter 5: depth :math:`L`, reach under a banded mask and composition of lookups.

    Top: :func:`~attention_course.chapters.graphs.propagation.banded_stack_reach` at depth :math:`L`;
    bottom: held-out accuracy of :math:`k`-hop pointer chasing from ``summary``, ``(k, L) ->
    {"mean", "min", "max"}`` over seeds, on ``n_nodes`` nodes. Untrained pairs are left empty.

    Examples
    --------
    >>> s = {(1, 1): {"mean": 1.0, "min": 1.0, "max": 1.0}, (2, 1): {"mean": 0.4, "min": 0.3, "max": 0.5},
    ...      (2, 2): {"mean": 0.99, "min": 0.98, "max": 1.0}}
    >>> fig = hops_explorer(s, n_nodes=8, max_layers=3)
    >>> fig.labels, fig.labels[fig.flip]
    (['L = 1', 'L = 2', 'L = 3'], 'L = 2')
    """
    if n_nodes is None or n_nodes < 2:
        raise ValueError(f"n_nodes={n_nodes}: give the number of nodes of the stored runs (at least 2)")
    if not 1 <= window < T or max_layers < 1:
        raise ValueError(f"window={window}, T={T}, max_layers={max_layers}: need 1 <= window < T and max_layers >= 1")
    s, layers, ks = dict(summary), list(range(1, max_layers + 1)), list(range(1, max_hops + 1))
    band = banded_mask(T, window)  # (T, T)
    reach = banded_stack_reach(T, window, d_model, max_layers)  # (T, T) bool each, autograd
    flip = hops_flip(s, layers)
    frames = []
    for L, D in zip(layers, reach):
        tested = [k for k in ks if (k, L) in s]
        acc = [s[k, L]["mean"] if k in tested else None for k in ks]
        lo = [s[k, L]["mean"] - s[k, L]["min"] if k in tested else 0 for k in ks]
        hi = [s[k, L]["max"] - s[k, L]["mean"] if k in tested else 0 for k in ks]
        untested = [k for k in ks if k not in tested]
        predicted = receptive_field(band, L)
        frames.append({"data": [
            {"type": "heatmap", "z": D.astype(int), "colorscale": [[0, "#F2F2F2"], [1, "#0072B2"]], "showscale": False,
             "zmin": 0, "zmax": 1, "hovertemplate": "output %{y} depends on input %{x}: %{z}<extra></extra>",
             "xaxis": "x", "yaxis": "y"},
            {"type": "bar", "x": [f"k = {k}" for k in ks], "y": acc, "name": "held-out accuracy",
             "marker": {"color": "#882255"}, "error_y": {"type": "data", "symmetric": False, "array": hi,
                                                        "arrayminus": lo}, "xaxis": "x2", "yaxis": "y2"},
            {"type": "scatter", "mode": "lines", "x": [f"k = {ks[0]}", f"k = {ks[-1]}"], "y": [1 / n_nodes] * 2,
             "name": f"guess 1/n = {1 / n_nodes:.3f}", "line": {"color": "#000000", "dash": "dash"},
             "xaxis": "x2", "yaxis": "y2"}],
            "readout": (f"L = {L}: under a band of half-width {window} on {T} tokens an output depends on inputs up to "
                        f"{band_width(D)} positions away (measured; support of (A + I)<sup>L</sup>: "
                        f"{band_width(predicted)}{', the same' if np.array_equal(D, predicted) else ', which differs'}); "
                        f"without a mask one layer already reaches all {T - 1}. Pointer chasing on {n_nodes} nodes, "
                        "held-out accuracy " + ("; ".join(f"k = {k}: {s[k, L]['mean']:.2f} "
                                                            f"({s[k, L]['min']:.2f}–{s[k, L]['max']:.2f})"
                                                            for k in tested) or "—")
                        + (f"; not trained at this depth for k = {', '.join(map(str, untested))}" if untested else "")
                        + ".")})
    layout = {"height": 600, "margin": {"l": 55, "r": 10, "t": 10, "b": 45}, "font": PLOTLY_FONT,
              "xaxis": {"domain": [0.2, 0.8], "title": {"text": "input position j"}, "showgrid": False},
              "yaxis": {"domain": [0.52, 1], "autorange": "reversed", "title": {"text": "output i"},
                        "scaleanchor": "x", "showgrid": False},
              "xaxis2": {"domain": [0, 1], "anchor": "y2", "title": {"text": "hops k to chain"}},
              "yaxis2": {"domain": [0, 0.3], "anchor": "x2", "range": [0, 1.05], "title": {"text": "accuracy"}},
              "legend": {"orientation": "h", "y": 0.41, "yanchor": "top", "x": 0}}

    def draw(fig, ax):
        for k in ks:
            Ls = [L for L in layers if (k, L) in s]
            if Ls:
                ax.errorbar(Ls, [s[k, L]["mean"] for L in Ls], yerr=[[s[k, L]["mean"] - s[k, L]["min"] for L in Ls],
                            [s[k, L]["max"] - s[k, L]["mean"] for L in Ls]], marker="o", capsize=3, label=f"k = {k}",
                            color=("#0072B2", "#882255", "#E69F00", "#009E73")[(k - 1) % 4])
        ax.axhline(1 / n_nodes, color="0.3", ls="--", label="guess 1/n")
        if flip is not None:
            ax.axvline(layers[flip], color="0.7", lw=1)  # the flag
        ax.set(xlabel="layers L", ylabel="held-out accuracy", xticks=layers, ylim=(0, 1.05),
               title=f"k-hop pointer chasing (trained up to L = {max(L for _, L in s)}, k = {max(k for k, _ in s)})")
        ax.legend()

    return SliderFigure("ix-graph-hops", "Add layers: reach under a band, and chained lookups",
                        [f"L = {L}" for L in layers], frames, layout, static_fallback(draw),
                        "Held-out accuracy of k-hop pointer chasing against depth, 4 heads per layer: one layer "
                        "learns one hop, two layers learn two; deeper stacks and more hops were not trained.",
                        start=0, control_label="layers L", flip=flip,
                        flip_note="with 4 heads per layer two layers chain two lookups on every seed (held-out "
                                  "accuracy at least 0.9); one layer, with half the weights, does not in the same "
                                  "steps. Beyond two hops: not tested", verdict="l-hops")


# ------------------------------------------------------------------ depth-keeps-information
def load_probe_data(path: Path = PROBE_DATA) -> dict:
    """The stored probe accuracies, arrays in place of lists.

    Examples
    --------
    >>> d = load_probe_data()
    >>> d["stacks"]["+ skip"].shape, d["minilm"]["MiniLM"].shape
    ((3, 25), (4, 7))
    """
    d = read_json(path)
    d["stacks"] = {k: np.asarray(v, dtype=float) for k, v in d["stacks"].items()}
    d["minilm"] = {k: np.asarray(v, dtype=float) for k, v in d["minilm"].items()}
    return d


def probe_depth_explorer(data: Optional[Mapping] = None) -> SliderFigure:
    r"""Chapter 5: depth, and what a linear probe still reads back from each token's state.

    Random stacks' own-label accuracy (median over seeds) and MiniLM's neighbouring words, against
    guessing; flags where each random stack falls to guessing
    (:func:`~attention_course.chapters.graphs.depth_probe.guess_depth`), the verdict's at the last.

    Examples
    --------
    >>> fig = probe_depth_explorer()
    >>> fig.verdict, fig.labels[fig.flip]
    ('depth-keeps-information', 'depth 17')
    """
    d = load_probe_data() if data is None else data
    layers, chance, n_test = list(d["layers"]), float(d["chance"]), int(d["n_test_tokens"])
    med = {k: np.median(np.asarray(v, dtype=float), axis=0) for k, v in d["stacks"].items()}  # (depths,) each
    if any(len(v) != len(layers) for v in med.values()):
        raise ValueError(f"stacks have {[len(v) for v in med.values()]} depths; expected {len(layers)}")
    mini = {f"{name}, {what}": np.asarray(d["minilm"][name], dtype=float)[r]
            for name, rows in (("MiniLM", ((1, "previous word"), (2, "next word"))), ("scrambled", ((1, "previous word"),)))
            for r, what in rows}  # (7,) each: embeddings, then layers 1-6
    random = [k for k in med if "no exchange" not in k]
    falls = {k: guess_depth(d["stacks"][k], chance, n_test) for k in random}
    line = guessing_line(chance, n_test)
    curves = {**med, **mini}
    frames = []
    for i, L in enumerate(layers):
        traces = [{"type": "scatter", "mode": "lines", "x": layers[:len(v)], "y": v, "name": k,
                   "line": {"color": _COLORS[k], "dash": "dot" if k.startswith(("MiniLM", "scrambled")) else "solid"}}
                  for k, v in curves.items()]
        traces.append({"type": "scatter", "mode": "lines", "x": [layers[0], layers[-1]], "y": [chance, chance],
                       "name": "guess: each sequence's commonest label", "line": {"color": "#000000", "dash": "dash"}})
        traces.append({"type": "scatter", "mode": "markers", "x": [L] * sum(L < len(v) for v in curves.values()),
                       "y": [v[L] for v in curves.values() if L < len(v)], "showlegend": False,
                       "marker": {"size": 10, "color": [_COLORS[k] for k, v in curves.items() if L < len(v)]}})
        stack = "; ".join(f"{k} {med[k][i]:.2f}" for k in med)
        n_mini = len(mini["MiniLM, previous word"])
        trained = (f" MiniLM after layer {L}: previous word {mini['MiniLM, previous word'][L]:.2f}, next word "
                   f"{mini['MiniLM, next word'][L]:.2f} (scrambled: previous word "
                   f"{mini['scrambled, previous word'][L]:.2f})." if L < n_mini else
                   f" MiniLM has {n_mini - 1} layers.")
        frames.append({"data": traces, "readout": (
            f"Depth {L}: own label read back from random stacks (median of {np.asarray(d['stacks'][random[0]]).shape[0]} "
            f"seeds) — {stack}; guessing {chance:.2f} (within two standard errors: up to {line:.2f}).{trained}")})
    layout = {"height": 520, "margin": {"l": 55, "r": 10, "t": 10, "b": 45}, "font": PLOTLY_FONT,
              "xaxis": {"title": {"text": "depth (layers)"}}, "yaxis": {"title": {"text": "held-out probe accuracy"},
                                                                      "range": [0, 1.05]},
              "legend": {"orientation": "h", "y": -0.24, "yanchor": "top", "x": 0}}  # below the axis title
    order = sorted((k for k in random if falls[k] is not None), key=lambda k: falls[k])
    main = order[-1] if order else None

    def draw(fig, ax):
        for k, v in curves.items():
            ax.plot(layers[:len(v)], v, ":" if k.startswith(("MiniLM", "scrambled")) else "-", color=_COLORS[k], label=k)
        ax.axhline(chance, color="0.2", ls="--", label="guess")
        for k in order:
            ax.axvline(falls[k], color=_COLORS[k], ls=":", lw=1)  # the flags: at guessing from here
        ax.set(xlabel="depth (layers)", ylabel="held-out probe accuracy", ylim=(0, 1.05),
               title="What a linear probe reads back, by depth")
        fig.legend(loc="outside lower center", ncols=3)

    return SliderFigure("ix-graph-probedepth", "Go deeper: what a probe still reads back",
                        [f"depth {L}" for L in layers], frames, layout, static_fallback(draw, (6.4, 4.8)),
                        "Linear-probe accuracy against depth: random stacks fall to guessing, without skips by "
                        "layer 2, with skips by layer 16-17; in MiniLM the neighbouring words peak in the first layers and fade.",
                        start=0, control_label="depth", flip=falls[main] if main else None,
                        flip_note=(f"the last random stack ({main}) falls to guessing: depth alone keeps "
                                   "nothing") if main else "",
                        more_flips=[(falls[k], f"{k}: the probe falls to guessing") for k in order[:-1]],
                        verdict="depth-keeps-information")


# ------------------------------------------------------------------ unlike-gnns
def load_top_key_data(path: Path = TOP_KEY_DATA) -> tuple[np.ndarray, np.ndarray]:
    """The stored shares, median over the sentences: ``(shares, shares_words)``, each (72,) layer-major.

    Examples
    --------
    >>> shares, words = load_top_key_data()
    >>> shares.shape, bool((words <= shares + 0.5).all())
    ((72,), True)
    """
    d = read_json(path)
    return (np.median(np.asarray(d["shares"], dtype=float), axis=0),
            np.median(np.asarray(d["shares_words"], dtype=float), axis=0))


def top_key_explorer(shares: Optional[np.ndarray] = None, words: Optional[np.ndarray] = None,
                     lines: Optional[Sequence[float]] = None) -> SliderFigure:
    r"""Chapter 5: the line :math:`t` that makes a head static-like, and how many of MiniLM's heads are.

    Examples
    --------
    >>> fig = top_key_explorer()
    >>> fig.labels[fig.flip], fig.verdict
    ('line 0.9', 'unlike-gnns')
    """
    if shares is None or words is None:
        shares, words = load_top_key_data()
    shares, words = np.asarray(shares, dtype=float).ravel(), np.asarray(words, dtype=float).ravel()
    if shares.shape != words.shape or not shares.size:
        raise ValueError(f"shares has shape {shares.shape} and words {words.shape}; expected the same (heads,)")
    lines = [round(0.5 + 0.05 * i, 2) for i in range(10)] if lines is None else list(lines)
    if any(not 0 < t <= 1 for t in lines):
        raise ValueError(f"lines {lines} must lie in (0, 1]")
    n, order = shares.size, np.argsort(-shares, kind="stable")  # (heads,) most static first
    counts, counts_words = static_counts(shares, lines), static_counts(words, lines)  # (len(lines),) each
    flip = static_flip(shares, lines)
    frames = []
    for i, t in enumerate(lines):
        ok = shares[order] >= t - 1e-12
        frames.append({"data": [
            *_sorted_heads(shares[order], ok, ("#E69F00", "#0072B2"), "head %{x}: share %{y:.2f}<extra></extra>",
                           t, "line t"),
            {"type": "scatter", "mode": "lines+markers", "x": lines, "y": counts, "name": "static-like heads",
             "line": {"color": "#E69F00"}, "xaxis": "x2", "yaxis": "y2"},
            {"type": "scatter", "mode": "lines+markers", "x": lines, "y": counts_words,
             "name": "on the words alone", "line": {"color": "#777777", "dash": "dot"}, "xaxis": "x2", "yaxis": "y2"},
            *_half_and_here(lines, n, t, int(counts[i]), "#E69F00")],
            "readout": (f"Line {t:g}: a head is static-like, as every GAT head is, when at least {t:.0%} of its "
                        f"queries share one top key. {int(counts[i])} of {n} heads are (orange); "
                        f"{int(counts_words[i])} on the words alone, without [CLS] and [SEP].")})
    layout = _heads_and_counts_layout("heads, sorted by share", "share, one top key", [0, 1.05], "line t", n)

    def draw(fig, ax):
        ax.plot(lines, counts, "o-", color="#E69F00", label="static-like heads")
        ax.plot(lines, counts_words, "o:", color="#777777", label="on the words alone")
        ax.axhline(n / 2, color="0.3", ls=":", label="half of the heads")
        ax.set(xlabel="line t on the shared-top-key share", ylabel=f"heads (of {n}) with share ≥ t",
               title="How many MiniLM heads rank keys as GAT does?")
        ax.legend()

    return SliderFigure("ix-graph-topkey", "Where does a head count as static, like GAT?",
                        [f"line {t:g}" for t in lines], frames, layout, static_fallback(draw),
                        "Number of MiniLM heads in which at least a share t of the queries take one top key, against "
                        "t: most heads up to 0.85, fewer than half from 0.9; few on the words alone.",
                        start=lines.index(0.75) if 0.75 in lines else 0, control_label="line t",
                        flip=flip, flip_note=("from this line on, fewer than half of the heads are static-like even "
                                              "with [CLS] and [SEP] counted as keys; below it most heads send most "
                                              "queries to one key, mostly [CLS] or [SEP]: the sink heads, which the "
                                              "verdict counts apart"),
                        verdict="unlike-gnns")


def minilm_head_explorer(start: tuple[int, int] = (5, 11)) -> PickerFigure:
    """Every head of MiniLM on one short sentence; opens at ``start`` (layer, head), from 0.

    Chapter 4's :func:`attention_course.chapters.heads.sliders.stored_head_explorer`, as a lesson's figure.

    Examples
    --------
    >>> fig = minilm_head_explorer()
    >>> fig.labels[71], "Bears on" in str(fig.frames[0]["readout"])
    ('layer 6, head 12', False)
    """
    return stored_head_explorer(start=start, lesson=True)
