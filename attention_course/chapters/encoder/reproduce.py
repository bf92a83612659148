r"""Does an encoder reproduce a reference, layer by layer? Gaps, a float32 estimate, and where they part.

Two correct float32 implementations add the same numbers in different orders, so they differ by
round-off. :func:`float32_bound` estimates how much (an estimate, not a proven bound): with the unit
roundoff :math:`u = 2^{-24}`, the longest sum :math:`n` of a layer (MiniLM: :math:`d_{ff} = 1536`,
errors of random sign adding like a random walk) and :math:`m = \max|h|` (each LayerNorm resets the
size), after the embeddings and :math:`\ell` layers

.. math::

    |h^{\text{ours}}_\ell - h^{\text{ref}}_\ell| \;\lesssim\; (\ell + 1)\, \sqrt{n}\; u \; m .

MiniLM's real gaps are 20 to 60 times smaller; anything above it is a different computation.
"""

from __future__ import annotations

import copy
import functools
import math
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from ...core._backend import ShapeError, shape_str
from ...models.pretrained import load_minilm

__all__ = [
    "UNIT_ROUNDOFF_FLOAT32", "layer_bounds", "layer_gaps", "first_departure", "transformers_hidden_states",
]

#: float32's unit roundoff, 2^-24: the largest relative error of one rounding (half its epsilon 2^-23).
UNIT_ROUNDOFF_FLOAT32 = 2.0**-24


def float32_bound(max_abs: float, depth: int, n: int) -> float:
    r"""The float32 round-off estimate :math:`\text{depth} \cdot \sqrt{n} \cdot 2^{-24} \cdot \text{max\_abs}`.

    Parameters
    ----------
    max_abs : float
        The size of the values, :math:`\max|h|`.
    depth : int
        How many normalised stages the error has passed: ``l + 1`` after layer ``l`` (embeddings = 1).
    n : int
        The longest sum in one stage (MiniLM: ``d_ff = 1536``).

    Examples
    --------
    >>> f"{float32_bound(max_abs=11.0, depth=7, n=1536):.2e}"   # MiniLM's last layer
    '1.80e-04'
    """
    if depth < 1 or n < 1 or max_abs < 0:
        raise ValueError(f"depth={depth}, n={n}, max_abs={max_abs}; expected depth >= 1, n >= 1, max_abs >= 0")
    return depth * math.sqrt(n) * UNIT_ROUNDOFF_FLOAT32 * max_abs


def layer_bounds(reference: torch.Tensor, n: int, attention_mask: Optional[torch.Tensor] = None) -> np.ndarray:
    """The float32 estimate (:func:`float32_bound`) for every layer of ``reference`` (L+1, B, T, d): depth
    l + 1, its own max |h|.

    Examples
    --------
    >>> ref = torch.ones(3, 1, 2, 4)
    >>> (layer_bounds(ref, n=16) / 2**-24).tolist()     # 4 * (l + 1) * 1
    [4.0, 8.0, 12.0]
    """
    L1, B, T, _ = reference.shape
    real = _real(attention_mask, B, T)  # (B, T)
    size = reference.detach().double().abs().amax(dim=-1).cpu().numpy()  # (L+1, B, T)
    sizes = np.where(real[None], size, 0.0).reshape(L1, -1).max(axis=1)  # (L+1,) max |h| per layer
    return np.array([float32_bound(float(m), depth=l + 1, n=n) for l, m in enumerate(sizes)])


@functools.lru_cache(maxsize=1)
def _minilm_float64():
    return copy.deepcopy(load_minilm()[1]).double()  # the cached model is shared: never cast it in place


