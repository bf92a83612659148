"""Shared test settings: a headless matplotlib backend and deterministic threads."""

import os

os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import matplotlib  # noqa: E402

matplotlib.use("Agg")
