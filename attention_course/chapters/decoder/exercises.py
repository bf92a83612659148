"""Chapter 9 exercises: the parts of a Llama-style decoder, checked against the package's.

Each exercise lists typical mistakes (mutants) with their feedback; inputs are float64 torch tensors.

Signatures the notebook's stubs use (weights are
:class:`~attention_course.models.smollm2.DecoderLayer` / ``DecoderWeights``, used as ``x @ W``):

* ``rms-norm``: ``fn(x, weight, eps) -> (..., d)`` over the last axis.
* ``rope``: ``fn(x, positions, base) -> (..., T, d_head)``, rotate-half pairs ``(i, i + d_head/2)``.
* ``grouped-attention``: ``fn(q, k, v) -> (B, h, T, d_head)``: causal, the queries the last ``T`` of the
  ``S`` positions, key/value head ``i // (h / h_kv)`` for query head ``i``.
* ``decoder-block``: ``fn(x, layer, config, positions) -> (B, T, d)``: one pre-norm layer.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ...exercises._core import Case, Exercise, Mutant, output_rule, register, Rule
from ...models.smollm2 import DecoderConfig
from .block import decoder_block
from .grouped_attention import decoder_mask, grouped_query_attention
from ..encoder.random_weights import _randn
from .random_weights import TINY_DECODER, random_decoder
from .rms_norm import rms_norm
from .rope import apply_rope, apply_rope_interleaved, rotate_half
from .swiglu import swiglu

__all__ = ["EXERCISES", "TWO_GROUPS"]


# ============================================================ 1. RMSNorm
def _rms_cases() -> list[Case]:
    g = torch.Generator().manual_seed(91)
    zero = _randn(g, 1, 2, 6)
    zero[0, 1] = 0.0  # a token of zeros: mean square 0
    return [
        Case("B=2, T=3, d=8, eps=1e-5", (_randn(g, 2, 3, 8, std=2.0) + 1.0, 1 + _randn(g, 8, std=0.3), 1e-5)),
        Case("T=1, one token", (_randn(g, 1, 1, 6) + 0.5, 1 + _randn(g, 6, std=0.3), 1e-5)),
        Case("a token of zeros (mean square 0), eps=1e-6", (zero, 1 + _randn(g, 6, std=0.3), 1e-6)),
        Case("tiny values (rms about 1e-3), eps=1e-5", (_randn(g, 2, 2, 8, std=1e-3), 1 + _randn(g, 8, std=0.3), 1e-5)),
        Case("d=576, SmolLM2's width", (_randn(g, 1, 4, 576) + 0.3, 1 + _randn(g, 576, std=0.3), 1e-5)),
    ]


def _rms_variant(*, centre: bool = False, eps_where: str = "inside", gain: str = "g", dim: int = -1,
                 root: bool = True, reduce: str = "mean"):
    def f(x, weight, eps):
        y = x - x.mean(dim=dim, keepdim=True) if centre else x
        ms = (y**2).mean(dim=dim, keepdim=True) if reduce == "mean" else (y**2).sum(dim=dim, keepdim=True)
        if eps_where == "inside":
            denom = (ms + eps) ** 0.5 if root else ms + eps
        elif eps_where == "outside":
            denom = ms**0.5 + eps
        else:
            denom = ms**0.5
        out = y / denom
        return {"g": out * weight, "none": out, "one-plus": out * (1 + weight)}[gain]

    return f


def _rms_by(denominator, gain_first: bool = False):
    """x / denominator(x, eps) * weight: RMSNorm with another statistic in place of the root mean square."""
    def f(x, weight, eps):
        if gain_first:  # the gain applied first, then the whole normalised
            y = x * weight
            return y / (y.pow(2).mean(-1, keepdim=True) + eps).sqrt()
        return x / denominator(x, eps) * weight

    return f


def _rms_torch(x, weight, eps):
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


def _rms_norm_of_vector(x, weight, eps):
    d = x.shape[-1]
    return x / torch.sqrt(torch.linalg.vector_norm(x, dim=-1, keepdim=True) ** 2 / d + eps) * weight


register(
    Exercise(
        id="rms-norm",
        title="RMSNorm",
        make_cases=_rms_cases,
        reference=rms_norm,
        mutants=(
            Mutant("subtracts-mean", _rms_variant(centre=True),
                   "you subtracted the mean first: that is LayerNorm's centring. RMSNorm divides x itself by "
                   "its root mean square, x / sqrt(mean(x^2) + eps), with no mean taken away."),
            Mutant("eps-outside-sqrt", _rms_variant(eps_where="outside"),
                   "you added eps outside the square root, x / (sqrt(mean(x^2)) + eps); RMSNorm adds it to the "
                   "mean square, x / sqrt(mean(x^2) + eps). The two part on tokens whose mean square is close "
                   "to eps (the case with rms 1e-3)."),
            Mutant("no-eps", _rms_variant(eps_where="none"),
                   "you left out eps: a token of zeros gives 0/0 = NaN. Divide by sqrt(mean(x^2) + eps)."),
            Mutant("no-gain", _rms_variant(gain="none"),
                   "you normalised but did not multiply by the learned gain: multiply by weight."),
            Mutant("one-plus-gain", _rms_variant(gain="one-plus"),
                   "you multiplied by (1 + weight), Gemma's convention; Llama's RMSNorm (SmolLM2's) multiplies "
                   "by weight itself."),
            Mutant("wrong-axis", _rms_variant(dim=-2),
                   "you averaged over the positions (dim=-2), mixing tokens; each token is normalised over its "
                   "own d features, the last axis (dim=-1, keepdim=True)."),
            Mutant("no-square-root", _rms_variant(root=False),
                   "you divided by the mean square; divide by its square root, the root mean square."),
            Mutant("sum-not-mean", _rms_variant(reduce="sum"),
                   "you took the sum of squares over the d features; RMSNorm takes their mean, so divide the sum "
                   "by d (x.pow(2).mean(dim=-1, keepdim=True))."),
            Mutant("divides-by-std", _rms_by(lambda x, eps: (x.var(-1, keepdim=True, unbiased=False) + eps).sqrt()),
                   "you divided by the standard deviation, which measures the spread around the mean; RMSNorm "
                   "divides by the root mean square of x itself, sqrt(mean(x^2) + eps), with no mean taken away."),
            Mutant("one-statistic-for-all", _rms_by(lambda x, eps: (x.pow(2).mean() + eps).sqrt()),
                   "you took one mean square over the whole tensor; each token has its own, over its d features "
                   "(x.pow(2).mean(dim=-1, keepdim=True))."),
            Mutant("gain-before-norm", _rms_by(None, gain_first=True),
                   "you multiplied by weight before normalising, so the norm undoes the gain; normalise x first, "
                   "then multiply by weight."),
            Mutant("divides-by-d-minus-1", _rms_by(lambda x, eps: (x.pow(2).sum(-1, keepdim=True) / (x.shape[-1] - 1) + eps).sqrt()),
                   "you divided the sum of squares by d - 1 (the unbiased variance's habit); the mean square "
                   "divides by d."),
            Mutant("mean-absolute-value", _rms_by(lambda x, eps: x.abs().mean(-1, keepdim=True) + eps),
                   "you divided by the mean absolute value; RMSNorm divides by the root mean square, "
                   "sqrt(mean(x^2) + eps)."),
            Mutant("first-axis", _rms_by(lambda x, eps: (x.pow(2).mean(0, keepdim=True) + eps).sqrt()),
                   "you averaged over the first axis (dim=0, the batch), mixing sequences; each token is "
                   "normalised over its own d features, the last axis (dim=-1, keepdim=True)."),
        ),
        rules=(
            Rule("range", "a token of zeros gives zeros, not 0/0", ("a token of zeros (mean square 0), eps=1e-6",),
                 lambda x, w, eps: bool((x.abs().amax(-1) == 0).any()), ("no-eps",), quote='a token of zeros'),
            Rule("threshold", "eps is added to the mean square inside the root: it decides near mean square = eps",
                 ("tiny values (rms about 1e-3), eps=1e-5",),
                 lambda x, w, eps: float(x.pow(2).mean(-1).max()) < 10 * eps, ("eps-outside-sqrt",), quote='with `eps` added to the mean square, inside the root'),
            Rule("edge-size", "one token: its statistics are its own", ("T=1, one token",),
                 lambda x, w, eps: x.shape[-2] == 1, ("wrong-axis", "subtracts-mean", "no-gain", "one-plus-gain"), quote='The checks include one token'),
            Rule("edge-size", "d = 576 features: the mean, not the sum", ("d=576, SmolLM2's width",),
                 lambda x, w, eps: x.shape[-1] == 576, ("sum-not-mean", "no-square-root"), quote='`d = 576`'),
            Rule("range", "each token is divided by its own root mean square, then multiplied by weight",
                 ("B=2, T=3, d=8, eps=1e-5",), lambda x, w, eps: x.shape[0] > 1 and x.shape[1] > 1 and bool((w != 1).all()),
                 ("divides-by-std", "one-statistic-for-all", "gain-before-norm", "divides-by-d-minus-1",
                  "mean-absolute-value", "first-axis"), quote="the root mean square of its own `d` features"),
            output_rule("a torch tensor of x's shape and dtype", 'B=2, T=3, d=8, eps=1e-5',
                        "return a torch tensor of `x`'s shape and dtype", rms_norm, 'float32'),
        ),
        framing=('Write `my_rms_norm(x, weight, eps)`',),
        alternatives=(_rms_torch, _rms_norm_of_vector),
        array_type="torch",
        difficulty=1,
        minutes=5,
    )
)


# ============================================================ 2. RoPE
def _rope_cases() -> list[Case]:
    g = torch.Generator().manual_seed(92)
    return [
        Case("B=1, 2 heads, T=5, d_head=8, positions 0 to 4, base 10000",
             (_randn(g, 1, 2, 5, 8), torch.arange(5), 10000.0)),
        Case("positions 7, 8, 9 (after 7 cached tokens), base 100", (_randn(g, 2, 1, 3, 4), torch.arange(7, 10), 100.0)),
        Case("T=1 at position 0: nothing turns", (_randn(g, 1, 3, 1, 8), torch.arange(1), 10000.0)),
        Case("d_head=16, base 100000 (SmolLM2's), positions 0 to 3", (_randn(g, 1, 2, 4, 16), torch.arange(4), 1e5)),
        Case("positions 3, 0, 9, 2, 5 (not consecutive)", (_randn(g, 1, 2, 5, 8), torch.tensor([3, 0, 9, 2, 5]), 100.0)),
    ]


def _angles(positions, d, base, dtype, exponent="2i/d"):
    i = torch.arange(d // 2, dtype=dtype)
    if exponent == "2i/d":
        freq = base ** (-2 * i / d)
    elif exponent == "i/d":
        freq = base ** (-i / d)
    else:  # not inverted
        freq = base ** (2 * i / d)
    return positions.to(dtype)[:, None] * freq[None, :]  # (T, d/2)


def _rope_variant(*, exponent: str = "2i/d", direction: int = 1, positions_mode: str = "given",
                  per_feature: bool = False, swap_sin_cos: bool = False, half_sign: int = -1):
    def f(x, positions, base):
        T, d = x.shape[-2], x.shape[-1]
        pos = {"given": positions, "arange": torch.arange(T), "from-1": positions + 1,
               "shifted": positions - positions[0]}[positions_mode]
        if per_feature:
            angles = pos.to(x.dtype)[:, None] * base ** (-torch.arange(d, dtype=x.dtype) / d)[None, :]  # (T, d)
        else:
            a = _angles(pos, d, base, x.dtype, exponent)
            angles = torch.cat([a, a], dim=-1)  # (T, d)
        turned = rotate_half(x) if half_sign == -1 else torch.cat([x[..., d // 2:], x[..., :d // 2]], dim=-1)
        cos, sin = (angles.sin(), angles.cos()) if swap_sin_cos else (angles.cos(), angles.sin())
        return x * cos + direction * turned * sin

    return f


def _rope_complex(x, positions, base):
    d = x.shape[-1]
    half = d // 2
    z = torch.complex(x[..., :half], x[..., half:])  # feature i + 1j * feature i + d/2
    theta = positions.to(x.dtype)[:, None] * base ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)[None, :]
    z = z * torch.polar(torch.ones_like(theta), theta)
    return torch.cat([z.real, z.imag], dim=-1)


def _rope_loop(x, positions, base):
    out = x.clone()
    d = x.shape[-1]
    for t, m in enumerate(positions.tolist()):
        for i in range(d // 2):
            a = m * base ** (-2 * i / d)
            c, s = math.cos(a), math.sin(a)
            x1, x2 = x[..., t, i], x[..., t, i + d // 2]
            out[..., t, i], out[..., t, i + d // 2] = x1 * c - x2 * s, x1 * s + x2 * c
    return out


register(
    Exercise(
        id="rope",
        title="Rotary position embeddings",
        make_cases=_rope_cases,
        reference=apply_rope,
        mutants=(
            Mutant("interleaved-pairs", apply_rope_interleaved,
                   "you rotated adjacent pairs (2i, 2i+1), the interleaved layout of the RoFormer paper and "
                   "llama.cpp; these weights use rotate-half, which pairs feature i with feature i + d_head/2: "
                   "x * cos + rotate_half(x) * sin, with rotate_half(x) = cat(-x2, x1)."),
            Mutant("wrong-direction", _rope_variant(direction=-1),
                   "you turned every pair the wrong way (the sign of the sin term): x * cos + rotate_half(x) * sin, "
                   "with rotate_half(x) = cat(-x[..., d/2:], x[..., :d/2])."),
            Mutant("frequency-i-over-d", _rope_variant(exponent="i/d"),
                   "your frequencies are base^(-i/d); pair i turns at theta_i = base^(-2i/d), i = 0 .. d/2 - 1 "
                   "(torch.arange(0, d, 2) / d)."),
            Mutant("frequency-not-inverted", _rope_variant(exponent="up"),
                   "your frequencies grow with i (base^(2i/d)); they shrink: theta_i = base^(-2i/d) = 1 / base^(2i/d), "
                   "so the first pairs turn fastest."),
            Mutant("positions-ignored", _rope_variant(positions_mode="arange"),
                   "you rotated by 0, 1, ..., T-1 whatever the positions: use the positions you are given (after "
                   "a cache of 7 tokens, the new tokens are at 7, 8, 9)."),
            Mutant("positions-from-1", _rope_variant(positions_mode="from-1"),
                   "you counted positions from 1; the angle of position m is m * theta_i, so position 0 is not "
                   "rotated at all."),
            Mutant("one-angle-per-feature", _rope_variant(per_feature=True),
                   "you gave every feature its own frequency; RoPE turns pairs, so features i and i + d/2 share "
                   "the angle m * theta_i (concatenate the d/2 angles with themselves)."),
            Mutant("positions-shifted-to-0", _rope_variant(positions_mode="shifted"),
                   "you subtracted the first position, so your angles restart at 0; use the positions as given "
                   "(after a cache of 7 tokens, the new tokens are at 7, 8, 9 and turn by 7, 8, 9 times theta)."),
            Mutant("sin-cos-swapped", _rope_variant(swap_sin_cos=True),
                   "you swapped cos and sin: a turn by the angle a is x * cos(a) + rotate_half(x) * sin(a), so "
                   "position 0 (a = 0) leaves x unchanged."),
            Mutant("rotate-half-without-minus", _rope_variant(half_sign=1),
                   "your rotate_half lost its minus sign, cat(x2, x1), which is not a rotation; it is "
                   "cat(-x2, x1): (x1, x2) turns to (x1 cos - x2 sin, x1 sin + x2 cos)."),
        ),
        rules=(
            Rule("range", "the angles use the positions given, which need not start at 0",
                 ("positions 7, 8, 9 (after 7 cached tokens), base 100",), lambda x, p, b: int(p[0]) > 0,
                 ("positions-ignored", "positions-from-1", "positions-shifted-to-0"), quote='Positions need not start at 0'),
            Rule("edge-size", "position 0 is not rotated", ("T=1 at position 0: nothing turns",),
                 lambda x, p, b: p.tolist() == [0], ("positions-from-1",), quote='of the token at position `m` by the angle'),
            Rule("edge-size", "several pairs: feature i pairs with i + d_head/2 and turns at base^(-2i/d)",
                 ("B=1, 2 heads, T=5, d_head=8, positions 0 to 4, base 10000",
                  "d_head=16, base 100000 (SmolLM2's), positions 0 to 3"), lambda x, p, b: x.shape[-1] >= 8,
                 ("interleaved-pairs", "frequency-i-over-d", "frequency-not-inverted", "one-angle-per-feature",
                  "wrong-direction", "sin-cos-swapped", "rotate-half-without-minus"), quote='turn feature pair `(i, i + d_head/2)`'),
            Rule("range", "positions need not be consecutive: each token turns by its own position",
                 ("positions 3, 0, 9, 2, 5 (not consecutive)",), lambda x, p, b: bool((p.diff() != 1).any()),
                 ("positions-ignored", "positions-shifted-to-0"), quote='nor be consecutive'),
            output_rule("a torch tensor of x's shape and dtype",
                        'B=1, 2 heads, T=5, d_head=8, positions 0 to 4, base 10000', "Return a torch tensor of `x`'s",
                        apply_rope, 'float32'),
        ),
        framing=('Write `my_rope(x, positions, base)`',),
        alternatives=(_rope_complex, _rope_loop),
        array_type="torch",
        difficulty=2,
        minutes=15,
    )
)


# ============================================================ 3. grouped-query attention
def _gqa_cases() -> list[Case]:
    g = torch.Generator().manual_seed(93)

    def qkv(B, h, h_kv, T, S, d):
        return _randn(g, B, h, T, d), _randn(g, B, h_kv, S, d), _randn(g, B, h_kv, S, d)

    return [
        Case("4 query heads over 2 key/value heads, T=S=5", qkv(2, 4, 2, 5, 5, 4)),
        Case("9 query heads over 3 (SmolLM2's grouping), T=S=4", qkv(1, 9, 3, 4, 4, 8)),
        Case("2 new queries after 3 cached positions (T=2, S=5)", qkv(1, 4, 2, 2, 5, 4)),
        Case("one new query after 5 cached positions (T=1, S=6)", qkv(2, 2, 1, 1, 6, 4)),
        Case("T=S=1, one token", qkv(1, 4, 2, 1, 1, 4)),
    ]


def _gqa_variant(*, repeat: str = "interleave", mask: str = "bottom-right", scale: str = "sqrt", softmax_dim: int = -1,
                 masked: float = float("-inf"), nan: bool = False):
    def f(q, k, v):
        B, h, T, d = q.shape
        h_kv, S = k.shape[1], k.shape[2]
        group = h // h_kv
        if repeat == "interleave":
            k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
        else:
            k, v = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)
        s = q @ k.transpose(-2, -1)  # (B, h, T, S)
        s = s / {"sqrt": math.sqrt(d), "none": 1.0, "d": float(d)}[scale]
        allowed = {"bottom-right": decoder_mask(T, S), "top-left": torch.ones(T, S, dtype=torch.bool).tril(),
                   "strict": torch.ones(T, S, dtype=torch.bool).tril(S - T - 1),
                   "none": torch.ones(T, S, dtype=torch.bool), "after": torch.ones(T, S, dtype=torch.bool),
                   "one-late": torch.ones(T, S, dtype=torch.bool).tril(S - T + 1),
                   "offset-negated": torch.ones(T, S, dtype=torch.bool).tril(T - S)}[mask]
        s = s.masked_fill(~allowed, masked)
        w = torch.softmax(s, dim=softmax_dim)
        if mask == "after":
            w = w * decoder_mask(T, S)
        return w @ v if nan else torch.nan_to_num(w) @ v

    return f


def _gqa_sdpa(q, k, v, top_left: bool = False):
    """torch's attention on repeated key/value heads; ``top_left`` aligns the causal mask wrongly (queries at 0..T-1)."""
    T, S = q.shape[2], k.shape[2]
    g = q.shape[1] // k.shape[1]
    return F.scaled_dot_product_attention(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1),
                                          attn_mask=torch.ones(T, S, dtype=torch.bool).tril(0 if top_left else S - T))


