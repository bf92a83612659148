"""Chapter 10 exercises: the whole decoder with a key/value cache, sampling, and the next-token loss.

Each exercise lists typical mistakes (mutants) with their feedback; inputs are float64 torch tensors
and, for the whole decoder, SmolLM2's own float32 weights.

Signatures the notebook's stubs use:

* ``decoder-forward``: ``fn(weights, ids, cache) -> (logits, cache)``: the whole model with a
  key/value cache of shape ``(L, 2, B, h_kv, S, d_head)``.
* ``next-token-probs``: ``fn(logits, temperature, top_k, top_p) -> (B, V)``.
* ``next-token-loss``: ``fn(logits, ids) -> 0-d tensor``.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F

from ...exercises._core import Breach, Case, Exercise, Mutant, output_rule, register, Rule
from ...models.smollm2 import load_smollm2
from ..decoder.exercises import TWO_GROUPS, _gqa_sdpa, _randn
from ..decoder.grouped_attention import grouped_query_attention
from ..decoder.model import empty_cache, forward
from ..decoder.random_weights import random_decoder
from ..decoder.reproduce import logit_estimate
from ..decoder.rms_norm import rms_norm
from ..decoder.rope import apply_rope
from ..decoder.swiglu import swiglu
from ..decoder.tokenizer import encode
from .loss import next_token_loss
from .sampling import next_token_probs

__all__ = ["EXERCISES"]


# ============================================================ 1. the whole decoder, with a cache
#: The prompt of the check's SmolLM2 case.
CHECK_PROMPT = "The capital of France is"
#: The float32 estimate for SmolLM2's logits (reproduce.logit_estimate with logits up to 32): the check's tolerance.
FORWARD_ATOL = logit_estimate(32.0, n_layers=30, n=1536, d=576)


@functools.lru_cache(maxsize=1)
def _smollm2_case() -> Case:
    w = load_smollm2()
    return Case("SmolLM2-135M's own weights (float32), empty cache, 'The capital of France is'",
                (w, torch.tensor([encode(CHECK_PROMPT)]), empty_cache(w.config, 1, torch.float32)),
                mutants=False)  # 30 layers: the mistakes are named on the tiny decoders, which keeps a check fast


def _forward_cases() -> list[Case]:
    w, w2 = random_decoder(951), random_decoder(952, TWO_GROUPS)
    g = torch.Generator().manual_seed(95)
    ids = torch.randint(0, 20, (2, 7), generator=g)
    _, cache3 = forward(w, ids[:1, :3])
    _, cache2 = forward(w, ids[:, :2])
    return [
        Case("tiny decoder, empty cache, B=2, T=5", (w, ids[:, :5], empty_cache(w.config, 2, torch.float64))),
        Case("tiny decoder, 3 cached positions, 1 new token", (w, ids[:1, 3:4], cache3)),
        Case("tiny decoder, 2 cached positions, 3 new tokens", (w, ids[:, 2:5], cache2)),
        Case("6 query heads over 3, one layer, empty cache", (w2, ids[:1, :4], empty_cache(w2.config, 1, torch.float64))),
        _smollm2_case(),
    ]


def _forward_variant(*, positions: str = "offset", use_cache: bool = True, mask_fn=None, final_norm: bool = True,
                     cache_rotated: bool = True, order: str = "old-new", first_layer_only: bool = False,
                     embed_scale: bool = False, attn_residual: bool = True, kv_order: str = "k-v",
                     stores: str = "rotated", past_keys: str = "as-given"):
    """The reference with one mistake: each keyword names the step it changes (the defaults are right)."""
    def f(weights, ids, cache):
        cfg = weights.config
        B, T = ids.shape
        S0 = cache.shape[4]
        pos = torch.arange(S0, S0 + T) if positions == "offset" else torch.arange(T)
        x = weights.embed[ids]
        if embed_scale:
            x = x * math.sqrt(cfg.d_model)
        if past_keys == "rotated-again":  # the cached keys, already rotated, turned once more at 0..S-1
            cache = torch.stack([torch.stack([apply_rope(past[0], torch.arange(S0), cfg.rope_base), past[1]])
                                 for past in cache])
        keys, values = [], []
        for n, (layer, past) in enumerate(zip(weights.layers, cache)):
            layer = weights.layers[0] if first_layer_only else layer
            xn = rms_norm(x, layer.attn_norm, cfg.eps)
            q = apply_rope((xn @ layer.W_q).view(B, T, cfg.n_heads, cfg.d_head).transpose(1, 2), pos, cfg.rope_base)
            k_raw = (xn @ layer.W_k).view(B, T, cfg.n_kv_heads, cfg.d_head).transpose(1, 2)
            v = (xn @ layer.W_v).view(B, T, cfg.n_kv_heads, cfg.d_head).transpose(1, 2)
            k = apply_rope(k_raw, pos, cfg.rope_base)
            if cache_rotated:
                k_all = torch.cat([past[0], k] if order == "old-new" else [k, past[0]], dim=2)
                stored_k = k_all
            else:  # the cache holds keys before RoPE; all keys rotated again at positions 0..S-1
                stored_k = torch.cat([past[0], k_raw], dim=2)
                k_all = apply_rope(stored_k, torch.arange(S0 + T), cfg.rope_base)
            v_all = torch.cat([past[1], v] if order == "old-new" else [v, past[1]], dim=2)
            if use_cache:
                attn_k, attn_v = k_all, v_all
            else:
                attn_k, attn_v = k, v
            if mask_fn is None:
                heads = grouped_query_attention(q, attn_k, attn_v)
            else:
                heads = mask_fn(q, attn_k, attn_v)
            x = (x if attn_residual else 0) + heads.transpose(1, 2).reshape(B, T, -1) @ layer.W_o
            x = x + swiglu(rms_norm(x, layer.mlp_norm, cfg.eps), layer)
            if stores == "unrotated":  # attention used the rotated keys, but the cache keeps them unrotated
                stored_k = torch.cat([past[0], k_raw], dim=2)
            keys.append(stored_k), values.append(v_all)
        h = rms_norm(x, weights.final_norm, cfg.eps) if final_norm else x
        pair = [torch.stack(keys), torch.stack(values)]  # (L, B, h_kv, S + T, d_head) each
        return h @ weights.embed.T, torch.stack(pair if kv_order == "k-v" else pair[::-1], dim=1)

    return f


def _forward_structure_hint(got, expected, args):
    """The two shape mistakes with a known cause: the cache given back unextended, the last logits only."""
    if not (isinstance(got, tuple) and len(got) == 2 and all(isinstance(g, torch.Tensor) for g in got)):
        return None
    logits, cache = got
    (B, T), V = args[1].shape, args[0].embed.shape[0]
    if T > 1 and tuple(logits.shape) == (B, 1, V):
        return "That is the last new token's logits only: return the logits of all T new tokens, (B, T, V)."
    if tuple(cache.shape) == tuple(args[2].shape):
        return ("That is the cache you were given: extend it by the T new positions, "
                "torch.cat([cached, new], dim=2) per layer for the keys and the values.")
    return None


def _forward_loop(weights, ids, cache):
    """One new token at a time, each through the package's forward with the growing cache."""
    out = []
    for t in range(ids.shape[1]):
        logits, cache = forward(weights, ids[:, t:t + 1], cache)
        out.append(logits)
    return torch.cat(out, dim=1), cache