def transformers_hidden_states(input_ids: torch.Tensor, attention_mask: torch.Tensor,
                               dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """all-MiniLM-L6-v2's hidden states computed by ``transformers`` (float32, or a float64 copy): (L+1, B, T, d)."""
    model = load_minilm()[1] if dtype == torch.float32 else _minilm_float64()
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype={dtype}; expected torch.float32 or torch.float64")
    with torch.no_grad():
        out = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
    return torch.stack(out.hidden_states)  # (L+1, B, T, d)


def _check_pair(ours: torch.Tensor, reference: torch.Tensor, attention_mask: Optional[torch.Tensor]) -> None:
    if tuple(ours.shape) != tuple(reference.shape) or ours.ndim != 4:
        raise ShapeError(f"ours has shape {shape_str(ours)} and reference has shape {shape_str(reference)}; "
                         f"expected the same (L+1, B, T, d)")
    if attention_mask is not None and tuple(attention_mask.shape) != tuple(ours.shape[1:3]):
        raise ShapeError(f"attention_mask has shape {shape_str(attention_mask)}; expected (B, T) = "
                         f"{tuple(ours.shape[1:3])}")


def _real(attention_mask: Optional[torch.Tensor], B: int, T: int) -> np.ndarray:
    if attention_mask is None:
        return np.ones((B, T), dtype=bool)
    return np.asarray(attention_mask.detach().cpu().numpy(), dtype=bool)  # (B, T)


def layer_gaps(ours: torch.Tensor, reference: torch.Tensor,
               attention_mask: Optional[torch.Tensor] = None) -> np.ndarray:
    """The largest ``|ours - reference|`` of each layer over the real tokens, shape (L+1,).

    Compared in float64, so the gap is not rounded again.

    Examples
    --------
    >>> ref = torch.zeros(3, 1, 2, 4)
    >>> ours = ref.clone(); ours[2, 0, 1, 0] = 1e-3; ours[1, 0, 1, 0] = 5.0   # position 1 is padding
    >>> layer_gaps(ours, ref, torch.tensor([[1, 0]])), float(layer_gaps(ours, ref)[1])
    (array([0., 0., 0.]), 5.0)
    """
    _check_pair(ours, reference, attention_mask)
    L1, B, T, _ = ours.shape
    diff = (ours.detach().double() - reference.detach().double()).abs().amax(dim=-1).cpu().numpy()  # (L+1, B, T)
    real = _real(attention_mask, B, T)  # (B, T)
    return np.where(real[None], diff, 0.0).reshape(L1, -1).max(axis=1)  # (L+1,)


@dataclass(frozen=True)
class Departure:
    """Where two encoders first part: ``layer`` (0 = embeddings), ``sequence``, ``position``, ``gap``."""

    layer: int
    sequence: int
    position: int
    gap: float
    padding: bool = False  # True when every real token agrees and only padded positions differ


def first_departure(ours: torch.Tensor, reference: torch.Tensor, attention_mask: Optional[torch.Tensor],
                    bound, rtol: float = 0.0) -> Optional[Departure]:
    """The first layer, then the first position, where ``|ours - reference| > bound + rtol |reference|``.

    ``bound`` is one number or one per layer (shape (L+1,)). Real tokens are searched first;
    if they all agree, padded positions are (``padding=True``). None when everything agrees.

    Examples
    --------
    >>> ref = torch.zeros(3, 2, 4, 8, dtype=torch.float64)
    >>> ours = ref.clone(); ours[2, 1, 3] = 0.1; ours[1, 0, 2, 5] = 0.2
    >>> first_departure(ours, ref, None, bound=1e-4)
    Departure(layer=1, sequence=0, position=2, gap=0.2, padding=False)
    """
    _check_pair(ours, reference, attention_mask)
    L1, B, T, _ = ours.shape
    o, r = ours.detach().double(), reference.detach().double()
    limit = torch.as_tensor(np.broadcast_to(np.asarray(bound, dtype=float), (L1,)).copy(), dtype=torch.float64)
    excess = (o - r).abs() - limit[:, None, None, None] - rtol * r.abs()  # (L+1, B, T, d)
    bad = (excess > 0).any(dim=-1).cpu().numpy()  # (L+1, B, T)
    bad |= ~np.isfinite(o.cpu().numpy()).all(axis=-1)  # NaN or inf never agrees
    gap = (o - r).abs().amax(dim=-1).cpu().numpy()  # (L+1, B, T)
    real = _real(attention_mask, B, T)  # (B, T)
    for where, padding in ((real, False), (~real, True)):
        hits = np.argwhere(bad & where[None])  # (n, 3): layer, sequence, position, in that order
        if len(hits):
            layer, seq, pos = (int(i) for i in hits[0])
            return Departure(layer, seq, pos, float(gap[layer, seq, pos]), padding)
    return None