def _gqa_grouped_view(q, k, v):
    """No repeat at all: the query heads reshaped into (h_kv, group) so each group meets its own key/value head."""
    B, h, T, d = q.shape
    h_kv, S = k.shape[1], k.shape[2]
    qg = q.reshape(B, h_kv, h // h_kv, T, d)  # (B, h_kv, group, T, d)
    s = qg @ k[:, :, None].transpose(-2, -1) / math.sqrt(d)  # (B, h_kv, group, T, S)
    pos = torch.arange(T)[:, None] + S - T
    s = s.masked_fill(torch.arange(S)[None, :] > pos, float("-inf"))
    return (torch.softmax(s, -1) @ v[:, :, None]).reshape(B, h, T, d)


register(
    Exercise(
        id="grouped-attention",
        title="Causal grouped-query attention",
        make_cases=_gqa_cases,
        reference=grouped_query_attention,
        mutants=(
            Mutant("repeat-not-interleave", _gqa_variant(repeat="repeat"),
                   "your query heads read the wrong key/value heads: .repeat tiles the heads (0, 1, 0, 1, ...), but "
                   "each key/value head serves a block of consecutive query heads (0, 0, 1, 1, ...): use "
                   "k.repeat_interleave(h // h_kv, dim=1)."),
            Mutant("no-causal-mask", _gqa_variant(mask="none"),
                   "your queries read later positions: fill the scores of keys j > the query's position with "
                   "-inf before the softmax."),
            Mutant("mask-top-left", _gqa_variant(mask="top-left"),
                   "with a cache (S > T), your mask is aligned at the top-left, so the new queries act as if they "
                   "were at positions 0..T-1. They are the last T of S positions: query t sits at S - T + t and "
                   "reads keys j <= S - T + t (torch.ones(T, S).tril(S - T))."),
            Mutant("mask-excludes-self", _gqa_variant(mask="strict"),
                   "your mask is off by one: a query also reads its own position, so keep j <= position, not "
                   "j < position."),
            Mutant("mask-excludes-self-nan", _gqa_variant(mask="strict", nan=True),
                   "you masked the diagonal too (j < position): the first query then has no key left, its scores are "
                   "all -inf and the softmax gives NaN. A query also reads its own position: keep j <= S - T + t, "
                   "torch.ones(T, S, dtype=torch.bool).tril(diagonal=S - T)."),
            Mutant("no-scale", _gqa_variant(scale="none"),
                   "you did not scale the scores: divide q @ k^T by sqrt(d_head)."),
            Mutant("scale-by-d", _gqa_variant(scale="d"),
                   "you divided the scores by d_head; divide by its square root, sqrt(d_head)."),
            Mutant("softmax-over-queries", _gqa_variant(softmax_dim=-2),
                   "your softmax normalised over the queries; it runs over the keys, the last axis of the "
                   "(B, h, T, S) scores (dim=-1)."),
            Mutant("mask-after-softmax", _gqa_variant(mask="after"),
                   "you zeroed the later keys after the softmax, so the weights no longer sum to 1: fill the "
                   "scores with -inf before the softmax."),
            Mutant("mask-one-late", _gqa_variant(mask="one-late"),
                   "your mask is off by one the other way: each query also reads the key just after its own "
                   "position; keep j <= S - T + t (tril(diagonal=S - T)), not tril(diagonal=S - T + 1)."),
            Mutant("mask-offset-negated", _gqa_variant(mask="offset-negated"),
                   "your mask's offset has the wrong sign: with a cache (S > T), query t sits at S - T + t, so keep "
                   "tril(diagonal=S - T), not tril(diagonal=T - S) (which leaves the first queries nothing to read)."),
            Mutant("masked-with-zero", _gqa_variant(masked=0.0),
                   "you set the masked scores to 0, which still gets weight exp(0) in the softmax; set them to "
                   "-inf so later keys get weight exactly 0."),
        ),
        rules=(
            Rule("range", "each key/value head serves consecutive query heads",
                 ("4 query heads over 2 key/value heads, T=S=5", "9 query heads over 3 (SmolLM2's grouping), T=S=4"),
                 lambda q, k, v: 1 < k.shape[1] < q.shape[1], ("repeat-not-interleave",), quote='query head `i` uses key/value head'),
            Rule("edge-size", "with a cache (S > T) the queries are the last T positions",
                 ("2 new queries after 3 cached positions (T=2, S=5)", "one new query after 5 cached positions (T=1, S=6)"),
                 lambda q, k, v: k.shape[2] > q.shape[2], ("mask-top-left", "mask-excludes-self", "mask-excludes-self-nan", "mask-offset-negated"), quote='The queries are the last `T` of the `S` positions'),
            Rule("edge-size", "one token reads itself only", ("T=S=1, one token",),
                 lambda q, k, v: q.shape[2] == k.shape[2] == 1, ("mask-excludes-self", "mask-excludes-self-nan", "repeat-not-interleave"), quote='may read keys at their own position or earlier'),
            Rule("range", "later keys get weight exactly 0", ("4 query heads over 2 key/value heads, T=S=5",),
                 lambda q, k, v: q.shape[2] > 1, ("no-causal-mask", "mask-after-softmax", "softmax-over-queries",
                                                  "mask-one-late", "masked-with-zero"), quote='may read keys at their own position or earlier'),
            output_rule("a torch tensor (B, h, T, d) in q's dtype", '4 query heads over 2 key/value heads, T=S=5',
                        "return a torch tensor of shape `(B, h, T, d)` in `q`'s dtype", grouped_query_attention,
                        'float32'),
        ),
        framing=('Write `my_grouped_attention(q, k, v)`', 'Scale the scores by'),
        alternatives=(_gqa_sdpa, _gqa_grouped_view),
        array_type="torch",
        difficulty=2,
        minutes=15,
    )
)


# ============================================================ 4. the decoder block
#: A second tiny shape: 6 query heads over 3 key/value heads, d_head = 4.
TWO_GROUPS = DecoderConfig(vocab_size=20, d_model=24, n_layers=1, n_heads=6, n_kv_heads=3, d_ff=40, rope_base=100.0, eps=1e-6)


def _block_cases() -> list[Case]:
    g = torch.Generator().manual_seed(94)
    w, w6 = random_decoder(941), random_decoder(942, TWO_GROUPS)
    return [
        Case("B=2, T=5, positions 0 to 4", (_randn(g, 2, 5, 16), w.layers[0], w.config, torch.arange(5))),
        Case("T=1, one token", (_randn(g, 1, 1, 16), w.layers[1], w.config, torch.arange(1))),
        Case("positions 3 to 6", (_randn(g, 1, 4, 16), w.layers[0], w.config, torch.arange(3, 7))),
        Case("6 query heads over 3 key/value heads, eps=1e-6", (_randn(g, 2, 4, 24), w6.layers[0], w6.config, torch.arange(4))),
        Case("positions 0, 2, 5, 11 (not consecutive)", (_randn(g, 1, 4, 16), w.layers[1], w.config, torch.tensor([0, 2, 5, 11]))),
    ]


def _ln(x, weight, eps):
    return F.layer_norm(x, (x.shape[-1],), weight, None, eps)


def _block_variant(*, order: str = "pre", norms: str = "right", act: str = "silu", gate: str = "gate",
                   rope_k: bool = True, rope_v: bool = False, norm_fn=rms_norm, attn_residual: bool = True,
                   residual: str = "stream", mlp_reads: str = "a", split: str = "transpose", merge: str = "transpose",
                   w_o: bool = True, eps=None, positions_mode: str = "given"):
    """The reference with one mistake: each keyword names the step it changes (the defaults are right)."""
    def heads(z, B, T, n, dh):  # (B, T, n dh) -> (B, n, T, dh)
        return z.view(B, T, n, dh).transpose(1, 2) if split == "transpose" else z.reshape(B, n, T, dh)

    def attend(x, layer, cfg, positions):
        B, T, _ = x.shape
        h, h_kv, dh = cfg.n_heads, cfg.n_kv_heads, cfg.d_head
        if positions_mode == "arange":
            positions = torch.arange(T)
        q, k, v = heads(x @ layer.W_q, B, T, h, dh), heads(x @ layer.W_k, B, T, h_kv, dh), heads(x @ layer.W_v, B, T, h_kv, dh)
        q = apply_rope(q, positions, cfg.rope_base)
        k = apply_rope(k, positions, cfg.rope_base) if rope_k else k
        v = apply_rope(v, positions, cfg.rope_base) if rope_v else v
        o = grouped_query_attention(q, k, v)  # (B, h, T, dh)
        o = o.transpose(1, 2).reshape(B, T, h * dh) if merge == "transpose" else o.reshape(B, T, h * dh)
        return o @ layer.W_o if w_o else o

    def mlp(x, layer):
        a, b = (x @ layer.W_gate, x @ layer.W_up) if gate == "gate" else (x @ layer.W_up, x @ layer.W_gate)
        fn = {"silu": F.silu, "gelu": F.gelu, "relu": torch.relu}[act]
        return (fn(a) * b) @ layer.W_down

    def f(x, layer, cfg, positions):
        n1, n2 = {"right": (layer.attn_norm, layer.mlp_norm), "swapped": (layer.mlp_norm, layer.attn_norm),
                  "attn-twice": (layer.attn_norm, layer.attn_norm)}[norms]
        e = cfg.eps if eps is None else eps
        if order == "pre" and residual == "normed-attention":  # the attention residual from the normalised x only
            xn = norm_fn(x, n1, e)
            a = xn + attend(xn, layer, cfg, positions)
            return a + mlp(norm_fn(a, n2, e), layer)
        if order == "pre" and residual == "normed":  # each residual added to the normalised stream
            xn = norm_fn(x, n1, e)
            a = xn + attend(xn, layer, cfg, positions)
            an = norm_fn(a, n2, e)
            return an + mlp(an, layer)
        if order == "pre":
            a = (x if attn_residual else 0) + attend(norm_fn(x, n1, e), layer, cfg, positions)
            return a + mlp(norm_fn(a if mlp_reads == "a" else x, n2, e), layer)
        if order == "sum-renormalised":  # pre-norm branches, then the block's output normalised again
            a = x + attend(norm_fn(x, n1, e), layer, cfg, positions)
            return norm_fn(a + mlp(norm_fn(a, n2, e), layer), n2, e)
        if order == "sandwich":  # each branch's input normalised, and each sum after the add too
            a = norm_fn(x + attend(norm_fn(x, n1, e), layer, cfg, positions), n1, e)
            return norm_fn(a + mlp(norm_fn(a, n2, e), layer), n2, e)
        if order == "post-attention":  # attention post-norm (BERT's), the feed-forward pre-norm
            a = norm_fn(x + attend(x, layer, cfg, positions), n1, e)
            return a + mlp(norm_fn(a, n2, e), layer)
        if order == "post-mlp":  # attention pre-norm, the feed-forward post-norm (BERT's)
            a = x + attend(norm_fn(x, n1, e), layer, cfg, positions)
            return norm_fn(a + mlp(a, layer), n2, e)
        a = norm_fn(x + attend(x, layer, cfg, positions), n1, cfg.eps)  # post-norm
        return norm_fn(a + mlp(a, layer), n2, cfg.eps)

    return f


def _block_written_out(x, layer, cfg, positions):
    B, T, d = x.shape
    xn = rms_norm(x, layer.attn_norm, cfg.eps)
    q = apply_rope((xn @ layer.W_q).view(B, T, cfg.n_heads, cfg.d_head).transpose(1, 2), positions, cfg.rope_base)
    k = apply_rope((xn @ layer.W_k).view(B, T, cfg.n_kv_heads, cfg.d_head).transpose(1, 2), positions, cfg.rope_base)
    v = (xn @ layer.W_v).view(B, T, cfg.n_kv_heads, cfg.d_head).transpose(1, 2)
    a = x + _gqa_sdpa(q, k, v).transpose(1, 2).reshape(B, T, d) @ layer.W_o
    return a + swiglu(rms_norm(a, layer.mlp_norm, cfg.eps), layer)


def _block_linear(x, layer, cfg, positions):
    """With torch's functional layers: F.linear takes (out, in) weights, so W.T."""
    B, T, d = x.shape
    xn = F.rms_norm(x, (d,), layer.attn_norm, cfg.eps)
    q = F.linear(xn, layer.W_q.T).view(B, T, cfg.n_heads, cfg.d_head).transpose(1, 2)
    k = F.linear(xn, layer.W_k.T).view(B, T, cfg.n_kv_heads, cfg.d_head).transpose(1, 2)
    v = F.linear(xn, layer.W_v.T).view(B, T, cfg.n_kv_heads, cfg.d_head).transpose(1, 2)
    q, k = _rope_complex(q, positions, cfg.rope_base), _rope_complex(k, positions, cfg.rope_base)
    a = x + F.linear(_gqa_grouped_view(q, k, v).transpose(1, 2).reshape(B, T, d), layer.W_o.T)
    m = F.rms_norm(a, (d,), layer.mlp_norm, cfg.eps)
    return a + F.linear(F.silu(F.linear(m, layer.W_gate.T)) * F.linear(m, layer.W_up.T), layer.W_down.T)


register(
    Exercise(
        id="decoder-block",
        title="The pre-norm decoder block",
        make_cases=_block_cases,
        reference=decoder_block,
        mutants=(
            Mutant("post-norm", _block_variant(order="post"),
                   "you normalised after adding the residual, RMSNorm(x + Attn(x)): that is a post-norm block, "
                   "BERT's order. A pre-norm block normalises the branch's input and adds the branch's output to "
                   "x untouched: a = x + Attn(RMSNorm1(x)), y = a + SwiGLU(RMSNorm2(a))."),
            Mutant("output-renormalised", _block_variant(order="sum-renormalised"),
                   "you normalised after adding the residual: your block ends with RMSNorm(a + SwiGLU(...)), as a "
                   "post-norm block (BERT) does. A pre-norm block normalises only the branch's input and returns "
                   "the sum as it is: y = a + SwiGLU(RMSNorm2(a)), with no norm after the add."),
            Mutant("sandwich-norms", _block_variant(order="sandwich"),
                   "you normalised after adding the residual as well as before each branch: a = RMSNorm1(x + "
                   "Attn(RMSNorm1(x))). A pre-norm block normalises only the branch's input and leaves the sum "
                   "alone: a = x + Attn(RMSNorm1(x)), y = a + SwiGLU(RMSNorm2(a))."),
            Mutant("attention-post-norm", _block_variant(order="post-attention"),
                   "you normalised after adding the residual in the attention half, a = RMSNorm1(x + Attn(x)), as "
                   "BERT does; a pre-norm block normalises the branch's input: a = x + Attn(RMSNorm1(x))."),
            Mutant("feed-forward-post-norm", _block_variant(order="post-mlp"),
                   "you normalised after adding the residual in the feed-forward half, y = RMSNorm2(a + SwiGLU(a)), "
                   "as BERT does; a pre-norm block normalises the branch's input: y = a + SwiGLU(RMSNorm2(a))."),
            Mutant("norms-swapped", _block_variant(norms="swapped"),
                   "the two norms are swapped: attn_norm goes before attention, mlp_norm before the feed-forward."),
            Mutant("gate-and-up-swapped", _block_variant(gate="swapped"),
                   "SiLU goes on the gate, not on the up projection: (silu(x @ W_gate) * (x @ W_up)) @ W_down."),
            Mutant("gelu-gate", _block_variant(act="gelu"),
                   "the gate's activation is SiLU, z * sigmoid(z), not GELU: that is what makes it SwiGLU."),
            Mutant("relu-gate", _block_variant(act="relu"),
                   "the gate's activation is SiLU, z * sigmoid(z), not ReLU."),
            Mutant("no-rope-on-keys", _block_variant(rope_k=False),
                   "you rotated the queries but not the keys: RoPE turns both, so that their score depends on "
                   "how far apart they are."),
            Mutant("rope-on-values", _block_variant(rope_v=True),
                   "you rotated the values too; RoPE turns the queries and the keys only, the values stay as they are."),
            Mutant("layer-norm-not-rms", _block_variant(norm_fn=_ln),
                   "your norm subtracts the mean (LayerNorm); these blocks use RMSNorm, x / sqrt(mean(x^2) + eps) * g."),
            Mutant("no-attention-residual", _block_variant(attn_residual=False),
                   "the attention output is added to the stream: a = x + Attn(RMSNorm1(x)), not Attn(RMSNorm1(x))."),
            Mutant("attn-norm-twice", _block_variant(norms="attn-twice"),
                   "you used attn_norm before the feed-forward too; each branch has its own gain: mlp_norm goes "
                   "before SwiGLU, RMSNorm2(a) = rms_norm(a, layer.mlp_norm, eps)."),
            Mutant("residual-from-normed", _block_variant(residual="normed"),
                   "you added the branches to the normalised stream; the residual carries x itself: "
                   "a = x + Attn(RMSNorm1(x)), y = a + SwiGLU(RMSNorm2(a)), the norms only on the branches' inputs."),
            Mutant("attention-residual-from-normed", _block_variant(residual="normed-attention"),
                   "you added the attention output to the normalised x, RMSNorm1(x) + Attn(RMSNorm1(x)); the residual "
                   "carries x itself: a = x + Attn(RMSNorm1(x)). The norm only feeds the branch."),
            Mutant("parallel-branches", _block_variant(mlp_reads="x"),
                   "your feed-forward reads x, as in a parallel block; here it reads a, the stream after "
                   "attention: y = a + SwiGLU(RMSNorm2(a))."),
            Mutant("heads-split-without-transpose", _block_variant(split="reshape", merge="reshape"),
                   "you reshaped the projections straight to (B, h, T, d_head) (and the heads' output straight "
                   "back), which mixes heads with positions; view them as (B, T, h, d_head) and .transpose(1, 2), "
                   "and transpose back before merging the heads."),
            Mutant("heads-merged-without-transpose", _block_variant(merge="reshape"),
                   "you merged the heads by reshaping (B, h, T, d_head) straight to (B, T, h d_head), which mixes "
                   "heads with positions; .transpose(1, 2) first, then reshape."),
            Mutant("no-output-projection", _block_variant(w_o=False),
                   "you left out the output projection: the merged heads go through W_o before they are added "
                   "to the stream."),
            Mutant("eps-hard-coded", _block_variant(eps=1e-6),
                   "your norms use eps = 1e-6 whatever the config; use config.eps (1e-5 here)."),
            Mutant("positions-ignored", _block_variant(positions_mode="arange"),
                   "you rotated by 0, 1, ..., T-1 whatever the positions: pass the positions you are given to "
                   "rope (they need not be consecutive: 0, 2, 5, 11)."),
        ),
        rules=(
            Rule("edge-size", "one token: attention returns its own value, so the norms, residuals and SwiGLU decide",
                 ("T=1, one token",), lambda x, layer, cfg, p: x.shape[1] == 1,
                 ("post-norm", "output-renormalised", "sandwich-norms", "attention-post-norm", "feed-forward-post-norm",
                  "norms-swapped", "gate-and-up-swapped", "gelu-gate", "relu-gate", "layer-norm-not-rms",
                  "no-attention-residual", "attn-norm-twice", "residual-from-normed", "attention-residual-from-normed",
                  "parallel-branches"), quote='$y = a + \\operatorname{SwiGLU}(\\operatorname{RMSNorm}_2(a))$'),
            Rule("range", "several positions: queries and keys turn, values do not",
                 ("B=2, T=5, positions 0 to 4", "positions 3 to 6"), lambda x, layer, cfg, p: x.shape[1] > 1,
                 ("no-rope-on-keys", "rope-on-values"), quote='at\n`positions`'),
            Rule("range", "positions need not be consecutive: rope turns each token by its own position",
                 ("positions 0, 2, 5, 11 (not consecutive)",), lambda x, layer, cfg, p: bool((p.diff() != 1).any()),
                 ("positions-ignored",), quote="which need not be consecutive"),
            Rule("range", "several heads and positions: heads split and merged through a transpose, then W_o",
                 ("B=2, T=5, positions 0 to 4", "6 query heads over 3 key/value heads, eps=1e-6"),
                 lambda x, layer, cfg, p: x.shape[1] > 1 and cfg.n_heads > 1,
                 ("heads-split-without-transpose", "heads-merged-without-transpose", "no-output-projection"),
                 quote=("used as `x @ W`", "transposes the heads' output back")),
            Rule("threshold", "the norms use config.eps", ("B=2, T=5, positions 0 to 4",),
                 lambda x, layer, cfg, p: cfg.eps != 1e-6, ("eps-hard-coded",), quote="`rope_base` and `eps`"),
            output_rule("a torch tensor (B, T, d) in x's dtype", 'B=2, T=5, positions 0 to 4',
                        "returning a torch tensor of shape `(B, T, d)` in `x`'s dtype", decoder_block, 'float32'),
        ),
        framing=('Write `my_decoder_block(x, layer, config, positions)`', '`layer` has `attn_norm`', 'Use `rms_norm`, which the cell above picks'),
        alternatives=(_block_written_out, _block_linear),
        array_type="torch",
        difficulty=1,
        minutes=8,
    )
)


EXERCISES = ("rms-norm", "rope", "grouped-attention", "decoder-block")
