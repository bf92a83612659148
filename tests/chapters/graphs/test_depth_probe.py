"""Tests for attention_course.chapters.graphs.depth_probe: a linear probe that reads tokens back from deep stacks."""

from __future__ import annotations

import numpy as np
import pytest

from attention_course.core._backend import ShapeError
from attention_course.chapters.graphs import collapse as depth, depth_probe as dp, figures as dp_figures


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


# ---------------------------------------------------------------- the decoder's arm (SmolLM2)

_VOCAB = {" the": 1, " cat": 2, " ran": 3, ".": 4, " dog": 5}
_SPLIT = {" elephant": [6, 7, 8], " bus": [9, 10]}  # words the fake tokenizer splits


def _encode(text):
    out = []
    for w in text.replace(".", " .").split(" ")[1:]:
        out += [4] if w == "." else _SPLIT.get(" " + w, [_VOCAB.get(" " + w, 0)])
    return out


def test_word_end_ids_marks_each_words_last_token_and_pads_on_the_right():
    sentences = ["the elephant ran.", "the dog ran.", "the bus ran."]
    ids, ends = dp.word_end_ids(_encode, sentences, start=[0], pad=99)
    for r, s in enumerate(sentences):  # reference: token counts per word, added up by hand
        lengths = [len(_encode(" " + w)) for w in s.rstrip(".").split(" ")]
        np.testing.assert_array_equal(ends[r], 1 + np.cumsum(lengths) - 1)  # after the one start token
        row = [0, *_encode(" " + s)]
        assert ids[r, :len(row)].tolist() == row and (ids[r, len(row):] == 99).all()
    assert ids[0, ends[0, 1]] == 8  # "elephant" is stood for by its last token, not its first (6)
    with pytest.raises(ValueError, match=r"expected one count"):
        dp.word_end_ids(_encode, ["the cat ran.", "the cat."], start=[0])
    with pytest.raises(ValueError, match=r"expected the tokenizer to split at spaces"):
        dp.word_end_ids(lambda t: [len(t)], ["the cat ran."], start=[0])


def _gather_loop(hidden, ids, ends, offset):
    """Reference: the word states and the labels of the word `offset` before, built one word at a time."""
    X, y = [], []
    for n in range(len(ids)):
        for w in range(ends.shape[1]):
            if 0 <= w + offset < ends.shape[1]:
                X.append(hidden[n, ends[n, w]])
                y.append(ids[n, ends[n, w + offset]])
    return np.array(X), np.array(y)


def test_causal_word_probes_equal_a_loop_over_words_and_read_designed_states():
    rng = np.random.default_rng(3)
    N, W, V = 60, 5, 7
    lengths = rng.integers(1, 3, size=(N, W))  # each word one or two tokens
    ends = np.cumsum(lengths, axis=1)  # (N, W): position 0 is the start token
    T = ends.max() + 1
    ids = rng.integers(V, size=(N, T))
    hidden = rng.normal(size=(N, T, V))  # noise everywhere...
    for n in range(N):  # ...but each word's last token holds the previous word's last token, one-hot
        for w in range(1, W):
            hidden[n, ends[n, w]] = np.eye(V)[ids[n, ends[n, w - 1]]]
    probes = dp.word_probes([hidden], ids, ends, n_train=45, offsets=(-2, -1), ridges=(1e-3,), causal=True)
    hits, ridge, n_read = probes["hits"], probes["ridge"], probes["n_read"]
    assert hits.shape == (2, 1, 15) and n_read == [W - 2, W - 1] and (ridge == 1e-3).all()
    for k, o in enumerate((-2, -1)):
        X, y = _gather_loop(hidden, ids, ends, o)
        acc = hits[k, 0].sum() / (15 * n_read[k])
        assert acc == pytest.approx(dp.probe_accuracy(X, y, 45 * (W - abs(o))), abs=1e-12)
    assert (hits[1, 0] == W - 1).all() and hits[0, 0].sum() < 0.5 * 15 * (W - 2)  # chance about 1/7
    first = ends - (lengths - 1)  # the words' first tokens: the wrong state to read for a split word
    assert dp.word_probes([hidden], ids, first, n_train=45, offsets=(-1,))["hits"].sum() < 0.9 * 15 * (W - 1)
    with pytest.raises(ValueError, match=r"expected negative offsets"):
        dp.word_probes([hidden], ids, ends, n_train=45, offsets=(-1, 1), causal=True)
    with pytest.raises(ShapeError, match=r"ends \(60, 5\)"):
        dp.word_probes([hidden], ids[:, :2], ends, n_train=45)


