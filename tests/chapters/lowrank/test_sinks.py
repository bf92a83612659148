"""The course's one treatment of attention sinks: content_part, classify_heads, head_bins (checked by hand)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.chapters.lowrank import baselines as lb
from attention_course.core._backend import ShapeError


def test_content_part_encoder_by_hand():
    # [CLS] a b [SEP]: sinks at 0 and 3; row 1 puts 0.5 on [CLS], 0.25 on a, 0.125 on b, 0.125 on [SEP]
    A = np.array([[0.7, 0.1, 0.1, 0.1],
                  [0.5, 0.25, 0.125, 0.125],
                  [0.0, 0.6, 0.2, 0.2],
                  [0.4, 0.0, 0.0, 0.6]])
    part = lb.content_part(A, [0, -1])
    expected = np.array([[0.5, 0.5],            # 0.1 / 0.2 each
                         [2 / 3, 1 / 3],        # 0.25 / 0.375, 0.125 / 0.375
                         [0.75, 0.25],          # 0.6 / 0.8, 0.2 / 0.8
                         [0.0, 0.0]])           # all on sinks: reported, zeros
    np.testing.assert_allclose(part.weights, expected, rtol=0, atol=1e-15)
    assert part.sink_rows.tolist() == [False, False, False, True]


def test_content_part_decoder_first_row_and_batches():
    # a causal 3 x 3 map, sink at position 0, two heads stacked: the first query sees only the sink
    A = np.array([[[1.0, 0.0, 0.0], [0.9, 0.1, 0.0], [0.5, 0.3, 0.2]],
                  [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.2, 0.4, 0.4]]])
    part = lb.content_part(A, [0])
    assert part.weights.shape == (2, 3, 2) and part.sink_rows.tolist() == [[True, False, False], [True, False, False]]
    np.testing.assert_allclose(part.weights[0, 2], [0.6, 0.4], atol=1e-15)   # 0.3 / 0.5, 0.2 / 0.5
    np.testing.assert_allclose(part.weights[1, 2], [0.5, 0.5], atol=1e-15)
    assert np.all(np.isfinite(part.weights))                                  # nothing divided by zero


def test_content_part_duplicates_and_errors():
    A = np.full((2, 4), 0.25)
    np.testing.assert_allclose(lb.content_part(A, [0, 0, -4]).weights, np.full((2, 3), 1 / 3))
    with pytest.raises(ValueError, match="outside the 4 keys"):
        lb.content_part(A, [4])
    with pytest.raises(ShapeError, match=r"expected attention weights \(\.\.\., T, S\)"):
        lb.content_part(np.ones(3), [0])


@settings(max_examples=40, deadline=None)
@given(T=st.integers(1, 6), S=st.integers(2, 7), seed=st.integers(0, 10_000))
def test_content_part_rows_sum_to_one(T, S, seed):
    logits = np.random.default_rng(seed).normal(size=(T, S)) * 3
    A = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    part = lb.content_part(A, [0])
    assert not part.sink_rows.any()
    np.testing.assert_allclose(part.weights.sum(-1), 1.0, rtol=1e-12)
    # the ratios between content keys are A's own
    np.testing.assert_allclose(part.weights * A[:, 1:].sum(-1, keepdims=True), A[:, 1:], rtol=1e-12, atol=1e-300)


def test_classify_heads_and_bins_by_hand():
    prop = np.array([True, True, False, False, True, False])
    share = np.array([0.05, 0.49, 0.3, 0.5, 0.7, 0.95])
    labels = lb.classify_heads(prop, share)
    assert labels.tolist() == ["property", "property", "no property", "sink", "sink", "sink"]
    assert lb.head_bins(labels) == {"property": 2 / 6, "no property": 1 / 6, "sink": 3 / 6}
    # the threshold is a parameter: at 0.3 heads 1 and 2 (0.49, 0.3) become sinks too, at 0.8 only the last one is
    assert lb.classify_heads(prop, share, sink_threshold=0.3).tolist().count("sink") == 5
    assert lb.classify_heads(prop, share, sink_threshold=0.8).tolist() == [
        "property", "property", "no property", "no property", "property", "sink"]


def test_classify_heads_errors():
    with pytest.raises(ShapeError, match="one value of each per head"):
        lb.classify_heads([True, False], [0.1])
    with pytest.raises(ValueError, match="expected booleans"):
        lb.classify_heads([0.3, 0.9], [0.1, 0.2])
    with pytest.raises(ValueError, match="sink_threshold=0"):
        lb.classify_heads([True], [0.1], sink_threshold=0)
    with pytest.raises(ValueError, match="expected shares in"):
        lb.classify_heads([True], [1.5])
    with pytest.raises(ValueError, match="expected a non-empty list"):
        lb.head_bins(["sinks"])
