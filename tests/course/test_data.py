"""Tests for the synthetic tasks in attention_course.models.tasks.

Every property is checked against the tokens themselves (e.g. the period is
recovered from the sequence, not read from the generator), so a generator that
lies about its own structure fails.
"""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.models.tasks import (
    TASKS,
    Batch,
    associative_recall,
    copy_sequences,
    make_task,
    repeated_sequences,
    toy_sentence,
)


def smallest_period(seq: torch.Tensor) -> int:
    """Smallest p >= 1 with seq[t] == seq[t - p] for all t >= p (brute force)."""
    n = len(seq)
    for p in range(1, n):
        if torch.equal(seq[p:], seq[:-p]):
            return p
    return n


def full_sequence(batch: Batch) -> torch.Tensor:
    """The T + 1 tokens behind a batch: the inputs plus the last target."""
    return torch.cat([batch.inputs, batch.targets[:, -1:]], dim=1)


# ------------------------------------------------------- repeated sequences
def test_repeated_shapes_and_dtypes():
    b = repeated_sequences(8, seq_len=28, seed=0)
    assert b.inputs.shape == b.targets.shape == b.mask.shape == (8, 28)
    assert b.inputs.dtype == b.targets.dtype == torch.int64
    assert b.mask.dtype == torch.bool
    assert int(b.inputs.min()) >= 0 and int(b.inputs.max()) < 64


def test_targets_are_next_tokens():
    b = repeated_sequences(16, seed=3)
    assert torch.equal(b.targets[:, :-1], b.inputs[:, 1:])


def test_period_in_range_and_mask_marks_repeated_part():
    b = repeated_sequences(400, seq_len=28, min_period=6, max_period=14, seed=1)
    seqs = full_sequence(b)  # (B, 29)
    periods = torch.tensor([smallest_period(s) for s in seqs])
    assert int(periods.min()) >= 6 and int(periods.max()) <= 14
    # every period in 6..14 occurs (uniform draw, 400 sequences)
    assert sorted(periods.unique().tolist()) == list(range(6, 15))
    # the loss mask is exactly "t >= p": the current token has occurred before
    expected = torch.arange(28)[None, :] >= periods[:, None]
    assert torch.equal(b.mask, expected)
    # ... so the documented shortcut recovers the period
    assert torch.equal((~b.mask).sum(dim=1), periods)


def test_repeated_part_really_repeats_and_block_is_distinct():
    b = repeated_sequences(64, seed=2)
    seqs = full_sequence(b)
    for s, m in zip(seqs, b.mask):
        p = int((~m).sum())
        assert torch.equal(s[p:], s[:-p])  # s_t = s_{t-p}
        assert len(set(s[:p].tolist())) == p  # one occurrence per token in a block
        # at each counted position the target is the token after the previous occurrence
        for t in range(p, len(s) - 1):
            prev = max(j for j in range(t) if s[j] == s[t])
            assert int(s[prev + 1]) == int(s[t + 1])


@settings(max_examples=30, deadline=None)
@given(
    lo=st.integers(1, 8),
    span=st.integers(0, 6),
    extra=st.integers(1, 10),
    seed=st.integers(0, 10_000),
)
def test_repeated_property(lo, span, extra, seed):
    hi = lo + span
    b = repeated_sequences(5, seq_len=hi + extra, min_period=lo, max_period=hi, seed=seed)
    for s, m in zip(full_sequence(b), b.mask):
        p = int((~m).sum())
        assert lo <= p <= hi
        assert smallest_period(s) == p


def test_seed_and_generator_reproducible():
    a, b = repeated_sequences(4, seed=7), repeated_sequences(4, seed=7)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    c = repeated_sequences(4, seed=8)
    assert not torch.equal(a.inputs, c.inputs)
    g = torch.Generator().manual_seed(7)
    first, second = repeated_sequences(4, generator=g), repeated_sequences(4, generator=g)
    assert all(torch.equal(x, y) for x, y in zip(first, a))  # generator seeded 7 == seed=7
    assert not torch.equal(first.inputs, second.inputs)  # the generator advanced


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(seq_len=14, max_period=14), r"max_period < seq_len"),
        (dict(min_period=9, max_period=8), r"min_period <= max_period"),
        (dict(vocab_size=10, max_period=14, seq_len=28), r"cannot draw 14 distinct tokens"),
        (dict(seq_len=0), r"seq_len=0; expected a positive integer"),
    ],
)
def test_repeated_bad_settings(kw, match):
    with pytest.raises(ValueError, match=match):
        repeated_sequences(4, **kw)


# ------------------------------------------------------- associative recall
def test_recall_target_is_value_of_query():
    b = associative_recall(50, n_pairs=6, vocab_size=64, seed=4)
    assert b.inputs.shape == (50, 13)
    assert torch.equal(b.mask, torch.arange(13).expand(50, -1) == 12)
    for x, y in zip(b.inputs.tolist(), b.targets.tolist()):
        keys, values, query = x[0:12:2], x[1:12:2], x[12]
        assert len(set(keys)) == 6 and all(k < 32 for k in keys)
        assert all(32 <= v < 64 for v in values)
        assert query in keys
        assert y[12] == dict(zip(keys, values))[query]
        assert y[:12] == x[1:13]


def test_recall_query_position_varies():
    b = associative_recall(200, n_pairs=8, seed=0)
    pos = [x[0:16:2].index(x[16]) for x in b.inputs.tolist()]
    assert set(pos) == set(range(8))


# --------------------------------------------------------------- copy tasks
@pytest.mark.parametrize("reverse", [False, True])
def test_copy_and_reverse_targets(reverse):
    b = copy_sequences(10, length=7, reverse=reverse, seed=5)
    assert b.inputs.shape == (10, 14)
    assert torch.equal(b.inputs[:, 7], torch.zeros(10, dtype=torch.long))  # separator
    assert int(b.inputs[:, :7].min()) >= 1  # tokens never equal the separator
    a = b.inputs[:, :7]
    want = a.flip(1) if reverse else a
    assert torch.equal(b.targets[:, 7:], want)  # SEP predicts the first copied token
    assert torch.equal(b.mask[0], torch.arange(14) >= 7)


# ------------------------------------------------------------ registry
def test_make_task_known_names():
    assert set(TASKS) == {"repeated_sequences", "associative_recall", "copy", "reverse"}
    for name in TASKS:
        task = make_task(name)
        batch = task(3, seed=0)
        assert isinstance(batch, Batch)
        assert batch.inputs.shape == (3, task.seq_len)
        assert task.vocab_size == 64


def test_make_task_passes_settings_and_seeds():
    task = make_task("repeated_sequences", seq_len=20, max_period=9)
    assert task.seq_len == 20
    direct = repeated_sequences(6, seq_len=20, max_period=9, seed=11)
    assert torch.equal(task(6, seed=11).inputs, direct.inputs)
    rev = make_task("reverse", length=4)(2)
    assert torch.equal(rev.targets[:, 4:], rev.inputs[:, :4].flip(1))


def test_unknown_task_name():
    with pytest.raises(
        ValueError,
        match=r"unknown task 'induction'; known tasks: associative_recall, copy, "
        r"repeated_sequences, reverse",
    ):
        make_task("induction")


def test_unknown_task_setting():
    with pytest.raises(ValueError, match=r"task 'copy' takes no setting\(s\) \['n_pairs'\]"):
        make_task("copy", n_pairs=3)


def test_toy_sentence_unchanged():
    ex = toy_sentence()
    assert ex.X.shape == (6, 8)
    np.testing.assert_array_equal(ex.X[0], ex.X[4])
