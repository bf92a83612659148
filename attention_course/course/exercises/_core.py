"""The exercise checker: one mechanism for every exercise in the course.

An exercise is a reference function, a list of seeded input cases (edge cases
included), and a list of *mutants*: the typical wrong answers, each with the
feedback a learner who wrote it should get. :func:`evaluate` runs a learner's
function on every case and returns a :class:`CheckResult`; :func:`check` prints
it. Neither ever raises, whatever the learner's function does, so "Run All"
always reaches the end of a notebook.

How feedback is chosen, in order:

1. the function is missing, not callable, or raises ``NotImplementedError``
   ("not implemented yet");
2. it raises another exception, changes its input in place, returns ``None``,
   the wrong type or the wrong shape;
3. its results match the reference on every case: passed;
4. its results match a known mutant on every case: that mutant's feedback;
5. an exercise-specific *hint* recognises the symptom (rows that do not sum to
   1, NaN from overflow, ...);
6. otherwise: which case differs, and by how much.
"""

from __future__ import annotations

import copy
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

__all__ = ["Case", "Mutant", "Exercise", "CheckResult", "evaluate", "check", "register", "REGISTRY"]

PASS_MARK = "✅"
FAIL_MARK = "❌"
TODO_MARK = "✏️"
NOT_IMPLEMENTED = "not implemented yet"


@dataclass(frozen=True)
class Case:
    """One seeded input: positional arguments and a label used in feedback."""

    label: str
    args: tuple


@dataclass(frozen=True)
class Mutant:
    """A typical wrong answer and the feedback it earns."""

    name: str
    fn: Callable
    feedback: str


# A hint looks at one case's (got, expected, args) and returns feedback or None.
Hint = Callable[[Any, Any, tuple], Optional[str]]


@dataclass(frozen=True)
class Exercise:
    """Everything the checker knows about one exercise."""

    id: str
    title: str
    make_cases: Callable[[], list]
    reference: Callable
    mutants: tuple = ()
    hints: tuple = ()
    alternatives: tuple = ()  # other correct solutions; the tests make sure they pass
    rtol: float = 1e-6
    atol: float = 1e-8


@dataclass(frozen=True)
class CheckResult:
    """What :func:`evaluate` found. ``status`` is 'passed', 'failed' or 'not attempted'."""

    exercise_id: str
    status: str
    message: str
    n_cases: int = 0
    details: dict = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def __str__(self) -> str:
        mark = {"passed": PASS_MARK, "failed": FAIL_MARK}.get(self.status, TODO_MARK)
        return f"{mark} [{self.exercise_id}] {self.message}"


REGISTRY: dict[str, Exercise] = {}


def register(exercise: Exercise) -> Exercise:
    """Add an exercise to the registry (ids must be unique)."""
    if exercise.id in REGISTRY:
        raise ValueError(f"exercise id {exercise.id!r} is registered twice")
    REGISTRY[exercise.id] = exercise
    return exercise


# ---------------------------------------------------------------- comparison
def _to_array(x: Any) -> Optional[np.ndarray]:
    """Convert numbers, numpy arrays and torch tensors to float arrays; else None."""
    try:
        import torch

        if isinstance(x, torch.Tensor):
            return x.detach().cpu().numpy().astype(float)
    except Exception:  # pragma: no cover - torch is a dependency
        pass
    if isinstance(x, (bool, np.bool_)):
        return np.asarray(x, dtype=float)
    if isinstance(x, (int, float, np.number)):
        return np.asarray(x, dtype=float)
    if isinstance(x, np.ndarray) and (
        np.issubdtype(x.dtype, np.number) or x.dtype == np.bool_
    ):
        return x.astype(float)
    return None


def _describe(x: Any) -> str:
    arr = _to_array(x)
    if arr is not None:
        return f"an array of shape {arr.shape}"
    return f"a {type(x).__name__}"


def _structure_problem(got: Any, expected: Any, where: str = "") -> Optional[str]:
    """Return a message if ``got`` cannot be compared with ``expected`` (type or shape)."""
    if isinstance(expected, tuple):
        n = len(expected)
        if not isinstance(got, (tuple, list)):
            return f"you returned {_describe(got)}{where}; expected a tuple of {n} results"
        if len(got) != n:
            return f"you returned {len(got)} results{where}; expected {n}"
        for i, (g, e) in enumerate(zip(got, expected)):
            msg = _structure_problem(g, e, f" (result {i + 1} of {n})")
            if msg:
                return msg
        return None
    if got is None:
        return f"your function returned None{where}: did you forget `return`?"
    exp = _to_array(expected)
    arr = _to_array(got)
    if arr is None and isinstance(got, (list, tuple)):
        try:
            arr = np.asarray(got, dtype=float)
        except Exception:
            arr = None
    if arr is None:
        return f"you returned {_describe(got)}{where}; expected a numpy array or torch tensor"
    if exp is not None and arr.shape != exp.shape:
        return f"you returned shape {arr.shape}{where}; expected shape {exp.shape}"
    return None


def _flat(x: Any) -> list:
    if isinstance(x, tuple):
        return [a for item in x for a in _flat(item)]
    arr = _to_array(x)
    if arr is None:
        arr = np.asarray(x, dtype=float)
    return [arr]


def _close(got: Any, expected: Any, rtol: float, atol: float) -> bool:
    return all(
        g.shape == e.shape and np.allclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
        for g, e in zip(_flat(got), _flat(expected))
    )


