"""Chapter 8 exercises: a BERT encoder from its parts, checked against the package and against MiniLM.

Each exercise lists the mistakes learners typically make (mutants) with the feedback they
get; ``tests/chapters/encoder/test_exercises_encoder.py`` checks that every mutant is caught with
its own message. Inputs are torch tensors in float64 (small random weights) and, for the
whole encoder, MiniLM's own float32 weights compared with ``transformers``.

Signatures the notebook's stubs use (weights are
:class:`~attention_course.models.encoder.BertLayerWeights` / ``BertWeights``, used as ``x @ W + b``):

* ``bert-attention``: ``fn(x, layer, num_heads, mask) -> (output, weights)``: multi-head
  self-attention with the biases ``b_q, b_k, b_v, b_o``; ``x`` (B, T, d), ``mask`` boolean,
  broadcastable to (B, h, T, T), ``True`` = may attend; output (B, T, d), weights (B, h, T, T).
* ``layer-norm``: ``fn(x, gamma, beta, eps) -> (..., d)`` over the last axis.
* ``gelu-feed-forward``: ``fn(x, layer) -> (..., d)``: ``GELU(x W_1 + b_1) W_2 + b_2``, exact GELU.
* ``post-ln-block``: ``fn(x, layer, num_heads, mask, eps) -> (B, T, d)``: one post-LN layer.
* ``bert-embeddings``: ``fn(weights, input_ids, token_type_ids) -> (B, T, d)``.
* ``bert-encoder``: ``fn(weights, input_ids, attention_mask) -> (L+1, B, T, d)``: every layer's
  hidden states, the embeddings first; ``attention_mask`` (B, T) is 1 for real tokens.
* ``sentence-embedding``: ``fn(hidden, attention_mask) -> (B, d)``: mean over the real tokens,
  then unit length.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch
import torch.nn.functional as F

from ...core.attention import causal_mask as _causal_np
from ...exercises._compare import as_numpy, tolerances
from ...exercises._core import Case, Exercise, Mutant, Rule, register
from ...models.encoder import BertLayerWeights, BertWeights, bert_encode
from ...models.pretrained import load_minilm, minilm_weights
from .assemble import encode
from .block import block
from .embeddings import embeddings
from .feed_forward import GELU_GAP, GELU_GAP_AT, feed_forward, gelu
from .layer_norm import layer_norm
from .pooling import sentence_embeddings
from .random_weights import random_bert, random_layer
from .reproduce import first_departure, float32_bound
from .self_attention import key_mask, self_attention

__all__ = ["EXERCISES", "ENCODER_ATOL", "ENCODER_SENTENCES", "MINILM_MAX_ABS", "torch_encoder_layer"]

def _randn(g: torch.Generator, *shape: int, std: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=g, dtype=torch.float64) * std


def _lengths_mask(lengths, T: int) -> torch.Tensor:
    """(B, T) attention_mask, 1 for the first ``lengths[b]`` positions."""
    return (torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]).long()


def _ids(g: torch.Generator, B: int, T: int, vocab: int, mask: torch.Tensor) -> torch.Tensor:
    ids = torch.randint(1, vocab, (B, T), generator=g)  # (B, T)
    return ids * mask  # padding is token 0, as in BERT's vocabulary


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
    ]


def _reference_attention(x, layer, num_heads, mask):
    return self_attention(x, layer, num_heads, mask)


def _attention_variant(*, biases: bool = True, out_bias: bool = True, scale: str = "d_k",
                       masking: str = "scores", interleaved: bool = False, softmax_dim: int = -1):
    """Multi-head attention written out, with one knob per typical mistake."""
    def f(x, layer, num_heads, mask):
        B, T, d = x.shape
        h, d_k = num_heads, d // num_heads
        q, k, v = x @ layer.W_q, x @ layer.W_k, x @ layer.W_v  # (B, T, d) each
        if biases:
            q, k, v = q + layer.b_q, k + layer.b_k, v + layer.b_v
        if interleaved:
            split = lambda t: t.reshape(B, T, d_k, h).permute(0, 3, 1, 2)  # noqa: E731  (B, h, T, d_k), wrong
        else:
            split = lambda t: t.reshape(B, T, h, d_k).transpose(1, 2)  # noqa: E731  (B, h, T, d_k)
        q, k, v = split(q), split(k), split(v)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d if scale == "d_model" else d_k)  # (B, h, T, T)
        if masking == "scores":
            scores = scores.masked_fill(~mask, float("-inf"))
        elif masking == "inverted":
            scores = scores.masked_fill(mask, float("-inf"))
        weights = torch.softmax(scores, dim=softmax_dim)  # (B, h, T, T)
        if masking == "after":
            weights = weights * mask
        heads = weights @ v  # (B, h, T, d_k)
        out = heads.transpose(1, 2).reshape(B, T, d) @ layer.W_o  # (B, T, d)
        if biases and out_bias:
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


register(
    Exercise(
        id="bert-attention",
        title="Multi-head attention with biases and a mask",
        make_cases=_attention_cases,
        reference=_reference_attention,
        mutants=(
            Mutant("no-biases", _attention_variant(biases=False),
                   "you left out the biases: MiniLM's projections are x @ W + b, so q = x W_q + b_q, "
                   "k = x W_k + b_k, v = x W_v + b_v, and the output is concat(heads) W_o + b_o."),
            Mutant("no-output-bias", _attention_variant(out_bias=False),
                   "q, k and v are right, but the output needs its bias too: concat(heads) @ W_o + b_o."),
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
            Mutant("heads-interleaved", _attention_variant(interleaved=True),
                   "your heads take every h-th feature; head i owns the contiguous features "
                   "i*d_k:(i+1)*d_k: reshape to (B, T, h, d_k), then .transpose(1, 2) to (B, h, T, d_k)."),
            Mutant("softmax-over-queries", _attention_variant(softmax_dim=-2),
                   "your weights' columns sum to 1: the softmax normalises over the keys, the last axis "
                   "of the (B, h, T, S) scores (dim=-1)."),
        ),
        rules=(
            Rule("range", "padded keys get weight exactly 0: mask the scores before the softmax",
                 ("B=2, T=5, 2 heads, the second sequence padded to length 3",
                  "d=12, 3 heads, three sequences of lengths 6, 2 and 4"),
                 lambda x, layer, h, mask: not bool(mask.all()),
                 ("mask-ignored", "mask-inverted", "mask-after-softmax")),
            Rule("range", "a causal mask of shape (1, 1, T, T) broadcasts over the batch and the heads",
                 ("a causal mask of shape (1, 1, T, T)",), lambda x, layer, h, mask: mask.shape[-2] > 1,
                 ("mask-ignored", "softmax-over-queries")),
            Rule("edge-size", "one token: its only key gets weight 1, so the projections and biases decide",
                 ("T=1, one token",), lambda x, layer, h, mask: x.shape[1] == 1, ("no-biases", "no-output-bias")),
            Rule("edge-size", "several heads: each owns d_k = d / h contiguous features and is scaled by sqrt(d_k)",
                 ("4 heads, no padding", "d=12, 3 heads, three sequences of lengths 6, 2 and 4"),
                 lambda x, layer, h, mask: h > 1, ("scale-by-d-model", "heads-interleaved", "softmax-over-queries")),
        ),
        returns=("output", "weights"),
        alternatives=(_attention_einsum, _attention_sdpa),
        difficulty=2,
        minutes=20,
    )
)


# ============================================================ 2. LayerNorm
def _layer_norm_cases() -> list[Case]:
    g = torch.Generator().manual_seed(82)
    const = _randn(g, 1, 2, 5)
    const[0, 1] = 3.0  # the second token is constant: variance 0
    return [
        Case("B=2, T=3, d=8, eps=1e-12", (_randn(g, 2, 3, 8, std=2.0) + 1.0, 1 + _randn(g, 8, std=0.3),
                                          _randn(g, 8, std=0.3), 1e-12)),
        Case("T=1, one token", (_randn(g, 1, 1, 6), 1 + _randn(g, 6, std=0.3), _randn(g, 6, std=0.3), 1e-12)),
        Case("tokens with a tiny variance (std 1e-3), eps=1e-5",
             (5.0 + _randn(g, 2, 4, 8, std=1e-3), 1 + _randn(g, 8, std=0.3), _randn(g, 8, std=0.3), 1e-5)),
        Case("a constant token (variance 0), eps=1e-5", (const, 1 + _randn(g, 5, std=0.3), _randn(g, 5, std=0.3), 1e-5)),
        Case("large values (mean 10^6, std 1)", (1e6 + _randn(g, 3, 2, 4), 1 + _randn(g, 4, std=0.3),
                                                 _randn(g, 4, std=0.3), 1e-12)),
        Case("d=384, MiniLM's width", (_randn(g, 2, 3, 384), 1 + _randn(g, 384, std=0.3),
                                       _randn(g, 384, std=0.3), 1e-12)),
    ]


def _ln_variant(*, dim: int = -1, unbiased: bool = False, eps_where: str = "inside", centre: bool = True,
                affine: bool = True, power: float = 0.5):
    def f(x, gamma, beta, eps):
        mu = x.mean(dim=dim, keepdim=True) if centre else torch.zeros_like(x)
        var = ((x - mu) ** 2).sum(dim=dim, keepdim=True) / (x.shape[dim] - (1 if unbiased else 0))
        if eps_where == "inside":
            y = (x - mu) / (var + eps) ** power
        elif eps_where == "outside":
            y = (x - mu) / (var**0.5 + eps)
        else:  # no eps
            y = (x - mu) / var**0.5
        return gamma * y + beta if affine else y

    return f


def _lost_digits(got, expected, args):
    """E[x^2] - E[x]^2 on large values: close to the answer, but only to a few digits."""
    x = args[0]
    g, e = as_numpy(got), as_numpy(expected)
    if g is None or e is None or g.shape != e.shape or float(x.abs().mean()) < 1e4:
        return None
    if np.allclose(g, e, rtol=1e-2, atol=1e-2):
        return ("your result is right to a few digits only on large values: E[x^2] - E[x]^2 subtracts two "
                "numbers near 10^12 and loses most digits. Centre first: ((x - mu) ** 2).mean(dim=-1, keepdim=True)")
    return None


def _ln_torch(x, gamma, beta, eps):
    return F.layer_norm(x, (x.shape[-1],), gamma, beta, eps)


def _ln_var_mean(x, gamma, beta, eps):
    var, mu = torch.var_mean(x, dim=-1, keepdim=True, correction=0)  # (..., 1) each
    return (x - mu) * torch.rsqrt(var + eps) * gamma + beta


register(
    Exercise(
        id="layer-norm",
        title="LayerNorm",
        make_cases=_layer_norm_cases,
        reference=layer_norm,
        mutants=(
            Mutant("eps-outside-sqrt", _ln_variant(eps_where="outside"),
                   "you added eps outside the square root, (x - mu) / (sqrt(var) + eps); LayerNorm adds it "
                   "to the variance, (x - mu) / sqrt(var + eps). The two part when a token's variance is "
                   "close to eps (the case with std 1e-3)."),
            Mutant("no-eps", _ln_variant(eps_where="none"),
                   "you left out eps: a constant token has variance 0 and gives 0/0 = NaN. Divide by "
                   "sqrt(var + eps)."),
            Mutant("unbiased-variance", _ln_variant(unbiased=True),
                   "you used the unbiased variance, dividing by d - 1 (torch's x.var() does this by "
                   "default); LayerNorm divides by d: x.var(-1, keepdim=True, unbiased=False), or "
                   "((x - mu)**2).mean(-1, keepdim=True)."),
            Mutant("batch-axis", _ln_variant(dim=0),
                   "you normalised over the batch axis; LayerNorm normalises each token's d_model "
                   "features: take the mean and the variance over the last axis (dim=-1, keepdim=True)."),
            Mutant("position-axis", _ln_variant(dim=-2),
                   "you normalised over the positions (dim=-2), mixing tokens; LayerNorm normalises each "
                   "token on its own, over its d_model features (dim=-1)."),
            Mutant("no-centring", _ln_variant(centre=False),
                   "you did not subtract the mean: that is RMSNorm, x / sqrt(mean(x^2) + eps) (T5, LLaMA). "
                   "LayerNorm centres first: (x - mu) / sqrt(var + eps)."),
            Mutant("no-gain-and-shift", _ln_variant(affine=False),
                   "you normalised but left out the learned gain and shift: multiply by gamma, then add beta."),
            Mutant("divided-by-variance", _ln_variant(power=1.0),
                   "you divided by the variance; divide by its square root, the standard deviation: "
                   "(x - mu) / sqrt(var + eps)."),
        ),
        rules=(
            Rule("threshold", "eps is added to the variance inside the square root: it decides near var = eps",
                 ("tokens with a tiny variance (std 1e-3), eps=1e-5",),
                 lambda x, g, b, eps: float(x.var(-1, unbiased=False).max()) < 10 * eps, ("eps-outside-sqrt", "no-eps")),
            Rule("range", "a constant token (variance 0) gives beta, not 0/0",
                 ("a constant token (variance 0), eps=1e-5",),
                 lambda x, g, b, eps: bool((x.var(-1, unbiased=False) == 0).any()), ("no-eps",)),
            Rule("edge-size", "one token: its statistics are its own, whatever else is in the batch",
                 ("T=1, one token",), lambda x, g, b, eps: x.shape[0] == x.shape[1] == 1, ("batch-axis", "position-axis")),
            Rule("edge-size", "d = 384 features: divide by d, not d - 1",
                 ("d=384, MiniLM's width",), lambda x, g, b, eps: x.shape[-1] == 384, ("unbiased-variance",)),
            Rule("range", "large values (mean 10^6): centre before squaring",
                 ("large values (mean 10^6, std 1)",), lambda x, g, b, eps: float(x.abs().mean()) > 1e4,
                 ("no-centring", "divided-by-variance")),
        ),
        hints=(_lost_digits,),
        alternatives=(_ln_torch, _ln_var_mean),
        difficulty=1,
        minutes=10,
    )
)


# ============================================================ 3. feed-forward with GELU
def _ffn_cases() -> list[Case]:
    g = torch.Generator().manual_seed(83)
    L8, L16 = random_layer(g, 8, 32), random_layer(g, 16, 64)
    return [
        Case("B=2, T=3, d=8, d_ff=32", (_randn(g, 2, 3, 8), L8)),
        Case("T=1, one token", (_randn(g, 1, 1, 8), L8)),
        Case("d=16, d_ff=64, larger inputs", (_randn(g, 2, 5, 16, std=2.0), L16)),
    ]


def _ffn_variant(activation, *, bias_after: bool = False, on_output: bool = False):
    def f(x, layer):
        z = x @ layer.W_1 + (0.0 if bias_after else layer.b_1)  # (..., d_ff)
        hidden = activation(z) + (layer.b_1 if bias_after else 0.0)
        out = hidden @ layer.W_2 + layer.b_2  # (..., d)
        return activation(out) if on_output else out

    return f


def _gelu_tanh(z):
    return 0.5 * z * (1 + torch.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z**3)))


def _gelu_sigmoid(z):
    return z * torch.sigmoid(1.702 * z)


def _gelu_no_sqrt2(z):
    return 0.5 * z * (1 + torch.erf(z))


def _ffn_torch(x, layer):
    return F.linear(F.gelu(F.linear(x, layer.W_1.T, layer.b_1)), layer.W_2.T, layer.b_2)


def _ffn_normal_cdf(x, layer):
    z = x @ layer.W_1 + layer.b_1
    phi = torch.distributions.Normal(torch.zeros((), dtype=z.dtype), torch.ones((), dtype=z.dtype)).cdf(z)
    return (z * phi) @ layer.W_2 + layer.b_2


@functools.lru_cache(maxsize=1)
def _tanh_ffn_gap() -> float:
    """The largest gap between the tanh-GELU and the exact feed-forward outputs on the check's cases."""
    gaps = [float((_ffn_variant(_gelu_tanh)(*c.args) - feed_forward(*c.args)).abs().max()) for c in _ffn_cases()]
    return max(gaps)


