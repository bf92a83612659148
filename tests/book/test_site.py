"""The built book in a real browser: every page of _build/html in headless Chromium.

Run by `make test-site` (after `make book`); `.ci/run` installs Debian's
chromium and chromium-driver first. Pages are opened from disk (file://), as a
learner opens the book on a train, so this also proves the maths renders with
no network. `SITE_HTML=/path/to/_build/html` tests another build.

Every chapter is also read at 1280 and 390 CSS px (a laptop and a phone): the page
must not scroll sideways; every figure needs a caption and alt text that is not a
file name, and must be shown large enough to read (see `test_figures_are_legible`);
no test code (`glue(`, `NBVAL_`, `assert`) may be visible; and a first visit must
stay under PAGE_BUDGET bytes. A full-page screenshot of each chapter at each width
lands in _build/screenshots/ (CI keeps them), with `page_weights.json`.
"""

from __future__ import annotations

import base64
import gzip
import html
import io
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from PIL import Image

from attention_course.course import expressions as ex
from attention_course.figures.style import DPI

pytestmark = pytest.mark.site

ROOT = Path(__file__).resolve().parents[2]
HTML = Path(os.environ.get("SITE_HTML", ROOT / "_build" / "html")).resolve()
SHOTS = HTML.parent / "screenshots"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
PAGES = sorted(
    p for p in HTML.rglob("*.html")
    if not any(part.startswith("_") for part in p.relative_to(HTML).parts)
    and p.name not in {"genindex.html", "search.html"}
) if HTML.is_dir() else []
CHAPTERS = [p for p in PAGES if re.match(r"\d\d_|ledger$", p.stem)]  # every notebook page
WIDTHS = (1280, 390)  # CSS px: a laptop, and a phone (iPhone 12-14)
# A first visit to a chapter, everything it fetches: HTML, CSS, scripts, images, the search
# index, icon fonts, as sent over the web: text files gzip-compressed (as GitHub Pages and
# every common server send them), images and WOFF2 fonts as they are. MathJax's fonts are
# counted apart: each is fetched only when a page uses its glyphs (all 23: 0.35 MB).
PAGE_BUDGET = 2 * 2**20
COMPRESSED = {".html", ".css", ".js", ".svg", ".json", ".txt"}
# Legibility: a figure's smallest text (10-pt ticks and legends, attention_course.figures.style)
# drawn at the PNG's own resolution must come out at 9 CSS px or more at 1280 px.
SMALLEST_PT, MIN_TEXT_PX = 10, 9.0
MIN_PHONE_TEXT_PX = 7.0  # on a phone, held closer: the smallest figure text, or the figure opens full size
# Elements that may be wider than the page because they scroll inside their own box.
SCROLL_BOXES = "div.highlight, div.math, mjx-container, .pst-scrollable-table-container, div.output"
# Until the chapters of issue 18 have every caption, figure, tag and image budget in place;
# strict=False shows which pages already pass (XPASS). Delete this marker when all do.
PENDING_ISSUE_18 = pytest.mark.xfail(strict=False, reason="issue 18: chapters still getting captions, figures and tags")

# Chromium flags for a closed network: without the background-networking ones it
# keeps trying (and failing) to reach Google's services.
FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1300,2000", "--allow-file-access-from-files"]


@pytest.fixture(scope="module")
def driver():
    if not HTML.is_dir():
        pytest.fail("_build/html is missing: run `make book` first")
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.fail("headless Chromium is missing: apt-get install chromium chromium-driver")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    drv.set_page_load_timeout(30)
    yield drv
    drv.quit()
    shutil.rmtree(profile, ignore_errors=True)


def _open(driver, page: Path):
    driver.get(page.as_uri())
    driver.get_log("browser")  # drop messages from earlier pages
    driver.refresh()
    _typeset(driver)


def _typeset(driver):
    """Wait until MathJax (if any) has typeset the page and its fonts have loaded."""
    driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "const fonts = () => document.fonts.ready.then(() => done(true));"
        "const wait = () => (window.MathJax && MathJax.startup && MathJax.startup.promise)"
        "  ? MathJax.startup.promise.then(fonts) : fonts();"
        "if (document.readyState === 'complete') wait(); else window.addEventListener('load', wait);"
    )


