"""Re-execute chapter notebooks in place and store their outputs (``make execute NB=...``).

Runs each notebook top to bottom in a fresh kernel from its own folder (as nbval
does), with no timing metadata, so the committed file changes only where an
output really changed. Then writes what JupyterLab needs to show the prose as the book
does: each verdict box, from the ledger (``attention_course.course.verdict_boxes``), and each
lesson's one-line claims (``attention_course.course.claim_lines``); each markdown cell's ``user_expressions`` (the glued numbers,
``attention_course.course.expressions``) and figure references with their numbers
(``attention_course.course.figure_refs``).

Usage: ``python .ci/execute_notebooks.py book/01_mechanics.ipynb ...``; with ``--sync-only``
it only rewrites that metadata and those references (after an edit of the prose).
"""

import sys
import time
from pathlib import Path

import nbclient
import nbformat

from attention_course.course.claim_lines import sync_claim_lines
from attention_course.course.expressions import sync_notebook
from attention_course.course.figure_refs import sync_figure_refs
from attention_course.course.verdict_boxes import sync_verdict_boxes


def execute(path: Path, timeout: int = 600) -> float:
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    client = nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    nbformat.write(nb, path)
    return time.perf_counter() - start


def sync(path: Path) -> str:
    steps = (("verdict boxes", sync_verdict_boxes), ("claim lines", sync_claim_lines),
             ("figure numbers", sync_figure_refs),
             ("inline numbers", sync_notebook))
    changed = [what for what, fn in steps if fn(path)]
    return "updated " + " and ".join(changed) if changed else "prose metadata up to date"


if __name__ == "__main__":
    args = sys.argv[1:]
    only_sync = "--sync-only" in args
    paths = [Path(a) for a in args if a != "--sync-only"] or sorted(Path("book").glob("*.ipynb"))
    for path in paths:
        took = "" if only_sync else f"executed in {execute(path):.1f} s; "
        print(f"{path}: {took}{sync(path)}", flush=True)
