"""Plane geometry for the convex-hull picture: an attention output lies in the convex hull of its values."""

from __future__ import annotations

import numpy as np

from ...core._backend import Array, to_numpy

__all__ = []


def convex_hull(points: Array) -> np.ndarray:
    """Vertices (H, 2) of the convex hull of 2-D points (N, 2), counter-clockwise (monotone chain).

    Examples
    --------
    >>> import numpy as np
    >>> convex_hull(np.array([[0, 0], [1, 0], [1, 1], [0, 1], [0.5, 0.5]])).tolist()
    [[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]
    """
    p = np.asarray(to_numpy(points), dtype=float)
    if p.ndim != 2 or p.shape[1] != 2:
        raise ValueError(f"points has shape {p.shape}; expected (N, 2)")
    pts = sorted(set(map(tuple, p)))
    if len(pts) <= 2:
        return np.array(pts)

    def cross(o, a, b):
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    def half(seq):
        out: list = []
        for pt in seq:
            while len(out) >= 2 and cross(out[-2], out[-1], pt) <= 0:
                out.pop()
            out.append(pt)
        return out

    lower, upper = half(pts), half(reversed(pts))
    return np.array(lower[:-1] + upper[:-1])



def in_convex_hull(points: Array, vertices: Array, tol: float = 1e-9) -> np.ndarray:
    """Whether each 2-D point (N, 2) lies inside or on the convex hull of ``vertices`` (M, 2); shape (N,).

    Examples
    --------
    >>> import numpy as np
    >>> square = np.array([[0, 0], [1, 0], [1, 1], [0, 1]])
    >>> in_convex_hull(np.array([[0.5, 0.5], [1.5, 0.5], [1.0, 1.0]]), square).tolist()
    [True, False, True]
    """
    p = np.asarray(to_numpy(points), dtype=float)
    if p.ndim != 2 or p.shape[1] != 2:
        raise ValueError(f"points has shape {p.shape}; expected (N, 2)")
    hull = convex_hull(vertices)  # (H, 2), counter-clockwise
    if len(hull) < 3:
        raise ValueError(f"the hull of vertices has {len(hull)} distinct points; need 3 or more")
    a, b = hull, np.roll(hull, -1, axis=0)  # edges a -> b, (H, 2) each
    edge = b - a  # (H, 2)
    rel = p[:, None, :] - a[None, :, :]  # (N, H, 2)
    cross = edge[None, :, 0] * rel[..., 1] - edge[None, :, 1] * rel[..., 0]  # (N, H)
    return np.all(cross >= -tol, axis=1)
