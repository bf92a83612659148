"""Chapter 3's run for two of the essay's sentences: trailing singular values, and focused tokens.

``python -m attention_course lowrank-sentences`` (:data:`LOWRANK_SENTENCES`; ``--part trailing`` or
``--part focus`` runs one study) stores ``attention_course/data/lowrank_sentences.json``;
:func:`load_sentences` reads it back.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ...models.experiments import Experiment, Runs, read_json, register
from ...models.records import DATA_DIR
from .baselines import SENTENCES
from .focus import focus_models_study
from .trailing import trailing_study

__all__ = ["load_sentences"]

SENTENCES_PATH = DATA_DIR / "lowrank_sentences.json"
#: The kept energy shares of the trailing study: 0.9 decides, the others are the sweep on the page.
KEEPS = (0.9, 0.95, 0.99)


@dataclass(frozen=True)
class SentencesConfig:
    """``quick`` shrinks the trailing study to one seed, order and kept share, 20 steps (a smoke test);
    ``part`` runs one study (``"trailing"`` or ``"focus"``) or both (``None``)."""

    quick: bool = False
    part: Optional[str] = None


def _study(config: SentencesConfig, name: str) -> dict:
    if name == "trailing":
        return trailing_study(**(dict(seeds=[0], orders=[0], draws=[0], steps=20, keeps=[0.9]) if config.quick
                                 else dict(keeps=KEEPS)))
    return focus_models_study(SENTENCES)


def _document(config: SentencesConfig, runs: Runs, meta: dict) -> dict:
    return {"machine": meta["machine"], **{job[0]: r for job, r in zip(runs.jobs, runs.records)}}


def _grid(config: SentencesConfig) -> list[tuple]:
    return [(part,) for part in ("trailing", "focus") if config.part in (None, part)]


def _keep_the_other(doc: dict, previous: dict) -> dict:
    """The study just run replaces its own record; the other stays (in the stored order: trailing, then focus)."""
    return {key: doc.get(key, previous.get(key)) for key in ("machine", "trailing", "focus") if key in doc or key in previous}


#: ``python -m attention_course lowrank-sentences``: both studies.
LOWRANK_SENTENCES = register(Experiment(
    "lowrank-sentences", SentencesConfig(), _study, SENTENCES_PATH, grid=_grid, document=_document,
    merge=_keep_the_other, out_flag="--json", indent=None,
    flags={"--quick": dict(action="store_true", help="a small smoke run"),
           "--part": dict(choices=("trailing", "focus"), help="run one study and keep the other's record")},
    help="chapter 3's run for two essay sentences: trailing singular values, focused tokens",
    description="Remove each head's trailing singular values (90%, 95% and 99% of the energy kept) from the "
                "induction model (5 seeds) and MiniLM (5 orders) against the same energy removed at random or from the "
                "leading values (about 6 minutes); count the heads of MiniLM and SmolLM2-135M whose tokens put half of "
                "their content weight on a few keys, against copies with W_Q and W_K scrambled (about a minute); write "
                "JSON (default: attention_course/data/lowrank_sentences.json; --part runs one study and keeps the other)."))


def load_sentences(path: Optional[Path] = None) -> dict:
    """The stored run (default :data:`SENTENCES_PATH`)."""
    return read_json(path or SENTENCES_PATH)
