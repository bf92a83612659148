"""Sphinx extension: the index page's chapter map, one figure from each chapter.

Glue cannot cross pages, so the index page cannot show a figure computed in a
chapter notebook. Instead, when the build starts (``config-inited``), this
extension reads every chapter listed in the table of contents (docnames like
``book/01_mechanics``), finds the one code cell tagged ``index-figure`` in each
chapter notebook, and writes its stored PNG output to ``book/_generated/``
(next to the root page, git-ignored). It also writes
``book/_generated/chapter_map.md``, a grid of sphinx-design cards that
``book/intro.md`` includes: one card per chapter, with its number and title,
the essay's claim it tests (``chapter_map_claims`` in ``_config.yml``), its
figure, and a link to it.

Rules:

* a chapter that is not a notebook (a placeholder ``.md`` page), or a notebook
  with no tagged cell, gets a card without a figure;
* two tagged cells, a tagged cell that is not a code cell, or a tagged cell
  with no (or more than one) ``image/png`` output is an error naming the notebook;
* the figure is written as a thumbnail: scaled down to fit :data:`THUMBNAIL_BOX`,
  twice the card's image box so it stays sharp on HiDPI screens, in 256 colours
  (a full-size chapter figure is 50-300 KB; a thumbnail about 15-50 KB);
* a file is written only when its bytes change, so incremental builds stay
  incremental (Sphinx re-reads the index page only when its figures or its
  included map really changed), and files of chapters that left the toc are removed.

The notebooks are not executed: the PNGs are the outputs committed with them.
"""

from __future__ import annotations

import base64
import io
import json
import re
import struct
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

TAG = "index-figure"
GENERATED = "_generated"  # folder next to the root page
MAP_FILE = "chapter_map.md"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: Largest thumbnail (px): a card shows its figure in 322 x 208 CSS px on a wide screen and up
#: to 358 x 256 on a phone (CSS below); twice 322 wide and 256 tall, for screens of 2 px per CSS px.
THUMBNAIL_BOX = (644, 512)
_CHAPTER = re.compile(r"^(\d\d)_[\w-]+$")
_HEADING = re.compile(r"^#\s+(.+?)\s*#*\s*$")

CSS_FILE = "chapter-map.css"
CSS = """\
/* The index page's chapter map (book/_ext/chapter_figures.py). */
.chapter-map .sd-card-img-top {
  height: 13rem;
  object-fit: contain;
  padding: 0.5rem;
  background: #fff;
  border-bottom: 1px solid var(--pst-color-border, #ddd);
}
.chapter-map .sd-card-title { font-size: 1.05rem; line-height: 1.35; }
.chapter-map .sd-card-text { font-size: 0.92rem; color: var(--pst-color-text-muted); }
.chapter-map .chapter-map-nofigure .sd-card-body { display: flex; flex-direction: column; justify-content: center; }
@media (max-width: 575.98px) {
  .chapter-map .sd-card-img-top { height: auto; max-height: 16rem; }
}
"""


class ChapterFigureError(ValueError):
    """A chapter notebook's ``index-figure`` cell is missing its PNG, or is not unique."""


@dataclass(frozen=True)
class Chapter:
    """One card of the chapter map."""

    number: int  # from the file name: 01_mechanics -> 1
    stem: str  # "01_mechanics", also the card's link target (a doc next to the root page)
    title: str  # the page's first heading, MyST markup kept
    claim: str  # one line; may be empty
    png: bytes | None  # the tagged figure, or None for a card without one


def find_index_figure(notebook: Path) -> bytes | None:
    """The PNG bytes of the notebook's one cell tagged ``index-figure``.

    Returns None when no cell carries the tag. Raises :class:`ChapterFigureError`
    (its message names the notebook) for two or more tagged cells, a tagged cell
    that is not a code cell, or a tagged cell without exactly one ``image/png``
    output; also for a file that is not valid notebook JSON.
    """
    try:
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    except (ValueError, KeyError, TypeError) as err:
        raise ChapterFigureError(f"{notebook}: not a readable notebook ({err})") from err
    tagged = [i for i, cell in enumerate(cells) if TAG in (cell.get("metadata", {}).get("tags") or [])]
    if not tagged:
        return None
    if len(tagged) > 1:
        numbers = ", ".join(str(i + 1) for i in tagged)
        raise ChapterFigureError(
            f"{notebook}: {len(tagged)} cells (numbers {numbers}) are tagged {TAG!r}; "
            f"tag exactly one figure cell per chapter for the index page"
        )
    index = tagged[0]
    cell = cells[index]
    if cell.get("cell_type") != "code":
        raise ChapterFigureError(
            f"{notebook}: cell {index + 1} is tagged {TAG!r} but is a {cell.get('cell_type')} cell; "
            f"tag the code cell that draws the figure"
        )
    pngs = [out["data"]["image/png"] for out in cell.get("outputs", []) if "image/png" in out.get("data", {})]
    if len(pngs) != 1:
        found = "no image/png output" if not pngs else f"{len(pngs)} image/png outputs"
        raise ChapterFigureError(
            f"{notebook}: cell {index + 1} is tagged {TAG!r} but has {found}; it must show exactly "
            f"one PNG figure (run the notebook and save it with its outputs)"
        )
    encoded = "".join(pngs[0]) if isinstance(pngs[0], list) else pngs[0]
    try:
        data = base64.b64decode(encoded)
    except ValueError as err:
        raise ChapterFigureError(f"{notebook}: cell {index + 1}'s image/png is not base64 ({err})") from err
    if not data.startswith(PNG_SIGNATURE):
        raise ChapterFigureError(f"{notebook}: cell {index + 1}'s image/png output is not a PNG file")
    return data


