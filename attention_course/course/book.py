"""``glue``: hand a measured number to the book's prose, with or without myst-nb.

The chapters put every number that their prose quotes into the page with myst-nb's
``glue`` (the prose writes ``{glue:text}`name:.2f```). Jupyter Book needs myst-nb, but a
learner running a notebook on Colab or in plain Jupyter does not, and should not install
Sphinx for it. :func:`glue` here calls myst-nb's when it is installed and otherwise only
checks its arguments, so the notebook runs the same everywhere.
"""

from __future__ import annotations

from typing import Any

try:  # the book build and `make test` have it; Colab and plain Jupyter need not
    from myst_nb import glue as _myst_glue
except ImportError:  # pragma: no cover - exercised in tests by monkeypatching
    _myst_glue = None

__all__ = ["glue", "HAVE_MYST_NB"]

HAVE_MYST_NB = _myst_glue is not None

_PLAIN = (bool, int, float, str)


def glue(name: str, value: Any, display: bool = False) -> None:
    """Store ``value`` under ``name`` for the book's ``{glue:text}`` roles.

    ``value`` must be a plain Python number or string (``float(x)``, ``int(x)``), not a numpy
    or torch scalar: the book formats the stored text (``np.float64(0.5)`` cannot take ``:.2f``).
    With myst-nb installed this is :func:`myst_nb.glue`; without it, only the checks run.

    Examples
    --------
    >>> glue("answer", 0.25)
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
    if _myst_glue is not None:
        _myst_glue(name, value, display=display)
