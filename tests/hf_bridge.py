"""SmolLM2's weights under ``transformers``' names, to load them into ``LlamaForCausalLM`` (the tests' reference)."""

from __future__ import annotations

import torch

from attention_course.models.smollm2 import DecoderWeights

_HF_NAMES = {"attn_norm": "input_layernorm.weight", "W_q": "self_attn.q_proj.weight",
             "W_k": "self_attn.k_proj.weight", "W_v": "self_attn.v_proj.weight", "W_o": "self_attn.o_proj.weight",
             "mlp_norm": "post_attention_layernorm.weight", "W_gate": "mlp.gate_proj.weight",
             "W_up": "mlp.up_proj.weight", "W_down": "mlp.down_proj.weight"}



def hf_state_dict(weights: DecoderWeights) -> dict[str, torch.Tensor]:
    """The weights under ``transformers``' ``LlamaForCausalLM`` names (``nn.Linear`` stores ``W.T``)."""
    sd = {"model.embed_tokens.weight": weights.embed, "model.norm.weight": weights.final_norm,
          "lm_head.weight": weights.embed}
    for i, layer in enumerate(weights.layers):
        for name, hf in _HF_NAMES.items():
            w = getattr(layer, name)
            sd[f"model.layers.{i}.{hf}"] = w if w.ndim == 1 else w.T.contiguous()
    return sd
