"""A blind battery of answers to the exercise `window-mask` (chapter 7): my_window_mask(T, w).

Spec (from the statement): a boolean (T, T) array, numpy or torch, True where query t (row) may read
key s (column), i.e. when 0 <= t - s < w; w=None: the causal mask (s <= t); w >= T: the causal mask too.
"""
import numpy as np
import torch


# ----------------------------------------------------------------------------------------- correct


def correct_1(T, w):
    """numpy broadcasting on the offset t - s."""
    t = np.arange(T)[:, None]
    s = np.arange(T)[None, :]
    gap = t - s
    if w is None:
        return gap >= 0
    return (gap >= 0) & (gap < w)


def correct_2(T, w):
    """Two plain nested loops filling a numpy bool array."""
    mask = np.zeros((T, T), dtype=bool)
    for t in range(T):
        for s in range(T):
            if s <= t and (w is None or t - s < w):
                mask[t, s] = True
    return mask


def correct_3(T, w):
    """np.tril / np.triu band: lower triangle intersected with the upper triangle from diagonal -(w-1)."""
    ones = np.ones((T, T), dtype=bool)
    causal = np.tril(ones)
    if w is None or w >= T:
        return causal
    return causal & np.triu(ones, k=-(w - 1))


def correct_4(T, w):
    """torch: causal tril minus a strictly-lower tril beyond the window, as a torch.bool tensor."""
    ones = torch.ones(T, T, dtype=torch.bool)
    causal = ones.tril()
    if w is None:
        return causal
    too_far = ones.tril(-w)  # t - s >= w
    return causal & ~too_far


def correct_5(T, w):
    """List comprehension over rows, with None meaning an unlimited window, turned into np.array(bool)."""
    reach = T if w is None else w
    return np.array([[0 <= t - s < reach for s in range(T)] for t in range(T)], dtype=bool).reshape(T, T)


# ------------------------------------------------------------------------------------------- wrong


def wrong_1(T, w):
    """Off-by-one: window of w+1 positions (0 <= t - s <= w)."""
    gap = np.arange(T)[:, None] - np.arange(T)[None, :]
    if w is None:
        return gap >= 0
    return (gap >= 0) & (gap <= w)


def wrong_2(T, w):
    """Off-by-one short: window of w-1 positions (t - s < w - 1), so w=1 reads nothing."""
    gap = np.arange(T)[:, None] - np.arange(T)[None, :]
    if w is None:
        return gap >= 0
    return (gap >= 0) & (gap < w - 1)


def wrong_3(T, w):
    """Forgets the query itself: 0 < t - s < w (diagonal False)."""
    gap = np.arange(T)[:, None] - np.arange(T)[None, :]
    if w is None:
        return gap > 0
    return (gap > 0) & (gap < w)


def wrong_4(T, w):
    """Reads forward: 0 <= s - t < w (rows/columns swapped, the transpose)."""
    gap = np.arange(T)[None, :] - np.arange(T)[:, None]  # s - t
    if w is None:
        return gap >= 0
    return (gap >= 0) & (gap < w)


def wrong_5(T, w):
    """Both directions: |t - s| < w (a symmetric band, not causal)."""
    gap = np.arange(T)[:, None] - np.arange(T)[None, :]
    if w is None:
        return gap >= 0
    return np.abs(gap) < w


def wrong_6(T, w):
    """Drops the lower bound: t - s < w only, so every future position is readable."""
    gap = np.arange(T)[:, None] - np.arange(T)[None, :]
    if w is None:
        return gap >= 0
    return gap < w


def wrong_7(T, w):
    """w=None handled wrongly: 'no window' taken as no mask at all (all True, not causal)."""
    if w is None:
        return np.ones((T, T), dtype=bool)
    gap = np.arange(T)[:, None] - np.arange(T)[None, :]
    return (gap >= 0) & (gap < w)


def wrong_8(T, w):
    """w=None not handled: comparing with None raises TypeError."""
    gap = np.arange(T)[:, None] - np.arange(T)[None, :]
    return (gap >= 0) & (gap < w)


def wrong_9(T, w):
    """w=None taken as w=0: returns an all-False mask."""
    if w is None:
        w = 0
    gap = np.arange(T)[:, None] - np.arange(T)[None, :]
    return (gap >= 0) & (gap < w)


def wrong_10(T, w):
    """w >= T handled wrongly: a window as long as T is treated as full (all True) attention."""
    if w is None or w >= T:
        return np.ones((T, T), dtype=bool)
    gap = np.arange(T)[:, None] - np.arange(T)[None, :]
    return (gap >= 0) & (gap < w)


def wrong_11(T, w):
    """w >= T handled wrongly: clamps w to T - 1, losing the farthest diagonal (and everything at T=1)."""
    if w is None:
        w = T
    w = min(w, T - 1)
    gap = np.arange(T)[:, None] - np.arange(T)[None, :]
    return (gap >= 0) & (gap < w)


def wrong_12(T, w):
    """Raises for w > T: an assert that the window fits the sequence."""
    if w is None:
        w = T
    assert 1 <= w <= T, "window longer than the sequence"
    return np.tril(np.ones((T, T), dtype=bool)) & np.triu(np.ones((T, T), dtype=bool), k=-(w - 1))


