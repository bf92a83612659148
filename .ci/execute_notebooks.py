"""Re-execute chapter notebooks in place and store their outputs (``make execute NB=...``).

Runs each notebook top to bottom in a fresh kernel from its own folder (as nbval
does), with no timing metadata, so the committed file changes only where an
output really changed. Usage: ``python .ci/execute_notebooks.py book/01_mechanics.ipynb ...``
"""

import sys
import time
from pathlib import Path

import nbclient
import nbformat


def execute(path: Path, timeout: int = 600) -> float:
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    client = nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    nbformat.write(nb, path)
    return time.perf_counter() - start


if __name__ == "__main__":
    for arg in sys.argv[1:] or sorted(Path("book").glob("[0-9][0-9]_*.ipynb")):
        print(f"{arg}: executed in {execute(Path(arg)):.1f} s", flush=True)
