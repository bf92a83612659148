"""Chapter 4's two pages: the exercises of the evidence page (``book/04_multi_head_evidence.ipynb``).

The subspace overlap is the ``different-subspaces`` verdict asked by hand, on that page's data; the
lesson holds the others. Read by :func:`attention_course.course.progress.declared_exercises`.
"""

from __future__ import annotations

__all__ = ["EVIDENCE_EXERCISES"]

#: The exercise ids of the evidence page, in its order; the lesson holds the chapter's others.
EVIDENCE_EXERCISES: tuple[str, ...] = ("subspace-overlap",)
