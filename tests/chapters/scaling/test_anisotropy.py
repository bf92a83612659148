"""anisotropy.py: the controls for a trained model's excess score variance, on data with a known answer."""

import numpy as np
import pytest

from attention_course.core._backend import ShapeError
from attention_course.chapters.scaling.anisotropy import PAIR_SETS, variance_ratio_controls, within_row_spread


def sentences(kind, seed=0, B=8, h=2, T=16, d_k=32):
    """Queries and keys with a planted cause: shared directions for every token, or alignment within a sentence."""
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(B, h, T, d_k)), rng.normal(size=(B, h, T, d_k))
    if kind == "anisotropic":  # tokens independent, but all queries and keys share a few directions
        R, _ = np.linalg.qr(rng.normal(size=(d_k, d_k)))  # a random rotation: the directions are not the axes
        scale = np.where(np.arange(d_k) < 3, 4.0, 1.0)  # three dominant directions
        A = (R * scale) @ R.T  # (d_k, d_k)
        q, k = q @ A, k @ A
    if kind == "aligned":  # each sentence's keys point along that sentence's own direction, and so do its queries
        topic = rng.normal(size=(B, 1, 1, d_k)) * 1.5
        q, k = q + topic, k + topic
    return q, k


def test_independent_entries_give_one_everywhere():
    q, k = sentences("independent")
    r = variance_ratio_controls(q, k)
    assert list(r) == list(PAIR_SETS)
    for name, x in r.items():
        np.testing.assert_allclose(x, 1.0, atol=0.12, err_msg=name)  # 2,000+ pairs: Monte-Carlo spread ~0.05


def test_alignment_within_a_sentence_shows_only_within_sentences():
    r = variance_ratio_controls(*sentences("aligned"))
    assert np.all(r["same sentence"] > 1.3 * r["different sentences"])


def test_shared_directions_show_across_sentences_and_vanish_when_shuffled():
    r = variance_ratio_controls(*sentences("anisotropic"))
    assert np.all(r["same sentence"] > 1.3)
    np.testing.assert_allclose(r["different sentences"] / r["same sentence"], 1.0, atol=0.1)
    # shuffled, the coordinates are independent: Var(q.k) = sum_c E[q_c^2] Var(k_c), from the marginals alone
    q, k = sentences("anisotropic")
    qp, kp = q.transpose(1, 0, 2, 3).reshape(2, -1, 32), k.transpose(1, 0, 2, 3).reshape(2, -1, 32)  # (h, N, d_k)
    kp = kp - kp.mean(1, keepdims=True)
    marginal = ((qp ** 2).mean(1) * kp.var(1)).sum(-1) / (32 * qp.reshape(2, -1).var(1) * kp.reshape(2, -1).var(1))
    np.testing.assert_allclose(r["shuffled coordinates"], marginal, rtol=0.1)  # 16,384 pairs: spread ~0.03
    assert np.all(r["shuffled coordinates"] < 0.4 * r["same sentence"])


def test_reparametrisations_that_leave_attention_unchanged_move_nothing():
    q, k = sentences("anisotropic", seed=3)
    base, spread = variance_ratio_controls(q, k), within_row_spread(q, k)
    shift = np.random.default_rng(9).normal(size=q.shape[-1]) * 5  # one vector added to every key
    moved = variance_ratio_controls(3.0 * q, k / 3.0 + shift)
    for name in PAIR_SETS:
        np.testing.assert_allclose(moved[name], base[name], rtol=1e-10)
    np.testing.assert_allclose(within_row_spread(3.0 * q, k / 3.0 + shift), spread, rtol=1e-10)
    flipped = variance_ratio_controls(q[:, ::-1], k[:, ::-1])  # heads permuted: results permuted
    for name in PAIR_SETS:
        np.testing.assert_allclose(flipped[name], base[name][::-1], rtol=1e-10)


def test_within_row_spread_is_a_loop_over_real_keys():
    rng = np.random.default_rng(4)
    q, k = rng.normal(size=(2, 1, 5, 8)), rng.normal(size=(2, 1, 5, 8))
    valid = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)
    got = within_row_spread(q, k, valid)  # (1, 8): 3 + 5 real queries
    want = [np.std([q[b, 0, i] @ k[b, 0, j] / np.sqrt(8) for j in range(5) if valid[b, j]])
            for b in range(2) for i in range(5) if valid[b, i]]
    np.testing.assert_allclose(got[0], want, rtol=1e-12)


def test_causal_within_row_spread_is_a_loop_over_the_keys_up_to_the_query():
    """A decoder's row i sees the real keys j <= i; row 0 (one key, no spread) is left out."""
    rng = np.random.default_rng(5)
    q, k = rng.normal(size=(2, 3, 6, 8)), rng.normal(size=(2, 3, 6, 8))
    valid = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], bool)
    got = within_row_spread(q, k, valid, causal=True)  # (3, 3 + 5): queries 1.. of each sequence
    want = [[np.std([q[b, h, i] @ k[b, h, j] / np.sqrt(8) for j in range(i + 1) if valid[b, j]])
             for b in range(2) for i in range(6) if valid[b, i] and i >= 1] for h in range(3)]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert not np.allclose(within_row_spread(q, k, valid)[:, 1:4], got[:, :3])  # the mask changes the rows


def test_bad_shapes():
    q = np.zeros((2, 1, 5, 8))
    with pytest.raises(ShapeError, match=r"expected equal shapes \(B, h, T, d_k\)"):
        variance_ratio_controls(q, q[..., :4])
    with pytest.raises(ShapeError, match=r"valid has shape \(5,\)"):
        within_row_spread(q, q, np.ones(5, bool))
