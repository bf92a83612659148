"""The chapters as a reader sees them: figures sized, numbered and described; no test code on the page.

Static checks on the committed notebooks (the browser test, tests/book/test_site.py, checks the
rendered pages). Run one chapter with ``pytest tests/book/test_reader.py -k 03_low_rank``.
"""

from __future__ import annotations

import base64
import functools
import io
import re
from pathlib import Path

import nbformat
import pytest
from PIL import Image

from attention_course.figures.style import DPI, MAX_WIDTH
from attention_course.course.figure_refs import NUMREF

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))
HIDDEN = {"remove-cell", "remove-input"}
# Test code: glue() calls and asserts feed the book and the tests, not the reader.
TEST_CODE = re.compile(r"^\s*(glue\(|assert\b)", re.M)
FIG_NAME = re.compile(r"^fig-[a-z0-9-]+$")
ids = [p.stem for p in NOTEBOOKS]


@functools.lru_cache(maxsize=None)
def _cells(path):
    # read (and schema-validated) once per notebook, not once per test: about 0.1 s a chapter.
    # The tests only read the cells; none changes them.
    return nbformat.read(path, as_version=4).cells


def _tags(cell):
    return set(cell.metadata.get("tags", []))


def _pngs(cell):
    return [o["data"]["image/png"] for o in cell.get("outputs", [])
            if o.get("output_type") in ("display_data", "execute_result") and "image/png" in o.get("data", {})]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_test_code_is_not_on_the_page(path):
    shown = []
    for i, cell in enumerate(_cells(path)):
        if cell.cell_type == "code" and TEST_CODE.search(cell.source) and not _tags(cell) & HIDDEN:
            shown.append(f"cell {i}: {cell.source.strip().splitlines()[0][:70]}")
    assert not shown, ("cells with glue()/assert must be tagged remove-cell (or remove-input when they "
                       "show an output); split them from the cell the reader should see:\n" + "\n".join(shown))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_nbval_markers_are_tags_not_comments(path):
    marked = [i for i, c in enumerate(_cells(path)) if c.cell_type == "code" and "NBVAL_" in c.source]
    assert not marked, f"cells {marked}: use the nbval-ignore-output tag, not a comment the reader sees"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_every_figure_is_numbered_captioned_and_described(path):
    cells = _cells(path)
    prose = "\n".join(c.source for c in cells if c.cell_type == "markdown")
    referenced = {m["target"] or m["bare"] for m in NUMREF.finditer(prose)}
    problems, names = [], []
    for i, cell in enumerate(cells):
        pngs = _pngs(cell) if cell.cell_type == "code" else []
        if not pngs:
            continue
        meta = cell.metadata.get("mystnb", {})
        fig, img = meta.get("figure", {}), meta.get("image", {})
        if len(pngs) > 1:
            problems.append(f"cell {i}: {len(pngs)} images in one cell (one figure, one caption per cell)")
        if not FIG_NAME.match(str(fig.get("name", ""))):
            problems.append(f"cell {i}: mystnb.figure.name should look like fig-<chapter>-<what>")
        if len(str(fig.get("caption", ""))) < 20:
            problems.append(f"cell {i}: mystnb.figure.caption missing or too short")
        alt = str(img.get("alt", ""))
        if len(alt) < 20 or alt == fig.get("caption"):
            problems.append(f"cell {i}: mystnb.image.alt should describe what the figure shows (not repeat the caption)")
        names.append(fig.get("name"))
        if fig.get("name") and fig.get("name") not in referenced:
            problems.append(f"cell {i}: the prose never refers to {{numref}}`{fig.get('name')}`")
    dup = {n for n in names if names.count(n) > 1}
    assert not dup, f"figure names used twice: {sorted(dup)}"
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_figures_fit_the_column(path):
    """Drawn at the book's DPI and at most MAX_WIDTH wide: text keeps its size in the column."""
    wrong = []
    for i, cell in enumerate(_cells(path)):
        for png in _pngs(cell) if cell.cell_type == "code" else []:
            im = Image.open(io.BytesIO(base64.b64decode(png)))
            dpi = round(im.info.get("dpi", (0, 0))[0])
            width_in = im.width / DPI
            if abs(dpi - DPI) > 1:
                wrong.append(f"cell {i}: drawn at {dpi} dpi, expected {DPI} (use book_figure / setup_notebook)")
            elif width_in > MAX_WIDTH + 0.3:  # bbox_inches="tight" may add a little padding
                wrong.append(f"cell {i}: {width_in:.1f} in wide ({im.width} px at {DPI} dpi); at most {MAX_WIDTH} in")
    assert not wrong, "\n".join(wrong)


