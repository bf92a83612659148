"""How the checker compares a learner's result with the reference's: kind, shape, values.

The reference's result defines, leaf by leaf, the type, dtype kind, precision and shape
expected. :func:`structure_problem` names the first way a learner's result breaks them;
:func:`first_difference` names the first wrong entry.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import torch

__all__ = ["as_numpy", "describe", "structure_problem", "result_name", "leaves", "close", "leaf_close",
           "first_difference", "tolerances", "format_pair"]

# float32 results (from float32 inputs) are compared at float32 precision: its epsilon is
# 1.2e-7, the course's float32 cases have values of order 1 to 100 and a few operations in
# a row, so a correct float32 answer is within ~1e-6 relatively; 1e-5 leaves a 10x margin,
# and atol covers outputs that cancel to about 0 (weighted sums of order-1 values).
FLOAT32_RTOL = 1e-5
FLOAT32_ATOL = 1e-6
_CHUNK = 1 << 18  # entries compared at a time


def as_numpy(x: Any) -> Optional[np.ndarray]:
    """A numpy view of numbers, numpy arrays/scalars and torch tensors; None for anything else.

    Lists and tuples give None on purpose: the exercises ask for arrays.

    Examples
    --------
    >>> as_numpy(3).dtype.kind, as_numpy([1, 2]) is None
    ('i', True)
    """
    if isinstance(x, torch.Tensor):
        t = x.detach().cpu().resolve_conj().resolve_neg()
        return (t.float() if t.dtype == torch.bfloat16 else t).numpy()
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, (bool, int, float, complex, np.generic)):
        return np.asarray(x)
    return None


def _is_array(x: Any) -> bool:
    """True for numpy arrays and torch tensors (not for Python or numpy scalars)."""
    return isinstance(x, (np.ndarray, torch.Tensor))


def describe(x: Any) -> str:
    """A short phrase for what ``x`` is, used in feedback."""
    if x is None:
        return "None"
    arr = as_numpy(x)
    if arr is not None and _is_array(x):
        return f"an array of shape {arr.shape} and dtype {arr.dtype}"
    if arr is not None:
        return f"a {type(x).__name__} ({_short(x)})"
    if isinstance(x, (list, tuple)):
        return f"a {type(x).__name__} of {len(x)} item{'s' if len(x) != 1 else ''}"
    return f"a {type(x).__name__}"


def _short(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= 40 else text[:40] + "…"


def _wanted(e: np.ndarray, ref: Any, array_type: str = "any") -> str:
    """What the reference's result is, in words."""
    kind = {"b": "boolean", "i": "integer", "u": "integer"}.get(e.dtype.kind, "float")
    if not _is_array(ref) and e.ndim == 0:
        return "an int" if kind == "integer" else f"a single {kind} number"
    if array_type == "torch" and isinstance(ref, torch.Tensor):
        return f"a torch tensor of dtype {str(ref.dtype).replace('torch.', '')} and shape {tuple(ref.shape)}"
    return f"a {kind} numpy array (or torch tensor) of shape {e.shape}"


def _kind_problem(g: np.ndarray, e: np.ndarray, got: Any, ref: Any, exact: bool = False) -> Optional[str]:
    gk, ek = g.dtype.kind, e.dtype.kind
    if gk == "c" and ek != "c":
        return (f"your result is complex ({g.dtype}); expected real numbers. Complex values "
                "usually come from np.linalg.eigvals or np.linalg.eig, which return complex "
                "eigenvalues even for real ones; use np.linalg.svd (or eigvalsh for a symmetric "
                "matrix), which return real values")
    if gk not in "biuf":
        return f"you returned {describe(got)}; expected {_wanted(e, ref)}"
    if ek == "b" and gk != "b" and e.ndim == 0:
        return (f"you returned {describe(got)}, a number, not a boolean: expected True or False (a "
                "comparison such as a < b gives one)")
    if ek == "b" and gk != "b":
        return (f"your result holds numbers ({g.dtype}), not booleans: return a boolean array (a "
                "comparison such as j <= i gives one, or use dtype=bool)")
    if ek in "iu" and gk not in "iu":
        if gk == "b":
            return f"you returned a boolean ({_short(got)}); expected {_wanted(e, ref)}"
        return f"you returned a float ({_short(got)}); expected {_wanted(e, ref)}"
    if ek in "fiu" and gk == "b":
        return f"you returned booleans ({g.dtype}); expected {_wanted(e, ref)}"
    if ek == "f" and gk == "f" and g.dtype.itemsize < e.dtype.itemsize:
        return (f"your result is {g.dtype} but the inputs are {e.dtype}, so you lost precision. "
                "Keep the input's dtype: np.asarray(x) and torch.as_tensor(x) keep float64; "
                ".astype(np.float32), .float() and dtype=float32 do not")
    if exact and ek == "f" and gk == "f" and g.dtype != e.dtype:
        return (f"your result is {g.dtype} but the inputs are {e.dtype}: return the inputs' dtype (the "
                f"next steps multiply your result with {e.dtype} weights); a .double() or a float64 "
                "constant tensor changes it")
    return None


