"""Chapter 4 exercises: split heads, a multi-head forward pass, the parameter count, head ablation, overlap.

Each exercise lists typical mistakes (mutants) with their feedback, and the rules its statement draws.
Signatures of the notebook's stubs:

* ``split-heads``: ``fn(x, h) -> (B, h, T, d_k)`` for ``x`` of shape (B, T, h*d_k);
  head ``i`` gets the features ``i*d_k:(i+1)*d_k``.
* ``multi-head-forward``: ``fn(x, W_q, W_k, W_v, W_o, h) -> (output, weights)``,
  self-attention without masks or biases; ``x`` (B, T, d_model), all weights
  (d_model, d_model) used as ``x @ W``; output (B, T, d_model), weights (B, h, T, T).
* ``mha-param-count``: ``fn(d_model, num_heads, bias) -> int``, the parameters of
  ``torch.nn.MultiheadAttention(d_model, num_heads, bias=bias)``.
* ``head-ablation``: ``fn(heads, W_o, head) -> (B, T, d_out)``: the multi-head output
  (without ``b_o``) when head ``head`` is switched off; ``heads`` (B, h, T, d_v) are the
  heads' outputs, ``W_o`` (h*d_v, d_out).
* ``subspace-overlap``: ``fn(A, B) -> (overlap, chance, closer_than_chance)`` for ``A`` (n, p)
  and ``B`` (n, q) of full column rank: the mean of cos^2 over the min(p, q) principal
  angles between their column spaces (a float), its mean for random subspaces,
  max(p, q) / n (a float), and whether the overlap is larger (a bool, strict: an overlap equal to
  chance is not closer).
"""

from __future__ import annotations

import numpy as np
import torch

from ...core import multihead as mh
from .circuits import subspace_overlap
from .subspaces import mha_parameter_count
from ...exercises._core import Case, Exercise, in_place_rule, Mutant, output_rule, register, Rule, SCORE_TIPS

__all__ = ["EXERCISES"]


# ------------------------------------------------------------ split heads
def _split_cases() -> list[Case]:
    rng = np.random.default_rng(41)
    return [
        Case("B=2, T=3, 4 heads of d_k=2", (rng.normal(size=(2, 3, 8)), 4)),
        Case("B=1, T=5, 3 heads of d_k=2", (rng.normal(size=(1, 5, 6)), 3)),
        Case("one head", (rng.normal(size=(2, 4, 5)), 1)),
        Case("d_k=1: one feature per head", (rng.normal(size=(1, 2, 4)), 4)),
        Case("a single position, T=1", (rng.normal(size=(3, 1, 6)), 2)),
    ]