def test_there_are_pages():
    assert len(PAGES) >= 3, f"only {len(PAGES)} pages in {HTML}"


# Images carry loading="lazy": ask for every one now and wait (up to 10 s); returns those that failed.
_LOAD_ALL_IMAGES = (
    "const done = arguments[arguments.length - 1];"
    "const imgs = [...document.images]; imgs.forEach(i => { i.loading = 'eager'; });"
    "const bad = () => imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src);"
    "const t0 = Date.now();"
    "const wait = () => (bad().length === 0 || Date.now() - t0 > 10000) ? done(bad()) : setTimeout(wait, 100);"
    "wait();"
)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(HTML)))
def test_page_in_browser(driver, page):
    from selenium.webdriver.support.wait import WebDriverWait  # here: selenium (requirements.txt) is 0.6 s of every collection

    _open(driver, page)
    rel = page.relative_to(HTML)

    # 1. no JavaScript errors
    errors = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, f"{rel}: JavaScript errors: {errors}"

    # 2. maths rendered, and no raw TeX delimiters left in the visible text
    source = page.read_text(encoding="utf-8")
    has_math = 'class="math' in source or "\\(" in source
    if has_math:
        n_math = driver.execute_script("return document.querySelectorAll('mjx-container').length")
        assert n_math > 0, f"{rel}: the page has maths but MathJax rendered none"
    text = driver.execute_script("return document.querySelector('main').innerText")
    for raw in ("$$", "\\[", "\\begin{"):
        assert raw not in text, f"{rel}: raw TeX {raw!r} is visible"

    # 3. every image loads (images are lazy: ask for all of them now, and wait up to 10 s)
    driver.set_script_timeout(15)
    broken = driver.execute_async_script(_LOAD_ALL_IMAGES)
    assert not broken, f"{rel}: images that did not load: {broken}"

    # 4. solution dropdowns open on click
    buttons = driver.find_elements("css selector", "div.solution.dropdown button.toggle-button")
    for button in buttons:
        body = button.find_element("xpath", "./ancestor::div[contains(@class, 'solution')][1]")
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", button)
        assert "toggle-hidden" in body.get_attribute("class"), f"{rel}: solution starts open"
        button.click()
        assert "toggle-hidden" not in body.get_attribute("class"), f"{rel}: solution did not open"
        code = body.find_elements("css selector", "div.highlight")
        assert code, f"{rel}: a solution dropdown holds no code"
        WebDriverWait(driver, 5).until(lambda d: code[0].is_displayed(), f"{rel}: opened solution stays hidden")

    # 5. internal links resolve (file exists; fragment exists in the target)
    hrefs = driver.execute_script("return [...document.querySelectorAll('a[href]')].map(a => a.href)")
    for href in set(hrefs):
        url = urlparse(href)
        if url.scheme != "file":
            continue
        target = Path(unquote(url.path))
        assert target.exists(), f"{rel}: broken internal link {href}"
        if url.fragment and target.suffix == ".html":
            ids = set(re.findall(r'id="([^"]+)"', target.read_text(encoding="utf-8")))
            assert unquote(url.fragment) in ids, f"{rel}: link to missing anchor {href}"


_FIG_LINK = re.compile(r'<a class="reference internal" href="(?P<page>[^"#]*)#(?P<id>fig-[\w-]+)"[^>]*>'
                       r'<span class="std std-(?:ref|numref)">(?P<text>[^<]*)</span>')


def _caption_numbers(page: Path) -> dict[str, str]:
    return {m.group(1): m.group(2).strip() for m in re.finditer(
        r'id="(fig-[\w-]+)".{0,4000}?class="caption-number">([^<]*)<', page.read_text(encoding="utf-8"), re.S)}


@pytest.mark.parametrize("page", CHAPTERS, ids=lambda p: p.stem)
def test_figure_links_name_the_figure_they_lead_to(page):
    """Figure references are typed as {ref}`Fig. 6.2 <fig-x>` (so JupyterLab shows them too):
    each link's text must be the number the book gives the figure it leads to."""
    links = list(_FIG_LINK.finditer(page.read_text(encoding="utf-8")))
    assert links or "caption-number" not in page.read_text(encoding="utf-8"), f"{page.name}: no figure links"
    for m in links:
        target = (page.parent / m["page"]).resolve() if m["page"] else page
        number = _caption_numbers(target).get(m["id"])
        assert number is not None, f"{page.name}: no numbered figure {m['id']} in {target.name}"
        assert m["text"].strip() == number.rstrip(), f"{page.name}: link {m['text']!r} leads to {number!r} ({m['id']})"


