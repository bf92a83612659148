r"""A tiny attention-only transformer that trains in seconds on a CPU.

The model reads tokens, adds learned positional embeddings, and passes the
residual stream :math:`x` through ``n_layers`` blocks of multi-head causal
attention (optionally preceded by LayerNorm and followed by an MLP):

.. math::

    x \leftarrow x + \sum_{h=1}^{H} m_{\ell h}\,
        \operatorname{softmax}\!\left(c\,(x W_Q^h)(x W_K^h)^\top + M\right)
        x W_V^h W_O^h

where :math:`c = 1/\sqrt{d_k}` by default (``ModelConfig.scale``), :math:`M` is the causal
mask and :math:`m_{\ell h} \in \{0, 1\}` a head mask for ablations. Per-head weights are
stored as ``(h, d_model, d_k)`` and ``(h, d_k, d_model)`` tensors. The forward pass returns
the logits *and* every layer's attention weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

import torch
from torch import nn

from ..core._backend import ShapeError, shape_str
from ..core.attention import causal_mask, resolve_scale, scaled_dot_product_attention
from ..core.multihead import AttentionStep, merge_heads, multi_head_attention
from .override import AttentionOverride, attend_with_override

__all__ = ["ModelConfig", "TinyTransformer", "attention_block", "qk_logits"]


@dataclass(frozen=True)
class ModelConfig:
    r"""Sizes and switches of :class:`TinyTransformer`.

    ``d_k = d_model // n_heads`` by default. ``layer_norm`` adds a pre-LN before each block
    and the unembedding; ``mlp`` a ReLU MLP of width ``4 d_model`` after each attention block.
    ``scale`` is as in :func:`~attention_course.core.attention.resolve_scale`.

    Examples
    --------
    >>> ModelConfig(d_k=64, scale="none").head_dim
    64
    >>> ModelConfig(scale="1/d")
    Traceback (most recent call last):
        ...
    ValueError: unknown scale '1/d'; expected one of ('sqrt', 'none', 'mup') or a positive number
    """

    vocab_size: int = 64
    max_len: int = 32
    d_model: int = 32
    n_heads: int = 4
    n_layers: int = 2
    d_k: Optional[int] = None
    layer_norm: bool = True
    mlp: bool = False
    scale: Union[str, float] = "sqrt"

    def __post_init__(self) -> None:
        resolve_scale(self.head_dim, self.scale)  # a bad scale fails here, not mid-training

    @property
    def head_dim(self) -> int:
        """The per-head dimension d_k."""
        return self.d_k if self.d_k is not None else self.d_model // self.n_heads

    @property
    def score_scale(self) -> float:
        r"""The factor :math:`c(d_k)` that multiplies :math:`q \cdot k`."""
        return resolve_scale(self.head_dim, self.scale)


def attention_block(
    x: torch.Tensor,
    W_q: torch.Tensor,
    W_k: torch.Tensor,
    W_v: torch.Tensor,
    W_o: torch.Tensor,
    head_mask: Optional[torch.Tensor] = None,
    scale: Optional[float] = None,
    attend: Optional[AttentionStep] = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Causal multi-head self-attention with per-head weight tensors.

    .. math::

        \operatorname{out} = \sum_h m_h\, \operatorname{softmax}\!\left(
            c\, q_h k_h^\top + M_{\text{causal}}\right) v_h W_O^h,
        \qquad q_h = x W_Q^h,\; k_h = x W_K^h,\; v_h = x W_V^h

    Parameters
    ----------
    x : torch.Tensor, shape (B, T, d_model)
    W_q, W_k, W_v : torch.Tensor, shape (h, d_model, d_k)
    W_o : torch.Tensor, shape (h, d_k, d_model)
    head_mask : torch.Tensor, optional, shape (h,)
        Multiplies each head's output before ``W_o``; 0 removes the head.
    scale : float, optional
        The factor :math:`c` on the scores; default :math:`1/\sqrt{d_k}`.
    attend : callable, optional
        The attention step; default this module's ``scaled_dot_product_attention``, looked up
        when the block runs, so that chapter 6's
        :func:`~attention_course.chapters.scaling.backward_swap.swapped_backward` can replace it.

    Returns
    -------
    out : torch.Tensor, shape (B, T, d_model)
        What the block adds to the residual stream.
    weights : torch.Tensor, shape (B, h, T, T)
        Causal attention weights; each row sums to 1.

    Examples
    --------
    >>> g = torch.Generator().manual_seed(0)
    >>> x = torch.randn(2, 5, 8, generator=g)
    >>> W = [torch.randn(2, 8, 4, generator=g) for _ in range(3)]
    >>> out, w = attention_block(x, *W, torch.randn(2, 4, 8, generator=g))
    >>> tuple(out.shape), tuple(w.shape), float(w[0, 0, 0, 1])
    ((2, 5, 8), (2, 2, 5, 5), 0.0)
    """
    h, d_model, d_k = W_q.shape
    side_by_side = [merge_heads(W[None])[0] for W in (W_q, W_k, W_v)]  # each (d_model, h d_k)
    mask = torch.from_numpy(causal_mask(x.shape[1]))  # (T, T), True = may attend (j <= i)
    attend = scaled_dot_product_attention if attend is None else attend
    return multi_head_attention(
        x, x, *side_by_side, W_o.reshape(h * d_k, d_model),  # W_o: (h d_k, d_model), head i's rows i d_k:(i+1) d_k
        num_heads=h, mask=mask, scale=scale, head_mask=head_mask, attend=attend,
    )  # (B, T, d_model), (B, h, T, T) normalised over the keys


