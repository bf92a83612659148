"""recheck.py: the median effective rank per layer, against chapter 3's effective rank computed by hand."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_course.chapters.encoder.assemble import encode
from attention_course.chapters.encoder.random_weights import random_bert
from attention_course.chapters.encoder.recheck import effective_ranks, rank_shares
from attention_course.chapters.encoder.self_attention import self_attention
from attention_course.chapters.lowrank.spectra import effective_rank
from attention_course.core._backend import ShapeError

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_rank_shares_is_the_median_of_chapter_3s_effective_rank_over_n():
    w, ids = random_bert(3, n_layers=3, d=12, num_heads=3, d_ff=48), torch.tensor([[1, 4, 9, 2, 7, 5, 3]])
    n = ids.shape[1]
    hidden = encode(w, ids)  # (L+1, 1, n, d), float64
    by_hand = []
    for l, layer in enumerate(w.layers):
        _, maps = self_attention(hidden[l], layer, w.num_heads, None)  # (1, h, n, n)
        by_hand.append(np.median([effective_rank(m.numpy()) for m in maps[0]]) / n)
    np.testing.assert_allclose(rank_shares(w, ids), by_hand, rtol=1e-12)


def test_effective_ranks_of_the_extremes_and_bad_input():
    assert effective_ranks(torch.stack([torch.eye(5), torch.full((5, 5), 0.2)])).round(9).tolist() == [5.0, 1.0]
    with pytest.raises(ShapeError, match=r"expected \(1, n\)"):
        rank_shares(random_bert(0), torch.tensor([[1, 2], [3, 4]]))