@pytest.mark.parametrize("page", CHAPTERS, ids=lambda p: p.stem)
def test_inline_numbers_are_what_jupyterlab_shows(page):
    """The book renders each {eval}`value_of("name:fmt")` from the notebook's glue outputs; JupyterLab
    from the values stored beside the prose. The two lists must agree, in order."""
    nb = json.loads((ROOT / "book" / f"{page.stem}.ipynb").read_text(encoding="utf-8"))
    stored = {e["expression"]: e["result"]["data"]["text/plain"]
              for c in nb["cells"] for e in c.get("metadata", {}).get("user_expressions", [])}
    expected = [stored[f'value_of("{spec}")'] for c in nb["cells"] if c["cell_type"] == "markdown"
                for spec in ex.roles("".join(c["source"]))]
    shown = [html.unescape(t) for t in re.findall(r'<span class="pasted-text">([^<]*)</span>',
                                                  page.read_text(encoding="utf-8"))]
    assert shown == expected


def test_site_summary():
    """Page count and size, printed for the record (`pytest -s` shows them)."""
    size = sum(f.stat().st_size for f in HTML.rglob("*") if f.is_file())
    print(f"\n{len(PAGES)} pages, {size / 2**20:.1f} MiB in {HTML}")
    assert size > 0


def test_index_shows_one_figure_per_chapter(driver):
    """The chapter map on the index page: one loaded figure per chapter notebook, linked to it."""
    notebooks = sorted(p for p in (ROOT / "book").glob("[0-9][0-9]_*.ipynb") if not p.stem.endswith("_evidence"))  # lessons
    assert notebooks, "no chapter notebooks in book/"
    page = HTML / "book" / "intro.html"
    _open(driver, page)
    cards = driver.execute_script(
        "return [...document.querySelectorAll('.chapter-map .sd-card')].map(c => {"
        "  const img = c.querySelector('img'); const a = c.querySelector('a.sd-stretched-link');"
        "  return {href: a ? a.getAttribute('href') : null, alt: img ? img.alt : null,"
        "          loaded: img ? img.complete && img.naturalWidth > 0 : null,"
        "          shown: img ? img.getBoundingClientRect().width : 0,"
        "          left: Math.round(c.getBoundingClientRect().left)};"
        "})"
    )
    with_figure = {Path(c["href"]).stem: c for c in cards if c["alt"] is not None}
    assert sorted(with_figure) == [nb.stem for nb in notebooks], (
        f"figures on the index page for {sorted(with_figure)}, chapter notebooks {[nb.stem for nb in notebooks]}"
    )
    for stem, card in with_figure.items():
        number = int(stem[:2])
        assert card["loaded"], f"index page: the figure of {stem} did not load"
        assert card["shown"] > 150, f"index page: the figure of {stem} is only {card['shown']} px wide"
        assert card["alt"].startswith(f"Figure from chapter {number}: "), f"{stem}: alt text {card['alt']!r}"
    assert all(c["href"] for c in cards), "a chapter card links nowhere"
    assert len({c["left"] for c in cards}) == 2, "on a wide window the chapter map has two columns"

    # a phone-sized window: one column, nothing wider than the screen
    size = driver.get_window_size()
    try:
        driver.set_window_size(420, 900)
        lefts = driver.execute_script(
            "return [...document.querySelectorAll('.chapter-map .sd-card')]"
            ".map(c => Math.round(c.getBoundingClientRect().left))"
        )
        assert len(set(lefts)) == 1, f"narrow window: cards are not in one column ({sorted(set(lefts))})"
        overflow = driver.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"narrow window: the index page is {overflow} px wider than the window"
        SHOTS.mkdir(parents=True, exist_ok=True)
        driver.execute_script("document.querySelector('.chapter-map').scrollIntoView()")
        driver.save_screenshot(str(SHOTS / "intro_narrow.png"))
    finally:
        driver.set_window_size(size["width"], size["height"])


# --- every page at a laptop's and a phone's width ---------------------------------------------

