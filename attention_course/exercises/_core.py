"""The exercise checker: one mechanism for every exercise in the course.

An exercise is a reference function, a list of seeded input cases (edge cases
included), a list of *mutants*: the typical wrong answers, each with the
feedback a learner who wrote it should get, and a list of *rules*: the
boundaries its statement draws, each with the cases that land on it.
:func:`evaluate` runs a learner's function on every case and returns a
:class:`CheckResult`; :func:`check` prints it. Neither ever raises, whatever the
learner's function does (a wrong type, an exception, ``sys.exit()``, a loop that
never ends), so "Run All" always reaches the end of a notebook. Only the
notebook's own stop button (a real ``KeyboardInterrupt``) stops a check.

Rules: every rule a statement states is probed
----------------------------------------------
A check can only tell a right answer from a wrong one on the cases it tries. If
no case lands on the threshold a statement names, ``>=`` and ``>`` agree on every
case and the wrong one passes; if no case has ``k = 0``, ``s[-k:]`` passes; if
no verdict falls between 0.01 and 0.1 of its threshold, a threshold a decade off
passes. So each :class:`Exercise` declares its ``rules``, one :class:`Rule` per
boundary its statement draws, of a kind in :data:`RULE_KINDS` (a threshold, a
tie, an empty input, an edge size, an input range). A rule names

* ``cases``: the labels of the :class:`Case` objects that land on it;
* ``lands(*args)``: a predicate that is true of a case's arguments when the case
  really sits on the boundary (the weight exactly 0.99, the tied weights, k = 0),
  so that editing a case off its boundary is noticed;
* ``catches``: the :class:`Mutant` objects (plausible wrong rules: ``>=`` for
  ``>``, an absolute threshold for a ratio, ``s[-k:]``) that the rule's cases
  alone must tell apart from the reference.

For example, ``saturated-gradient`` says a row is saturated when its largest
weight *exceeds* 0.99, so it declares::

    Rule("threshold", "a largest weight of exactly 0.99 is not saturated",
         ("a largest weight of exactly 0.99 (not saturated)",),      # the case's label
         lambda p, g: bool((p.max(axis=-1) == 0.99).any()),          # it lands on 0.99
         ("at-least-0.99",))                                          # the >= mutant

``tests/exercises/test_rules.py`` enforces the pattern for every registered
exercise: it declares rules, each rule has cases, every one of them exists and
``lands``, each mutant a rule ``catches`` differs from the reference on at least
one of the rule's own cases (a rule whose cases all have a ``budget`` is caught
by their budget messages instead), every exercise names at least five mutants,
each runs on every case, and tuple results are named (``returns``).
``tests/exercises/test_exercises.py`` checks that every mutant differs from the
reference and from every other mutant somewhere and is rejected with its own
feedback. A statement that draws a boundary no rule declares is the one thing
the tests cannot see: declare the rule when you write the sentence.

How feedback is chosen, in order
--------------------------------
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
6. its results show a mutant's mistake: on at least half of the cases (and
   items of a tuple) where the mutant is wrong, they equal its wrong result;
   when the mutant's mistake shows in numbers, one of those must be a finite
   number, and when it shows only in a bool (a verdict), they must make up at
   least half of the learner's wrong results (see :func:`_matching_mutant`):
   that mutant's feedback. This names one of two mistakes made together (a
   wrong norm and a wrong threshold), and a mistake made on every case but one
   that the learner handled differently;
7. an exercise-specific *hint* recognises the symptom (rows that do not sum to
   1, NaN from overflow, ...);
8. one of its results is the right one times a constant, squared, its square
   root or negated, on every case (:func:`_pattern_message`): said so;
9. otherwise: the first wrong entry or value, with both numbers written to as
   many digits as it takes to see them differ and the size of the gap, and the
   exercise's explanation of it when it has one (``explain``).

The cases, the reference's results and the mutants' results are computed once
per exercise and kept (:func:`_prepared`): they are seeded, and the learner
only ever sees fresh copies of the cases.
"""

from __future__ import annotations

import copy
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

from ._compare import (as_numpy, close, describe, first_difference, format_pair, leaf_close, leaves,
                       result_name, structure_problem)
from ._runner import DEFAULT_TIME_LIMIT, call_with_time_limit

__all__ = ["Case", "Mutant", "Rule", "RULE_KINDS", "Exercise", "CheckResult", "evaluate", "check", "register",
           "REGISTRY"]

PASS_MARK = "✅"
FAIL_MARK = "❌"
TODO_MARK = "✏️"
NOT_IMPLEMENTED = "not implemented yet"
MAX_ERROR_CHARS = 200  # an exception's text is cut here, so a verdict stays one readable line

