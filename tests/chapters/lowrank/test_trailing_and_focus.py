"""The measures behind trailing-noise and few-relevant-positions (issue 26).

Energy removal is checked against numpy.linalg.svd (the trailing removal is the Eckart-Young
truncation, every removal takes away exactly the trailing energy), focus against a loop. Both are
functions of A alone: rescaling queries and keys, shifting every key, or permuting heads (in the
pooled share) does not move them.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from attention_course.chapters.lowrank import focus as fo
from attention_course.chapters.lowrank import trailing as tr
from attention_course.chapters.lowrank.essay_sentences import SENTENCES_PATH
from attention_course.core.attention import scaled_dot_product_attention


def _maps(seed=0, h=3, T=12, d=4, scale=2.0):
    g = torch.Generator().manual_seed(seed)
    q, k = (scale * torch.randn(1, h, T, d, generator=g, dtype=torch.float64) for _ in range(2))
    return q, k, scaled_dot_product_attention(q, k, torch.zeros_like(q))[1]  # (1, h, T, T)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("keep", [0.5, 0.9, 0.99])
def test_trailing_removal_is_the_svd_truncation(seed, keep):
    _, _, A = _maps(seed)
    for a, b in zip(A[0].numpy(), tr.energy_removal(A, "trailing", keep)[0].numpy()):
        U, s, Vh = np.linalg.svd(a)
        k = int(np.searchsorted(np.cumsum(s ** 2) / np.sum(s ** 2), keep * (1 - 1e-12)) + 1)
        np.testing.assert_allclose(b, (U[:, :k] * s[:k]) @ Vh[:k], atol=1e-12)


@pytest.mark.parametrize("order", ["random", "leading"])
@pytest.mark.parametrize("seed", range(3))
def test_every_order_removes_the_same_energy(order, seed):
    _, _, A = _maps(seed)
    tail = (A - tr.energy_removal(A, "trailing")).square().sum((-2, -1))
    other = (A - tr.energy_removal(A, order, seed=seed)).square().sum((-2, -1))
    torch.testing.assert_close(other, tail, rtol=1e-10, atol=1e-14)
    # and it removes it elsewhere: the leading mode loses weight, or modes are picked at random
    assert not torch.allclose(tr.energy_removal(A, order, seed=seed), tr.energy_removal(A, "trailing"))


def test_removal_is_a_function_of_attention_alone():
    q, k, A = _maps(1)
    for q2, k2 in ((3 * q, k / 3), (q, k + torch.randn(4, dtype=torch.float64))):
        A2 = scaled_dot_product_attention(q2, k2, torch.zeros_like(q2))[1]
        for order in tr.ORDERS_REMOVED:
            torch.testing.assert_close(tr.energy_removal(A2, order, seed=2), tr.energy_removal(A, order, seed=2))


def test_energy_rank_and_bad_input():
    assert tr.energy_rank(torch.tensor([2.0, 1.0, 1.0]), keep=4 / 6).item() == 1
    with pytest.raises(ValueError, match="keep=0"):
        tr.energy_rank(torch.ones(3), keep=0)
    with pytest.raises(ValueError, match="order='middle'"):
        tr.energy_removal(torch.eye(3), "middle")
    with pytest.raises(ValueError, match=r"w has shape \(3,\)"):
        tr.energy_removal(torch.ones(3))


def test_causal_removal_keeps_the_upper_triangle_empty():
    _, _, A = _maps(0)
    out = tr.energy_removal(torch.tril(A), "random", causal=True)
    assert float(torch.triu(out, 1).abs().max()) == 0.0


@pytest.mark.parametrize("seed", range(3))
def test_top_key_mass_matches_a_loop(seed):
    _, _, A = _maps(seed)
    a = A[0].numpy()
    got = fo.top_key_mass(a, k=3, exclude=[0, 11])
    for h in range(a.shape[0]):
        for i in range(a.shape[1]):
            words = [a[h, i, j] for j in range(1, 11)]
            assert got[h, i] == pytest.approx(sum(sorted(words)[-3:]), abs=1e-14)
    np.testing.assert_allclose(fo.row_perplexity(a), np.exp(-(a * np.log(a)).sum(-1)), rtol=1e-12)


def test_focus_is_a_function_of_attention_alone():
    q, k, A = _maps(2)
    A2 = scaled_dot_product_attention(0.5 * q, 2 * k + 1.0, torch.zeros_like(q))[1]
    np.testing.assert_allclose(fo.top_key_mass(A2, 3, [0]), fo.top_key_mass(A, 3, [0]), atol=1e-12)
    share = lambda X: float((fo.top_key_mass(X, 3, [0]) >= 0.5).mean())  # pooled over heads
    assert share(A[:, [2, 0, 1]]) == share(A)


def test_focus_bad_input():
    with pytest.raises(ValueError, match="k=0"):
        fo.top_key_mass(np.eye(3), k=0)
    with pytest.raises(ValueError, match=r"A has shape \(3,\)"):
        fo.top_key_mass(np.ones(3))


def test_stored_run_has_the_preregistered_design():
    run = json.loads(SENTENCES_PATH.read_text())
    t = run["trailing"]["config"]
    assert (t["seeds"], t["orders"], t["draws"], t["n"], t["keeps"], t["steps"]) == (
        [0, 1, 2, 3, 4], [0, 1, 2, 3, 4], [0, 1, 2, 3, 4], 128, [0.9, 0.95, 0.99], 600)
    assert [(r["order"], r["keep"]) for r in run["trailing"]["minilm"][:3]] == [(0, 0.9), (0, 0.95), (0, 0.99)]
    f = run["focus"]["config"]
    assert (f["k"], f["threshold"], f["n_sentences"]) == (3, 0.5, 20)
    # the stored shares follow from the stored counts
    foc, pairs = np.array(run["focus"]["focused"]), np.array(run["focus"]["pairs"])
    assert run["focus"]["by_k"]["3"]["words"] == pytest.approx(foc.sum() / pairs.sum(), abs=1e-12)


@pytest.mark.extended
@pytest.mark.numerics
def test_stored_focus_and_one_order_recompute():
    """Recompute the focus study and MiniLM's first order of the trailing study (float32 model)."""
    from attention_course.chapters.lowrank.baselines import SENTENCES
    run = json.loads(SENTENCES_PATH.read_text())
    live = fo.focus_study(SENTENCES)
    assert np.abs(np.subtract(live["focused"], run["focus"]["focused"])).max() <= 0.001 * max(run["focus"]["pairs"])
    t = tr.trailing_study(seeds=[], orders=[0], draws=[0])
    stored = run["trailing"]["minilm"][0]
    for key in ("uniform", "trailing", "leading"):
        assert t["minilm"][0][key] == pytest.approx(stored[key], abs=1e-3)
    assert t["minilm"][0]["random"][0] == pytest.approx(stored["random"][0], abs=1e-3)
