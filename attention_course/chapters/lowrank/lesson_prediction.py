"""Chapter 3's predict-then-reveal box, as its lesson shows it.

The lesson asks the question; the verdict the answer bears on is decided on the evidence page
beside it (``03_low_rank_evidence``). :func:`~attention_course.figures.predictions.prediction`
links its answer to a verdict box on the same page, so the lesson's box points its link at the
evidence page instead. Nothing else changes: the question, the choices and the answer (read from
the ledger's evidence file) are the shared ones.
"""

from __future__ import annotations

import dataclasses

from ...figures.predictions import PREDICTIONS, prediction
from ...figures.widgets import PredictReveal

__all__ = ["EVIDENCE_PAGE", "lesson_prediction"]

#: The page that holds chapter 3's verdict boxes (its stem; the book serves it as ``<stem>.html``).
EVIDENCE_PAGE = "03_low_rank_evidence"


def lesson_prediction(name: str, evidence_page: str = EVIDENCE_PAGE) -> PredictReveal:
    """The :class:`~attention_course.figures.widgets.PredictReveal` box ``name``, its "See the verdict"
    link leading to the verdict box on ``evidence_page``.

    Examples
    --------
    >>> box = lesson_prediction("ix-predict-lowrank")
    >>> box.correct, 'href="03_low_rank_evidence.html#claim-structure-implies-low-rank"' in box.to_html()
    ('8, full rank', True)
    >>> 'href="#claim-' in box.to_html()
    False
    """
    box = prediction(name)
    anchor = f"#claim-{PREDICTIONS[name].claim}"
    if f'href="{anchor}"' not in box.answer_html:
        raise ValueError(f"{name}: its answer has no link to {anchor}; expected the shared box's 'See the verdict.'")
    return dataclasses.replace(box, answer_html=box.answer_html.replace(f'href="{anchor}"',
                                                                        f'href="{evidence_page}.html{anchor}"'))
