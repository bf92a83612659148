"""The chapters' prose reads the same in the book and in JupyterLab (issue 18).

Every number the prose quotes is an ``{eval}`value_of("name:fmt")``` role whose value is stored
in the markdown cell's ``user_expressions`` (what ``jupyterlab-myst`` shows), and that stored
value is what the book's role renders from the notebook's glue outputs (which nbval keeps
current). Every figure reference carries the number the book gives the figure.
(The browser half, each chapter opened in JupyterLab, is tests/book/test_lab.py.)
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from attention_course.course import book, expressions as ex
from book_checks import figure_ref_problems

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb"))


def _markdown(path: Path) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(path.read_text(encoding="utf-8"))["cells"]
            if c["cell_type"] == "markdown"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_stored_inline_numbers_are_the_glued_values(path):
    assert ex.expression_problems(path) == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_prose_quotes_numbers_only_through_glued_roles(path):
    """No myst-nb {glue} role (JupyterLab cannot show it) and no {eval} of anything but value_of(...)."""
    for text in _markdown(path):
        assert "{glue" not in text, f"{path.name}: a {{glue}} role; write {ex.role('name:fmt')}"
        evals = re.findall(r"\{eval\}`[^`]*`", text)
        assert all(ex.ROLE.fullmatch(e) for e in evals), [e for e in evals if not ex.ROLE.fullmatch(e)]


def test_the_chapters_quote_numbers():
    assert sum(len(ex.roles(t)) for p in NOTEBOOKS for t in _markdown(p)) > 500


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_figure_references_carry_the_books_numbers(path):
    assert figure_ref_problems(path) == []


def test_chapter_numbers_follow_the_table_of_contents():
    """figure_refs numbers chapter NN_x as NN: true while _toc.yml lists the chapters in that order."""
    toc = re.findall(r"file: book/(\d\d_\w+)", (ROOT / "_toc.yml").read_text(encoding="utf-8"))
    assert toc == [p.stem for p in NOTEBOOKS]
    lessons = [s for s in toc if not s.endswith("_evidence")]  # an evidence page follows its lesson
    assert [int(s[:2]) for s in lessons] == list(range(1, len(lessons) + 1))


def test_a_stale_stored_number_is_caught(tmp_path):
    src = next(p for p in NOTEBOOKS if "01_" in p.name)
    nb = json.loads(src.read_text(encoding="utf-8"))
    cell = next(c for c in nb["cells"] if c.get("metadata", {}).get("user_expressions"))
    cell["metadata"]["user_expressions"][0]["result"]["data"]["text/plain"] = "999"
    path = tmp_path / src.name
    path.write_text(json.dumps(nb), encoding="utf-8")
    assert any("differ from the glued values" in p for p in ex.expression_problems(path))
    assert ex.sync_notebook(path) and ex.expression_problems(path) == []


def test_an_unglued_name_is_caught(tmp_path):
    src = next(p for p in NOTEBOOKS if "01_" in p.name)
    nb = json.loads(src.read_text(encoding="utf-8"))
    cell = next(c for c in nb["cells"] if c["cell_type"] == "markdown")
    cell["source"] = ["We measured ", ex.role("no_such_number:.2f"), "."]
    path = tmp_path / src.name
    path.write_text(json.dumps(nb), encoding="utf-8")
    assert any("never glued" in p for p in ex.expression_problems(path))
    with pytest.raises(KeyError, match="no_such_number"):
        ex.sync_notebook(path)


@pytest.mark.parametrize("path", NOTEBOOKS[:1], ids=lambda p: p.stem)
def test_a_stale_figure_number_is_caught(tmp_path, path):
    text = path.read_text(encoding="utf-8")
    m = re.search(r"\{ref\}`Fig\. (\d+)\.(\d+) <", text)
    assert m, "chapter 1 refers to its figures by number"
    for other in NOTEBOOKS:  # figure numbers are read from every chapter in the folder
        (tmp_path / other.name).write_text(other.read_text(encoding="utf-8"), encoding="utf-8")
    bad = tmp_path / path.name
    bad.write_text(text.replace(m.group(0), "{ref}`Fig. 9.9 <", 1), encoding="utf-8")
    assert any("should read {ref}`Fig. " + f"{m.group(1)}.{m.group(2)}" in p for p in figure_ref_problems(bad))


# The inline numbers must be formatted exactly as the book formats them: myst-nb's rule.
myst_format = pytest.importorskip("myst_nb.core.variables").format_plain_text
_VALUES = st.one_of(st.floats(allow_nan=False, allow_infinity=False, width=64),
                    st.integers(-10**9, 10**9), st.text(alphabet="abcxyz -", max_size=8))
_SPECS = st.sampled_from(["", ".2f", ".3f", ".0e", ".1e", ".3g", ".2g", ".1%", ".0%", "d", ",", "s"])


@given(_VALUES, _SPECS)
def test_format_glued_is_myst_nbs_rule(value, fmt):
    text = repr(value)
    try:
        expected = myst_format(text, fmt)
    except (ValueError, TypeError) as exc:  # a spec that does not fit the value fails in both
        with pytest.raises(type(exc)):
            book.format_value(text, fmt)
        return
    assert book.format_value(text, fmt) == expected


def test_glued_in_the_kernel_gives_the_stored_text():
    """What jupyterlab-myst stores for value_of("x:.2f") is what the kernel answers when re-run."""
    book.glue("prose_markup_demo", 0.123456)
    stored = ex.user_expressions(ex.role("prose_markup_demo:.2f"), {"prose_markup_demo": repr(0.123456)})
    assert repr(book.value_of("prose_markup_demo:.2f")) == stored[0]["result"]["data"]["text/plain"] == "0.12"
