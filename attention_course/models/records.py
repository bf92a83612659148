"""Where an experiment ran: stored beside its results, so a reader can judge the numbers."""

from __future__ import annotations

import datetime
import json
import os
import platform
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Optional

import numpy as np
import torch

__all__ = ["machine_info", "progress_bar"]


def machine_info(threads: Optional[int] = None) -> dict:
    """CPU model, core count, threads used, library versions and the date (UTC)."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {
        "cpu": cpu, "cores": os.cpu_count(), "torch_threads": threads or torch.get_num_threads(),
        "torch": torch.__version__, "numpy": np.__version__, "python": platform.python_version(),
        "platform": platform.platform(), "load_average": [round(v, 2) for v in os.getloadavg()],
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


DATA_DIR = Path(__file__).resolve().parents[1] / "data"


def write_json(doc: dict, path: Path) -> dict:
    """Store ``doc`` as the data files are stored (``indent=1``, a final newline) and return it."""
    Path(path).write_text(json.dumps(doc, indent=1) + "\n")
    return doc


def progress_bar(items: Iterable, desc: str, total: Optional[int] = None, show: bool = True) -> Iterator:
    """Iterate ``items`` with a tqdm bar on stderr (a long command's progress), or silently.

    tqdm comes with transformers; without it, one line per item goes to stderr instead.

    Examples
    --------
    >>> list(progress_bar(range(3), "demo", show=False))
    [0, 1, 2]
    """
    if not show:
        yield from items
        return
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover
        for i, item in enumerate(items):
            print(f"{desc}: {i + 1}/{total if total is not None else '?'}", file=sys.stderr, flush=True)
            yield item
        return
    yield from tqdm(items, desc=desc, total=total, file=sys.stderr)
