r"""A BERT encoder forward pass written with the course's own attention.

The same computation as ``transformers.BertModel`` (post-LayerNorm, GELU MLP,
absolute positions), in a few lines per step, so a pretrained model such as
all-MiniLM-L6-v2 runs on :func:`~attention_course.core.multihead.multi_head_attention`:

.. math::

    H_0 &= \operatorname{LN}(E_{\text{word}}[x] + E_{\text{pos}}[t] + E_{\text{type}}[s]) \\
    A_\ell &= \operatorname{LN}(H_{\ell-1} + \operatorname{MHA}(H_{\ell-1}, H_{\ell-1})) \\
    H_\ell &= \operatorname{LN}(A_\ell + \operatorname{GELU}(A_\ell W_1 + b_1) W_2 + b_2)

Weights are ``x @ W`` matrices (``nn.Linear.weight`` transposed), torch only. No query attends
to padding; padded queries get finite outputs, as in ``transformers``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Mapping, Optional

import torch
import torch.nn.functional as F

from ..core._backend import ShapeError, shape_str
from ..core.attention import scaled_dot_product_attention
from ..core.multihead import multi_head_attention
from .override import AttentionOverride, attend_with_override

__all__ = ["BertLayerWeights", "BertWeights", "EncoderOutput", "bert_weights_from_state_dict",
           "bert_weights_from_safetensors", "bert_encode"]  # fmt: skip


@dataclass(frozen=True)
class BertLayerWeights:
    """One encoder layer; matrices used as ``x @ W`` (shapes for d=384, 12 heads, MLP 1536)."""

    W_q: torch.Tensor  # (d, d)
    W_k: torch.Tensor  # (d, d)
    W_v: torch.Tensor  # (d, d)
    W_o: torch.Tensor  # (d, d)
    b_q: torch.Tensor  # (d,)
    b_k: torch.Tensor
    b_v: torch.Tensor
    b_o: torch.Tensor
    ln1_weight: torch.Tensor  # (d,) LayerNorm after attention
    ln1_bias: torch.Tensor
    W_1: torch.Tensor  # (d, d_ff)
    b_1: torch.Tensor  # (d_ff,)
    W_2: torch.Tensor  # (d_ff, d)
    b_2: torch.Tensor  # (d,)
    ln2_weight: torch.Tensor  # (d,) LayerNorm after the MLP
    ln2_bias: torch.Tensor


@dataclass(frozen=True)
class BertWeights:
    """All weights of a BERT encoder plus the two numbers the forward pass needs."""

    word_embeddings: torch.Tensor  # (vocab, d)
    position_embeddings: torch.Tensor  # (max_len, d)
    token_type_embeddings: torch.Tensor  # (types, d)
    ln_weight: torch.Tensor  # (d,) embedding LayerNorm
    ln_bias: torch.Tensor
    layers: tuple[BertLayerWeights, ...]
    num_heads: int
    layer_norm_eps: float

    def to(self, dtype: torch.dtype) -> "BertWeights":
        """Return a copy with every tensor cast to ``dtype`` (e.g. float64 for analysis)."""
        cast = {k: v.to(dtype) for k, v in vars(self).items() if isinstance(v, torch.Tensor)}
        layers = tuple(replace(L, **{k: v.to(dtype) for k, v in vars(L).items()}) for L in self.layers)
        return replace(self, layers=layers, **cast)


@dataclass(frozen=True)
class EncoderOutput:
    """``hidden_states``: L+1 tensors (B, T, d), the embeddings first (as transformers'
    ``output_hidden_states``). ``attentions``: L tensors (B, h, T, T), one map per head."""

    hidden_states: tuple[torch.Tensor, ...]
    attentions: tuple[torch.Tensor, ...]


def bert_weights_from_state_dict(state_dict: Mapping[str, torch.Tensor], num_heads: int,
                                 layer_norm_eps: float = 1e-12) -> BertWeights:
    """Read a ``BertModel`` state dict (keys ``embeddings.*``, ``encoder.layer.{i}.*``).

    A leading ``bert.`` (from task heads) is stripped. ``nn.Linear`` weights are
    transposed to the ``x @ W`` convention; nothing is copied into a module.
    """
    sd = {k.removeprefix("bert."): v.detach() for k, v in state_dict.items()}
    n_layers = 1 + max((int(k.split(".")[2]) for k in sd if k.startswith("encoder.layer.")), default=-1)
    if "embeddings.word_embeddings.weight" not in sd or n_layers == 0:
        raise KeyError("state_dict has no BERT keys such as 'embeddings.word_embeddings.weight' and "
                       "'encoder.layer.0.attention.self.query.weight'")
    layers = []
    for i in range(n_layers):
        p = f"encoder.layer.{i}."
        a, s = p + "attention.", p + "attention.self."
        layers.append(BertLayerWeights(
            W_q=sd[s + "query.weight"].T, W_k=sd[s + "key.weight"].T, W_v=sd[s + "value.weight"].T,
            W_o=sd[a + "output.dense.weight"].T, b_q=sd[s + "query.bias"], b_k=sd[s + "key.bias"],
            b_v=sd[s + "value.bias"], b_o=sd[a + "output.dense.bias"],
            ln1_weight=sd[a + "output.LayerNorm.weight"], ln1_bias=sd[a + "output.LayerNorm.bias"],
            W_1=sd[p + "intermediate.dense.weight"].T, b_1=sd[p + "intermediate.dense.bias"],
            W_2=sd[p + "output.dense.weight"].T, b_2=sd[p + "output.dense.bias"],
            ln2_weight=sd[p + "output.LayerNorm.weight"], ln2_bias=sd[p + "output.LayerNorm.bias"],
        ))  # fmt: skip
    e = "embeddings."
    return BertWeights(
        word_embeddings=sd[e + "word_embeddings.weight"],
        position_embeddings=sd[e + "position_embeddings.weight"],
        token_type_embeddings=sd[e + "token_type_embeddings.weight"],
        ln_weight=sd[e + "LayerNorm.weight"],
        ln_bias=sd[e + "LayerNorm.bias"],
        layers=tuple(layers),
        num_heads=int(num_heads),
        layer_norm_eps=float(layer_norm_eps),
    )


def bert_weights_from_safetensors(folder: str | Path) -> BertWeights:
    """Load ``model.safetensors`` and ``config.json`` from a model folder, without transformers.
    """
    from safetensors.torch import load_file

    folder = Path(folder)
    config = json.loads((folder / "config.json").read_text())
    state_dict = load_file(str(folder / "model.safetensors"))
    return bert_weights_from_state_dict(state_dict, config["num_attention_heads"],
                                        config.get("layer_norm_eps", 1e-12))


def _layer(x: torch.Tensor, L: BertLayerWeights, num_heads: int, mask: torch.Tensor, eps: float, attend=None):
    d = x.shape[-1]
    attn, weights = multi_head_attention(x, x, L.W_q, L.W_k, L.W_v, L.W_o, L.b_q, L.b_k, L.b_v, L.b_o,
                                         num_heads=num_heads, mask=mask, attend=attend)  # (B, T, d), (B, h, T, T)
    x = F.layer_norm(x + attn, (d,), L.ln1_weight, L.ln1_bias, eps)  # residual, then LN   (B, T, d)
    ff = F.gelu(x @ L.W_1 + L.b_1) @ L.W_2 + L.b_2  # exact (erf) GELU MLP   (B, T, d_ff) -> (B, T, d)
    return F.layer_norm(x + ff, (d,), L.ln2_weight, L.ln2_bias, eps), weights  # (B, T, d)


def bert_encode(weights: BertWeights, input_ids: torch.Tensor,
                attention_mask: Optional[torch.Tensor] = None,
                token_type_ids: Optional[torch.Tensor] = None, *,
                attention_override: Optional[AttentionOverride] = None) -> EncoderOutput:
    """Run the encoder; return every layer's hidden states and every head's attention.

    Parameters
    ----------
    weights : BertWeights
    input_ids : LongTensor, shape (B, T)
        Token ids, e.g. from the model's tokenizer with ``padding=True``.
    attention_mask : tensor, shape (B, T), optional
        1 (or True) = real token, 0 = padding. Padded keys get weight exactly 0.
    token_type_ids : LongTensor, shape (B, T), optional
        Segment ids; default 0.
    attention_override : callable, optional
        ``override(q, k, v, weights, layer) -> heads (B, h, T, d_k) or None`` replaces
        ``weights @ v`` (:mod:`attention_course.models.override`).

    Returns
    -------
    EncoderOutput
        ``hidden_states``: L+1 tensors (B, T, d); ``attentions``: L tensors (B, h, T, T), the
        model's own weights (also where an override replaced a head's output).

    Examples
    --------
    >>> g = torch.Generator().manual_seed(0)
    >>> r = lambda *s: torch.randn(*s, generator=g)
    >>> layer = BertLayerWeights(*[r(4, 4) for _ in range(4)], *[r(4) for _ in range(6)],
    ...                          r(4, 8), r(8), r(8, 4), r(4), r(4), r(4))
    >>> w = BertWeights(r(10, 4), r(16, 4), r(2, 4), r(4), r(4), (layer,),
    ...                 num_heads=2, layer_norm_eps=1e-12)
    >>> out = bert_encode(w, torch.tensor([[1, 2, 3], [4, 5, 0]]), torch.tensor([[1, 1, 1], [1, 1, 0]]))
    >>> len(out.hidden_states), tuple(out.attentions[0].shape)
    (2, (2, 2, 3, 3))
    >>> out.attentions[0][1, :, :, 2].abs().max().item()    # nobody attends to the padding
    0.0
    """
    if input_ids.ndim != 2:
        raise ShapeError(f"input_ids has shape {shape_str(input_ids)}; expected (B, T)")
    B, T = input_ids.shape
    max_len = weights.position_embeddings.shape[0]
    if T > max_len:
        raise ShapeError(f"input_ids has shape {shape_str(input_ids)}: T={T} is longer than the "
                         f"{max_len} learned positions")
    for name, t in (("attention_mask", attention_mask), ("token_type_ids", token_type_ids)):
        if t is not None and tuple(t.shape) != (B, T):
            raise ShapeError(f"{name} has shape {shape_str(t)} but input_ids has shape "
                             f"{shape_str(input_ids)}; expected ({B}, {T})")
    if token_type_ids is None:
        token_type_ids = torch.zeros_like(input_ids)
    d, eps = weights.word_embeddings.shape[1], weights.layer_norm_eps
    positions = torch.arange(T, device=input_ids.device)  # (T,)
    x = (weights.word_embeddings[input_ids] + weights.token_type_embeddings[token_type_ids]
         + weights.position_embeddings[positions])  # (B, T, d)
    x = F.layer_norm(x, (d,), weights.ln_weight, weights.ln_bias, eps)  # (B, T, d)
    # attention_mask (B, T) -> (B, 1, 1, T): True = this key may be attended to, by every head and query
    mask = None if attention_mask is None else attention_mask.bool()[:, None, None, :]
    hidden, attentions = [x], []
    for i, layer in enumerate(weights.layers):
        attend = attend_with_override(scaled_dot_product_attention, attention_override, i)
        x, w = _layer(x, layer, weights.num_heads, mask, eps, attend)  # (B, T, d), (B, h, T, T)
        hidden.append(x)
        attentions.append(w)
    return EncoderOutput(tuple(hidden), tuple(attentions))
