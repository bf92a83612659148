"""Every exercise has a contract, and the check enforces every sentence of it.

The statement (in the notebook, or waiting in pending_statements/) must say what to return and what
every edge case gives; each of its sentences is either a declared rule, found by the rule's ``quote``
(with cases that land on it and mistakes its cases catch, tested in test_rules.py), or declared as
framing (the setup, an invitation to run it). A new sentence with a new rule fails here until the rule
is declared.
"""

from __future__ import annotations

import pytest

from attention_course.exercises import REGISTRY

from exercise_statements import normalise, notebook_statements, pending, sentences, statement

IDS = sorted(REGISTRY)


def _quotes(rule) -> tuple:
    """A rule's quote: one phrase of the statement, or several (a rule stated in two sentences)."""
    return (rule.quote,) if isinstance(rule.quote, str) else tuple(rule.quote)


@pytest.mark.parametrize("eid", IDS)
def test_every_exercise_has_a_statement(eid):
    assert statement(eid), f"{eid}: no {{exercise}} directive with :label: ex-{eid} in book/ or pending_statements/"


@pytest.mark.parametrize("eid", IDS)
def test_every_rule_quotes_the_statement(eid):
    text = normalise(statement(eid))
    for rule in REGISTRY[eid].rules:
        assert rule.quote, f"{eid}: rule {rule.says!r} has no quote= (the statement's words for it)"
        for quote in _quotes(rule):
            assert normalise(quote) in text, f"{eid}: rule {rule.says!r} quotes {quote!r}, not in the statement"
    for phrase in REGISTRY[eid].framing:
        assert normalise(phrase) in text, f"{eid}: framing {phrase!r} is not in the statement"


@pytest.mark.parametrize("eid", IDS)
def test_every_sentence_is_a_rule_or_framing(eid):
    """A sentence no rule quotes (and that is not framing) draws a boundary the check may not probe."""
    ex = REGISTRY[eid]
    phrases = [normalise(q) for r in ex.rules for q in _quotes(r)] + [normalise(f) for f in ex.framing]
    loose = [s for s in sentences(statement(eid)) if not any(p in s for p in phrases)]
    assert not loose, f"{eid}: declare a rule (with quote=) or framing for: {loose}"


@pytest.mark.parametrize("eid", IDS)
def test_the_statement_says_what_to_return(eid):
    """The output rule's quote says the type, and the statement names the shape or the kind of number."""
    rules = [r for r in REGISTRY[eid].rules if r.kind == "output"]
    assert rules, f"{eid}: no output rule"
    text = normalise(statement(eid)).lower()
    assert any(word in text for word in ("float", "int", "bool", "tensor", "array", "tuple")), eid


@pytest.mark.parametrize("eid", [e for e in IDS if pending(e)])
def test_a_pending_statement_is_not_yet_in_its_notebook(eid):
    """Once a pending statement is applied in its notebook, delete the pending copy."""
    applied = notebook_statements().get(eid)
    assert normalise(applied or "") != normalise(pending(eid)), (
        f"{eid}: its statement is applied in the notebook; delete tests/exercises/pending_statements/{eid}.md")
