"""Chapter 3's two pages: which of its exercises sit on the evidence page rather than in the lesson.

The lesson (``book/03_low_rank.ipynb``) holds the exercises that build the chapter's ideas (the
effective rank, the best rank-k approximation, linear attention, the online softmax); the evidence
page (``book/03_low_rank_evidence.ipynb``) holds the one that is an experiment on an essay claim:
deciding, at a matched budget and with the mean row removed, whether rank k or top k keeps more of
an attention matrix is the comparison behind the ``low-rank`` verdict, asked by hand. The progress
command (:func:`attention_course.course.progress.declared_exercises`) reads
:data:`EVIDENCE_EXERCISES` to expect each exercise on its own page.
"""

from __future__ import annotations

__all__ = ["EVIDENCE_EXERCISES"]

#: The exercise ids of the evidence page, in its order; the lesson holds the chapter's others.
EVIDENCE_EXERCISES: tuple[str, ...] = ("rank-vs-topk",)
