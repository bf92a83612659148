"""Interactive figures that need no kernel and no network: HTML, a little JavaScript, plotly.

Every figure is precomputed on a grid and written as deterministic HTML (numbers rounded to 4
significant digits) with plotly.js from the book's ``_static`` and a PNG fallback:
:class:`SliderFigure`, :class:`PickerFigure` and :class:`PredictReveal`.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from .style import DPI, book_style

__all__ = ["rounded", "to_json", "png_data_uri", "SliderFigure", "PickerFigure", "PredictReveal",
           "PLOTLY_MARKER"]

#: Every interactive figure's HTML carries this attribute; the book loads plotly.js on those pages only.
PLOTLY_MARKER = "data-ac-plotly"
_NAME = re.compile(r"^ix-[a-z0-9-]+$")


def rounded(obj: Any, digits: int = 4) -> Any:
    """``obj`` with every float rounded to ``digits`` significant digits; arrays become lists.

    NaN and infinities become ``None`` (JSON has no NaN; plotly leaves a gap).

    Examples
    --------
    >>> rounded({"y": np.array([1 / 3, 2e-7, np.nan]), "n": 3})
    {'y': [0.3333, 2e-07, None], 'n': 3}
    """
    if isinstance(obj, np.ndarray):
        return rounded(obj.tolist(), digits)
    if isinstance(obj, Mapping):
        return {str(k): rounded(v, digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [rounded(v, digits) for v in obj]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        x = float(obj)
        if not math.isfinite(x):
            return None
        return 0.0 if x == 0 else float(f"{x:.{digits}g}")
    return obj


def to_json(obj: Any, digits: int = 4) -> str:
    """Compact, sorted, rounded JSON, safe inside a ``<script>`` element.

    Examples
    --------
    >>> to_json({"b": [0.123456], "a": "</script>"})
    '{"a":"<\\\\/script>","b":[0.1235]}'
    """
    text = json.dumps(rounded(obj, digits), sort_keys=True, separators=(",", ":"), allow_nan=False)
    return text.replace("</", "<\\/")


def png_data_uri(fig: Figure) -> str:
    """The figure as a ``data:image/png;base64,...`` URI (deterministic: no timestamp metadata).

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig = plt.figure(figsize=(1, 1), dpi=50)
    >>> png_data_uri(fig).startswith("data:image/png;base64,")
    True
    >>> plt.close(fig)
    """
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _check_name(name: str) -> str:
    if not _NAME.match(name):
        raise ValueError(f"interactive figure name {name!r} must look like ix-<chapter>-<what> "
                         f"(lowercase letters, digits, hyphens)")
    return name


# No toolbar: on a phone plotly's mode bar sits over the legend and the title, and a course
# figure has nothing to zoom or pan that its control does not already do.
_CONFIG = {"displayModeBar": False, "responsive": True}

# The shared script: draw frame i, keep the readout in step, fall back to the PNG without plotly.
# plotly.js (1.4 MB gzipped) is fetched only when a figure comes near the screen: the book's
# loader, window.acPlotly (book/_ext/interactive.py), calls start() once it has arrived.
_JS = """(function(){var root=document.getElementById("%(name)s");if(!root)return;
var spec=JSON.parse(document.getElementById("%(name)s-data").textContent);
var plot=document.getElementById("%(name)s-plot"),out=document.getElementById("%(name)s-readout");
var ctl=document.getElementById("%(name)s-control"),val=document.getElementById("%(name)s-value");
function show(i){var f=spec.frames[i];
 var layout=Object.assign({},spec.layout,f.layout||{});
 Plotly.react(plot,f.data,layout,spec.config);
 if(out)out.innerHTML=f.readout||"";if(val)val.textContent=spec.labels[i];
 root.setAttribute("data-frame",String(i));}
function start(){root.classList.add("ac-ix-live");root.querySelector(".ac-ix-controls").style.display="";
 root.querySelector(".ac-ix-fallback").style.display="none";
 ctl.addEventListener("input",function(){show(parseInt(ctl.value,10));});
 ctl.addEventListener("change",function(){show(parseInt(ctl.value,10));});
 show(parseInt(ctl.value,10));%(extra)s}
if(window.Plotly){start();}else if(window.acPlotly){window.acPlotly(root,start);}
else{root.classList.add("ac-ix-static");}})();"""


@dataclass
class _Frames:
    name: str
    title: str
    labels: Sequence[str]
    frames: Sequence[Mapping[str, Any]]
    layout: Mapping[str, Any]
    fallback: Figure
    alt: str
    start: int = 0
    note: str = ""
    extra_js: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        _check_name(self.name)
        if len(self.labels) != len(self.frames) or not self.frames:
            raise ValueError(f"{self.name}: {len(self.labels)} labels for {len(self.frames)} frames; "
                             "need one label per frame and at least one frame")
        if not 0 <= self.start < len(self.frames):
            raise ValueError(f"{self.name}: start={self.start} outside 0..{len(self.frames) - 1}")
        for i, fr in enumerate(self.frames):
            if "data" not in fr:
                raise ValueError(f"{self.name}: frame {i} has no 'data' (a list of plotly traces)")

    def _fallback_uri(self) -> str:
        # Drawn once: a second savefig of a constrained-layout figure can move things by a pixel.
        if not hasattr(self, "_png"):
            self._png = png_data_uri(self.fallback)
        return self._png

    def _spec(self) -> str:
        return to_json({"frames": list(self.frames), "layout": dict(self.layout),
                        "labels": list(self.labels), "config": _CONFIG})

    def _control(self) -> str:
        raise NotImplementedError

    def to_html(self) -> str:
        """The figure's HTML fragment (deterministic; loads no script of its own)."""
        n, e = self.name, html.escape
        first = self.frames[self.start]
        return (
            f'<figure class="ac-interactive" id="{n}" {PLOTLY_MARKER}="1" data-frame="{self.start}">\n'
            f'<figcaption class="ac-ix-title">{e(self.title)}</figcaption>\n'
            f'<div class="ac-ix-controls" style="display:none">{self._control()}'
            f'<output class="ac-ix-value" id="{n}-value" for="{n}-control">{e(self.labels[self.start])}</output>'
            f'{self.note}</div>\n'
            f'<div class="ac-ix-plot" id="{n}-plot"></div>\n'
            f'<p class="ac-ix-readout" id="{n}-readout" aria-live="polite">{first.get("readout", "")}</p>\n'
            f'<img class="ac-ix-fallback" src="{self._fallback_uri()}" alt="{e(self.alt)}">\n'
            f'<script type="application/json" id="{n}-data">{self._spec()}</script>\n'
            f'<script>{_JS % {"name": n, "extra": self.extra_js}}</script>\n</figure>'
        )

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        return {"text/html": self.to_html(),
                "text/plain": f"[interactive figure {self.name}: {self.title}; {len(self.frames)} frames]"}


