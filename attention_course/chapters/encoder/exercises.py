"""Chapter 8 exercises: a BERT encoder from its parts, checked against the package and against MiniLM.

Each exercise lists typical mistakes (mutants) with their feedback; inputs are float64 torch tensors
and, for the whole encoder, MiniLM's own float32 weights. LayerNorm, the feed-forward block, the
embeddings and the pooling are worked code in the lesson, not exercises.

Signatures the notebook's stubs use (weights are
:class:`~attention_course.models.encoder.BertLayerWeights` / ``BertWeights``, used as ``x @ W + b``):

* ``bert-attention``: ``fn(x, layer, num_heads, mask) -> (output, weights)``: multi-head
  self-attention with the biases ``b_q, b_k, b_v, b_o``; ``x`` (B, T, d), ``mask`` boolean,
  broadcastable to (B, h, T, T), ``True`` = may attend; output (B, T, d), weights (B, h, T, T).
* ``post-ln-block``: ``fn(x, layer, num_heads, mask, eps) -> (B, T, d)``: one post-LN layer.
* ``bert-encoder``: ``fn(weights, input_ids, attention_mask) -> (L+1, B, T, d)``: every layer's
  hidden states, the embeddings first; ``attention_mask`` (B, T) is 1 for real tokens.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch
import torch.nn.functional as F

from ...core.attention import causal_mask as _causal_np
from ...exercises._compare import as_numpy
from ...exercises._core import (Breach, Case, Exercise, Forbidden, Mutant, Rule, in_place_breach, in_place_rule, register,
                                retyped_breach)
from ...models.encoder import bert_encode
from ...models.pretrained import load_minilm, minilm_weights
from .assemble import encode
from .block import block
from .feed_forward import GELU_GAP, feed_forward
from .layer_norm import layer_norm
from .random_weights import _randn, random_bert, random_layer
from .reproduce import first_departure, float32_bound
from .self_attention import key_mask, self_attention

__all__ = ["EXERCISES", "ENCODER_ATOL", "MINILM_MAX_ABS"]

def _lengths_mask(lengths, T: int) -> torch.Tensor:
    """(B, T) attention_mask, 1 for the first ``lengths[b]`` positions."""
    return (torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]).long()


def _ids(g: torch.Generator, B: int, T: int, vocab: int, mask: torch.Tensor) -> torch.Tensor:
    ids = torch.randint(1, vocab, (B, T), generator=g)  # (B, T)
    return ids * mask  # padding is token 0, as in BERT's vocabulary


# ============================================================ shared: the contract's breaches
#: float64 tolerances of chapter 8's float64 cases: a result of a few hundred float64 operations on values of
#: order 1-10 is exact to about 1e-14 relative; 1e-9 leaves a 10^5 margin and still sees one float32 step
#: (a float32 constant or cast inside, 6e-8 relative).
FLOAT64_RTOL, FLOAT64_ATOL = 1e-9, 1e-12


def _numpy_breach(reference, name="numpy-result"):
    """A right answer returned as numpy arrays: the chapter's parts feed each other torch tensors."""
    return retyped_breach(reference, lambda o: o.numpy() if isinstance(o, torch.Tensor) else o,
                          "expected a torch tensor", name)


def _float32_breach(reference, name="float32-result"):
    return retyped_breach(reference, lambda o: o.float() if isinstance(o, torch.Tensor) else o,
                          "float32 but the inputs are float64", name)


def _package(*names: str):
    """The package's functions ``names`` (``"module:function"`` under attention_course), imported lazily."""
    def targets():
        import importlib
        out = []
        for spec in names:
            module, fn = spec.split(":")
            out.append(getattr(importlib.import_module(f"attention_course.{module}"), fn))
        return tuple(out)
    return targets


_TORCH_LAYER_NORM = Forbidden(
    "torch's LayerNorm (F.layer_norm, nn.LayerNorm)",
    lambda: (F.layer_norm, torch.nn.LayerNorm, torch.nn.modules.normalization.LayerNorm),
    "you called torch's LayerNorm (F.layer_norm or nn.LayerNorm); in this chapter you build the parts yourself: "
    "normalise with the `layer_norm` the exercise cell picks (yours once it passes), or with tensor operations.")


def _layer_norm_breach(reference_with_torch_ln, name="torch-layer-norm"):
    return Breach(name, reference_with_torch_ln, "you called torch's LayerNorm")


def _float32_step(got, expected, args) -> str | None:
    """Right to about seven digits and no more: a float32 step inside a float64 computation."""
    g, e = as_numpy(got if not isinstance(got, tuple) else got[0]), as_numpy(expected if not isinstance(expected, tuple)
                                                                              else expected[0])
    if g is None or e is None or g.shape != e.shape or e.dtype != np.float64:
        return None
    err = float(np.max(np.abs(g - e) / (np.abs(e) + 1e-3)))
    if 1e-8 < err < 1e-5:
        return ("your result agrees with the expected one to about seven digits only (a relative gap of "
                f"{err:.1e}), float32's precision: a float32 step (a constant made with dtype=torch.float32, a "
                ".float()) slipped into the float64 computation. Keep every tensor in x's dtype")
    return None


# ============================================================ 1. attention with biases
def _attention_cases() -> list[Case]:
    g = torch.Generator().manual_seed(81)
    L8, L12 = random_layer(g, 8), random_layer(g, 12)
    causal = torch.from_numpy(_causal_np(4))[None, None]  # (1, 1, T, T)
    return [
        Case("B=2, T=5, 2 heads, the second sequence padded to length 3",
             (_randn(g, 2, 5, 8), L8, 2, key_mask(_lengths_mask([5, 3], 5)))),
        Case("T=1, one token", (_randn(g, 1, 1, 8), L8, 2, key_mask(_lengths_mask([1], 1)))),
        Case("4 heads, no padding", (_randn(g, 2, 4, 8), L8, 4, key_mask(_lengths_mask([4, 4], 4)))),
        Case("a causal mask of shape (1, 1, T, T)", (_randn(g, 1, 4, 8), L8, 2, causal)),
        Case("d=12, 3 heads, three sequences of lengths 6, 2 and 4",
             (_randn(g, 3, 6, 12), L12, 3, key_mask(_lengths_mask([6, 2, 4], 6)))),
        # scores of several hundred: exp overflows float64 (above 709) unless the row maximum is subtracted
        Case("large scores (up to about 1000), 2 heads", (_randn(g, 2, 3, 8, std=19.0), L8, 2,
                                                         key_mask(_lengths_mask([3, 2], 3)))),
    ]


def _reference_attention(x, layer, num_heads, mask):
    return self_attention(x, layer, num_heads, mask)


