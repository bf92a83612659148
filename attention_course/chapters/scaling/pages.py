"""Chapter 6's two pages: the exercises of the evidence page (``book/06_scaling_evidence.ipynb``); the lesson holds the others.

:func:`attention_course.course.progress.declared_exercises` reads :data:`EVIDENCE_EXERCISES`.
"""

from __future__ import annotations

__all__ = ["EVIDENCE_EXERCISES"]

#: The exercise ids of the evidence page, in its order; the lesson holds the chapter's others.
EVIDENCE_EXERCISES: tuple[str, ...] = ("softmax-gradient", "saturated-gradient")
