"""attention_course: the companion package of "Attention Is Learned Association".

Each module holds one concept; the names below are the public API.
"""

from ._backend import ShapeError
from .attention import causal_mask, padding_mask, scaled_dot_product_attention, softmax
from .data import ToySentence, toy_sentence
from .exercises import check, evaluate
from .geometry import convex_hull, in_convex_hull
from .plotting import plot_attention, plot_convex_hull, plot_heatmap, plot_masks

__version__ = "0.1.0"

__all__ = [
    "ShapeError",
    "softmax",
    "scaled_dot_product_attention",
    "causal_mask",
    "padding_mask",
    "ToySentence",
    "toy_sentence",
    "check",
    "evaluate",
    "plot_attention",
    "plot_heatmap",
    "plot_masks",
    "plot_convex_hull",
    "convex_hull",
    "in_convex_hull",
]
