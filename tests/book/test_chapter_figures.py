"""The index page's chapter map: book/_ext/chapter_figures.py (a Sphinx extension).

The extraction runs on the real chapter notebooks (each must yield one valid PNG)
and on small synthetic notebooks written to tmp_path for the error cases.
"""

from __future__ import annotations

import base64
import json
import os
import struct
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "book" / "_ext"))

import chapter_figures as cf  # noqa: E402  (a local Sphinx extension, not a package)

NOTEBOOKS = sorted(p for p in (ROOT / "book").glob("[0-9][0-9]_*.ipynb") if not p.stem.endswith("_evidence"))  # lessons


def _png(width: int = 3, height: int = 2) -> bytes:
    """A tiny PNG file: the signature and an IHDR chunk are all the tests look at."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return cf.PNG_SIGNATURE + struct.pack(">I", len(ihdr)) + b"IHDR" + ihdr + b"\0\0\0\0"


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[12:16] == b"IHDR", "the first PNG chunk must be IHDR"
    return struct.unpack(">II", data[16:24])


def _cell(tags=(), outputs=(), cell_type="code") -> dict:
    cell = {"cell_type": cell_type, "metadata": {"tags": list(tags)}, "source": "x = 1"}
    if cell_type == "code":
        cell |= {"outputs": list(outputs), "execution_count": 1}
    return cell


def _image_output(data: bytes, split: bool = False) -> dict:
    encoded = base64.b64encode(data).decode("ascii")
    if split:  # nbformat may store base64 as a list of lines
        encoded = [encoded[i:i + 8] + "\n" for i in range(0, len(encoded), 8)]
    return {"output_type": "display_data", "metadata": {},
            "data": {"image/png": encoded, "text/plain": ["<Figure>"]}}  # fmt: skip


def _notebook(path: Path, *cells: dict) -> Path:
    title = {"cell_type": "markdown", "metadata": {}, "source": ["# A synthetic chapter\n", "\n", "Text."]}
    path.write_text(json.dumps({"cells": [title, *cells], "metadata": {}, "nbformat": 4,
                                "nbformat_minor": 5}), encoding="utf-8")  # fmt: skip
    return path


# --- the real chapter notebooks --------------------------------------------------------------


def test_there_are_chapter_notebooks():
    assert len(NOTEBOOKS) >= 6, f"expected chapters 1-6 as notebooks in book/, found {NOTEBOOKS}"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_chapter_notebook_yields_a_valid_png(notebook):
    data = cf.find_index_figure(notebook)
    assert data is not None, f"{notebook.name} has no cell tagged {cf.TAG!r}"
    assert data.startswith(b"\x89PNG\r\n\x1a\n"), f"{notebook.name}: not a PNG"
    assert len(data) > 10_000, f"{notebook.name}: only {len(data)} bytes, hardly a figure"
    width, height = _png_size(data)
    assert width >= 300 and height >= 150, f"{notebook.name}: figure is {width}x{height} px"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_chapter_notebook_has_a_title(notebook):
    title = cf.page_title(notebook)
    assert title and not title.startswith("#")
    assert title != notebook.stem.split("_", 1)[-1].replace("_", " ").capitalize(), "fell back to the file name"


# --- synthetic notebooks: the rules ------------------------------------------------------------


def test_no_tag_is_skipped(tmp_path):
    nb = _notebook(tmp_path / "01_x.ipynb", _cell(outputs=[_image_output(_png())]))
    assert cf.find_index_figure(nb) is None


@pytest.mark.parametrize("split", [False, True], ids=["string", "list-of-lines"])
def test_tagged_png_is_decoded(tmp_path, split):
    nb = _notebook(tmp_path / "01_x.ipynb", _cell(), _cell([cf.TAG], [_image_output(_png(7, 5), split)]))
    assert _png_size(cf.find_index_figure(nb)) == (7, 5)


def test_two_tags_raise_naming_the_notebook(tmp_path):
    png = _image_output(_png())
    nb = _notebook(tmp_path / "03_two.ipynb", _cell([cf.TAG], [png]), _cell(["hide-input", cf.TAG], [png]))
    with pytest.raises(cf.ChapterFigureError, match=r"03_two\.ipynb: 2 cells \(numbers 2, 3\) are tagged"):
        cf.find_index_figure(nb)


def test_tag_without_png_raises_naming_the_notebook(tmp_path):
    text = {"output_type": "stream", "name": "stdout", "text": ["hello\n"]}
    nb = _notebook(tmp_path / "04_nopng.ipynb", _cell([cf.TAG], [text]))
    with pytest.raises(cf.ChapterFigureError, match=r"04_nopng\.ipynb: cell 2 .* has no image/png output"):
        cf.find_index_figure(nb)


def test_tag_on_unexecuted_cell_raises(tmp_path):
    nb = _notebook(tmp_path / "05_fresh.ipynb", _cell([cf.TAG], []))
    with pytest.raises(cf.ChapterFigureError, match=r"05_fresh\.ipynb.*no image/png output"):
        cf.find_index_figure(nb)


def test_two_pngs_in_the_tagged_cell_raise(tmp_path):
    nb = _notebook(tmp_path / "06_two.ipynb", _cell([cf.TAG], [_image_output(_png()), _image_output(_png())]))
    with pytest.raises(cf.ChapterFigureError, match=r"06_two\.ipynb.*2 image/png outputs"):
        cf.find_index_figure(nb)


def test_tagged_markdown_cell_raises(tmp_path):
    nb = _notebook(tmp_path / "02_md.ipynb", _cell([cf.TAG], cell_type="markdown"))
    with pytest.raises(cf.ChapterFigureError, match=r"02_md\.ipynb: cell 2 .* is a markdown cell"):
        cf.find_index_figure(nb)


def test_png_output_that_is_not_a_png_raises(tmp_path):
    nb = _notebook(tmp_path / "02_bad.ipynb", _cell([cf.TAG], [_image_output(b"GIF89a not a png")]))
    with pytest.raises(cf.ChapterFigureError, match=r"02_bad\.ipynb.*not a PNG"):
        cf.find_index_figure(nb)


def test_broken_json_raises_naming_the_notebook(tmp_path):
    nb = tmp_path / "07_half_saved.ipynb"
    nb.write_text('{"cells": [', encoding="utf-8")
    with pytest.raises(cf.ChapterFigureError, match=r"07_half_saved\.ipynb: not a readable notebook"):
        cf.find_index_figure(nb)


# --- writing files: only when the bytes change ----------------------------------------------------


def test_unchanged_bytes_are_not_rewritten(tmp_path):
    path = tmp_path / "sub" / "fig.png"
    assert cf.write_if_changed(path, _png()) is True
    old = 1_000_000_000  # 2001: any rewrite would move the mtime to now
    os.utime(path, (old, old))
    assert cf.write_if_changed(path, _png()) is False
    assert path.stat().st_mtime == old
    assert cf.write_if_changed(path, _png(4, 4)) is True
    assert path.stat().st_mtime > old
    assert _png_size(path.read_bytes()) == (4, 4)


def test_generate_writes_figures_and_map_then_nothing(tmp_path):
    _notebook(tmp_path / "01_alpha.ipynb", _cell([cf.TAG], [_image_output(_png())]))
    _notebook(tmp_path / "02_beta.ipynb", _cell(outputs=[_image_output(_png())]))  # no tag
    (tmp_path / "03_gamma.md").write_text("(gamma)=\n# Why the $1/\\sqrt{d_k}$ scale\n\nSoon.\n", encoding="utf-8")
    claims = {"01_alpha": "Rows sum to one", "02_beta": "Kernels", "03_gamma": "The  scale\n matters"}
    chapters = cf.collect_chapters(tmp_path, ["01_alpha", "02_beta", "03_gamma"], claims)
    assert [(c.number, c.png is not None) for c in chapters] == [(1, True), (2, False), (3, False)]
    assert chapters[2].title == "Why the $1/\\sqrt{d_k}$ scale"
    assert chapters[2].claim == "The scale matters"  # one line

    out = tmp_path / cf.GENERATED
    written = cf.generate(tmp_path, chapters)
    assert sorted(p.name for p in written) == ["01_alpha.png", cf.MAP_FILE]
    assert sorted(p.name for p in out.iterdir()) == ["01_alpha.png", cf.MAP_FILE]
    text = (out / cf.MAP_FILE).read_text(encoding="utf-8")
    assert text.count(":::{grid-item-card}") == 3
    assert text.count(":img-top:") == 1
    assert ':img-alt: "Figure from chapter 1: A synthetic chapter"' in text
    assert ":link: 03_gamma\n:link-type: doc" in text
    assert "3. Why the $1/\\sqrt{d_k}$ scale" in text

    assert cf.generate(tmp_path, chapters) == []  # second build: nothing rewritten

    # the chapter loses its figure: its PNG goes, the map changes
    _notebook(tmp_path / "01_alpha.ipynb", _cell(outputs=[_image_output(_png())]))
    chapters = cf.collect_chapters(tmp_path, ["01_alpha", "02_beta", "03_gamma"], claims)
    assert sorted(p.name for p in cf.generate(tmp_path, chapters)) == [cf.MAP_FILE]
    assert sorted(p.name for p in out.iterdir()) == [cf.MAP_FILE]


def test_notebook_wins_over_placeholder_page(tmp_path):
    (tmp_path / "07_insight.md").write_text("# Placeholder\n", encoding="utf-8")
    _notebook(tmp_path / "07_insight.ipynb", _cell([cf.TAG], [_image_output(_png())]))
    (chapter,) = cf.collect_chapters(tmp_path, ["07_insight"], {})
    assert chapter.title == "A synthetic chapter" and chapter.png is not None


def test_missing_chapter_file_raises(tmp_path):
    with pytest.raises(cf.ChapterFigureError, match=r"'08_gone' is in the toc but neither"):
        cf.collect_chapters(tmp_path, ["08_gone"], {})


def test_chapter_stems_come_from_the_root_folder_only():
    docnames = ["book/intro", "book/01_a", "book/glossary", "book/sub/02_b", "03_c", "book/04_d"]
    assert cf.chapter_stems(docnames, "book") == ["01_a", "04_d"]


def test_alt_text_is_plain():
    assert cf.plain_text(r"Why the $1/\sqrt{d_k}$ scaling matters") == "Why the 1/√d_k scaling matters"
    assert cf.plain_text("The `softmax` and *heads*") == "The softmax and heads"
