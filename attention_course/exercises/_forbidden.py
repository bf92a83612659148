"""Which functions a learner's answer uses: how a check enforces "write it yourself, not with X".

Two ways: by its code (:func:`names_used`: the global names the function and its own helpers
load, resolved to objects) and by a call spy while it runs (:func:`spy`: each forbidden function
wrapped wherever a module of the package or of ``torch.nn`` exposes it). Neither raises; the spy
restores what it replaced.
"""

from __future__ import annotations

import contextlib
import dis
import sys
import types
from typing import Any, Callable, Iterable, Iterator

__all__ = ["names_used", "uses_any", "spy"]

_SPIED_MODULES = ("attention_course", "torch.nn")  # where forbidden functions are looked up by name
_MAX_DEPTH = 4  # helper functions followed this many calls deep


def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _global_names(code: types.CodeType) -> set[str]:
    """The names a code object (and the functions nested in it) loads as globals."""
    names = set()
    for c in _code_objects(code):
        for ins in dis.get_instructions(c):
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and isinstance(ins.argval, str):
                names.add(ins.argval)
    return names


def names_used(fn: Any, depth: int = _MAX_DEPTH) -> list[Any]:
    """The objects ``fn``'s code refers to by global name or closure, and those of its own helpers.

    Helpers (the learner's own functions) are followed up to ``depth`` calls deep.

    Examples
    --------
    >>> import math
    >>> def mine(z):
    ...     return math.erf(z) + 1
    >>> math in names_used(mine)
    True
    """
    seen: set[int] = set()
    found: list[Any] = []

    def visit(f: Any, left: int) -> None:
        f = getattr(f, "__func__", f)  # a bound method: its function
        code = getattr(f, "__code__", None)
        if not isinstance(code, types.CodeType) or id(f) in seen:
            return
        seen.add(id(f))
        scope = getattr(f, "__globals__", {}) or {}
        builtins = scope.get("__builtins__", {})
        builtins = vars(builtins) if isinstance(builtins, types.ModuleType) else builtins
        objects = [scope[n] if n in scope else builtins.get(n) for n in _global_names(code)]
        objects += list(getattr(f, "__defaults__", None) or ())  # def f(x, act=F.gelu)
        objects += list((getattr(f, "__kwdefaults__", None) or {}).values())
        for cell in getattr(f, "__closure__", None) or ():
            try:
                objects.append(cell.cell_contents)
            except ValueError:  # an empty cell
                pass
        for obj in objects:
            if obj is None:
                continue
            found.append(obj)
            if left > 0 and _learners_own(obj):
                visit(obj, left - 1)

    try:
        visit(fn, depth)
    except Exception:  # noqa: BLE001 - looking at the code is a nicety, never a reason to fail
        pass
    return found


def _learners_own(obj: Any) -> bool:
    module = getattr(obj, "__module__", None) or ""
    return isinstance(obj, (types.FunctionType, types.MethodType)) and not module.startswith(
        ("attention_course", "torch", "numpy", "math", "functools"))


def uses_any(fn: Any, targets: Iterable[Any]) -> bool:
    """True when ``fn``'s code (or its own helpers') names one of ``targets``.

    Examples
    --------
    >>> import math
    >>> uses_any(lambda z: math.erf(z), [math.erf]), uses_any(lambda z: z, [math.erf])
    (False, False)
    >>> from math import erf
    >>> uses_any(lambda z: erf(z), [erf])
    True
    """
    targets = list(targets)
    return any(any(obj is t for t in targets) for obj in names_used(fn))


def _exposures(target: Any) -> list[tuple[Any, str]]:
    """Every (module, name) in the spied modules under which ``target`` is reachable."""
    places = []
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith(_SPIED_MODULES):
            continue
        for attr, value in list(vars(module).items()):
            if value is target:
                places.append((module, attr))
    return places


def _recording(method: Callable, owner: Any, called: list) -> Callable:
    def forward(self, *args, **kwargs):
        if owner not in called:
            called.append(owner)
        return method(self, *args, **kwargs)
    return forward


@contextlib.contextmanager
def spy(targets: Iterable[Callable]) -> Iterator[list]:
    """Record calls to ``targets`` made while the block runs; yields the list of targets called.

    A function is replaced wherever a spied module exposes it; a class (an ``nn.Module``) has its
    ``forward`` replaced on the class itself.

    Examples
    --------
    >>> import attention_course.exercises._forbidden as me
    >>> with spy([me.uses_any]) as called:
    ...     _ = me.uses_any(len, [])
    >>> called == [me.uses_any]
    True
    """
    called: list = []
    patched: list[tuple[Any, str, Any]] = []

    def wrapper_for(target: Callable) -> Callable:
        def wrapper(*args, **kwargs):
            if target not in called:
                called.append(target)
            return target(*args, **kwargs)
        return wrapper

    try:
        for target in targets:
            if isinstance(target, type):  # a class (nn.GELU, nn.TransformerEncoderLayer): spy on its forward
                forward = vars(target).get("forward")
                if callable(forward):
                    patched.append((target, "forward", forward))
                    setattr(target, "forward", _recording(forward, target, called))
                continue
            wrapper = wrapper_for(target)
            for module, attr in _exposures(target):
                patched.append((module, attr, target))
                setattr(module, attr, wrapper)
        yield called
    finally:
        for module, attr, target in reversed(patched):
            setattr(module, attr, target)
