"""The exercise checker: one mechanism for every exercise in the course.

An exercise is a reference function, seeded input cases, *mutants* (typical wrong answers,
each with its feedback) and *rules* (the boundaries its statement draws, each with the cases
that land on it and the mutants those cases alone catch; ``tests/exercises/test_rules.py``
enforces them). :func:`evaluate` runs a learner's function on every case and returns a
:class:`CheckResult`; :func:`check` prints it. Neither ever raises (only the notebook's stop
button stops a check).

How feedback is chosen, in order
--------------------------------
1. missing, not callable, or ``NotImplementedError``: "not implemented yet";
2. raises, exits, times out (:mod:`._runner`), changes an input it may not change, or returns
   the wrong type, dtype kind or shape (:mod:`._compare`), with ``structure_hint``;
3. uses a forbidden shortcut (:mod:`._forbidden`), right numbers or not;
4. fails only on a ``budget`` case: that case's feedback;
5. matches the reference on every case: passed, unless it broke a rule of use;
6. matches a known mutant on every case: that mutant's feedback;
7. shows a mutant's mistake unambiguously (:func:`_matching_mutant`): its feedback, with a note;
8. an exercise-specific *hint* recognises the symptom;
9. a result is the right one scaled, squared, square-rooted or negated (:func:`_pattern_message`);
10. otherwise: the case and the first wrong entry, with both numbers and the gap (``explain``).

Cases, reference results and mutant results are computed once per exercise (:func:`_prepared`);
the learner only ever sees fresh copies of the cases.
"""

from __future__ import annotations

import copy
import inspect
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

from ._compare import (as_numpy, close, describe, first_difference, format_pair, leaf_close, leaves,
                       result_name, structure_problem)
from ._forbidden import spy, uses_any
from ._runner import DEFAULT_TIME_LIMIT, call_with_time_limit

__all__ = ["Case", "Mutant", "Rule", "Breach", "Forbidden", "RULE_KINDS", "Exercise", "CheckResult", "evaluate",
           "check", "register", "REGISTRY", "in_place_breach", "retyped_breach", "output_breaches", "output_rule",
           "in_place_rule", "SCORE_TIPS", "RATIO_TIPS"]

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
    "output": "what the statement says to return: the type (array, tensor, tuple, float, int, bool), the "
              "shape and the dtype; its cases are any that show it, its breaches the answers that break it",
    "forbidden": "what the statement forbids (changing an input in place, a library call that does the "
                 "exercise's work): its breaches break it and must get the prohibition's own feedback",
}
#: Kinds whose wrong answers are caught by the result's structure or by looking at the function, not by
#: a value a mutant computes: they declare ``breaches`` instead of ``catches``.
CONTRACT_KINDS = ("output", "forbidden")


@dataclass(frozen=True)
class Case:
    """One seeded input: positional arguments and a label used in feedback.

    ``budget`` is the feedback for running out of memory or time on this case alone (mutants
    are not run on it). Read-only numpy arrays in ``args`` are shared, not copied.
    """

    label: str
    args: tuple
    budget: str = ""
    slow: str = ""  # the feedback when it runs out of time instead (defaults to ``budget``)
    expected: Any = None  # the known answer, for a case too large for the reference to run
    rtol: Optional[float] = None  # this case's tolerances, when they differ from the exercise's
    atol: Optional[float] = None  # (a float32 model among float64 cases, say)
    mutants: bool = True  # False: the mutants are not run on it (too costly); mistakes are named on the others
    shared: tuple = ()  # positions of large arguments (a model's weights) passed without a copy; see _run_learner


@dataclass(frozen=True)
class Mutant:
    """A typical wrong answer and the feedback it earns."""

    name: str
    fn: Callable
    feedback: str


@dataclass(frozen=True)
class Breach:
    """A wrong answer that breaks a rule of the contract (a type, a prohibition), and the words its
    feedback must contain (``feedback``): the tests run it through the check."""

    name: str
    fn: Callable
    feedback: str


@dataclass(frozen=True)
class Rule:
    """A boundary the exercise's statement draws, and the cases that land on it.

    ``kind``: a key of :data:`RULE_KINDS`; ``says``: the rule in words; ``cases``: labels of the
    cases on it; ``lands(*args)``: true of each of them; ``catches``: the mutants these cases alone
    tell apart from the reference; ``quote``: the statement's own words; ``breaches``: the wrong
    answers of an ``output`` or ``forbidden`` rule (:data:`CONTRACT_KINDS`).
    """

    kind: str
    says: str
    cases: tuple
    lands: Callable[..., bool]
    catches: tuple = ()
    quote: str | tuple = ""  # the statement's words for it (a tuple: a rule stated in several sentences)
    breaches: tuple = ()