_MEASURE = r"""
const article = document.querySelector('.bd-article') || document.querySelector('main');
const view = document.documentElement.clientWidth;
const boxes = arguments[0];
const describe = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '')
  + (el.className && typeof el.className === 'string' ? '.' + el.className.trim().split(/\s+/).join('.') : '')
  + ' "' + (el.textContent || '').trim().slice(0, 60) + '"';
const fixed = el => {
  for (let a = el; a; a = a.parentElement) if (getComputedStyle(a).position === 'fixed') return true;
  return false;
};
const wide = [...document.body.querySelectorAll('*')].filter(el => {
  const r = el.getBoundingClientRect();
  return r.width > 0 && r.right > view + 1 && !el.parentElement.closest(boxes) && !fixed(el);
});
const leaves = wide.filter(el => !wide.some(other => other !== el && el.contains(other)));
const images = [...article.querySelectorAll('img')].map(img => {
  const caption = img.closest('figure') && img.closest('figure').querySelector('figcaption');
  return {src: img.getAttribute('src'), alt: img.getAttribute('alt'),
          caption: caption ? caption.innerText.trim() : null,
          shown: img.getBoundingClientRect().width, natural: img.naturalWidth,
          zoom: img.closest('a.figure-zoom') ? img.closest('a.figure-zoom').getAttribute('href') : null};
});
const code = [...article.querySelectorAll('pre')].filter(p => p.checkVisibility()).map(p => p.innerText);
const clipped = [...article.querySelectorAll('div.cell_input pre, div.cell_output pre')]
  .filter(p => p.checkVisibility() && p.scrollWidth > p.clientWidth + 1)
  .map(p => ({hidden: p.scrollWidth - p.clientWidth, line: p.innerText.split('\n').reduce((a, b) => b.length > a.length ? b : a, '')}));
const maths = [...article.querySelectorAll('mjx-container[display="true"]')]
  .filter(m => m.checkVisibility() && m.scrollWidth > m.clientWidth + 1)
  .map(m => ({hidden: m.scrollWidth - m.clientWidth, text: m.textContent.slice(0, 60)}));
return {scroll: document.documentElement.scrollWidth, view: view, inner: window.innerWidth,
        wide: leaves.slice(0, 6).map(describe), images: images, text: article.innerText, code: code, clipped: clipped,
        maths: maths,
        height: document.documentElement.scrollHeight};
"""