def _attention_variant(*, biases: str = "all", scale: str = "d_k", masking: str = "scores", split: str = "contiguous",
                       merge: str = "transpose", softmax_dim: int = -1, weights_T: bool = False,
                       scores: str = "qk", project: bool = True, stable: bool = True):
    """Multi-head attention written out, with one knob per typical mistake."""
    def f(x, layer, num_heads, mask):
        B, T, d = x.shape
        h, d_k = num_heads, d // num_heads
        W = (lambda M: M.T) if weights_T else (lambda M: M)  # x @ W.T: nn.Linear's convention, not ours
        q, k, v = x @ W(layer.W_q), x @ W(layer.W_k), x @ W(layer.W_v)  # (B, T, d) each
        if biases in ("all", "inputs"):
            q, k, v = q + layer.b_q, k + layer.b_k, v + layer.b_v
        if split in ("interleaved", "strided"):
            q, k, v = (t.reshape(B, T, d_k, h).permute(0, 3, 1, 2) for t in (q, k, v))  # (B, h, T, d_k), wrong
        elif split == "no-transpose":
            q, k, v = (t.reshape(B, h, T, d_k) for t in (q, k, v))  # (B, h, T, d_k), tokens mixed across heads
        else:
            q, k, v = (t.reshape(B, T, h, d_k).transpose(1, 2) for t in (q, k, v))  # (B, h, T, d_k)
        a, b = (k, q) if scores == "kq" else (q, k)
        s = a @ b.transpose(-2, -1)  # (B, h, T, T)
        s = s / {"d_k": math.sqrt(d_k), "d_model": math.sqrt(d), "none": 1.0}[scale]
        if masking == "scores":
            s = s.masked_fill(~mask, float("-inf"))
        elif masking == "inverted":
            s = s.masked_fill(mask, float("-inf"))
        elif masking == "zero":
            s = s.masked_fill(~mask, 0.0)
        if stable:
            weights = torch.softmax(s, dim=softmax_dim)  # (B, h, T, T)
        else:  # a softmax written without subtracting the row maximum
            e = torch.exp(s)
            weights = e / e.sum(dim=softmax_dim, keepdim=True)
        if masking == "after":
            weights = weights * mask
        heads = weights @ v  # (B, h, T, d_k)
        if split == "strided":  # merged back the same strided way: feature j*h + i of head i
            concat = heads.permute(0, 2, 3, 1).reshape(B, T, d)
        elif merge == "no-transpose":
            concat = heads.reshape(B, T, d)
        else:
            concat = heads.transpose(1, 2).reshape(B, T, d)
        out = concat @ W(layer.W_o) if project else concat  # (B, T, d)
        if biases in ("all", "output"):
            out = out + layer.b_o
        return out, weights

    return f


def _attention_einsum(x, layer, num_heads, mask):
    B, T, d = x.shape
    d_k = d // num_heads
    q = (x @ layer.W_q + layer.b_q).view(B, T, num_heads, d_k)  # (B, T, h, d_k)
    k = (x @ layer.W_k + layer.b_k).view(B, T, num_heads, d_k)
    v = (x @ layer.W_v + layer.b_v).view(B, T, num_heads, d_k)
    scores = torch.einsum("bthe,bshe->bhts", q, k) / math.sqrt(d_k)  # (B, h, T, S)
    w = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)  # over the keys
    heads = torch.einsum("bhts,bshe->bthe", w, v).reshape(B, T, d)  # (B, T, d)
    return heads @ layer.W_o + layer.b_o, w


def _attention_sdpa(x, layer, num_heads, mask):
    B, T, d = x.shape
    d_k = d // num_heads
    split = lambda t: t.view(B, T, num_heads, d_k).transpose(1, 2)  # noqa: E731  (B, h, T, d_k)
    q, k, v = (split(x @ W + b) for W, b in ((layer.W_q, layer.b_q), (layer.W_k, layer.b_k), (layer.W_v, layer.b_v)))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, h, T, d_k)
    w = torch.softmax((q @ k.transpose(-2, -1) / math.sqrt(d_k)).masked_fill(~mask, float("-inf")), -1)
    return out.transpose(1, 2).reshape(B, T, d) @ layer.W_o + layer.b_o, w


def _max_score(x, layer, num_heads) -> float:
    """The largest |score| q k^T / sqrt(d_k) of any head (to show a case reaches exp's overflow)."""
    B, T, d = x.shape
    d_k = d // num_heads
    q, k = ((x @ W + b).reshape(B, T, num_heads, d_k).transpose(1, 2) for W, b in ((layer.W_q, layer.b_q),
                                                                                 (layer.W_k, layer.b_k)))
    return float((q @ k.transpose(-2, -1)).abs().max()) / math.sqrt(d_k)


def _swapped_pair(got, expected, args) -> str | None:
    """(weights, output) returned in the wrong order: said so."""
    if (isinstance(got, tuple) and len(got) == 2 and all(isinstance(t, torch.Tensor) for t in got)
            and tuple(got[0].shape) == tuple(expected[1].shape) and tuple(got[1].shape) == tuple(expected[0].shape)):
        return "You returned (weights, output): return the pair in the order (output, weights)."
    return None


def _nan_weights(got, expected, args) -> str | None:
    """NaN where the reference has numbers: exp overflowed (no row maximum subtracted)."""
    if isinstance(got, tuple) and len(got) == 2 and isinstance(got[1], torch.Tensor) and bool(torch.isnan(got[1]).any()):
        return ("your weights contain NaN where the scores are large: exp overflows above about 709 in float64 "
                "(88 in float32), giving inf / inf. Subtract each row's maximum before exp, or use torch.softmax.")
    return None


_ATTENTION_TIPS = (
    ("mat1 and mat2", " Tip: the projections are x @ layer.W_q + layer.b_q with W of shape (d, d), and the "
     "scores are q @ k.transpose(-2, -1), of shape (B, h, T, T)."),
    ("FrozenInstanceError", " Tip: the weights in `layer` are read-only: compute new tensors (q = x @ layer.W_q "
     "+ layer.b_q) instead of changing the layer's."),
    ("too many indices", " Tip: the mask comes in several shapes, (B, 1, 1, T) for padding and (1, 1, T, T) for a "
     "causal mask: use it as it is (it broadcasts to (B, h, T, T)), do not index or squeeze it."),
)

