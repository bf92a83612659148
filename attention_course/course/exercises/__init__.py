"""The course's exercise system: ``check(exercise_id, fn)`` never raises.

Each chapter's exercises live in their own module and register themselves in
:data:`REGISTRY` on import. See :mod:`attention_course.course.exercises._core` for how
feedback is chosen.
"""

from ._core import REGISTRY, Case, CheckResult, Exercise, Mutant, check, evaluate, register
from . import ch01_mechanics  # noqa: F401  (registers chapter 1)
from . import ch02_kernels  # noqa: F401  (registers chapter 2)
from . import ch03_low_rank  # noqa: F401  (registers chapter 3)
from . import ch04_multi_head  # noqa: F401  (registers chapter 4)
from . import ch05_graphs  # noqa: F401  (registers chapter 5)
from . import ch06_scaling  # noqa: F401  (registers chapter 6)

__all__ = ["check", "evaluate", "REGISTRY", "Case", "CheckResult", "Exercise", "Mutant", "register"]