register(
    Exercise(
        id="gelu-feed-forward",
        title="The feed-forward block with GELU",
        make_cases=_ffn_cases,
        reference=feed_forward,
        mutants=(
            Mutant("tanh-gelu", _ffn_variant(_gelu_tanh),
                   f"you wrote the tanh approximation of GELU (GPT-2's). BERT uses the exact GELU, "
                   f"z * Phi(z) = 0.5 z (1 + erf(z / sqrt(2))). The two differ by at most {GELU_GAP:.1e} "
                   f"(at |z| = {GELU_GAP_AT:.1f}); after W_2 your outputs here are off by up to "
                   f"{_tanh_ffn_gap():.1e}, far above float64 round-off, and MiniLM was trained with erf."),
            Mutant("relu", _ffn_variant(torch.relu),
                   "you used ReLU; BERT's activation is GELU, z * Phi(z) = 0.5 z (1 + erf(z / sqrt(2))), "
                   "which lets small negative values through."),
            Mutant("sigmoid-gelu", _ffn_variant(_gelu_sigmoid),
                   "that is the sigmoid approximation of GELU, z * sigmoid(1.702 z), off by up to 0.02; BERT "
                   "uses the exact form 0.5 z (1 + erf(z / sqrt(2)))."),
            Mutant("erf-without-sqrt2", _ffn_variant(_gelu_no_sqrt2),
                   "the normal CDF is Phi(z) = (1 + erf(z / sqrt(2))) / 2: divide z by sqrt(2) inside erf."),
            Mutant("no-activation", _ffn_variant(lambda z: z),
                   "there is no activation between the two linear maps, so the block is one linear map: "
                   "apply GELU to x @ W_1 + b_1."),
            Mutant("gelu-on-output-too", _ffn_variant(gelu, on_output=True),
                   "the GELU goes between the two linear maps only: GELU(x W_1 + b_1) W_2 + b_2, with "
                   "nothing after b_2."),
            Mutant("bias-after-gelu", _ffn_variant(gelu, bias_after=True),
                   "add b_1 before the GELU: GELU(x @ W_1 + b_1), not GELU(x @ W_1) + b_1."),
        ),
        rules=(
            Rule("range", "pre-activations near |z| = 2.7, where the tanh GELU is furthest from the exact one",
                 ("d=16, d_ff=64, larger inputs",),
                 lambda x, layer: float(((x @ layer.W_1 + layer.b_1).abs() - GELU_GAP_AT).abs().min()) < 0.05,
                 ("tanh-gelu", "sigmoid-gelu", "erf-without-sqrt2")),
            Rule("range", "negative pre-activations: GELU lets small negative values through",
                 ("B=2, T=3, d=8, d_ff=32",), lambda x, layer: float((x @ layer.W_1 + layer.b_1).min()) < -1.0,
                 ("relu", "no-activation")),
            Rule("edge-size", "one token", ("T=1, one token",), lambda x, layer: x.shape[1] == 1,
                 ("bias-after-gelu", "gelu-on-output-too")),
        ),
        alternatives=(_ffn_torch, _ffn_normal_cdf),
        difficulty=1,
        minutes=10,
    )
)