def wrong_13(T, w):
    """Wrong dtype: numbers 0/1 (int) instead of booleans."""
    gap = np.arange(T)[:, None] - np.arange(T)[None, :]
    ok = gap >= 0 if w is None else (gap >= 0) & (gap < w)
    return ok.astype(int)


def wrong_14(T, w):
    """Wrong dtype: a torch float 0./1. tensor (torch.ones(T, T).tril() without .bool())."""
    m = torch.ones(T, T).tril()
    if w is not None:
        m = m - torch.ones(T, T).tril(-w)
    return m


def wrong_15(T, w):
    """Additive mask: 0 where allowed and -inf where blocked, instead of booleans."""
    gap = np.arange(T)[:, None] - np.arange(T)[None, :]
    ok = gap >= 0 if w is None else (gap >= 0) & (gap < w)
    return np.where(ok, 0.0, -np.inf)


def wrong_16(T, w):
    """Inverted meaning: True where the key is blocked (the masked_fill convention)."""
    gap = np.arange(T)[:, None] - np.arange(T)[None, :]
    ok = gap >= 0 if w is None else (gap >= 0) & (gap < w)
    return ~ok


def wrong_17(T, w):
    """Wrong shape: adds a batch dimension, (1, T, T)."""
    gap = np.arange(T)[:, None] - np.arange(T)[None, :]
    ok = gap >= 0 if w is None else (gap >= 0) & (gap < w)
    return ok[None]


def wrong_18(T, w):
    """T=1 edge: a final .squeeze() collapses the (1, 1) mask to shape ()."""
    rows = [np.array([0 <= t - s < (T if w is None else w) for s in range(T)]) for t in range(T)]
    return np.stack(rows)[None].squeeze()


def wrong_19(T, w):
    """Returns a Python list of lists of bools, not an array."""
    reach = T if w is None else w
    return [[0 <= t - s < reach for s in range(T)] for t in range(T)]


def wrong_20(T, w):
    """Ignores w: always returns the causal mask."""
    return np.tril(np.ones((T, T), dtype=bool))


_CAUSAL_CACHE = {}


def wrong_21(T, w):
    """Mutates a cached causal mask in place, so later calls with the same T get narrower windows."""
    if T not in _CAUSAL_CACHE:
        _CAUSAL_CACHE[T] = np.tril(np.ones((T, T), dtype=bool))
    mask = _CAUSAL_CACHE[T]  # no .copy()
    if w is not None:
        mask &= np.triu(np.ones((T, T), dtype=bool), k=-(w - 1))
    return mask


def wrong_22(T, w):
    """Negative index wraps: a loop writes mask[t, t - i], and t - i < 0 lands on the last columns."""
    mask = np.zeros((T, T), dtype=bool)
    reach = T if w is None else w
    for t in range(T):
        for i in range(reach):
            mask[t, t - i] = True  # no check that t - i >= 0 (and IndexError once t - i < -T)
    return mask


ANSWERS = [
    ("correct_1", correct_1, "correct", "numpy broadcasting"),
    ("correct_2", correct_2, "correct", "nested loops"),
    ("correct_3", correct_3, "correct", "np.tril & np.triu band"),
    ("correct_4", correct_4, "correct", "torch tril, bool tensor"),
    ("correct_5", correct_5, "correct", "list comprehension"),
    ("wrong_1", wrong_1, "wrong", "off-by-one: window w+1 (t-s <= w)"),
    ("wrong_2", wrong_2, "wrong", "off-by-one: window w-1"),
    ("wrong_3", wrong_3, "wrong", "forgets the query itself"),
    ("wrong_4", wrong_4, "wrong", "reads forward (transposed)"),
    ("wrong_5", wrong_5, "wrong", "both directions |t-s| < w"),
    ("wrong_6", wrong_6, "wrong", "no lower bound: future readable"),
    ("wrong_7", wrong_7, "wrong", "w=None gives all True, not causal"),
    ("wrong_8", wrong_8, "wrong", "w=None raises TypeError"),
    ("wrong_9", wrong_9, "wrong", "w=None taken as w=0 (all False)"),
    ("wrong_10", wrong_10, "wrong", "w >= T gives all True"),
    ("wrong_11", wrong_11, "wrong", "w clamped to T-1"),
    ("wrong_12", wrong_12, "wrong", "raises (assert) for w > T"),
    ("wrong_13", wrong_13, "wrong", "int 0/1 dtype"),
    ("wrong_14", wrong_14, "wrong", "torch float 0/1 dtype"),
    ("wrong_15", wrong_15, "wrong", "additive 0/-inf float mask"),
    ("wrong_16", wrong_16, "wrong", "inverted: True where blocked"),
    ("wrong_17", wrong_17, "wrong", "shape (1, T, T)"),
    ("wrong_18", wrong_18, "wrong", "squeeze: shape () at T=1"),
    ("wrong_19", wrong_19, "wrong", "returns a list"),
    ("wrong_20", wrong_20, "wrong", "ignores w (always causal)"),
    ("wrong_21", wrong_21, "wrong", "mutates a cached mask in place"),
    ("wrong_22", wrong_22, "wrong", "negative index wraps (t - i < 0)"),
]
