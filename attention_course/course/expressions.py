"""Inline numbers that JupyterLab can show: the chapters' ``{eval}`value_of("name:fmt")``` roles.

``jupyterlab-myst`` renders an ``{eval}`` role from the cell's ``user_expressions`` metadata.
:func:`sync_notebook` writes it from the notebook's glued values; :func:`expression_problems`
checks it.
"""

from __future__ import annotations

import json
import re
import string
from pathlib import Path
from typing import Union

from .book import format_value

__all__ = ["ROLE", "role", "roles", "glue_roles", "load_notebook", "save_notebook", "glued_texts", "user_expressions", "sync_notebook",
           "expression_problems"]

#: One inline number in the prose: ``{eval}`value_of("name:fmt")```.
ROLE = re.compile(r'\{eval\}`value_of\("(?P<spec>[A-Za-z_]\w*(?::[^"`]*)?)"\)`')


def role(spec: str) -> str:
    """The MyST role that quotes a glued number: ``role("x:.2f")`` -> ``{eval}`value_of("x:.2f")```.

    Examples
    --------
    >>> role("hull_n")
    '{eval}`value_of("hull_n")`'
    >>> ROLE.fullmatch(role("w_loo:.2f"))["spec"]
    'w_loo:.2f'
    """
    return '{eval}`value_of("' + spec + '")`'


def glue_roles(fmt: str) -> str:
    """A format string with each ``{name:fmt}`` written as the inline-number role ``{eval}`value_of("name:fmt")```.

    Examples
    --------
    >>> glue_roles("in {ok} of {n} seeds; {m:.2f}")
    'in {eval}`value_of("ok")` of {eval}`value_of("n")` seeds; {eval}`value_of("m:.2f")`'
    """
    parts = []
    for literal, name, spec, _ in string.Formatter().parse(fmt):
        parts.append(literal)
        if name:
            parts.append(role(name + (f":{spec}" if spec else "")))
    return "".join(parts)


def roles(markdown: str) -> list[str]:
    """The glue specs a markdown text quotes, in order of appearance.

    Examples
    --------
    >>> roles('error {eval}`value_of("err:.1e")` at n = {eval}`value_of("n")`.')
    ['err:.1e', 'n']
    """
    return [m["spec"] for m in ROLE.finditer(markdown)]


def load_notebook(path: Union[str, Path]) -> dict:
    """A notebook file as JSON (nbformat's dict), with a clear error when it is missing."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no notebook at {path}")
    return json.loads(path.read_text(encoding="utf-8"))


def save_notebook(path: Union[str, Path], nb: dict) -> bool:
    """Write ``nb`` to ``path`` as nbformat does, only if that changes the file; return whether it did."""
    path = Path(path)
    text = json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n"  # as nbformat writes
    if path.is_file() and text == path.read_text(encoding="utf-8"):
        return False
    path.write_text(text, encoding="utf-8")
    return True


def glued_texts(nb: dict) -> dict[str, str]:
    """Glue name -> the ``text/plain`` the notebook stored for it (myst-nb's ``scrapbook`` outputs).

    Examples
    --------
    >>> out = {"output_type": "display_data", "metadata": {"scrapbook": {"name": "n"}},
    ...        "data": {"application/papermill.record/text/plain": "12"}}
    >>> glued_texts({"cells": [{"cell_type": "code", "outputs": [out]}]})
    {'n': '12'}
    """
    texts = {}
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            name = out.get("metadata", {}).get("scrapbook", {}).get("name")
            data = out.get("data", {})
            text = data.get("application/papermill.record/text/plain", data.get("text/plain"))
            if name and text is not None:
                texts[name] = text if isinstance(text, str) else "".join(text)
    return texts


def user_expressions(markdown: str, texts: dict[str, str]) -> list[dict]:
    """The ``user_expressions`` metadata of one markdown cell, from the notebook's glued texts.

    Each entry is what the kernel answers for ``value_of("name:fmt")``; a name never glued gets
    an error entry.

    Examples
    --------
    >>> user_expressions('{eval}`value_of("e:.0e")`', {"e": "1e-12"})[0]["result"]["data"]
    {'text/plain': '1e-12'}
    >>> user_expressions('{eval}`value_of("f:.2f")`', {})[0]["result"]["status"]
    'error'
    """
    entries, seen = [], set()
    for spec in roles(markdown):
        if spec in seen:
            continue
        seen.add(spec)
        name, _, fmt = spec.partition(":")
        expr = f'value_of("{spec}")'
        if name in texts:
            result = {"status": "ok", "data": {"text/plain": format_value(texts[name], fmt)}, "metadata": {}}
        else:
            result = {"status": "error", "ename": "KeyError",
                      "evalue": f"nothing is glued under {name!r}", "traceback": []}
        entries.append({"expression": expr, "result": result})
    return entries


def _expected(nb: dict) -> list[Union[list, None]]:
    texts = glued_texts(nb)
    out = []
    for cell in nb["cells"]:
        src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        out.append(user_expressions(src, texts) or None if cell["cell_type"] == "markdown" else None)
    return out


def sync_notebook(path: Union[str, Path]) -> bool:
    """Write each markdown cell's ``user_expressions`` from the notebook's stored glue values.

    Returns whether the file changed.

    Raises
    ------
    KeyError
        When the prose quotes a name the notebook never glued.
    """
    path = Path(path)
    nb = load_notebook(path)
    missing = [p for p in expression_problems(path, nb) if "never glued" in p]
    if missing:
        raise KeyError(f"{path.name}: " + "; ".join(missing))
    for cell, expected in zip(nb["cells"], _expected(nb)):
        if expected:
            cell["metadata"]["user_expressions"] = expected
        else:
            cell.get("metadata", {}).pop("user_expressions", None)
    return save_notebook(path, nb)


def expression_problems(path: Union[str, Path], nb: Union[dict, None] = None) -> list[str]:
    """Where a notebook's stored ``user_expressions`` differ from what its glued values give.
    """
    path = Path(path)
    nb = load_notebook(path) if nb is None else nb
    texts, problems = glued_texts(nb), []
    for i, (cell, expected) in enumerate(zip(nb["cells"], _expected(nb))):
        for spec in (roles("".join(cell["source"])) if cell["cell_type"] == "markdown" else []):
            if spec.partition(":")[0] not in texts:
                problems.append(f"cell {i}: {spec!r} quotes a name the notebook never glued")
        stored = cell.get("metadata", {}).get("user_expressions")
        if stored != expected:
            problems.append(f"cell {i}: stored user_expressions differ from the glued values "
                            "(run `make execute NB=...`, or `python .ci/execute_notebooks.py --sync-only <notebook>`)")
    return problems
