"""A helper of the engine's tests: does an output match on one case, within that case's tolerances."""

from __future__ import annotations

from typing import Any

from attention_course.exercises._compare import close
from attention_course.exercises._core import Case, Exercise, _tolerances


def case_close(exercise: Exercise, case: Case, got: Any, expected: Any) -> bool:
    """True when ``got`` matches ``expected`` on ``case`` within that case's tolerances."""
    return close(got, expected, *_tolerances(exercise, case))