# ------------------------------------------------------------------ the reader's page
#: The book never shows its own history: reviews go in commit messages, not on the page.
HISTORY = re.compile(r"\b(what changed|previous version|earlier version|reviewers?|"
                     r"(?:an?|the|independent|second) review|earlier in this revision)\b", re.I)


def _page_texts(cell):
    """What a reader can see of a cell: its markdown, caption and alt text, and its text outputs."""
    if cell.cell_type == "markdown":
        yield "text", cell.source
    meta = cell.metadata.get("mystnb", {})
    yield "caption", str(meta.get("figure", {}).get("caption", ""))
    yield "alt text", str(meta.get("image", {}).get("alt", ""))
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            yield "output", out.get("text", "")
        for mime in ("text/plain", "text/markdown", "text/html"):
            if mime in out.get("data", {}):
                yield "output", out["data"][mime]


@pytest.mark.parametrize("path", [*NOTEBOOKS, *sorted((ROOT / "book").glob("*.md"))],
                         ids=lambda p: p.name)
def test_the_book_does_not_show_its_own_history(path):
    if path.suffix == ".md":
        found = [m.group(0) for m in HISTORY.finditer(path.read_text())]
    else:
        found = [f"cell {i} ({where}): ...{text[max(0, m.start() - 40):m.end() + 40]}..."
                 for i, cell in enumerate(_cells(path)) for where, text in _page_texts(cell)
                 for m in HISTORY.finditer(text)]
    assert not found, "the page talks about the book's own history (say it in the commit message):\n" + \
        "\n".join(found)


def test_the_history_check_catches_a_review_note():
    assert HISTORY.search("A reviewer arguing the other side pointed out") and HISTORY.search("(What changed.")
    assert not HISTORY.search("the closing paragraph, rewritten from the evidence")


def _headings(cells):
    """(cell index, level-2 heading text) for every ``## `` heading, in order."""
    return [(i, line[3:].strip()) for i, c in enumerate(cells) if c.cell_type == "markdown"
            for line in c.source.splitlines() if line.startswith("## ")]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_every_exercise_sits_under_exercises_before_the_summary(path):
    cells = _cells(path)
    heads = _headings(cells)
    exercises = [i for i, c in enumerate(cells)
                 if (c.cell_type == "code" and c.source.lstrip().startswith("# EXERCISE:"))
                 or (c.cell_type == "markdown" and "{exercise}" in c.source)]
    misplaced = []
    for i in exercises:
        above = [h for j, h in heads if j <= i]
        if not above or not above[-1].startswith("Exercises"):
            misplaced.append(f"cell {i} is under '{above[-1] if above else 'no heading'}'")
    summary = [j for j, h in heads if h.startswith("Summary")]
    if exercises and summary:
        assert max(exercises) < summary[-1], f"an exercise (cell {max(exercises)}) comes after the Summary"
    assert not misplaced, "exercises belong under the chapter's Exercises heading:\n" + "\n".join(misplaced)


def _spoilers(value: float) -> set[str]:
    """How a cell could print the number a prediction reveals: rounded, as a share, or its complement."""
    out = set()
    for v in {value, 1 - value} if 0 < value < 1 else {value}:
        out |= {f"{v:.2f}", f"{v:.3f}", f"{v:.3g}", f"{v:.1%}", f"{v:.0%}"}
    return {s for s in out if sum(ch.isdigit() for ch in s.lstrip("0.")) >= 2}  # "8" would match anything


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_no_output_above_a_prediction_shows_its_answer(path):
    from attention_course.figures.predictions import PREDICTIONS, _evidence

    evidence = _evidence()
    cells = _cells(path)
    spoiled = []
    heads = [j for j, _ in _headings(cells)]
    for i, cell in enumerate(cells):
        for name in re.findall(r'prediction\("([^"]+)"\)', cell.source if cell.cell_type == "code" else ""):
            p = PREDICTIONS[name]
            marks = _spoilers(float(evidence[p.claim][p.glue]))
            # the prediction's own section: a two-digit number in an earlier section's table is a
            # coincidence, not a spoiler (a reader meets the box right after the section's text)
            start = max([j for j in heads if j <= i], default=0)
            for j, above in enumerate(cells[start:i], start=start):
                for where, text in _page_texts(above):
                    if where == "output" and (hit := next((s for s in marks if re.search(rf"(?<![\d.]){re.escape(s)}(?!\d)", text)), None)):
                        spoiled.append(f"{name}: cell {j}'s output shows {hit}")
    assert not spoiled, "a prediction's answer is printed above it:\n" + "\n".join(spoiled)