def png_size(data: bytes) -> tuple[int, int]:
    """``(width, height)`` of a PNG file, read from its IHDR chunk."""
    if not data.startswith(PNG_SIGNATURE) or data[12:16] != b"IHDR":
        raise ChapterFigureError("not a PNG file (no signature and IHDR chunk)")
    return struct.unpack(">II", data[16:24])


def thumbnail(png: bytes, box: tuple[int, int] = THUMBNAIL_BOX) -> bytes:
    """The PNG scaled down to fit ``box`` (never up), on white, as a 256-colour PNG.

    A figure that already fits is returned unchanged (and not decoded). The card shows
    the figure on white, so transparency is flattened onto white. Median-cut keeps the
    gradients of colour bars and heatmaps (octree quantisation merged a heatmap's low
    values into one colour); 256 colours cut the bytes of a resampled image about 2.5x.
    The result is the same bytes for the same input, so :func:`write_if_changed` keeps
    builds incremental.
    """
    width, height = png_size(png)
    scale = min(box[0] / width, box[1] / height)
    if scale >= 1:
        return png
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    with Image.open(io.BytesIO(png)) as image:
        flat = Image.alpha_composite(Image.new("RGBA", image.size, "white"), image.convert("RGBA"))
    small = flat.convert("RGB").resize(size, Image.Resampling.LANCZOS)
    out = io.BytesIO()
    small.quantize(256, method=Image.Quantize.MEDIANCUT).save(out, format="PNG", optimize=True)
    return out.getvalue()


def page_title(source: Path) -> str:
    """The first level-1 heading (``# Title``) of a notebook's markdown cells or a MyST page."""
    if source.suffix == ".ipynb":
        cells = json.loads(source.read_text(encoding="utf-8"))["cells"]
        lines = [line for c in cells if c.get("cell_type") == "markdown"
                 for line in "".join(c.get("source", "")).splitlines()]  # fmt: skip
    else:
        lines = source.read_text(encoding="utf-8").splitlines()
    in_fence = False
    for line in lines:
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
        match = None if in_fence else _HEADING.match(line)
        if match:
            return match.group(1)
    return source.stem.split("_", 1)[-1].replace("_", " ").capitalize()


def plain_text(markup: str) -> str:
    r"""MyST title to plain text for alt text: ``$1/\sqrt{d_k}$`` -> ``1/√d_k``."""
    text = re.sub(r"\\sqrt\{([^{}]*)\}", "√\\1", markup)
    text = re.sub(r"\\([A-Za-z]+)", r"\1", text)
    text = re.sub(r"[`*${}]", "", text)
    return re.sub(r"\s+", " ", text).strip()


def write_if_changed(path: Path, data: bytes) -> bool:
    """Write ``data`` to ``path`` unless it already holds exactly these bytes; True if written."""
    if path.is_file() and path.read_bytes() == data:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return True


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_chapter_map(chapters: list[Chapter], folder: str = GENERATED) -> str:
    """MyST markdown for the grid of cards; image paths are relative to the root page."""
    out = [
        "<!-- Generated by book/_ext/chapter_figures.py at each build: do not edit. -->",
        "",
        "::::{grid} 1 1 2 2",
        ":gutter: 3",
        ":class-container: chapter-map",
        "",
    ]
    for ch in chapters:
        out.append(f":::{{grid-item-card}} {ch.number}. {ch.title}")
        out += [f":link: {ch.stem}", ":link-type: doc", ":shadow: md"]
        if ch.png is not None:
            alt = f"Figure from chapter {ch.number}: {plain_text(ch.title)}"
            out += [f":img-top: {folder}/{ch.stem}.png", f":img-alt: {_quoted(alt)}"]
        else:
            out.append(":class-card: chapter-map-nofigure")
        out += ["", ch.claim, ":::", ""]
    out.append("::::")
    return "\n".join(out) + "\n"


