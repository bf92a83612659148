"""Chapter 4's two pages: which of its exercises sit on the evidence page rather than in the lesson.

The lesson (``book/04_multi_head.ipynb``) holds the exercises that build multi-head attention: split
the heads, the forward pass, the parameter count, switching a head off. The evidence page
(``book/04_multi_head_evidence.ipynb``) holds the one that is an experiment on an essay claim:
measuring how much two heads' subspaces overlap, against chance, is the ``different-subspaces``
verdict asked by hand, and its data (MiniLM's weights, random baselines) are on that page. The
progress command (:func:`attention_course.course.progress.declared_exercises`) reads
:data:`EVIDENCE_EXERCISES` to expect each exercise on its own page.
"""

from __future__ import annotations

__all__ = ["EVIDENCE_EXERCISES"]

#: The exercise ids of the evidence page, in its order; the lesson holds the chapter's others.
EVIDENCE_EXERCISES: tuple[str, ...] = ("subspace-overlap",)