# ============================================================ 4. residuals and post-LN
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


def _block_pre_ln(x, layer, num_heads, mask, eps):
    return block(x, layer, num_heads, mask, eps, norm="pre")


def _block_no_attention_residual(x, layer, num_heads, mask, eps):
    a = _ln(_attend(x, layer, num_heads, mask), layer, 1, eps)
    return _ln(a + feed_forward(a, layer), layer, 2, eps)


def _block_no_ffn_residual(x, layer, num_heads, mask, eps):
    a = _ln(x + _attend(x, layer, num_heads, mask), layer, 1, eps)
    return _ln(feed_forward(a, layer), layer, 2, eps)


def _block_residual_from_input(x, layer, num_heads, mask, eps):
    a = _ln(x + _attend(x, layer, num_heads, mask), layer, 1, eps)
    return _ln(x + feed_forward(a, layer), layer, 2, eps)


def _block_ln_swapped(x, layer, num_heads, mask, eps):
    a = _ln(x + _attend(x, layer, num_heads, mask), layer, 2, eps)
    return _ln(a + feed_forward(a, layer), layer, 1, eps)


def _block_no_final_ln(x, layer, num_heads, mask, eps):
    a = _ln(x + _attend(x, layer, num_heads, mask), layer, 1, eps)
    return a + feed_forward(a, layer)


