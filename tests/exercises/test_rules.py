"""Every rule an exercise's statement draws is probed (see attention_course.exercises._core).

An exercise declares its ``rules``: the thresholds, ties, empty inputs, edge sizes and input
ranges its statement names, each with the cases that land on it and the plausible wrong rules
(mutants) those cases must tell apart from the reference. These tests fail when a rule has no
case, when a named case does not exist or does not land on the rule, when a wrong rule agrees
with the reference on every case that probes it, and when an exercise has too few named mistakes.
"""

from __future__ import annotations

import numpy as np
import pytest

from attention_course.exercises import REGISTRY
from attention_course.exercises import evaluate
from attention_course.exercises._core import CONTRACT_KINDS, RULE_KINDS, _fresh, _mutants, _prepared
from engine_cases import case_close

IDS = sorted(REGISTRY)
MIN_MUTANTS = 5
RULES = [(eid, rule) for eid in IDS for rule in REGISTRY[eid].rules]


def _by_label(eid):
    cases, expected = _prepared(REGISTRY[eid])
    return {c.label: (n, c) for n, c in enumerate(cases)}, expected


@pytest.mark.parametrize("eid", IDS)
def test_every_exercise_declares_its_rules(eid):
    ex = REGISTRY[eid]
    assert ex.rules, f"{eid}: declare the rules its statement draws (Rule(...) in rules=)"
    says = [r.says for r in ex.rules]
    assert len(set(says)) == len(says), f"{eid}: two rules say the same thing"
    assert all(r.kind in RULE_KINDS for r in ex.rules)


@pytest.mark.parametrize("eid", IDS)
def test_case_labels_are_unique(eid):
    labels = [c.label for c in _prepared(REGISTRY[eid])[0]]
    assert len(set(labels)) == len(labels), f"{eid}: two cases share a label"


@pytest.mark.parametrize("eid,rule", RULES, ids=[f"{e}:{r.kind}:{r.says[:40]}" for e, r in RULES])
def test_each_rule_has_cases_that_land_on_it(eid, rule):
    by_label, _ = _by_label(eid)
    assert rule.cases, f"{eid}: rule {rule.says!r} names no case"
    for label in rule.cases:
        assert label in by_label, f"{eid}: rule {rule.says!r} names a case {label!r} that does not exist"
        _, case = by_label[label]
        assert rule.lands(*_fresh(case.args)), f"{eid}: case {label!r} does not land on rule {rule.says!r}"


@pytest.mark.parametrize("eid,rule", RULES, ids=[f"{e}:{r.kind}:{r.says[:40]}" for e, r in RULES])
def test_each_wrong_rule_is_told_apart_by_the_rules_own_cases(eid, rule):
    ex = REGISTRY[eid]
    by_label, expected = _by_label(eid)
    if all(by_label[label][1].budget for label in rule.cases):
        assert not rule.catches  # a budget case's catch is its own budget and slow messages
        assert all(by_label[label][1].budget and by_label[label][1].slow for label in rule.cases)
        return
    if rule.kind in CONTRACT_KINDS or not rule.catches:  # told apart by its breaches (next test)
        assert rule.breaches, f"{eid}: rule {rule.says!r} names no mutant and no breach that breaks it"
        return
    outputs = dict(zip([m.name for m in ex.mutants], _mutants(ex)[0]))
    for name in rule.catches:
        assert name in outputs, f"{eid}: rule {rule.says!r} catches an unknown mutant {name!r}"
        out = outputs[name]
        assert out is not None, f"{eid}: mutant {name!r} raised or returned the wrong structure on some case"
        probed = [label for label in rule.cases if by_label[label][0] in out]
        assert probed, f"{eid}: rule {rule.says!r}: the mutants run on none of its cases; give it breaches"
        differs = [label for label in probed
                   if not case_close(ex, by_label[label][1], out[by_label[label][0]], expected[by_label[label][0]])]
        assert differs, (f"{eid}: mutant {name!r} agrees with the reference on every case of rule "
                         f"{rule.says!r}: those cases do not probe it")


BREACHES = [(eid, rule, b) for eid, rule in RULES for b in rule.breaches]


@pytest.mark.parametrize("eid,rule,breach", BREACHES, ids=[f"{e}:{r.kind}:{b.name}" for e, r, b in BREACHES])
def test_each_breach_of_a_contract_gets_its_feedback(eid, rule, breach):
    """An answer that breaks the contract (a numpy result, float32, a forbidden call, a change in place) fails
    with the words its rule promises."""
    result = evaluate(eid, breach.fn)
    assert result.status == "failed" and breach.feedback in result.message, (rule.says, result.message)


@pytest.mark.parametrize("eid", IDS)
def test_every_exercise_states_what_it_returns(eid):
    """Each exercise declares an output rule (type, shape, dtype), with at least one breach that the check names."""
    rules = [r for r in REGISTRY[eid].rules if r.kind == "output"]
    assert rules and all(r.breaches for r in rules), f"{eid}: declare Rule('output', ...) with breaches"


@pytest.mark.parametrize("eid", IDS)
def test_every_exercise_names_at_least_five_mistakes(eid):
    assert len(REGISTRY[eid].mutants) >= MIN_MUTANTS, eid


@pytest.mark.parametrize("eid", IDS)
def test_every_mutant_runs_on_every_case_with_the_right_structure(eid):
    """A mutant that cannot run on some case can never be matched, so its feedback would never show."""
    ex = REGISTRY[eid]
    for mutant, out in zip(ex.mutants, _mutants(ex)[0]):
        assert out is not None, f"{eid}: mutant {mutant.name!r} raised or returned the wrong structure"


@pytest.mark.parametrize("eid", IDS)
def test_tuple_results_are_named(eid):
    """Feedback names a tuple's items as the statement does ("rank_wins is True but should be False")."""
    ex = REGISTRY[eid]
    _, expected = _prepared(ex)
    if isinstance(expected[0], tuple):
        assert len(ex.returns) == len(expected[0]), f"{eid}: set returns= to the names of its results"
    else:
        assert not ex.returns


@pytest.mark.parametrize("eid", IDS)
def test_every_exercise_is_rated(eid):
    ex = REGISTRY[eid]
    assert ex.difficulty in (1, 2, 3) and 5 <= ex.minutes <= 60, (eid, ex.difficulty, ex.minutes)


def test_rule_kinds_are_documented():
    assert set(RULE_KINDS) == {"threshold", "tie", "empty", "edge-size", "range", "output", "forbidden"}
    assert all(len(text) > 20 for text in RULE_KINDS.values())
