r"""The decoder side: the same post-LN block with a causal mask, trained as a next-token model.

A causal mask lets position :math:`i` read positions :math:`j \le i` only:
:math:`\partial y_i / \partial x_j = 0` for all :math:`j > i`. :class:`CausalLM` (embeddings,
``n_layers`` blocks with :func:`~attention_course.core.attention.causal_mask`, an unembedding) fits
:func:`~attention_course.models.training.train`; :func:`dependence` measures the gradients by autograd
and :func:`causal_leaks` lists the pairs that break the rule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Callable, Optional

import numpy as np
import torch
from torch import nn

from ...core._backend import ShapeError, shape_str
from ...core.attention import causal_mask
from ...models.encoder import BertLayerWeights, BertWeights
from .block import block
from .embeddings import embeddings

__all__ = ["CausalConfig", "CausalLM", "dependence", "causal_leaks", "describe_leaks"]


@dataclass(frozen=True)
class CausalConfig:
    """Sizes of :class:`CausalLM`; ``causal=False`` drops the mask (every position reads every other)."""

    vocab_size: int = 64
    max_len: int = 32
    d_model: int = 32
    n_heads: int = 4
    n_layers: int = 2
    d_ff: int = 64
    eps: float = 1e-5
    causal: bool = True


class _Layer(nn.Module):
    """One layer's parameters, under the names of :class:`~attention_course.models.encoder.BertLayerWeights`."""

    def __init__(self, d: int, d_ff: int, g: torch.Generator) -> None:
        super().__init__()
        shapes = {"W_q": (d, d), "W_k": (d, d), "W_v": (d, d), "W_o": (d, d), "W_1": (d, d_ff), "W_2": (d_ff, d)}
        for f in fields(BertLayerWeights):
            if f.name in shapes:
                fan_in = shapes[f.name][0]
                value = torch.randn(*shapes[f.name], generator=g) / math.sqrt(fan_in)  # N(0, 1/fan_in)
            elif f.name.endswith("_weight"):
                value = torch.ones(d)  # LayerNorm gains
            else:
                value = torch.zeros(d_ff if f.name == "b_1" else d)  # biases and LayerNorm shifts
            setattr(self, f.name, nn.Parameter(value))

    def weights(self) -> BertLayerWeights:
        return BertLayerWeights(**{f.name: getattr(self, f.name) for f in fields(BertLayerWeights)})


class CausalLM(nn.Module):
    """A small post-LN transformer with a causal mask; a thin wrapper over this chapter's functions.

    Parameters
    ----------
    config : CausalConfig
    seed : int
        Seeds a private generator (the global random state is untouched).

    Examples
    --------
    >>> model = CausalLM(CausalConfig(), seed=0)
    >>> logits, weights = model(torch.zeros(2, 5, dtype=torch.long))
    >>> tuple(logits.shape), weights
    ((2, 5, 64), [])
    """

    def __init__(self, config: CausalConfig = CausalConfig(), seed: int = 0) -> None:
        super().__init__()
        c, self.config = config, config
        if c.d_model % c.n_heads:
            raise ValueError(f"d_model={c.d_model} is not divisible by n_heads={c.n_heads}")
        g = torch.Generator().manual_seed(int(seed))
        self.word = nn.Parameter(torch.randn(c.vocab_size, c.d_model, generator=g))  # (V, d)
        self.position = nn.Parameter(torch.randn(c.max_len, c.d_model, generator=g))  # (max_len, d), learned
        self.register_buffer("token_type", torch.zeros(1, c.d_model))  # one segment, a zero vector
        self.ln_weight, self.ln_bias = nn.Parameter(torch.ones(c.d_model)), nn.Parameter(torch.zeros(c.d_model))
        self.layers = nn.ModuleList([_Layer(c.d_model, c.d_ff, g) for _ in range(c.n_layers)])
        self.W_U = nn.Parameter(torch.randn(c.d_model, c.vocab_size, generator=g) / math.sqrt(c.d_model))

    def bert_weights(self) -> BertWeights:
        """The parameters as :class:`~attention_course.models.encoder.BertWeights` (the same tensors)."""
        c = self.config
        return BertWeights(self.word, self.position, self.token_type, self.ln_weight, self.ln_bias,
                           tuple(L.weights() for L in self.layers), c.n_heads, c.eps)

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """The first hidden state, ``LN(word + position)``: (B, T) -> (B, T, d)."""
        if tokens.ndim != 2 or tokens.shape[1] > self.config.max_len:
            raise ShapeError(f"tokens have shape {shape_str(tokens)}; expected (B, T) with T <= "
                             f"{self.config.max_len}")
        return embeddings(self.bert_weights(), tokens)  # (B, T, d)

    def from_embeddings(self, x: torch.Tensor, causal: Optional[bool] = None) -> torch.Tensor:
        """Logits (B, T, V) from the first hidden state x (B, T, d); ``causal`` overrides ``config.causal``."""
        c, w = self.config, self.bert_weights()
        T = x.shape[1]
        causal = c.causal if causal is None else causal
        mask = torch.from_numpy(causal_mask(T)) if causal else None  # (T, T), True where j <= i
        for layer in w.layers:
            x = block(x, layer, c.n_heads, mask, c.eps)  # (B, T, d)
        return x @ self.W_U  # (B, T, V)

    def forward(self, tokens: torch.Tensor, head_mask: None = None) -> tuple[torch.Tensor, list]:
        """``(logits (B, T, V), [])``: next-token logits, no attention maps; ``head_mask`` must be None."""
        if head_mask is not None:
            raise ValueError("CausalLM has no head mask; pass head_mask=None")
        return self.from_embeddings(self.embed(tokens)), []


