"""Reading the ablation runs (attention_course/chapters/insight/ingredients.py) and the window geometry."""

from __future__ import annotations

import numpy as np

from attention_course.chapters.insight.ingredients import covered_share, first_within
from attention_course.chapters.insight.recall_tasks import gaps, stacked_mqar


def test_gaps_are_where_each_query_finds_its_key():
    x, _, _ = stacked_mqar(50, n_pairs=5, seed=3)
    g = gaps(5, batch_size=50, seed=3).reshape(50, 5).numpy()
    for b in range(50):
        for i in range(5):
            j = int((x[b, :5, 0] == x[b, 5 + i, 0]).nonzero()[0, 0])
            assert g[b, i] == 5 + i - j


def test_covered_share_is_the_gap_distribution():
    # Query i at N + i finds key pi(i): gap N + i - pi(i), uniform over pairs, so the counts are exact.
    N = 4
    pairs = [(i, j) for i in range(N) for j in range(N)]
    expected = [np.mean([N + i - j < w for i, j in pairs]) for w in (1, 2, 4, 8)]
    np.testing.assert_allclose(covered_share(N, [1, 2, 4, 8]), expected, atol=0.03)


def test_first_within():
    assert first_within([0.0, 0.96, 1.0], 0.05) == 1
    assert first_within([0.0, 0.5], 0.05, target=1.0) is None
