"""Chapter 6, Why 1/sqrt(d_k) matters: everything the chapter computes, draws and checks.

One module per concept (``anisotropy``, ``backward_swap``, ``correlated_scores``, ``init_spread``, ``init_vs_step``, ``measures``, ``pages``, ``saturated_rows``, ``saturation_training``, ``sensitive_regime``, ``training``, ``training_grid``, ``figures``, ``sliders``, ``exercises``); their public names are
re-exported here, flat, so the notebook imports one thing:
``from attention_course.chapters import scaling as ch``. Generated: after changing a module's
``__all__``, regenerate it (see attention_course/README.md).
"""

from .anisotropy import PAIR_SETS, variance_ratio_controls, within_row_spread
from .backward_swap import STORED_BACKWARD_ROWS, load_backward, combine_backward
from .correlated_scores import CORRELATIONS, correlated_dot_variance, independence_rejected, correlation_grid
from .init_spread import init_spread, spread_slopes, band_exponents
from .init_vs_step import train_variant, load_causes
from .measures import (
    variance_vs_dim,
    softmax_entropy,
    softmax_jacobian,
    softmax_jacobian_norm,
    saturation_stats,
    pair_logit_variance,
)
from .pages import EVIDENCE_EXERCISES
from .saturated_rows import scale_pair, saturated_share, swapped_softmax
from .saturation_training import STORED_SWEEP, checkpoints, init_row_ratio, matched_loss_ratio, load_saturation
from .sensitive_regime import (
    jacobian_floor,
    jacobian_vs_spread,
    half_maximum_band,
    passed_gradient,
    gradient_vs_spread,
    largest_rows_in_band,
    flow_ratio,
    typical_row_verdict,
    query_gradient_norms,
    saturation_width,
)
from .training import compare_scales, load_comparisons
from .training_grid import TASK, HELD_OUT_SEED
from .figures import (
    plot_typical_row,
    plot_score_histograms,
    plot_gradient_vs_spread,
    plot_training_watch,
    plot_score_variance,
    plot_minilm_scores,
    plot_saturation,
    plot_jacobian,
    plot_full_comparison,
    plot_scale_pair,
    plot_saturation_training,
    plot_backward_swap,
    plot_init_spread,
)
from .sliders import (
    correlation_explorer,
    scale_explorer,
    width_explorer,
    KEY_COUNTS,
    keys_explorer,
    start_scale_runs,
    start_scale_explorer,
)
from .exercises import EXERCISES

__all__ = [
    "PAIR_SETS",
    "variance_ratio_controls",
    "within_row_spread",
    "STORED_BACKWARD_ROWS",
    "load_backward",
    "combine_backward",
    "CORRELATIONS",
    "correlated_dot_variance",
    "independence_rejected",
    "correlation_grid",
    "init_spread",
    "spread_slopes",
    "band_exponents",
    "train_variant",
    "load_causes",
    "variance_vs_dim",
    "softmax_entropy",
    "softmax_jacobian",
    "softmax_jacobian_norm",
    "saturation_stats",
    "pair_logit_variance",
    "EVIDENCE_EXERCISES",
    "scale_pair",
    "saturated_share",
    "swapped_softmax",
    "STORED_SWEEP",
    "checkpoints",
    "init_row_ratio",
    "matched_loss_ratio",
    "load_saturation",
    "jacobian_floor",
    "jacobian_vs_spread",
    "half_maximum_band",
    "passed_gradient",
    "gradient_vs_spread",
    "largest_rows_in_band",
    "flow_ratio",
    "typical_row_verdict",
    "query_gradient_norms",
    "saturation_width",
    "compare_scales",
    "load_comparisons",
    "TASK",
    "HELD_OUT_SEED",
    "plot_typical_row",
    "plot_score_histograms",
    "plot_gradient_vs_spread",
    "plot_training_watch",
    "plot_score_variance",
    "plot_minilm_scores",
    "plot_saturation",
    "plot_jacobian",
    "plot_full_comparison",
    "plot_scale_pair",
    "plot_saturation_training",
    "plot_backward_swap",
    "plot_init_spread",
    "correlation_explorer",
    "scale_explorer",
    "width_explorer",
    "KEY_COUNTS",
    "keys_explorer",
    "start_scale_runs",
    "start_scale_explorer",
    "EXERCISES",
]