def _requests(driver) -> list[str]:
    """file:// URLs the browser asked for since the performance log was last read."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            url = message["params"]["request"]["url"]
            if url.startswith("file://"):
                urls.append(url.split("?")[0].split("#")[0])
    return list(dict.fromkeys(urls))


SHOT_HEIGHT = 16000  # px per screenshot file: Chromium captures at most 16,384 px at once


def _screenshot(driver, stem: str, width: int, height: int) -> None:
    """The whole page as JPEGs of SHOT_HEIGHT px: ``stem.jpg``, then ``stem-2.jpg``... (PNG: tens of MB)."""
    for old in SHOTS.glob(f"{stem}*.jpg"):
        old.unlink()
    for part, top in enumerate(range(0, height, SHOT_HEIGHT), start=1):
        clip = {"x": 0, "y": top, "width": width, "height": min(SHOT_HEIGHT, height - top), "scale": 1}
        shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
            "format": "jpeg", "quality": 70, "captureBeyondViewport": True, "clip": clip})
        (SHOTS / (stem + (f"-{part}" if part > 1 else "") + ".jpg")).write_bytes(base64.b64decode(shot["data"]))


@pytest.fixture(scope="module")
def reading(driver):
    """``reading(page, width)``: the page laid out at ``width`` CSS px, measured once (cached).

    The phone width is emulated as a phone (``mobile``: overlay scroll bars, the page's
    viewport meta tag honoured); both widths get one device pixel per CSS pixel.
    """
    cache: dict = {}
    (SHOTS / "page_weights.json").unlink(missing_ok=True)  # this run's pages only

    def measure(page: Path, width: int) -> dict:
        if (page, width) not in cache:
            driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
                "width": width, "height": 900, "deviceScaleFactor": 1, "mobile": width < 600})
            try:
                driver.get_log("performance")  # drop the requests of earlier pages
                driver.get(page.as_uri())
                _typeset(driver)
                got = driver.execute_script(_MEASURE, SCROLL_BOXES)
                got["requests"] = _requests(driver)
                # the first visit is measured: now load the lazy images too, for the screenshot
                driver.set_script_timeout(15)
                driver.execute_async_script(_LOAD_ALL_IMAGES)
                SHOTS.mkdir(parents=True, exist_ok=True)
                _screenshot(driver, f"{page.stem}_{width}", width, got["height"])
            finally:
                driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
            cache[page, width] = got
        return cache[page, width]

    return measure


def _ids(page: Path) -> str:
    return page.stem


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("page", PAGES, ids=_ids)
def test_page_does_not_scroll_sideways(reading, page, width):
    """The document is no wider than the window; wide code, maths and tables scroll in their own box."""
    got = reading(page, width)
    assert got["scroll"] <= got["view"] + 1, (
        f"{page.stem} at {width} px: the page is {got['scroll']} px wide in a {got['view']}-px window; "
        f"widest elements outside a scrolling box: {got['wide']}")


def _is_file_name(alt: str) -> bool:
    return bool(re.search(r"\.(png|jpe?g|svg|gif|webp)$", alt, re.IGNORECASE) or re.fullmatch(r"[0-9a-f]{16,}", alt))



@pytest.mark.parametrize("page", CHAPTERS, ids=_ids)
def test_figures_have_captions_and_alt_text(reading, page):
    """Each image of the chapter sits in a <figure> with a <figcaption>, and has alt text that is not its file name."""
    images = reading(page, WIDTHS[0])["images"]
    bad = [f"{Path(i['src']).name}: alt {i['alt']!r}, caption {(i['caption'] or '')[:40]!r}" for i in images
           if not (i["alt"] or "").strip() or _is_file_name(i["alt"].strip()) or not i["caption"]]
    assert not bad, f"{page.stem}: {len(bad)} of {len(images)} figures lack a caption or real alt text: {bad}"


def _png_dpi(src: str, page: Path) -> float:
    """The resolution a PNG was drawn at (its pHYs chunk; matplotlib writes it), else the book's DPI."""
    if src.startswith("data:image/png;base64,"):  # an interactive figure's static fallback
        source = io.BytesIO(base64.b64decode(src.split(",", 1)[1]))
    else:
        source = (page.parent / unquote(src)).resolve()
    with Image.open(source) as image:
        dpi = image.info.get("dpi")
    return float(dpi[0]) if dpi else float(DPI)



@pytest.mark.parametrize("page", CHAPTERS, ids=_ids)
def test_figures_are_legible(reading, page):
    """At 1280 px, a figure's smallest text is shown at 9 CSS px or more.

    Text of ``SMALLEST_PT`` points in a PNG drawn at ``dpi`` is ``SMALLEST_PT * dpi / 72``
    image px tall; the browser scales the image by ``shown / natural`` width. 9 px is about
    the smallest text readable on a laptop screen at arm's length (WCAG has no minimum; 9-10
    px is the common floor for figure labels). With the book's style (7 in at 160 dpi,
    10-pt ticks) a full-column figure shows it at 688/1120 * 22.2 = 13.6 px.
    """
    images = [i for i in reading(page, WIDTHS[0])["images"] if i["shown"] > 0 and i["natural"] > 0]
    small = []
    for image in images:
        px = image["shown"] / image["natural"] * SMALLEST_PT * _png_dpi(image["src"], page) / 72
        if px < MIN_TEXT_PX:
            small.append(f"{Path(image['src']).name}: {px:.1f} px ({image['shown']:.0f} of {image['natural']} px)")
    assert not small, (f"{page.stem}: {len(small)} of {len(images)} figures show {SMALLEST_PT}-pt text "
                       f"below {MIN_TEXT_PX} px: {small}")



