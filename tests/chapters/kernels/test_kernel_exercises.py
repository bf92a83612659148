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


# A reader's planted mistakes (round 3), written as they wrote them: each got only numbers before.
def _logits(x_query, x_train, bandwidth):
    return -(x_query[:, None] - x_train[None, :]) ** 2 / (2 * bandwidth**2)  # (T, S)


def test_normalising_over_the_wrong_axis_is_named():
    def answer(x_query, x_train, y_train, bandwidth):
        logits = _logits(x_query, x_train, bandwidth)
        w = np.exp(logits - logits.max(axis=1, keepdims=True))  # (T, S), rows shifted by their max
        w = w / w.sum(axis=0, keepdims=True)  # the planted mistake: normalised over the queries
        return w @ y_train

    result = evaluate("nadaraya-watson", answer)
    assert not result.passed
    assert result.message == _feedback("nadaraya-watson", "row-max-then-normalised-over-queries")
    assert "wrong axis" in result.message


def test_forgetting_to_normalise_after_the_max_shift_is_named():
    def answer(x_query, x_train, y_train, bandwidth):
        logits = _logits(x_query, x_train, bandwidth)
        w = np.exp(logits - logits.max(axis=1, keepdims=True))  # (T, S), never divided by its row sums
        return w @ y_train

    result = evaluate("nadaraya-watson", answer)
    assert not result.passed
    assert result.message == _feedback("nadaraya-watson", "max-shift-without-normalising")
    assert "no normalisation" in result.message


def test_row_normalising_the_metric_kernel_is_named():
    def answer(q, k, W):
        diff = q[:, None, :] - k[None, :, :]  # (T, S, d)
        K = np.exp(-0.5 * ((diff @ W.T) ** 2).sum(axis=-1))  # (T, S)
        return K / K.sum(axis=1, keepdims=True)  # the planted mistake: normalised like a softmax

    result = evaluate("metric-kernel", answer)
    assert not result.passed
    assert "this is the kernel itself, not normalised weights" in result.message


def test_row_normalising_another_kernel_is_named_by_its_symptom():
    def answer(q, k, W):  # a wrong kernel (no 1/2), then normalised: no mutant matches, the hint names it
        diff = q[:, None, :] - k[None, :, :]
        K = np.exp(-((diff @ W.T) ** 2).sum(axis=-1))
        return K / K.sum(axis=1, keepdims=True)

    result = evaluate("metric-kernel", answer)
    assert not result.passed
    assert "this is the kernel itself, not normalised weights" in result.message
