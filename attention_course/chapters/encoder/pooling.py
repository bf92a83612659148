r"""From token states to one sentence vector: all-MiniLM-L6-v2's mean pooling and normalisation.

:math:`\hat e_b = e_b / \lVert e_b \rVert_2` with :math:`e_b = \sum_t m_{bt} h_{bt} / \sum_t m_{bt}` over
the real tokens (``m = attention_mask``), the head the model was trained with, so dot products are cosines.
"""

from __future__ import annotations

import torch

from ...core._backend import ShapeError, shape_str

__all__: list[str] = []  # sentence_embeddings: the lesson writes its own (step 7); search.py and the tests import it here


def sentence_embeddings(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Mean of each sequence's real token states, scaled to unit length: (B, T, d) -> (B, d).

    Examples
    --------
    >>> h = torch.tensor([[[3.0, 0.0], [1.0, 2.0], [9.0, 9.0]]])   # the last position is padding
    >>> sentence_embeddings(h, torch.tensor([[1, 1, 0]]))            # mean (2, 1), length sqrt(5)
    tensor([[0.8944, 0.4472]])
    """
    if hidden.ndim != 3 or tuple(attention_mask.shape) != tuple(hidden.shape[:2]):
        raise ShapeError(f"hidden has shape {shape_str(hidden)} and attention_mask {shape_str(attention_mask)}; "
                         f"expected (B, T, d) and (B, T)")
    m = attention_mask.to(hidden.dtype)[..., None]  # (B, T, 1): 1 for a real token, 0 for padding
    mean = (hidden * m).sum(dim=1) / m.sum(dim=1).clamp_min(1.0)  # (B, d) over the real tokens
    return mean / torch.linalg.vector_norm(mean, dim=-1, keepdim=True)  # (B, d), unit length
