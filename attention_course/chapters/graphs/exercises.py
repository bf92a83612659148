"""Chapter 5 exercises: a message-passing step, a receptive field, attention rollout, a graph's overlap.

Each exercise lists typical mistakes (mutants) with their feedback, and the rules its statement
draws with the cases that probe them. The stubs' signatures:

* ``message-passing-step``: ``fn(q, k, v, mask) -> (T, d_v)``, ``mask`` bool (T, T), ``True`` = edge j -> i.
* ``banded-receptive-field``: ``fn(T, window, n_layers) -> R`` bool (T, T) under ``|i - j| <= window``.
* ``attention-rollout``: ``fn(weights (L, T, T)) -> Â_L ... Â_1``, ``Â = rownorm(0.5 A + 0.5 I)``.
* ``effective-graph-overlap``: ``fn(A, B, perm, mass) -> float``, the mean Jaccard overlap of each
  word's ``mass`` key set in ``A`` (n, n) and in its shuffle ``B``, ``perm[p]`` the word at ``p``.
"""

from __future__ import annotations

from functools import reduce

import numpy as np
import torch

from ...core import attention as att
from . import propagation as g
from .rollout import attention_rollout
from .topology import jaccard, shuffle_overlap
from ...exercises._core import Case, Exercise, in_place_rule, Mutant, output_rule, register, Rule, SCORE_TIPS

__all__ = ["EXERCISES"]


# ------------------------------------------------------------ message passing
def _mp_cases() -> list[Case]:
    rng = np.random.default_rng(51)

    def qkv(T, d_k=4, d_v=3):
        return rng.normal(size=(T, d_k)), rng.normal(size=(T, d_k)), rng.normal(size=(T, d_v))

    graph = (rng.random((7, 7)) < 0.4) | np.eye(7, dtype=bool)
    lonely = g.topology_mask("causal", 5)
    lonely[3] = False  # node 3 has no in-neighbours
    return [
        Case("banded mask, T=6, window 1", (*qkv(6), g.banded_mask(6, 1))),
        Case("causal mask, T=5", (*qkv(5), g.topology_mask("causal", 5))),
        Case("random directed graph with self loops, T=7", (*qkv(7, 8, 2), graph)),
        Case("node 3 has no in-neighbours", (*qkv(5), lonely)),
        Case("a single node", (*qkv(1), np.ones((1, 1), dtype=bool))),
    ]


def _mp_reference(q, k, v, mask):
    return g.message_passing(q, k, v, mask)[0]


def _mp_with(scale=True, transpose=False, ignore_mask=False):
    def f(q, k, v, mask):
        m = mask.T if transpose else mask
        s = q @ k.T / (np.sqrt(q.shape[-1]) if scale else 1.0)  # (T, T)
        return att.softmax(s, mask=None if ignore_mask else m) @ v

    return f


def _mp_mean(q, k, v, mask):
    deg = mask.sum(axis=1, keepdims=True)  # (T, 1) in-degrees
    return (mask / np.maximum(deg, 1)) @ v  # equal weights on the in-neighbours


def _mp_mask_after_softmax(q, k, v, mask):
    w = att.softmax(q @ k.T / np.sqrt(q.shape[-1]))  # normalised over every node
    return (w * mask) @ v  # masked afterwards: rows no longer sum to 1


def _mp_big_negative(q, k, v, mask):
    s = np.where(mask, q @ k.T / np.sqrt(q.shape[-1]), -1e9)  # (T, T); a lonely row is all -1e9
    return att.softmax(s) @ v  # ... so it spreads its weight evenly over every node


def _nan_output(got, expected, args):
    if np.isnan(np.asarray(got, dtype=float)).any():
        return ("your output has NaN: a node with no in-neighbours (an all-False row of mask) "
                "receives no messages, so its output is a row of zeros; avoid dividing 0 by 0")
    return None


def _empty_rows_wrong(got, expected, args):
    empty = ~args[3].any(axis=1)
    got = np.asarray(got, dtype=float)
    if empty.any() and np.allclose(got[~empty], expected[~empty]) and not np.allclose(got[empty], 0):
        return "a node with no in-neighbours receives nothing, so its output should be 0"
    return None


