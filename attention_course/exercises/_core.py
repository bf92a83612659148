"""The exercise checker: one mechanism for every exercise in the course.

An exercise is a reference function, a list of seeded input cases (edge cases
included), and a list of *mutants*: the typical wrong answers, each with the
feedback a learner who wrote it should get. :func:`evaluate` runs a learner's
function on every case and returns a :class:`CheckResult`; :func:`check` prints
it. Neither ever raises, whatever the learner's function does (a wrong type, an
exception, ``sys.exit()``, a loop that never ends), so "Run All" always reaches
the end of a notebook. Only the notebook's own stop button (a real
``KeyboardInterrupt``) stops a check.

How feedback is chosen, in order:

1. the function is missing, not callable, or raises ``NotImplementedError``
   ("not implemented yet");
2. it raises, calls ``sys.exit()``, runs out of time (see :mod:`._runner`),
   changes an input it may not change, or returns None, the wrong type, dtype
   kind or shape (see :mod:`._compare`: the reference's result defines what is
   expected);
3. a case marked with a ``budget`` (too large for a T x S matrix, say) fails by
   memory or time while the other cases are right: that case's own feedback;
4. its results match the reference on every case: passed;
5. its results match a known mutant on every case: that mutant's feedback;
6. an exercise-specific *hint* recognises the symptom (rows that do not sum to
   1, NaN from overflow, ...);
7. otherwise: the first wrong entry, with the exercise's explanation of it when
   it has one (``explain``).
"""

from __future__ import annotations

import copy
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

from ._compare import as_numpy, close, describe, first_difference, structure_problem
from ._runner import DEFAULT_TIME_LIMIT, call_with_time_limit

__all__ = ["Case", "Mutant", "Exercise", "CheckResult", "evaluate", "check", "register", "REGISTRY"]

PASS_MARK = "✅"
FAIL_MARK = "❌"
TODO_MARK = "✏️"
NOT_IMPLEMENTED = "not implemented yet"
MAX_ERROR_CHARS = 200  # an exception's text is cut here, so a verdict stays one readable line


@dataclass(frozen=True)
class Case:
    """One seeded input: positional arguments and a label used in feedback.

    ``budget`` is the feedback for a learner who runs out of memory or time on this
    case (and only this kind of case) while getting the other cases right; mutants are
    not run on such a case. Read-only numpy arrays in ``args`` are shared, not copied
    (for cases too large to copy).
    """

    label: str
    args: tuple
    budget: str = ""
    slow: str = ""  # the feedback when it runs out of time instead (defaults to ``budget``)
    expected: Any = None  # the known answer, for a case too large for the reference to run


@dataclass(frozen=True)
class Mutant:
    """A typical wrong answer and the feedback it earns."""

    name: str
    fn: Callable
    feedback: str


# A hint looks at one case's (got, expected, args) and returns feedback or None.
Hint = Callable[[Any, Any, tuple], Optional[str]]
# An explanation of one wrong entry: (index, expected value, args) -> text or None.
Explain = Callable[[tuple, Any, tuple], Optional[str]]


@dataclass(frozen=True)
class Exercise:
    """Everything the checker knows about one exercise.

    ``in_place_ok`` lists the positions of arguments the learner may update in place
    (the online-softmax state, as a real kernel does); every other argument must come
    back unchanged. The reference always runs on a fresh copy of the inputs.

    ``difficulty`` (1 = a few lines from the chapter's text, 2 = needs an idea of its own,
    3 = a small project) and ``minutes`` (an honest time for a learner who has read the
    chapter) are shown beside the exercise's title and by ``python -m attention_course
    progress``; 0 means not rated yet. ``hints`` are the checker's symptom detectors, not
    the learner's hints (those are dropdowns in the notebook, before the solution).
    """

    id: str
    title: str
    make_cases: Callable[[], list]
    reference: Callable
    mutants: tuple = ()
    hints: tuple = ()
    alternatives: tuple = ()  # other correct solutions; the tests make sure they pass
    rtol: float = 1e-6
    atol: float = 1e-8
    in_place_ok: tuple = ()
    explain: Optional[Explain] = None
    difficulty: int = 0
    minutes: int = 0


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
    if exercise.difficulty not in (0, 1, 2, 3) or exercise.minutes < 0:
        raise ValueError(f"exercise {exercise.id!r} has difficulty {exercise.difficulty} and minutes "
                         f"{exercise.minutes}; expected difficulty 1-3 (0 = not rated) and minutes >= 0")
    REGISTRY[exercise.id] = exercise
    return exercise


# ---------------------------------------------------------------- running
def _fresh(args: tuple) -> tuple:
    """A private copy of a case's arguments; read-only arrays (huge cases) are shared."""
    return tuple(
        a if isinstance(a, np.ndarray) and not a.flags.writeable else copy.deepcopy(a) for a in args
    )


