"""The book's interactive figures in headless Chromium, with the network blocked.

Run by `make test-site` after `make book`. For every page that carries an interactive figure
(``data-ac-plotly``), at a desktop and a phone width: plotly.js comes from the book itself,
every figure draws, shows no toolbar and no tick label over another label, a title or the
legend, with text of at least 9 px; moving each control changes the figure and its readout, the predict-then-
reveal boxes remember a prediction and reveal the measurement, the page does not scroll
sideways, and no JavaScript error is logged. Pages without a figure do not load plotly.
"""

from __future__ import annotations

import pytest

from test_site import HTML, PAGES, driver  # noqa: F401  (the shared Chromium fixture)

pytestmark = pytest.mark.site

PLOTLY_PAGES = [p for p in PAGES if "data-ac-plotly" in p.read_text(encoding="utf-8", errors="ignore")]
WIDTHS = (1280, 390)
MIN_PLOT_TEXT_PX = 9  # plotly draws text at its own px size, on a phone as on a laptop


def _open_offline(drv, page, width):
    drv.set_window_size(width, 1400)
    drv.execute_cdp_cmd("Network.enable", {})
    drv.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["http://*", "https://*", "ws://*", "wss://*"]})
    drv.get(page.as_uri())
    drv.get_log("browser")
    drv.refresh()
    drv.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "if (document.readyState === 'complete') setTimeout(() => done(true), 300);"
        "else window.addEventListener('load', () => setTimeout(() => done(true), 300));")


def test_some_pages_have_interactive_figures():
    assert len(PLOTLY_PAGES) >= 6, f"only {len(PLOTLY_PAGES)} pages with interactive figures in {HTML}"


def test_pages_without_figures_do_not_load_plotly():
    light = [p for p in PAGES if p not in PLOTLY_PAGES]
    heavy = [p.name for p in light if "ac_interactive.js" in p.read_text(encoding="utf-8", errors="ignore")]
    assert not heavy, f"the plotly loader is on pages without an interactive figure: {heavy}"
    eager = [p.name for p in PAGES if "plotly.min.js" in p.read_text(encoding="utf-8", errors="ignore")]
    assert not eager, f"plotly.js is loaded eagerly (it should wait for a figure to come near): {eager}"


# Bring each figure on screen (plotly.js loads when one comes near) and wait until all have drawn.
_SHOW_ALL = """
const done = arguments[arguments.length - 1];
const roots = [...document.querySelectorAll('.ac-interactive')];
let i = 0;
const next = () => {
  if (i < roots.length) { roots[i++].scrollIntoView(); setTimeout(next, 150); return; }
  const t0 = Date.now();
  const wait = () => roots.every(r => r.querySelector('.ac-ix-plot .main-svg')) || Date.now() - t0 > 15000
    ? done(roots.length) : setTimeout(wait, 100);
  wait();
};
next();
"""

# Readable as drawn: no plotly toolbar over the figure, no tick label over another or over an axis
# title or the legend. Each label is the quadrilateral its text box makes on the screen (rotated
# tick labels included: their bounding rectangles overlap where the glyphs do not); two labels
# collide when the quadrilaterals overlap by more than 2 px (separating-axis test): a text box
# carries a few px of leading above and below its glyphs, so boxes that share 2 px still read apart.
_LAYOUT = """
const quad = e => {
  const b = e.getBBox(), m = e.getScreenCTM();
  return [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height], [b.x, b.y + b.height]]
    .map(([x, y]) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f]);
};
const collide = (P, Q) => { let depth = Infinity;
  for (const poly of [P, Q]) for (let i = 0; i < 4; i++) {
    const [x1, y1] = poly[i], [x2, y2] = poly[(i + 1) % 4], len = Math.hypot(x2 - x1, y2 - y1);
    if (len === 0) continue;
    const n = [(y2 - y1) / len, (x1 - x2) / len], pa = P.map(p => p[0] * n[0] + p[1] * n[1]),
          pb = Q.map(p => p[0] * n[0] + p[1] * n[1]);
    depth = Math.min(depth, Math.min(Math.max(...pa), Math.max(...pb)) - Math.max(Math.min(...pa), Math.min(...pb)));
  }
  return depth > 2 ? depth.toFixed(1) : false;
};
const out = [];
for (const root of document.querySelectorAll('.ac-interactive')) {
  const texts = sel => [...root.querySelectorAll(sel)].filter(e => e.textContent.trim() && e.getBBox().width > 0)
                                                  .map(e => ({t: e.textContent.trim(), q: quad(e)}));
  const problems = [];
  const bar = root.querySelector('.modebar');
  if (bar && getComputedStyle(bar).display !== 'none' && bar.getBoundingClientRect().width > 0) problems.push('a toolbar is shown');
  const titles = texts('.infolayer g[class^="g-"][class$="title"] text');
  const legend = texts('.legend text');
  let smallest = Infinity;
  for (const e of root.querySelectorAll('.main-svg text')) {
    const px = parseFloat(getComputedStyle(e).fontSize); if (e.textContent.trim() && px < smallest) smallest = px;
  }
  for (const axis of ['x', 'y']) {
    const ticks = texts(`.${axis}tick text`);
    for (let i = 0; i < ticks.length; i++) {
      for (let j = i + 1; j < ticks.length; j++)
        if (collide(ticks[i].q, ticks[j].q)) problems.push(`tick labels ${ticks[i].t} and ${ticks[j].t} overlap`);
      for (const t of titles.concat(legend))
        if (collide(ticks[i].q, t.q)) problems.push(`tick label ${ticks[i].t} overlaps ${t.t}`);
    }
  }
  for (const t of titles) for (const l of legend)
    if (collide(t.q, l.q)) problems.push(`the title ${t.t} overlaps the legend entry ${l.t}`);
  out.push({id: root.id, problems: problems.slice(0, 6), smallest: smallest});
}
return out;
"""

