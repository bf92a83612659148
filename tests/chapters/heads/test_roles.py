"""chapters/heads/roles.py: head-role scores on hand-made heads and uniform attention, against closed forms."""

from __future__ import annotations

import numpy as np
import pytest

from attention_course.chapters.heads import roles as H

TOKS = ["[CLS]", "the", "cat", ",", "sat", ".", "[SEP]"]


def _maps(n, *patterns):
    return np.stack([np.stack(patterns)])  # (1, H, n, n)


def test_role_scores_on_hand_made_heads():
    n = len(TOKS)
    prev, nxt = np.eye(n, k=-1), np.eye(n, k=1)
    prev[0, 0] = nxt[-1, -1] = 1.0
    cls = np.zeros((n, n))
    cls[:, 0] = 1.0
    uniform = np.full((n, n), 1 / n)
    s = H.head_role_scores(_maps(n, prev, nxt, cls, uniform), TOKS)
    assert s["previous token"][0].tolist() == [1.0, 0.0, 0.2, 1 / n]  # word 1 of cls reads i - 1 = [CLS]
    assert s["next token"][0, 1] == 1.0 and s["[CLS]"][0, 2] == 1.0
    np.testing.assert_allclose(s["broad"][0], [0, 0, 0, 1], atol=1e-12)
    # words 1..5 of prev read [CLS], the, cat, ',', sat: one of five is punctuation
    assert abs(s["punctuation"][0, 0] - 1 / 5) < 1e-12
    assert H.top_heads(s)["[CLS]"] == (0, 2, 1.0)


def test_uniform_attention_scores_its_baselines_over_several_texts():
    texts = [TOKS, ["[CLS]", "a", "!", "b", "c", "d", "e", "?", "[SEP]"], ["[CLS]", "x", "[SEP]"]]
    maps = [np.full((2, 3, len(t), len(t)), 1 / len(t)) for t in texts]
    s = H.head_role_scores(maps, texts)
    base = H.uniform_role_baselines(texts)
    for role in H.ROLES:
        assert s[role].shape == (2, 3)
        np.testing.assert_allclose(s[role], base[role], atol=1e-12)


def test_role_scores_errors():
    with pytest.raises(ValueError, match=r"maps have shape \(1, 1, 6, 6\) for 7 tokens"):
        H.head_role_scores(np.ones((1, 1, 6, 6)) / 6, TOKS)
    with pytest.raises(ValueError, match="start with \\[CLS\\] and end with \\[SEP\\]"):
        H.head_role_scores(np.ones((1, 1, 3, 3)) / 3, ["a", "b", "c"])
