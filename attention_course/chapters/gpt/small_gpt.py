"""A small GPT built from chapter 9's decoder, randomly initialised, trainable with the course's one loop
(:func:`~attention_course.models.training.train`: ``model(inputs)`` returns ``(logits, [])``), running the
package's block, yours, or your whole forward pass.
"""

from __future__ import annotations

from typing import Callable, Optional

import torch

from ...models.smollm2 import DecoderConfig, DecoderWeights
from ..decoder.block import decoder_block
from ..decoder.model import empty_cache, output_logits
from ..decoder.random_weights import random_decoder
from .sampling import next_token_probs, sample

__all__ = ["SmallGPT", "generate_text"]


class SmallGPT(torch.nn.Module):
    """A Llama-style decoder of shape ``config``, float32, seeded: embeddings N(0, 0.02), gains 1.

    Examples
    --------
    >>> from attention_course.models.smollm2 import DecoderConfig
    >>> cfg = DecoderConfig(vocab_size=10, d_model=16, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=32)
    >>> model = SmallGPT(cfg, seed=0)
    >>> logits, maps = model(torch.zeros(3, 5, dtype=torch.long))
    >>> tuple(logits.shape), maps, sum(p.numel() for p in model.parameters())
    ((3, 5, 10), [], 4848)
    """

    def __init__(self, config: DecoderConfig, seed: int = 0, block: Callable = decoder_block,
                 forward_fn: Optional[Callable] = None):
        super().__init__()
        w = random_decoder(seed, config, torch.float32, gain_std=0.0, embed_std=0.02)
        self.config, self.block, self.forward_fn = config, block, forward_fn
        self.embed = torch.nn.Parameter(w.embed)
        self.final_norm = torch.nn.Parameter(w.final_norm)
        self.layer_params = torch.nn.ParameterList([torch.nn.Parameter(t) for l in w.layers for t in l.tensors()])
        self._layer_type = type(w.layers[0])

    def weights(self) -> DecoderWeights:
        """The parameters as :class:`DecoderWeights` (the same tensors, so gradients flow)."""
        n = len(self.layer_params) // self.config.n_layers
        layers = [self._layer_type(*self.layer_params[i * n:(i + 1) * n]) for i in range(self.config.n_layers)]
        return DecoderWeights(self.config, self.embed, layers, self.final_norm)

    def forward(self, inputs: torch.Tensor, head_mask: Optional[torch.Tensor] = None):
        """``inputs`` (B, T) -> ``(logits (B, T, V), [])`` by ``forward_fn`` from an empty cache, or the blocks;
        ``head_mask`` is ignored."""
        w = self.weights()
        if self.forward_fn is not None:
            return self.forward_fn(w, inputs, empty_cache(self.config, inputs.shape[0], w.embed.dtype))[0], []
        x = w.embed[inputs]  # (B, T, d)
        positions = torch.arange(inputs.shape[1])  # (T,)
        for layer in w.layers:
            x = self.block(x, layer, self.config, positions)  # (B, T, d)
        return output_logits(w, x), []


@torch.no_grad()
def generate_text(model: SmallGPT, prompt_ids: list, n_new: int, context: int, seed: int = 0,
                  temperature: float = 0.8, top_k: int = 0, top_p: float = 1.0) -> list:
    """Sample ``n_new`` ids after ``prompt_ids`` (recomputing the last ``context`` positions each step), seeded."""
    g = torch.Generator().manual_seed(seed)
    ids = list(prompt_ids)
    for _ in range(n_new):
        logits, _ = model(torch.tensor([ids[-context:]]))  # (1, T, V)
        probs = next_token_probs(logits[:, -1].double(), temperature, top_k, top_p)  # (1, V)
        ids.append(int(sample(probs, g)[0]))
    return ids
