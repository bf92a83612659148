"""Every page of the book as a reader meets it: its reading time, no machinery, its place in the toc.

Each essay chapter is a lesson (``book/NN_x.ipynb``) with its evidence page beside it
(``book/NN_x_evidence.ipynb``, a sub-page in ``_toc.yml``); the closing pages (the ledger, the
glossary, the bibliography) come last. These checks cover every page, whatever its name.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BOOK = ROOT / "book"
NOTEBOOKS = sorted(BOOK.glob("*.ipynb"))
PAGES = [*NOTEBOOKS, *sorted(BOOK.glob("*.md"))]
HIDDEN = {"remove-cell", "remove-input"}
ESSAY_CHAPTERS = ("01_mechanics", "02_kernel_smoothing", "03_low_rank", "04_multi_head", "05_message_passing",
                  "06_scaling", "07_insight")
#: Pages still being split into a lesson and its evidence page; each leaves this list when it is.
#: (The ledger shows every claim's text, and leaves when the last chapter's ledger entries are clean.)
NOT_YET_SPLIT: set[str] = set()


@functools.lru_cache(maxsize=None)
def _cells(path: Path):
    return nbformat.read(path, as_version=4).cells


def _is_lesson(stem: str) -> bool:
    return bool(re.match(r"\d\d_", stem)) and not stem.endswith("_evidence")


# ------------------------------------------------------------------ reading time
READING_TIME = re.compile(r"^\*\*Reading time:\*\* about (?P<read>\d+) minutes"
                          r"(?:, and (?P<ex>\d+) for the exercises)?\.$", re.M)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_page_states_its_reading_time_at_the_top(path):
    if path.stem in NOT_YET_SPLIT:
        pytest.xfail("the page is being rewritten as a lesson with its evidence page")
    first = next(c for c in _cells(path) if c.cell_type == "markdown")
    m = READING_TIME.search(first.source)
    assert m, f"{path.stem}: the first cell has no line '**Reading time:** about N minutes[, and M for the exercises].'"
    exercises = any(c.cell_type == "code" and c.source.lstrip().startswith("# EXERCISE:") for c in _cells(path))
    assert bool(m["ex"]) == exercises, f"{path.stem}: state the exercises' minutes exactly when the page has exercises"
    # The course's budget is 45 + 45 minutes. A page states the minutes blind newcomer reads measured, even
    # where they exceed 45 (a page that said 45 while readers took 57 would be the worse failure); 60 is the
    # ceiling past which a lesson must be split or cut before it lands.
    assert int(m["ex"] or 0) <= 45, f"{path.stem}: at most 45 minutes of exercises"
    assert int(m["read"]) <= 60, f"{path.stem}: a page over 60 minutes of reading must be cut or split"



@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_stated_exercise_minutes_are_the_exercises_own(path):
    """The opening's "M for the exercises" is the sum of the minutes the page's exercises declare, the
    numbers each exercise's title shows: a page cannot promise 45 while its titles add up to 60."""
    from attention_course.exercises import REGISTRY

    first = next(c for c in _cells(path) if c.cell_type == "markdown")
    m = READING_TIME.search(first.source)
    ids = [re.match(r"# EXERCISE: ([\w-]+)", c.source.lstrip())[1] for c in _cells(path)
           if c.cell_type == "code" and c.source.lstrip().startswith("# EXERCISE:")]
    if not (m and m["ex"]):
        return
    declared = sum(REGISTRY[i].minutes for i in ids)
    assert int(m["ex"]) == declared, f"{path.stem}: the opening states {m['ex']} minutes, its exercises declare {declared}"


# ------------------------------------------------------------------ the machinery stays off the page
MACHINERY = re.compile(r"\bglue[ds]?\b|\bstored runs?\b|\bregistered\b|cut for time|test suite|NBVAL|"
                       r"matches the stored|\bnbval\b", re.I)
ROLE = re.compile(r"\{[\w:-]+\}`[^`]*`")  # a MyST role ({eval}`value_of("x")`): markup, not words on the page
FLAG_IN_PROSE = re.compile(r"(?<![\w`-])(?:--|\u2013)[a-z][a-z-]+")
CODE_SPAN = re.compile(r"```.*?```|`[^`]*`|\$\$.*?\$\$|\$[^$\n]*\$", re.S)


def _visible_code(cell) -> str:
    return "" if set(cell.metadata.get("tags", [])) & HIDDEN else cell.source


def _shown(path: Path):
    """(cell, where, text) for everything a reader sees of a page."""
    if path.suffix == ".md":
        yield 0, "text", path.read_text(encoding="utf-8")
        return
    for i, cell in enumerate(_cells(path)):
        if cell.cell_type == "markdown":
            yield i, "text", cell.source
            continue
        yield i, "code", _visible_code(cell)
        meta = cell.metadata.get("mystnb", {})
        yield i, "caption", str(meta.get("figure", {}).get("caption", ""))
        yield i, "alt text", str(meta.get("image", {}).get("alt", ""))
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                yield i, "output", out.get("text", "")
            for mime in ("text/plain", "text/markdown"):
                if mime in out.get("data", {}):
                    yield i, "output", out["data"][mime]


