"""The build ships only what the pages load (book/_ext/page_weight.py) and small thumbnails
(book/_ext/chapter_figures.py): pruning on a copy of the real MathJax, resizing real PNGs."""

from __future__ import annotations

import io
import shutil
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest
from PIL import Image

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import chapter_figures as cf  # noqa: E402  (local Sphinx extensions, not a package)
import page_weight as pw  # noqa: E402

# sphinx-mathjax-offline's folder has dashes (it is not importable by name): found on sys.path
MATHJAX = next((Path(p) / "sphinx-mathjax-offline" / "static" / "mathjax" for p in sys.path
                if (Path(p) / "sphinx-mathjax-offline" / "static" / "mathjax").is_dir()), None)  # fmt: skip


@pytest.fixture
def mathjax(tmp_path):
    if MATHJAX is None:
        pytest.skip("sphinx-mathjax-offline is not installed")
    return Path(shutil.copytree(MATHJAX, tmp_path / "mathjax"))


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def test_mathjax_keeps_the_component_and_what_it_loads_on_demand(mathjax):
    before = _files(mathjax)
    size = sum((mathjax / f).stat().st_size for f in before)
    removed = pw.prune(mathjax, pw.mathjax_keep("tex-chtml.js"))
    after = _files(mathjax)
    assert removed == size - sum((mathjax / f).stat().st_size for f in after)
    assert "tex-chtml.js" in after
    # every CHTML font, TeX extension and accessibility module that was there is still there
    for folder in ("output/chtml/fonts/woff-v2/", "input/tex/extensions/", "a11y/"):
        wanted = {f for f in before if f.startswith(folder)}
        assert wanted and wanted <= after, folder
    assert {"sre/mathmaps/en.json", "sre/mathmaps/base.json"} <= after
    # and nothing else: no other component, input, output or language
    assert not {f for f in after if f.endswith(".js") and "/" not in f} - {"tex-chtml.js"}
    assert not any(f.startswith(("output/svg", "input/mml", "sre/mathmaps/de.")) for f in after)
    assert not [d for d in mathjax.rglob("*") if d.is_dir() and not any(d.iterdir())], "empty folders left"
    assert removed > 15 * 2**20, f"only {removed / 2**20:.1f} MiB pruned from MathJax's 24 MiB"
    assert pw.prune(mathjax, pw.mathjax_keep("tex-chtml.js")) == 0  # a second build: nothing left to do


def test_mathjax_prune_refuses_a_layout_it_does_not_know(tmp_path):
    (tmp_path / "tex-chtml.js").write_text("x")
    with pytest.raises(FileNotFoundError, match="input/tex/extensions"):
        pw.prune(tmp_path, pw.mathjax_keep("tex-chtml.js"))
    assert (tmp_path / "tex-chtml.js").is_file()  # nothing deleted


def test_fontawesome_script_becomes_a_stub_and_maps_go(tmp_path):
    (tmp_path / "scripts").mkdir()
    (tmp_path / "styles").mkdir()
    fonts = tmp_path / "vendor" / "fontawesome" / "webfonts"
    fonts.mkdir(parents=True)
    (tmp_path / pw.FONTAWESOME_JS).write_text("x" * 1000)
    (tmp_path / "scripts" / "fontawesome.js.map").write_text("m" * 500)
    (tmp_path / "styles" / "theme.css.map").write_text("m" * 300)
    (tmp_path / "styles" / "theme.css").write_text("body{}")
    for name, size in (("fa-solid-900.woff2", 10), ("fa-solid-900.ttf", 40), ("fa-brands-400.ttf", 30)):
        (fonts / name).write_bytes(b"f" * size)
    assert pw.replace_fontawesome(tmp_path) == 1000 - len(pw.FONTAWESOME_STUB.encode()) + 40
    assert (tmp_path / pw.FONTAWESOME_JS).read_text() == pw.FONTAWESOME_STUB
    # a TrueType font goes only where its WOFF2 twin stays
    assert sorted(p.name for p in fonts.iterdir()) == ["fa-brands-400.ttf", "fa-solid-900.woff2"]
    assert pw.replace_fontawesome(tmp_path) == 0
    assert pw.drop_source_maps(tmp_path) == 800
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".ttf"
                  and p.suffix != ".woff2") == ["fontawesome.js", "theme.css"]  # fmt: skip


def _figure_png(width_in: float, height_in: float, dpi: int) -> bytes:
    fig, ax = plt.subplots(figsize=(width_in, height_in), dpi=dpi)
    ax.plot([0, 1, 2], [0, 1, 0])
    ax.set_title("a title")
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=dpi)
    plt.close(fig)
    return out.getvalue()


@pytest.mark.parametrize(("size_in", "expected"), [((15, 5), (644, 215)), ((6, 7), (439, 512))])
def test_thumbnail_fits_the_card_box(size_in, expected):
    png = _figure_png(*size_in, dpi=100)  # 1500 x 500 and 600 x 700 px
    small = cf.thumbnail(png)
    with Image.open(io.BytesIO(small)) as image:
        assert image.size == expected  # width and height scaled alike, within 644 x 512
        assert image.format == "PNG"
    assert len(small) < len(png)
    assert cf.thumbnail(png) == small  # the same bytes each build: incremental builds stay incremental


def test_thumbnail_leaves_a_small_figure_alone():
    png = _figure_png(4, 3, dpi=100)  # 400 x 300 px
    assert cf.thumbnail(png) is png


def test_thumbnail_of_a_real_chapter_figure():
    notebooks = sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb"))
    figures = [png for png in map(cf.find_index_figure, notebooks) if png is not None]
    assert figures, "no chapter has an index-figure"
    full = sum(map(len, figures))
    small = sum(len(cf.thumbnail(png)) for png in figures)
    assert small < full / 2, f"thumbnails {small} bytes, figures {full} bytes"


def test_thumbnail_keeps_a_heatmap_faithful():
    """256 colours must not flatten a heatmap: on average within 1 of 255 levels of the unquantised resize.

    Median cut gives 0.3 levels here; octree quantisation gave 1.3 and, on chapter 7's
    figure, merged the low weights of a heatmap into one colour.
    """
    rng = np.random.default_rng(0)
    fig, ax = plt.subplots(figsize=(12, 6), dpi=100)
    image = ax.imshow(rng.dirichlet(np.full(16, 0.3), size=16), cmap="viridis")  # many weights near 0
    fig.colorbar(image)
    out = io.BytesIO()
    fig.savefig(out, format="png")
    plt.close(fig)
    png = out.getvalue()
    with Image.open(io.BytesIO(cf.thumbnail(png))) as small:
        size, got = small.size, np.asarray(small.convert("RGB"), dtype=float)
    with Image.open(io.BytesIO(png)) as full:
        reference = np.asarray(full.convert("RGB").resize(size, Image.Resampling.LANCZOS), dtype=float)
    assert np.abs(got - reference).mean() < 1.0