register(
    Exercise(
        id="bert-attention",
        title="Multi-head attention with biases and a mask",
        make_cases=_attention_cases,
        reference=_reference_attention,
        mutants=(
            Mutant("no-biases", _attention_variant(biases="none"),
                   "you left out the biases: MiniLM's projections are x @ W + b, so q = x W_q + b_q, "
                   "k = x W_k + b_k, v = x W_v + b_v, and the output is concat(heads) W_o + b_o."),
            Mutant("no-input-biases", _attention_variant(biases="output"),
                   "the output has its bias b_o, but q, k and v need theirs too: q = x @ W_q + b_q, "
                   "k = x @ W_k + b_k, v = x @ W_v + b_v."),
            Mutant("no-output-bias", _attention_variant(biases="inputs"),
                   "q, k and v are right, but the output needs its bias too: concat(heads) @ W_o + b_o."),
            Mutant("no-scale", _attention_variant(scale="none"),
                   "you did not scale the scores: divide each head's q k^T by sqrt(d_k), with d_k = d // num_heads, "
                   "before the softmax."),
            Mutant("scale-by-d-model", _attention_variant(scale="d_model"),
                   "you divided the scores by sqrt(d_model); each head's scores are divided by sqrt(d_k), "
                   "with d_k = d_model / num_heads (32 in MiniLM, not 384)."),
            Mutant("mask-ignored", _attention_variant(masking="none"),
                   "your queries read the padding: apply the mask to the scores before the softmax, "
                   "scores.masked_fill(~mask, float('-inf')), so masked keys get weight exactly 0."),
            Mutant("mask-inverted", _attention_variant(masking="inverted"),
                   "your mask is inverted: in this course True means 'may attend', so fill the scores "
                   "where the mask is False: scores.masked_fill(~mask, float('-inf'))."),
            Mutant("mask-after-softmax", _attention_variant(masking="after"),
                   "you zeroed the masked weights after the softmax, so rows no longer sum to 1: mask the "
                   "scores (with -inf) before the softmax instead."),
            Mutant("mask-filled-with-zero", _attention_variant(masking="zero"),
                   "you set the masked scores to 0, which still gives those keys weight (exp(0) = 1): fill them "
                   "with -inf, scores.masked_fill(~mask, float('-inf')), so their weight is exactly 0."),
            Mutant("heads-interleaved", _attention_variant(split="interleaved"),
                   "your heads take every h-th feature; head i owns the contiguous features "
                   "i*d_k:(i+1)*d_k: reshape to (B, T, h, d_k), then .transpose(1, 2) to (B, h, T, d_k)."),
            Mutant("heads-strided", _attention_variant(split="strided"),
                   "your head i takes the features i, i + h, i + 2h, ... (a stride of h); head i owns the contiguous "
                   "features i*d_k:(i+1)*d_k: reshape to (B, T, h, d_k), then .transpose(1, 2) to (B, h, T, d_k)."),
            Mutant("split-without-transpose", _attention_variant(split="no-transpose"),
                   "you reshaped (B, T, d) straight to (B, h, T, d_k), which mixes tokens across heads: reshape to "
                   "(B, T, h, d_k) first, then .transpose(1, 2)."),
            Mutant("merge-without-transpose", _attention_variant(merge="no-transpose"),
                   "your heads are split right, but you merged them back by reshaping (B, h, T, d_k) straight to "
                   "(B, T, d), which mixes tokens: .transpose(1, 2) to (B, T, h, d_k) first, then reshape."),
            Mutant("softmax-over-queries", _attention_variant(softmax_dim=-2),
                   "your weights' columns sum to 1: the softmax normalises over the keys, the last axis "
                   "of the (B, h, T, S) scores (dim=-1)."),
            Mutant("scores-transposed", _attention_variant(scores="kq"),
                   "your scores are k q^T, the transpose: row t of the scores belongs to query t, "
                   "q @ k.transpose(-2, -1)."),
            Mutant("weights-transposed", _attention_variant(weights_T=True),
                   "you multiplied by the transposed weights, x @ W.T (nn.Linear stores W.T); here the matrices are "
                   "used as they are: x @ layer.W_q + layer.b_q, and concat(heads) @ layer.W_o + layer.b_o."),
            Mutant("no-output-projection", _attention_variant(project=False),
                   "you concatenated the heads but left out the output projection: concat(heads) @ W_o + b_o mixes "
                   "the heads' outputs."),
            Mutant("softmax-not-shifted", _attention_variant(stable=False),
                   "your weights overflow where the scores are large (the case with scores near 1000): exp overflows "
                   "above about 709 in float64, giving inf / inf = NaN. Subtract each row's maximum before exp, or use "
                   "torch.softmax."),
        ),
        rules=(
            Rule("range", "padded keys get weight exactly 0: mask the scores before the softmax",
                 ("B=2, T=5, 2 heads, the second sequence padded to length 3",
                  "d=12, 3 heads, three sequences of lengths 6, 2 and 4"),
                 lambda x, layer, h, mask: not bool(mask.all()),
                 ("mask-ignored", "mask-inverted", "mask-after-softmax", "mask-filled-with-zero"),
                 quote="a masked key gets weight exactly 0"),
            Rule("range", "masks of shapes (B, 1, 1, T) and (1, 1, T, T) broadcast over the batch and the heads",
                 ("a causal mask of shape (1, 1, T, T)", "B=2, T=5, 2 heads, the second sequence padded to length 3"),
                 lambda x, layer, h, mask: mask.ndim == 4 and 1 in mask.shape[:2],
                 ("mask-ignored", "softmax-over-queries"),
                 quote="a padding mask `(B, 1, 1, T)`, a causal mask `(1, 1, T, T)`"),
            Rule("edge-size", "one token: its only key gets weight 1, so the projections and biases decide",
                 ("T=1, one token",), lambda x, layer, h, mask: x.shape[1] == 1,
                 ("no-biases", "no-output-bias", "weights-transposed", "no-output-projection"),
                 quote="`T = 1`"),
            Rule("edge-size", "several heads: each owns d_k = d / h contiguous features and is scaled by sqrt(d_k)",
                 ("4 heads, no padding", "d=12, 3 heads, three sequences of lengths 6, 2 and 4"),
                 lambda x, layer, h, mask: h > 1,
                 ("scale-by-d-model", "no-scale", "heads-interleaved", "heads-strided", "split-without-transpose",
                  "merge-without-transpose", "softmax-over-queries", "scores-transposed"),
                 quote="head `i` owns the features `i*d_k:(i+1)*d_k`"),
            Rule("range", "scores near 1000: the softmax must not overflow",
                 ("large scores (up to about 1000), 2 heads",),
                 lambda x, layer, h, mask: _max_score(x, layer, h) > 709,
                 ("softmax-not-shifted",), quote="scores may be large (up to about 1000)"),
            Rule("output", "a pair of torch tensors in x's dtype: output (B, T, d), weights (B, h, T, T)",
                 ("B=2, T=5, 2 heads, the second sequence padded to length 3",), lambda *a: True,
                 quote="Return the tuple `(output, weights)`",
                 breaches=(_numpy_breach(_attention_einsum), _float32_breach(_attention_einsum),
                           Breach("weights-first", lambda *a: _attention_einsum(*a)[::-1],
                                  "return the pair in the order (output, weights)"))),
            Rule("forbidden", "the package's attention is not called",
                 ("B=2, T=5, 2 heads, the second sequence padded to length 3",), lambda *a: True,
                 quote="Do not call the package's attention",
                 breaches=(Breach("package-attention", lambda *a: self_attention(*a), "the package's attention"),)),
            Rule("forbidden", "x, layer and mask are not changed in place",
                 ("B=2, T=5, 2 heads, the second sequence padded to length 3",), lambda *a: True,
                 quote="Do not change `x`, `layer` or `mask` in place",
                 breaches=(in_place_breach(_attention_einsum, index=0),)),
        ),
        forbidden=(Forbidden(
            "the package's attention",
            _package("chapters.encoder.self_attention:self_attention", "core.attention:scaled_dot_product_attention",
                     "core.multihead:multi_head_attention", "core.multihead:head_outputs"),
            "you called the package's attention (ch.self_attention or ac.scaled_dot_product_attention); this exercise "
            "asks you to write it: project with the biases, split the heads, scale, mask, softmax over the keys, "
            "merge the heads, then W_o and b_o. torch's F.scaled_dot_product_attention is allowed."),),
        returns=("output", "weights"),
        array_type="torch",
        hints=(_nan_weights, _float32_step),
        structure_hint=_swapped_pair,
        error_tips=_ATTENTION_TIPS,
        rtol=FLOAT64_RTOL,
        atol=FLOAT64_ATOL,
        alternatives=(_attention_einsum, _attention_sdpa),
        framing=("Write `my_self_attention(x, layer, num_heads, mask)`", "`layer` holds"),
        difficulty=2,  # step 1 writes one head; the split into heads, the (B, 1, 1, T) mask and the merge are the learner's
        minutes=15,  # a third blind reader took 15 min (the split and merge written by the learner)
    )
)