class SliderFigure(_Frames):
    """One plotly figure per value of a condition, and a range input that moves between them.

    ``frames[i]`` is ``{"data": [plotly traces], "layout": {optional overrides}, "readout": html}``;
    ``labels[i]`` names the value (``"β = 1.0"``). ``flip`` (an index) and ``more_flips``
    (``(index, note)`` pairs) mark where a verdict changes; ``verdict`` (a claim id) links each flag
    to its box.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fb = plt.figure(figsize=(2, 1))
    >>> frames = [{"data": [{"type": "bar", "y": [b, 1 - b]}], "readout": f"p = {b}"} for b in (0.2, 0.8)]
    >>> s = SliderFigure("ix-demo", "Demo", ["0.2", "0.8"], frames, {}, fb, "two bars", flip=1,
    ...                  flip_note="the verdict flips here")
    >>> h = s.to_html()
    >>> 'type="range"' in h and 'max="1"' in h and "the verdict flips here" in h
    True
    >>> s.to_html() == h  # deterministic
    True
    >>> v = SliderFigure("ix-demo", "Demo", ["0.2", "0.8"], frames, {}, fb, "two bars", flip=1,
    ...                  flip_note="flips", verdict="low-rank").to_html()
    >>> 'data-verdict="low-rank"' in v and 'href="#claim-low-rank"' in v
    True
    >>> plt.close(fb)
    """

    def __init__(self, name, title, labels, frames, layout, fallback, alt, start=0, control_label="",
                 flip: Optional[int] = None, flip_note: str = "", more_flips: Sequence[tuple[int, str]] = (),
                 verdict: str = ""):
        flips = ([(flip, flip_note)] if flip is not None else []) + list(more_flips)
        for i, _ in flips:
            if not 0 <= i < len(frames):
                raise ValueError(f"{name}: flip={i} outside 0..{len(frames) - 1}")
        if verdict and not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", verdict):
            raise ValueError(f"{name}: verdict={verdict!r} is not a claim id like 'low-rank'")
        tag = f' data-verdict="{verdict}"' if verdict else ""
        link = f' <a class="ac-ix-verdict" href="#claim-{verdict}">(verdict)</a>' if verdict else ""
        note = "".join(f'<span class="ac-ix-flip" data-flip="{i}"{tag}>&#9873; {html.escape(labels[i])}: '
                       f'{html.escape(text)}{link}</span>' for i, text in flips)
        self.control_label, self.flip, self.flips, self.verdict = control_label, flip, flips, verdict
        super().__init__(name, title, labels, frames, layout, fallback, alt, start, note)

    def _control(self) -> str:
        n = self.name
        ticks = ""
        if self.flips:
            ticks = (f'<datalist id="{n}-ticks">' + "".join(f'<option value="{i}"></option>' for i, _ in self.flips)
                     + "</datalist>")
        return (f'<label for="{n}-control">{html.escape(self.control_label)}</label>'
                f'<input type="range" id="{n}-control" min="0" max="{len(self.frames) - 1}" step="1" '
                f'value="{self.start}"' + (f' list="{n}-ticks"' if ticks else "") + f'>{ticks}')


