"""One call that prepares a chapter notebook: ``ac.setup_chapter(globals())``.

The book's figure style, rounded printing, a seeded generator, and :func:`chapter_names`
in the notebook's namespace (and nowhere else)::

    import attention_course as ac
    from attention_course.chapters import mechanics as ch
    ac.setup_chapter(globals())
"""

from __future__ import annotations

from typing import Any, MutableMapping, Optional

import numpy as np
import torch
import torch.nn.functional as F

from ..exercises import check
from ..figures.predictions import prediction
from ..figures.style import setup_notebook
from .book import glue, value_of
from .claims import error_ceiling

__all__ = ["setup_chapter", "chapter_names"]


def chapter_names(seed: int = 0) -> dict[str, Any]:
    """The names a chapter's cells use, with a fresh ``rng``: ``np``, ``torch``, ``F`` (``torch.nn.functional``),
    ``rng`` (a numpy Generator seeded with ``seed``, a fresh one each time the cell runs), ``check`` (the exercise
    checker, ``check(exercise_id, fn)``), ``glue`` (stores a number for the prose: myst-nb's glue, a no-op without
    myst-nb), ``value_of`` (the prose's inline numbers, ``{eval}`value_of("name:fmt")```), ``prediction`` (a
    predict-then-reveal box), ``error_ceiling`` (the error bound a verdict's tolerance is derived from) and
    ``Markdown`` (IPython's Markdown display object).

    Examples
    --------
    >>> names = chapter_names(seed=0)
    >>> sorted(names), round(float(names["rng"].random()), 4)
    (['F', 'Markdown', 'check', 'error_ceiling', 'glue', 'np', 'prediction', 'rng', 'torch', 'value_of'], 0.637)
    """
    from IPython.display import Markdown  # IPython ships with every Jupyter kernel

    return dict(np=np, torch=torch, F=F, rng=np.random.default_rng(seed), check=check, glue=glue,
                value_of=value_of, prediction=prediction, error_ceiling=error_ceiling, Markdown=Markdown)


def setup_chapter(namespace: MutableMapping[str, Any], seed: int = 0, threads: Optional[int] = 1) -> None:
    """Prepare a chapter notebook: figure style, printing, threads, and :func:`chapter_names`.

    Changes global state on purpose: matplotlib's rcParams, numpy's print options (3 decimals)
    and, unless ``threads`` is None, torch's thread count.

    Parameters
    ----------
    namespace : dict
        The notebook's globals (pass ``globals()``); :func:`chapter_names` are set in it.
    seed : int
        Seed of the notebook's ``rng``.
    threads : int or None
        torch threads (one is fastest for these sizes); ``None`` leaves torch's setting alone.
    """
    setup_notebook()
    np.set_printoptions(precision=3, suppress=True)
    if threads is not None:
        torch.set_num_threads(threads)
    namespace.update(chapter_names(seed))