_DRIVE = """
const out = [];
for (const root of document.querySelectorAll('.ac-interactive')) {
  const ctl = root.querySelector('#' + root.id + '-control');
  const before = [root.getAttribute('data-frame'), root.querySelector('.ac-ix-readout').textContent];
  const n = ctl.tagName === 'SELECT' ? ctl.options.length : parseInt(ctl.max, 10) + 1;
  const target = (parseInt(ctl.value, 10) + Math.max(1, Math.floor(n / 2))) % n;
  ctl.value = String(target);
  ctl.dispatchEvent(new Event(ctl.tagName === 'SELECT' ? 'change' : 'input', {bubbles: true}));
  out.push({id: root.id, live: root.classList.contains('ac-ix-live'),
            drawn: !!root.querySelector('.ac-ix-plot .main-svg'),
            fallbackHidden: getComputedStyle(root.querySelector('.ac-ix-fallback')).display === 'none',
            before: before, after: [root.getAttribute('data-frame'), root.querySelector('.ac-ix-readout').textContent],
            target: String(target), width: root.getBoundingClientRect().width});
}
return {plotly: !!window.Plotly, figures: out,
        scroll: document.documentElement.scrollWidth, inner: window.innerWidth};
"""

_PREDICT = """
const out = [];
for (const root of document.querySelectorAll('.ac-predict')) {
  const choice = root.querySelector('.ac-predict-choice');
  choice.click();
  root.querySelector('.ac-predict-reveal').click();
  let stored = null; try { stored = localStorage.getItem('ac-predict:' + root.id); } catch (e) {}
  out.push({id: root.id, pressed: choice.getAttribute('aria-pressed'), stored: stored, value: choice.value,
            shown: !root.querySelector('.ac-predict-answer').hidden,
            result: root.querySelector('.ac-predict-result').textContent});
}
return out;
"""


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("page", PLOTLY_PAGES, ids=lambda p: p.stem)
def test_interactive_figures_work_offline(driver, page, width):  # noqa: F811
    _open_offline(driver, page, width)
    before = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert not any(n.endswith("plotly.min.js") for n in before), "plotly.js loaded before any figure was near"
    driver.set_script_timeout(30)
    driver.execute_async_script(_SHOW_ALL)
    for f in driver.execute_script(_LAYOUT):
        assert not f["problems"], f"{page.stem} at {width} px, {f['id']}: {f['problems']}"
        assert f["smallest"] >= MIN_PLOT_TEXT_PX, (
            f"{page.stem} at {width} px, {f['id']}: text of {f['smallest']} px (at least {MIN_PLOT_TEXT_PX})")
    r = driver.execute_script(_DRIVE)
    assert r["plotly"], "plotly.js did not load from the book's _static folder"
    assert r["figures"], "no interactive figure on the page"
    for f in r["figures"]:
        assert f["live"] and f["drawn"] and f["fallbackHidden"], f"{f['id']} did not draw: {f}"
        assert f["after"][0] == f["target"] and f["after"] != f["before"], f"{f['id']}: the control changed nothing"
    assert r["scroll"] <= r["inner"] + 1, f"the page scrolls sideways at {width} px: {r['scroll']} > {r['inner']}"
    for p in driver.execute_script(_PREDICT):
        assert p["pressed"] == "true" and p["stored"] == p["value"], f"{p['id']}: prediction not remembered"
        assert p["shown"] and "prediction" in p["result"], f"{p['id']}: reveal failed: {p}"
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, f"JavaScript errors on {page.name}: {errors}"