def chapter_stems(docnames: list[str], root_dir: str) -> list[str]:
    """Chapters among the toc's docnames: pages next to the root page named ``NN_name`` (a chapter's
    lesson; its evidence page, ``NN_name_evidence``, shares its card).

    Examples
    --------
    >>> chapter_stems(["book/intro", "book/01_a", "book/01_a_evidence", "book/ledger"], "book")
    ['01_a']
    """
    stems = []
    for docname in docnames:
        folder, _, stem = docname.rpartition("/")
        if folder == root_dir and _CHAPTER.match(stem) and not stem.endswith("_evidence"):
            stems.append(stem)
    return stems


def collect_chapters(folder: Path, stems: list[str], claims: dict[str, str]) -> list[Chapter]:
    """Read each chapter's title and figure from ``folder/<stem>.ipynb`` (else ``.md``)."""
    chapters = []
    for stem in stems:
        notebook, page = folder / f"{stem}.ipynb", folder / f"{stem}.md"
        source = notebook if notebook.is_file() else page
        if not source.is_file():
            raise ChapterFigureError(f"chapter {stem!r} is in the toc but neither {notebook} nor {page} exists")
        png = find_index_figure(source) if source.suffix == ".ipynb" else None
        number = int(_CHAPTER.match(stem).group(1))
        chapters.append(Chapter(number, stem, page_title(source), " ".join(claims.get(stem, "").split()), png))
    return chapters


def generate(folder: Path, chapters: list[Chapter]) -> list[Path]:
    """Write the figures and the map into ``folder/_generated``; return the files (re)written.

    Each figure is written as its :func:`thumbnail`. PNGs of chapters that no longer have a
    figure are deleted.
    """
    out_dir = folder / GENERATED
    written = []
    keep = {MAP_FILE}
    for ch in chapters:
        if ch.png is not None:
            keep.add(f"{ch.stem}.png")
            if write_if_changed(out_dir / f"{ch.stem}.png", thumbnail(ch.png)):
                written.append(out_dir / f"{ch.stem}.png")
    if write_if_changed(out_dir / MAP_FILE, render_chapter_map(chapters).encode("utf-8")):
        written.append(out_dir / MAP_FILE)
    for stale in out_dir.glob("*.png"):
        if stale.name not in keep:
            stale.unlink()
    return written


# --- Sphinx wiring -------------------------------------------------------------------------


def _toc_docnames(app, config) -> list[str]:
    """Docnames of _toc.yml in reading order, the root page first."""
    from sphinx_external_toc.parsing import parse_toc_yaml

    return list(parse_toc_yaml(Path(app.srcdir) / config.external_toc_path))


def _on_config_inited(app, config) -> None:
    from sphinx.util import logging

    logger = logging.getLogger(__name__)
    docnames = _toc_docnames(app, config)
    root_dir = docnames[0].rpartition("/")[0]  # "book": the root page's folder
    stems = list(dict.fromkeys(chapter_stems(docnames, root_dir)))
    claims = dict(config.chapter_map_claims or {})
    for stem in stems:
        if not claims.get(stem):
            logger.warning(f"chapter_map_claims in _config.yml has no claim for chapter {stem!r}",
                           type="chapter_map", subtype="claim")  # fmt: skip
    for stem in sorted(set(claims) - set(stems)):
        logger.warning(f"chapter_map_claims in _config.yml names {stem!r}, which is not a chapter in the toc",
                       type="chapter_map", subtype="claim")  # fmt: skip
    folder = Path(app.srcdir) / root_dir
    written = generate(folder, collect_chapters(folder, stems, claims))
    for path in written:
        logger.info(f"[chapter_map] wrote {path.relative_to(app.srcdir)}")
    # the generated markdown is included, never a page of its own
    config.exclude_patterns = [*config.exclude_patterns, f"{root_dir}/{GENERATED}".lstrip("/")]


def _on_build_finished(app, exception) -> None:
    if exception is None and app.builder.format == "html":
        write_if_changed(Path(app.outdir) / "_static" / CSS_FILE, CSS.encode("utf-8"))


def setup(app):
    app.add_config_value("chapter_map_claims", {}, "", types=[dict])
    # before sphinx_external_toc (priority 900) lists the files that are not in the toc,
    # so the exclude patterns (part of the saved environment) are the same at every build
    app.connect("config-inited", _on_config_inited, priority=850)
    app.add_css_file(CSS_FILE)
    app.connect("build-finished", _on_build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