def _forward_recompute(weights, ids, cache):
    """A cache rebuilt from scratch would need the earlier tokens; here each layer's attention reads the cache
    as given, with a preallocated buffer written in place."""
    cfg = weights.config
    L, _, B, h_kv, S0, dh = cache.shape
    T = ids.shape[1]
    buf = torch.zeros(L, 2, B, h_kv, S0 + T, dh, dtype=cache.dtype)
    buf[..., :S0, :] = cache
    pos = torch.arange(S0, S0 + T)
    x = weights.embed[ids]
    for n, layer in enumerate(weights.layers):
        xn = rms_norm(x, layer.attn_norm, cfg.eps)
        q = apply_rope((xn @ layer.W_q).view(B, T, cfg.n_heads, dh).transpose(1, 2), pos, cfg.rope_base)
        buf[n, 0, ..., S0:, :] = apply_rope((xn @ layer.W_k).view(B, T, h_kv, dh).transpose(1, 2), pos, cfg.rope_base)
        buf[n, 1, ..., S0:, :] = (xn @ layer.W_v).view(B, T, h_kv, dh).transpose(1, 2)
        x = x + _gqa_sdpa(q, buf[n, 0], buf[n, 1]).transpose(1, 2).reshape(B, T, -1) @ layer.W_o
        x = x + swiglu(rms_norm(x, layer.mlp_norm, cfg.eps), layer)
    return rms_norm(x, weights.final_norm, cfg.eps) @ weights.embed.T, buf