def _split_no_transpose(x, h):
    B, T, D = x.shape
    return x.reshape(B, h, T, D // h)


def _split_interleaved(x, h):
    B, T, D = x.shape
    return x.reshape(B, T, D // h, h).transpose(0, 3, 1, 2)


def _split_transpose_first(x, h):
    B, T, D = x.shape
    return x.transpose(0, 2, 1).reshape(B, h, T, D // h)  # (B, D, T) cut in memory order


def _split_full_transpose(x, h):
    B, T, D = x.shape
    return x.T.reshape(B, h, T, D // h)  # x.T is (D, T, B): every axis reversed, then relabelled


def _split_heads_first(x, h):
    B, T, D = x.shape
    return np.array(np.split(x, h, axis=-1)).reshape(B, h, T, D // h)  # (h, B, T, d_k) relabelled


register(
    Exercise(
        id="split-heads",
        title="Split the features into heads",
        make_cases=_split_cases,
        reference=lambda x, h: mh.split_heads(x, h),
        mutants=(
            Mutant("no-transpose", _split_no_transpose,
                   "you reshaped straight to (B, h, T, d_k), which cuts the sequence of features "
                   "in memory order and mixes positions into heads. Reshape to (B, T, h, d_k) first, "
                   "then swap axes 1 and 2."),
            Mutant("interleaved", _split_interleaved,
                   "head i should own the contiguous block of features i*d_k:(i+1)*d_k; you gave it "
                   "every h-th feature. Reshape the last axis to (h, d_k), not (d_k, h)."),
            Mutant("transpose-then-reshape", _split_transpose_first,
                   "you transposed x to (B, h*d_k, T) and then reshaped to (B, h, T, d_k): a reshape "
                   "reads the array in memory order, so each head's block mixes features and positions. "
                   "Reshape the last axis into (h, d_k) first, (B, T, h, d_k), then swap axes 1 and 2."),
            Mutant("full-transpose", _split_full_transpose,
                   "x.T reverses ALL the axes of a 3-D array, (h*d_k, T, B), so the reshape mixes the batch, "
                   "the positions and the features. Reshape the last axis into (h, d_k) first, then swap "
                   "axes 1 and 2: x.reshape(B, T, h, d_k).transpose(0, 2, 1, 3)."),
            Mutant("heads-first-reshape", _split_heads_first,
                   "the heads ended up first, (h, B, T, d_k) (as np.split stacks them, or a reshape to "
                   "(B*T, h, d_k) then a transpose), and a reshape to (B, h, T, d_k) only relabels memory: "
                   "heads and sequences mix. Move the axis instead: .transpose(1, 0, 2, 3), or "
                   "np.stack(..., axis=1)."),
        ),
        rules=(
            Rule("edge-size", "a batch of several sequences (B > 1): each keeps its own heads",
                 ("B=2, T=3, 4 heads of d_k=2", "a single position, T=1"),
                 lambda x, h: x.shape[0] > 1, ("full-transpose", "heads-first-reshape"), quote='Any of `B`, `T`, `h` and `d_k` may be 1'),
            Rule("edge-size", "d_k = 1: one feature per head",
                 ("d_k=1: one feature per head",), lambda x, h: x.shape[-1] == h, ("no-transpose",), quote='Any of `B`, `T`, `h` and `d_k` may be 1'),
            Rule("edge-size", "several positions (T > 1) and heads (h > 1): head i owns features i*d_k:(i+1)*d_k",
                 ("B=1, T=5, 3 heads of d_k=2",), lambda x, h: x.shape[1] > 1 and h > 1,
                 ("no-transpose", "interleaved", "transpose-then-reshape"), quote='head `i` holds the features `i * d_k` to `(i + 1) * d_k` of every'),
            output_rule("a float64 numpy array (B, h, T, d_k)", 'B=2, T=3, 4 heads of d_k=2',
                         "return a float64 numpy array of shape `(B, h, T, d_k)`", mh.split_heads, 'float32', 'list'),
            in_place_rule('B=2, T=3, 4 heads of d_k=2', mh.split_heads),
        ),
        framing=('Write `my_split_heads(x, h)`', '(Merging the heads back is the reverse'),
        error_tips=(("axes don't match array",
                     " Tip: numpy's transpose takes the new order of ALL the axes, .transpose(0, 2, 1, 3); torch's "
                     ".transpose(1, 2), as in the lesson, swaps two of them (np.swapaxes(y, 1, 2) does that in "
                     "numpy)"),),
        difficulty=1,
        minutes=10,
        alternatives=(
            lambda x, h: np.stack(np.split(x, h, axis=-1), axis=1),
            lambda x, h: torch.as_tensor(x).unflatten(-1, (h, -1)).transpose(1, 2).numpy(),
            lambda x, h: np.einsum("bthk->bhtk", x.reshape(*x.shape[:2], h, -1)),
        ),
    )
)


# ------------------------------------------------------------ multi-head forward
def _mha_cases() -> list[Case]:
    rng = np.random.default_rng(42)

    def case(B, T, d, h):
        W = rng.normal(size=(4, d, d)) / np.sqrt(d)
        return (rng.normal(size=(B, T, d)), *W, h)

    return [
        Case("B=2, T=4, d_model=8, 2 heads", case(2, 4, 8, 2)),
        Case("B=1, T=5, d_model=6, 3 heads", case(1, 5, 6, 3)),
        Case("one head", case(1, 3, 4, 1)),
        Case("a single position, 4 heads", case(2, 1, 8, 4)),
        Case("d_model=12, 4 heads of d_k=3", case(1, 6, 12, 4)),
    ]


def _mha_reference(x, W_q, W_k, W_v, W_o, h):
    return mh.multi_head_attention(x, x, W_q, W_k, W_v, W_o, num_heads=h)


def _mha_with(scale="d_k", split="ok", merge="ok", project=True, axis=-1, transpose_w=False):
    def f(x, W_q, W_k, W_v, W_o, h):
        B, T, D = x.shape

        def heads(y):
            if split == "no-transpose":
                return y.reshape(B, h, T, D // h)
            if split == "interleaved":
                return y.reshape(B, T, D // h, h).transpose(0, 3, 1, 2)
            return y.reshape(B, T, h, D // h).transpose(0, 2, 1, 3)  # (B, h, T, d_k)

        def proj(W):
            return x @ (W.T if transpose_w else W)

        q, k, v = heads(proj(W_q)), heads(proj(W_k)), heads(proj(W_v))
        d = {"d_model": D, "none": 1}.get(scale, D // h)
        scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d)  # (B, h, T, T)
        e = np.exp(scores - scores.max(axis, keepdims=True))
        w = e / e.sum(axis, keepdims=True)
        z = w @ v  # (B, h, T, d_v)
        if merge == "no-transpose":
            concat = z.reshape(B, T, D)
        elif merge == "interleaved":
            concat = z.transpose(0, 2, 3, 1).reshape(B, T, D)  # undoes the interleaved split
        else:
            concat = z.transpose(0, 2, 1, 3).reshape(B, T, D)  # (B, T, h*d_v)
        return (concat @ (W_o.T if transpose_w else W_o) if project else concat), w

    return f


def _mha_einsum(x, W_q, W_k, W_v, W_o, h):
    q, k, v = (mh.split_heads(x @ W, h) for W in (W_q, W_k, W_v))  # (B, h, T, d_k) each
    s = np.einsum("bhtk,bhsk->bhts", q, k) / np.sqrt(q.shape[-1])
    w = np.exp(s - np.logaddexp.reduce(s, axis=-1, keepdims=True))  # softmax over the keys
    return np.einsum("bhts,bhsk->bthk", w, v).reshape(x.shape[0], x.shape[1], -1) @ W_o, w


def _mha_loop(x, W_q, W_k, W_v, W_o, h):
    """One head at a time, with torch's softmax; the output as a sum of head contributions."""
    d_k = x.shape[-1] // h
    out, weights = 0.0, []
    for i in range(h):
        cols = slice(i * d_k, (i + 1) * d_k)
        q, k, v = (torch.as_tensor(x @ W[:, cols]) for W in (W_q, W_k, W_v))  # (B, T, d_k)
        w = torch.softmax(q @ k.transpose(1, 2) / d_k**0.5, dim=-1)  # (B, T, T)
        out = out + (w @ v).numpy() @ W_o[cols]  # (B, T, d_out)
        weights.append(w.numpy())
    return out, np.stack(weights, axis=1)


register(
    Exercise(
        id="multi-head-forward",
        error_tips=SCORE_TIPS,
        title="A multi-head attention forward pass",
        make_cases=_mha_cases,
        reference=_mha_reference,
        mutants=(
            Mutant("scale-by-d-model", _mha_with(scale="d_model"),
                   "each head compares vectors of size d_k = d_model / h, so divide its scores by "
                   "sqrt(d_k), not by sqrt(d_model)."),
            Mutant("split-without-transpose", _mha_with(split="no-transpose"),
                   "your heads mix positions: reshape q, k and v to (B, T, h, d_k) and then swap the "
                   "T and h axes; reshaping straight to (B, h, T, d_k) scrambles them."),
            Mutant("merge-without-transpose", _mha_with(merge="no-transpose"),
                   "the weights are right but the concatenation is not: move the head axis back next to "
                   "the features, (B, h, T, d_v) -> (B, T, h, d_v), before reshaping to (B, T, h*d_v)."),
            Mutant("no-output-projection", _mha_with(project=False),
                   "you returned the concatenated heads; multiply them by W_o to get the output."),
            Mutant("no-scale", _mha_with(scale="none"),
                   "each head's scores need the scale 1/sqrt(d_k), with d_k = d_model / h, before "
                   "the softmax; yours have none."),
            Mutant("softmax-over-queries", _mha_with(axis=-2),
                   "your weights' columns sum to 1: each head's softmax normalises over the keys, "
                   "the last axis of its (T, T) score matrix."),
            Mutant("weights-transposed", _mha_with(transpose_w=True),
                   "you used the weights transposed (x @ W.T, as nn.Linear stores them); here every "
                   "weight matrix is used as x @ W."),
            Mutant("interleaved-heads", _mha_with(split="interleaved", merge="interleaved"),
                   "head i should own the contiguous features i*d_k:(i+1)*d_k of q, k and v; you gave it "
                   "every h-th feature. Reshape the last axis to (h, d_k), not (d_k, h)."),
        ),
        alternatives=(
            lambda x, W_q, W_k, W_v, W_o, h: tuple(
                t.numpy() for t in mh.multi_head_attention(
                    *(torch.as_tensor(a) for a in (x, x, W_q, W_k, W_v, W_o)), num_heads=h)
            ),
            _mha_einsum,
            _mha_loop,
        ),
        returns=("output", "weights"),
        rules=(
            Rule("edge-size", "one head: plain attention followed by W_o",
                 ("one head",), lambda x, *W: W[-1] == 1, ("no-output-projection", "weights-transposed"), quote='`h` and `T` may be 1'),
            Rule("edge-size", "a single position (T = 1): each weight is 1",
                 ("a single position, 4 heads",), lambda x, *W: x.shape[1] == 1,
                 ("no-output-projection", "weights-transposed"), quote='`h` and `T` may be 1'),
            Rule("edge-size", "h > 1 heads: each with its own scale 1/sqrt(d_k), d_k = d_model / h",
                 ("B=2, T=4, d_model=8, 2 heads", "d_model=12, 4 heads of d_k=3"), lambda x, *W: W[-1] > 1,
                 ("scale-by-d-model", "split-without-transpose", "merge-without-transpose", "interleaved-heads"), quote='attend in each head with its own scale $1/\\sqrt{d_k}$'),
            output_rule('a tuple of float64 arrays (B, T, d_model), (B, h, T, T)', 'B=2, T=4, d_model=8, 2 heads',
                         'Return the tuple `(output, weights)`, float64 arrays of shapes', _mha_reference,
                         'float32', 'tuple-as-list'),
            in_place_rule('B=2, T=4, d_model=8, 2 heads', _mha_reference),
        ),
        framing=('Write `my_multi_head`', '`x` has shape `(B, T, d_model)`', 'Split the projections into `h` heads',
                 '`d_model` is always a multiple of `h`'),
        difficulty=2,
        minutes=20,
    )
)


# ------------------------------------------------------------ parameter count
def _count_cases() -> list[Case]:
    return [
        Case("MiniLM: d_model=384, 12 heads", (384, 12, True)),
        Case("d_model=512, 8 heads", (512, 8, True)),
        Case("d_model=64, 4 heads, no biases", (64, 4, False)),
        Case("one head", (16, 1, True)),
        Case("d_model=6, 3 heads, no biases", (6, 3, False)),
    ]


def _count(n: int, one: str, many: str) -> str:
    return f"one {one}" if n == 1 else f"{n} {many}"


def _param_count_hint(got, expected, args):
    """Name the difference in weight matrices (d_model^2) and biases (d_model), or as a count that grows with the heads."""
    d, h = args[0], args[1]
    diff = int(got) - int(expected)
    if h > 1 and diff > 0 and diff % (h - 1) == 0:
        per_head = diff // (h - 1)  # = a * d^2 + b * d, the extra parameters of each further head
        for a in range(1, 5):
            b, rest = divmod(per_head - a * d * d, d)
            if rest == 0 and 0 <= b <= 4:
                return (f"you counted {int(got)}, not {int(expected)}: your count grows with the number of "
                        f"heads. {_GROWS_WITH_HEADS}")
    for a in range(-8, 9):  # diff = a * d^2 + b * d with small a and b
        b, rest = divmod(diff - a * d * d, d)
        if rest == 0 and abs(b) <= 8:
            parts = ([_count(abs(a), "d_model x d_model weight matrix", "d_model x d_model weight matrices")]
                     if a else []) + (
                [_count(abs(b), "bias vector of d_model entries", "bias vectors of d_model entries")] if b else [])
            return (f"you counted {int(got)}, {'more' if diff > 0 else 'fewer'} than the right "
                    f"{int(expected)} by {' and '.join(parts)}: check which projections and biases "
                    f"you count")
    return None


_GROWS_WITH_HEADS = (
    "Each head's projections W_Q^(i), W_K^(i), W_V^(i) are d_model x d_k with d_k = d_model / num_heads, not "
    "d_model x d_model: side by side, the heads' projections form one d_model x d_model matrix each, and "
    "their rows of W_O one more, so the count does not depend on num_heads.")


register(
    Exercise(
        id="mha-param-count",
        title="Count the parameters of multi-head attention",
        make_cases=_count_cases,
        reference=mha_parameter_count,
        mutants=(
            Mutant("full-matrices-per-head", lambda d, h, b: h * 4 * d * d + (4 * d if b else 0),
                   "your count grows with the number of heads: you gave every head its own d_model x d_model "
                   "query, key, value and output projections. " + _GROWS_WITH_HEADS),
            Mutant("full-qkv-per-head", lambda d, h, b: h * 3 * d * d + d * d + (4 * d if b else 0),
                   "your count grows with the number of heads: you gave every head its own d_model x d_model "
                   "query, key and value projections. " + _GROWS_WITH_HEADS),
            Mutant("times-num-heads", lambda d, h, b: h * mha_parameter_count(d, h, b),
                   "you multiplied the whole count by num_heads, as if every head had its own d_model x d_model "
                   "projections and biases. Each head projects to d_k = d_model / num_heads features only: side by "
                   "side, the heads' projections form one d_model x d_model matrix each (and one bias of d_model "
                   "entries), so the count does not depend on num_heads."),
            Mutant("forgot-W_o", lambda d, h, b: 3 * d * d + (3 * d if b else 0),
                   "you counted the query, key and value projections; don't forget the output "
                   "projection W_O (d_model x d_model, plus its bias)."),
            Mutant("bias-per-head", lambda d, h, b: 4 * d * d + ((3 * h + 1) * d if b else 0),
                   "each head's bias has d_k = d_model / h entries, so the heads' query (or key, or "
                   "value) biases together have d_model entries, not h * d_model."),
            Mutant("ignores-bias-flag", lambda d, h, b: 4 * d * d + 4 * d,
                   "with bias=False there are no bias vectors: only the four weight matrices count."),
            Mutant("forgot-b_o", lambda d, h, b: 4 * d * d + (3 * d if b else 0),
                   "you counted the biases of the query, key and value projections but not the output "
                   "projection's bias b_O (d_model more)."),
            Mutant("no-biases", lambda d, h, b: 4 * d * d,
                   "with bias=True each of the four projections also has a bias vector of d_model "
                   "entries: 4 * d_model more."),
            Mutant("one-head-only", lambda d, h, b: 4 * d * (d // h) + (4 * (d // h) if b else 0),
                   "you counted the parameters of one head (d_model x d_k per projection); there are "
                   "num_heads of them, which together make four d_model x d_model matrices."),
        ),
        hints=(_param_count_hint,),
        alternatives=(
            lambda d, h, b: sum(p.numel() for p in torch.nn.MultiheadAttention(d, h, bias=b).parameters()),
            lambda d, h, b: h * (3 * d * (d // h) + (d // h) * d) + (4 * d if b else 0),
        ),
        rules=(
            Rule("edge-size", "bias=False: the four weight matrices only",
                 ("d_model=64, 4 heads, no biases", "d_model=6, 3 heads, no biases"), lambda d, h, b: not b,
                 ("ignores-bias-flag",), quote='and their biases when `bias` is `True`'),
            Rule("edge-size", "num_heads > 1: the count does not depend on num_heads",
                 ("MiniLM: d_model=384, 12 heads", "d_model=512, 8 heads"), lambda d, h, b: h > 1,
                 ("full-matrices-per-head", "full-qkv-per-head", "times-num-heads", "bias-per-head", "one-head-only"), quote='with $d_k = d_v = d_{model}/h$'),
            output_rule('an int', 'MiniLM: d_model=384, 12 heads', '(an `int`)', mha_parameter_count, 'float-for-int'),
        ),
        framing=('Write `my_param_count`', 'Does the answer depend on `num_heads`?',
                 '`d_model` is always a multiple of `num_heads`'),
        difficulty=1,
        minutes=7,
    )
)


# ------------------------------------------------------------ head ablation
def _ablation_cases() -> list[Case]:
    rng = np.random.default_rng(44)
    return [
        Case("3 heads, remove head 0", (rng.normal(size=(2, 3, 4, 2)), rng.normal(size=(6, 5)), 0)),
        Case("4 heads, remove the last", (rng.normal(size=(1, 4, 3, 3)), rng.normal(size=(12, 12)), 3)),
        Case("2 heads, d_v=1, T=1", (rng.normal(size=(2, 2, 1, 1)), rng.normal(size=(2, 3)), 1)),
        Case("a single head: nothing is left", (rng.normal(size=(1, 1, 3, 4)), rng.normal(size=(4, 4)), 0)),
        Case("6 heads, remove head 2", (rng.normal(size=(1, 6, 2, 2)), rng.normal(size=(12, 4)), 2)),
    ]


def _ablation_reference(heads, W_o, head):
    c = mh.head_contributions(heads, W_o)  # (B, h, T, d_out)
    return c.sum(1) - c[:, head]


def _ablate_columns(heads, W_o, head):
    d_v = heads.shape[-1]
    W = W_o.copy()
    W[:, head * d_v:(head + 1) * d_v] = 0.0
    return mh.merge_heads(heads) @ W


def _ablate_rescaled(heads, W_o, head):
    h = heads.shape[1]
    return _ablation_reference(heads, W_o, head) * h / max(h - 1, 1)


def _ablate_interleaved(heads, W_o, head):
    concat = mh.merge_heads(heads).copy()  # (B, T, h*d_v)
    concat[..., head::heads.shape[1]] = 0.0
    return concat @ W_o


def _ablate_merge_without_transpose(heads, W_o, head):
    B, h, T, d_v = heads.shape
    kept = heads * (np.arange(h) != head)[None, :, None, None]
    return kept.reshape(B, T, h * d_v) @ W_o  # heads were not moved after the positions


def _ablate_rows_of_head_0(heads, W_o, head):
    d_v = heads.shape[-1]
    return mh.merge_heads(heads) @ W_o - heads[:, head] @ W_o[:d_v]  # the first block of rows, for any head


def _ablate_one_based(heads, W_o, head):
    return _ablation_reference(heads, W_o, (head - 1) % heads.shape[1])  # `head` read as counted from 1


def _ablate_next_head(heads, W_o, head):
    return _ablation_reference(heads, W_o, (head + 1) % heads.shape[1])  # one head too far


def _ablate_strided_rows(heads, W_o, head):
    B, h, T, d_v = heads.shape
    kept = [heads[:, i] @ W_o[i::h] for i in range(h) if i != head]  # every h-th row of W_o, (B, T, d_out) each
    return sum(kept) + np.zeros((B, T, W_o.shape[1]))


def _ablate_only_that_head(heads, W_o, head):
    return mh.head_contributions(heads, W_o)[:, head]


register(
    Exercise(
        id="head-ablation",
        title="Switch one head off",
        make_cases=_ablation_cases,
        reference=_ablation_reference,
        mutants=(
            Mutant("zeroed-columns", _ablate_columns,
                   "you zeroed columns of W_o, which are output features. Head i reaches the output "
                   "through the ROWS i*d_v:(i+1)*d_v of W_o: zero those, or zero the head's output "
                   "before the projection."),
            Mutant("rescaled", _ablate_rescaled,
                   "ablation only removes the head: do not rescale the remaining heads by h / (h - 1)."),
            Mutant("interleaved", _ablate_interleaved,
                   "in the concatenation head i occupies the block i*d_v:(i+1)*d_v, not every h-th feature."),
            Mutant("only-that-head", _ablate_only_that_head,
                   "that is the ablated head's own contribution; the answer keeps every other head "
                   "and drops this one."),
            Mutant("nothing-removed", lambda heads, W_o, head: mh.merge_heads(heads) @ W_o,
                   "that is the output with every head; head `head` must contribute nothing (zero its "
                   "output, or leave out its term head_i W_o^(i) from the sum)."),
            Mutant("rows-of-head-0", _ablate_rows_of_head_0,
                   "you subtracted head `head`'s output through the first rows of W_o, W_o[:d_v], whatever the "
                   "head: head i's rows are W_o[i * d_v:(i + 1) * d_v]."),
            Mutant("one-based", _ablate_one_based,
                   "off by one: you switched off head `head` - 1, the head before the one asked for. `head` "
                   "counts from 0, as Python does (head 0 is the first head, heads[:, 0]), not from 1 as the "
                   "lesson's text numbers heads."),
            Mutant("next-head", _ablate_next_head,
                   "off by one: you switched off head `head` + 1, the head after the one asked for. `head` "
                   "counts from 0 (head 0 is heads[:, 0]), so zero heads[:, head], or leave out the rows "
                   "W_o[head * d_v:(head + 1) * d_v]."),
            Mutant("strided-rows", _ablate_strided_rows,
                   "you sent head i through every h-th row of W_o, W_o[i::h]; in the concatenation head i "
                   "fills the contiguous block of features i*d_v:(i+1)*d_v, so its rows of W_o are "
                   "W_o[i * d_v:(i + 1) * d_v]."),
            Mutant("merge-without-transpose", _ablate_merge_without_transpose,
                   "you reshaped (B, h, T, d_v) straight to (B, T, h*d_v), which mixes positions and "
                   "heads: move the head axis after the positions first, (B, T, h, d_v), then reshape."),
        ),
        alternatives=(
            lambda heads, W_o, head: mh.merge_heads(
                heads * (np.arange(heads.shape[1]) != head)[None, :, None, None]) @ W_o,
            lambda heads, W_o, head: sum(
                heads[:, i] @ W_o[i * heads.shape[-1]:(i + 1) * heads.shape[-1]]
                for i in range(heads.shape[1]) if i != head
            ) + np.zeros((heads.shape[0], heads.shape[2], W_o.shape[1])),
        ),
        rules=(
            Rule("empty", "a single head switched off: nothing is left, the output is zeros",
                 ("a single head: nothing is left",), lambda heads, W_o, head: heads.shape[1] == 1,
                 ("nothing-removed", "only-that-head"), quote='With a single head nothing is left: the output is zeros'),
            Rule("edge-size", "the first and the last head",
                 ("3 heads, remove head 0", "4 heads, remove the last"),
                 lambda heads, W_o, head: head in (0, heads.shape[1] - 1), ("zeroed-columns", "interleaved", "one-based", "next-head", "strided-rows"),
                 quote='when head number `head` (counted from 0: head 0 is the first) is switched off'),
            Rule("edge-size", "d_v = 1 and T = 1",
                 ("2 heads, d_v=1, T=1",), lambda heads, W_o, head: heads.shape[-1] == 1 and heads.shape[2] == 1,
                 ("rescaled", "zeroed-columns"), quote="given the heads' outputs `heads` of shape"),
            output_rule('a float64 array (B, T, d_out)', '3 heads, remove head 0', 'a float64 array of shape',
                         _ablation_reference, 'float32', 'list'),
            in_place_rule('3 heads, remove head 0', _ablation_reference,
                          quote='Do not change `heads` or\n`W_o` in place'),
        ),
        framing=('Write `my_ablate(heads, W_o, head)`',),
        difficulty=1,
        minutes=8,
    )
)

# ------------------------------------------------------------ subspace overlap
def _overlap_cases() -> list[Case]:
    rng = np.random.default_rng(45)
    shared = rng.normal(size=(12, 2))  # two directions both subspaces contain
    scaled = rng.normal(size=(8, 3)) * np.array([100.0, 1.0, 0.01])  # columns of very different norms
    return [
        Case("two random 3-dim subspaces of R^24", (rng.normal(size=(24, 3)), rng.normal(size=(24, 3)))),
        Case("sharing 2 of 3 directions, in R^12",
             (np.hstack([shared, rng.normal(size=(12, 1))]), np.hstack([shared, rng.normal(size=(12, 1))]) @ rng.normal(size=(3, 3)))),
        Case("columns of very different lengths", (scaled, rng.normal(size=(8, 2)))),
        Case("p = 2, q = 4 in R^10", (rng.normal(size=(10, 2)), rng.normal(size=(10, 4)))),
        Case("orthogonal: span(e1, e2) and span(e3)", (np.eye(5)[:, :2], np.eye(5)[:, 2:3])),
        Case("one subspace inside the other", (np.eye(6)[:, :3] @ rng.normal(size=(3, 3)), np.eye(6)[:, :1] + np.eye(6)[:, 1:2])),
        Case("a tie: span(e1, e2) and span(e1, e3) in R^4, overlap = chance = 1/2",
             (2.0 * np.eye(4)[:, [1, 0]], np.eye(4)[:, [2, 0]] * np.array([3.0, 0.5]))),  # cosines exactly 1 and 0
        Case("p = 3, q = 1 in R^9", (rng.normal(size=(9, 3)), rng.normal(size=(9, 1)))),
    ]


def _overlap_reference(A, B):
    overlap = float(subspace_overlap(A, B))
    chance = max(A.shape[1], B.shape[1]) / A.shape[0]
    return overlap, chance, overlap > chance


def _orthonormal(M):
    return np.linalg.qr(M)[0]


def _cosines(A, B):
    return np.linalg.svd(_orthonormal(A).T @ _orthonormal(B), compute_uv=False)  # descending


def _overlap_with(overlap_fn=None, chance_fn=None, invert=False, compare=lambda o, c: o > c):
    def fn(A, B):
        overlap = float(overlap_fn(A, B)) if overlap_fn else _overlap_reference(A, B)[0]
        chance = float(chance_fn(A, B)) if chance_fn else max(A.shape[1], B.shape[1]) / A.shape[0]
        return overlap, chance, (overlap <= chance) if invert else bool(compare(overlap, chance))
    return fn


def _overlap_explain(index, expected, args):
    overlap, chance, _ = _overlap_reference(*args)
    if expected:
        return f"the overlap {overlap:.6g} is above chance {chance:.6g}"
    if overlap == chance:
        return f"the overlap equals chance ({overlap:.6g}), and closer_than_chance asks for overlap > chance"
    return f"the overlap {overlap:.6g} is not above chance {chance:.6g}"


def _unit_columns(M):
    return M / np.linalg.norm(M, axis=0)  # unit length, not orthogonal


def _full_bases(A, B):
    UA, UB = np.linalg.svd(A)[0], np.linalg.svd(B)[0]  # (n, n) each: full_matrices=True
    c = np.linalg.svd(UA.T @ UB, compute_uv=False)  # n cosines, all 1
    return (c[:min(A.shape[1], B.shape[1])] ** 2).mean()


register(
    Exercise(
        id="subspace-overlap",
        title="How much do two heads' subspaces overlap?",
        make_cases=_overlap_cases,
        reference=_overlap_reference,
        mutants=(
            Mutant("smallest-angle-only", _overlap_with(overlap_fn=lambda A, B: _cosines(A, B)[0] ** 2),
                   "you kept only the smallest principal angle (the largest cosine). One angle says whether "
                   "the subspaces share a direction, not how much they overlap: average cos^2 over all "
                   "min(p, q) angles."),
            Mutant("not-orthonormalised", _overlap_with(
                       overlap_fn=lambda A, B: (np.linalg.norm(A.T @ B) ** 2) / min(A.shape[1], B.shape[1])),
                   "you used A and B as they are. Principal angles need orthonormal bases of the two column "
                   "spaces: take Q_A, Q_B from np.linalg.qr (or the U of an SVD), then the singular "
                   "values of Q_A^T Q_B are the cosines."),
            Mutant("cos-not-squared", _overlap_with(overlap_fn=lambda A, B: _cosines(A, B).mean()),
                   "you averaged the cosines; the overlap averages their squares, cos^2 (the fraction of a "
                   "direction's length that lies in the other subspace)."),
            Mutant("divided-by-max", _overlap_with(
                       overlap_fn=lambda A, B: (_cosines(A, B) ** 2).sum() / max(A.shape[1], B.shape[1])),
                   "there are min(p, q) principal angles: divide the sum of cos^2 by min(p, q), not "
                   "max(p, q), so that a subspace inside the other has overlap 1."),
            Mutant("chance-min", _overlap_with(chance_fn=lambda A, B: min(A.shape[1], B.shape[1]) / A.shape[0]),
                   "for random subspaces the expected sum of cos^2 is p q / n; divided by the min(p, q) "
                   "angles that is max(p, q) / n, not min(p, q) / n."),
            Mutant("chance-sum", _overlap_with(chance_fn=lambda A, B: A.shape[1] * B.shape[1] / A.shape[0]),
                   "p q / n is the expected SUM of cos^2 for random subspaces; the overlap is a mean over "
                   "min(p, q) angles, so its chance level is max(p, q) / n."),
            Mutant("conclusion-inverted", _overlap_with(invert=True),
                   "your two numbers are right but the conclusion is upside down: closer_than_chance is "
                   "True when the overlap is LARGER than the random baseline."),
            Mutant("ties-count", _overlap_with(compare=lambda o, c: o >= c),
                   "an overlap equal to chance is not closer than chance: closer_than_chance is "
                   "overlap > chance, strictly, not >=."),
            Mutant("chance-of-B", _overlap_with(chance_fn=lambda A, B: B.shape[1] / A.shape[0]),
                   "you used B's dimension q for the chance level; it is max(p, q) / n, whichever subspace "
                   "is larger (here A's)."),
            Mutant("chance-of-A", _overlap_with(chance_fn=lambda A, B: A.shape[1] / A.shape[0]),
                   "you used A's dimension p for the chance level; it is max(p, q) / n, whichever subspace "
                   "is larger (here B's)."),
            Mutant("full-bases", _overlap_with(overlap_fn=_full_bases),
                   "your bases span the whole space: np.linalg.svd(A)[0] is n x n (full_matrices=True), and so "
                   "is np.linalg.qr(A, mode='complete')[0]. Use np.linalg.svd(A, full_matrices=False)[0] or "
                   "np.linalg.qr(A)[0], an (n, p) basis of A's column space."),
            Mutant("unit-columns", _overlap_with(overlap_fn=lambda A, B: (np.linalg.svd(
                       _unit_columns(A).T @ _unit_columns(B), compute_uv=False) ** 2).mean()),
                   "you scaled the columns to unit length but did not make them orthogonal. Principal angles "
                   "need orthonormal bases: np.linalg.qr(A)[0] (or the U of a thin SVD)."),
            Mutant("one-basis", _overlap_with(overlap_fn=lambda A, B: (np.linalg.svd(
                       _orthonormal(A).T @ B, compute_uv=False) ** 2).mean()),
                   "you orthonormalised only one of the two matrices: both need orthonormal bases, Q_A and Q_B, "
                   "before the singular values of Q_A^T Q_B are cosines."),
            Mutant("norm-not-squared", _overlap_with(overlap_fn=lambda A, B: np.linalg.norm(
                       _orthonormal(A).T @ _orthonormal(B)) / min(A.shape[1], B.shape[1])),
                   "you divided the Frobenius norm |Q_A^T Q_B| by min(p, q); the sum of cos^2 is its SQUARE, "
                   "|Q_A^T Q_B|_F^2, and the overlap that square divided by min(p, q)."),
            Mutant("mean-angle", _overlap_with(overlap_fn=lambda A, B: np.arccos(np.clip(_cosines(A, B), -1, 1)).mean()),
                   "you averaged the principal angles themselves (in radians). The overlap averages their "
                   "squared cosines, cos^2(theta_j): the singular values of Q_A^T Q_B, squared."),
            Mutant("overlap-sum", _overlap_with(overlap_fn=lambda A, B: (_cosines(A, B) ** 2).sum()),
                   "you summed cos^2 over the principal angles; the overlap is their mean, the sum divided "
                   "by min(p, q), so that it lies between 0 and 1."),
        ),
        returns=("overlap", "chance", "closer_than_chance"),
        explain=_overlap_explain,
        rules=(
            Rule("tie", "an overlap equal to chance is not closer than chance (overlap > chance, strictly)",
                 ("a tie: span(e1, e2) and span(e1, e3) in R^4, overlap = chance = 1/2",),
                 lambda A, B: _overlap_reference(A, B)[0] == _overlap_reference(A, B)[1], ("ties-count",), quote='is `overlap > chance`, strictly'),
            Rule("edge-size", "p != q, either way round: chance is max(p, q) / n over min(p, q) angles",
                 ("p = 2, q = 4 in R^10", "p = 3, q = 1 in R^9"), lambda A, B: A.shape[1] != B.shape[1],
                 ("chance-min", "chance-of-A", "chance-of-B", "divided-by-max"), quote='$p$ and $q$ may differ either way'),
            Rule("range", "columns of very different lengths: only the column spaces count",
                 ("columns of very different lengths",),
                 lambda A, B: np.ptp(np.log10(np.linalg.norm(A, axis=0))) > 2, ("not-orthonormalised",), quote='both of full column rank'),
            Rule("edge-size", "orthogonal subspaces have overlap 0; one inside the other, overlap 1",
                 ("orthogonal: span(e1, e2) and span(e3)", "one subspace inside the other"),
                 lambda A, B: _overlap_reference(A, B)[0] in (0.0, 1.0) or abs(_overlap_reference(A, B)[0] - 1) < 1e-12,
                 ("full-bases", "divided-by-max"), quote='is the mean of'),
            output_rule('a tuple (float, float, bool)', 'two random 3-dim subspaces of R^24',
                         'Return a tuple `(overlap, chance, closer_than_chance)`', _overlap_reference,
                         'tuple-as-list', 'float-for-bool'),
            in_place_rule('two random 3-dim subspaces of R^24', _overlap_reference),
        ),
        framing=('Write `my_overlap(A, B)`', 'Then run it on two heads of MiniLM'),
        difficulty=2,
        minutes=20,
        alternatives=(
            lambda A, B: (lambda c, m: (float((c**2).sum() / m), max(A.shape[1], B.shape[1]) / A.shape[0],
                                        bool((c**2).sum() / m > max(A.shape[1], B.shape[1]) / A.shape[0])))(
                _cosines(A, B), min(A.shape[1], B.shape[1])),
            lambda A, B: (lambda QA, QB: (lambda o, ch: (o, ch, o > ch))(
                float(np.trace(QA @ QA.T @ QB @ QB.T)) / min(A.shape[1], B.shape[1]),
                max(A.shape[1], B.shape[1]) / A.shape[0]))(
                np.linalg.svd(A, full_matrices=False)[0], np.linalg.svd(B, full_matrices=False)[0]),
        ),
    )
)

EXERCISES = ("split-heads", "multi-head-forward", "mha-param-count", "head-ablation", "subspace-overlap")
