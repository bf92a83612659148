"""Chapter 3's run for two of the essay's sentences: trailing singular values, and focused tokens.

``python -m attention_course lowrank-sentences`` stores, in
``attention_course/data/lowrank_sentences.json``: ``trailing``,
:func:`~attention_course.chapters.lowrank.trailing.trailing_study` (the induction model over seeds
0-4 and MiniLM at n = 128 over five sentence orders, each at kept energy shares 0.9, 0.95 and 0.99;
about 6 minutes on one thread), and
``focus``, :func:`~attention_course.chapters.lowrank.focus.focus_study` on the 20 shipped sentences.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Optional

import torch

from ...models.records import DATA_DIR, machine_info, write_json
from .baselines import SENTENCES
from .focus import focus_study
from .trailing import trailing_study

__all__ = ["SENTENCES_PATH", "KEEPS", "sentences_run", "load_sentences", "add_arguments", "cli"]

SENTENCES_PATH = DATA_DIR / "lowrank_sentences.json"


#: The kept energy shares of the trailing study: 0.9 decides, the others are the sweep on the page.
KEEPS = (0.9, 0.95, 0.99)


def sentences_run(quick: bool = False) -> dict:
    """Both studies; ``quick`` shrinks the trailing study to one seed, order and share (a smoke test)."""
    torch.set_num_threads(1)
    kw = dict(seeds=[0], orders=[0], draws=[0], steps=20, keeps=[0.9]) if quick else dict(keeps=KEEPS)
    return {"machine": machine_info(), "trailing": trailing_study(**kw), "focus": focus_study(SENTENCES)}


def load_sentences(path: Optional[Path] = None) -> dict:
    """The stored run (default :data:`SENTENCES_PATH`)."""
    return json.loads(Path(path or SENTENCES_PATH).read_text())


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``python -m attention_course lowrank-sentences``."""
    parser.add_argument("--json", type=Path, default=SENTENCES_PATH, help="where to store the run")
    parser.add_argument("--quick", action="store_true", help="a small smoke run")


def cli(args: argparse.Namespace, parser: Optional[argparse.ArgumentParser] = None) -> int:
    """Run and store; return the exit code."""
    write_json(sentences_run(quick=args.quick), args.json)
    print(f"stored {args.json}")
    return 0
