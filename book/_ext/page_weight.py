"""Sphinx extension: ship only the assets the built pages load, and load images lazily.

Every page's images get ``loading="lazy"`` (:func:`lazy_images`), so a first visit fetches
the figures in view, not all of a chapter's.

When an HTML build finishes, after sphinx-mathjax-offline has copied all of MathJax
3.2.2 into ``_static/mathjax`` (24 MB of a 41 MB site), this prunes ``_static``:

* **MathJax**: the pages load one combined component, ``mathjax_path``
  (``mathjax/tex-chtml.js``: TeX input, CHTML output, the menu). Kept with it is what
  that component can load on demand: the TeX extensions that ``autoload`` and
  ``\\require`` fetch for a macro outside the default packages
  (``input/tex/extensions``), the CHTML web fonts (``output/chtml/fonts/woff-v2``,
  each fetched only when a page uses it), and the accessibility modules that the
  maths menu loads when a reader turns them on (``a11y/`` and the speech rules in
  English, ``sre/mathmaps/{base,en,nemeth}.json``). Everything else goes: the other
  combined components, MathML and AsciiMath input, SVG output (the menu's
  "Renderer > SVG" switch is therefore unavailable offline), the speech rules of
  eleven other languages, and the Node.js builds.
* **Font Awesome**: pydata-sphinx-theme loads ``scripts/fontawesome.js`` on every
  page (1.45 MB: every Font Awesome icon as SVG paths, and code that swaps each
  ``<i class="fa-...">`` for an ``<svg>``). Its stylesheet already carries Font
  Awesome's web-font rules (an ``@font-face`` per style and a ``:before`` glyph for
  every icon), and the pages fetch those web fonts anyway (``fa-solid-900.woff2``,
  ``fa-brands-400.woff2``: 266 KB, cached across pages). The script is replaced by
  a one-line stub, so the same icons are drawn as font glyphs.
  The TrueType copies of those fonts (680 KB) go too: the ``@font-face`` rules
  list WOFF2 first, which every browser of the last eight years reads.
* **Source maps** (``*.map``, 3.4 MB) of the theme's minified scripts and styles:
  only a browser's developer tools ask for them.

The theme and MathJax are pinned by requirements.txt (Jupyter Book 1.x); if a new
release moves these files, nothing is pruned that is not found, and
``tests/book/test_page_weight.py`` and the browser test (``make test-site``) say so.
"""

from __future__ import annotations

import re
from pathlib import Path

#: Kept next to the combined component, relative to ``_static/mathjax``.
MATHJAX_ON_DEMAND = (
    "input/tex/extensions",  # autoload / \require
    "a11y",  # the menu's accessibility options
    "sre/mathmaps/base.json",
    "sre/mathmaps/en.json",
    "sre/mathmaps/nemeth.json",  # braille, the menu's default for English
)
#: Web fonts of each output jax (CHTML fetches them one by one; SVG builds its fonts into the component).
MATHJAX_FONTS = {"chtml": ("output/chtml/fonts/woff-v2",), "svg": ()}

FONTAWESOME_JS = "scripts/fontawesome.js"
FONTAWESOME_STUB = (
    "/* Font Awesome's SVG script is not shipped: its icons are drawn from the web fonts that the\n"
    "   theme's stylesheet declares (book/_ext/page_weight.py). */\n"
)
FONTAWESOME_TTF = "vendor/fontawesome/webfonts/*.ttf"
SOURCE_MAP_DIRS = ("scripts", "styles")


def mathjax_keep(component: str) -> tuple[str, ...]:
    """Paths under ``_static/mathjax`` that a page loading ``component`` may fetch.

    ``component`` is the combined component's file name, e.g. ``"tex-chtml.js"``.

    Examples
    --------
    >>> mathjax_keep("tex-chtml.js")[:2]
    ('tex-chtml.js', 'output/chtml/fonts/woff-v2')
    >>> mathjax_keep("tex-svg.js")[1]
    'input/tex/extensions'
    """
    output = "svg" if "svg" in component else "chtml"
    return (component, *MATHJAX_FONTS[output], *MATHJAX_ON_DEMAND)


def prune(root: Path, keep: tuple[str, ...]) -> int:
    """Delete every file under ``root`` that is neither in ``keep`` nor under a folder in it.

    Empty folders go too. Returns the bytes removed. Raises ``FileNotFoundError``
    when an entry of ``keep`` does not exist, so a new MathJax layout is noticed.
    """
    missing = [k for k in keep if not (root / k).exists()]
    if missing:
        raise FileNotFoundError(f"{root}: expected {missing} (has the MathJax layout changed?)")
    removed = 0
    for path in sorted(root.rglob("*"), reverse=True):  # children before their folders
        rel = path.relative_to(root).as_posix()
        kept = any(rel == k or rel.startswith(k + "/") or k.startswith(rel + "/") for k in keep)
        if path.is_file() and not kept:
            removed += path.stat().st_size
            path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()
    return removed


def replace_fontawesome(static: Path) -> int:
    """Swap the theme's Font Awesome script for a stub and drop the TrueType fonts; bytes saved."""
    saved = 0
    for ttf in static.glob(FONTAWESOME_TTF):
        if ttf.with_suffix(".woff2").is_file():  # only where the WOFF2 copy is there
            saved += ttf.stat().st_size
            ttf.unlink()
    script = static / FONTAWESOME_JS
    if script.is_file() and script.read_text(encoding="utf-8") != FONTAWESOME_STUB:
        saved += script.stat().st_size
        script.write_text(FONTAWESOME_STUB, encoding="utf-8")
        saved -= script.stat().st_size
    return saved


def drop_source_maps(static: Path) -> int:
    """Delete the theme's ``*.map`` files; bytes removed."""
    removed = 0
    for folder in SOURCE_MAP_DIRS:
        for path in (static / folder).glob("*.map"):
            removed += path.stat().st_size
            path.unlink()
    return removed


def _on_build_finished(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    from sphinx.util import logging

    static = Path(app.outdir) / "_static"
    mathjax_path = str(app.config.mathjax_path or "")
    saved = {}
    local = static / mathjax_path
    if mathjax_path and "://" not in mathjax_path and local.is_file():
        saved["MathJax"] = prune(local.parent, mathjax_keep(local.name))
    saved["Font Awesome"] = replace_fontawesome(static)
    saved["source maps"] = drop_source_maps(static)
    summary = ", ".join(f"{what} {size / 2**20:.1f} MiB" for what, size in saved.items())
    logging.getLogger(__name__).info(f"[page_weight] removed {summary}")


_IMG = re.compile(r"<img(?![^>]*\bloading=)")


def lazy_images(body: str) -> str:
    """Let the browser fetch each image only when it nears the screen (``loading="lazy"``).

    A chapter has 8-17 figures (1-1.6 MB); a reader arriving at the top downloads the ones
    in view, and the rest as they scroll.

    >>> lazy_images('<p><img src="a.png" alt="a"><img loading="eager" src="b.png"></p>')
    '<p><img loading="lazy" decoding="async" src="a.png" alt="a"><img loading="eager" src="b.png"></p>'
    """
    return _IMG.sub('<img loading="lazy" decoding="async"', body)


def _on_page_context(app, pagename, templatename, context, doctree) -> None:
    if context.get("body"):
        context["body"] = lazy_images(context["body"])


def setup(app):
    app.connect("html-page-context", _on_page_context)
    # after sphinx-mathjax-offline (default priority 500) has copied MathJax on build-finished
    app.connect("build-finished", _on_build_finished, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
