"""Chapter 2's two pages: which of its exercises sit on the evidence page rather than in the lesson.

The lesson (``book/02_kernel_smoothing.ipynb``) holds the exercises that build the chapter's ideas:
the estimator, leave-one-out predictions and a kernel with a learned metric. The evidence page
(``book/02_kernel_smoothing_evidence.ipynb``) holds the one that re-checks a claim by hand: writing
the Gaussian smoother as softmax attention with a key bias is the identity behind the
``nadaraya-watson`` verdict, which the lesson already derives and runs on the page, and which the
evidence page verifies against the package and PyTorch. The progress command
(:func:`attention_course.course.progress.declared_exercises`) reads :data:`EVIDENCE_EXERCISES` to
expect each exercise on its own page.
"""

from __future__ import annotations

__all__ = ["EVIDENCE_EXERCISES"]

#: The exercise ids of the evidence page, in its order; the lesson holds the chapter's others.
EVIDENCE_EXERCISES: tuple[str, ...] = ("gaussian-as-softmax",)