def _block_normalised_branches(x, layer, num_heads, mask, eps):
    a = x + _ln(_attend(x, layer, num_heads, mask), layer, 1, eps)
    return a + _ln(feed_forward(a, layer), layer, 2, eps)


def _block_torch(x, layer, num_heads, mask, eps):
    d = x.shape[-1]
    attn, _ = _attention_einsum(x, layer, num_heads, mask)
    a = F.layer_norm(x + attn, (d,), layer.ln1_weight, layer.ln1_bias, eps)
    ff = F.gelu(a @ layer.W_1 + layer.b_1) @ layer.W_2 + layer.b_2
    return F.layer_norm(a + ff, (d,), layer.ln2_weight, layer.ln2_bias, eps)


def torch_encoder_layer(x, layer, num_heads, mask, eps):
    """The same layer computed by ``torch.nn.TransformerEncoderLayer`` (post-LN, exact GELU, no dropout).

    The weights are copied in (``nn.Linear`` stores ``W.T``); the mask is converted to torch's
    convention (True = blocked): a key mask (B, 1, 1, T) becomes ``src_key_padding_mask``, a
    (1, 1, T, T) mask ``src_mask``.

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


register(
    Exercise(
        id="post-ln-block",
        title="Residual connections and post-LN",
        make_cases=_block_cases,
        reference=_block_reference,
        mutants=(
            Mutant("pre-ln", _block_pre_ln,
                   "that is a pre-LN block (GPT-2's order): a = x + MHA(LN1(x)), y = a + FFN(LN2(a)). BERT "
                   "is post-LN: add the residual first, then normalise the sum: a = LN1(x + MHA(x)), "
                   "y = LN2(a + FFN(a))."),
            Mutant("no-attention-residual", _block_no_attention_residual,
                   "the attention output needs its residual connection: a = LN1(x + MHA(x)), not LN1(MHA(x))."),
            Mutant("no-ffn-residual", _block_no_ffn_residual,
                   "the feed-forward output needs its residual connection: y = LN2(a + FFN(a)), not LN2(FFN(a))."),
            Mutant("residual-from-block-input", _block_residual_from_input,
                   "the second residual adds a, the output of the first LayerNorm, not the block's input x: "
                   "y = LN2(a + FFN(a))."),
            Mutant("layer-norms-swapped", _block_ln_swapped,
                   "the two LayerNorms are swapped: ln1_weight and ln1_bias come after attention, ln2_* after "
                   "the feed-forward."),
            Mutant("no-final-layer-norm", _block_no_final_ln,
                   "the block ends with a LayerNorm in BERT: y = LN2(a + FFN(a)), with ln2_weight and ln2_bias."),
            Mutant("normalised-branches", _block_normalised_branches,
                   "you normalised each branch's output before adding it (x + LN(MHA(x))); BERT normalises the "
                   "sum: LN1(x + MHA(x))."),
        ),
        rules=(
            Rule("edge-size", "one token: attention returns its own value, so the residuals and LayerNorms decide",
                 ("T=1, one token",), lambda x, layer, h, mask, eps: x.shape[1] == 1,
                 ("pre-ln", "no-attention-residual", "no-ffn-residual", "residual-from-block-input",
                  "layer-norms-swapped", "no-final-layer-norm", "normalised-branches")),
            Rule("range", "padding and causal masks go to the attention, nowhere else",
                 ("B=2, T=5, 2 heads, the second sequence padded to length 3", "a causal mask (1, 1, T, T)"),
                 lambda x, layer, h, mask, eps: not bool(mask.all()), ("pre-ln", "normalised-branches")),
        ),
        alternatives=(_block_torch, torch_encoder_layer),
        difficulty=2,
        minutes=15,
    )
)


# ============================================================ 5. embeddings
def _embedding_cases() -> list[Case]:
    g = torch.Generator().manual_seed(85)
    w = random_bert(85, n_layers=0)
    ids = torch.tensor([[3, 7, 7, 1, 0]])  # a repeated word, then padding (id 0)
    return [
        Case("B=2, T=5, one segment", (w, torch.randint(0, 20, (2, 5), generator=g), torch.zeros(2, 5, dtype=torch.long))),
        Case("T=1, one token", (w, torch.tensor([[5]]), torch.zeros(1, 1, dtype=torch.long))),
        Case("a sentence pair: token types 0 then 1",
             (w, torch.randint(0, 20, (1, 6), generator=g), torch.tensor([[0, 0, 0, 1, 1, 1]]))),
        Case("a repeated word and padding (id 0)", (w, ids, torch.zeros(1, 5, dtype=torch.long))),
    ]


def _embedding_variant(*, positions: str = "learned", types: bool = True, ln: bool = True, scale: bool = False):
    def f(weights, input_ids, token_type_ids):
        B, T = input_ids.shape
        d = weights.word_embeddings.shape[1]
        x = weights.word_embeddings[input_ids] * (math.sqrt(d) if scale else 1.0)  # (B, T, d)
        if positions == "learned":
            x = x + weights.position_embeddings[torch.arange(T)]
        elif positions == "from-1":
            x = x + weights.position_embeddings[torch.arange(1, T + 1)]
        elif positions == "by-token-id":
            x = x + weights.position_embeddings[input_ids]
        elif positions == "sinusoidal":
            t = torch.arange(T, dtype=x.dtype)[:, None]  # (T, 1)
            freq = 10000.0 ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)  # (d/2,)
            pe = torch.zeros(T, d, dtype=x.dtype)
            pe[:, 0::2], pe[:, 1::2] = torch.sin(t * freq), torch.cos(t * freq)
            x = x + pe
        if types:
            x = x + weights.token_type_embeddings[token_type_ids]
        if ln:
            x = layer_norm(x, weights.ln_weight, weights.ln_bias, weights.layer_norm_eps)
        return x

    return f


def _embeddings_torch(weights, input_ids, token_type_ids):
    T = input_ids.shape[1]
    x = (F.embedding(input_ids, weights.word_embeddings) + F.embedding(torch.arange(T), weights.position_embeddings)
         + F.embedding(token_type_ids, weights.token_type_embeddings))
    return F.layer_norm(x, (x.shape[-1],), weights.ln_weight, weights.ln_bias, weights.layer_norm_eps)


def _embeddings_loop(weights, input_ids, token_type_ids):
    rows = []
    for b in range(input_ids.shape[0]):
        for t in range(input_ids.shape[1]):
            rows.append(weights.word_embeddings[input_ids[b, t]] + weights.position_embeddings[t]
                        + weights.token_type_embeddings[token_type_ids[b, t]])
    x = torch.stack(rows).reshape(*input_ids.shape, -1)
    return layer_norm(x, weights.ln_weight, weights.ln_bias, weights.layer_norm_eps)


register(
    Exercise(
        id="bert-embeddings",
        title="Word, position and token-type embeddings",
        make_cases=_embedding_cases,
        reference=embeddings,
        mutants=(
            Mutant("no-positions", _embedding_variant(positions="none"),
                   "a word gets the same vector wherever it stands (the repeated word): add "
                   "weights.position_embeddings[t] for the positions t = 0, ..., T-1."),
            Mutant("positions-from-1", _embedding_variant(positions="from-1"),
                   "BERT counts positions from 0: the first token gets position_embeddings[0], so use "
                   "torch.arange(T), not torch.arange(1, T + 1)."),
            Mutant("positions-by-token-id", _embedding_variant(positions="by-token-id"),
                   "you looked the position vectors up with the token ids; look them up with the positions "
                   "0, ..., T-1: position_embeddings[torch.arange(T)]."),
            Mutant("sinusoidal-positions", _embedding_variant(positions="sinusoidal"),
                   "those are the sinusoidal positions of the original Transformer; MiniLM learned its own: "
                   "add weights.position_embeddings[torch.arange(T)]."),
            Mutant("no-token-type", _embedding_variant(types=False),
                   "you left out the token-type vector. It is added to every token, even when every type is "
                   "0, because token_type_embeddings[0] is not zero."),
            Mutant("no-layer-norm", _embedding_variant(ln=False),
                   "the sum goes through a LayerNorm before the first layer: layer_norm(x, weights.ln_weight, "
                   "weights.ln_bias, weights.layer_norm_eps)."),
            Mutant("scaled-by-sqrt-d", _embedding_variant(scale=True),
                   "you multiplied the word vectors by sqrt(d_model), as the original Transformer does; BERT "
                   "adds them unscaled."),
        ),
        rules=(
            Rule("edge-size", "one token: position 0 and token type 0", ("T=1, one token",),
                 lambda w, ids, tt: ids.shape[1] == 1,
                 ("positions-from-1", "no-token-type", "no-layer-norm", "scaled-by-sqrt-d", "sinusoidal-positions")),
            Rule("range", "a sentence pair: token types 0 and 1 pick different vectors",
                 ("a sentence pair: token types 0 then 1",), lambda w, ids, tt: int(tt.max()) == 1, ("no-token-type",)),
            Rule("tie", "a repeated word gets a different vector at each position",
                 ("a repeated word and padding (id 0)",),
                 lambda w, ids, tt: len(set(ids[0].tolist())) < ids.shape[1], ("no-positions", "positions-by-token-id")),
        ),
        alternatives=(_embeddings_torch, _embeddings_loop),
        difficulty=1,
        minutes=10,
    )
)


# ============================================================ 6. the whole encoder
#: The largest |hidden state| of MiniLM on the check's and the search's sentences is 10.5; 11 bounds it.
MINILM_MAX_ABS = 11.0
#: The float32 bound of reproduce.py at MiniLM's last layer: depth 7 (embeddings + 6 layers), the
#: longest sum d_ff = 1536, values up to MINILM_MAX_ABS: 7 * sqrt(1536) * 2^-24 * 11 = 1.8e-4.
ENCODER_ATOL = float32_bound(MINILM_MAX_ABS, depth=7, n=1536)
#: The sentences of the check's MiniLM case: two lengths, so the shorter is padded.
ENCODER_SENTENCES = ("Attention is learned association.", "The cat sat on the mat, and then it slept.")


@functools.lru_cache(maxsize=1)
def _minilm_case() -> Case:
    tokenizer, model = load_minilm()
    enc = tokenizer(list(ENCODER_SENTENCES), padding=True, return_tensors="pt")  # (2, T)
    with torch.no_grad():
        out = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], output_hidden_states=True)
    expected = torch.stack(out.hidden_states)  # (7, 2, T, 384), float32, from transformers
    return Case("MiniLM's own weights (float32), two sentences of different lengths, against transformers",
                (minilm_weights(), enc["input_ids"], enc["attention_mask"]), expected=expected)


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


def _encoder_variant(*, mask: str = "keys", norm: str = "post", types: bool = True, gelu_kind: str = "none",
                     positions_from: int = 0, first_layer_only: bool = False):
    def f(weights, input_ids, attention_mask):
        B, T = input_ids.shape
        x = weights.word_embeddings[input_ids] + weights.position_embeddings[torch.arange(T) + positions_from]
        if types:
            x = x + weights.token_type_embeddings[0]
        x = layer_norm(x, weights.ln_weight, weights.ln_bias, weights.layer_norm_eps)  # (B, T, d)
        real = attention_mask.bool()
        m = {"keys": real[:, None, None, :], "none": None, "inverted": ~real[:, None, None, :],
             "queries-too": real[:, None, :, None] & real[:, None, None, :]}[mask]
        hidden, eps = [x], weights.layer_norm_eps
        for layer in weights.layers:
            layer = weights.layers[0] if first_layer_only else layer
            if norm == "pre":
                x = block(x, layer, weights.num_heads, m, eps, norm="pre")
            else:
                a = _ln(x + _attend(x, layer, weights.num_heads, m), layer, 1, eps)
                ff = feed_forward(a, layer, approximate=gelu_kind)
                x = _ln(a + ff, layer, 2, eps)
            hidden.append(x)
        return torch.stack(hidden)  # (L+1, B, T, d)

    return f


def _encoder_via_bert_encode(weights, input_ids, attention_mask):
    return torch.stack(bert_encode(weights, input_ids, attention_mask).hidden_states)


def _encoder_loop_by_sequence(weights, input_ids, attention_mask):
    """Each sequence alone, cut to its real tokens; padded positions then filled by a masked batch run."""
    full = encode(weights, input_ids, attention_mask)  # (L+1, B, T, d), for the padded positions
    for b in range(input_ids.shape[0]):
        n = int(attention_mask[b].sum())
        full[:, b, :n] = encode(weights, input_ids[b:b + 1, :n])[:, 0]  # no padding at all
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
    rtol, atol = tolerances(e, 0.0, ENCODER_ATOL)
    dep = first_departure(torch.from_numpy(np.array(g, dtype=float)), torch.from_numpy(np.array(e, dtype=float)),
                          attention_mask, bound=atol, rtol=rtol)
    if dep is None:
        return None
    layer = "the embeddings" if dep.layer == 0 else f"after block {dep.layer}"
    place = (f"layer {dep.layer} ({layer}), sequence {dep.sequence}, position {dep.position} "
             f"({_token(weights, input_ids, dep.sequence, dep.position)})")
    if dep.padding:
        return (f"your hidden states agree at every real token but not at padding, first at {place}: BERT masks "
                f"the keys only, (B, 1, 1, T), so padded positions still get states (which pooling ignores)")
    where = f"first leave the reference at {place}, by {dep.gap:.2g}, above the float32 bound {atol:.1e}"
    before = dep.layer - 1
    advice = _LAYER_ADVICE.get(dep.layer, f"layers 0 to {before} agree: look at what changes from layer {before} "
                                          f"to layer {dep.layer} (are you using weights.layers[{before}]?)")
    return f"your hidden states {where}; {advice}"


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
            Mutant("pre-ln", _encoder_variant(norm="pre"),
                   "your blocks are pre-LN (x + MHA(LN(x))); MiniLM was trained post-LN: LN(x + MHA(x)), then "
                   "LN(a + FFN(a))."),
            Mutant("no-token-type", _encoder_variant(types=False),
                   "layer 0 is off everywhere: add the token-type vector, weights.token_type_embeddings[0], "
                   "to every token (it is not zero)."),
            Mutant("positions-from-1", _encoder_variant(positions_from=1),
                   "layer 0 is off: positions count from 0, so the first token gets position_embeddings[0]."),
            Mutant("tanh-gelu", _encoder_variant(gelu_kind="tanh"),
                   f"your encoder uses the tanh GELU; MiniLM's is the exact (erf) one. The activations differ by "
                   f"at most {GELU_GAP:.1e}, but the layers carry the gap along, above the float32 bound of "
                   f"{ENCODER_ATOL:.1e}."),
            Mutant("first-layer-repeated", _encoder_variant(first_layer_only=True),
                   "every block uses the first layer's weights: loop over weights.layers and use each layer in "
                   "turn."),
        ),
        rules=(
            Rule("range", "padding: the keys are masked, the queries are not",
                 ("a tiny BERT (2 layers), two sequences of lengths 6 and 4",
                  "MiniLM's own weights (float32), two sentences of different lengths, against transformers"),
                 lambda w, ids, am: not bool(am.bool().all()),
                 ("padding-ignored", "padding-mask-inverted", "queries-masked-too")),
            Rule("edge-size", "one token", ("a tiny BERT, T=1",), lambda w, ids, am: ids.shape[1] == 1,
                 ("no-token-type", "positions-from-1", "pre-ln")),
            Rule("edge-size", "three layers, each with its own weights", ("a tiny BERT (3 layers, 3 heads), no padding",),
                 lambda w, ids, am: len(w.layers) == 3, ("first-layer-repeated",)),
            Rule("threshold", "MiniLM in float32 agrees to the float32 bound (l + 1) sqrt(d_ff) 2^-24 max|h|",
                 ("MiniLM's own weights (float32), two sentences of different lengths, against transformers",),
                 lambda w, ids, am: w.word_embeddings.dtype == torch.float32, ("tanh-gelu",)),
        ),
        hints=(_encoder_departure,),
        alternatives=(_encoder_via_bert_encode, _encoder_loop_by_sequence),
        rtol=0.0,
        atol=ENCODER_ATOL,
        difficulty=2,
        minutes=20,
    )
)


# ============================================================ 7. sentence embeddings
def _pooling_cases() -> list[Case]:
    g = torch.Generator().manual_seed(87)
    return [
        Case("B=2, T=5, the second sentence padded to length 3", (_randn(g, 2, 5, 8) + 0.5, _lengths_mask([5, 3], 5))),
        Case("T=1, one token", (_randn(g, 1, 1, 4) + 0.5, torch.ones(1, 1, dtype=torch.long))),
        Case("three sentences of lengths 6, 2 and 4", (_randn(g, 3, 6, 16) + 0.5, _lengths_mask([6, 2, 4], 6))),
        Case("no padding", (_randn(g, 2, 4, 8) + 0.5, torch.ones(2, 4, dtype=torch.long))),
    ]


def _pool_variant(*, kind: str = "mean", normalise: str = "after"):
    def f(hidden, attention_mask):
        m = attention_mask.to(hidden.dtype)[..., None]  # (B, T, 1)
        h = F.normalize(hidden, dim=-1) if normalise == "tokens" else hidden
        if kind == "mean":
            e = (h * m).sum(1) / m.sum(1)
        elif kind == "mean-with-padding":
            e = h.mean(1)
        elif kind == "cls":
            e = h[:, 0]
        else:  # max over the real tokens
            e = h.masked_fill(m == 0, float("-inf")).amax(1)
        if normalise == "none":
            return e
        return e / torch.linalg.vector_norm(e, dim=0 if normalise == "batch" else -1, keepdim=True)

    return f


def _pool_loop(hidden, attention_mask):
    out = []
    for h, m in zip(hidden, attention_mask):
        e = h[m.bool()].mean(0)  # (d,) over the real tokens
        out.append(e / e.norm())
    return torch.stack(out)


def _pool_sum_normalise(hidden, attention_mask):
    return F.normalize((hidden * attention_mask[..., None]).sum(1), dim=-1)  # the sum has the mean's direction


register(
    Exercise(
        id="sentence-embedding",
        title="Mean pooling and normalisation",
        make_cases=_pooling_cases,
        reference=sentence_embeddings,
        mutants=(
            Mutant("padding-averaged", _pool_variant(kind="mean-with-padding"),
                   "you averaged over the padding positions too: weight each position by attention_mask "
                   "and divide by the number of real tokens, (h * m).sum(1) / m.sum(1)."),
            Mutant("cls-token", _pool_variant(kind="cls"),
                   "that is the [CLS] token's state; all-MiniLM-L6-v2 was trained with mean pooling over the "
                   "real tokens."),
            Mutant("max-pooling", _pool_variant(kind="max"),
                   "that is max pooling; all-MiniLM-L6-v2 averages the real tokens' states."),
            Mutant("not-normalised", _pool_variant(normalise="none"),
                   "the mean is right, but the model's sentence vectors have length 1: divide each by its "
                   "norm, e / e.norm(dim=-1, keepdim=True)."),
            Mutant("tokens-normalised-first", _pool_variant(normalise="tokens"),
                   "you normalised every token before averaging; average first, then normalise the mean."),
            Mutant("batch-axis-normalised", _pool_variant(normalise="batch"),
                   "you normalised over the batch axis (dim=0); each sentence vector gets unit length on its "
                   "own: dim=-1."),
        ),
        rules=(
            Rule("range", "padding counts in neither sum",
                 ("B=2, T=5, the second sentence padded to length 3", "three sentences of lengths 6, 2 and 4"),
                 lambda h, am: not bool(am.bool().all()), ("padding-averaged",)),
            Rule("edge-size", "one token: its own state, at unit length", ("T=1, one token",),
                 lambda h, am: h.shape[1] == 1, ("not-normalised", "batch-axis-normalised")),
            Rule("edge-size", "several sentences: each vector gets unit length on its own",
                 ("three sentences of lengths 6, 2 and 4",), lambda h, am: h.shape[0] > 1,
                 ("batch-axis-normalised", "cls-token", "max-pooling", "tokens-normalised-first")),
        ),
        alternatives=(_pool_loop, _pool_sum_normalise),
        difficulty=1,
        minutes=10,
    )
)

EXERCISES = ("bert-attention", "layer-norm", "gelu-feed-forward", "post-ln-block", "bert-embeddings",
             "bert-encoder", "sentence-embedding")
