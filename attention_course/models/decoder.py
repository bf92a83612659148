r"""A Llama-style decoder's forward pass that shows its attention: SmolLM2-135M's maps, queries and keys.

Chapters 3-7 read it; chapter 9 builds the same model for the learner (a test keeps them equal).
Each layer (pre-norm, as in Llama):

.. math::

    q = \operatorname{RoPE}(\operatorname{RMSNorm}(x) W_Q), \quad
    k = \operatorname{RoPE}(\operatorname{RMSNorm}(x) W_K), \quad
    A = \operatorname{softmax}\Big(\frac{q k^\top}{\sqrt{d_{head}}} + M_{\text{causal}}\Big),

    a = x + (A v) W_O, \qquad y = a + \operatorname{SwiGLU}(\operatorname{RMSNorm}(a)),

with rotate-half RoPE and grouped-query attention (query head ``i`` reads key/value head
``i // (h / h_kv)``). The maps at 512 tokens take 283 MB: ask only for what you need (``keep``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from typing import NamedTuple, Optional

import torch

from ..core._backend import ShapeError, shape_str
from .smollm2 import DecoderConfig, DecoderLayer, DecoderWeights

__all__ = ["DecoderPass", "KEEP", "decoder_pass", "next_token_loss", "causal_uniform"]

#: What :func:`decoder_pass` can keep: the maps, the queries and keys after RoPE, the hidden states.
KEEP = ("attentions", "queries", "keys", "hidden_states")

#: ``transform(weights (B, h, T, T), layer) -> weights'`` applied to a layer's maps before ``@ v``.
MapTransform = Callable[[torch.Tensor, int], torch.Tensor]


class DecoderPass(NamedTuple):
    """What :func:`decoder_pass` returns (a field not asked for in ``keep`` is None).

    ``logits`` (B, T, V); ``attentions``, one (B, h, T, T) tensor per layer (the model's own maps,
    before any transform); ``queries`` (B, h, T, d_head) and ``keys`` (B, h_kv, T, d_head) per
    layer, after RoPE; ``hidden_states`` (L + 1, B, T, d), the embeddings first, before the final norm.
    """

    logits: torch.Tensor
    attentions: Optional[list]
    queries: Optional[list]
    keys: Optional[list]
    hidden_states: Optional[torch.Tensor]


def _rms_norm(x: torch.Tensor, gain: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * gain  # (..., d)


def _rope(x: torch.Tensor, base: float) -> torch.Tensor:
    """Rotate-half RoPE of ``x`` (B, heads, T, d) at positions 0 .. T-1."""
    T, d = x.shape[-2:]
    freqs = 1.0 / base ** (torch.arange(0, d, 2, dtype=torch.int64).to(x.dtype) / d)  # (d/2,)
    angles = torch.arange(T).to(x.dtype)[:, None] * freqs[None, :]  # (T, d/2)
    angles = torch.cat([angles, angles], dim=-1)  # (T, d): feature i and i + d/2 share an angle
    half = d // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)  # (B, heads, T, d)
    return x * angles.cos() + rotated * angles.sin()


def _layer(x: torch.Tensor, layer: DecoderLayer, cfg: DecoderConfig, index: int,
           transform: Optional[MapTransform]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One pre-norm layer: ``(y (B, T, d), weights (B, h, T, T), q (B, h, T, dh), k (B, h_kv, T, dh))``."""
    B, T, _ = x.shape
    h, h_kv, dh = cfg.n_heads, cfg.n_kv_heads, cfg.d_head
    n = _rms_norm(x, layer.attn_norm, cfg.eps)  # (B, T, d)
    q = _rope((n @ layer.W_q).view(B, T, h, dh).transpose(1, 2), cfg.rope_base)  # (B, h, T, dh)
    k = _rope((n @ layer.W_k).view(B, T, h_kv, dh).transpose(1, 2), cfg.rope_base)  # (B, h_kv, T, dh)
    v = (n @ layer.W_v).view(B, T, h_kv, dh).transpose(1, 2)  # (B, h_kv, T, dh)
    k_h, v_h = k.repeat_interleave(cfg.group, dim=1), v.repeat_interleave(cfg.group, dim=1)  # (B, h, T, dh)
    scores = q @ k_h.transpose(-2, -1) / math.sqrt(dh)  # (B, h, T, T)
    causal = torch.ones(T, T, dtype=torch.bool).tril()  # (T, T), True = may attend (key j <= query i)
    weights = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)  # (B, h, T, T), over the keys
    used = weights if transform is None else transform(weights, index)
    if tuple(used.shape) != tuple(weights.shape):
        raise ShapeError(f"the transform of layer {index} returned shape {shape_str(used)}; expected {shape_str(weights)}")
    heads = (used @ v_h).transpose(1, 2).reshape(B, T, h * dh)  # (B, T, h dh)
    a = x + heads @ layer.W_o  # (B, T, d)
    m = _rms_norm(a, layer.mlp_norm, cfg.eps)  # (B, T, d)
    y = a + (torch.nn.functional.silu(m @ layer.W_gate) * (m @ layer.W_up)) @ layer.W_down  # (B, T, d)
    return y, weights, q, k


