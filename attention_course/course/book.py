"""``glue`` and ``value_of``: hand a measured number to the book's prose, in the book and in JupyterLab.

The chapters put every number that their prose quotes into the page with :func:`glue`; the
prose writes ``{eval}`value_of("name:.2f")```. Three readers see that role:

* **The book** (Jupyter Book 1, ``book/_ext/inline_values.py``) renders it as myst-nb's
  ``{glue:text}`name:.2f``` would, from the value the notebook stored when it was executed.
* **JupyterLab** with ``jupyterlab-myst`` renders ``{eval}`` roles from the markdown cell's
  ``user_expressions`` metadata, which ``make execute`` writes from the same stored values
  (:mod:`attention_course.course.expressions`); so a learner who opens a chapter sees the
  numbers before running anything. When the learner runs a markdown cell, the extension asks
  the kernel for ``value_of("name:.2f")`` and gets the number this module formats.
* **Colab and plain Jupyter** show the role as written; the chapters' first cell says so.

Jupyter Book needs myst-nb, but a learner running a notebook on Colab or in plain Jupyter
does not, and should not install Sphinx for it: :func:`glue` calls myst-nb's when it is
installed and otherwise only checks its arguments, so the notebook runs the same everywhere.
"""

from __future__ import annotations

from ast import literal_eval
from typing import Any

try:  # the book build and `make test` have it; Colab and plain Jupyter need not
    from myst_nb import glue as _myst_glue
except ImportError:  # pragma: no cover - exercised in tests by monkeypatching
    _myst_glue = None

__all__ = ["glue", "value_of", "format_value", "Shown", "HAVE_MYST_NB"]

HAVE_MYST_NB = _myst_glue is not None

_PLAIN = (bool, int, float, str)

#: What this kernel has glued so far: name -> value (read by :func:`glued`).
_GLUED: dict[str, Any] = {}


def glue(name: str, value: Any, display: bool = False) -> None:
    """Store ``value`` under ``name`` for the book's ``{eval}`value_of("name")``` roles.

    ``value`` must be a plain Python number or string (``float(x)``, ``int(x)``), not a numpy
    or torch scalar: the book formats the stored text (``np.float64(0.5)`` cannot take ``:.2f``).
    With myst-nb installed this is :func:`myst_nb.glue`; without it, only the checks run.
    Either way the value is kept for :func:`glued`.

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

    This is myst-nb's rule (``myst_nb.core.variables.format_plain_text``), repeated so that
    the package needs no Sphinx: the stored text is read back with ``literal_eval``, turned
    into ``int`` or ``float`` by the format's type character, and formatted.

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

    This is the expression inside the chapters' ``{eval}`` roles. JupyterLab (with
    ``jupyterlab-myst``) evaluates it in the kernel when a learner runs a markdown cell.

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
