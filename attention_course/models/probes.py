r"""Probes of a trained :class:`~attention_course.models.tiny.TinyTransformer`'s heads (chapter 4).

* :func:`attention_pattern_scores` and :func:`head_scores`: how much each head
  behaves as a previous-token head and as an induction head (Olsson et al., 2022).
"""

from __future__ import annotations

import numpy as np
import torch

from ..core._backend import ShapeError, shape_str
from .tasks import Task
from .tiny import TinyTransformer

__all__ = ["attention_pattern_scores", "head_scores"]


def attention_pattern_scores(
    weights: list[torch.Tensor], tokens: torch.Tensor
) -> dict[str, np.ndarray]:
    r"""Score every head as a previous-token head and as an induction head.

    For attention weights :math:`A` (rows = queries) on token sequences :math:`s`,

    .. math::

        \text{prev}_{\ell h} = \operatorname{mean}_{i \ge 1} A^{\ell h}_{i,\, i-1},
        \qquad
        \text{induction}_{\ell h} = \operatorname{mean}_{i:\, J(i) \ne \emptyset}
            \sum_{j \in J(i)} A^{\ell h}_{i,\, j + 1},
        \qquad J(i) = \{j < i : s_j = s_i\}

    Both scores lie in [0, 1]; 1 is a perfect head.

    Parameters
    ----------
    weights : list of torch.Tensor, each (B, h, T, T)
        One entry per layer, as returned by :class:`TinyTransformer`.
    tokens : torch.LongTensor, shape (B, T)

    Returns
    -------
    dict with ``"previous_token"`` and ``"induction"``, each numpy (n_layers, h)

    Examples
    --------
    >>> tokens = torch.tensor([[5, 6, 7, 5, 6, 7]])
    >>> T = 6
    >>> prev = torch.diag(torch.ones(T - 1), -1); prev[0, 0] = 1.0   # attends to i - 1
    >>> ind = torch.eye(T); ind[3:] = torch.eye(T)[1:4]             # attends to j + 1
    >>> w = torch.stack([prev, ind])[None]                          # (1, 2, 6, 6)
    >>> s = attention_pattern_scores([w], tokens)
    >>> s["previous_token"].round(2).tolist(), s["induction"].round(2).tolist()
    ([[1.0, 0.0]], [[0.0, 1.0]])
    """
    if tokens.ndim != 2:
        raise ShapeError(f"tokens have shape {shape_str(tokens)}; expected (B, T)")
    B, T = tokens.shape
    same = tokens[:, :, None] == tokens[:, None, :]  # (B, T, T): s_i == s_j
    earlier = torch.ones(T, T, dtype=torch.bool).tril(diagonal=-1)  # (T, T): j < i
    follows = torch.zeros(B, T, T, dtype=torch.bool)
    follows[:, :, 1:] = (same & earlier)[:, :, :-1]  # (B, T, T): key j + 1 with j in J(i)
    has = follows.any(dim=2)  # (B, T): token i occurred before
    n = has.sum().clamp(min=1)
    prev, ind = [], []
    for w in weights:
        if w.ndim != 4 or w.shape[0] != B or w.shape[-2:] != (T, T):
            raise ShapeError(
                f"weights have shape {shape_str(w)} but tokens have shape {(B, T)}; "
                f"expected (B, h, T, T) = ({B}, h, {T}, {T})"
            )
        w = w.detach().double()
        diag = torch.diagonal(w, offset=-1, dim1=-2, dim2=-1)  # (B, h, T - 1): A[i, i-1]
        prev.append(diag.mean(dim=(0, 2)))  # (h,)
        a = (w * follows[:, None]).sum(dim=3)  # (B, h, T): attention on the j + 1
        ind.append((a * has[:, None]).sum(dim=(0, 2)) / n)  # (h,)
    return {
        "previous_token": torch.stack(prev).numpy(),
        "induction": torch.stack(ind).numpy(),
    }


@torch.no_grad()
def head_scores(
    model: TinyTransformer, task: Task, batch_size: int = 64, seed: int = 12345
) -> dict[str, np.ndarray]:
    """Previous-token and induction scores of every head on a fresh batch of ``task``.

    Use the ``"repeated_sequences"`` task.

    Returns
    -------
    dict with ``"previous_token"`` and ``"induction"``, each numpy (n_layers, n_heads)

    Examples
    --------
    >>> from attention_course.models.tasks import make_task
    >>> from attention_course.models.tiny import ModelConfig
    >>> model = TinyTransformer(ModelConfig(), seed=0)
    >>> scores = head_scores(model, make_task("repeated_sequences"))
    >>> scores["previous_token"].shape, scores["induction"].shape
    ((2, 4), (2, 4))
    """
    inputs, _, _ = task(batch_size, seed=seed)
    _, weights = model(inputs)
    return attention_pattern_scores(weights, inputs)