# ============================================================ the learner's own parts, for the alternatives
# (LayerNorm, the feed-forward block and the embeddings are worked code in the lesson, not exercises: these are
# the ways a learner writes them, which the block's and the encoder's alternatives use)
def _ln_var_mean(x, gamma, beta, eps):
    var, mu = torch.var_mean(x, dim=-1, keepdim=True, correction=0)  # (..., 1) each
    return (x - mu) * torch.rsqrt(var + eps) * gamma + beta


def _ffn_einsum(x, layer):
    z = torch.einsum("...d,df->...f", x, layer.W_1) + layer.b_1  # (..., d_ff)
    return torch.einsum("...f,fd->...d", 0.5 * z * (1 + torch.special.erf(z / 2**0.5)), layer.W_2) + layer.b_2


def _embeddings_index(weights, input_ids, token_type_ids):
    T = input_ids.shape[1]
    x = weights.word_embeddings[input_ids] + weights.position_embeddings[:T] + weights.token_type_embeddings[token_type_ids]
    return layer_norm(x, weights.ln_weight, weights.ln_bias, weights.layer_norm_eps)


# ============================================================ 2. residuals and post-LN
def _block_cases() -> list[Case]:
    g = torch.Generator().manual_seed(84)
    L8, L12 = random_layer(g, 8, 32), random_layer(g, 12, 48)
    return [
        Case("B=2, T=5, 2 heads, the second sequence padded to length 3",
             (_randn(g, 2, 5, 8), L8, 2, key_mask(_lengths_mask([5, 3], 5)), 1e-12)),
        Case("T=1, one token", (_randn(g, 1, 1, 8), L8, 2, key_mask(_lengths_mask([1], 1)), 1e-12)),
        Case("a causal mask (1, 1, T, T)",
             (_randn(g, 1, 4, 8), L8, 4, torch.from_numpy(_causal_np(4))[None, None], 1e-12)),
        Case("d=12, 3 heads, eps=1e-5", (_randn(g, 2, 4, 12), L12, 3, key_mask(_lengths_mask([4, 2], 4)), 1e-5)),
    ]


def _attend(x, layer, num_heads, mask):
    return self_attention(x, layer, num_heads, mask)[0]


def _ln(x, layer, which, eps):
    return layer_norm(x, getattr(layer, f"ln{which}_weight"), getattr(layer, f"ln{which}_bias"), eps)


def _block_variant(*, order: str = "post", residual_1: str = "x", residual_2: str = "a", ffn_input: str = "a",
                   ln_1: int = 1, ln_2: int = 2, final_ln: bool = True, eps_fixed: float | None = None,
                   eps_fixed_in: tuple[int, ...] = (1, 2), use_mask: bool = True):
    """One encoder layer written out, with one knob per typical mistake (the default is BERT's post-LN).

    ``eps_fixed`` replaces the eps argument in the LayerNorms listed in ``eps_fixed_in`` (1 after attention,
    2 after the feed-forward; the post-LN order only when one of them is listed alone).
    """
    def f(x, layer, num_heads, mask, eps):
        e = eps if eps_fixed is None else eps_fixed
        e_1 = e if 1 in eps_fixed_in else eps
        e_2 = e if 2 in eps_fixed_in else eps
        m = mask if use_mask else torch.ones_like(mask)
        if order == "pre":  # GPT-2's order
            a = x + _attend(_ln(x, layer, ln_1, e), layer, num_heads, m)
            return a + feed_forward(_ln(a, layer, ln_2, e), layer)
        if order == "branches":  # each branch normalised before it is added
            a = x + _ln(_attend(x, layer, num_heads, m), layer, ln_1, e)
            return a + _ln(feed_forward(a, layer), layer, ln_2, e)
        if order == "sandwich":  # normalised before and after each sub-block
            h = _ln(x, layer, ln_1, e)
            a = _ln(h + _attend(h, layer, num_heads, m), layer, ln_1, e)
            h2 = _ln(a, layer, ln_2, e)
            return _ln(h2 + feed_forward(h2, layer), layer, ln_2, e)
        if order == "parallel":  # attention and feed-forward side by side, one LayerNorm
            return _ln(x + _attend(x, layer, num_heads, m) + feed_forward(x, layer), layer, ln_2, e)
        attn = _attend(x, layer, num_heads, m)
        a = _ln(attn + (x if residual_1 == "x" else 0.0), layer, ln_1, e_1)
        ff = feed_forward(a if ffn_input == "a" else x, layer)
        y = ff + {"a": a, "x": x, "none": 0.0}[residual_2]
        return _ln(y, layer, ln_2, e_2) if final_ln else y

    return f


def _block_written_out(x, layer, num_heads, mask, eps):
    """The package's parts (which the exercise cell picks until yours pass), written out."""
    attn, _ = self_attention(x, layer, num_heads, mask)
    a = layer_norm(x + attn, layer.ln1_weight, layer.ln1_bias, eps)
    return layer_norm(a + feed_forward(a, layer), layer.ln2_weight, layer.ln2_bias, eps)


def _block_learners_parts(x, layer, num_heads, mask, eps):
    """A learner's own parts (einsum attention, var_mean LayerNorm, einsum feed-forward)."""
    a = _ln_var_mean(x + _attention_einsum(x, layer, num_heads, mask)[0], layer.ln1_weight, layer.ln1_bias, eps)
    return _ln_var_mean(a + _ffn_einsum(a, layer), layer.ln2_weight, layer.ln2_bias, eps)


def _block_with_torch_ln(x, layer, num_heads, mask, eps):
    d = x.shape[-1]
    a = F.layer_norm(x + _attend(x, layer, num_heads, mask), (d,), layer.ln1_weight, layer.ln1_bias, eps)
    return F.layer_norm(a + feed_forward(a, layer), (d,), layer.ln2_weight, layer.ln2_bias, eps)


def _returned_pair(got, expected, args) -> str | None:
    if isinstance(got, tuple) and len(got) == 2:
        return ("The block returns y alone, a tensor (B, T, d): self_attention returns (output, weights), but the "
                "block passes on only its output, self_attention(...)[0].")
    return None


