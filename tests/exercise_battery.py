"""What every chapter's exercise battery shares: the expected verdicts, a mutant's feedback, and its two tests.

A battery is a list of ``(exercise id, label, learner answer, expect)``: ``expect`` is :data:`PASS`, :data:`ANY`
(any failure) or a string the failure's message must contain. A chapter's test module writes
``test_learner_answer_gets_the_right_verdict, test_every_exercise_has_a_battery = battery_tests(BATTERY, IDS)``.
"""

from __future__ import annotations

import pytest

from attention_course.course.solutions import SOLUTIONS
from attention_course.exercises import REGISTRY, evaluate

PASS = "passed"
ANY = ""  # any failure: the engine words the feedback of an unnamed mistake itself


def fb(eid: str, name: str) -> str:
    """The registered feedback of mutant ``name`` (a wrong answer must get exactly this)."""
    (mutant,) = [m for m in REGISTRY[eid].mutants if m.name == name]
    return mutant.feedback


def assert_verdict(eid: str, fn, expect: str, **kwargs) -> None:
    """``fn`` passes exercise ``eid`` if ``expect`` is :data:`PASS`; otherwise it fails, with ``expect`` in the message."""
    result = evaluate(eid, fn, **kwargs)
    if expect == PASS:
        assert result.passed, result.message
    else:
        assert result.status == "failed", result.message
        assert expect in result.message, result.message


def assert_rated_and_solved(ids, min_mutants: int) -> None:
    """Each exercise is registered with a solution, rated, and has ``min_mutants`` mutants with their own feedback."""
    assert set(ids) <= set(REGISTRY) and set(ids) <= set(SOLUTIONS)
    for eid in ids:
        ex = REGISTRY[eid]
        assert ex.difficulty in (1, 2, 3) and 5 <= ex.minutes <= 30, eid
        assert len(ex.mutants) >= min_mutants and len({m.feedback for m in ex.mutants}) == len(ex.mutants), eid
        assert len(ex.alternatives) >= 2, eid


def assert_has_a_battery(battery, eid: str) -> None:
    """At least 8 answers to ``eid``: at least 3 right ones and at least 5 wrong ones."""
    answers = [b for b in battery if b[0] == eid]
    right = [b for b in answers if b[3] == PASS]
    assert len(answers) >= 8 and len(right) >= 3 and len(answers) - len(right) >= 5, eid


def battery_tests(battery, ids):
    """The two tests of a chapter's battery: every answer gets its verdict; every exercise in ``ids`` has a battery."""

    @pytest.mark.parametrize("eid,label,fn,expect", battery, ids=[f"{b[0]}:{b[1]}" for b in battery])
    def test_learner_answer_gets_the_right_verdict(eid, label, fn, expect):
        assert_verdict(eid, fn, expect)

    @pytest.mark.parametrize("eid", ids)
    def test_every_exercise_has_a_battery(eid):
        assert_has_a_battery(battery, eid)

    return test_learner_answer_gets_the_right_verdict, test_every_exercise_has_a_battery
