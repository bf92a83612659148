"""Chapter 6's two pages: which of its exercises sit on the evidence page rather than in the lesson.

The lesson (``book/06_scaling.ipynb``) holds the exercises that build the chapter's ideas: the
variance of a dot product, the entropy of a tempered softmax, the softmax Jacobian. The evidence
page (``book/06_scaling_evidence.ipynb``) holds the two that repeat its measurements and end in a
verdict-like yes or no: whether the gradient vanishes at the softmax without the scale
(``sensitive-regime`` and ``gradient-vanishes``), and on the saturated rows of the tiny transformer
(the row-by-row test of ``gradient-vanishes``). The progress command
(:func:`attention_course.course.progress.declared_exercises`) reads :data:`EVIDENCE_EXERCISES` to
expect each exercise on its own page.
"""

from __future__ import annotations

__all__ = ["EVIDENCE_EXERCISES"]

#: The exercise ids of the evidence page, in its order; the lesson holds the chapter's others.
EVIDENCE_EXERCISES: tuple[str, ...] = ("softmax-gradient", "saturated-gradient")