def torch_encoder_layer(x, layer, num_heads, mask, eps):
    """The same layer computed by ``torch.nn.TransformerEncoderLayer`` (post-LN, exact GELU, no dropout).

    The weights are copied in as ``W.T``; the mask is negated (torch's True = blocked).

    Examples
    --------
    >>> layer = random_layer(torch.Generator().manual_seed(0))
    >>> x = torch.randn(2, 3, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    >>> mask = key_mask(torch.tensor([[1, 1, 1], [1, 1, 0]]))
    >>> torch.allclose(torch_encoder_layer(x, layer, 2, mask, 1e-12), block(x, layer, 2, mask, 1e-12))
    True
    """
    d, d_ff = layer.W_1.shape
    ref = torch.nn.TransformerEncoderLayer(d, num_heads, d_ff, dropout=0.0, activation="gelu",
                                           layer_norm_eps=eps, batch_first=True, norm_first=False,
                                           dtype=x.dtype)
    with torch.no_grad():
        ref.self_attn.in_proj_weight.copy_(torch.cat([layer.W_q.T, layer.W_k.T, layer.W_v.T]))  # (3d, d)
        ref.self_attn.in_proj_bias.copy_(torch.cat([layer.b_q, layer.b_k, layer.b_v]))  # (3d,)
        ref.self_attn.out_proj.weight.copy_(layer.W_o.T)
        ref.self_attn.out_proj.bias.copy_(layer.b_o)
        for lin, W, b in ((ref.linear1, layer.W_1, layer.b_1), (ref.linear2, layer.W_2, layer.b_2)):
            lin.weight.copy_(W.T)
            lin.bias.copy_(b)
        for ln, w, b in ((ref.norm1, layer.ln1_weight, layer.ln1_bias), (ref.norm2, layer.ln2_weight, layer.ln2_bias)):
            ln.weight.copy_(w)
            ln.bias.copy_(b)
    ref.eval()
    if mask.shape[-2] == 1:  # (B, 1, 1, T): padding of the keys
        out = ref(x, src_key_padding_mask=~mask[:, 0, 0, :])
    else:  # (1, 1, T, T): one mask for every sequence
        out = ref(x, src_mask=~mask[0, 0])
    return out.detach()  # (B, T, d)


def _block_reference(x, layer, num_heads, mask, eps):
    return block(x, layer, num_heads, mask, eps)


_BLOCK_TIPS = (
    ("cannot be split into num_heads", " Tip: the number of heads is the argument num_heads (2, 3 or 4 in the "
     "checks, 12 in MiniLM): pass it on rather than a fixed number."),
)

register(
    Exercise(
        id="post-ln-block",
        title="Residual connections and post-LN",
        make_cases=_block_cases,
        reference=_block_reference,
        mutants=(
            Mutant("pre-ln", _block_variant(order="pre"),
                   "that is a pre-LN block (GPT-2's order): a = x + MHA(LN1(x)), y = a + FFN(LN2(a)). BERT "
                   "is post-LN: add the residual first, then normalise the sum: a = LN1(x + MHA(x)), "
                   "y = LN2(a + FFN(a))."),
            Mutant("no-attention-residual", _block_variant(residual_1="none"),
                   "the attention output needs its residual connection: a = LN1(x + MHA(x)), not LN1(MHA(x))."),
            Mutant("no-ffn-residual", _block_variant(residual_2="none"),
                   "the feed-forward output needs its residual connection: y = LN2(a + FFN(a)), not LN2(FFN(a))."),
            Mutant("residual-from-block-input", _block_variant(residual_2="x"),
                   "the second residual adds a, the output of the first LayerNorm, not the block's input x: "
                   "y = LN2(a + FFN(a))."),
            Mutant("ffn-on-block-input", _block_variant(ffn_input="x"),
                   "the feed-forward block reads a, the output of the first LayerNorm, not the block's input x: "
                   "y = LN2(a + FFN(a))."),
            Mutant("layer-norms-swapped", _block_variant(ln_1=2, ln_2=1),
                   "the two LayerNorms are swapped: ln1_weight and ln1_bias come after attention, ln2_* after "
                   "the feed-forward."),
            Mutant("first-layer-norm-twice", _block_variant(ln_2=1),
                   "both of your LayerNorms use ln1_weight and ln1_bias; the one after the feed-forward block has "
                   "its own, layer.ln2_weight and layer.ln2_bias."),
            Mutant("no-final-layer-norm", _block_variant(final_ln=False),
                   "the block ends with a LayerNorm in BERT: y = LN2(a + FFN(a)), with ln2_weight and ln2_bias."),
            Mutant("normalised-branches", _block_variant(order="branches"),
                   "you normalised each branch's output before adding it (x + LN(MHA(x))); BERT normalises the "
                   "sum: LN1(x + MHA(x))."),
            Mutant("sandwich", _block_variant(order="sandwich"),
                   "you normalised the input of each sub-block as well as the sum after it; BERT normalises only the "
                   "sums: a = LN1(x + MHA(x)), y = LN2(a + FFN(a)), with MHA and FFN reading x and a as they are."),
            Mutant("parallel-branches", _block_variant(order="parallel"),
                   "you ran attention and the feed-forward block side by side on x; in BERT they are in sequence: "
                   "the feed-forward block reads a = LN1(x + MHA(x)), then y = LN2(a + FFN(a))."),
            Mutant("eps-hard-coded", _block_variant(eps_fixed=1e-5),
                   "you used eps = 1e-5 (torch's default) whatever eps is passed; both LayerNorms use the argument "
                   "eps (1e-12 for MiniLM, 1e-5 in one check)."),
            Mutant("eps-fixed-1e-12", _block_variant(eps_fixed=1e-12),
                   "you fixed eps at 1e-12 (MiniLM's value) whatever eps is passed; use the eps argument in both "
                   "LayerNorms (one check passes 1e-5)."),
            *(Mutant(f"eps-{text}-in-ln{which}-only", _block_variant(eps_fixed=value, eps_fixed_in=(which,)),
                     f"your LayerNorm {where} uses eps = {text} whatever eps is passed, while the other uses the "
                     f"argument: a wrong eps, not float32 round-off. Pass the argument eps to both LayerNorms (the "
                     f"checks use 1e-12 and 1e-5).")
              for value, text in ((1e-12, "1e-12"), (1e-5, "1e-5"))
              for which, where in ((1, "after attention (ln1)"), (2, "after the feed-forward block (ln2)"))),
            Mutant("mask-not-passed", _block_variant(use_mask=False),
                   "your attention ignores the mask: pass mask on to self_attention(x, layer, num_heads, mask), so "
                   "padding (and, with a causal mask, the future) is not read."),
        ),
        rules=(
            Rule("edge-size", "one token: attention returns its own value, so the residuals and LayerNorms decide",
                 ("T=1, one token",), lambda x, layer, h, mask, eps: x.shape[1] == 1,
                 ("pre-ln", "no-attention-residual", "no-ffn-residual", "residual-from-block-input",
                  "ffn-on-block-input", "layer-norms-swapped", "first-layer-norm-twice", "no-final-layer-norm",
                  "normalised-branches", "sandwich", "parallel-branches"),
                 quote="$a = \\operatorname{LN}_1(x + \\operatorname{MHA}(x))$, $y = \\operatorname{LN}_2(a + \\operatorname{FFN}(a))$"),
            Rule("range", "padding and causal masks go to the attention, nowhere else",
                 ("B=2, T=5, 2 heads, the second sequence padded to length 3", "a causal mask (1, 1, T, T)"),
                 lambda x, layer, h, mask, eps: not bool(mask.all()), ("pre-ln", "normalised-branches", "mask-not-passed"),
                 quote="`mask` goes to the attention only"),
            Rule("edge-size", "the two LayerNorms have their own parameters",
                 ("B=2, T=5, 2 heads, the second sequence padded to length 3",),
                 lambda x, layer, h, mask, eps: not bool(torch.equal(layer.ln1_weight, layer.ln2_weight)),
                 ("layer-norms-swapped", "first-layer-norm-twice"),
                 quote="`layer.ln1_weight` and `layer.ln1_bias` belong to the LayerNorm after attention"),
            Rule("threshold", "the eps passed in, whatever its value (1e-12 and 1e-5 in the checks)",
                 ("B=2, T=5, 2 heads, the second sequence padded to length 3", "d=12, 3 heads, eps=1e-5"),
                 lambda x, layer, h, mask, eps: eps in (1e-12, 1e-5),
                 ("eps-hard-coded", "eps-fixed-1e-12", "eps-1e-12-in-ln1-only", "eps-1e-12-in-ln2-only",
                  "eps-1e-5-in-ln1-only", "eps-1e-5-in-ln2-only"),
                 quote="both use the `eps` passed in"),
            Rule("output", "y alone, a torch tensor of x's shape and dtype",
                 ("B=2, T=5, 2 heads, the second sequence padded to length 3",), lambda *a: True,
                 quote="Return `y` alone: a torch tensor of `x`'s shape and dtype",
                 breaches=(_numpy_breach(_block_learners_parts), _float32_breach(_block_learners_parts),
                           Breach("with-weights", lambda x, L, h, m, eps: (_block_learners_parts(x, L, h, m, eps),
                                                                         self_attention(x, L, h, m)[1]),
                                  "The block returns y alone"))),
            Rule("forbidden", "neither the package's block nor torch's layer or LayerNorm",
                 ("B=2, T=5, 2 heads, the second sequence padded to length 3",), lambda *a: True,
                 quote="not from `ch.block`, torch's `nn.TransformerEncoderLayer` or `F.layer_norm`",
                 breaches=(Breach("torch-encoder-layer", torch_encoder_layer, "you called"),
                           _layer_norm_breach(_block_with_torch_ln))),
            Rule("forbidden", "x and layer are not changed in place",
                 ("B=2, T=5, 2 heads, the second sequence padded to length 3",), lambda *a: True,
                 quote="Do not change `x` or `layer` in place", breaches=(in_place_breach(_block_learners_parts),)),
        ),
        forbidden=(
            Forbidden("the package's block or torch's encoder layer",
                      lambda: (block, encode, torch.nn.TransformerEncoderLayer,
                               torch.nn.modules.transformer.TransformerEncoderLayer),
                      "you called a whole encoder layer (ch.block or torch's nn.TransformerEncoderLayer); this "
                      "exercise asks you to build it: a = layer_norm(x + self_attention(...)[0], ln1), then "
                      "y = layer_norm(a + feed_forward(a, layer), ln2)."),
            _TORCH_LAYER_NORM,
        ),
        hints=(_float32_step,),
        structure_hint=_returned_pair,
        error_tips=_BLOCK_TIPS,
        array_type="torch",
        rtol=FLOAT64_RTOL,
        atol=FLOAT64_ATOL,
        alternatives=(_block_written_out, _block_learners_parts),
        framing=("Write `my_block(x, layer, num_heads, mask, eps)`", "The cell first picks"),
        difficulty=1,
        minutes=7,  # a third blind reader took 7 min
    )
)