register(
    Exercise(
        id="decoder-forward",
        title="The whole decoder, with a key/value cache",
        make_cases=_forward_cases,
        reference=forward,
        mutants=(
            Mutant("positions-restart", _forward_variant(positions="restart"),
                   "your new tokens are rotated as if they stood at positions 0..T-1; after S cached positions they "
                   "are at S..S+T-1 (S = cache.shape[4]): positions = torch.arange(S, S + T)."),
            Mutant("cache-not-read", _forward_variant(use_cache=False),
                   "your new tokens attend only to each other: concatenate the cached keys and values before the "
                   "new ones (along the positions, dim=2) and attend over all S + T."),
            Mutant("mask-top-left", _forward_variant(mask_fn=functools.partial(_gqa_sdpa, top_left=True)),
                   "with a cache, your causal mask is aligned at the top-left: the new queries are the last T of "
                   "the S + T positions and read keys up to their own position (tril(diagonal=S))."),
            Mutant("no-final-norm", _forward_variant(final_norm=False),
                   "you forgot the final RMSNorm: the last state goes through rms_norm(h, weights.final_norm, eps) "
                   "before the tied head, h @ weights.embed.T."),
            Mutant("keys-cached-before-rope", _forward_variant(cache_rotated=False),
                   "your cache holds the keys before RoPE; store them rotated, as they are used, so a cached key "
                   "is never rotated again."),
            Mutant("new-before-old", _forward_variant(order="new-old"),
                   "you put the new keys and values before the cached ones; positions run in order, so append "
                   "the new ones after: torch.cat([cached, new], dim=2)."),
            Mutant("first-layer-repeated", _forward_variant(first_layer_only=True),
                   "every block uses the first layer's weights: loop over weights.layers and use each in turn."),
            Mutant("cache-keys-unrotated", _forward_variant(stores="unrotated"),
                   "your logits are right, but the cache you return holds the keys before RoPE; store the rotated "
                   "keys, the ones attention used, so the next call can read them as they are."),
            Mutant("cached-keys-rotated-again", _forward_variant(past_keys="rotated-again"),
                   "you rotated the cached keys again; they were stored rotated, at their own positions, so "
                   "only the new keys turn (at S..S+T-1): torch.cat([cache[l, 0], rope(k_new)], dim=2)."),
            Mutant("keys-values-swapped", _forward_variant(kv_order="v-k"),
                   "your cache holds the values at index 0 and the keys at index 1; the statement puts the keys "
                   "at index 0 and the values at index 1 of the second axis."),
            Mutant("embeddings-scaled", _forward_variant(embed_scale=True),
                   "you multiplied the embeddings by sqrt(d) (the original Transformer's habit); Llama-style "
                   "models such as SmolLM2 use weights.embed[ids] as it is."),
            Mutant("no-attention-residual", _forward_variant(attn_residual=False),
                   "the attention output is added to the stream: x = x + Attn(RMSNorm1(x)) @ W_o, not replaced by it."),
        ),
        rules=(
            Rule("edge-size", "with cached positions, the new tokens continue their positions and read the cache",
                 ("tiny decoder, 3 cached positions, 1 new token", "tiny decoder, 2 cached positions, 3 new tokens"),
                 lambda w, ids, cache: cache.shape[4] > 0,
                 ("positions-restart", "cache-not-read", "keys-cached-before-rope", "new-before-old", "mask-top-left"), quote='The new tokens sit at positions'),
            Rule("edge-size", "several new tokens after a cache: the causal mask is aligned at the bottom-right",
                 ("tiny decoder, 2 cached positions, 3 new tokens",),
                 lambda w, ids, cache: cache.shape[4] > 0 and ids.shape[1] > 1, ("mask-top-left",), quote='The checks include a cache with one and with three new tokens'),
            Rule("threshold", "SmolLM2 in float32 agrees to the logits' float32 estimate",
                 ("SmolLM2-135M's own weights (float32), empty cache, 'The capital of France is'",),
                 lambda w, ids, cache: w.embed.dtype == torch.float32, quote='and SmolLM2 itself',
                 breaches=(Breach("no-final-norm", _forward_variant(final_norm=False), "final RMSNorm"),
                           Breach("first-layer-repeated", _forward_variant(first_layer_only=True), "first layer's weights"))),
            Rule("edge-size", "a fresh start is an empty cache (S = 0), never None: the returned cache holds the T "
                 "new positions, keys rotated at index 0 and values at index 1",
                 ("tiny decoder, empty cache, B=2, T=5", "6 query heads over 3, one layer, empty cache"),
                 lambda w, ids, cache: isinstance(cache, torch.Tensor) and cache.shape[4] == 0,
                 ("cache-keys-unrotated", "keys-values-swapped"), quote="an empty cache, never `None`"),
            Rule("edge-size", "with cached positions, the cached keys are read as they are, already rotated",
                 ("tiny decoder, 3 cached positions, 1 new token", "tiny decoder, 2 cached positions, 3 new tokens"),
                 lambda w, ids, cache: cache.shape[4] > 0, ("cached-keys-rotated-again",),
                 quote="the rotated keys (index 0)"),
            output_rule("a tuple of torch tensors (logits, cache) in the weights' dtype",
                        'tiny decoder, empty cache, B=2, T=5',
                        "the tuple `(logits, cache)` of torch tensors in the weights' dtype", forward,
                        'tuple-as-list'),
        ),
        framing=("Write `my_forward(weights, ids, cache)`", "`weights` has `config`",
                 "The stub below holds the loop over the layers"),
        structure_hint=_forward_structure_hint,
        returns=("logits", "cache"),
        alternatives=(_forward_loop, _forward_recompute),
        rtol=0.0,
        atol=FORWARD_ATOL,
        array_type="torch",
        difficulty=2,
        minutes=15,
    )
)