def _max_error(got: Any, expected: Any) -> float:
    errs = [
        float(np.nanmax(np.abs(g - e))) if g.size else 0.0
        for g, e in zip(_flat(got), _flat(expected))
    ]
    return max(errs) if errs else 0.0


def _same_inputs(before: tuple, after: tuple) -> bool:
    for b, a in zip(before, after):
        ba, aa = _to_array(b), _to_array(a)
        if ba is not None and aa is not None:
            if ba.shape != aa.shape or not np.array_equal(ba, aa, equal_nan=True):
                return False
    return True


def _run(fn: Callable, case: Case) -> tuple[str, Any]:
    """Call ``fn`` on a private copy of the case; return (kind, value)."""
    args = copy.deepcopy(case.args)
    try:
        with np.errstate(all="ignore"):
            out = fn(*args)
    except NotImplementedError:
        return "todo", None
    except Exception as exc:  # the learner's code may raise anything
        return "raised", exc
    if not _same_inputs(case.args, args):
        return "mutated", out
    return "ok", out


# ---------------------------------------------------------------- evaluation
_ERROR_TIPS = (
    ("could not be broadcast", " Tip: keep the reduced axis with keepdims=True so shapes line up."),
    ("matmul", " Tip: scores are q @ k^T, of shape (..., T, S); check which axis you transpose."),
    ("mat1 and mat2", " Tip: scores are q @ k^T, of shape (..., T, S); check which axis you transpose."),
)

def _evaluate(exercise: Exercise, fn: Any) -> CheckResult:
    eid = exercise.id
    if not callable(fn):
        return CheckResult(
            eid, "failed", f"check expects your function, but got {_describe(fn)}. "
            f"Pass the function itself: check({eid!r}, my_function)."
        )
    cases = exercise.make_cases()
    expected = [exercise.reference(*copy.deepcopy(c.args)) for c in cases]
    outputs = []
    for case, exp in zip(cases, expected):
        kind, out = _run(fn, case)
        if kind == "todo":
            return CheckResult(
                eid, "not attempted",
                f"{NOT_IMPLEMENTED}: replace `raise NotImplementedError` with your code "
                f"and run this cell again.",
            )
        if kind == "raised":
            line = "".join(traceback.format_exception_only(type(out), out)).strip()
            tip = next((t for key, t in _ERROR_TIPS if key in line), "")
            return CheckResult(
                eid, "failed", f"your function raised {line} on case '{case.label}'.{tip}"
            )
        if kind == "mutated":
            return CheckResult(
                eid, "failed",
                f"your function changed its input in place on case '{case.label}'; "
                f"work on a copy (for example x = x - x.max(...) rather than x -= ...).",
            )
        problem = _structure_problem(out, exp)
        if problem:
            return CheckResult(eid, "failed", f"{problem} on case '{case.label}'.")
        outputs.append(out)

    if all(_close(o, e, exercise.rtol, exercise.atol) for o, e in zip(outputs, expected)):
        return CheckResult(
            eid, "passed", f"passed all {len(cases)} checks. Well done!", n_cases=len(cases)
        )
    for mutant in exercise.mutants:
        try:
            mutant_out = [mutant.fn(*copy.deepcopy(c.args)) for c in cases]
        except Exception:
            continue
        if all(
            _structure_problem(o, m) is None and _close(o, m, exercise.rtol, exercise.atol)
            for o, m in zip(outputs, mutant_out)
        ):
            return CheckResult(
                eid, "failed", mutant.feedback, n_cases=len(cases), details={"mutant": mutant.name}
            )
    for case, out, exp in zip(cases, outputs, expected):
        if _close(out, exp, exercise.rtol, exercise.atol):
            continue
        for hint in exercise.hints:
            try:
                msg = hint(out, exp, case.args)
            except Exception:
                msg = None
            if msg:
                return CheckResult(eid, "failed", f"{msg} (case '{case.label}')")
        return CheckResult(
            eid, "failed",
            f"not quite: on case '{case.label}' your result differs from the expected one "
            f"by up to {_max_error(out, exp):.3g}.",
        )
    return CheckResult(eid, "failed", "your results differ from the expected ones.")  # pragma: no cover


def evaluate(exercise_id: str, fn: Any) -> CheckResult:
    """Check ``fn`` against exercise ``exercise_id`` and return the result; never raises."""
    exercise = REGISTRY.get(exercise_id)
    if exercise is None:
        known = ", ".join(sorted(REGISTRY))
        return CheckResult(
            str(exercise_id), "failed", f"there is no exercise called {exercise_id!r}. Known: {known}."
        )
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return _evaluate(exercise, fn)
    except BaseException as exc:  # noqa: BLE001 - the checker must never crash a notebook
        if isinstance(exc, KeyboardInterrupt):
            raise
        return CheckResult(
            exercise_id, "failed",
            f"the checker could not compare your result ({type(exc).__name__}: {exc}). "
            f"Make sure your function returns a numpy array or torch tensor.",
        )


def check(exercise_id: str, fn: Any) -> None:
    """Run the checks for ``exercise_id`` on ``fn`` and print a one-line verdict.

    Never raises: a wrong answer, an exception inside ``fn``, a wrong type or a
    missing implementation all become friendly feedback.

    Examples
    --------
    >>> def my_softmax(x):
    ...     raise NotImplementedError
    >>> check("stable-softmax", my_softmax)
    ✏️ [stable-softmax] not implemented yet: replace `raise NotImplementedError` with your code and run this cell again.
    """
    print(evaluate(exercise_id, fn))