# ============================================================ 3. the whole encoder
#: The largest |hidden state| of MiniLM on the check's and the search's sentences is 10.5; 11 bounds it.
MINILM_MAX_ABS = 11.0
#: The float32 estimate of reproduce.py at MiniLM's last layer: depth 7 (embeddings + 6 layers), the
#: longest sum d_ff = 1536, values up to MINILM_MAX_ABS: 7 * sqrt(1536) * 2^-24 * 11 = 1.8e-4. It is an
#: estimate, not a proven bound (the measured gaps sit far below it), and the check's float32 tolerance.
ENCODER_ATOL = float32_bound(MINILM_MAX_ABS, depth=7, n=1536)
#: The sentences of the check's MiniLM case: two lengths, so the shorter is padded.
ENCODER_SENTENCES = ("Attention is learned association.", "The cat sat on the mat, and then it slept.")
_MINILM_LABEL = "MiniLM's own weights (float32), two sentences of different lengths, against transformers"


@functools.lru_cache(maxsize=1)
def _minilm_case() -> Case:
    tokenizer, model = load_minilm()
    enc = tokenizer(list(ENCODER_SENTENCES), padding=True, return_tensors="pt")  # (2, T)
    with torch.no_grad():
        out = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], output_hidden_states=True)
    expected = torch.stack(out.hidden_states)  # (7, 2, T, 384), float32, from transformers
    # The mistakes are named on the tiny float64 BERTs; this case decides pass or fail (and says where the
    # states first leave transformers'), so the mutants are not run on it: each would cost a MiniLM forward.
    return Case(_MINILM_LABEL, (minilm_weights(), enc["input_ids"], enc["attention_mask"]), expected=expected,
                rtol=0.0, atol=ENCODER_ATOL, mutants=False, shared=(0,))


def _encoder_cases() -> list[Case]:
    g = torch.Generator().manual_seed(86)
    w2, w3 = random_bert(861), random_bert(862, n_layers=3, d=12, num_heads=3, d_ff=48)
    m = _lengths_mask([6, 4], 6)
    return [
        Case("a tiny BERT (2 layers), two sequences of lengths 6 and 4", (w2, _ids(g, 2, 6, 20, m), m)),
        Case("a tiny BERT, T=1", (w2, torch.tensor([[7]]), torch.ones(1, 1, dtype=torch.long))),
        Case("a tiny BERT (3 layers, 3 heads), no padding", (w3, _ids(g, 2, 5, 20, torch.ones(2, 5, dtype=torch.long)),
                                                              torch.ones(2, 5, dtype=torch.long))),
        _minilm_case(),
    ]


def _encoder_reference(weights, input_ids, attention_mask):
    return encode(weights, input_ids, attention_mask)


