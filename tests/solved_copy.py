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
from attention_course.exercises import REGISTRY

BOOK = Path(__file__).resolve().parents[1] / "book"


def opening(nb) -> str:
    """The first markdown cell: the question, the goals, what it assumes, the reading time."""
    return next(c.source for c in nb.cells if c.cell_type == "markdown")


def stated_exercise_minutes(nb) -> int:
    """The exercises' minutes the opening states (``**Reading time:** about N minutes, and M for the exercises.``)."""
    return int(re.search(r"^\*\*Reading time:\*\* about \d+ minutes, and (\d+) for the exercises\.$",
                         opening(nb), re.M)[1])


def declared_minutes(exercises) -> int:
    """The minutes the chapter's exercises declare, summed."""
    return sum(REGISTRY[e].minutes for e in exercises)


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
    return "\n".join(o.get("text", "") for c in copy_.cells if c.cell_type == "code" for o in c.outputs
                     if o.get("output_type") == "stream")