def _mp_loop(q, k, v, mask):
    out = np.zeros((q.shape[0], v.shape[1]))
    for i in range(q.shape[0]):
        nbrs = np.flatnonzero(mask[i])
        if nbrs.size:
            e = np.array([q[i] @ k[j] for j in nbrs]) / np.sqrt(q.shape[1])
            a = np.exp(e - e.max()) / np.exp(e - e.max()).sum()
            out[i] = sum(a_j * v[j] for a_j, j in zip(a, nbrs))
    return out


def _mp_torch(q, k, v, mask):
    s = torch.as_tensor(q) @ torch.as_tensor(k).T / q.shape[1] ** 0.5
    w = torch.softmax(s.masked_fill(~torch.as_tensor(mask), float("-inf")), dim=-1)
    return (torch.nan_to_num(w) @ torch.as_tensor(v)).numpy()


register(
    Exercise(
        id="message-passing-step",
        error_tips=SCORE_TIPS,
        title="One round of message passing",
        make_cases=_mp_cases,
        reference=_mp_reference,
        mutants=(
            Mutant("ignore-mask", _mp_with(ignore_mask=True),
                   "every node listens to every node: the sum (and the softmax) run only over node i's "
                   "in-neighbours, the j with mask[i, j] True."),
            Mutant("out-neighbours", _mp_with(transpose=True),
                   "you used node i's out-neighbours (column i of mask). Its in-neighbours, the senders of its "
                   "messages, are row i: the j with mask[i, j] True."),
            Mutant("no-scale", _mp_with(scale=False),
                   "close: the score of edge j -> i is q_i . k_j / sqrt(d_k); you left out the scale."),
            Mutant("mean-aggregation", _mp_mean,
                   "you averaged the neighbours' values with equal weights (a GCN-style mean). Attention weights "
                   "each message: alpha_ij = softmax over j in N(i) of q_i . k_j / sqrt(d_k)."),
            Mutant("mask-after-softmax", _mp_mask_after_softmax,
                   "you normalised over all nodes and then dropped the non-neighbours, so a node's weights no longer "
                   "sum to 1: apply the mask before the softmax."),
            Mutant("big-negative-fill", _mp_big_negative,
                   "a node with no in-neighbours receives nothing, so its output is a row of zeros; filling the "
                   "masked scores with -1e9 gives it equal weights on every node instead. Set its row to 0 (or use "
                   "-inf and turn its 0/0 into 0)."),
        ),
        hints=(_nan_output, _empty_rows_wrong),
        alternatives=(
            _mp_loop,
            _mp_torch,
            lambda q, k, v, mask: att.scaled_dot_product_attention(q, k, v, mask)[0],
        ),
        atol=1e-10,
        rules=(
            Rule("empty", "a node with no in-neighbours outputs a row of zeros",
                 ("node 3 has no in-neighbours",), lambda q, k, v, mask: bool((~mask.any(axis=1)).any()),
                 ("big-negative-fill", "ignore-mask"), quote='A node with no in-neighbours outputs a row of zeros'),
            Rule("range", "a directed graph: row i of mask (mask[i, j], the edge j -> i) lists i's in-neighbours",
                 ("random directed graph with self loops, T=7", "causal mask, T=5"),
                 lambda q, k, v, mask: not np.array_equal(mask, mask.T), ("out-neighbours",), quote='the graph may be directed'),
            Rule("range", "a sparse mask: the softmax runs over the in-neighbours only",
                 ("banded mask, T=6, window 1",), lambda q, k, v, mask: not mask.all(),
                 ("ignore-mask", "mask-after-softmax"), quote="over node $i$'s in-neighbours only"),
            output_rule('a float64 array (T, d_v)', 'banded mask, T=6, window 1',
                        'Return a float64 array of shape `(T, d_v)`', _mp_reference, 'float32', 'list'),
            in_place_rule('banded mask, T=6, window 1', _mp_reference),
        ),
        framing=('Write `my_message_passing(q, k, v, mask)`', "Node $i$'s output is"),
        difficulty=2,
        minutes=15,
    )
)


# ------------------------------------------------------------ receptive field
def _rf_cases() -> list[Case]:
    return [
        Case("T=8, window 1, 2 layers", (8, 1, 2)),
        Case("T=10, window 2, 3 layers", (10, 2, 3)),
        Case("0 layers", (6, 1, 0)),
        Case("T=5, window 3, 4 layers (the band fills the matrix)", (5, 3, 4)),
        Case("window 0, 5 layers", (7, 0, 5)),
        Case("a single node", (1, 2, 3)),
    ]