RULE_KINDS = {
    "threshold": "a number the statement compares with: a case lands exactly on it, or cases sit on "
                 "both sides of it close enough that a threshold a decade off, or absolute instead of "
                 "relative, gives another answer",
    "tie": "equal values, where an order or a strict comparison decides (tied weights, equal errors)",
    "empty": "an empty set or group, nothing to average or compare",
    "edge-size": "the smallest or unusual sizes the statement allows (k = 0, T != S, one key, one layer)",
    "range": "inputs at the edge of the range the statement allows (logits near 1000, rows that do not "
             "sum to 1, a query far from every key)",
}


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


@dataclass(frozen=True)
class Rule:
    """A boundary the exercise's statement draws, and the cases that land on it.

    ``kind`` is a key of :data:`RULE_KINDS`; ``says`` is the rule in the statement's words
    ("a row whose largest weight is exactly 0.99 is not saturated"); ``cases`` are labels of
    the exercise's cases; ``lands(*args)`` is true of each of those cases' arguments (the
    test runs it); ``catches`` names the mutants, plausible wrong rules, that these cases
    alone tell apart from the reference.
    """

    kind: str
    says: str
    cases: tuple
    lands: Callable[..., bool]
    catches: tuple


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

    ``rules`` are the boundaries the statement draws (see the module's docstring);
    ``returns`` names the items of a tuple result, as the statement does, for feedback
    ("rank_wins is True but should be False").

    ``difficulty`` (1 = a few lines from the chapter's text, 2 = needs an idea of its own,
    3 = a small project) and ``minutes`` (an honest time for a learner who has read the
    chapter) are shown beside the exercise's title and by ``python -m attention_course
    progress``; 0 means not rated yet. ``hints`` are the checker's symptom detectors, not
    the learner's hints (those are dropdowns in the notebook, before the solution).
    ``explain`` is given a wrong boolean entry's index (``()`` for a single bool), its
    expected value and the case's arguments, and says why. ``passed_note``, given the cases
    and their expected results, says what a learner who passed has found (an experiment's
    conclusion); it is added to the pass message.
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
    rules: tuple = ()
    returns: tuple = ()
    passed_note: Optional[Callable[[list, list], str]] = None
    array_type: str = "any"  # "torch": a torch tensor of exactly the reference's dtype (chained parts)


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
    """Add an exercise to the registry (ids must be unique; ratings and rule kinds must be known)."""
    if exercise.id in REGISTRY:
        raise ValueError(f"exercise id {exercise.id!r} is registered twice")
    if exercise.difficulty not in (0, 1, 2, 3) or exercise.minutes < 0:
        raise ValueError(f"exercise {exercise.id!r} has difficulty {exercise.difficulty} and minutes "
                         f"{exercise.minutes}; expected difficulty 1-3 (0 = not rated) and minutes >= 0")
    if exercise.array_type not in ("any", "torch"):
        raise ValueError(f"exercise {exercise.id!r} has array_type {exercise.array_type!r}; expected 'any' or 'torch'")
    names = {m.name for m in exercise.mutants}
    for rule in exercise.rules:
        if rule.kind not in RULE_KINDS:
            raise ValueError(f"exercise {exercise.id!r}: rule {rule.says!r} has kind {rule.kind!r}; "
                             f"expected one of {sorted(RULE_KINDS)}")
        if unknown := [n for n in rule.catches if n not in names]:
            raise ValueError(f"exercise {exercise.id!r}: rule {rule.says!r} catches unknown mutants {unknown}")
    REGISTRY[exercise.id] = exercise
    return exercise


# ---------------------------------------------------------------- prepared cases
_PREPARED: dict[int, tuple] = {}  # id(exercise) -> (exercise, cases, expected, mutant outputs or None)


def _prepared(exercise: Exercise) -> tuple[list, list]:
    """The exercise's cases and the reference's result on each, computed once (they are seeded)."""
    entry = _PREPARED.get(id(exercise))
    if entry is None or entry[0] is not exercise:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            cases = exercise.make_cases()
            expected = [c.expected if c.expected is not None else exercise.reference(*_fresh(c.args))
                        for c in cases]
        entry = _PREPARED[id(exercise)] = (exercise, cases, expected, None)
    return entry[1], entry[2]


def _mutant_outputs(exercise: Exercise) -> list[Optional[dict]]:
    """Each mutant's result on every case without a budget (None for a mutant that raised), computed once."""
    return _mutants(exercise)[0]


def _mutants(exercise: Exercise) -> tuple[list, list]:
    """Each mutant's results (as :func:`_mutant_outputs`) and, for each, which of its results are right:
    ``{(case, leaf): bool}`` (None for a mutant that raised); computed once per exercise."""
    cases, expected = _prepared(exercise)
    entry = _PREPARED[id(exercise)]
    if entry[3] is None:
        outputs, tables = [], []
        for mutant in exercise.mutants:
            try:
                with warnings.catch_warnings(), np.errstate(all="ignore"):
                    warnings.simplefilter("ignore")
                    out = {n: mutant.fn(*_fresh(c.args)) for n, c in enumerate(cases) if not c.budget}
            except Exception:  # a mutant may not run on every case: it cannot match then
                out = None
            if out is not None and any(structure_problem(o, expected[n], array_type=exercise.array_type)
                                       for n, o in out.items()):
                out = None  # a mutant of another shape or type is never matched on values
            outputs.append(out)
            tables.append(None if out is None else _leaf_table(exercise, out, expected))
        _PREPARED[id(exercise)] = entry = (*entry[:3], (outputs, tables))
    return entry[3]


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
    ("ZeroDivisionError", " Tip: a ratio a / b is 0 / 0 when both are 0; compare a < 0.1 * b instead, "
     "or return what the statement says for that case."),
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
        problem = structure_problem(out.value, exp, names=exercise.returns, array_type=exercise.array_type)
        if problem:
            return _failed(eid, f"{problem} (case '{case.label}')."), outputs, over_budget
        outputs[n] = out.value
    return None, outputs, over_budget


def _leaf_table(exercise: Exercise, results: dict, reference: dict) -> dict:
    """``{(case, leaf): True when that leaf of ``results`` matches the same leaf of ``reference``}``."""
    table = {}
    for n, out in results.items():
        for j, (g, e) in enumerate(zip(leaves(out), leaves(reference[n]))):
            table[n, j] = leaf_close(g, e, exercise.rtol, exercise.atol)
    return table


def _telling(value: Any) -> bool:
    """A wrong value that is evidence of one particular mistake: finite numbers, not a bool or NaN."""
    arr = as_numpy(value)
    return arr is not None and arr.dtype.kind in "iuf" and bool(np.isfinite(arr).all())


def _matching_mutant(exercise: Exercise, cases: list, expected: list, outputs: dict) -> Optional[Mutant]:
    """The known mistake the learner's results show (steps 5 and 6 of the module's docstring), or None.

    A mutant that agrees with the learner everywhere wins at once. Otherwise each mutant is scored
    by the wrong results (one per case and item of a tuple) it explains, those where the learner's
    result equals the mutant's and the mutant's differs from the reference. It is a candidate when
    it explains at least half of its own wrong results (where the learner is right instead, that
    counts against it), and when the evidence is good enough: if the mutant's mistake shows in
    numbers, one of the explained results must be a finite number (two formulas rarely give the
    same wrong number by chance, while booleans and NaN agree by chance easily); if it shows only in
    a bool (a verdict's rule), the explained results must make up at least half of the learner's
    wrong ones. The best-scoring candidate wins; ties go to the earlier mutant.
    """
    checked = {n: o for n, o in outputs.items() if not cases[n].budget}
    right = _leaf_table(exercise, checked, expected)
    wrong = {key for key, ok in right.items() if not ok}
    mine = {n: leaves(o) for n, o in checked.items()}
    candidates = [(m, out, table) for m, out, table in zip(exercise.mutants, *_mutants(exercise))
                  if out is not None and set(out) == set(checked)]
    for mutant, mutant_out, mutant_right in candidates:  # the learner's results are the mutant's
        if {key for key, ok in mutant_right.items() if not ok} == wrong and all(
                leaf_close(g, m, exercise.rtol, exercise.atol)
                for n, j in wrong for g, m in [(mine[n][j], leaves(mutant_out[n])[j])]):
            return mutant
    best, best_score = None, (0, 0)
    for mutant, mutant_out, mutant_right in candidates:
        shown = [key for key, ok in mutant_right.items() if not ok]  # where the mutant itself is wrong
        explained = [(n, j) for n, j in shown if (n, j) in wrong and leaf_close(
            mine[n][j], leaves(mutant_out[n])[j], exercise.rtol, exercise.atol)]
        telling = sum(_telling(leaves(mutant_out[n])[j]) for n, j in explained)
        numbers = any(_telling(leaves(mutant_out[n])[j]) for n, j in shown)  # its mistake shows in numbers
        score = (len(explained), telling)
        consistent = 2 * len(explained) >= len(shown)
        evidence = telling if numbers else 2 * len(explained) >= len(wrong)
        if consistent and evidence and score > best_score:
            best, best_score = mutant, score
    return best


def _pattern_message(exercise: Exercise, cases: list, expected: list, outputs: dict) -> Optional[str]:
    """A wrong number that is the right one times a constant, squared, its square root or negated, on
    every case: named as such (a factor of 100, a missing square root, a lost minus sign)."""
    checked = [n for n in outputs if not cases[n].budget]
    for j in range(len(leaves(expected[checked[0]])) if checked else 0):
        pairs = []
        for n in checked:
            g, e = leaves(outputs[n])[j], leaves(expected[n])[j]
            if g is None or e.dtype.kind not in "iuf" or g.dtype.kind not in "iuf":
                break
            g, e = np.asarray(g, dtype=float).ravel(), np.asarray(e, dtype=float).ravel()
            keep = np.isfinite(e) & np.isfinite(g) & (np.abs(e) > 1e-12)
            pairs.append((g[keep], e[keep]))
        else:
            g = np.concatenate([a for a, _ in pairs]) if pairs else np.zeros(0)
            e = np.concatenate([b for _, b in pairs]) if pairs else np.zeros(0)
            if g.size < 2 or np.allclose(g, e, rtol=exercise.rtol, atol=exercise.atol):
                continue
            n_results = len(leaves(expected[checked[0]]))
            subject = "your result" if n_results == 1 else result_name(j, n_results, exercise.returns)
            ratio = g / e
            if np.allclose(ratio, ratio[0], rtol=1e-6) and abs(ratio[0] - 1) > 0.01:  # not round-off
                c = ratio[0]
                if np.isclose(c, -1.0):
                    return f"{subject} has the right size but the wrong sign on every case: look for a lost minus sign."
                return (f"{subject} is {c:.6g} times the right value on every case: a constant factor is "
                        f"missing or extra (a scale, a normalisation, a percentage).")
            if np.allclose(g, e**2, rtol=1e-6) and np.all(e > 0):
                return f"{subject} is the square of the right value on every case: take its square root."
            if np.all(e > 0) and np.allclose(g**2, e, rtol=1e-6):
                return f"{subject} is the square root of the right value on every case: square it."
    return None





def _subject(exercise: Exercise, d: dict) -> str:
    if d["n_results"] == 1:
        return "your result"
    return result_name(d["result"], d["n_results"], exercise.returns)


def _explained(exercise: Exercise, d: dict, args: tuple) -> str:
    if exercise.explain is None:
        return ""
    try:
        why = exercise.explain(d["index"], d["expected"], args)
    except Exception:
        why = None
    return f": {why}" if why else ""


def _difference_message(exercise: Exercise, case: Case, out: Any, exp: Any) -> str:
    d = first_difference(out, exp, exercise.rtol, exercise.atol)
    if d is None:  # pragma: no cover - only called on a differing case
        return f"not quite: on case '{case.label}' your result differs from the expected one."
    subject = _subject(exercise, d)
    got, want, gap = format_pair(d["got"], d["expected"])
    gap = f" ({gap})" if gap else ""
    if d["index"] == ():  # a single value: described as a value, not as "entry ()"
        why = _explained(exercise, d, case.args) if isinstance(d["expected"], bool) else gap
        return f"not quite: on case '{case.label}', {subject} is {got} but should be {want}{why}."
    entry = d["index"][0] if len(d["index"]) == 1 else d["index"]
    where = "" if d["n_results"] == 1 else f"in {subject}, "
    if isinstance(d["expected"], bool):
        return (f"not quite: on case '{case.label}', {where}entry {entry} is {got} but should be {want}"
                f"{_explained(exercise, d, case.args)}.")
    return (f"not quite: on case '{case.label}', {where}entry {entry} is {got} but should be {want}{gap}; "
            f"your result differs by up to {d['max_error']:.3g}.")


def _evaluate(exercise: Exercise, fn: Any, limit: float) -> CheckResult:
    eid = exercise.id
    if not callable(fn):
        return _failed(eid, f"check expects your function, but got {describe(fn)}. "
                            f"Pass the function itself: check({eid!r}, my_function).")
    cases, expected = _prepared(exercise)
    early, outputs, over_budget = _run_learner(exercise, fn, cases, expected, limit)
    if early is not None:
        return early
    right = {n: close(o, expected[n], exercise.rtol, exercise.atol) for n, o in outputs.items()}
    if all(right.values()) and over_budget:
        case, why = over_budget[0]
        return _failed(eid, (case.slow or case.budget) if why == "timeout" else case.budget, over=why)
    if all(right.values()):
        note = f" {exercise.passed_note(cases, expected)}" if exercise.passed_note else ""
        return CheckResult(eid, "passed", f"passed all {len(cases)} checks. Well done!{note}", n_cases=len(cases))
    mutant = _matching_mutant(exercise, cases, expected, outputs)
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
        pattern = _pattern_message(exercise, cases, expected, outputs)
        if pattern:
            return _failed(eid, pattern)
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