def _shape_problem(g: np.ndarray, e: np.ndarray, ref: Any) -> Optional[str]:
    if g.shape == e.shape:
        return None
    if e.ndim == 0:
        return f"you returned shape {g.shape}; expected a single number, not an array"
    if g.ndim == e.ndim and sorted(g.shape) == sorted(e.shape):
        return (f"you returned shape {g.shape}; expected shape {e.shape}: the right axes in the "
                "wrong order (check your transpose)")
    return f"you returned shape {g.shape}; expected shape {e.shape}"


def result_name(i: int, n: int, names: tuple = ()) -> str:
    """How feedback calls result ``i`` (from 0) of a tuple of ``n``: ``result 2 of 3 (topk_error)``.

    Examples
    --------
    >>> result_name(1, 3, ("rank_error", "topk_error", "rank_wins")), result_name(0, 2)
    ('result 2 of 3 (topk_error)', 'result 1 of 2')
    """
    return f"result {i + 1} of {n}" + (f" ({names[i]})" if len(names) == n else "")


def structure_problem(got: Any, ref: Any, where: str = "", names: tuple = (), array_type: str = "any") -> Optional[str]:
    """Return a message if ``got`` does not have the type, dtype kind or shape of ``ref``.

    ``where`` prefixes the message; ``names`` name a tuple's items; ``array_type`` is as in
    :class:`~attention_course.exercises._core.Exercise`.

    Examples
    --------
    >>> structure_problem(np.ones((2, 2)), np.ones((2, 2), dtype=bool))[:40]
    'your result holds numbers (float64), not'
    >>> structure_problem([[1.0]], np.ones((1, 1)))[:26]
    'you returned a list of 1 i'
    >>> structure_problem(np.ones(3), np.ones(3)) is None
    True
    >>> "e.g. `return mean, std`" in structure_problem([1.0, 2.0], (1.0, 2.0), names=("mean", "std"))
    True
    >>> structure_problem(np.ones(3), torch.ones(3), array_type="torch")[:34]
    'you returned a numpy array; expect'
    """
    if isinstance(ref, tuple):
        n = len(ref)
        if isinstance(got, list) and len(got) == n:
            example = ", ".join(names) if len(names) == n else ", ".join("abcdefgh"[:n])
            return (f"{where}you returned a list of {n} results; return a tuple instead, "
                    f"e.g. `return {example}` (the comma makes the tuple)")
        if not isinstance(got, tuple):
            expected = f" ({', '.join(names)})" if len(names) == n else ""
            return f"{where}you returned {describe(got)}; expected a tuple of {n} results{expected}"
        if len(got) != n:
            expected = f": {', '.join(names)}" if len(names) == n else ""
            return f"{where}you returned {len(got)} results; expected a tuple of {n}{expected}"
        for i, (g, e) in enumerate(zip(got, ref)):
            msg = structure_problem(g, e, f"in {result_name(i, n, names)}, ", array_type=array_type)
            if msg:
                return msg
        return None
    if got is None:
        return f"{where}your function returned None: did you forget `return`?"
    e = as_numpy(ref)
    g = as_numpy(got)
    if g is None and isinstance(got, (list, tuple)):
        if array_type == "torch" and isinstance(ref, torch.Tensor):
            return f"{where}you returned {describe(got)}; expected {_wanted(e, ref, array_type)}, one tensor"
        return (f"{where}you returned {describe(got)}; expected {_wanted(e, ref)}. "
                "Turn it into an array with np.array(...) (or compute with arrays throughout)")
    if g is None or (_is_array(ref) and e.ndim > 0 and not _is_array(got)):
        return f"{where}you returned {describe(got)}; expected {_wanted(e, ref, array_type)}"
    torch_wanted = array_type == "torch" and isinstance(ref, torch.Tensor)
    if torch_wanted and not isinstance(got, torch.Tensor):
        return (f"{where}you returned {'a numpy array' if isinstance(got, np.ndarray) else describe(got)}; "
                f"expected a torch tensor (dtype {str(ref.dtype).replace('torch.', '')}, shape "
                f"{tuple(ref.shape)}): the next steps multiply it with torch tensors. Stay in torch "
                "throughout (torch.from_numpy(a) converts a numpy array)")
    msg = _kind_problem(g, e, got, ref, exact=torch_wanted) or _shape_problem(g, e, ref)
    return f"{where}{msg}" if msg else None


def leaves(x: Any) -> list[np.ndarray]:
    """The arrays of a result (one per tuple item), as numpy arrays; None if not convertible."""
    if isinstance(x, tuple):
        return [a for item in x for a in leaves(item)]
    return [as_numpy(x)]


