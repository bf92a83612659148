"""Yours once it passes, the package's until then: how the chapter runs top to bottom with stubs unsolved.

Each step of the chapter uses the steps before it. A later cell asks the checker whether the
reader's function passes its exercise and uses it if so; otherwise it uses the package's
version of the same step. So "Run All" works on the untouched notebook and on a finished one,
and a reader who solves the exercises runs the whole model on their own code.
"""

from __future__ import annotations

from typing import Any, Callable

from ...exercises import evaluate

__all__ = ["solved", "yours_or_ours", "describe_parts"]

_VERDICTS: dict = {}  # (exercise id, function) -> passed?; a function is checked once


def solved(exercise_id: str, fn: Any) -> bool:
    """True when ``fn`` passes exercise ``exercise_id``'s check; never raises.

    The verdict is remembered for this function object, so asking again is free (redefining
    the function makes a new object, which is checked again).

    Examples
    --------
    >>> def my_layer_norm(x, gamma, beta, eps):
    ...     raise NotImplementedError
    >>> solved("layer-norm", my_layer_norm)
    False
    """
    try:
        key = (exercise_id, fn)
        hash(key)
    except TypeError:  # an unhashable callable: check it every time
        return evaluate(exercise_id, fn).passed
    if key not in _VERDICTS:
        _VERDICTS[key] = evaluate(exercise_id, fn).passed
    return _VERDICTS[key]


def yours_or_ours(exercise_id: str, yours: Any, ours: Callable) -> Callable:
    """``yours`` if it passes exercise ``exercise_id``, else the package's ``ours``.

    Examples
    --------
    >>> from attention_course.chapters.encoder.layer_norm import layer_norm
    >>> def my_layer_norm(x, gamma, beta, eps):
    ...     raise NotImplementedError
    >>> yours_or_ours("layer-norm", my_layer_norm, layer_norm) is layer_norm
    True
    """
    return yours if solved(exercise_id, yours) else ours


def describe_parts(parts: dict[str, Callable]) -> str:
    """One line per part: whose function it is (``ch.<name>`` for the package's).

    Examples
    --------
    >>> from attention_course.chapters.encoder.layer_norm import layer_norm
    >>> print(describe_parts({"layer_norm": layer_norm}))
    layer_norm: the package's (ch.layer_norm)
    """
    lines = []
    for name, fn in parts.items():
        module = getattr(fn, "__module__", "") or ""
        if module.startswith("attention_course.chapters."):
            lines.append(f"{name}: the package's (ch.{getattr(fn, '__name__', name)})")
        else:
            lines.append(f"{name}: yours ({getattr(fn, '__name__', name)})")
    return "\n".join(lines)
