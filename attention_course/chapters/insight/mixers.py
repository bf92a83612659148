r"""One layer that mixes positions, with each ingredient of attention removable by a switch.

The model (:class:`MixerModel`) embeds each position's two ids (key or token, value) and its
position, mixes the positions once, adds the result back, and reads out a value:

.. math::

    x_t = E_K[a_t] + E_V[b_t] + p_t, \qquad
    y_t = x_t + \Big(\sum_{s \le t} A_{ts}\, x_s W_V\Big) W_O, \qquad
    \text{logits}_t = \operatorname{LN}(y_t)\, E_V^\top / \sqrt{d} ,

with :math:`W_V = W_O = I` at the start (so the read-out recognises a value from the first step).

A :class:`Variant` says how the causal mixing matrix :math:`A` (shape ``(B, T, T)``, rows over
keys :math:`s \le t`) is made. Attention computes it from the data,
:math:`A = \operatorname{norm}(x W_Q (x W_K)^\top / \sqrt{d})`; each switch takes one ingredient away:

===================  ==========================================================================
``mixer``            ``"attention"`` | ``"linear"`` (:math:`\phi = \text{elu} + 1`, same causal
                     normalisation) | ``"fixed"`` (a learned :math:`T \times T` logit matrix,
                     the same for every input: Synthesizer, Tay et al. 2021) | ``"conv"`` (a
                     learned causal convolution over the whole length, per channel, times a
                     data-dependent gate :math:`x W_G`) | ``"none"`` (no mixing)
``norm``             ``"softmax"`` | ``"sparsemax"`` | ``"straight-through"`` (one-hot argmax
                     forward, softmax's gradient backward) | ``"argmax"`` (one-hot, no gradient:
                     :math:`W_Q, W_K` never change from their random start)
``window``           only the last ``window`` positions (the query included) may be attended
``tied``             :math:`W_K = W_Q` (a symmetric, positive semi-definite score)
``signed``           :math:`W_K = W_Q D`, :math:`D = \operatorname{diag}(+1, \dots, +1, -1, \dots, -1)` half and
                     half, fixed (:func:`signature`): a symmetric score that is indefinite
``mask_self``        a position may not attend to itself (except position 0, which has nothing else)
``identity``         :math:`W_Q = W_K = I`: the raw embeddings' dot product, no learned metric
``learn_scale``      one learnable score scale :math:`s = e^{\tau}` multiplies the scores,
                     :math:`s\, q_t \cdot k_s / \sqrt{d}`, started at :math:`s = 1/\sqrt{d}` (so tied and
                     identity scores do not start saturated on the diagonal)
===================  ==========================================================================
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional

import torch
from torch import nn

from .recall_tasks import N_VALUES

__all__ = ["Variant", "VARIANTS", "MixerModel", "sparsemax", "symmetric_weights"]


@dataclass(frozen=True)
class Variant:
    """How :class:`MixerModel` mixes positions; the defaults are softmax attention.

    Examples
    --------
    >>> Variant().mixer, Variant(window=4).window, VARIANTS["tied"].tied
    ('attention', 4, True)
    """

    mixer: str = "attention"
    norm: str = "softmax"
    window: Optional[int] = None
    tied: bool = False
    mask_self: bool = False
    identity: bool = False
    learn_scale: bool = False
    signed: bool = False

    def __post_init__(self) -> None:
        if self.signed and (self.tied or self.identity):
            raise ValueError(f"signed=True with tied={self.tied}, identity={self.identity}; signed sets W_K = W_Q D itself")
        if self.mixer not in ("attention", "linear", "fixed", "conv", "none"):
            raise ValueError(f"mixer={self.mixer!r}; expected attention, linear, fixed, conv or none")
        if self.norm not in ("softmax", "sparsemax", "straight-through", "argmax"):
            raise ValueError(f"norm={self.norm!r}; expected softmax, sparsemax, straight-through or argmax")
        if self.window is not None and self.window < 1:
            raise ValueError(f"window={self.window}; expected None or >= 1")


#: The ablations, by name: softmax attention, then one ingredient taken away in each.
VARIANTS: dict[str, Variant] = {
    "softmax attention": Variant(),
    "fixed mixing (learned T x T)": Variant(mixer="fixed"),
    "gated long convolution": Variant(mixer="conv"),
    "no mixing": Variant(mixer="none"),
    "window 4": Variant(window=4),
    "window 8": Variant(window=8),
    "window 16": Variant(window=16),
    "straight-through argmax": Variant(norm="straight-through"),
    "argmax, no gradient": Variant(norm="argmax"),
    "sparsemax": Variant(norm="sparsemax"),
    "tied": Variant(tied=True),
    "tied, self masked": Variant(tied=True, mask_self=True),
    "W_Q = W_K = I": Variant(identity=True),
    "linear attention": Variant(mixer="linear"),
}


def signature(d: int) -> torch.Tensor:
    r"""The fixed signs :math:`D = \operatorname{diag}(+1, \dots, +1, -1, \dots, -1)` of the ``signed`` variant, shape (d,).

    Examples
    --------
    >>> signature(4).tolist(), signature(3).tolist()
    ([1.0, 1.0, -1.0, -1.0], [1.0, 1.0, -1.0])
    """
    signs = torch.ones(d)
    signs[(d + 1) // 2:] = -1.0
    return signs


def sparsemax(z: torch.Tensor, dim: int = -1) -> torch.Tensor:
    r"""Sparsemax (Martins & Astudillo 2016): the Euclidean projection of ``z`` onto the simplex.

    .. math:: \operatorname{sparsemax}(z)_i = \max(z_i - \tau(z), 0), \quad \sum_i \max(z_i - \tau, 0) = 1 .

    Entries of ``-inf`` get weight 0. Differentiable almost everywhere (autograd through the sort).

    Examples
    --------
    >>> sparsemax(torch.tensor([2.0, 1.0, -1.0])).tolist()
    [1.0, 0.0, 0.0]
    >>> sparsemax(torch.tensor([0.5, 0.3, float("-inf")])).tolist()
    [0.6000000238418579, 0.4000000059604645, 0.0]
    """
    z = z.transpose(dim, -1)
    finite = torch.where(torch.isinf(z), torch.full_like(z, -1e30), z)
    srt, _ = finite.sort(dim=-1, descending=True)
    k = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype, device=z.device)
    cums = srt.cumsum(-1)
    support = (1 + k * srt > cums)  # entries in the support, a prefix of the sorted order
    k_z = support.sum(dim=-1, keepdim=True)  # (..., 1)
    tau = (cums.gather(-1, k_z - 1) - 1) / k_z.to(z.dtype)
    return torch.clamp(finite - tau, min=0.0).transpose(dim, -1)


def symmetric_weights(scores: torch.Tensor, allowed: Optional[torch.Tensor] = None) -> torch.Tensor:
    r"""Symmetric normalisation of attention scores: :math:`A = R^{-1/2} E R^{-1/2}`, so :math:`A_{ij} = A_{ji}`.

    .. math::

        E_{ij} = e^{s_{ij}}, \qquad r_i = \sum_j E_{ij}, \qquad
        A_{ij} = \frac{E_{ij}}{\sqrt{r_i\, r_j}}
        = \exp\big(s_{ij} - \tfrac12 \log r_i - \tfrac12 \log r_j\big) .

    Rows need not sum to 1 (the matrix's largest eigenvalue is 1). Computed in log space.

    Parameters
    ----------
    scores : Tensor, shape (..., T, T)
    allowed : Tensor of bool, shape (T, T), optional
        True = may attend; a masked pair gets weight 0, a fully masked row NaN.

    Returns
    -------
    Tensor, shape (..., T, T)
        Non-negative weights, symmetric when the scores and the mask are.

    Examples
    --------
    >>> s = torch.tensor([[0.0, 1.0], [1.0, 0.0]])
    >>> A = symmetric_weights(s)
    >>> torch.allclose(A, A.T), [round(v, 4) for v in A.sum(-1).tolist()]
    (True, [1.0, 1.0])
    >>> A = symmetric_weights(torch.tensor([[2.0, 0.0], [0.0, 0.0]]))
    >>> torch.allclose(A, A.T), [round(v, 3) for v in A.sum(-1).tolist()]   # rows need not sum to 1
    (True, [1.125, 0.744])
    """
    if scores.shape[-1] != scores.shape[-2]:
        raise ValueError(f"scores have shape {tuple(scores.shape)}; expected (..., T, T), keys the same positions")
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    log_r = torch.logsumexp(scores, dim=-1)  # (..., T): $\log r_i$, rows over keys
    return torch.exp(scores - 0.5 * log_r[..., :, None] - 0.5 * log_r[..., None, :])  # (..., T, T), symmetric


def linear_weights(fq: torch.Tensor, fk: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    r"""Linear attention's weights from positive features: :math:`A_{ts} = \phi(q_t)\cdot\phi(k_s) / \sum_{s'} \phi(q_t)\cdot\phi(k_{s'})`.

    ``fq``, ``fk`` (B, T, d) positive features, ``allowed`` (T, T) boolean, True = may attend.

    Examples
    --------
    >>> f = torch.ones(1, 3, 2)
    >>> linear_weights(f, f, mixing_mask(3))[0].tolist()[2]
    [0.3333333432674408, 0.3333333432674408, 0.3333333432674408]
    """
    s = (fq @ fk.transpose(1, 2)) * allowed  # (B, T, T): $\phi(q_t)\cdot\phi(k_s)$, causal
    return s / s.sum(dim=-1, keepdim=True)  # rows over keys


def mixing_mask(T: int, window: Optional[int] = None, mask_self: bool = False) -> torch.Tensor:
    """Which keys each query may use, shape (T, T), True = may attend: causal, within the window.

    Examples
    --------
    >>> mixing_mask(4, window=2).int().tolist()
    [[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]]
    >>> mixing_mask(3, mask_self=True).int().tolist()
    [[1, 0, 0], [1, 0, 0], [1, 1, 0]]
    """
    t = torch.arange(T)
    allowed = t[None, :] <= t[:, None]  # (T, T): causal
    if window is not None:
        allowed &= t[:, None] - t[None, :] < window
    if mask_self:
        allowed &= t[None, :] != t[:, None]
        allowed[0, 0] = True  # position 0 has no other key
    return allowed


class MixerModel(nn.Module):
    """One mixing layer over summed (key, value, position) embeddings, with a linear read-out.

    ``seq_len`` is the longest sequence (the fixed mixer's and the convolution's length). Forward: ``inputs`` (B, T, 2) -> ``(logits (B, T, 64), [A (B, T, T)])``, the interface of
    :func:`attention_course.models.training.train`.

    Examples
    --------
    >>> from attention_course.chapters.insight.recall_tasks import stacked_mqar
    >>> x, y, m = stacked_mqar(3, n_pairs=4)
    >>> logits, (A,) = MixerModel(Variant(), seq_len=8, seed=0)(x)
    >>> tuple(logits.shape), tuple(A.shape), torch.allclose(A.sum(-1), torch.ones(3, 8))
    ((3, 8, 64), (3, 8, 8), True)
    """

    def __init__(self, variant: Variant, seq_len: int, d_model: int = 64, n_keys: int = 64,
                 seed: int = 0) -> None:
        super().__init__()
        self.variant, self.seq_len, self.d_model = variant, seq_len, d_model
        g = torch.Generator().manual_seed(int(seed))
        d = d_model

        def param(*shape: int, std: float) -> nn.Parameter:
            return nn.Parameter(torch.randn(*shape, generator=g) * std)

        self.E_K = param(n_keys, d, std=1.0)
        self.E_V = param(N_VALUES + 1, d, std=1.0)  # the last row: the blank value
        self.P = param(seq_len, d, std=1.0)
        self.W_q = param(d, d, std=d**-0.5)
        self.W_k = param(d, d, std=d**-0.5)
        self.W_v = nn.Parameter(torch.eye(d))  # values start as the embeddings themselves
        self.W_o = nn.Parameter(torch.eye(d))
        self.W_g = param(d, d, std=d**-0.5)  # the convolution's gate
        self.theta = param(seq_len, seq_len, std=0.02)  # the fixed mixer's logits
        self.h = param(d, seq_len, std=seq_len**-0.5)  # the convolution's kernel, per channel
        self.ln = nn.LayerNorm(d)
        self.log_scale = nn.Parameter(torch.tensor(-0.5 * math.log(d)),  # $\tau$, $s = e^\tau = 1/\sqrt{d}$ at the start
                                      requires_grad=variant.learn_scale)
        if variant.norm == "argmax" or variant.identity:
            self.W_q.requires_grad_(False)
            self.W_k.requires_grad_(False)

    def mix(self, x: torch.Tensor) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        """The mixing step on embedded inputs ``x`` (B, T, d): returns (B, T, d) and ``A`` (B, T, T) or None."""
        v_ = self.variant
        B, T, d = x.shape
        allowed = mixing_mask(T, v_.window, v_.mask_self)  # (T, T)
        v = x @ self.W_v  # (B, T, d)
        if v_.mixer == "none":
            return torch.zeros_like(x), None
        if v_.mixer == "conv":
            lag = torch.arange(T)[:, None] - torch.arange(T)[None, :]  # (T, T): t - s
            K = self.h[:, lag.clamp(min=0)] * (lag >= 0)  # (d, T, T): h_c[t - s] for s <= t
            y = torch.einsum("cts,bsc->btc", K, v)  # (B, T, d): causal convolution per channel
            return (y * (x @ self.W_g)) @ self.W_o, None
        if v_.mixer == "fixed":
            logits = self.theta[:T, :T].masked_fill(~allowed, float("-inf"))  # (T, T), no input
            A = torch.softmax(logits, dim=-1).expand(B, T, T)  # (B, T, T), rows over keys
            return (A @ v) @ self.W_o, A
        if v_.identity:
            q, k = x, x
        else:
            q = x @ self.W_q  # (B, T, d)
            if v_.signed:
                k = q * signature(d)  # (B, T, d): $k = x W_Q D$, so $q_t \cdot k_s = x_t W_Q D W_Q^\top x_s$, symmetric
            else:
                k = q if v_.tied else x @ self.W_k  # (B, T, d)
        if v_.mixer == "linear":
            fq, fk = nn.functional.elu(q) + 1, nn.functional.elu(k) + 1  # (B, T, d), positive features
            A = linear_weights(fq, fk, allowed)  # (B, T, T), rows over keys
            return (A @ v) @ self.W_o, A
        scores = (q @ k.transpose(1, 2)) / math.sqrt(d)  # (B, T, T): $q_t \cdot k_s / \sqrt{d}$
        if v_.learn_scale:
            scores = self.log_scale.exp() * scores  # $s\, q_t \cdot k_s / \sqrt{d}$
        scores = scores.masked_fill(~allowed, float("-inf"))
        if v_.norm == "sparsemax":
            A = sparsemax(scores, dim=-1)
        else:
            soft = torch.softmax(scores, dim=-1)  # (B, T, T), rows over keys
            if v_.norm == "softmax":
                A = soft
            else:
                hard = nn.functional.one_hot(scores.argmax(dim=-1), T).to(x.dtype)  # (B, T, T)
                A = hard + soft - soft.detach() if v_.norm == "straight-through" else hard.detach()
        return (A @ v) @ self.W_o, A

    def forward(self, inputs: torch.Tensor) -> tuple[torch.Tensor, list]:
        if inputs.ndim != 3 or inputs.shape[2] != 2 or inputs.shape[1] > self.seq_len:
            raise ValueError(f"inputs have shape {tuple(inputs.shape)}; expected (B, T <= {self.seq_len}, 2)")
        T = inputs.shape[1]
        d = self.d_model
        x = self.E_K[inputs[..., 0]] + self.E_V[inputs[..., 1]] + self.P[:T]  # (B, T, d)
        mixed, A = self.mix(x)
        logits = self.ln(x + mixed) @ self.E_V[:N_VALUES].T / math.sqrt(d)  # (B, T, 64): read out by the value embeddings
        return logits, [] if A is None else [A]

    def with_variant(self, **change) -> Variant:
        """This model's variant with some switches changed (a helper for sweeps)."""
        return replace(self.variant, **change)
