"""A build chapter's notebook with the course's solutions pasted into its exercise stubs.

The build chapters (8-10) end by running the learner's parts together: a copy with every stub
solved must pass every check and run to the end. The chapters' notebook tests share this; the
book-wide tests (tests/book/) check every page's reading time, word budget and exercise titles.
"""

from __future__ import annotations

import copy
import inspect
import re
import sys
from pathlib import Path

import nbclient
import nbformat

from attention_course.course import progress
from attention_course.course.solutions import SOLUTIONS

BOOK = Path(__file__).resolve().parents[1] / "book"


def opening(nb) -> str:
    """The first markdown cell: the question, the goals, what it assumes, the reading time."""
    return next(c.source for c in nb.cells if c.cell_type == "markdown")


def _pasted(eid: str, stub: str, fn) -> str:
    """The solution's source under the stub's name, with the module names it uses imported."""
    module = sys.modules[fn.__module__]
    names = [n for n in fn.__code__.co_names if n in vars(module) and n != fn.__name__]
    header = f"from {fn.__module__} import {', '.join(names)}\n" if names else ""
    source = re.sub(rf"^def {fn.__name__}\(", f"def {stub}(", inspect.getsource(fn), count=1, flags=re.M)
    return f"# EXERCISE: {eid}\n{header}{source}"


def solved(nb):
    """A copy of ``nb`` whose exercise cells hold the course's solutions."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        m = progress.EXERCISE_RE.search(cell.source) if cell.cell_type == "code" else None
        if m:
            (stub,) = progress.DEF_RE.findall(cell.source)
            cell.source = _pasted(m[1], stub, SOLUTIONS[m[1]])
    return nb


def run_solved(nb, timeout: int = 600) -> str:
    """Execute the solved copy of ``nb`` in a fresh kernel; return everything it printed."""
    copy_ = solved(nb)
    nbclient.NotebookClient(copy_, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(BOOK)}}).execute()
    return printed(copy_)


def printed(nb) -> str:
    """What ``nb``'s code cells printed, one cell's streams joined as written, cells on new lines.

    A kernel may flush one ``print`` in several stream messages, so streams are not joined by lines:

    >>> from nbformat.v4 import new_code_cell, new_notebook, new_output
    >>> cell = new_code_cell(outputs=[new_output("stream", name="stdout", text="estimate:"),
    ...                               new_output("stream", name="stdout", text=" True\\n")])
    >>> printed(new_notebook(cells=[cell, cell]))
    'estimate: True\\n\\nestimate: True\\n'
    """
    return "\n".join("".join(o.get("text", "") for o in c.outputs if o.get("output_type") == "stream")
                     for c in nb.cells if c.cell_type == "code")
