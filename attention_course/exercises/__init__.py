"""The course's exercise engine: ``check(exercise_id, fn)`` never raises.

Chapters register their exercises in :data:`REGISTRY` when imported; feedback is chosen as
:mod:`attention_course.exercises._core` describes.
"""

from ._core import REGISTRY, Case, CheckResult, Exercise, Mutant, check, evaluate, register

__all__ = ["check", "evaluate", "REGISTRY", "Case", "CheckResult", "Exercise", "Mutant", "register"]