# ============================================================ 2. sampling
def _logits(g, B, V, std=2.0):
    return _randn(g, B, V, std=std)


def _sampling_cases() -> list[Case]:
    g = torch.Generator().manual_seed(96)
    tie = torch.tensor([[3.0, 2.0, 1.0, 1.0, 0.0, -1.0]], dtype=torch.float64)  # the third and fourth tie
    half = torch.log(torch.tensor([[0.5, 0.2, 0.15, 0.1, 0.05]], dtype=torch.float64))
    # powers of 2: probabilities 1/2, 1/4, 1/8, ... whose first two sum to 0.75 without round-off
    dyadic = torch.tensor([[0.0, -1.0, -2.0, -3.0, -4.0, -4.0]], dtype=torch.float64) * math.log(2)
    # probabilities 8, 4, 2, 1, 1, 0.5, 0.5 (/ 17): the fourth crosses 0.85 and the fifth ties with it
    crossing_tie = torch.log(torch.tensor([[8.0, 4.0, 2.0, 1.0, 1.0, 0.5, 0.5]], dtype=torch.float64))
    greedy_ties = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0 - 1e-9, 0.0, -1.0]], dtype=torch.float64)
    top_tie = torch.tensor([[2.0, 2.0, 1.0, 0.0, -1.0], [0.5, 3.0, 1.0, 2.5, 0.0]], dtype=torch.float64)
    return [
        Case("temperature 1, no top-k (0), no top-p (1.0)", (_logits(g, 2, 8), 1.0, 0, 1.0)),
        Case("temperature 0.5, top_k=3", (_logits(g, 2, 8), 0.5, 3, 1.0)),
        Case("temperature 2, top_p=0.9", (_logits(g, 2, 8), 2.0, 0, 0.9)),
        Case("top_k=3 with the third and fourth logits tied", (tie, 1.0, 3, 1.0)),
        Case("top_k=3 and top_p=0.8 together", (_logits(g, 3, 10), 1.0, 3, 0.8)),
        Case("temperature 0: greedy", (_logits(g, 2, 8), 0.0, 0, 1.0)),
        Case("top_p=0.6 where the first token alone has 0.5", (half, 1.0, 0, 0.6)),
        Case("top_p=0.75, reached exactly by the first two tokens (0.5 + 0.25)", (dyadic, 1.0, 0, 0.75)),
        Case("top_p=0.85, the crossing token tied with the next", (crossing_tie, 1.0, 0, 0.85)),
        Case("temperature 0 with tied (and nearly tied, 1e-9 apart) largest logits", (greedy_ties, 0.0, 0, 1.0)),
        Case("top_p=0: the most likely token only (the first row has two)", (top_tie, 1.0, 0, 0.0)),
        Case("top_k=20, more than the V=8 tokens", (_logits(g, 2, 8), 1.0, 20, 1.0)),
    ]


def _probs_variant(*, temperature: str = "divide", greedy: str = "first", top_k_rule: str = "ties",
                   masked: float = float("-inf"), zero_k: str = "all", top_p_rule: str = "reaches",
                   crossing_ties: bool = True, zero_p: str = "top", order: str = "k-then-p",
                   renormalise: bool = True, nucleus_of: str = "tempered"):
    """The reference with one mistake: each keyword names the step it changes (the defaults are right)."""
    def top_k(z, k):
        V = z.shape[-1]
        if k <= 0:
            return z.masked_fill(torch.ones_like(z, dtype=torch.bool), masked) if zero_k == "none" else z
        if k >= V:
            return z
        srt = z.sort(dim=-1, descending=True).values  # (B, V)
        if top_k_rule == "exactly-k":
            keep = torch.zeros_like(z, dtype=torch.bool).scatter_(-1, torch.topk(z, k, dim=-1).indices, True)
            return z.masked_fill(~keep, masked)
        kth = srt[..., k:k + 1] if top_k_rule == "k-plus-1" else srt[..., k - 1:k]  # (B, 1)
        if top_k_rule == "strict":  # z > kth: the k-th largest is dropped with anything tied with it
            return z.masked_fill(z <= kth, masked)
        return z.masked_fill(z < kth, masked)

    def nucleus(p, pp):  # (B, V) bool: the tokens top-p keeps
        if pp >= 1 or (pp == 0 and zero_p == "all"):
            return torch.ones_like(p, dtype=torch.bool)
        sp, idx = p.sort(dim=-1, descending=True, stable=True)
        cum = sp.cumsum(-1)
        drop = {"reaches": cum - sp >= pp, "drops-crossing": cum >= pp, "exceeds": cum - sp > pp}[top_p_rule]
        drop[..., 0] = False
        if crossing_ties:
            crossing = sp.masked_fill(drop, float("inf")).amin(dim=-1, keepdim=True)  # (B, 1)
            return p >= crossing
        return torch.zeros_like(drop).scatter_(-1, idx, ~drop)

    def f(logits, temperature_, k, pp):
        if temperature_ == 0 and greedy == "first":
            return torch.zeros_like(logits).scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)
        if temperature_ == 0 and greedy == "share-ties":
            top = (logits == logits.amax(-1, keepdim=True)).to(logits.dtype)
            return top / top.sum(-1, keepdim=True)
        t = 1e-10 if temperature_ == 0 and greedy == "tiny-temperature" else temperature_
        z = {"divide": lambda: logits / t, "multiply": lambda: logits * t, "ignore": lambda: logits}[temperature]()
        if order == "k-then-p":
            p = torch.softmax(top_k(z, k), -1)
            keep = nucleus(p if nucleus_of == "tempered" else torch.softmax(top_k(logits, k), -1), pp)
        else:  # the nucleus of the full distribution, then top-k
            p = torch.softmax(z, -1)
            keep = nucleus(p, pp) & (top_k(z, k) > float("-inf"))
        p = p * keep
        return p / p.sum(-1, keepdim=True) if renormalise else p

    return f