def _encoder_variant(*, mask: str = "keys", norm: str = "post", types: str = "zero", gelu_kind: str = "none",
                     positions_from: int = 0, layers: str = "each", eps_fixed: float | None = None,
                     order: str = "embeddings-first", padding: str = "states", nan_rows: bool = True):
    def f(weights, input_ids, attention_mask):
        B, T = input_ids.shape
        tt = {"zero": torch.zeros_like(input_ids), "one": torch.ones_like(input_ids)}.get(types)
        x = weights.word_embeddings[input_ids] + weights.position_embeddings[torch.arange(T) + positions_from]
        if tt is not None:
            x = x + weights.token_type_embeddings[tt]
        x = layer_norm(x, weights.ln_weight, weights.ln_bias, weights.layer_norm_eps)  # (B, T, d)
        eps = weights.layer_norm_eps if eps_fixed is None else eps_fixed  # the blocks' eps
        real = attention_mask.bool()
        m = {"keys": real[:, None, None, :], "none": None, "inverted": ~real[:, None, None, :],
             "queries-too": real[:, None, :, None] & real[:, None, None, :],
             "queries-instead": real[:, None, :, None]}[mask]
        hidden, h0 = [x], x
        for i, layer in enumerate(weights.layers):
            layer = weights.layers[0] if layers == "first" else layer
            inp = h0 if layers == "not-chained" else x
            if norm == "pre":
                x = block(inp, layer, weights.num_heads, m, eps, norm="pre")
            else:
                written_out = mask == "queries-instead" and nan_rows
                attend = _attend_written_out if written_out else _attend  # a fully masked row: NaN, or the package's
                a = _ln(inp + attend(inp, layer, weights.num_heads, m), layer, 1, eps)
                ff = feed_forward(a, layer, approximate=gelu_kind)
                x = _ln(a + ff, layer, 2, eps)
            hidden.append(x)
        out = torch.stack(hidden if order == "embeddings-first" else hidden[::-1])  # (L+1, B, T, d)
        if padding == "zeroed":
            out = out * attention_mask.to(out.dtype)[None, :, :, None]
        return out

    return f


def _attend_written_out(x, layer, num_heads, mask):
    """Attention as a learner writes it (masked_fill with -inf, then softmax): a query with no key gets NaN."""
    return _attention_variant()(x, layer, num_heads, mask)[0]


def _encoder_written_out(weights, input_ids, attention_mask):
    """A learner's encoder on a learner's own parts (einsum attention, var_mean LayerNorm, einsum FFN)."""
    T = input_ids.shape[1]
    x = _embeddings_index(weights, input_ids, torch.zeros_like(input_ids))  # (B, T, d)
    mask = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T): the keys only
    hidden = [x]
    for layer in weights.layers:
        x = _block_learners_parts(x, layer, weights.num_heads, mask, weights.layer_norm_eps)
        hidden.append(x)
    return torch.stack(hidden)


def _encoder_loop_by_sequence(weights, input_ids, attention_mask):
    """Each sequence alone, cut to its real tokens; padded positions then filled by a masked batch run."""
    full = _encoder_written_out(weights, input_ids, attention_mask)  # (L+1, B, T, d), for the padded positions
    for b in range(input_ids.shape[0]):
        n = int(attention_mask[b].sum())
        ids = input_ids[b:b + 1, :n]  # (1, n): no padding at all
        full[:, b, :n] = _encoder_written_out(weights, ids, torch.ones_like(ids))[:, 0]
    return full


_LAYER_ADVICE = {
    0: "the embeddings differ: check word + position (0, ..., T-1) + token type (0), then the LayerNorm",
    1: "the embeddings agree but layer 1 does not: check your block (attention with biases and the mask, "
       "the post-LN order, the exact GELU) on weights.layers[0]",
}


def _token(weights, input_ids, seq: int, pos: int) -> str:
    tid = int(input_ids[seq, pos])
    if weights.word_embeddings.shape[0] == 30522:  # MiniLM's vocabulary: name the word piece
        try:
            return f"token {load_minilm()[0].convert_ids_to_tokens(tid)!r}"
        except Exception:  # noqa: BLE001 - a name is a nicety, never a reason to fail
            pass
    return f"token id {tid}"


def _encoder_departure(got, expected, args):
    """Where the learner's states first leave the reference: layer, then sequence and position."""
    weights, input_ids, attention_mask = args
    g, e = as_numpy(got), as_numpy(expected)
    if g is None or e is None or g.shape != e.shape or g.ndim != 4:
        return None
    float32 = e.dtype == np.float32
    rtol, atol = (0.0, ENCODER_ATOL) if float32 else (FLOAT64_RTOL, FLOAT64_ATOL)
    dep = first_departure(torch.from_numpy(np.array(g, dtype=float)), torch.from_numpy(np.array(e, dtype=float)),
                          attention_mask, bound=atol, rtol=rtol)
    if dep is None:
        return None
    layer = "the embeddings" if dep.layer == 0 else f"after block {dep.layer}"
    place = (f"layer {dep.layer} ({layer}), sequence {dep.sequence}, position {dep.position} "
             f"({_token(weights, input_ids, dep.sequence, dep.position)})")
    if dep.padding:
        return (f"your hidden states agree at every real token but not at padding, first at {place}: BERT masks "
                f"the keys only, (B, 1, 1, T), so a padded position still gets a state, computed like the others "
                f"(pooling ignores it, but the check compares it)")
    tolerance = f"above the float32 tolerance {atol:.1e} (step 6)" if float32 else "far above float64 round-off"
    where = f"first leave the reference at {place}, by {dep.gap:.2g}, {tolerance}"
    before = dep.layer - 1
    advice = _LAYER_ADVICE.get(dep.layer, f"layers 0 to {before} agree: look at what changes from layer {before} "
                                          f"to layer {dep.layer}")
    return f"your hidden states {where}; {advice}"


_ENCODER_TIPS = (
    ("cannot be split into num_heads", " Tip: the number of heads is weights.num_heads (2 or 3 in the tiny "
     "BERTs, 12 in MiniLM)."),
    ("which does not broadcast", " Tip: the blocks take the key mask attention_mask.bool()[:, None, None, :], of "
     "shape (B, 1, 1, T)."),
    ("expected bool", " Tip: the blocks take a boolean mask, True = may attend: attention_mask.bool()[:, None, None, :]."),
)


def _list_of_states(got, expected, args) -> str | None:
    """A list instead of one tensor, or a stack without the embeddings (L states instead of L+1): named."""
    if isinstance(got, (list, tuple)):
        return "Stack the states into one tensor: torch.stack(hidden), of shape (L+1, B, T, d)."
    if (isinstance(got, torch.Tensor) and isinstance(expected, torch.Tensor) and got.ndim == expected.ndim == 4
            and got.shape[0] == expected.shape[0] - 1 and got.shape[1:] == expected.shape[1:]):
        return (f"You left the embeddings out of the stack: {got.shape[0]} states, one per block. The embeddings "
                f"come first: start the list with them, hidden = [x], so the result is (L+1, B, T, d) = "
                f"{tuple(expected.shape)}.")
    return None


