"""Serve plotly.js and the interactive figures' stylesheet from the book itself.

The chapters' interactive figures (``attention_course/figures/widgets.py``) are HTML fragments
that call ``window.Plotly`` and load no script of their own. This extension

* copies ``plotly.min.js`` from the installed plotly package into ``_static/plotly/`` (no CDN:
  the book must work with no network), and writes ``_static/ac_interactive.css``;
* adds a small loader (``_static/ac_interactive.js``) and the stylesheet **only to pages that
  contain an interactive figure** (found by the fragment's ``data-ac-plotly`` attribute);
* the loader fetches plotly.js (4.6 MB, 1.4 MB gzipped) only when a figure comes within
  600 px of the screen, so a first visit to the top of a chapter costs nothing extra and a
  reader who never scrolls to a figure never pays for it. Until then, and without
  JavaScript, the figure's static PNG is shown.
"""

from __future__ import annotations

import shutil
from pathlib import Path

MARKER = "data-ac-plotly"
PLOTLY = "plotly/plotly.min.js"
SCRIPT = "ac_interactive.js"
STYLE = "ac_interactive.css"

# window.acPlotly(root, start): call start() once plotly.js has loaded, fetching it (once per
# page) when root comes near the viewport. The widgets call it (attention_course/figures/widgets.py).
LOADER = """\
(function () {
  var here = document.currentScript && document.currentScript.src;
  var src = here ? here.replace(/ac_interactive\\.js(\\?.*)?$/, "plotly/plotly.min.js") : null;
  var loading = null;
  function load() {
    if (!loading) {
      loading = new Promise(function (resolve, reject) {
        if (window.Plotly) { resolve(); return; }
        var s = document.createElement("script");
        s.src = src; s.onload = resolve; s.onerror = reject;
        document.head.appendChild(s);
      });
    }
    return loading;
  }
  window.acPlotly = function (root, start) {
    var go = function () {
      load().then(start, function () { root.classList.add("ac-ix-static"); });
    };
    if (!src) { root.classList.add("ac-ix-static"); return; }
    if (!("IntersectionObserver" in window)) { go(); return; }
    var seen = new IntersectionObserver(function (entries) {
      if (entries.some(function (e) { return e.isIntersecting; })) { seen.disconnect(); go(); }
    }, {rootMargin: "600px 0px"});
    seen.observe(root);
  };
})();
"""

CSS = """\
.ac-interactive, .ac-predict { display: block; border: 1px solid var(--pst-color-border, #d0d7de); border-radius: .4rem;
  padding: .6rem .8rem; margin: 1rem 0; max-width: 100%; overflow-x: hidden; }
.ac-ix-title { font-weight: 600; margin-bottom: .3rem; }
.ac-ix-controls { flex-wrap: wrap; gap: .4rem .8rem; align-items: center; }
.ac-interactive.ac-ix-live .ac-ix-controls { display: flex !important; }
.ac-ix-controls input[type=range] { flex: 1 1 10rem; min-width: 8rem; }
.ac-ix-controls select { max-width: 100%; }
.ac-ix-value { font-variant-numeric: tabular-nums; font-weight: 600; }
.ac-ix-flip { font-size: .9em; color: var(--pst-color-warning, #b35900); }
.ac-ix-plot { width: 100%; }
.ac-ix-readout { margin: .4rem 0 0; }
.ac-ix-fallback { max-width: 100%; height: auto; }
.ac-predict-choices { display: flex; flex-wrap: wrap; gap: .4rem; }
.ac-predict button { border: 1px solid var(--pst-color-border, #8c959f); border-radius: .3rem;
  padding: .2rem .7rem; background: var(--pst-color-surface, #f6f8fa); color: inherit; }
.ac-predict button[aria-pressed=true] { background: var(--pst-color-primary, #0072B2); color: #fff; }
.ac-predict .ac-predict-reveal { font-weight: 600; }
@media print {
  .ac-ix-plot, .ac-ix-controls { display: none !important; }
  .ac-ix-fallback { display: block !important; }
}
"""


def _plotly_js() -> Path:
    import plotly  # noqa: PLC0415  (build-time only: the reader's page needs the file, not Python)

    path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    if not path.is_file():
        raise FileNotFoundError(f"plotly.min.js not found at {path}; reinstall plotly (requirements.txt)")
    return path


def _page_context(app, pagename, templatename, context, doctree):
    if MARKER in (context.get("body") or ""):
        app.add_js_file(SCRIPT)
        app.add_css_file(STYLE)


def _finished(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    static = Path(app.outdir) / "_static"
    (static / "plotly").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_plotly_js(), static / PLOTLY)
    (static / SCRIPT).write_text(LOADER, encoding="utf-8")
    (static / STYLE).write_text(CSS, encoding="utf-8")


def setup(app):
    _plotly_js()  # fail at the start of the build, not at its end
    app.connect("html-page-context", _page_context)
    app.connect("build-finished", _finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