@dataclass(frozen=True)
class Forbidden:
    """A shortcut the statement forbids, how the check sees it, and what it says.

    ``targets()`` returns the forbidden functions and classes (lazily); seen in the code or by the
    call spy (:mod:`._forbidden`), either gives ``feedback``.
    """

    says: str
    targets: Callable[[], tuple]
    feedback: str


def _scribble(a: Any) -> bool:
    """Change ``a``'s numbers in place (the first array of a dataclass or list); False if it has none."""
    import torch  # the engine compares torch results too; torch is a dependency of the course

    fields = getattr(a, "__dataclass_fields__", None)
    if fields is not None:
        return any(_scribble(getattr(a, f)) for f in fields)
    if isinstance(a, (list, tuple)):
        return any(_scribble(x) for x in a)
    if isinstance(a, torch.Tensor) and a.numel():
        if a.dtype == torch.bool:
            a.logical_not_()
        else:
            a.add_(1)
        return True
    if isinstance(a, np.ndarray) and a.size and a.flags.writeable:
        if a.dtype == bool:
            np.logical_not(a, out=a)
        else:
            a += 1
        return True
    return False


def in_place_breach(reference: Callable, index: int = 0, name: str = "changes-an-input") -> Breach:
    """A wrong answer that returns the reference's result but changes argument ``index`` in place:
    the breach of "do not change the inputs in place" (its feedback says "in place")."""
    def changes_its_input(*args):
        out = copy.deepcopy(reference(*args))  # computed first: only the change in place is wrong
        _scribble(args[index])
        return out

    return Breach(name, changes_its_input, "in place")


def output_breaches(reference: Callable, *kinds: str) -> tuple:
    """The standard wrong answers of an output contract, each the reference's result retyped:
    ``"float32"`` (float64 numbers as float32), ``"list"`` (an array as a list, a tuple as a list),
    ``"float-for-bool"``, ``"float-for-int"`` and ``"array-for-number"`` (a number as a 1-element array)."""
    def each(transform):
        def f(*args):
            out = reference(*args)
            return tuple(transform(o) for o in out) if isinstance(out, tuple) else transform(out)
        return f

    def as_float32(o):
        import torch

        if isinstance(o, torch.Tensor):  # a tensor stays a tensor: only its precision is wrong
            return o.float() if o.dtype == torch.float64 else o
        a = np.asarray(o)
        return a.astype(np.float32) if a.dtype == np.float64 else o

    def as_float(o):
        a = np.asarray(o)
        return a.astype(float) if a.dtype.kind in "biu" else o

    table = {
        "float32": (each(as_float32), "float32 but the inputs are float64"),
        "list": (each(lambda o: np.asarray(o).tolist() if np.ndim(o) else o), "a list"),
        "tuple-as-list": (lambda *a: list(reference(*a)), "return a tuple instead"),
        "float-for-bool": (each(as_float), "not"),
        "float-for-int": (each(lambda o: float(o) if np.ndim(o) == 0 and np.asarray(o).dtype.kind in "iu" else o),
                          "expected an int"),
        "array-for-number": (each(lambda o: np.asarray([o]) if np.ndim(o) == 0 else o), "expected a single number"),
    }
    return tuple(Breach(kind, *table[kind]) for kind in kinds)


def output_rule(says: str, case: str, quote: str | tuple, reference: Callable, *kinds: str) -> Rule:
    """The ``output`` rule: the answer has the type, shape and dtype the statement names.

    Parameters
    ----------
    says : str
        The rule in words (``"a float64 array (T, d_v)"``).
    case : str
        The label of the case that shows it.
    quote : str or tuple
        The statement's own words for it.
    reference : callable
        The exercise's reference function, retyped by the breaches.
    *kinds : str
        The :func:`output_breaches` that break it (``"float32"``, ``"list"``, ...).

    Returns
    -------
    Rule
        A rule of kind ``"output"`` on ``case`` alone, with those breaches.

    Examples
    --------
    >>> rule = output_rule("a float64 array (n,)", "n=3", "a float64 array", lambda x: x * 2, "float32", "list")
    >>> rule.kind, rule.cases, [b.name for b in rule.breaches]
    ('output', ('n=3',), ['float32', 'list'])
    """
    return Rule("output", says, (case,), lambda *a: True, quote=quote, breaches=output_breaches(reference, *kinds))