class TinyTransformer(nn.Module):
    """Attention-only (optionally with MLP) causal transformer; a thin wrapper.

    Parameters
    ----------
    config : ModelConfig
    seed : int, default 0
        Seeds the initialisation (the global random state is not touched).

    Examples
    --------
    >>> model = TinyTransformer(ModelConfig(d_model=32, n_heads=4, n_layers=2), seed=0)
    >>> tokens = torch.randint(0, 64, (3, 10), generator=torch.Generator().manual_seed(0))
    >>> logits, weights = model(tokens)
    >>> tuple(logits.shape), len(weights), tuple(weights[0].shape)
    ((3, 10, 64), 2, (3, 4, 10, 10))
    >>> tuple(model.W_q[0].shape)                    # layer 0: (h, d_model, d_k)
    (4, 32, 8)
    """

    def __init__(self, config: ModelConfig = ModelConfig(), seed: int = 0) -> None:
        super().__init__()
        self.config = config
        c, L, h, d, d_k = config, config.n_layers, config.n_heads, config.d_model, config.head_dim
        g = torch.Generator().manual_seed(int(seed))

        def param(*shape: int, std: float) -> nn.Parameter:
            return nn.Parameter(torch.randn(*shape, generator=g) * std)

        self.W_E = param(c.vocab_size, d, std=1.0)  # token embeddings
        self.W_pos = param(c.max_len, d, std=1.0)  # learned positional embeddings
        self.W_q = nn.ParameterList([param(h, d, d_k, std=d**-0.5) for _ in range(L)])
        self.W_k = nn.ParameterList([param(h, d, d_k, std=d**-0.5) for _ in range(L)])
        self.W_v = nn.ParameterList([param(h, d, d_k, std=d**-0.5) for _ in range(L)])
        self.W_o = nn.ParameterList([param(h, d_k, d, std=(h * d_k) ** -0.5) for _ in range(L)])
        self.ln = nn.ModuleList(
            [nn.LayerNorm(d) if c.layer_norm else nn.Identity() for _ in range(L + 1)]
        )  # before each block, and before the unembedding
        self.mlps = nn.ModuleList()
        if c.mlp:
            for _ in range(L):
                mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.ReLU(), nn.Linear(4 * d, d))
                for lin in (mlp[0], mlp[2]):
                    std = lin.in_features**-0.5
                    lin.weight.data = torch.randn(lin.weight.shape, generator=g) * std
                    lin.bias.data.zero_()
                self.mlps.append(mlp)
        self.W_U = param(d, c.vocab_size, std=0.1 * d**-0.5)  # unembedding: start near ln V

    def forward(
        self,
        tokens: torch.Tensor,
        head_mask: Optional[torch.Tensor] = None,
        attention_override: Optional[AttentionOverride] = None,
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Logits for the next token at every position, and all attention weights.

        Parameters
        ----------
        tokens : torch.LongTensor, shape (B, T), T <= max_len, values in [0, vocab_size)
        head_mask : torch.Tensor, optional, shape (n_layers, n_heads)
            1 keeps a head, 0 zeroes its output (ablation). Default: all ones.
        attention_override : callable, optional
            ``override(q, k, v, weights, layer) -> heads (B, h, T, d_k) or None`` replaces
            ``weights @ v`` (:mod:`attention_course.models.override`).

        Returns
        -------
        logits : torch.Tensor, shape (B, T, vocab_size)
        weights : list of torch.Tensor, one per layer, each (B, n_heads, T, T)
            The model's own weights, also where an override replaced a head's output.
        """
        c = self.config
        if tokens.ndim != 2 or tokens.dtype not in (torch.int64, torch.int32):
            raise ShapeError(
                f"tokens have shape {shape_str(tokens)} and dtype {tokens.dtype}; "
                f"expected integer tokens of shape (B, T)"
            )
        B, T = tokens.shape
        if T > c.max_len:
            raise ShapeError(f"tokens have shape {(B, T)}: T={T} exceeds max_len={c.max_len}")
        if tokens.numel() and (tokens.min() < 0 or tokens.max() >= c.vocab_size):
            raise ValueError(
                f"tokens range over [{int(tokens.min())}, {int(tokens.max())}]; "
                f"expected values in [0, {c.vocab_size})"
            )
        if head_mask is not None and tuple(head_mask.shape) != (c.n_layers, c.n_heads):
            raise ShapeError(
                f"head_mask has shape {shape_str(head_mask)}; expected "
                f"(n_layers, n_heads) = ({c.n_layers}, {c.n_heads})"
            )
        x = self.W_E[tokens] + self.W_pos[:T]  # (B, T, d_model)
        weights = []
        for layer in range(c.n_layers):
            m = None if head_mask is None else head_mask[layer]
            attend = attend_with_override(scaled_dot_product_attention, attention_override, layer)
            out, w = attention_block(
                self.ln[layer](x),
                self.W_q[layer], self.W_k[layer], self.W_v[layer], self.W_o[layer], m,
                scale=c.score_scale, attend=attend,
            )  # (B, T, d_model), (B, h, T, T)
            x = x + out  # residual stream
            if c.mlp:
                x = x + self.mlps[layer](x)  # (B, T, d_model)
            weights.append(w)
        logits = self.ln[-1](x) @ self.W_U  # (B, T, vocab_size)
        return logits, weights


@torch.no_grad()
def qk_logits(model: TinyTransformer, tokens: torch.Tensor) -> list[torch.Tensor]:
    r"""The scaled scores :math:`c\,(x W_Q^h)(x W_K^h)^\top` that each layer's softmax sees.

    Read during one forward pass. The causal mask is *not* applied: select ``j <= i`` before
    taking statistics.

    Parameters
    ----------
    model : TinyTransformer
    tokens : torch.LongTensor, shape (B, T)

    Returns
    -------
    list of torch.Tensor, one per layer, each (B, h, T, T)
        ``softmax`` of an entry's causal part equals the model's attention weights.

    Examples
    --------
    >>> model = TinyTransformer(ModelConfig(d_k=64, scale="none"), seed=0)
    >>> s = qk_logits(model, torch.zeros(2, 6, dtype=torch.long))
    >>> len(s), tuple(s[0].shape)
    (2, (2, 4, 6, 6))
    """
    c = model.config
    logits: list[torch.Tensor] = []

    def read_scores(q, k, v, weights, layer):  # q, k: (B, h, T, d_k)
        logits.append((q @ k.transpose(-2, -1)) * c.score_scale)  # $c\,QK^T$   (B, h, T, T)

    model(tokens, attention_override=read_scores)
    return logits