def _offset(T):
    return np.subtract.outer(np.arange(T), np.arange(T))  # (T, T), i - j


def _bool_power(T, window, n_layers):
    A = (np.abs(_offset(T)) <= window).astype(int)
    R = np.eye(T, dtype=int)
    for _ in range(n_layers):
        R = (A @ R > 0).astype(int)
    return R > 0


def _reach_as_numbers(got, expected, args):
    """Advice for a receptive field returned as numbers (a matrix product's counts, say)."""
    arr = np.asarray(got) if isinstance(got, (np.ndarray, list)) else (got.numpy() if isinstance(got, torch.Tensor) else None)
    if arr is None or arr.dtype.kind not in "iuf":
        return None
    return ("R answers yes or no for each pair (i, j): if you multiplied 0/1 matrices, the product counts "
            "the paths from j to i; turn it into booleans with `> 0`.")


def _explain_reach(index, expected, args):
    i, j = index
    T, window, n_layers = args
    reach = n_layers * window
    if expected:
        return (f"|{i} - {j}| = {abs(i - j)} <= n_layers * window = {reach}, so output {i} hears "
                f"input {j} through a chain of {n_layers} hops of at most {window}")
    return (f"|{i} - {j}| = {abs(i - j)} > n_layers * window = {reach}: {n_layers} hops of at most "
            f"{window} cannot reach that far")


register(
    Exercise(
        id="banded-receptive-field",
        title="The receptive field of a banded stack",
        make_cases=_rf_cases,
        reference=lambda T, window, n_layers: g.receptive_field(g.banded_mask(T, window), n_layers),
        mutants=(
            Mutant("one-layer", lambda T, w, L: np.abs(_offset(T)) <= w,
                   "that is the receptive field of one layer. Each extra layer widens the band by another window: "
                   "after L layers |i - j| <= L * window (and only i itself at L = 0)."),
            Mutant("looks-back-only", lambda T, w, L: (_offset(T) >= 0) & (_offset(T) <= L * w),
                   "you only looked backwards. A banded mask is symmetric: node i also hears j > i, so the band "
                   "spreads in both directions."),
            Mutant("strict", lambda T, w, L: np.abs(_offset(T)) < L * w,
                   "off by one: node i still depends on inputs exactly L * window away, and on itself (use <=, not "
                   "<)."),
            Mutant("window-plus-layers", lambda T, w, L: np.abs(_offset(T)) <= L + w,
                   "you added the window and the number of layers. Each layer widens the band by a whole window, so "
                   "after L layers the reach is L * window."),
            Mutant("window-to-the-power", lambda T, w, L: np.abs(_offset(T)) <= w**L,
                   "the reach grows linearly, one window per layer (L * window), not as window ** L: a chain of L "
                   "hops of at most window each."),
        ),
        explain=_explain_reach,
        alternatives=(
            _bool_power,
            lambda T, w, L: np.abs(_offset(T)) <= L * w,
            lambda T, w, L: np.linalg.matrix_power((np.abs(_offset(T)) <= w).astype(np.int64), L) > 0,
        ),
        rules=(
            Rule("edge-size", "0 layers: each output depends on its own input only (the identity)",
                 ("0 layers",), lambda T, w, L: L == 0, ("one-layer", "strict", "window-to-the-power"), quote='After zero layers each output is its own input'),
            Rule("threshold", "|i - j| = n_layers * window exactly is still reached (<=)",
                 ("T=8, window 1, 2 layers", "T=10, window 2, 3 layers"), lambda T, w, L: 0 < L * w < T - 1,
                 ("strict", "window-plus-layers"), quote='an input exactly `n_layers * window` away is reached'),
            Rule("edge-size", "window 0: only itself, at any depth",
                 ("window 0, 5 layers",), lambda T, w, L: w == 0, ("strict", "window-plus-layers"), quote='`window` may be 0'),
            Rule("range", "a band wider than the sequence fills the matrix",
                 ("T=5, window 3, 4 layers (the band fills the matrix)",), lambda T, w, L: L * w >= T - 1,
                 ("looks-back-only", "one-layer"), quote='under the banded mask'),
            output_rule('a boolean array (T, T)', 'T=8, window 1, 2 layers',
                        'returning a boolean array `R` of shape `(T, T)`',
                        lambda T, window, n_layers: g.receptive_field(g.banded_mask(T, window), n_layers),
                        'float-for-bool', 'list'),
        ),
        framing=('Write `my_receptive_field`',),
        structure_hint=_reach_as_numbers,
        difficulty=1,  # a newcomer reader found it easy once the lesson says the band grows by w per layer
        minutes=10,
    )
)


