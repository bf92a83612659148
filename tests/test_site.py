"""The built book in a real browser: every page of _build/html in headless Chromium.

Run by `make test-site` (after `make book`); `.ci/run` installs Debian's
chromium and chromium-driver first. Pages are opened from disk (file://), as a
learner opens the book on a train, so this also proves the maths renders with
no network. Screenshots of each chapter land in _build/screenshots/ for review.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from selenium.webdriver.support.wait import WebDriverWait  # noqa: E402  (selenium: requirements.txt)

pytestmark = pytest.mark.site

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
SHOTS = ROOT / "_build" / "screenshots"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
PAGES = sorted(
    p for p in HTML.rglob("*.html")
    if not any(part.startswith("_") for part in p.relative_to(HTML).parts)
    and p.name not in {"genindex.html", "search.html"}
) if HTML.is_dir() else []
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
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    drv.set_page_load_timeout(30)
    yield drv
    drv.quit()
    shutil.rmtree(profile, ignore_errors=True)


def _open(driver, page: Path):
    driver.get(page.as_uri())
    driver.get_log("browser")  # drop messages from earlier pages
    driver.refresh()
    # wait until MathJax (if any) has typeset the page
    driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "const wait = () => (window.MathJax && MathJax.startup && MathJax.startup.promise)"
        "  ? MathJax.startup.promise.then(() => done(true)) : done(false);"
        "if (document.readyState === 'complete') wait(); else window.addEventListener('load', wait);"
    )


def test_there_are_pages():
    assert len(PAGES) >= 3, f"only {len(PAGES)} pages in {HTML}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(HTML)))
def test_page_in_browser(driver, page):
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

    # 3. every image loads
    broken = driver.execute_script(
        "return [...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)"
    )
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

    # screenshots of the chapters, for review
    if rel.parts[0] == "book":
        SHOTS.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(SHOTS / (rel.stem + ".png")))


def test_site_summary():
    """Page count and size, printed for the record (`pytest -s` shows them)."""
    size = sum(f.stat().st_size for f in HTML.rglob("*") if f.is_file())
    print(f"\n{len(PAGES)} pages, {size / 2**20:.1f} MiB in {HTML.relative_to(ROOT)}")
    assert size > 0


def test_index_shows_one_figure_per_chapter(driver):
    """The chapter map on the index page: one loaded figure per chapter notebook, linked to it."""
    notebooks = sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb"))
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