def _unchanged(before: Any, after: Any) -> bool:
    b, a = _numbers(before), _numbers(after)
    if b is None or a is None:
        return True
    return b.shape == a.shape and bool(np.array_equal(b, a, equal_nan=True))


def _numbers(x: Any) -> Optional[np.ndarray]:
    arr = as_numpy(x)
    return None if arr is None or arr.dtype.kind not in "biufc" else arr


def _shorten(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"


_ERROR_TIPS = (
    ("could not be broadcast", " Tip: keep the reduced axis with keepdims=True so shapes line up."),
    ("axes don't match", " Tip: swap the last two axes with np.swapaxes(k, -2, -1) (k.transpose(-2, -1) "
     "in torch), which works for any number of leading batch axes."),
    ("matmul", " Tip: scores are q @ k^T, of shape (..., T, S): swap the LAST two axes of k, "
     "np.swapaxes(k, -2, -1), so leading batch axes stay in place."),
    ("mat1 and mat2", " Tip: scores are q @ k^T, of shape (..., T, S): swap the last two axes of k."),
)
_MEMORY_WORDS = ("allocate", "MemoryError", "out of memory")


def _raised_message(exc: BaseException, case: Case) -> str:
    line = _shorten("".join(traceback.format_exception_only(type(exc), exc)).strip())
    tip = next((t for key, t in _ERROR_TIPS if key in line), "")
    return f"your function raised {line} on case '{case.label}'.{tip}"


def _in_place_message(case: Case) -> str:
    return (f"your function changed its input in place on case '{case.label}'; work on a copy "
            f"(for example x = x - x.max(...) rather than x -= ...).")


def _timeout_message(case: Case, limit: float, still_running: bool) -> str:
    msg = f"your function was still running after {limit:g} s on case '{case.label}'"
    if still_running:
        return f"{msg}: is there a loop that never ends? {_BACKGROUND}"
    return f"{msg}, so the check stopped it: is there a loop that never ends?"


_BACKGROUND = ("(The check stopped waiting, but your function may still be running in the "
               "background: restart the kernel if the notebook slows down.)")


# ---------------------------------------------------------------- evaluation
def _failed(eid: str, message: str, **details) -> CheckResult:
    return CheckResult(eid, "failed", message, details=details)


def _run_learner(exercise: Exercise, fn: Callable, cases: list, expected: list, limit: float):
    """Run ``fn`` on every case; return (early CheckResult or None, outputs, budget failures)."""
    eid = exercise.id
    outputs: dict[int, Any] = {}
    over_budget: list[tuple[Case, str]] = []
    spent = 0.0
    for n, (case, exp) in enumerate(zip(cases, expected)):
        args = _fresh(case.args)
        out = call_with_time_limit(fn, args, limit - spent)
        spent += out.seconds
        if out.kind == "todo":
            return CheckResult(
                eid, "not attempted",
                f"{NOT_IMPLEMENTED}: replace `raise NotImplementedError` with your code "
                f"and run this cell again.",
            ), outputs, over_budget
        memory = out.kind == "raised" and (
            isinstance(out.value, MemoryError) or any(w in str(out.value) for w in _MEMORY_WORDS)
        )
        if case.budget and (out.kind == "timeout" or memory):
            over_budget.append((case, "timeout" if out.kind == "timeout" else "memory"))
            if out.kind == "timeout" and out.still_running:
                return _failed(eid, f"{case.slow or case.budget} {_BACKGROUND}"), outputs, over_budget
            continue
        if out.kind == "timeout":
            return _failed(eid, _timeout_message(case, limit, out.still_running)), outputs, over_budget
        if out.kind == "exit":
            return _failed(eid, f"your function called sys.exit() (or exit()) on case '{case.label}', "
                                f"which would stop the notebook: return the result instead."), outputs, over_budget
        if out.kind == "raised" and "read-only" in str(out.value):
            return _failed(eid, _in_place_message(case)), outputs, over_budget
        if out.kind == "raised":
            return _failed(eid, _raised_message(out.value, case)), outputs, over_budget
        if not all(_unchanged(b, a) for i, (b, a) in enumerate(zip(case.args, args))
                   if i not in exercise.in_place_ok):
            return _failed(eid, _in_place_message(case)), outputs, over_budget
        problem = structure_problem(out.value, exp)
        if problem:
            return _failed(eid, f"{problem} (case '{case.label}')."), outputs, over_budget
        outputs[n] = out.value
    return None, outputs, over_budget


def _matching_mutant(exercise: Exercise, cases: list, outputs: dict) -> Optional[Mutant]:
    for mutant in exercise.mutants:
        try:
            mutant_out = {n: mutant.fn(*_fresh(cases[n].args)) for n in outputs if not cases[n].budget}
        except Exception:  # a mutant may not run on every case: it cannot match then
            continue
        if all(structure_problem(outputs[n], m) is None and close(outputs[n], m, exercise.rtol, exercise.atol)
               for n, m in mutant_out.items()):
            return mutant
    return None


def _difference_message(exercise: Exercise, case: Case, out: Any, exp: Any) -> str:
    d = first_difference(out, exp, exercise.rtol, exercise.atol)
    if d is None:  # pragma: no cover - only called on a differing case
        return f"not quite: on case '{case.label}' your result differs from the expected one."
    where = f" (result {d['result'] + 1} of {d['n_results']})" if d["n_results"] > 1 else ""
    if isinstance(d["expected"], bool):
        why = None
        if exercise.explain is not None:
            try:
                why = exercise.explain(d["index"], d["expected"], case.args)
            except Exception:
                why = None
        return (f"not quite: on case '{case.label}'{where}, entry {d['index']} should be "
                f"{d['expected']}" + (f": {why}." if why else "."))
    if d["index"] == ():
        return (f"not quite: on case '{case.label}'{where} your result is {_fmt(d['got'])} but "
                f"should be {_fmt(d['expected'])}.")
    entry = d["index"][0] if len(d["index"]) == 1 else d["index"]
    return (f"not quite: on case '{case.label}'{where}, entry {entry} is {_fmt(d['got'])} but "
            f"should be {_fmt(d['expected'])} (your result differs by up to {d['max_error']:.3g}).")


def _fmt(x: Any) -> str:
    return str(x) if isinstance(x, int) else f"{x:.6g}"


def _evaluate(exercise: Exercise, fn: Any, limit: float) -> CheckResult:
    eid = exercise.id
    if not callable(fn):
        return _failed(eid, f"check expects your function, but got {describe(fn)}. "
                            f"Pass the function itself: check({eid!r}, my_function).")
    cases = exercise.make_cases()
    expected = [c.expected if c.expected is not None else exercise.reference(*_fresh(c.args)) for c in cases]
    early, outputs, over_budget = _run_learner(exercise, fn, cases, expected, limit)
    if early is not None:
        return early
    right = {n: close(o, expected[n], exercise.rtol, exercise.atol) for n, o in outputs.items()}
    if all(right.values()) and over_budget:
        case, why = over_budget[0]
        return _failed(eid, (case.slow or case.budget) if why == "timeout" else case.budget, over=why)
    if all(right.values()):
        return CheckResult(eid, "passed", f"passed all {len(cases)} checks. Well done!", n_cases=len(cases))
    mutant = _matching_mutant(exercise, cases, outputs)
    if mutant is not None:
        return CheckResult(eid, "failed", mutant.feedback, n_cases=len(cases), details={"mutant": mutant.name})
    for n, out in outputs.items():
        if right[n]:
            continue
        case, exp = cases[n], expected[n]
        for hint in exercise.hints:
            try:
                msg = hint(out, exp, case.args)
            except Exception:
                msg = None
            if msg:
                return _failed(eid, f"{msg} (case '{case.label}')")
        return _failed(eid, _difference_message(exercise, case, out, exp))
    return _failed(eid, "your results differ from the expected ones.")  # pragma: no cover


def evaluate(exercise_id: str, fn: Any, time_limit: float = DEFAULT_TIME_LIMIT) -> CheckResult:
    """Check ``fn`` against exercise ``exercise_id`` and return the result; never raises.

    ``time_limit`` is the time in seconds the learner's function may take over all
    cases together. Only a real ``KeyboardInterrupt`` (the notebook's stop button)
    propagates.
    """
    exercise = REGISTRY.get(exercise_id)
    if exercise is None:
        known = ", ".join(sorted(REGISTRY))
        return _failed(str(exercise_id), f"there is no exercise called {exercise_id!r}. Known: {known}.")
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return _evaluate(exercise, fn, time_limit)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - the checker must never crash a notebook
        return _failed(
            exercise_id,
            f"the checker could not compare your result ({_shorten(f'{type(exc).__name__}: {exc}')}). "
            f"Make sure your function returns a numpy array or torch tensor.",
        )


def check(exercise_id: str, fn: Any, time_limit: float = DEFAULT_TIME_LIMIT) -> None:
    """Run the checks for ``exercise_id`` on ``fn`` and print a one-line verdict.

    Never raises: a wrong answer, an exception inside ``fn``, a wrong type, a loop
    that never ends (stopped after ``time_limit`` seconds) or a missing
    implementation all become friendly feedback.

    Examples
    --------
    >>> def my_softmax(x):
    ...     raise NotImplementedError
    >>> check("stable-softmax", my_softmax)
    ✏️ [stable-softmax] not implemented yet: replace `raise NotImplementedError` with your code and run this cell again.
    """
    print(evaluate(exercise_id, fn, time_limit))