def _probs_topk_unclamped(logits, temperature, top_k, top_p):
    """The reference with torch.topk(z, top_k) unclamped: it raises when top_k > V."""
    if top_k > logits.shape[-1]:
        torch.topk(logits, top_k)
    return next_token_probs(logits, temperature, top_k, top_p)


def _probs_sorted_loop(logits, temperature, top_k, top_p):
    out = []
    for row in logits:
        if temperature == 0:
            p = torch.zeros_like(row)
            p[int(row.argmax())] = 1.0
            out.append(p)
            continue
        z = row / temperature
        if top_k:
            kth = z.sort(descending=True).values[min(top_k, len(z)) - 1]
            z = torch.where(z >= kth, z, torch.tensor(-math.inf, dtype=z.dtype))
        p = torch.softmax(z, 0)
        if top_p < 1:
            total, crossing = 0.0, None
            for s in sorted(p.tolist(), reverse=True):  # largest first, until the total reaches top_p
                total += s
                if total >= top_p:
                    crossing = s
                    break
            if crossing is not None:
                p = torch.where(p >= crossing, p, torch.zeros_like(p))
                p = p / p.sum()
        out.append(p)
    return torch.stack(out)


def _probs_hf_style(logits, temperature, top_k, top_p):
    """transformers' warpers, written out: remove what falls below the k-th logit, then the low tail
    whose total is at most 1 - top_p (sorted ascending)."""
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.shape[-1]).to(logits.dtype)
    z = logits / temperature
    if top_k > 0:
        z = z.masked_fill(z < torch.topk(z, min(top_k, z.shape[-1])).values[..., -1, None], -math.inf)
    if top_p < 1:
        p = torch.softmax(z, -1)
        sp, idx = torch.sort(p, descending=True)
        keep_sorted = (sp.cumsum(-1) - sp) < top_p
        keep_sorted[..., 0] = True  # top_p = 0: the most likely token
        threshold = torch.where(keep_sorted, sp, torch.full_like(sp, math.inf)).amin(-1, keepdim=True)
        z = z.masked_fill(p < threshold, -math.inf)
    return torch.softmax(z, -1)