# ------------------------------------------------------------ attention rollout
def _stochastic(rng, *shape):
    w = rng.random(shape) ** 3  # peaked rows, like trained heads
    return w / w.sum(axis=-1, keepdims=True)


def _rollout_cases() -> list[Case]:
    rng = np.random.default_rng(53)
    causal = att.softmax(rng.normal(size=(4, 5, 5)), mask=att.causal_mask(5))
    masked_row = _stochastic(rng, 2, 3, 3)
    masked_row[:, 1] = 0.0  # query 1 attends to nothing in either layer
    return [
        Case("2 layers, 4 tokens", (_stochastic(rng, 2, 4, 4),)),
        Case("3 layers, 5 tokens", (_stochastic(rng, 3, 5, 5),)),
        Case("one layer", (_stochastic(rng, 1, 3, 3),)),
        Case("identity maps", (np.stack([np.eye(4)] * 3),)),
        Case("4 causal layers", (causal,)),
        Case("a fully masked query (a row of zeros)", (masked_row,)),
    ]


def _aug(A):
    return 0.5 * A + 0.5 * np.eye(A.shape[-1])


def _rollout_no_residual(w):
    return reduce(lambda R, A: A @ R, w, np.eye(w.shape[-1]))


def _rollout_wrong_order(w):
    aug = [_aug(A) / _aug(A).sum(axis=-1, keepdims=True) for A in w]
    return reduce(lambda R, A: R @ A, aug, np.eye(w.shape[-1]))


def _rollout_no_renorm(w):
    return reduce(lambda R, A: _aug(A) @ R, w, np.eye(w.shape[-1]))


def _rollout_unhalved(w):
    return reduce(lambda R, A: (A + np.eye(A.shape[-1])) @ R, w, np.eye(w.shape[-1]))


def _rows_do_not_sum_to_one(got, expected, args):
    sums = np.asarray(got, dtype=float).sum(axis=-1)
    if np.all(np.isfinite(sums)) and not np.allclose(sums, 1.0, atol=1e-6):
        return "the rows of your rollout do not sum to 1: normalise each layer's 0.5 A + 0.5 I by its row sums"
    return None


def _rollout_abnar(w):
    aug = w + np.eye(w.shape[-1])[None]  # (L, T, T)
    aug = aug / aug.sum(axis=-1)[..., None]
    joint = aug[0]
    for A in aug[1:]:
        joint = A @ joint
    return joint


def _rollout_torch(w):
    t = torch.as_tensor(w)
    aug = 0.5 * t + 0.5 * torch.eye(t.shape[-1], dtype=t.dtype)
    aug = aug / aug.sum(dim=-1, keepdim=True)
    return torch.linalg.multi_dot(list(aug.flip(0))).numpy() if len(aug) > 1 else aug[0].numpy()


