r"""Sphinx extension: drop duplicate <script> entries, and load MathJax on every page.

With Jupyter Book 1.0.4, Sphinx 7.4 and sphinx-thebe 0.3.1, the inline thebe
configuration (`const THEBE_JS_URL = ...`) is added to every page twice, and the
second `const` declaration is a JavaScript SyntaxError in the reader's browser.
This keeps the first copy of each identical script and drops the rest.

Sphinx also adds MathJax only to pages whose body has maths, but the sidebar of
every page shows chapter titles with maths in them (chapter 6's $1/\sqrt{d_k}$),
which stayed raw TeX on pages like the bibliography. The "always" asset policy
loads MathJax everywhere.
"""

from __future__ import annotations


def _key(script) -> tuple:
    attributes = getattr(script, "attributes", {}) or {}
    filename = getattr(script, "filename", script) or ""  # inline scripts: None or ""
    return (str(filename), tuple(sorted((k, str(v)) for k, v in attributes.items())))


def _dedupe(app, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    seen: set = set()
    unique = []
    for script in scripts:
        key = _key(script)
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"] = unique


def setup(app):
    app.set_html_assets_policy("always")
    app.connect("html-page-context", _dedupe, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
