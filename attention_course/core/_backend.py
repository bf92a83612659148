"""Tiny helpers that let the math functions take numpy arrays or torch tensors.

The core functions accept either library and return the same kind they were given.
"""

from __future__ import annotations

from typing import Any, Union

import numpy as np
import torch

Array = Union[np.ndarray, torch.Tensor]

__all__ = ["Array", "ShapeError", "is_torch", "to_numpy", "check_float", "shape_str"]


class ShapeError(ValueError):
    """Raised when inputs have incompatible shapes or unusable dtypes.

    A :class:`ValueError`; the message names the shapes and the rule broken.
    """


def is_torch(x: Any) -> bool:
    """Return True when ``x`` is a :class:`torch.Tensor`."""
    return isinstance(x, torch.Tensor)


def to_numpy(x: Any) -> np.ndarray:
    """Return ``x`` as a numpy array (detached and on the CPU for tensors)."""
    if is_torch(x):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def shape_str(x: Any) -> str:
    """Format the shape of an array or tensor as ``(2, 7, 32)``."""
    return str(tuple(int(s) for s in x.shape))


def check_float(name: str, x: Any) -> None:
    """Raise :class:`ShapeError` unless ``x`` is a floating-point array or tensor."""
    if is_torch(x):
        ok = x.is_floating_point()
    elif isinstance(x, np.ndarray):
        ok = np.issubdtype(x.dtype, np.floating)
    else:
        raise ShapeError(
            f"{name} must be a numpy array or torch tensor, got {type(x).__name__}"
        )
    if not ok:
        raise ShapeError(
            f"{name} has integer/boolean dtype {x.dtype} and shape {shape_str(x)}; "
            f"expected a floating-point dtype (cast with .astype(float) or .double())"
        )
