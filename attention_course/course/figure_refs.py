"""Figure references that read the same in the book and in JupyterLab: ``{ref}`Fig. 6.2 <fig-x>```.

JupyterLab cannot resolve ``{numref}`` to output figures, so the number is typed in the
reference; :func:`figure_numbers` numbers figures as Sphinx does and :func:`numbered_refs` writes
the references (:func:`sync_figure_refs` rewrites a chapter's).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Union

from .expressions import load_notebook, save_notebook

__all__ = ["NUMREF", "figure_numbers", "book_figure_numbers", "numbered_refs", "sync_figure_refs"]

#: A reference to a label: ``{numref}`fig-x```, ``{ref}`Fig. 6.2 <fig-x>```, ...
NUMREF = re.compile(r"\{(?P<role>numref|ref)\}`(?:(?P<title>[^`<]*?)\s*<(?P<target>[^`>]+)>|(?P<bare>[^`<>]+))`")


def _source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def figure_numbers(nb: dict, chapter: int | None, start: int = 1) -> dict[str, str]:
    """Figure name -> its number in the book (``"6.2"``), in order of appearance, from ``start``.

    An evidence page continues its lesson's numbers; ``chapter=None`` numbers ``1, 2, ...``.

    Examples
    --------
    >>> fig = lambda n: {"cell_type": "code", "metadata": {"mystnb": {"figure": {"name": n}}}}
    >>> figure_numbers({"cells": [fig("fig-a"), {"cell_type": "markdown", "metadata": {}}, fig("fig-b")]}, 6)
    {'fig-a': '6.1', 'fig-b': '6.2'}
    >>> figure_numbers({"cells": [fig("fig-c")]}, 6, start=3), figure_numbers({"cells": [fig("fig-d")]}, None)
    ({'fig-c': '6.3'}, {'fig-d': '1'})
    """
    names = [c.get("metadata", {}).get("mystnb", {}).get("figure", {}).get("name") for c in nb["cells"]
             if c["cell_type"] == "code"]
    prefix = f"{chapter}." if chapter is not None else ""
    return {n: f"{prefix}{k}" for k, n in enumerate([n for n in names if n], start)}


def book_figure_numbers(book_dir: Union[str, Path]) -> dict[str, str]:
    """Figure name -> number for every notebook in ``book_dir``: a chapter's lesson (``NN_x``) from
    ``N.1``, its evidence page (``NN_x_evidence``) after the lesson's last, other pages from 1."""
    numbers: dict[str, str] = {}
    paths = sorted(Path(book_dir).glob("*.ipynb"))
    for path in paths:
        if path.stem.endswith("_evidence"):
            continue
        nb = load_notebook(path)
        chapter = _chapter(path) if re.match(r"\d\d_", path.name) else None
        numbers.update(figure_numbers(nb, chapter))
        evidence = path.with_name(f"{path.stem}_evidence.ipynb")
        if chapter is not None and evidence.exists():
            numbers.update(figure_numbers(load_notebook(evidence), chapter, start=len(figure_numbers(nb, chapter)) + 1))
    return numbers


def _written(target: str, numbers: dict[str, str]) -> str:
    return "{ref}`Fig. " + numbers[target] + " <" + target + ">`"


def numbered_refs(markdown: str, numbers: dict[str, str]) -> str:
    """Every figure reference in ``markdown`` written as ``{ref}`Fig. N.M <fig-x>```.

    References to anything that is not a figure in ``numbers`` are left alone.

    Examples
    --------
    >>> numbered_refs("see {numref}`fig-a` and {ref}`Fig. 9.9 <fig-b>`", {"fig-a": "6.1", "fig-b": "6.2"})
    'see {ref}`Fig. 6.1 <fig-a>` and {ref}`Fig. 6.2 <fig-b>`'
    """
    def one(m: re.Match) -> str:
        target = m["target"] or m["bare"]
        return _written(target, numbers) if target in numbers else m.group(0)
    return NUMREF.sub(one, markdown)


def _chapter(path: Path) -> int:
    m = re.match(r"(\d\d)_", path.name)
    if m is None:
        raise ValueError(f"{path.name}: a chapter notebook's name starts with its number, like 06_scaling.ipynb")
    return int(m.group(1))


def sync_figure_refs(path: Union[str, Path]) -> bool:
    """Rewrite a chapter's figure references with their current numbers; return whether it changed."""
    path = Path(path)
    nb = load_notebook(path)
    numbers = book_figure_numbers(path.parent)
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            new = numbered_refs(_source(cell), numbers)
            if new != _source(cell):
                cell["source"] = new.splitlines(keepends=True)
    return save_notebook(path, nb)
