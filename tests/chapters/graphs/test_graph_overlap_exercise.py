"""Chapter 5's deciding exercise, effective-graph-overlap: right answers pass, wrong ones get specific feedback.

Every wrong answer below is one a learner could write; each must come back as a failed check
with a message naming the mistake, never as an exception in the notebook.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_course.exercises import REGISTRY, check, evaluate
from attention_course.course.solutions import SOLUTIONS
from attention_course.chapters.graphs import topology

EID = "effective-graph-overlap"
solution = SOLUTIONS[EID]


def test_solution_agrees_with_the_lens_on_fresh_data():
    # an independent reference: the package's shuffle_overlap on maps the exercise never saw
    rng = np.random.default_rng(123)
    for n, mass in ((5, 0.7), (9, 0.8), (12, 0.9)):
        A, B = rng.dirichlet(np.full(n, 0.3), size=n), rng.dirichlet(np.full(n, 0.3), size=n)
        perm = rng.permutation(n)
        words, _, _ = topology.shuffle_overlap(A[None, None], [B[None, None]], [perm.tolist()], mass)
        assert solution(A, B, perm, mass) == pytest.approx(words[0, 0], abs=1e-12)


def test_a_content_head_keeps_its_words_and_a_position_head_does_not():
    n = 6
    perm = np.array([3, 0, 5, 1, 4, 2])
    content = np.full((n, n), 0.02)
    content[:, 4] = 0.9  # reads word 4 wherever it stands
    content /= content.sum(axis=1, keepdims=True)
    assert solution(content, content[np.ix_(perm, perm)], perm, 0.8) == 1.0
    diag = np.eye(n) * 0.9 + 0.1 / n  # reads its own position
    assert solution(diag, diag, perm, 0.8) == 1.0  # "itself" is the same word after any shuffle
    prev = np.eye(n, k=-1) * 0.9 + 0.1 / n
    prev[0, 0] += 0.9
    assert solution(prev, prev, perm, 0.8) < 0.5  # the previous position holds another word


@pytest.mark.parametrize("answer", [
    lambda A, B, perm, mass: solution(A, B, perm, mass),
    lambda A, B, perm, mass: np.float64(solution(A, B, perm, mass)),
    lambda A, B, perm, mass: np.array(solution(A, B, perm, mass)),  # a 0-d array
    lambda A, B, perm, mass: torch.tensor(solution(A, B, perm, mass), dtype=torch.float64),
    lambda A, B, perm, mass: solution(A, B, list(perm), mass),  # perm as a list
])
def test_correct_answers_in_any_numeric_form_pass(answer):
    assert evaluate(EID, answer).passed


@pytest.mark.parametrize("answer, words", [
    (lambda A, B, perm, mass: [solution(A, B, perm, mass)], "list"),
    (lambda A, B, perm, mass: "0.5", "str"),
    (lambda A, B, perm, mass: None, "returned None"),
    (lambda A, B, perm, mass: (solution(A, B, perm, mass), 0.0), "tuple"),
    (lambda A, B, perm, mass: np.full(len(A), solution(A, B, perm, mass)), "shape"),
    (lambda A, B, perm, mass: float("nan"), "NaN"),
    (lambda A, B, perm, mass: 1 / 0, "ZeroDivisionError"),
    (lambda A, B, perm, mass: A[len(A)], "IndexError"),
    (lambda A, B, perm, mass: len(A) * solution(A, B, perm, mass) + 1.0, "between 0 and 1"),
])
def test_wrong_answers_get_specific_feedback_and_never_raise(answer, words, capsys):
    result = evaluate(EID, answer)
    assert result.status == "failed" and words in result.message, result.message
    check(EID, answer)  # prints, never raises
    assert words in capsys.readouterr().out


def test_changing_the_maps_in_place_is_caught():
    def normalise_in_place(A, B, perm, mass):
        A /= A.sum(axis=1, keepdims=True)
        return solution(A, B, perm, mass)

    assert "in place" in evaluate(EID, normalise_in_place).message


def test_an_unknown_wrong_value_points_at_a_case():
    r = evaluate(EID, lambda A, B, perm, mass: 0.5)
    assert r.status == "failed" and "case" in r.message, r.message
