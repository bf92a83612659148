"""Chapter 1, The mechanics of scaled dot-product attention: everything the chapter computes, draws and checks.

One module per concept (``hull``, ``lookup_figures``, ``positions``, ``properties``, ``figures``, ``sliders``, ``exercises``); their public names are
re-exported here, flat, so the notebook imports one thing:
``from attention_course.chapters import mechanics as ch``. Generated: after changing a module's
``__all__``, regenerate it (see attention_course/README.md).
"""

from . import hull  # noqa: F401
from .lookup_figures import plot_soft_lookup, plot_sinusoids, plot_position_similarity
from .positions import sinusoidal_positions, cosine_similarity
from .properties import (
    effective_keys,
    row_sum_errors,
    naive_attention,
    MISTAKES,
    fraction_in_hull,
    torch_agreement,
    DROPOUT_RATES,
    first_crossing,
    row_entropy,
)
from .figures import plot_heatmap, plot_attention, plot_masks, plot_convex_hull, plot_gaps
from .sliders import (
    dropout_explorer,
    plot_dropout_outputs,
    cross_attention_explorer,
    temperature_explorer,
)
from .exercises import EXERCISES

__all__ = [
    "plot_soft_lookup",
    "plot_sinusoids",
    "plot_position_similarity",
    "sinusoidal_positions",
    "cosine_similarity",
    "effective_keys",
    "row_sum_errors",
    "naive_attention",
    "MISTAKES",
    "fraction_in_hull",
    "torch_agreement",
    "DROPOUT_RATES",
    "first_crossing",
    "row_entropy",
    "plot_heatmap",
    "plot_attention",
    "plot_masks",
    "plot_convex_hull",
    "plot_gaps",
    "dropout_explorer",
    "plot_dropout_outputs",
    "cross_attention_explorer",
    "temperature_explorer",
    "EXERCISES",
]