def in_place_rule(case: str, reference: Callable, index: int = 0,
                  quote: str | tuple = "Do not change the inputs in place") -> Rule:
    """The ``forbidden`` rule that the inputs are not changed in place.

    Parameters
    ----------
    case : str
        The label of the case that shows it.
    reference : callable
        The exercise's reference function; its breach returns the right result but changes an input.
    index : int, default 0
        The position of the argument the breach changes (:func:`in_place_breach`).
    quote : str or tuple, default "Do not change the inputs in place"
        The statement's own words for it.

    Returns
    -------
    Rule
        A rule of kind ``"forbidden"`` on ``case`` alone, with one :func:`in_place_breach`.

    Examples
    --------
    >>> rule = in_place_rule("n=3", lambda x: x * 2)
    >>> rule.kind, rule.says, rule.quote, [(b.name, b.feedback) for b in rule.breaches]
    ('forbidden', 'the inputs are not changed in place', 'Do not change the inputs in place', [('changes-an-input', 'in place')])
    """
    return Rule("forbidden", "the inputs are not changed in place", (case,), lambda *a: True, quote=quote,
                breaches=(in_place_breach(reference, index=index),))


def retyped_breach(reference: Callable, transform: Callable, feedback: str, name: str) -> Breach:
    """A wrong answer that returns the reference's result with ``transform`` applied to each item (a
    numpy array for a tensor, float32 for float64, a list for an array)."""
    def retyped(*args):
        out = reference(*args)
        return tuple(transform(o) for o in out) if isinstance(out, tuple) else transform(out)

    return Breach(name, retyped, feedback)


# A hint looks at one case's (got, expected, args) and returns feedback or None.
Hint = Callable[[Any, Any, tuple], Optional[str]]
# An explanation of one wrong entry: (index, expected value, args) -> text or None.
Explain = Callable[[tuple, Any, tuple], Optional[str]]