register(
    Exercise(
        id="attention-rollout",
        title="Attention rollout",
        make_cases=_rollout_cases,
        reference=attention_rollout,
        mutants=(
            Mutant("no-residual", _rollout_no_residual,
                   "you multiplied the raw attention maps. Rollout accounts for the skip connection: use 0.5 * A + "
                   "0.5 * I for each layer."),
            Mutant("wrong-order", _rollout_wrong_order,
                   "your product runs in the wrong order. Layer 1 acts first, so later layers multiply on the left: "
                   "R = Â_L @ ... @ Â_2 @ Â_1."),
            Mutant("no-renormalise", _rollout_no_renorm,
                   "almost: a fully masked query has a row of zeros, so its row of 0.5 A + 0.5 I sums to 0.5. Divide "
                   "each layer's rows by their sums."),
            Mutant("unhalved", _rollout_unhalved,
                   "your rows sum to 2 ** L: A + I has rows summing to 2. Use 0.5 * A + 0.5 * I, or divide A + I by "
                   "its row sums."),
            Mutant(
                "averaged-layers",
                lambda w: np.mean([_aug(A) / _aug(A).sum(axis=-1, keepdims=True) for A in w], axis=0),
                "you averaged the layers' maps. Rollout follows attention through the stack: it MULTIPLIES "
                "them, R = Â_L @ ... @ Â_1.",
            ),
            Mutant("last-layer-only", lambda w: _aug(w[-1]) / _aug(w[-1]).sum(axis=-1, keepdims=True),
                   "that is the last layer's Â alone; rollout multiplies every layer's, layer 1 first: R = Â_L @ ... "
                   "@ Â_2 @ Â_1."),
        ),
        hints=(_rows_do_not_sum_to_one,),
        alternatives=(_rollout_abnar, _rollout_torch),
        rules=(
            Rule("range", "a fully masked query (a row of zeros): 0.5 A + 0.5 I is renormalised to sum to 1",
                 ("a fully masked query (a row of zeros)",), lambda w: bool((w.sum(axis=-1) == 0).any()),
                 ("no-renormalise",), quote='a fully masked query has a row of zeros in $A$; after this its row sums to 1 again'),
            Rule("edge-size", "one layer: the rollout is that layer's Â",
                 ("one layer",), lambda w: len(w) == 1, ("no-residual", "unhalved"), quote='($L$ may be 1)'),
            Rule("edge-size", "several layers: layer 1 acts first, later layers multiply on the left",
                 ("3 layers, 5 tokens", "4 causal layers"), lambda w: len(w) >= 3,
                 ("wrong-order", "averaged-layers", "last-layer-only"), quote='multiply the layers so that layer 1 acts first'),
            output_rule('a float64 array (T, T)', '2 layers, 4 tokens',
                        'Return the rollout, a float64 array of shape `(T, T)`', attention_rollout, 'float32', 'list'),
            in_place_rule('2 layers, 4 tokens', attention_rollout, quote='Do not change `weights` in place'),
        ),
        framing=('Write `my_rollout(weights)`',),
        difficulty=1,
        minutes=10,
    )
)


# ------------------------------------------------------------ effective graph under a shuffle
def _peaked(rng, n):
    w = rng.random((n, n)) ** 4 + 1e-3  # a few heavy keys per row, no ties
    return w / w.sum(axis=1, keepdims=True)


def _overlap_cases() -> list[Case]:
    rng = np.random.default_rng(55)
    p6, p7, p8 = rng.permutation(6), rng.permutation(7), rng.permutation(8)
    content = _peaked(rng, 7) * 0.3
    content[:, 2] += 0.7  # every query reads word 2, wherever it stands
    prev = np.eye(6, k=-1) * 0.9 + 0.1 / 6
    prev[0, 0] += 0.9  # the previous word (the first word reads itself)
    A6 = _peaked(rng, 6)
    # Dyadic weights (sums of powers of 2) add up exactly in floating point, so a cumulative weight can
    # land exactly on the mark: then >= and > give different key sets, whatever the order of the sums.
    on_mark = np.array([[0.5, 0.25, 0.125, 0.125, 0.0],  # 0.5 + 0.25 = 0.75 exactly: two keys
                        [0.25, 0.5, 0.0625, 0.0625, 0.125],
                        [0.0625, 0.0625, 0.125, 0.25, 0.5],
                        [0.125, 0.5, 0.25, 0.0, 0.125],
                        [0.375, 0.0625, 0.0625, 0.375, 0.125]])  # 0.375 + 0.375 = 0.75
    on_mark_b = np.array([[0.5, 0.125, 0.3125, 0.0625, 0.0],  # rows of B: no tie at the mark
                          [0.0625, 0.25, 0.5, 0.1875, 0.0],
                          [0.125, 0.0625, 0.0, 0.3125, 0.5],
                          [0.4375, 0.3125, 0.125, 0.0625, 0.0625],
                          [0.25, 0.0, 0.5, 0.1875, 0.0625]])
    p5 = np.array([3, 0, 4, 1, 2])
    row_scale = np.array([[2.0], [0.25], [4.0], [1.0], [0.5]])  # powers of 2: the shares stay exact
    tied = np.array([[0.5, 0.25, 0.25, 0.0],  # mass 0.6: 0.5, then one 0.25 of two, the lower index
                     [0.125, 0.375, 0.125, 0.375],  # 0.375 + 0.375 = 0.75 >= 0.6: the two 0.375
                     [0.25, 0.25, 0.25, 0.25],  # 0.25, 0.25, 0.25: three of four equal weights
                     [0.0, 0.5, 0.25, 0.25]])
    tied_b = np.array([[0.5, 0.3125, 0.1875, 0.0],
                       [0.0625, 0.5625, 0.25, 0.125],
                       [0.4375, 0.125, 0.0625, 0.375],
                       [0.25, 0.0, 0.6875, 0.0625]])
    full = np.array([[0.5, 0.5, 0.0, 0.0], [0.0, 0.25, 0.75, 0.0], [0.125, 0.125, 0.25, 0.5], [0.0, 0.0, 0.0, 1.0]])
    full_b = np.array([[0.75, 0.25, 0.0, 0.0], [0.0, 0.5, 0.0, 0.5], [0.0, 0.25, 0.25, 0.5], [1.0, 0.0, 0.0, 0.0]])
    return [
        Case("6 words, an unrelated shuffled map, mass 0.8", (A6, _peaked(rng, 6), p6, 0.8)),
        Case("the same map, words not moved (identity perm)", (A6, A6.copy(), np.arange(6), 0.8)),
        Case("a content head: the shuffled map follows the words", (content, content[np.ix_(p7, p7)], p7, 0.8)),
        Case("a previous-word head, words reversed", (prev, prev.copy(), np.arange(6)[::-1].copy(), 0.8)),
        Case("8 words, mass 0.5", (_peaked(rng, 8), _peaked(rng, 8), p8, 0.5)),
        Case("7 words, mass 0.95", (_peaked(rng, 7), _peaked(rng, 7), p7, 0.95)),
        Case("a one-word sentence", (np.ones((1, 1)), np.ones((1, 1)), np.zeros(1, dtype=int), 0.8)),
        Case("weights that reach the mark exactly, mass 0.75", (on_mark, on_mark_b, p5, 0.75)),
        Case("rows that do not sum to 1, mass 0.75", (on_mark * row_scale, on_mark_b * row_scale[::-1], p5, 0.75)),
        Case("equal weights at the mark, mass 0.6", (tied, tied_b, np.array([2, 0, 3, 1]), 0.6)),
        Case("mass 1: every key with weight, none without", (full, full_b, np.array([1, 3, 0, 2]), 1.0)),
    ]


