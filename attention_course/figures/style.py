"""The book's figure style: one column, one type size, one colour per thing.

Figures are at most :data:`MAX_WIDTH` inches wide at :data:`DPI` (the smallest label reads at
about 13 CSS px). :func:`book_figure` wraps a plotting function; :func:`setup_notebook` styles
a notebook's own figures.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Optional

import matplotlib as mpl
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch

__all__ = ["MAX_WIDTH", "DPI", "RC", "METHOD_COLORS", "METHOD_ALIASES", "ROLE_COLORS", "MASK_CMAP", "book_style",
           "book_figure", "check_width", "method_color", "role_color", "new_axes", "mask_legend",
           "setup_notebook"]

#: The widest figure (inches) that fits the 688-px column without shrinking text below legibility.
MAX_WIDTH = 7.0
#: Rendering resolution: a 7-in figure is 1120 px, shown at ~61% in the column (sharp on HiDPI too).
DPI = 160
#: Base fonts of 11 pt (ticks and legends 10 pt): 15 and 13 CSS px in the column.
RC: dict = {
    "figure.dpi": DPI, "savefig.dpi": DPI,
    "font.size": 11, "axes.titlesize": 11.5, "axes.labelsize": 11,
    "xtick.labelsize": 10, "ytick.labelsize": 10, "legend.fontsize": 10,
    "legend.frameon": False, "axes.spines.top": False, "axes.spines.right": False,
    "image.cmap": "viridis",
}

# Okabe & Ito's colour-blind-safe palette, two of Paul Tol's (wine, teal), then greys.
_OI = {"black": "#000000", "orange": "#E69F00", "sky": "#56B4E9", "green": "#009E73",
       "yellow": "#C9B800", "blue": "#0072B2", "vermilion": "#D55E00", "purple": "#CC79A7",
       "wine": "#882255", "teal": "#44AA99", "grey": "#777777", "light": "#BBBBBB", "dark": "#444444"}

#: One colour per attention method, all different (configurations of a family share it:
#: ``performer-64``). Other names for the same method are in :data:`METHOD_ALIASES`.
METHOD_COLORS: dict = {
    "sdpa": _OI["black"], "naive": _OI["dark"], "chunked": _OI["light"],  # exact
    "linear": _OI["purple"], "performer": _OI["green"], "nystrom": _OI["vermilion"],
    "linformer": _OI["blue"], "linformer-pool": _OI["sky"],
    "svd": _OI["wine"], "top-k": _OI["orange"], "local": _OI["yellow"], "uniform": _OI["grey"],
}
#: Names the chapters also use for a method in :data:`METHOD_COLORS`.
METHOD_ALIASES: dict = {"exact": "sdpa", "low-rank": "svd", "sparse": "top-k", "window": "local"}

#: One colour per head role (:data:`attention_course.chapters.heads.roles.ROLES`).
ROLE_COLORS: dict = {
    "previous token": _OI["blue"], "next token": _OI["sky"], "[CLS]": _OI["vermilion"],
    "[SEP]": _OI["orange"], "punctuation": _OI["purple"], "broad": _OI["green"], "induction": _OI["wine"],
    "other": _OI["light"],
}

#: Two colours for a boolean mask (False, True): shown with :func:`mask_legend`, not a colour bar.
MASK_CMAP = ListedColormap(["#F2F2F2", _OI["blue"]], name="mask")


def _lookup(table: Mapping[str, str], name: str, what: str, aliases: Mapping[str, str] = {}) -> str:
    name = aliases.get(name, name)
    if name in table:
        return table[name]
    family = name.rpartition("-")[0] if name and name[-1].isdigit() else name
    family = aliases.get(family, family)
    if family in table:
        return table[family]
    raise ValueError(f"{what} {name!r} has no colour; expected one of {sorted(table)} "
                     f"or one of them followed by -<int>")


def method_color(name: str) -> str:
    """The colour of an attention method or family: ``"nystrom-128"`` -> ``METHOD_COLORS["nystrom"]``.

    Examples
    --------
    >>> method_color("linformer-pool-256") == METHOD_COLORS["linformer-pool"]
    True
    >>> method_color("low-rank-16") == method_color("svd")
    True
    >>> method_color("flash")
    Traceback (most recent call last):
    ...
    ValueError: method 'flash' has no colour; expected one of [...] or one of them followed by -<int>
    """
    return _lookup(METHOD_COLORS, name, "method", METHOD_ALIASES)


def role_color(role: str) -> str:
    """The colour of a head role (``"previous token"``, ``"[CLS]"``, ...).

    Examples
    --------
    >>> role_color("[CLS]") == ROLE_COLORS["[CLS]"]
    True
    """
    return _lookup(ROLE_COLORS, role, "head role")


@contextmanager
def book_style() -> Iterator[None]:
    """Apply :data:`RC` inside the block and restore matplotlib's settings after it.

    Examples
    --------
    >>> with book_style():
    ...     fig = plt.figure(figsize=(3, 2))
    >>> fig.dpi == DPI
    True
    >>> plt.close(fig)
    """
    with plt.rc_context(RC):
        yield


def check_width(fig: Figure, name: str = "figure") -> Figure:
    """Return ``fig`` if it fits the column, else raise a ``ValueError`` naming its size.

    Examples
    --------
    >>> fig = plt.figure(figsize=(9, 3))
    >>> check_width(fig, "wide")
    Traceback (most recent call last):
    ...
    ValueError: wide is 9.0 x 3.0 in; the book column takes at most 7.0 in (split it into rows)
    >>> plt.close(fig)
    """
    w, h = fig.get_size_inches()
    if w > MAX_WIDTH + 1e-9:
        raise ValueError(f"{name} is {w:.1f} x {h:.1f} in; the book column takes at most "
                         f"{MAX_WIDTH} in (split it into rows)")
    return fig


def book_figure(func: Callable[..., Figure]) -> Callable[..., Figure]:
    """Decorate a plotting function: draw it in :func:`book_style` and check its width.

    Examples
    --------
    >>> @book_figure
    ... def demo():
    ...     fig, ax = plt.subplots(figsize=(6, 3))
    ...     ax.set_title("demo")
    ...     return fig
    >>> fig = demo()
    >>> fig.dpi == DPI, fig.axes[0].title.get_fontsize() == RC["axes.titlesize"]
    (True, True)
    >>> plt.close(fig)
    """
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with book_style():
            fig = func(*args, **kwargs)
        return check_width(fig, f"{func.__name__}()") if isinstance(fig, Figure) else fig
    return wrapper


def new_axes(ax: Optional[Axes], figsize: tuple[float, float]) -> tuple[Figure, Axes]:
    """``(ax.figure, ax)``, or a new constrained-layout figure of ``figsize`` inches and its one axes.

    Examples
    --------
    >>> fig, ax = new_axes(None, (3, 2))
    >>> new_axes(ax, (9, 9)) == (fig, ax), tuple(fig.get_size_inches().tolist())
    (True, (3.0, 2.0))
    >>> plt.close(fig)
    """
    if ax is None:
        fig, ax = plt.subplots(figsize=figsize, layout="constrained")
        return fig, ax
    return ax.figure, ax


def mask_legend(ax: Axes, labels: Sequence[str] = ("masked", "allowed"), loc: str = "upper right",
                title: Optional[str] = None) -> None:
    """A discrete legend for a boolean mask drawn with :data:`MASK_CMAP` (False, True).

    Examples
    --------
    >>> import numpy as np
    >>> fig, ax = plt.subplots()
    >>> _ = ax.imshow(np.tril(np.ones((4, 4), bool)), cmap=MASK_CMAP, vmin=0, vmax=1)
    >>> mask_legend(ax, ("blocked", "attends"))
    >>> [t.get_text() for t in ax.get_legend().get_texts()]
    ['blocked', 'attends']
    >>> plt.close(fig)
    """
    if len(labels) != 2:
        raise ValueError(f"a mask legend has two labels (False, True); got {len(labels)}: {list(labels)}")
    handles = [Patch(facecolor=MASK_CMAP(i), edgecolor="0.5", label=lab) for i, lab in enumerate(labels)]
    ax.legend(handles=handles, loc=loc, title=title, frameon=True, framealpha=0.9)


def setup_notebook() -> None:
    """Make figures drawn in a notebook match the book: :data:`RC`, PNG output.

    Changes global state, on purpose; plotting functions use :func:`book_figure` instead.
    """
    mpl.rcParams.update(RC)
    try:
        from matplotlib_inline.backend_inline import set_matplotlib_formats
    except ImportError:  # plain Python (no IPython): nothing to configure
        return
    set_matplotlib_formats("png")