@dataclass(frozen=True)
class Exercise:
    """Everything the checker knows about one exercise.

    ``in_place_ok``: positions of arguments the learner may update in place (every other must
    come back unchanged). ``returns`` names the items of a tuple result. ``difficulty`` (1-3)
    and ``minutes``: 0 means not rated. ``hints`` are the checker's symptom detectors.
    ``explain(index, expected, args)`` says why a boolean entry is wrong; ``passed_note(cases,
    expected)`` is added to the pass message. ``array_type``: ``"any"`` (numpy or torch, at least
    the reference's precision) or ``"torch"`` (exactly the reference's dtype).
    ``structure_hint(got, expected, args)`` adds advice to a wrong type or shape; ``error_tips``
    are (words of an exception, tip) pairs; ``framing`` quotes the statement's sentences that draw
    no rule; ``usage(args)`` says how the function broke a rule of use.
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
    array_type: str = "any"
    forbidden: tuple = ()
    structure_hint: Optional[Callable[[Any, Any, tuple], Optional[str]]] = None
    error_tips: tuple = ()
    framing: tuple = ()
    usage: Optional[Callable[[tuple], Optional[str]]] = None


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
    if exercise.array_type not in ("any", "torch"):
        raise ValueError(f"exercise {exercise.id!r} has array_type {exercise.array_type!r}; expected 'any' or 'torch'")
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


def _mutants(exercise: Exercise) -> tuple[list, list]:
    """Each mutant's result on every case without a budget and, for each, which of its results are right:
    ``{(case, leaf): bool}`` (None for a mutant that raised); computed once per exercise."""
    cases, expected = _prepared(exercise)
    entry = _PREPARED[id(exercise)]
    if entry[3] is None:
        outputs, tables = [], []
        for mutant in exercise.mutants:
            try:
                with warnings.catch_warnings(), np.errstate(all="ignore"):
                    warnings.simplefilter("ignore")
                    out = {n: mutant.fn(*_fresh(c.args)) for n, c in enumerate(cases) if _for_mutants(c)}
            except Exception:  # a mutant may not run on every case: it cannot match then
                out = None
            if out is not None and any(structure_problem(o, expected[n], array_type=exercise.array_type)
                                       for n, o in out.items()):
                out = None  # a mutant of another shape or type is never matched on values
            outputs.append(out)
            tables.append(None if out is None else _leaf_table(exercise, cases, out, expected))
        _PREPARED[id(exercise)] = entry = (*entry[:3], (outputs, tables))
    return entry[3]


def _for_mutants(case: Case) -> bool:
    """Whether the mutants run on ``case`` (not on a case with a budget, nor on one marked too costly)."""
    return not case.budget and case.mutants


def _tolerances(exercise: Exercise, case: Case) -> tuple[float, float]:
    """A case's (rtol, atol): its own where it sets them, else the exercise's."""
    return (exercise.rtol if case.rtol is None else case.rtol, exercise.atol if case.atol is None else case.atol)


# ---------------------------------------------------------------- running
def _fresh(args: tuple, shared: tuple = ()) -> tuple:
    """A private copy of a case's arguments; read-only arrays (huge cases) and the ``shared`` positions
    (a model's weights, checked by their fingerprint instead) are passed as they are."""
    return tuple(
        a if i in shared or (isinstance(a, np.ndarray) and not a.flags.writeable) else copy.deepcopy(a)
        for i, a in enumerate(args)
    )


def _fingerprint(x: Any) -> tuple:
    """Two integer sums over the bit patterns of every array in ``x`` (a dataclass of tensors, say): a change
    in place moves them (one that keeps both exactly is not a change a learner makes), for a fraction of
    the cost of copying and comparing a model's weights."""
    import torch

    fields = getattr(x, "__dataclass_fields__", None)
    if fields is not None:
        return tuple(_fingerprint(getattr(x, f)) for f in fields)
    if isinstance(x, (list, tuple)):
        return tuple(_fingerprint(item) for item in x)
    if isinstance(x, torch.Tensor) and x.dtype in (torch.float32, torch.float64):
        # sums of the bit patterns as integers: exact and the same in any order of summation (float sums
        # depend on how many threads add them up), wrapping around modulo 2^64
        bits = x.detach().contiguous().view(torch.int32 if x.dtype == torch.float32 else torch.int64).to(torch.int64)
        return (int(bits.sum()), int((bits * bits).sum()))
    if isinstance(x, (torch.Tensor, np.ndarray)):
        return (as_numpy(x).tobytes(),)
    return ()


_FINGERPRINTS: dict = {}  # (id(exercise), case label, position) -> (fingerprint, a pristine copy)


def _shared_before(exercise: Exercise, case: Case) -> None:
    for i in case.shared:
        key = (id(exercise), case.label, i)
        if key not in _FINGERPRINTS:
            _FINGERPRINTS[key] = (_fingerprint(case.args[i]), copy.deepcopy(case.args[i]))


def _shared_changed(exercise: Exercise, case: Case) -> Optional[int]:
    """The first shared argument the learner changed in place (then restored from its pristine copy), or None."""
    import torch

    for i in case.shared:
        fingerprint, pristine = _FINGERPRINTS[(id(exercise), case.label, i)]
        if _fingerprint(case.args[i]) != fingerprint:
            def restore(now: Any, then: Any) -> None:
                fields = getattr(now, "__dataclass_fields__", None)
                if fields is not None:
                    for f in fields:
                        restore(getattr(now, f), getattr(then, f))
                elif isinstance(now, (list, tuple)):
                    for a, b in zip(now, then):
                        restore(a, b)
                elif isinstance(now, torch.Tensor):
                    with torch.no_grad():
                        now.copy_(then)
            restore(case.args[i], pristine)
            return i
    return None


def _unchanged(before: Any, after: Any) -> bool:
    """True when ``after`` holds the same numbers as ``before`` (arrays, tensors, and the arrays inside
    a dataclass of weights, a list or a tuple)."""
    fields = getattr(before, "__dataclass_fields__", None)
    if fields is not None and type(after) is type(before):
        return all(_unchanged(getattr(before, f), getattr(after, f)) for f in fields)
    if isinstance(before, (list, tuple)) and isinstance(after, (list, tuple)) and len(before) == len(after):
        return all(_unchanged(b, a) for b, a in zip(before, after))
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


# Tips for errors any exercise's learner may meet; an exercise adds its own (``Exercise.error_tips``),
# so that no tip quotes another exercise's names.
_ERROR_TIPS = (
    ("could not be broadcast", " Tip: if you reduced an axis (a sum, a mean, a max), keep it with "
     "keepdims=True (keepdim=True in torch) so that the shapes line up."),
    ("must match the size of tensor", " Tip: if you reduced an axis (a sum, a mean, a max), keep it with "
     "keepdim=True so that the shapes line up."),
)
_MEMORY_WORDS = ("allocate", "MemoryError", "out of memory")
#: Tips for the exercises that compute scores q k^T (they opt in with ``error_tips=SCORE_TIPS``).
SCORE_TIPS = (
    ("axes don't match", " Tip: swap the last two axes with np.swapaxes(k, -2, -1) (k.transpose(-2, -1) "
     "in torch), which works for any number of leading batch axes."),
    ("matmul", " Tip: scores are q @ k^T, of shape (..., T, S): swap the LAST two axes of k, "
     "np.swapaxes(k, -2, -1), so leading batch axes stay in place."),
    ("mat1 and mat2", " Tip: scores are q @ k^T, of shape (..., T, S): swap the last two axes of k."),
)
#: A tip for the exercises whose verdict is a ratio that may be 0 / 0 (they opt in).
RATIO_TIPS = (
    ("ZeroDivisionError", " Tip: a ratio a / b is 0 / 0 when both are 0; compare a < 0.1 * b instead, "
     "or return what the statement says for that case."),
)


def _raised_message(exercise: Exercise, exc: BaseException, case: Case) -> str:
    line = _shorten("".join(traceback.format_exception_only(type(exc), exc)).strip())
    tip = next((t for key, t in (*exercise.error_tips, *_ERROR_TIPS) if key in line), "")
    return f"your function raised {line} on case '{case.label}'.{tip}"


def _argument_name(fn: Any, index: int) -> str:
    """The learner's own name for positional argument ``index`` (``argument 2`` if it has none)."""
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        return f"`{params[index]}`"
    except Exception:  # noqa: BLE001 - a builtin or *args: no names to give
        return f"{index + 1}"


def _in_place_message(case: Case, fn: Any = None, index: Optional[int] = None) -> str:
    what = "its input" if index is None else f"its argument {_argument_name(fn, index)}"
    return (f"your function changed {what} in place on case '{case.label}'; work on a copy: write "
            f"y = a - b rather than a -= b (or a[...] = ...), or copy first with .copy() (numpy) or "
            f".clone() (torch).")


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


def _forbidden_targets(exercise: Exercise) -> list[tuple[Forbidden, tuple]]:
    out = []
    for rule in exercise.forbidden:
        try:
            out.append((rule, tuple(rule.targets())))
        except Exception:  # noqa: BLE001 - a target that cannot be imported cannot be used either
            pass
    return out


def _forbidden_in_code(exercise: Exercise, fn: Any) -> Optional[Forbidden]:
    """The first prohibition ``fn`` breaks by naming a forbidden function (or being one)."""
    if fn is exercise.reference:
        return None
    for rule, targets in _forbidden_targets(exercise):
        if any(fn is t for t in targets) or uses_any(fn, targets):
            return rule
    return None


def _run_learner(exercise: Exercise, fn: Callable, cases: list, expected: list, limit: float):
    """Run ``fn`` on every case; return (early CheckResult or None, outputs, budget failures, called).

    ``called``: the prohibitions ``fn`` called, and the messages of the rules of use it broke.
    """
    eid = exercise.id
    outputs: dict[int, Any] = {}
    over_budget: list[tuple[Case, str]] = []
    spent = 0.0
    watched = [] if fn is exercise.reference else _forbidden_targets(exercise)
    called: list[Forbidden] = []
    for n, (case, exp) in enumerate(zip(cases, expected)):
        _shared_before(exercise, case)
        args = _fresh(case.args, case.shared)
        with spy([t for _, targets in watched for t in targets]) as hit:
            out = call_with_time_limit(fn, args, limit - spent)
        called += [rule for rule, targets in watched if any(t in hit for t in targets) and rule not in called]
        spent += out.seconds
        if out.kind == "todo":
            return CheckResult(
                eid, "not attempted",
                f"{NOT_IMPLEMENTED}: replace `raise NotImplementedError` with your code "
                f"and run this cell again.",
            ), outputs, over_budget, called
        memory = out.kind == "raised" and (
            isinstance(out.value, MemoryError) or any(w in str(out.value) for w in _MEMORY_WORDS)
        )
        if case.budget and (out.kind == "timeout" or memory):
            over_budget.append((case, "timeout" if out.kind == "timeout" else "memory"))
            if out.kind == "timeout" and out.still_running:
                return _failed(eid, f"{case.slow or case.budget} {_BACKGROUND}"), outputs, over_budget, called
            continue
        if out.kind == "timeout":
            return _failed(eid, _timeout_message(case, limit, out.still_running)), outputs, over_budget, called
        if out.kind == "exit":
            return _failed(eid, f"your function called sys.exit() (or exit()) on case '{case.label}', "
                                f"which would stop the notebook: return the result instead."), outputs, over_budget, called
        if out.kind == "raised" and "read-only" in str(out.value):
            return _failed(eid, _in_place_message(case)), outputs, over_budget, called
        if out.kind == "raised":
            rules = [c for c in called if not isinstance(c, str)]
            if rules:  # the forbidden call is the first thing to fix
                return _failed(eid, rules[0].feedback), outputs, over_budget, called
            changed = [i for i, (b, a) in enumerate(zip(case.args, args))
                       if i not in exercise.in_place_ok and i not in case.shared and not _unchanged(b, a)]
            shared = _shared_changed(exercise, case)
            if shared is not None:
                changed.insert(0, shared)
            if changed:  # it raised after changing an input (a frozen dataclass refusing the assignment, say)
                return (_failed(eid, _in_place_message(case, fn, changed[0]) + " (Then it raised "
                                + _shorten("".join(traceback.format_exception_only(type(out.value), out.value)).strip())
                                + ".)"), outputs, over_budget, called)
            return _failed(eid, _raised_message(exercise, out.value, case)), outputs, over_budget, called
        changed = [i for i, (b, a) in enumerate(zip(case.args, args))
                   if i not in exercise.in_place_ok and i not in case.shared and not _unchanged(b, a)]
        shared = _shared_changed(exercise, case)
        if shared is not None:
            changed.insert(0, shared)
        if changed:
            return _failed(eid, _in_place_message(case, fn, changed[0])), outputs, over_budget, called
        problem = structure_problem(out.value, exp, names=exercise.returns, array_type=exercise.array_type)
        if problem:
            advice = _structure_advice(exercise, out.value, exp, case.args)
            if out.value is None and advice:  # the exercise knows why None came back (no window passes, say)
                return _failed(eid, f"your function returned None on case '{case.label}'.{advice}"), outputs, over_budget, called
            return _failed(eid, f"{problem} (case '{case.label}').{advice}"), outputs, over_budget, called
        if exercise.usage is not None:
            try:
                misuse = exercise.usage(args)
            except Exception:  # noqa: BLE001 - a rule of use is a nicety of the check, never a crash
                misuse = None
            if misuse and not any(isinstance(c, str) for c in called):
                called.append(f"{misuse} (case '{case.label}')")
        outputs[n] = out.value
    return None, outputs, over_budget, called


def _structure_advice(exercise: Exercise, got: Any, exp: Any, args: tuple) -> str:
    if exercise.structure_hint is None:
        return ""
    try:
        advice = exercise.structure_hint(got, exp, args)
    except Exception:  # noqa: BLE001 - advice is a nicety, never a reason to fail
        advice = None
    return f" {advice}" if advice else ""


def _leaf_table(exercise: Exercise, cases: list, results: dict, reference: list) -> dict:
    """``{(case, leaf): True when that leaf of ``results`` matches the same leaf of ``reference``}``."""
    table = {}
    for n, out in results.items():
        rtol, atol = _tolerances(exercise, cases[n])
        for j, (g, e) in enumerate(zip(leaves(out), leaves(reference[n]))):
            table[n, j] = leaf_close(g, e, rtol, atol)
    return table


def _telling(value: Any) -> bool:
    """A wrong value that is evidence of one particular mistake: finite real numbers. Booleans, NaN and
    integers (a window, a count, an index) agree with another mistake's by chance too easily."""
    arr = as_numpy(value)
    return arr is not None and arr.dtype.kind == "f" and bool(np.isfinite(arr).all())


def _matching_mutant(exercise: Exercise, cases: list, expected: list, outputs: dict) -> Optional[tuple[Mutant, str]]:
    """The known mistake the learner's results show (steps 6 and 7 of the module's docstring), and a note
    on the results it does not explain ("" when it explains them all); None when no mistake is clear.

    A mutant that agrees everywhere wins at once. Otherwise a mutant is a candidate when it explains
    at least half of the learner's wrong results, and the learner shares at least half of its own
    (all of them where it shows only in integers; one a finite real number where it shows in reals);
    a tie between candidates that explain the same results names neither.
    """
    checked = {n: o for n, o in outputs.items() if _for_mutants(cases[n])}
    right = _leaf_table(exercise, cases, checked, expected)
    wrong = {key for key, ok in right.items() if not ok}
    mine = {n: leaves(o) for n, o in checked.items()}
    candidates = [(m, out, table) for m, out, table in zip(exercise.mutants, *_mutants(exercise))
                  if out is not None and set(out) == set(checked)]

    def same(n: int, j: int, mutant_out: dict) -> bool:
        return leaf_close(mine[n][j], leaves(mutant_out[n])[j], *_tolerances(exercise, cases[n]))

    for mutant, mutant_out, mutant_right in candidates:  # the learner's results are the mutant's
        if {key for key, ok in mutant_right.items() if not ok} == wrong and all(
                same(n, j, mutant_out) for n, j in wrong):
            return mutant, ""
    scored = []
    for mutant, mutant_out, mutant_right in candidates:
        shown = [key for key, ok in mutant_right.items() if not ok]  # where the mutant itself is wrong
        explained = [(n, j) for n, j in shown if (n, j) in wrong and same(n, j, mutant_out)]
        telling = sum(_telling(leaves(mutant_out[n])[j]) for n, j in explained)
        numbers = any(_telling(leaves(mutant_out[n])[j]) for n, j in shown)  # its mistake shows in real numbers
        counts = any(leaves(mutant_out[n])[j].dtype.kind in "iu" for n, j in shown)  # ... or in integers
        covers = 2 * len(explained) >= len(wrong)
        if numbers:
            fits = 2 * len(explained) >= len(shown) and telling > 0
        elif counts:
            fits = len(explained) == len(shown) > 0
        else:
            fits = 2 * len(explained) >= len(shown) > 0
        if covers and fits:
            scored.append(((len(explained), telling), mutant, set(explained)))
    if not scored:
        return None
    scored.sort(key=lambda item: item[0], reverse=True)
    best_score, best, explained = scored[0]
    if any(score == best_score and other & explained for score, _, other in scored[1:]):
        return None  # two mistakes fit the same results equally well: say what differs instead
    return best, _unexplained_note(cases, wrong, explained)


def _unexplained_note(cases: list, wrong: set, explained: set) -> str:
    """A note on the cases whose wrong results the named mistake does not explain ("" if none)."""
    left = sorted({n for n, _ in wrong} - {n for n, _ in explained})
    if not left:
        return ""
    shown = sorted({n for n, _ in explained})
    return (f" (This explains what differs on {len(shown)} of the {len(shown) + len(left)} cases where your "
            f"result is off; on case '{cases[left[0]].label}' something else differs as well.)")


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
            if g.size < 2 or all(leaf_close(leaves(outputs[n])[j], leaves(expected[n])[j],
                                            *_tolerances(exercise, cases[n])) for n in checked):
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
    d = first_difference(out, exp, *_tolerances(exercise, case))
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
    early, outputs, over_budget, called = _run_learner(exercise, fn, cases, expected, limit)
    if early is not None:
        return early
    misuse = next((c for c in called if isinstance(c, str)), None)
    called = [c for c in called if not isinstance(c, str)]
    rule = _forbidden_in_code(exercise, fn) or (called[0] if called else None)
    if rule is not None:  # the statement forbids it: that is the first thing to fix, right numbers or not
        return _failed(eid, rule.feedback, forbidden=rule.says)
    right = {n: close(o, expected[n], *_tolerances(exercise, cases[n])) for n, o in outputs.items()}
    if misuse and all(right.values()):  # right results, but a rule of use broken (too many calls, say)
        return _failed(eid, misuse, usage=True)
    if all(right.values()) and over_budget:
        case, why = over_budget[0]
        return _failed(eid, (case.slow or case.budget) if why == "timeout" else case.budget, over=why)
    if all(right.values()):
        note = f" {exercise.passed_note(cases, expected)}" if exercise.passed_note else ""
        return CheckResult(eid, "passed", f"passed all {len(cases)} checks. Well done!{note}", n_cases=len(cases))
    match = _matching_mutant(exercise, cases, expected, outputs)
    if match is not None:
        mutant, note = match
        return CheckResult(eid, "failed", mutant.feedback + note, n_cases=len(cases), details={"mutant": mutant.name})
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