def decoder_pass(weights: DecoderWeights, ids: torch.Tensor, transform: Optional[MapTransform] = None,
                 keep: Collection[str] = ("attentions",)) -> DecoderPass:
    """One causal forward pass of a Llama-style decoder (SmolLM2-135M: ``load_smollm2()``) from position 0.

    Parameters
    ----------
    weights : DecoderWeights
        From :func:`~attention_course.models.smollm2.load_smollm2` (float32) or ``.to(torch.float64)``.
    ids : LongTensor, shape (B, T)
        Token ids (no start token is added; SmolLM2's first position is its sink).
    transform : callable, optional
        ``transform(weights (B, h, T, T), layer) -> (B, h, T, T)`` replaces each layer's maps
        before they multiply the values (the maps kept are the model's own).
    keep : collection of str
        Which of :data:`KEEP` to return (the logits always are).

    Returns
    -------
    DecoderPass

    Examples
    --------
    >>> from attention_course.chapters.decoder.random_weights import random_decoder
    >>> w = random_decoder(0)                                     # 2 layers, 4 query heads over 2 kv heads
    >>> out = decoder_pass(w, torch.tensor([[3, 1, 4, 1, 5]]), keep=KEEP)
    >>> tuple(out.attentions[0].shape), tuple(out.queries[1].shape), tuple(out.keys[1].shape)
    ((1, 4, 5, 5), (1, 4, 5, 4), (1, 2, 5, 4))
    >>> bool(out.attentions[1][0, :, 0, 1:].abs().max() == 0), tuple(out.logits.shape)   # causal
    (True, (1, 5, 20))
    """
    unknown = set(keep) - set(KEEP)
    if unknown:
        raise ValueError(f"keep={sorted(keep)} has {sorted(unknown)}; expected some of {KEEP}")
    if ids.ndim != 2 or ids.dtype not in (torch.int64, torch.int32) or ids.shape[1] == 0:
        raise ShapeError(f"ids has shape {shape_str(ids)} and dtype {ids.dtype}; expected integer token ids (B, T), T >= 1")
    cfg = weights.config
    if int(ids.max()) >= cfg.vocab_size or int(ids.min()) < 0:
        raise ValueError(f"ids range over [{int(ids.min())}, {int(ids.max())}]; the vocabulary has {cfg.vocab_size} tokens")
    x = weights.embed[ids]  # (B, T, d)
    maps, queries, keys, states = [], [], [], [x]
    for index, layer in enumerate(weights.layers):
        x, w, q, k = _layer(x, layer, cfg, index, transform)
        if "attentions" in keep:
            maps.append(w)
        if "queries" in keep:
            queries.append(q)
        if "keys" in keep:
            keys.append(k)
        if "hidden_states" in keep:
            states.append(x)
    logits = _rms_norm(x, weights.final_norm, cfg.eps) @ weights.embed.T  # (B, T, V), the tied head
    return DecoderPass(logits, maps if "attentions" in keep else None, queries if "queries" in keep else None,
                       keys if "keys" in keep else None, torch.stack(states) if "hidden_states" in keep else None)


def next_token_loss(logits: torch.Tensor, ids: torch.Tensor) -> float:
    r"""Mean cross-entropy (nats) of predicting token ``t + 1`` from positions ``<= t``: logits (B, T, V), ids (B, T).

    .. math:: \mathcal L = -\frac{1}{B(T-1)} \sum_{b, t < T-1} \log \operatorname{softmax}(z_{b,t})_{x_{b,t+1}}

    Examples
    --------
    >>> round(next_token_loss(torch.zeros(1, 3, 8), torch.tensor([[0, 1, 2]])), 6) == round(math.log(8), 6)
    True
    """
    if logits.ndim != 3 or logits.shape[:2] != ids.shape or ids.shape[1] < 2:
        raise ShapeError(f"logits {shape_str(logits)} and ids {shape_str(ids)}; expected (B, T, V) and (B, T), T >= 2")
    logp = torch.log_softmax(logits[:, :-1].double(), dim=-1)  # (B, T-1, V)
    return float(-logp.gather(-1, ids[:, 1:, None]).mean())


def causal_uniform(weights: torch.Tensor) -> torch.Tensor:
    """Uniform weights over the keys each query may see (keys ``j <= i``): the same shape as ``weights`` (..., T, T).

    Examples
    --------
    >>> causal_uniform(torch.zeros(3, 3))
    tensor([[1.0000, 0.0000, 0.0000],
            [0.5000, 0.5000, 0.0000],
            [0.3333, 0.3333, 0.3333]])
    """
    T, S = weights.shape[-2:]
    if T != S:
        raise ShapeError(f"weights has shape {shape_str(weights)}; expected square maps (..., T, T) of self-attention")
    mask = torch.ones(T, T, dtype=weights.dtype).tril()  # (T, T)
    return (mask / mask.sum(-1, keepdim=True)).expand_as(weights).clone()
