"""The blind batteries (issue 44's for chapters 7-8, the second for chapters 9-10): answers written from the
exercises' statements alone, run through the checks.

Every wrong answer must fail, every correct answer pass, and each message keep the words that name the
planted mistake (``expected.json``, the opening words of the message the check gave when the battery was
judged). ``README.md`` has the before/after table.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from battery_runner import EXERCISES, load

from attention_course.exercises import evaluate

pytestmark = [pytest.mark.extended, pytest.mark.usefixtures("one_torch_thread")]
EXPECTED = json.loads(Path(__file__).with_name("expected.json").read_text())
#: Answers labelled correct that the new statements rule out, with the reason.
RULED_OUT: dict[tuple[str, str], str] = {}
ANSWERS = [(eid, name, fn, label) for eid in EXERCISES for name, fn, label, _ in load(eid).ANSWERS]


@pytest.mark.parametrize("eid,name,fn,label", ANSWERS, ids=[f"{a[0]}:{a[1]}" for a in ANSWERS])
def test_the_battery_gets_its_verdict_and_its_name(eid, name, fn, label):
    result = evaluate(eid, fn)
    expected = EXPECTED[eid][name]
    if label == "correct" and (eid, name) not in RULED_OUT:
        assert result.passed and expected == "passed", result.message
        return
    assert result.status == "failed", (label, result.message)
    assert expected in result.message, result.message


def test_every_answer_has_an_expected_verdict():
    assert {(e, n) for e, n, _, _ in ANSWERS} == {(e, n) for e, names in EXPECTED.items() for n in names}