def machinery(path: Path) -> list[str]:
    """What a page shows of the course's own machinery: test words, flags typeset as prose,
    calls that feed the tests, names defined only in hidden cells."""
    found = []
    for i, where, text in _shown(path):
        plain = ROLE.sub(" ", text)
        found += [f"cell {i} ({where}): {m.group(0)!r}" for m in MACHINERY.finditer(plain)]
        if where == "text":
            found += [f"cell {i}: {m.group(0)!r} typeset as prose (put a flag in code formatting)"
                      for m in FLAG_IN_PROSE.finditer(CODE_SPAN.sub(" ", plain))]
        if where == "code" and re.search(r"\bprediction\(", text):
            found.append(f"cell {i}: a prediction(...) call on the page (tag the cell remove-input)")
    if path.suffix == ".ipynb":
        found += _names_from_hidden_cells(path)
    return found


def _assigned(source: str) -> set[str]:
    try:
        tree = ast.parse(re.sub(r"^\s*[%!].*$", "", source, flags=re.M))
    except SyntaxError:
        return set()
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return names | {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}


def _loaded(source: str) -> set[str]:
    try:
        tree = ast.parse(re.sub(r"^\s*[%!].*$", "", source, flags=re.M))
    except SyntaxError:
        return set()
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _names_from_hidden_cells(path: Path) -> list[str]:
    """Names a visible cell uses that only a hidden cell (not the two setup cells) defines."""
    cells = [c for c in _cells(path) if c.cell_type == "code"][2:]
    hidden, shown = set(), set()
    for c in cells:
        (hidden if set(c.metadata.get("tags", [])) & HIDDEN else shown).update(_assigned(c.source))
    only_hidden = hidden - shown
    return [f"cell uses {name!r}, which only a hidden cell defines" for c in cells
            if not set(c.metadata.get("tags", [])) & HIDDEN for name in sorted(_loaded(c.source) & only_hidden)]


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.name)
def test_no_page_shows_the_books_machinery(path):
    if path.stem in NOT_YET_SPLIT:
        pytest.xfail("the page is being rewritten as a lesson with its evidence page")
    found = machinery(path)
    assert not found, f"{path.name} shows the course's machinery:\n" + "\n".join(found)


def test_the_machinery_check_catches_what_it_looks_for(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# T\n\nThe stored run says so; run it with --steps 5, or `--steps 5`."),
                nbformat.v4.new_code_cell("import x"), nbformat.v4.new_code_cell("setup()"),
                nbformat.v4.new_code_cell("main = {'a': 1}", metadata={"tags": ["remove-cell"]}),
                nbformat.v4.new_code_cell("print(main['a'])  # as glued\nprediction('ix-a')"),
                nbformat.v4.new_markdown_cell("The {eval}`value_of(\"n\")` rows.")]
    path = tmp_path / "01_x.ipynb"
    nbformat.write(nb, path)
    found = "\n".join(machinery(path))
    for expected in ("'stored run'", "'--steps' typeset as prose", "'glued'", "prediction(...)",
                     "'main', which only a hidden cell defines"):
        assert expected in found, (expected, found)
    assert found.count("typeset as prose") == 1 and "cell 5" not in found  # a role and a code span are fine


# ------------------------------------------------------------------ lesson and evidence, side by side
def _toc_entries() -> list[dict]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    return [ch for part in toc["parts"] for ch in part["chapters"]]


@pytest.mark.parametrize("stem", ESSAY_CHAPTERS)
def test_each_essay_chapter_is_a_lesson_with_its_evidence_page_beside_it(stem):
    if stem in NOT_YET_SPLIT:
        pytest.xfail("the page is being rewritten as a lesson with its evidence page")
    entry = next(ch for ch in _toc_entries() if ch["file"] == f"book/{stem}")
    assert [s["file"] for s in entry.get("sections", [])] == [f"book/{stem}_evidence"]
    assert (BOOK / f"{stem}_evidence.ipynb").exists()


def test_every_notebook_is_in_the_toc_once_and_every_toc_page_exists():
    toc = (ROOT / "_toc.yml").read_text()
    files = re.findall(r"file: (\S+)", toc) + [yaml.safe_load(toc)["root"]]
    assert len(files) == len(set(files))
    for f in files:
        assert (ROOT / f"{f}.ipynb").exists() or (ROOT / f"{f}.md").exists(), f
    assert {f"book/{p.stem}" for p in NOTEBOOKS} <= set(files)


def test_the_closing_part_holds_the_ledger_glossary_and_bibliography():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    closing = toc["parts"][-1]
    assert [c["file"] for c in closing["chapters"]] == ["book/ledger", "book/glossary", "book/bibliography"]
    assert not closing.get("numbered")
