"""Chapter 2's exercises that sit on the evidence page (``book/02_kernel_smoothing_evidence.ipynb``), not in the lesson.

:func:`attention_course.course.progress.declared_exercises` reads :data:`EVIDENCE_EXERCISES`.
"""

from __future__ import annotations

__all__ = ["EVIDENCE_EXERCISES"]

#: The exercise ids of the evidence page, in its order; the lesson holds the chapter's others.
EVIDENCE_EXERCISES: tuple[str, ...] = ("gaussian-as-softmax",)