@pytest.mark.parametrize("spread, best", [(False, 1e-6), (True, 1.0)])
def test_cross_validation_picks_the_ridge_that_reads_held_out_labels_better(spread, best):
    """A label planted in three exact features is read best with almost no ridge (a large one shrinks
    it away); the same label spread weakly over 70 noisy features needs a large one (a small one fits
    the noise of 80 rows). Cross-validation over the fitting rows picks the right one in both cases,
    and its hits are the reference probe's (probe_accuracy) at that ridge."""
    rng = np.random.default_rng(0)
    N, P, V, d = 40, 4, 3, 70
    y = rng.integers(V, size=(N, P))
    if spread:
        X = np.eye(V)[y] @ rng.normal(size=(V, d)) * 0.5 + rng.normal(size=(N, P, d))  # (N, P, d)
    else:
        X = np.concatenate([np.eye(V)[y] * 0.5, rng.normal(size=(N, P, d - V))], axis=2)  # (N, P, d)
    hits, ridge, _ = dp.cross_validated_scores(X, y, n_train=20, ridges=(1e-6, 1.0))
    flat_X, flat_y = X.reshape(N * P, -1), y.reshape(-1)
    acc = {r: dp.probe_accuracy(flat_X, flat_y, 20 * P, ridge=r) for r in (1e-6, 1.0)}
    assert ridge == best and acc[best] > max(acc.values()) - 1e-12 and min(acc.values()) < acc[best] - 0.2
    assert hits.sum() / (20 * P) == pytest.approx(acc[best], abs=1e-12)
    with pytest.raises(ShapeError, match=r"folds=5"):
        dp.cross_validated_scores(X[:, :, :3], y, n_train=4)


def test_halves_difference_against_a_loop_and_its_interval_covers_the_truth():
    rng = np.random.default_rng(1)
    hits = rng.integers(0, 9, size=(7, 50))  # (layers, sequences), 8 words read each
    d, low, high = dp.halves_difference(hits, 8, first=[1, 2, 3], second=[4, 5, 6])
    acc = hits.sum(axis=1) / (50 * 8)  # (7,)
    assert d == pytest.approx(acc[4:].mean() - acc[1:4].mean(), abs=1e-12) and low < d < high
    # two populations that differ by a known 0.25 on average: the interval covers it, and not 0
    fair = np.vstack([np.zeros(200), rng.binomial(8, 0.7, 200), rng.binomial(8, 0.45, 200)])
    d, low, high = dp.halves_difference(fair, 8, first=[1], second=[2])
    assert low < -0.25 < high and high < 0
    with pytest.raises(ShapeError, match=r"layers \[1\] and \[9\]"):
        dp.halves_difference(fair, 8, first=[1], second=[9])


def test_last_minus_best_against_a_loop_and_the_best_layer_of_each_resample():
    rng = np.random.default_rng(2)
    hits = rng.integers(0, 9, size=(6, 40))  # (layers, sequences), 8 words read each
    d, low, high = dp.last_minus_best(hits, 8, n_boot=300)
    acc = [hits[layer].sum() / (40 * 8) for layer in range(6)]
    assert d == pytest.approx(acc[-1] - max(acc[1:]), abs=1e-12) and low <= d <= high
    # a peak at layer 2 and a fall to the last layer: the interval lies below 0, and layer 0 is no peak
    fall = np.vstack([np.full(100, 8), rng.binomial(8, 0.6, 100), rng.binomial(8, 0.9, 100), rng.binomial(8, 0.5, 100)])
    d, low, high = dp.last_minus_best(fall, 8)
    assert high < 0 and low < -0.4 < high
    with pytest.raises(ShapeError, match=r"n_read=0"):
        dp.last_minus_best(fall, 0)


