"""The course's exercise engine: ``check(exercise_id, fn)`` never raises.

Each chapter declares its exercises in ``attention_course/chapters/<topic>/exercises.py``,
which registers them in :data:`REGISTRY` when the chapter is imported (importing
``attention_course`` imports every chapter). See :mod:`attention_course.exercises._core`
for how feedback is chosen. The engine imports nothing else of the package.
"""

from ._core import REGISTRY, Case, CheckResult, Exercise, Mutant, check, evaluate, register

__all__ = ["check", "evaluate", "REGISTRY", "Case", "CheckResult", "Exercise", "Mutant", "register"]