class PickerFigure(_Frames):
    """One plotly figure per menu entry (e.g. each layer x head), chosen with a ``<select>``.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fb = plt.figure(figsize=(2, 1))
    >>> frames = [{"data": [{"type": "heatmap", "z": [[i]]}]} for i in range(3)]
    >>> h = PickerFigure("ix-pick", "Heads", ["L1 H1", "L1 H2", "L1 H3"], frames, {}, fb, "heatmaps",
    ...                  control_label="head").to_html()
    >>> h.count("<option") == 3 and "<select" in h
    True
    >>> plt.close(fb)
    """

    def __init__(self, name, title, labels, frames, layout, fallback, alt, start=0, control_label="",
                 extra_js: str = ""):
        self.control_label = control_label
        super().__init__(name, title, labels, frames, layout, fallback, alt, start, "", extra_js)

    def _control(self) -> str:
        n = self.name
        opts = "".join(f'<option value="{i}"' + (" selected" if i == self.start else "") +
                       f">{html.escape(lab)}</option>" for i, lab in enumerate(self.labels))
        return (f'<label for="{n}-control">{html.escape(self.control_label)}</label>'
                f'<select id="{n}-control">{opts}</select>')


_PREDICT_JS = """(function(){var root=document.getElementById("%(name)s");if(!root)return;
var key="ac-predict:%(name)s",ans=root.querySelector(".ac-predict-answer"),res=root.querySelector(".ac-predict-result");
var correct=root.getAttribute("data-correct");root.classList.add("ac-predict-live");
function mark(){var p=null;try{p=localStorage.getItem(key);}catch(e){}
 root.querySelectorAll(".ac-predict-choice").forEach(function(b){b.setAttribute("aria-pressed",String(b.value===p));});return p;}
root.querySelectorAll(".ac-predict-choice").forEach(function(b){b.addEventListener("click",function(){
 try{localStorage.setItem(key,b.value);}catch(e){}mark();});});
root.querySelector(".ac-predict-reveal").addEventListener("click",function(){var p=mark();ans.hidden=false;
 res.textContent=p===null?"You did not commit to a prediction.":(p===correct?"Your prediction matched.":
 "Your prediction did not match: the measurement says otherwise.");});
mark();})();"""


@dataclass
class PredictReveal:
    """Ask for a prediction before an experiment; reveal the measurement on request.

    The choice is remembered in ``localStorage``; without JavaScript the answer is written out.

    Examples
    --------
    >>> p = PredictReveal("ix-predict-demo", "Will the row saturate?", ["yes", "no"], "yes",
    ...                   "It does: the largest weight is 0.99.")
    >>> h = p.to_html()
    >>> h.count('class="ac-predict-choice"') == 2 and 'data-correct="yes"' in h
    True
    """

    name: str
    question: str
    choices: Sequence[str]
    correct: str
    answer_html: str

    def __post_init__(self) -> None:
        _check_name(self.name)
        if self.correct not in self.choices:
            raise ValueError(f"{self.name}: correct answer {self.correct!r} is not among the choices "
                             f"{list(self.choices)}")

    def to_html(self) -> str:
        """The fragment: question, choice buttons, a reveal button, the answer (hidden until asked)."""
        e, n = html.escape, self.name
        buttons = "".join(f'<button type="button" class="ac-predict-choice" value="{e(c)}" '
                          f'aria-pressed="false">{e(c)}</button>' for c in self.choices)
        return (f'<div class="ac-predict" id="{n}" data-correct="{e(self.correct)}">\n'
                f'<p class="ac-predict-q"><strong>Predict first.</strong> {e(self.question)}</p>\n'
                f'<div class="ac-predict-choices" role="group" aria-label="your prediction">{buttons}'
                f'<button type="button" class="ac-predict-reveal">Reveal the measurement</button></div>\n'
                f'<div class="ac-predict-answer" hidden><p>{self.answer_html}</p>'
                f'<p class="ac-predict-result" aria-live="polite"></p></div>\n'
                f'<noscript><p>{self.answer_html}</p></noscript>\n'
                f'<script>{_PREDICT_JS % {"name": n}}</script>\n</div>')

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        return {"text/html": self.to_html(), "text/plain": f"Predict first: {self.question}"}


PLOTLY_AXIS = {"showgrid": False, "zeroline": False}


PLOTLY_FONT = {"size": 13}


def static_fallback(draw, figsize=(6.4, 3.4)):
    with book_style():
        fig, ax = plt.subplots(figsize=figsize, layout="constrained", dpi=DPI)
        draw(fig, ax)
    plt.close(fig)  # only its PNG is kept; do not display it twice in a notebook
    return fig
