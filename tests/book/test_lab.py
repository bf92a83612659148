"""Each chapter opened in JupyterLab (with jupyterlab-myst), in headless Chromium (issue 18).

Run by `make test-site`. A learner who runs `make lab` and opens a chapter should read what
the book shows: verdict boxes, exercises, glossary links and maths rendered, every number
the book quotes (not a glue key or a role), figures referred to by number. For each chapter,
before any cell is run: every markdown cell renders through MyST, no raw MyST markup or
inline-number role is left in the rendered text, each cell shows the numbers stored for its
``{eval}`` roles, no cross-reference is unresolved, and each interactive figure shows its
static picture (Lab does not load plotly.js). Citations are the one known gap:
jupyterlab-myst does not read bibliographies yet (jupyter-book/jupyterlab-myst#127), so a
citation shows its key (vaswani2017);
the test checks that each such key is one of the book's references.
Screenshots go to _build/screenshots/lab-<chapter>.png.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from test_site import CHROMEDRIVER, CHROMIUM, FLAGS, ROOT, SHOTS

pytestmark = pytest.mark.site

NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))
BIB_KEYS = set(re.findall(r"@\w+\{([^,]+),", (ROOT / "book" / "references.bib").read_text(encoding="utf-8")))
# What must not survive rendering: a MyST role or directive fence, or an inline-number expression.
RAW = re.compile(r"\{[a-z][a-z:-]*\}`|^:::|^```\{|value_of\(")
# The name inside an inline-number role, {eval}`value_of("name:fmt")` or myst-nb's {glue:text}`name:fmt`.
GLUE_NAME = re.compile(r'(?:\{eval\}`value_of\("|\{glue(?::\w+)?\}`)([A-Za-z_]\w*)')
VISIBLE = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-MarkdownCell"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab():
    """A JupyterLab server on a copy of book/ (nothing it writes lands in the repository)."""
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.fail("headless Chromium is missing: apt-get install chromium chromium-driver")
    jupyter = Path(sys.executable).with_name("jupyter")
    ext = subprocess.run([str(jupyter), "labextension", "list"], capture_output=True, text=True)
    if not re.search(r"jupyterlab-myst v\S+ \S*enabled\S* \S*OK", ext.stdout + ext.stderr):
        pytest.fail("jupyterlab-myst is not installed and enabled (pip install -r requirements.txt):\n"
                    + ext.stdout + ext.stderr)
    work = Path(tempfile.mkdtemp(prefix="lab-test-"))
    root = work / "book"
    shutil.copytree(ROOT / "book", root, ignore=shutil.ignore_patterns("_build", ".ipynb_checkpoints"))
    settings = work / "settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    # Render every cell now, not only those scrolled into view (JupyterLab 4 windows long notebooks).
    (settings / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    port = _free_port()
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(work / "config"))
    log = open(work / "lab.log", "w")
    server = subprocess.Popen(
        [str(jupyter), "lab", "--no-browser", f"--port={port}", "--ServerApp.token=", "--ServerApp.password=",
         f"--ServerApp.root_dir={root}", f"--LabApp.user_settings_dir={work / 'settings'}",
         f"--LabApp.workspaces_dir={work / 'workspaces'}", "--allow-root"],
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=work)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            break
        except OSError:
            if server.poll() is not None:
                pytest.fail("JupyterLab did not start:\n" + (work / "lab.log").read_text())
            time.sleep(0.3)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={work / 'chromium'}")
    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    drv.set_window_size(1280, 1600)
    try:
        yield drv, f"http://127.0.0.1:{port}", root
    finally:
        drv.quit()
        server.terminate()
        server.wait(20)
        log.close()
        shutil.rmtree(work, ignore_errors=True)


def _open(drv, base: str, name: str, n_markdown: int, timeout: float = 240) -> int:
    drv.get(f"{base}/lab/tree/{name}?reset")
    deadline, rendered = time.monotonic() + timeout, 0
    while time.monotonic() < deadline:
        rendered = drv.execute_script(f"return document.querySelectorAll('{VISIBLE} .myst').length")
        if rendered >= n_markdown:
            time.sleep(1.0)  # inline values and maths settle after the MyST tree
            break
        time.sleep(0.5)
    return rendered


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_chapter_reads_in_jupyterlab(lab, path):
    drv, base, root = lab
    cells = [c for c in json.loads(path.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "markdown"]
    rendered = _open(drv, base, path.name, len(cells))
    SHOTS.mkdir(parents=True, exist_ok=True)
    drv.save_screenshot(str(SHOTS / f"lab-{path.stem}.png"))
    assert rendered == len(cells), f"{path.name}: {rendered} of {len(cells)} markdown cells rendered by MyST"
    texts = drv.execute_script(f"return [...document.querySelectorAll('{VISIBLE}')].map(c => c.innerText)")
    # The prose without its maths (KaTeX's text of $\\ln 64$ is "ln64", a glue name) or its hidden source.
    prose = drv.execute_script(
        f"return [...document.querySelectorAll('{VISIBLE} .myst')].map(c => {{const k = c.cloneNode(true);"
        " k.querySelectorAll('.katex, .katex-display').forEach(e => e.remove()); return k.textContent;})")
    assert len(texts) == len(prose) == len(cells)
    problems = []
    for i, (cell, text, words) in enumerate(zip(cells, texts, prose)):
        for line in text.splitlines():
            if RAW.search(line):
                problems.append(f"markdown cell {i}: raw markup in {line.strip()[:120]!r}")
        # A key may also be an ordinary word of the prose ("a group of 3 heads"): it is shown in place
        # of its number when the cell renders it more often than its prose (the source without the
        # roles) uses it.
        source = "".join(cell["source"])
        prose_source = re.sub(r"\{(?:eval|glue(?::\w+)?)\}`[^`]*`", "", source)
        for name in set(GLUE_NAME.findall(source)):
            word = re.compile(rf"(?<![\w-]){re.escape(name)}(?![\w-])")
            if len(word.findall(words)) > len(word.findall(prose_source)):
                problems.append(f"markdown cell {i}: the glue key {name!r} is shown instead of its number")
        for entry in cell.get("metadata", {}).get("user_expressions", []):
            value = entry["result"]["data"]["text/plain"]
            if value not in text and value not in words:  # `words` includes a collapsed dropdown's text
                problems.append(f"markdown cell {i}: {entry['expression']} = {value} is not shown")
    unresolved = drv.execute_script(
        f"return [...document.querySelectorAll('{VISIBLE} [title=\"Cross Reference Not Found\"]')]"
        ".map(e => e.innerText.trim())")
    problems += [f"unresolved cross-reference: {u!r}" for u in unresolved]
    cited = drv.execute_script(
        f"return [...document.querySelectorAll('{VISIBLE} [title=\"Citation Not Found\"]')]"
        ".map(e => e.textContent.trim())")  # textContent: a citation in a closed dropdown has no innerText
    problems += [f"citation {c!r} is not a key of references.bib" for c in cited if c not in BIB_KEYS]
    # Interactive figures need plotly.js, which Lab does not load: their static picture shows instead.
    blank = drv.execute_script(
        f"return [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .ac-interactive')]"
        ".filter(f => {const i = f.querySelector('img.ac-ix-fallback');"
        " return !i || !i.complete || i.naturalWidth === 0 || i.getBoundingClientRect().height < 50;})"
        ".map(f => f.id)")
    problems += [f"interactive figure {b} shows no static picture" for b in blank]
    assert not problems, f"{path.name} in JupyterLab:\n" + "\n".join(problems[:40])
