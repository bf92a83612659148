"""Shared test settings: a headless matplotlib backend in the test process, offline Hugging Face.

The backend is set in-process only (not through MPLBACKEND), because notebook
kernels started by nbval inherit the environment and must keep the inline backend.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import matplotlib  # noqa: E402

matplotlib.use("Agg")


import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _figures_closed_and_rcparams_unchanged():
    """Close every figure after each test, and fail if a test changed global rcParams."""
    before = dict(matplotlib.rcParams)
    yield
    plt.close("all")
    assert dict(matplotlib.rcParams) == before, "a plot helper changed global rcParams"