def dependence(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, seed: int = 0) -> np.ndarray:
    r"""How much output position ``i`` depends on input position ``j``: a (T, T) matrix, by autograd.

    Entry ``(i, j)`` is :math:`\lVert \partial (r_i \cdot y_i) / \partial x_j \rVert_2` for a random
    direction :math:`r_i`: exactly 0 where ``y_i`` does not depend on ``x_j``. ``x`` has shape (1, T, d).

    Examples
    --------
    >>> x = torch.randn(1, 4, 3, generator=torch.Generator().manual_seed(0))
    >>> dependence(lambda x: x.cumsum(dim=1), x) > 0     # a running sum reads the past only
    array([[ True, False, False, False],
           [ True,  True, False, False],
           [ True,  True,  True, False],
           [ True,  True,  True,  True]])
    """
    if x.ndim != 3 or x.shape[0] != 1:
        raise ShapeError(f"x has shape {shape_str(x)}; expected (1, T, d): one sequence")
    x = x.detach().clone().requires_grad_(True)
    y = fn(x)  # (1, T, d_out)
    T = x.shape[1]
    g = torch.Generator().manual_seed(int(seed))
    out = np.zeros((T, T))
    for i in range(T):
        r = torch.randn(y.shape[-1], generator=g, dtype=y.dtype)  # (d_out,) a random direction
        (grad,) = torch.autograd.grad(y[0, i] @ r, x, retain_graph=True)  # (1, T, d)
        out[i] = torch.linalg.vector_norm(grad[0], dim=-1).detach().numpy()  # (T,) one norm per input j
    return out


def causal_leaks(dep: np.ndarray) -> list[tuple[int, int]]:
    """Every pair ``(i, j)`` with ``j > i`` where output ``i`` depends on the later input ``j``.

    Examples
    --------
    >>> causal_leaks(np.array([[1.0, 0.0, 0.3], [1.0, 1.0, 0.0], [1.0, 1.0, 1.0]]))
    [(0, 2)]
    """
    T = dep.shape[0]
    return [(i, j) for i in range(T) for j in range(i + 1, T) if dep[i, j] != 0.0]


def describe_leaks(dep: np.ndarray) -> str:
    """A one-line verdict on :func:`dependence`: no leak, or the first leak and how many there are.

    Examples
    --------
    >>> print(describe_leaks(np.tril(np.ones((3, 3)))))
    causal: no position depends on a later one (all 3 later pairs give a gradient of exactly 0)
    >>> print(describe_leaks(np.ones((3, 3))))
    leak: position 0 depends on the later position 1 (3 of 3 later pairs leak)
    """
    T = dep.shape[0]
    pairs, leaks = T * (T - 1) // 2, causal_leaks(dep)
    if not leaks:
        return f"causal: no position depends on a later one (all {pairs} later pairs give a gradient of exactly 0)"
    i, j = leaks[0]
    return f"leak: position {i} depends on the later position {j} ({len(leaks)} of {pairs} later pairs leak)"
