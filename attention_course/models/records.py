"""Where an experiment ran, stored beside its results so a reader can judge the numbers; where the data lives."""

from __future__ import annotations

import datetime
import os
import platform
from pathlib import Path
from typing import Optional

import numpy as np
import torch

__all__ = ["machine_info", "DATA_DIR"]

#: The package's stored runs, slider data and the claims ledger.
DATA_DIR = Path(__file__).resolve().parents[1] / "data"


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