def test_halves_label_table():
    cases = [  # (D interval, last, scrambled last, margin, expected)
        ((0.01, -0.02, 0.04), 0.7, 0.1, 0.05, "kept"),
        ((-0.03, -0.049, -0.01), 0.7, 0.1, 0.05, "kept"),
        ((-0.2, -0.25, -0.15), 0.7, 0.1, 0.05, "fades"),
        ((-0.06, -0.08, -0.04), 0.7, 0.1, 0.05, "undecided"),  # the interval crosses -m
        ((-0.06, -0.08, -0.04), 0.7, 0.1, 0.10, "kept"),  # a wider margin
        ((-0.06, -0.08, -0.04), 0.7, 0.1, 0.02, "fades"),  # a narrower one
        ((0.01, -0.02, 0.04), 0.13, 0.1, 0.05, "lost"),  # at the scrambled model's level
    ]
    for interval, last, scrambled, margin, expected in cases:
        assert dp.halves_label(interval, last, scrambled, margin) == expected, (interval, margin)


def _scaled_qk(w, a):
    """A copy of decoder weights with W_q x a and W_k / a: every map, so every state, is the same."""
    from dataclasses import replace
    return replace(w, layers=[replace(l, W_q=l.W_q * a, W_k=l.W_k / a) for l in w.layers])


def test_decoder_states_ignore_right_padding_and_q_times_a_with_k_over_a():
    from dataclasses import replace
    import torch
    from attention_course.chapters.decoder.random_weights import random_decoder
    from attention_course.chapters.graphs.depth_study import _layer_states
    from attention_course.models.decoder import decoder_pass

    def states(weights, ids):  # (L + 1, N, T, d), five sentences at a time
        return np.stack(_layer_states(lambda x: decoder_pass(weights, x, keep=("hidden_states",)).hidden_states, ids, 5))

    w = random_decoder(0)  # float64, 2 layers
    ids = torch.tensor(np.random.default_rng(0).integers(1, 20, size=(12, 6)))
    plain = states(w, ids)  # (3, 12, 6, 16)
    padded = states(w, torch.cat([ids, torch.zeros(12, 3, dtype=ids.dtype)], dim=1))
    np.testing.assert_allclose(padded[:, :, :6], plain, atol=1e-6)  # causal: padding after changes nothing before
    scaled = states(_scaled_qk(w, 3.0), ids)
    np.testing.assert_allclose(scaled, plain, rtol=1e-6, atol=1e-6)  # float32 states (the study stores float32)
    q_only = replace(w, layers=[replace(l, W_q=l.W_q * 3.0) for l in w.layers])  # not the same maps: moves
    assert np.abs(states(q_only, ids)[1:] - plain[1:]).max() > 1e-3


def test_plot_relative_depth_probe_draws_each_model_on_one_axis():
    fig = dp_figures.plot_relative_depth_probe({"MiniLM": np.ones((2, 7)), "SmolLM2": np.zeros((2, 31)),
                                                "SmolLM2 scrambled": np.zeros((2, 31))}, [-2, -1])
    lines = fig.axes[1].get_lines()
    assert [len(l.get_xdata()) for l in lines] == [7, 31, 31] and lines[1].get_xdata()[-1] == 1.0
    assert lines[2].get_linestyle() == "--" and lines[2].get_color() == lines[1].get_color()
    with pytest.raises(ShapeError, match=r"expected \(2, L \+ 1\)"):
        dp_figures.plot_relative_depth_probe({"A": np.ones(7)}, [-2, -1])