register(
    Exercise(
        id="bert-encoder",
        title="The full encoder, against MiniLM",
        make_cases=_encoder_cases,
        reference=_encoder_reference,
        mutants=(
            Mutant("padding-ignored", _encoder_variant(mask="none"),
                   "your real tokens read the padding: turn attention_mask (B, T) into the key mask "
                   "attention_mask.bool()[:, None, None, :] (B, 1, 1, T) and pass it to every block."),
            Mutant("padding-mask-inverted", _encoder_variant(mask="inverted"),
                   "your mask is inverted: attention_mask is 1 for real tokens, and True means 'may attend', "
                   "so use attention_mask.bool(), not its negation."),
            Mutant("queries-masked-too", _encoder_variant(mask="queries-too"),
                   "you masked the padded queries as well as the padded keys, so padded positions get other "
                   "states than in BERT; mask the keys only, (B, 1, 1, T)."),
            Mutant("queries-masked-instead", _encoder_variant(mask="queries-instead"),
                   "your mask runs along the query axis, attention_mask.bool()[:, None, :, None] of shape (B, 1, T, 1): "
                   "it lets every real token read the padding, and it leaves a padded query no key at all (NaN). "
                   "Mask the keys: attention_mask.bool()[:, None, None, :], of shape (B, 1, 1, T)."),
            Mutant("queries-masked-instead-no-nan", _encoder_variant(mask="queries-instead", nan_rows=False),
                   "you masked the queries instead of the keys: your mask runs along the query axis, "
                   "attention_mask.bool()[:, None, :, None] of shape (B, 1, T, 1), so every real token still reads "
                   "the padding. Mask the keys: attention_mask.bool()[:, None, None, :], of shape (B, 1, 1, T)."),
            Mutant("padding-zeroed", _encoder_variant(padding="zeroed"),
                   "your states are right at the real tokens, but you set the padded positions to 0; BERT masks "
                   "the keys only, so a padded position gets a state computed like the others: return it as it is."),
            Mutant("pre-ln", _encoder_variant(norm="pre"),
                   "your blocks are pre-LN (x + MHA(LN(x))); MiniLM was trained post-LN: LN(x + MHA(x)), then "
                   "LN(a + FFN(a))."),
            Mutant("no-token-type", _encoder_variant(types="none"),
                   "layer 0 is off everywhere: add the token-type vector, weights.token_type_embeddings[0], "
                   "to every token (it is not zero)."),
            Mutant("token-types-one", _encoder_variant(types="one"),
                   "layer 0 is off everywhere: every token type is 0 here, so pass token_type_ids = "
                   "torch.zeros_like(input_ids) to embeddings."),
            Mutant("positions-from-1", _encoder_variant(positions_from=1),
                   "layer 0 is off: positions count from 0, so the first token gets position_embeddings[0]."),
            Mutant("tanh-gelu", _encoder_variant(gelu_kind="tanh"),
                   f"your encoder uses the tanh GELU; MiniLM's is the exact (erf) one. The activations differ by "
                   f"at most {GELU_GAP:.1e}, but the layers carry the gap along, above the float32 tolerance of "
                   f"{ENCODER_ATOL:.1e}."),
            Mutant("first-layer-repeated", _encoder_variant(layers="first"),
                   "every block uses the first layer's weights: loop over weights.layers and use each layer in "
                   "turn."),
            Mutant("layers-not-chained", _encoder_variant(layers="not-chained"),
                   "every block reads the embeddings; each block reads the previous block's output: x = "
                   "post_ln_block(x, layer, ...), then append x."),
            Mutant("eps-hard-coded", _encoder_variant(eps_fixed=1e-5),
                   "your blocks use eps = 1e-5 (torch's default); MiniLM's LayerNorms use weights.layer_norm_eps "
                   "(1e-12): pass it to every block."),
            Mutant("states-reversed", _encoder_variant(order="last-first"),
                   "your states are in reverse order: the embeddings come first, then each block's output in turn, "
                   "so hidden[0] is the embeddings and hidden[-1] the last layer."),
        ),
        rules=(
            Rule("range", "padding: the keys are masked (B, 1, 1, T), the queries are not, and padded positions are compared",
                 ("a tiny BERT (2 layers), two sequences of lengths 6 and 4", _MINILM_LABEL),
                 lambda w, ids, am: not bool(am.bool().all()),
                 ("padding-ignored", "padding-mask-inverted", "queries-masked-too", "queries-masked-instead",
                  "queries-masked-instead-no-nan", "padding-zeroed"),
                 quote=("Padding masks the keys only", "A padded position still gets a state")),
            Rule("edge-size", "one token", ("a tiny BERT, T=1",), lambda w, ids, am: ids.shape[1] == 1,
                 ("no-token-type", "positions-from-1", "pre-ln", "token-types-one"),
                 quote="every token type is 0"),
            Rule("edge-size", "three layers, each with its own weights, each reading the one before",
                 ("a tiny BERT (3 layers, 3 heads), no padding",),
                 lambda w, ids, am: len(w.layers) == 3, ("first-layer-repeated", "layers-not-chained", "states-reversed"),
                 quote="every layer's hidden states, the embeddings first"),
            Rule("threshold", "float64 agrees to round-off: the eps and the exact GELU show",
                 ("a tiny BERT (2 layers), two sequences of lengths 6 and 4",),
                 lambda w, ids, am: w.word_embeddings.dtype == torch.float64, ("eps-hard-coded", "tanh-gelu"),
                 quote="with float64 weights it agrees with the course's encoder to round-off"),
            Rule("threshold", "MiniLM in float32 agrees to the float32 estimate (l + 1) sqrt(d_ff) 2^-24 max|h|",
                 (_MINILM_LABEL,), lambda w, ids, am: w.word_embeddings.dtype == torch.float32,
                 quote="MiniLM's own weights in float32",
                 breaches=(Breach("tanh-gelu-on-minilm", _encoder_variant(gelu_kind="tanh"),
                                  "your encoder uses the tanh GELU"),)),
            Rule("output", "one torch tensor (L+1, B, T, d) in the weights' dtype",
                 ("a tiny BERT (2 layers), two sequences of lengths 6 and 4",), lambda *a: True,
                 quote="as one torch tensor of shape `(L+1, B, T, d)` in the weights' dtype",
                 breaches=(_float32_breach(_encoder_written_out),
                           Breach("a-list", lambda *a: list(_encoder_written_out(*a)), "torch.stack"),
                           Breach("no-embeddings", lambda *a: _encoder_written_out(*a)[1:], "You left the embeddings out of the stack"))),
            Rule("forbidden", "not the package's encoder", ("a tiny BERT (2 layers), two sequences of lengths 6 and 4",),
                 lambda *a: True, quote="not `ch.encode`",
                 breaches=(Breach("package-encoder", lambda *a: encode(*a), "you called the package's encoder"),)),
            in_place_rule("a tiny BERT (2 layers), two sequences of lengths 6 and 4", _encoder_written_out, index=2),
        ),
        forbidden=(Forbidden(
            "the package's encoder", lambda: (encode, bert_encode),
            "you called the package's encoder (ch.encode or ac.bert_encode); this exercise asks you to build it: "
            "embeddings, then post_ln_block for each layer in turn, keeping every state."),),
        hints=(_encoder_departure,),
        structure_hint=_list_of_states,
        error_tips=_ENCODER_TIPS,
        array_type="torch",
        alternatives=(_encoder_written_out, _encoder_loop_by_sequence),
        rtol=FLOAT64_RTOL,
        atol=FLOAT64_ATOL,
        framing=("Write `my_encoder(weights, input_ids, attention_mask)`", "`weights` has the embedding tables",
                 "Use `embeddings` from step 5 and `post_ln_block`"),
        difficulty=1,  # the statement gives the mask and every attribute: a short loop (two blind readers)
        minutes=10,  # two blind readers took 10 min
    )
)


EXERCISES = ("bert-attention", "post-ln-block", "bert-encoder")