def _overlap_reference(A, B, perm, mass):
    words, _, _ = shuffle_overlap(A[None, None], [B[None, None]], [list(perm)], mass)  # (1, 1) each
    return float(words[0, 0])


def _keys(row, mass, strict=False, above=False, raw=False, ties_reversed=False, lightest=False, ties_all=False):
    order = np.argsort(row)[::-1] if ties_reversed else np.argsort(-row, kind="stable")  # heaviest key first
    if lightest:
        order = np.argsort(row, kind="stable")
    share = np.cumsum(row[order]) / (1.0 if raw else row.sum())  # (n,)
    if above:  # stops only once the weight is strictly above the mark
        k = int((share <= mass + 1e-9).sum()) + 1
    else:
        k = int((share < mass - 1e-9).sum()) + (0 if strict else 1)
    keys = set(order[:max(k, 0)].tolist())
    if ties_all and keys:  # every key as heavy as the last one in, ties included
        keys |= set(np.flatnonzero(row >= row[order[k - 1]]).tolist())
    return keys


def _lands_on_mark(A, B, perm, mass) -> bool:
    """Some row of A or B has a cumulative share (heaviest first) exactly equal to the mass."""
    return any(np.any(np.cumsum(-np.sort(-row)) / row.sum() == mass) for row in (*A, *B))


def _tied_at_mark(A, B, perm, mass) -> bool:
    """Some row of A has equal weights on both sides of where its key set ends."""
    for row in A:
        w = -np.sort(-row)  # (n,) largest first
        k = int((np.cumsum(w) / row.sum() < mass - 1e-9).sum()) + 1
        if k < len(w) and w[k - 1] == w[k]:
            return True
    return False


def _overlap_coefficient(a, b):
    return len(a & b) / min(len(a), len(b))


def _dice(a, b):
    return 2 * len(a & b) / (len(a) + len(b))


