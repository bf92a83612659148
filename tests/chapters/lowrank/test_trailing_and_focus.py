"""The measures behind trailing-noise and few-relevant-positions (issues 26 and 43).

Energy removal is checked against numpy.linalg.svd (the trailing removal is the Eckart-Young
truncation, every removal takes away exactly the trailing energy), focus against a loop and against
uniform, causal-uniform and previous-token maps whose counts are known in closed form. Both are
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
from attention_course.core._backend import ShapeError
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
def test_row_perplexity_matches_the_formula(seed):
    _, _, A = _maps(seed)
    a = A[0].numpy()
    np.testing.assert_allclose(fo.row_perplexity(a), np.exp(-(a * np.log(a)).sum(-1)), rtol=1e-12)


def _content_loop(a, sinks, k, theta, causal):
    """(focused, kept) rows of one head, by the definition, one row at a time."""
    T = a.shape[0]
    focused = kept = 0
    for i in range(T):
        keys = [j for j in range(T) if j not in sinks and (j <= i or not causal)]
        mass = sum(a[i, j] for j in keys)
        if i in sinks or mass == 0 or len(keys) * theta <= k:
            continue
        kept += 1
        focused += sum(sorted(a[i, j] / mass for j in keys)[-k:]) >= theta
    return focused, kept


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_focus_counts_match_the_definition_row_by_row(seed, causal):
    _, _, A = _maps(seed, T=16, scale=1.5)
    a = A[0].numpy()
    if causal:
        a = np.tril(a) / np.tril(a).sum(-1, keepdims=True)
    sinks = [0] if causal else [0, 15]
    c = fo.focus_counts(a, sinks, ks=[1, 3, 5], thresholds=[0.3, 0.5, 0.7], causal=causal)
    for h in range(a.shape[0]):
        for ik, k in enumerate([1, 3, 5]):
            for it, t in enumerate([0.3, 0.5, 0.7]):
                assert (c.focused[h, ik, it], c.decided[h, ik, it]) == _content_loop(a[h], sinks, k, t, causal)
    np.testing.assert_allclose(c.sink / c.rows, a[:, :, sinks].sum(-1).mean(-1), rtol=1e-12)


def test_focus_is_read_on_the_content_part_not_the_raw_weight():
    # half of every row on [CLS]: the raw weight on 3 words is at most 0.5 * 0.9 < 0.5,
    # but what the head gives the words is 0.9 on one of them
    T = 12
    a = np.zeros((1, T, T))
    a[0, :, 0] = 0.5
    a[0, :, 1:T - 1] = 0.05 * 0.1 / (T - 3)
    a[0, np.arange(T), (np.arange(T) % (T - 2)) + 1] = 0.45
    a /= a.sum(-1, keepdims=True)
    c = fo.focus_counts(a, [0, T - 1], ks=[3], thresholds=[0.5], k=3, threshold=0.5)
    assert int(c.focused[0, 0, 0]) == int(c.decided[0, 0, 0]) == T - 2
    assert (np.sort(a[0, :, 1:T - 1], axis=-1)[:, -3:].sum(-1) < 0.5).all()  # the raw weight on 3 words


@pytest.mark.parametrize("T", [8, 13, 30])
def test_uniform_and_previous_token_in_closed_form(T):
    sinks = [0, T - 1]
    u = fo.focus_counts(fo._pattern("uniform", T), sinks)
    # encoder: every word row sees T - 2 content keys; kept when (T - 2) theta > k, never focused (k / (T - 2) < theta)
    expected = np.array([[(T - 2) * ((T - 2) * t > k) for t in fo.THRESHOLDS] for k in fo.KS])
    np.testing.assert_array_equal(u.decided[0], expected)
    assert u.focused.sum() == 0
    cu = fo.focus_counts(fo._pattern("causal uniform", T), [0], causal=True)
    # decoder: query i sees i content keys (1..i); kept when i theta > k
    expected = np.array([[sum(i * t > k for i in range(1, T)) for t in fo.THRESHOLDS] for k in fo.KS])
    np.testing.assert_array_equal(cu.decided[0], expected)
    assert cu.focused.sum() == 0
    p = fo.focus_counts(fo._pattern("previous token", T), [0], causal=True)
    np.testing.assert_array_equal(p.focused, p.decided)  # every kept row is one-hot on a word
    # query 1's previous token is the sink, but it sees one content key and is dropped anyway
    assert int(p.adjacent[0]) == int(p.decided[0, 2, 2]) == sum(i * 0.5 > 3 for i in range(1, T))


def test_focus_counts_do_not_move_when_attention_does_not():
    q, k, A = _maps(2, T=14)
    A2 = scaled_dot_product_attention(0.5 * q, 2 * k + torch.randn(4, dtype=torch.float64), torch.zeros_like(q))[1]
    c, c2 = (fo.focus_counts(X[0].numpy(), [0, 13], causal=False) for X in (A, A2))
    for name in ("focused", "decided", "adjacent"):
        np.testing.assert_array_equal(getattr(c2, name), getattr(c, name))
    np.testing.assert_allclose(c2.sink, c.sink, rtol=1e-12)
    perm = [2, 0, 1]
    c3 = fo.focus_counts(A[0].numpy()[perm], [0, 13])
    np.testing.assert_array_equal(c3.focused, c.focused[perm])
    # the bins are shares of heads, so a permutation of heads cannot move them
    f, d = c.focused[:, 2, 2], c.decided[:, 2, 2]
    s = c.sink / c.rows
    assert fo.focused_heads(f[perm], d[perm], s[perm]) == fo.focused_heads(f, d, s)


def test_focused_heads_bins_and_their_thresholds():
    f, d, s = [6, 5, 9, 0, 1], [10, 10, 10, 10, 10], [0.1, 0.2, 0.5, 0.7, 0.49]
    assert fo.focused_heads(f, d, s) == {"property": 0.2, "no property": 0.4, "sink": 0.4}
    # a majority means more than half: 5 of 10 is not focused; a lower line makes it focused
    assert fo.focused_heads(f, d, s, majority=0.4)["property"] == 0.4
    assert fo.focused_heads(f, d, s, sink_threshold=0.45)["sink"] == 0.6
    assert np.isnan(fo.focused_heads([1, 1], [0, 3], [0.1, 0.1])["sink"])  # a non-sink head with no kept row
    with pytest.raises(ValueError, match="k=4"):
        fo.focus_counts(np.ones((1, 3, 3)) / 3, [0], ks=[3], thresholds=[0.5], k=4)
    with pytest.raises(ShapeError, match=r"\(3, 3\)"):
        fo.focus_counts(np.ones((3, 3)) / 3, [0])


def test_stored_run_has_the_preregistered_design():
    run = json.loads(SENTENCES_PATH.read_text())
    t = run["trailing"]["config"]
    assert (t["seeds"], t["orders"], t["draws"], t["n"], t["keeps"], t["steps"]) == (
        [0, 1, 2, 3, 4], [0, 1, 2, 3, 4], [0, 1, 2, 3, 4], 128, [0.9, 0.95, 0.99], 600)
    assert [(r["order"], r["keep"]) for r in run["trailing"]["minilm"][:3]] == [(0, 0.9), (0, 0.95), (0, 0.99)]
    f = run["focus"]["config"]
    assert (f["k"], f["threshold"], f["n_sentences"], f["seeds"], f["scrambled"]) == (3, 0.5, 20, [0, 1, 2], ["W_q", "W_k"])
    assert (f["majority"], f["sink_threshold"], f["ks"], f["thresholds"]) == (0.5, 0.5, list(fo.KS), list(fo.THRESHOLDS))
    for model, heads in (("MiniLM", 72), ("SmolLM2", 270)):
        rec = run["focus"]["models"][model]
        assert rec["heads"] == heads and len(rec["tokens"]) == 20 and len(rec["scrambled"]) == 3
        for part in (rec["trained"], *rec["scrambled"]):
            assert np.shape(part["focused"]) == (heads, len(fo.KS), len(fo.THRESHOLDS)) == np.shape(part["decided"])
            assert (np.array(part["focused"]) <= np.array(part["decided"])).all()


@pytest.mark.extended
@pytest.mark.numerics
def test_stored_focus_and_one_order_recompute():
    """Recompute the focus study and MiniLM's first order of the trailing study (float32 model)."""
    from attention_course.chapters.lowrank.baselines import SENTENCES
    run = json.loads(SENTENCES_PATH.read_text())
    live = fo.focus_models_study(SENTENCES, models=["MiniLM"], config={"seeds": [0]}, progress=False)["models"]["MiniLM"]
    stored = run["focus"]["models"]["MiniLM"]
    for now, then in ((live["trained"], stored["trained"]), (live["scrambled"][0], stored["scrambled"][0])):
        # a float32 model: a row may cross the line on another machine; at most 0.1% of the kept rows
        assert np.abs(np.subtract(now["focused"], then["focused"])).max() <= 0.001 * np.max(then["decided"]) + 1
    t = tr.trailing_study(seeds=[], orders=[0], draws=[0])
    stored = run["trailing"]["minilm"][0]
    for key in ("uniform", "trailing", "leading"):
        assert t["minilm"][0][key] == pytest.approx(stored[key], abs=1e-3)
    assert t["minilm"][0]["random"][0] == pytest.approx(stored["random"][0], abs=1e-3)
