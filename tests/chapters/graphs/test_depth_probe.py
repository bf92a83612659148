"""Tests for attention_course.chapters.graphs.depth_probe: a linear probe that reads tokens back from deep stacks."""

from __future__ import annotations

import numpy as np
import pytest

from attention_course.core._backend import ShapeError
from attention_course.chapters.graphs import collapse as depth, depth_probe as dp


def _lstsq_probe(X, y, n_train, ridge=1e-3):
    # independent reference: ridge least squares by augmenting the system, solved with lstsq
    classes = np.unique(y[:n_train])
    A = np.hstack([X, np.ones((len(X), 1))])
    lam = ridge * np.trace(A[:n_train].T @ A[:n_train]) / A.shape[1]
    A_aug = np.vstack([A[:n_train], np.sqrt(lam) * np.eye(A.shape[1])])
    Y_aug = np.vstack([(y[:n_train, None] == classes).astype(float), np.zeros((A.shape[1], len(classes)))])
    W = np.linalg.lstsq(A_aug, Y_aug, rcond=None)[0]
    return float((classes[(A[n_train:] @ W).argmax(1)] == y[n_train:]).mean())


def test_probe_accuracy_matches_a_lstsq_reference_and_reads_columns_together():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 10))
    y1 = (X[:, 0] + 0.5 * rng.normal(size=300) > 0).astype(int) + 2 * (X[:, 1] > 0)  # 4 noisy classes
    y2 = rng.integers(3, size=300)  # no information
    for y in (y1, y2):
        assert dp.probe_accuracy(X, y, 200) == pytest.approx(_lstsq_probe(X, y, 200), abs=1e-12)
    both = dp.probe_accuracy(X, np.stack([y1, y2], axis=1), 200)
    np.testing.assert_allclose(both, [dp.probe_accuracy(X, y1, 200), dp.probe_accuracy(X, y2, 200)], atol=1e-15)
    assert dp.probe_accuracy(X, y1, 200) > 0.6 and dp.probe_accuracy(X, y2, 200) < 0.5  # chance 1/3
    with pytest.raises(ShapeError, match=r"n_train=300"):
        dp.probe_accuracy(X, y1, 300)


def test_batched_stack_equals_one_sequence_at_a_time():
    x = np.random.default_rng(1).normal(size=(3, 5, 8))
    params = depth.init_stack_params(8, 2, seed=0, mlp=True)
    for kw in ({}, {"skip": True, "mlp": True, "layernorm": True}):
        batched = depth.attention_stack(x, params, **kw)[-1]
        np.testing.assert_allclose(batched, [depth.attention_stack(s, params, **kw)[-1] for s in x], atol=1e-13)


def test_no_exchange_keeps_every_label_and_pure_attention_loses_them():
    acc = dp.stack_probe_curves({"pure": {}, "no exchange": {"skip": True}}, layers=[0, 3, 6], n_seq=60,
                                n_train=45, n_tokens=8, d_model=16, n_labels=6, seeds=[0, 1],
                                mask={"no exchange": np.eye(8, dtype=bool)})
    # mask = I with skips: x (I + W_v) per layer, linear and invertible, so a linear probe reads everything
    np.testing.assert_array_equal(acc["no exchange"], 1.0)
    assert (acc["pure"][:, 0] == 1.0).all()
    labels, _ = dp.labelled_sequences(60, 8, 16, 6, seed=0)
    commonest = np.mean([np.bincount(l).max() / len(l) for l in labels[45:]])  # the most a rank-1 state can give
    assert (acc["pure"][:, -1] < commonest + 0.1).all()


def test_encoder_probe_reads_own_and_previous_token_from_designed_states():
    rng = np.random.default_rng(2)
    ids = rng.integers(6, size=(80, 7))
    onehot = np.eye(6)[ids]  # (80, 7, 6)
    prev = np.concatenate([np.zeros((80, 1, 6)), onehot[:, :-1]], axis=1)  # the previous token's one-hot
    states = [onehot, np.concatenate([onehot, prev], axis=-1)]  # layer 0: own only; layer 1: own + previous
    acc = dp.encoder_probe(states, ids, n_train=60)  # (own, previous, next) x 2 layers
    np.testing.assert_array_equal(acc[0], 1.0)
    assert acc[1, 1] == 1.0 and acc[1, 0] < 0.4 and acc[2, 1] < 0.4  # chance 1/6
    assert len(dp.template_sentences(5, seed=1)) == 5
    assert dp.template_sentences(3, seed=1) == dp.template_sentences(3, seed=1)