@pytest.mark.parametrize("page", CHAPTERS, ids=_ids)
def test_figures_are_legible_on_a_phone(reading, page):
    """At 390 px, a figure's smallest text is shown at 7 CSS px or more, or the figure opens full size when tapped.

    A tapped figure opens its own image file (book/_static/figure_zoom.js), where the browser shows
    it at full resolution: ``SMALLEST_PT * dpi / 72`` px, 22 px in the book's style.
    """
    small = []
    for image in (i for i in reading(page, 390)["images"] if i["shown"] > 0 and i["natural"] > 0):
        px = image["shown"] / image["natural"] * SMALLEST_PT * _png_dpi(image["src"], page) / 72
        if px < MIN_PHONE_TEXT_PX and image["zoom"] != image["src"]:
            small.append(f"{Path(image['src']).name}: {px:.1f} px, and tapping it opens {image['zoom']!r}")
    assert not small, f"{page.stem} at 390 px: {len(small)} figures are too small to read: {small}"


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("page", CHAPTERS, ids=_ids)
def test_no_code_line_or_output_is_clipped(reading, page, width):
    """Every line of code and of printed output fits its box (they wrap), so a check's feedback is read in full."""
    clipped = reading(page, width)["clipped"]
    assert not clipped, (f"{page.stem} at {width} px: {len(clipped)} code or output boxes hide part of a line, "
                         f"e.g. {clipped[0]['hidden']} px of {clipped[0]['line'][:80]!r}")


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("page", CHAPTERS, ids=_ids)
def test_every_display_equation_fits_the_column(reading, page, width):
    """A displayed equation may scroll inside its box, but then a phone reader sees only part of it: split it
    over lines (aligned, gathered) instead. Measured in the browser: the box's scrollWidth against its width."""
    maths = reading(page, width)["maths"]
    assert not maths, (f"{page.stem} at {width} px: {len(maths)} display equations are wider than the column, "
                       f"e.g. by {maths[0]['hidden']} px: {maths[0]['text']!r}")


@pytest.mark.parametrize("page", CHAPTERS, ids=_ids)
def test_no_test_code_is_visible(reading, page):
    """Glue, nbval and assert lines are tagged off the page or hidden behind a toggle."""
    got = reading(page, WIDTHS[0])
    found = [marker for marker in ("glue(", "NBVAL_") if marker in got["text"]]
    asserts = [line.strip() for block in got["code"] for line in block.splitlines() if re.match(r"\s*assert\s", line)]
    assert not found and not asserts, f"{page.stem}: visible test code: {found} {asserts[:5]}"


def _weight(urls: list[str]) -> dict[str, dict[str, int]]:
    """Bytes of the files a page fetched, by kind: ``{"disk": ..., "sent": ...}`` (sent: gzip for text)."""
    kinds = {".html": "html", ".css": "css", ".js": "js", ".png": "images", ".svg": "images",
             ".jpg": "images", ".woff": "fonts", ".woff2": "fonts", ".ttf": "fonts"}
    weight: dict[str, dict[str, int]] = {"disk": {}, "sent": {}}
    for url in urls:
        path = Path(unquote(urlparse(url).path))
        if not path.is_file():
            continue
        kind = kinds.get(path.suffix, "other")
        if kind == "fonts" and "/mathjax/" in url:
            kind = "mathjax fonts"
        data = path.read_bytes()
        sent = len(gzip.compress(data, compresslevel=6)) if path.suffix in COMPRESSED else len(data)
        for how, size in (("disk", len(data)), ("sent", sent)):
            weight[how][kind] = weight[how].get(kind, 0) + size
    return weight



@pytest.mark.parametrize("page", CHAPTERS, ids=_ids)
def test_page_weight(reading, page):
    """A first visit to a chapter sends at most PAGE_BUDGET bytes (MathJax fonts apart); see page_weights.json."""
    weight = _weight(reading(page, WIDTHS[0])["requests"])
    total = {how: sum(v for k, v in kinds.items() if k != "mathjax fonts") for how, kinds in weight.items()}
    record = SHOTS / "page_weights.json"
    table = json.loads(record.read_text()) if record.is_file() else {}
    table[page.stem] = {"total without MathJax fonts": total, **weight}
    record.write_text(json.dumps(table, indent=1, sort_keys=True))
    kinds = ", ".join(f"{k} {v / 1024:.0f} KiB" for k, v in sorted(weight["disk"].items()))
    print(f"\n{page.stem}: sent {total['sent'] / 2**20:.2f} MiB, on disk {total['disk'] / 2**20:.2f} MiB ({kinds})")
    assert total["sent"] <= PAGE_BUDGET, f"{page.stem}: a first visit sends {total['sent'] / 2**20:.2f} MiB: {weight}"