def _overlap_with(follow_query=True, map_keys=True, inverse=False, columns=False, total=False,
                  similarity=None, query_inverse=False, **keys):
    similarity = similarity or jaccard

    def f(A, B, perm, mass):
        if columns:
            A, B = A.T, B.T
        perm = np.asarray(perm)
        to_word = np.argsort(perm) if inverse else perm  # position in the shuffle -> original word
        where = perm if inverse or query_inverse else np.argsort(perm)  # original word -> its position
        out = 0.0
        for i in range(len(A)):
            kb = _keys(B[where[i] if follow_query else i], mass, **keys)
            out += similarity(_keys(A[i], mass, **keys), {int(to_word[j]) for j in kb} if map_keys else kb)
        return out if total else out / len(A)

    return f


def _overlap_out_of_range(got, expected, args):
    value = np.asarray(got, dtype=float)
    if value.size == 1 and np.isfinite(value).all() and not 0.0 <= float(value.reshape(-1)[0]) <= 1.0:
        return ("a Jaccard overlap lies between 0 and 1, and so does its mean over the words: "
                "divide each |K & K'| by |K | K'|, and the sum by the number of words")
    return None


def _overlap_nan(got, expected, args):
    if np.isnan(np.asarray(got, dtype=float)).any():
        return ("your result is NaN: every key set holds at least one key (the heaviest), so "
                "|K | K'| is never 0; check how you count the keys that reach the mass")
    return None


def _overlap_sets(A, B, perm, mass):
    where = {int(w): p for p, w in enumerate(perm)}  # original word -> position in the shuffle
    scores = []
    for i in range(len(A)):
        ka = _keys(A[i], mass)
        kb = {int(perm[j]) for j in _keys(B[where[i]], mass)}
        scores.append(len(ka & kb) / len(ka | kb))
    return float(np.mean(scores))


def _overlap_boolean(A, B, perm, mass):
    perm = np.asarray(perm)
    B_words = B[np.argsort(perm)][:, np.argsort(perm)]  # B re-indexed by original words, (n, n)

    def member(M):
        order = np.argsort(-M, axis=1, kind="stable")
        share = np.cumsum(np.take_along_axis(M, order, axis=1), axis=1) / M.sum(axis=1, keepdims=True)
        inside = np.zeros(M.shape, dtype=bool)
        np.put_along_axis(inside, order, share - np.take_along_axis(M, order, axis=1) / M.sum(axis=1, keepdims=True)
                          < mass - 1e-9, axis=1)
        return inside  # (n, n): key j is in query i's set

    a, b = member(A), member(B_words)
    return float(((a & b).sum(axis=1) / (a | b).sum(axis=1)).mean())