register(
    Exercise(
        id="next-token-probs",
        title="Temperature, top-k and top-p",
        make_cases=_sampling_cases,
        reference=next_token_probs,
        mutants=(
            Mutant("temperature-multiplied", _probs_variant(temperature="multiply"),
                   "you multiplied the logits by the temperature; divide by it, so a temperature above 1 flattens "
                   "the distribution and one below 1 sharpens it."),
            Mutant("temperature-ignored", _probs_variant(temperature="ignore"),
                   "your temperature has no effect: divide the logits by it before the softmax (dividing the "
                   "probabilities after the softmax cancels out when you renormalise)."),
            Mutant("top-k-drops-ties", _probs_variant(top_k_rule="exactly-k"),
                   "your top-k keeps exactly k tokens and drops one of two tied logits; the statement keeps every "
                   "token whose logit is at least the k-th largest (z >= kth)."),
            Mutant("top-k-off-by-one", _probs_variant(top_k_rule="k-plus-1"),
                   "your top-k keeps k + 1 tokens: the k-th largest logit is z.sort(descending=True).values"
                   "[..., k - 1] (indices count from 0), or torch.topk(z, k).values[..., -1]."),
            Mutant("top-k-drops-kth", _probs_variant(top_k_rule="strict"),
                   "your top-k keeps only k - 1 tokens: it drops the k-th largest logit itself (z > kth, and with "
                   "it any logit tied with it). Keep every logit at least as large as the k-th largest: z >= kth."),
            Mutant("top-k-masked-with-zero", _probs_variant(masked=0.0),
                   "you set the logits top-k removes to 0, which still has probability exp(0) after the softmax; "
                   "set them to -inf so they get probability 0."),
            Mutant("top-k-zero-keeps-none", _probs_variant(zero_k="none"),
                   "top_k = 0 removed every token (the rows came out NaN); top_k = 0 means no top-k: keep all."),
            Mutant("top-p-drops-crossing-token", _probs_variant(top_p_rule="drops-crossing"),
                   "your nucleus stops before the token that crosses top_p; keep the shortest prefix whose total "
                   "reaches top_p, crossing token included (drop a token only when the mass ranked above it is "
                   "already >= top_p)."),
            Mutant("top-p-must-exceed", _probs_variant(top_p_rule="exceeds"),
                   "your nucleus goes on until its total exceeds top_p; a total equal to top_p already reaches it "
                   "(0.5 + 0.25 reaches 0.75), so drop a token when the mass ranked above it is >= top_p, not > top_p."),
            Mutant("top-p-drops-tied-crossing", _probs_variant(crossing_ties=False),
                   "your nucleus cuts between two tied probabilities: a token tied with the crossing token is kept "
                   "too (keep every probability >= the crossing token's)."),
            Mutant("top-p-zero-keeps-all", _probs_variant(zero_p="all"),
                   "you treated top_p = 0 as 'no top-p'; only top_p = 1 keeps all: top_p = 0 keeps the most likely "
                   "token (and any tied with it)."),
            Mutant("top-p-before-top-k", _probs_variant(order="p-then-k"),
                   "you took the nucleus of the full distribution; apply top-k first, renormalise, and take the "
                   "nucleus of what is left."),
            Mutant("nucleus-before-temperature", _probs_variant(nucleus_of="untempered"),
                   "you chose the nucleus from the distribution before the temperature; divide by the temperature "
                   "first, then take the nucleus of the tempered probabilities."),
            Mutant("not-renormalised", _probs_variant(renormalise=False),
                   "after zeroing the tail, divide by what is left so the probabilities sum to 1 again."),
            Mutant("greedy-divides-by-zero", _probs_variant(greedy="divide"),
                   "temperature 0 divides by zero; the statement makes it greedy: all the probability on the "
                   "largest logit (logits.argmax(-1))."),
            Mutant("greedy-shares-ties", _probs_variant(greedy="share-ties"),
                   "at temperature 0 you shared the probability among tied largest logits; greedy puts all of it on "
                   "the first of them (logits.argmax(-1) picks the first)."),
            Mutant("greedy-as-tiny-temperature", _probs_variant(greedy="tiny-temperature"),
                   "you made temperature 0 a tiny temperature; greedy is exact: probability 1 on the largest logit "
                   "(the first of tied ones) and 0 elsewhere, even for logits 1e-9 apart (logits.argmax(-1))."),
        ),
        rules=(
            Rule("tie", "top-k keeps every token tied with the k-th largest logit",
                 ("top_k=3 with the third and fourth logits tied",), lambda z, t, k, p: bool((z[0, 2] == z[0, 3])),
                 ("top-k-drops-ties",), quote='keep the logits at least as large as the `top_k`-th largest'),
            Rule("threshold", "top-k keeps down to the k-th largest logit and removes the rest",
                 ("temperature 0.5, top_k=3",), lambda z, t, k, p: 0 < k < z.shape[-1],
                 ("top-k-off-by-one", "top-k-drops-kth", "top-k-masked-with-zero"),
                 quote='keep the logits at least as large as the `top_k`-th largest'),
            Rule("edge-size", "top_k = 0 keeps every token", ("temperature 1, no top-k (0), no top-p (1.0)",),
                 lambda z, t, k, p: k == 0 and t > 0, ("top-k-zero-keeps-none",), quote='`top_k = 0`'),
            Rule("edge-size", "top_k >= V keeps every token", ("top_k=20, more than the V=8 tokens",),
                 lambda z, t, k, p: k >= z.shape[-1], quote='`top_k >= V` keeps all',
                 breaches=(Breach("top-k-beyond-V-raises", _probs_topk_unclamped, "min(top_k, V)"),)),
            Rule("threshold", "the token whose mass crosses top_p is kept",
                 ("top_p=0.6 where the first token alone has 0.5", "temperature 2, top_p=0.9"),
                 lambda z, t, k, p: p < 1, ("top-p-drops-crossing-token", "not-renormalised"), quote='the crossing token and any tied with it included'),
            Rule("threshold", "a prefix whose total is exactly top_p reaches it",
                 ("top_p=0.75, reached exactly by the first two tokens (0.5 + 0.25)",),
                 lambda z, t, k, p: float(torch.softmax(z, -1).sort(descending=True).values[0, :2].sum()) == p,
                 ("top-p-must-exceed",), quote='a total exactly `top_p` reaches it'),
            Rule("tie", "a token tied with the crossing token is kept",
                 ("top_p=0.85, the crossing token tied with the next",), lambda z, t, k, p: bool(z[0, 3] == z[0, 4]),
                 ("top-p-drops-tied-crossing",), quote='any tied with it included'),
            Rule("edge-size", "top_p = 0 keeps the most likely token and any tied with it",
                 ("top_p=0: the most likely token only (the first row has two)",), lambda z, t, k, p: p == 0,
                 ("top-p-zero-keeps-all",), quote='`top_p = 0` only the most likely token and any tied with it'),
            Rule("range", "temperature 0 is greedy", ("temperature 0: greedy",), lambda z, t, k, p: t == 0,
                 ("greedy-divides-by-zero",), quote='0 means greedy'),
            Rule("tie", "temperature 0 puts probability 1 on the first of tied largest logits, exactly",
                 ("temperature 0 with tied (and nearly tied, 1e-9 apart) largest logits",),
                 lambda z, t, k, p: t == 0 and bool(z[0, 1] == z[0, 2]) and 0 < float(z[1, 0] - z[1, 1]) < 1e-8,
                 ("greedy-shares-ties", "greedy-as-tiny-temperature"), quote='the first if several tie'),
            Rule("range", "top-k, then the nucleus of the renormalised rest", ("top_k=3 and top_p=0.8 together",),
                 lambda z, t, k, p: k > 0 and p < 1, ("top-p-before-top-k",), quote='keep the shortest prefix of the sorted probabilities'),
            Rule("range", "a temperature away from 1 divides the logits, before top-k and top-p",
                 ("temperature 0.5, top_k=3", "temperature 2, top_p=0.9"), lambda z, t, k, p: t not in (0, 1),
                 ("temperature-multiplied", "temperature-ignored", "nucleus-before-temperature"), quote='divide by `temperature`'),
            output_rule("a torch tensor (B, V) in the logits' dtype", 'temperature 1, no top-k (0), no top-p (1.0)',
                        "a torch tensor `(B, V)` in the logits' dtype", next_token_probs, 'float32'),
        ),
        error_tips=(("selected index k out of range", "top_k may exceed the V tokens (it then keeps all): "
                     "use torch.topk(z, min(top_k, V))."),),
        framing=('Write `my_next_token_probs(logits, temperature, top_k, top_p)`',
                 "Steps 1 to 3 are `tempered_top_k_probs`"),
        alternatives=(_probs_sorted_loop, _probs_hf_style),
        array_type="torch",
        difficulty=2,
        minutes=20,
    )
)


