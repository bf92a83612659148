"""Chapter 5's two pages: which of its exercises sit on the evidence page rather than in the lesson.

The lesson (``book/05_message_passing.ipynb``) holds the exercises that build the chapter's ideas;
the evidence page (``book/05_message_passing_evidence.ipynb``) holds the one that is an experiment
on an essay claim: measuring, for one head, how much of its graph survives a shuffle of the words
is the question of the ``learned-topology`` verdict asked by hand. The progress command
(:func:`attention_course.course.progress.declared_exercises`) reads :data:`EVIDENCE_EXERCISES` to
expect each exercise on its own page.
"""

from __future__ import annotations

__all__ = ["EVIDENCE_EXERCISES"]

#: The exercise ids of the evidence page, in its order; the lesson holds the chapter's others.
EVIDENCE_EXERCISES: tuple[str, ...] = ("effective-graph-overlap",)