register(
    Exercise(
        id="effective-graph-overlap",
        title="How much of a head's graph survives a shuffle",
        make_cases=_overlap_cases,
        reference=_overlap_reference,
        mutants=(
            Mutant("same-positions", _overlap_with(follow_query=False, map_keys=False),
                   "you compared row i of B with row i of A, position by position. After the shuffle word i stands "
                   "elsewhere: use the row of B at its new position (the p with perm[p] == i), and translate that "
                   "row's keys back to words with perm."),
            Mutant("keys-not-translated", _overlap_with(map_keys=False),
                   "you followed the query word, but compared B's keys as positions. Translate each key position p "
                   "of the shuffled sentence to its original word, perm[p], before comparing with A's keys."),
            Mutant("query-not-followed", _overlap_with(follow_query=False),
                   "you translated B's keys to words but read row i of B, which belongs to another word after the "
                   "shuffle: word i's row in B is the position p with perm[p] == i (np.argsort(perm)[i])."),
            Mutant("inverse-perm", _overlap_with(inverse=True),
                   "perm runs the other way: perm[p] is the original word at position p of the shuffle, so word i "
                   "stands at np.argsort(perm)[i], and key p is word perm[p]."),
            Mutant("stops-below-mass", _overlap_with(strict=True),
                   "your key sets stop just short of the mass: keep adding keys, heaviest first, until their weight "
                   "reaches mass times the row's sum, including the key that crosses it (so every set holds at least "
                   "one key)."),
            Mutant("columns", _overlap_with(columns=True),
                   "you used columns. A query's keys are its row: A[i, j] is how much query i reads key j."),
            Mutant("sum-not-mean", _overlap_with(total=True),
                   "you summed the overlaps; return their mean over the n words."),
            Mutant("stops-above-mass", _overlap_with(above=True),
                   "your key sets go one key too far when the weight lands exactly on the mark: 'reaches' means at "
                   "least mass times the row's sum (>=), so the key that brings the weight exactly to the mark is "
                   "the last one in."),
            Mutant("ignores-row-sum", _overlap_with(raw=True),
                   "the rows need not sum to 1: compare the running weight with mass times the row's own sum (or "
                   "divide the row by its sum first), not with mass itself."),
            Mutant("lightest-first", _overlap_with(lightest=True),
                   "you added the keys lightest first (an ascending sort). The key set is the FEWEST keys that reach "
                   "the mark, so take the heaviest first: np.argsort(-row, kind='stable')."),
            Mutant("overlap-coefficient", _overlap_with(similarity=_overlap_coefficient),
                   "you divided |K & K'| by the smaller set, min(|K|, |K'|) (the overlap coefficient). The Jaccard "
                   "overlap divides by the union, |K | K'|."),
            Mutant("dice", _overlap_with(similarity=_dice),
                   "that is the Dice coefficient, 2 |K & K'| / (|K| + |K'|). The Jaccard overlap divides the "
                   "intersection by the union: |K & K'| / |K | K'|."),
            Mutant("query-row-perm", _overlap_with(query_inverse=True),
                   "you read row perm[i] of B for word i; word i stands at the position p with perm[p] == i, "
                   "np.argsort(perm)[i] (your keys, translated with perm[p], are right)."),
            Mutant("ties-all-kept", _overlap_with(ties_all=True),
                   "where equal weights straddle the end of a set you kept all of them; the set stops at the key "
                   "that reaches the mark, taking equal weights lowest index first, so only the lower of two tied "
                   "keys is in."),
            Mutant("ties-reversed", _overlap_with(ties_reversed=True),
                   "among equal weights you took the higher index first (np.argsort(row)[::-1] reverses ties). The "
                   "statement takes them lowest index first, as np.argsort(-row, kind='stable') orders them."),
        ),
        hints=(_overlap_nan, _overlap_out_of_range),
        alternatives=(_overlap_sets, _overlap_boolean),
        atol=1e-10,
        rules=(
            Rule("threshold", "a cumulative weight exactly at the mark: the key that reaches it is the last one in",
                 ("weights that reach the mark exactly, mass 0.75", "rows that do not sum to 1, mass 0.75"),
                 _lands_on_mark, ("stops-above-mass", "stops-below-mass"), quote='the key that reaches or crosses the mark is included'),
            Rule("range", "rows that do not sum to 1: the mark is mass times the row's sum",
                 ("rows that do not sum to 1, mass 0.75",),
                 lambda A, B, perm, mass: not np.allclose(A.sum(axis=1), 1.0), ("ignores-row-sum",), quote='Rows need not sum to 1'),
            Rule("tie", "equal weights in a row of A at the mark: the lower index first",
                 ("equal weights at the mark, mass 0.6",), _tied_at_mark, ("ties-reversed", "ties-all-kept"),
                 quote=("equal weights lowest index first", "of two keys tied where the set ends only the lower index is in it")),
            Rule("range", "mass 1: the set holds every key with weight and no key without",
                 ("mass 1: every key with weight, none without",), lambda A, B, perm, mass: mass == 1.0,
                 ("stops-above-mass",), quote='$0 <$ `mass` $\\le 1$'),
            Rule("edge-size", "a shuffle that is not its own inverse: perm[p] is the word at position p",
                 ("6 words, an unrelated shuffled map, mass 0.8", "a content head: the shuffled map follows the words"),
                 lambda A, B, perm, mass: not np.array_equal(np.asarray(perm)[np.asarray(perm)], np.arange(len(perm))),
                 ("inverse-perm",), quote='`perm[p]` is the original index of the word at position `p` of the shuffle'),
            output_rule('a float', '6 words, an unrelated shuffled map, mass 0.8',
                        'Return the mean overlap over the `n` words, a float', _overlap_reference, 'array-for-number'),
            in_place_rule('6 words, an unrelated shuffled map, mass 0.8', _overlap_reference),
        ),
        framing=("How much of a head's graph survives", 'A head that reads content', 'Write `my_graph_overlap(A, B, perm, mass)`', 'For each word `i`', 'its key set in `B`', 'the Jaccard overlap', 'Where a sum lands exactly on the mark'),
        difficulty=3,
        minutes=35,
    )
)

EXERCISES = ("message-passing-step", "banded-receptive-field", "attention-rollout", "effective-graph-overlap")