# ============================================================ 3. the next-token loss
def _loss_cases() -> list[Case]:
    g = torch.Generator().manual_seed(97)
    return [
        Case("B=2, T=5, V=7", (_randn(g, 2, 5, 7), torch.randint(0, 7, (2, 5), generator=g))),
        Case("T=2: one prediction per sequence", (_randn(g, 3, 2, 6), torch.randint(0, 6, (3, 2), generator=g))),
        Case("B=1, T=6, V=50, confident logits", (_randn(g, 1, 6, 50, std=4.0), torch.randint(0, 50, (1, 6), generator=g))),
    ]


def _loss_variant(kind: str):
    def f(logits, ids):
        B, T, V = logits.shape
        if kind == "no-shift":
            return F.cross_entropy(logits.reshape(-1, V), ids.reshape(-1))
        if kind == "backwards":
            return F.cross_entropy(logits[:, 1:].reshape(-1, V), ids[:, :-1].reshape(-1))
        if kind == "roll":
            return F.cross_entropy(logits.reshape(-1, V), ids.roll(-1, dims=1).reshape(-1))
        if kind == "flatten-then-shift":  # the last position of a sequence predicts the next sequence's first token
            return F.cross_entropy(logits.reshape(-1, V)[:-1], ids.reshape(-1)[1:])
        if kind == "softmax-twice":
            return F.cross_entropy(torch.softmax(logits[:, :-1], -1).reshape(-1, V), ids[:, 1:].reshape(-1))
        nll = F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1), reduction="none")  # (B (T-1),)
        if kind == "sum":
            return nll.sum()
        if kind == "bits":
            return nll.mean() / math.log(2)
        if kind == "raw-logits":
            return F.nll_loss(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1))
        if kind == "over-bt":
            return nll.sum() / (B * T)
        if kind == "over-t-minus-1":
            return nll.sum() / (T - 1)
        return nll.reshape(B, T - 1).sum(1).mean()  # per-sequence sums, averaged over the batch

    return f


def _loss_structure_hint(got, expected, args):
    """One loss per sequence, (B,), where one number is asked for."""
    if isinstance(got, torch.Tensor) and tuple(got.shape) == (args[1].shape[0],) and args[1].shape[0] > 1:
        return ("That is one loss per sequence: average over all B (T - 1) predictions into a single 0-d tensor "
                "(.mean() over everything, not over dim=1).")
    return None


