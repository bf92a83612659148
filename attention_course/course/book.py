"""``glue`` and ``value_of``: hand a measured number to the book's prose, in the book and in JupyterLab.

The prose writes ``{eval}`value_of("name:.2f")```: the book renders it from the stored value,
JupyterLab from the cell's ``user_expressions`` (or by asking the kernel). :func:`glue` uses
myst-nb when it is installed and otherwise only checks its arguments.
"""

from __future__ import annotations

from ast import literal_eval
from typing import Any

try:  # the book build and `make test` have it; Colab and plain Jupyter need not
    from myst_nb import glue as _myst_glue
except ImportError:  # pragma: no cover - exercised in tests by monkeypatching
    _myst_glue = None

__all__ = ["glue", "value_of", "format_value", "Shown"]

_PLAIN = (bool, int, float, str)

#: What this kernel has glued so far: name -> value (read by :func:`glued`).
_GLUED: dict[str, Any] = {}


def glue(name: str, value: Any, display: bool = False) -> None:
    """Store ``value`` under ``name`` for the book's ``{eval}`value_of("name")``` roles.

    ``value`` must be a plain Python number or string, not a numpy or torch scalar (the book
    formats the stored text). The value is also kept for :func:`glued`.

    Examples
    --------
    >>> glue("answer", 0.25)
    >>> value_of("answer:.1f")
    0.2
    >>> import numpy as np
    >>> glue("answer", np.float64(0.25))
    Traceback (most recent call last):
    ...
    TypeError: glue('answer', ...) got numpy.float64; glue a plain Python value, e.g. float(x)
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"glue name {name!r} must be an identifier (letters, digits, _)")
    # type(), not isinstance: np.float64 subclasses float, and its repr is np.float64(...)
    if type(value) not in _PLAIN and not hasattr(value, "savefig"):  # a matplotlib Figure may be glued too
        kind = f"{type(value).__module__}.{type(value).__name__}"
        raise TypeError(f"glue({name!r}, ...) got {kind}; glue a plain Python value, e.g. float(x)")
    if type(value) in _PLAIN:
        _GLUED[name] = value
    if _myst_glue is not None:
        _myst_glue(name, value, display=display)


class Shown(str):
    """Text that a notebook displays without quotes (its ``repr`` is the text itself).

    Examples
    --------
    >>> Shown("0.25")
    0.25
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return str(self)


def _split(spec: str) -> tuple[str, str]:
    """``"name:.2f"`` -> ``("name", ".2f")``; the format is what follows the last colon."""
    name, sep, fmt = spec.rpartition(":")
    return (name, fmt) if sep else (spec, "")


def format_value(text: str, fmt: str = "") -> str:
    """Format a glued value's stored ``text/plain`` as ``{glue:text}`name:fmt``` does.

    myst-nb's rule (``format_plain_text``), repeated so that the package needs no Sphinx.

    Parameters
    ----------
    text : str
        The value's ``repr``, as a notebook stores it (``"0.2513"``, ``"'MiniLM'"``).
    fmt : str
        A format spec ending in its type character (``".2f"``, ``".0e"``, ``"d"``), or ``""``.

    Examples
    --------
    >>> format_value("0.25134", ".2f"), format_value("1e-12", ".0e"), format_value("'L6'")
    ('0.25', '1e-12', 'L6')
    >>> format_value("12", "d"), format_value("0.5", ".0%")
    ('12', '50%')
    """
    try:
        value = literal_eval(text)
    except (SyntaxError, ValueError):
        value = text
    if fmt == "":
        return str(value)
    kind = fmt[-1]
    if kind == "s":
        value = str(value)
    elif kind in "bcdoxX":
        value = int(value)
    elif kind in "eEfFgGn%":
        value = float(value)
    return format(value, fmt)


def value_of(spec: str) -> Shown:
    """The number a chapter glued, formatted for its prose: ``value_of("name:.2f")``.

    Parameters
    ----------
    spec : str
        ``"name"`` or ``"name:fmt"``, as in myst-nb's ``{glue:text}`` role.

    Returns
    -------
    Shown
        The formatted text (displayed without quotes).

    Raises
    ------
    KeyError
        When nothing has been glued under ``name`` in this kernel yet, with what to do.

    Examples
    --------
    >>> glue("ratio_demo", 0.123456)
    >>> value_of("ratio_demo:.3f"), value_of("ratio_demo")
    (0.123, 0.123456)
    >>> value_of("not_run_yet:.2f")
    Traceback (most recent call last):
    ...
    KeyError: "nothing is glued under 'not_run_yet' yet: run the code cells above this one first"
    """
    name, fmt = _split(spec)
    if name not in _GLUED:
        raise KeyError(f"nothing is glued under {name!r} yet: run the code cells above this one first")
    return Shown(format_value(repr(_GLUED[name]), fmt))
