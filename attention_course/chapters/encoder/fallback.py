"""Yours once it passes, the package's until then: how the chapter runs top to bottom with stubs unsolved.

A later cell uses the reader's function if it passes its exercise, else the package's, so "Run All"
works on the untouched notebook and on a finished one. A failing part is replaced with the check's
verdict (silently while it is the untouched stub); a passing part is :class:`Guarded`, handed to the
package's part for good if on new kinds of input it returns something else or raises.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import torch

from ...exercises import evaluate

__all__ = ["solved", "yours_or_ours", "describe_parts"]

_RESULTS: dict = {}  # (exercise id, function) -> CheckResult; a function is checked once


def _result(exercise_id: str, fn: Any):
    try:
        key = (exercise_id, fn)
        hash(key)
    except TypeError:  # an unhashable callable: check it every time
        return evaluate(exercise_id, fn)
    if key not in _RESULTS:
        _RESULTS[key] = evaluate(exercise_id, fn)
    return _RESULTS[key]


def solved(exercise_id: str, fn: Any) -> bool:
    """True when ``fn`` passes exercise ``exercise_id``'s check (remembered per function object); never raises.

    Examples
    --------
    >>> def my_block(x, layer, num_heads, mask, eps):
    ...     raise NotImplementedError
    >>> solved("post-ln-block", my_block)
    False
    """
    return _result(exercise_id, fn).passed


def _structure(x: Any) -> Any:
    """What a result is, for comparison: a tensor's (dtype, shape), a tuple of those, or its type."""
    if isinstance(x, torch.Tensor):
        return ("tensor", x.dtype, tuple(x.shape))
    if isinstance(x, tuple):
        return tuple(_structure(item) for item in x)
    return type(x).__name__


def _signature(args: tuple) -> tuple:
    """The kind of inputs a call gets: each tensor's dtype and shape (a dataclass of weights: its first tensor's)."""
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            out.append((a.dtype, tuple(a.shape)))
        elif hasattr(a, "__dataclass_fields__"):
            first = next((getattr(a, f) for f in a.__dataclass_fields__
                          if isinstance(getattr(a, f), torch.Tensor)), None)
            out.append(None if first is None else (type(a).__name__, first.dtype, tuple(first.shape)))
        else:
            out.append(a if isinstance(a, (int, float, str, type(None))) else type(a).__name__)
    return tuple(out)


class Guarded:
    """A reader's part that passed its check, compared with the package's ``ours`` (type, dtype, shape) on
    each new kind of input; a mismatch or an exception hands over to ``ours`` for good, saying why once.

    Examples
    --------
    >>> from attention_course.chapters.encoder.layer_norm import layer_norm
    >>> mine = Guarded("layer_norm", lambda x, g, b, eps: layer_norm(x, g, b, eps).numpy(), layer_norm)
    >>> x = torch.ones(1, 2, 4)
    >>> y = mine(x, torch.ones(4), torch.zeros(4), 1e-12)  # doctest: +ELLIPSIS
    layer_norm: the course's version from here on (ch.layer_norm): yours returned ndarray where the course's returns a tensor...
    >>> isinstance(y, torch.Tensor), mine.replaced
    (True, True)
    """

    def __init__(self, name: str, yours: Callable, ours: Callable):
        self.name, self.yours, self.ours = name, yours, ours
        self.replaced: bool = False
        self.why: str = ""
        self._checked: set = set()
        self.__name__ = getattr(yours, "__name__", name)
        self.__wrapped__ = yours

    def _replace(self, why: str) -> None:
        self.replaced, self.why = True, why
        print(f"{self.name}: the course's version from here on (ch.{getattr(self.ours, '__name__', self.name)}): {why}")

    def __call__(self, *args, **kwargs):
        if self.replaced:
            return self.ours(*args, **kwargs)
        key = _signature(args)
        try:
            mine = self.yours(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - a reader's part must not stop a later cell
            self._replace(f"yours raised {type(exc).__name__}: {str(exc)[:120]} on inputs it had not met in its check")
            return self.ours(*args, **kwargs)
        if key not in self._checked:
            theirs = self.ours(*args, **kwargs)
            got, want = _structure(mine), _structure(theirs)
            if got != want:
                self._replace(f"yours returned {_said(got)} where the course's returns {_said(want)}, on inputs "
                              f"it had not met in its check")
                return theirs
            self._checked.add(key)
        return mine


def _said(structure: Any) -> str:
    if isinstance(structure, tuple) and structure and structure[0] == "tensor":
        return f"a tensor ({str(structure[1]).replace('torch.', '')}, shape {structure[2]})"
    if isinstance(structure, tuple):
        return "a tuple of " + ", ".join(_said(s) for s in structure)
    return str(structure)


def yours_or_ours(exercise_id: str, yours: Any, ours: Callable, name: Optional[str] = None) -> Callable:
    """``yours`` (guarded, see :class:`Guarded`) if it passes exercise ``exercise_id``, else the package's ``ours``.

    An attempted ``yours`` that fails is replaced with a line saying why; the untouched stub silently.

    Examples
    --------
    >>> from attention_course.chapters.encoder.block import block
    >>> def my_block(x, layer, num_heads, mask, eps):
    ...     raise NotImplementedError
    >>> yours_or_ours("post-ln-block", my_block, block) is block
    True
    >>> def my_block(x, layer, num_heads, mask, eps):
    ...     return block(x, layer, num_heads, mask, eps).numpy()   # a numpy array: the next exercise needs tensors
    >>> yours_or_ours("post-ln-block", my_block, block) is block  # doctest: +ELLIPSIS
    block: the course's version (ch.block), because my_block does not pass its check yet: you returned a numpy array...
    True
    """
    part = name or getattr(ours, "__name__", exercise_id)
    result = _result(exercise_id, yours)
    if result.passed:
        return Guarded(part, yours, ours)
    if result.status == "failed":
        print(f"{part}: the course's version (ch.{getattr(ours, '__name__', part)}), because "
              f"{getattr(yours, '__name__', 'yours')} does not pass its check yet: {result.message}")
    return ours


def describe_parts(parts: dict[str, Callable]) -> str:
    """One line per part: whose function it is (``ch.<name>`` for the package's).

    Examples
    --------
    >>> from attention_course.chapters.encoder.layer_norm import layer_norm
    >>> print(describe_parts({"layer_norm": layer_norm}))
    layer_norm: the course's version (ch.layer_norm), until yours passes its exercise
    """
    lines = []
    for name, fn in parts.items():
        if isinstance(fn, Guarded):
            if fn.replaced:
                lines.append(f"{name}: the course's version (ch.{getattr(fn.ours, '__name__', name)}), in place of yours: {fn.why}")
            else:
                lines.append(f"{name}: yours ({fn.__name__})")
            continue
        module = getattr(fn, "__module__", "") or ""
        if module.startswith("attention_course.chapters."):
            lines.append(f"{name}: the course's version (ch.{getattr(fn, '__name__', name)}), until yours passes its exercise")
        else:
            lines.append(f"{name}: yours ({getattr(fn, '__name__', name)})")
    return "\n".join(lines)