def _loss_log_softmax(logits, ids):
    logp = torch.log_softmax(logits[:, :-1], dim=-1)  # (B, T-1, V)
    return -logp.gather(-1, ids[:, 1:, None]).mean()


def _loss_loop(logits, ids):
    total, count = 0.0, 0
    for b in range(ids.shape[0]):
        for t in range(ids.shape[1] - 1):
            total = total - torch.log_softmax(logits[b, t], 0)[ids[b, t + 1]]
            count += 1
    return total / count


register(
    Exercise(
        id="next-token-loss",
        title="The next-token loss",
        make_cases=_loss_cases,
        reference=next_token_loss,
        mutants=(
            Mutant("no-shift", _loss_variant("no-shift"),
                   "you scored each position on its own token; position t has read tokens 0..t and predicts "
                   "token t + 1: compare logits[:, :-1] with ids[:, 1:]."),
            Mutant("shifted-backwards", _loss_variant("backwards"),
                   "you shifted the wrong way (logits[:, 1:] against ids[:, :-1]), predicting the previous token; "
                   "use logits[:, :-1] against ids[:, 1:]."),
            Mutant("wraps-around", _loss_variant("roll"),
                   "you rolled the ids, so the last position is scored on the first token; the last position has "
                   "nothing to predict: drop it (logits[:, :-1], ids[:, 1:])."),
            Mutant("sum-not-mean", _loss_variant("sum"),
                   "you summed the losses; the statement asks for the mean over the B (T - 1) predictions."),
            Mutant("bits", _loss_variant("bits"),
                   "your loss is in bits (log base 2); the statement asks for nats, the natural log that "
                   "F.cross_entropy uses."),
            Mutant("no-log-softmax", _loss_variant("raw-logits"),
                   "F.nll_loss expects log-probabilities; apply torch.log_softmax to the logits first, or use "
                   "F.cross_entropy, which does both."),
            Mutant("mean-of-sequence-sums", _loss_variant("per-sequence"),
                   "you summed over the positions and averaged over the batch; average over every prediction, "
                   "B (T - 1) of them."),
            Mutant("divided-by-bt", _loss_variant("over-bt"),
                   "you divided the summed loss by B T; there are B (T - 1) predictions (the last position "
                   "predicts nothing), so divide by B (T - 1), or take the mean of the shifted pairs."),
            Mutant("averaged-over-positions-only", _loss_variant("over-t-minus-1"),
                   "you summed over the batch and averaged over the positions only (divided by T - 1); average "
                   "over all B (T - 1) predictions."),
            Mutant("shifted-after-flattening", _loss_variant("flatten-then-shift"),
                   "you shifted after flattening the batch, so the last position of one sequence is scored on the "
                   "first token of the next; shift each sequence first (logits[:, :-1], ids[:, 1:]), then flatten."),
            Mutant("softmax-twice", _loss_variant("softmax-twice"),
                   "you gave F.cross_entropy probabilities; it takes the raw logits and applies log_softmax "
                   "itself, so the softmax ran twice."),
        ),
        rules=(
            Rule("edge-size", "T = 2: one prediction per sequence, the second token from the first",
                 ("T=2: one prediction per sequence",), lambda z, ids: ids.shape[1] == 2,
                 ("no-shift", "shifted-backwards", "wraps-around", "sum-not-mean", "bits"), quote='`T >= 2`'),
            Rule("edge-size", "several positions: the mean over B (T - 1) predictions",
                 ("B=2, T=5, V=7", "B=1, T=6, V=50, confident logits"), lambda z, ids: ids.shape[1] > 2,
                 ("mean-of-sequence-sums", "no-log-softmax", "sum-not-mean"), quote='over all\n`B (T - 1)` predictions'),
            Rule("edge-size", "several sequences: each is shifted on its own, and the mean runs over the batch too",
                 ("B=2, T=5, V=7", "T=2: one prediction per sequence"), lambda z, ids: ids.shape[0] > 1,
                 ("shifted-after-flattening", "averaged-over-positions-only", "divided-by-bt"), quote='over all\n`B (T - 1)` predictions'),
            Rule("range", "ids are int64 token ids, indices into the V logits", ("B=2, T=5, V=7", "B=1, T=6, V=50, confident logits"),
                 lambda z, ids: ids.dtype == torch.int64 and int(ids.max()) < z.shape[-1], ("softmax-twice", "no-log-softmax"),
                 quote='(int64)'),
            output_rule('a 0-d torch tensor', 'B=2, T=5, V=7', 'as a 0-d tensor', next_token_loss, 'float32'),
        ),
        structure_hint=_loss_structure_hint,
        framing=('Write `my_next_token_loss(logits, ids)`',),
        alternatives=(_loss_log_softmax, _loss_loop),
        array_type="torch",
        difficulty=1,
        minutes=5,
    )
)

EXERCISES = ("decoder-forward", "next-token-probs", "next-token-loss")