def tolerances(e: np.ndarray, rtol: float, atol: float) -> tuple[float, float]:
    """The exercise's tolerances, loosened to float32 precision for a float32 reference leaf."""
    if e.dtype == np.float32:
        return max(rtol, FLOAT32_RTOL), max(atol, FLOAT32_ATOL)
    return rtol, atol


def leaf_close(g: np.ndarray, e: np.ndarray, rtol: float, atol: float) -> bool:
    if g is None or g.shape != e.shape:
        return False
    if e.dtype.kind == "b" or g.dtype.kind == "b":
        return g.dtype.kind == e.dtype.kind and bool(np.array_equal(g, e))
    if e.dtype.kind in "iu" and g.dtype.kind in "iu":  # counts are exact: off by one is wrong
        return bool(np.array_equal(g, e))
    rtol, atol = tolerances(e, rtol, atol)
    g, e = np.broadcast_arrays(np.asarray(g, dtype=float), np.asarray(e, dtype=float))
    g, e = g.reshape(-1), e.reshape(-1)  # views when contiguous or broadcast; no float64 copies
    return all(  # in chunks, so a 6-million-row case needs no 6-million-entry temporaries
        np.allclose(g[i:i + _CHUNK], e[i:i + _CHUNK], rtol=rtol, atol=atol, equal_nan=True)
        for i in range(0, g.size, _CHUNK)
    )


def close(got: Any, ref: Any, rtol: float, atol: float) -> bool:
    """True when every leaf of ``got`` matches ``ref`` (booleans exactly, numbers within tolerance)."""
    gs, es = leaves(got), leaves(ref)
    return len(gs) == len(es) and all(leaf_close(g, e, rtol, atol) for g, e in zip(gs, es))


def first_difference(got: Any, ref: Any, rtol: float, atol: float) -> Optional[dict]:
    """The first wrong entry: its result number, index, value, expected value and the largest error.

    Examples
    --------
    >>> d = first_difference(np.array([1.0, 5.0]), np.array([1.0, 2.0]), 1e-6, 0)
    >>> d["index"], d["got"], d["expected"], d["max_error"]
    ((1,), 5.0, 2.0, 3.0)
    """
    gs, es = leaves(got), leaves(ref)
    for n, (g, e) in enumerate(zip(gs, es)):
        if leaf_close(g, e, rtol, atol):
            continue
        gf, ef = g.astype(float), e.astype(float)
        with np.errstate(all="ignore"):
            diff = np.abs(gf - ef)
            if e.dtype.kind in "biu" and g.dtype.kind in "biu":  # booleans and counts: exact
                wrong = g != e
            else:
                lo, hi = tolerances(e, rtol, atol)
                wrong = ~np.isclose(gf, ef, rtol=lo, atol=hi, equal_nan=True)
        err = float(np.nanmax(np.where(np.isfinite(diff), diff, np.inf))) if diff.size else 0.0
        hits = np.argwhere(wrong)  # (n_wrong, ndim)
        index = tuple(int(i) for i in hits[0]) if wrong.ndim and len(hits) else (0,) * wrong.ndim
        return {"result": n, "n_results": len(es), "index": index, "max_error": err,
                "got": g[index].item(), "expected": e[index].item()}
    return None


def format_pair(got: Any, expected: Any) -> tuple[str, str, str]:
    """``got`` and ``expected`` with the fewest significant digits (at least 6) that tell them apart,
    and their gap.

    Examples
    --------
    >>> format_pair(7.14413e-05, 7.14412e-05)
    ('7.14413e-05', '7.14412e-05', 'difference 1e-10, relative difference 1.4e-06')
    >>> format_pair(0.1 + 0.2, 0.3)
    ('0.30000000000000004', '0.3', 'difference 5.6e-17, relative difference 1.9e-16')
    >>> format_pair(True, False), format_pair(12, 10)
    (('True', 'False', ''), ('12', '10', 'off by 2'))
    """
    if isinstance(got, bool) or isinstance(expected, bool):
        return str(got), str(expected), ""
    if isinstance(got, int) and isinstance(expected, int):
        return str(got), str(expected), f"off by {abs(got - expected)}"
    g, e = float(got), float(expected)
    if not (np.isfinite(g) and np.isfinite(e)):
        return f"{g:.6g}", f"{e:.6g}", ""
    digits = next((p for p in range(6, 17) if f"{g:.{p}g}" != f"{e:.{p}g}"), None)
    a, b = (f"{g:.{digits}g}", f"{e:.{digits}g}") if digits else (repr(g), repr(e))  # repr: every digit
    gap = f"difference {abs(g - e):.2g}"
    if e != 0:
        gap += f", relative difference {abs(g - e) / abs(e):.2g}"
    return a, b, gap
