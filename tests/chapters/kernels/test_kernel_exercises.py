"""Chapter 2's exercise feedback for mistakes a reader made (the generic checks of every exercise and
mutant run in tests/exercises/)."""

from __future__ import annotations

import numpy as np

from attention_course.exercises import REGISTRY, evaluate


def _feedback(eid: str, name: str) -> str:
    (m,) = [m for m in REGISTRY[eid].mutants if m.name == name]
    return m.feedback


def test_dividing_the_squared_distance_by_h_is_named():
    """A reader's answer (round 2): the log-kernel -(q - x)^2 / h instead of / (2 h^2), written as they
    wrote it (with the max shift and float64 casts), gets the named feedback, not just numbers."""

    def answer(x_query, x_train, y_train, bandwidth):
        xq, xt = np.asarray(x_query, dtype=np.float64), np.asarray(x_train, dtype=np.float64)
        logits = -(xq[:, None] - xt[None, :]) ** 2 / bandwidth  # (T, S), the planted mistake
        logits = logits - logits.max(axis=1, keepdims=True)
        w = np.exp(logits)
        w /= w.sum(axis=1, keepdims=True)  # (T, S), rows sum to 1
        return w @ np.asarray(y_train, dtype=np.float64)

    result = evaluate("nadaraya-watson", answer)
    assert not result.passed
    assert result.message == _feedback("nadaraya-watson", "divided-by-h")
    assert "2 h^2" in result.message
