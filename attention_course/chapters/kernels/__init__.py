"""Chapter 2, Attention as kernel smoothing: everything the chapter computes, draws and checks.

One module per concept (``attention_kernel``, ``input_locality``, ``learning``, ``metric_comparison``, ``qk_kernel``, ``smoothing``, ``runs``, ``figures``, ``sliders``, ``exercises``); their public names are
re-exported here, flat, so the notebook imports one thing:
``from attention_course.chapters import kernels as ch``. Generated: after changing a module's
``__all__``, regenerate it (see attention_course/README.md).
"""

from .attention_kernel import (
    kernel_asymmetry,
    eigenvalue_ratio,
    own_key_top_rate,
    rank_correlation,
    locality_over_draws,
)
from .input_locality import (
    input_distances,
    input_locality,
    minilm_hidden_attention,
    input_locality_by_head,
)
from .learning import (
    BandwidthFit,
    fit_bandwidth,
    good_range_limit,
    learned_width_flip,
    MetricFit,
    fit_metric,
    metric_over_draws,
)
from .metric_comparison import (
    SIGMA_GRID,
    METRIC_RUN_DATA,
    tuned_isotropic_sigma,
    DotAttentionFit,
    fit_dot_attention,
    dot_attention_predict,
    coordinate_weights,
    compare_learned_kernels,
    load_metric_run,
)
from .qk_kernel import key_norm_ratio, qk_locality
from .smoothing import (
    KERNELS,
    RegressionData,
    sine_data,
    sparse_sine_data,
    log_kernel,
    kernel_matrix,
    nadaraya_watson,
    gaussian_nw_as_attention,
    nw_attention_gaps,
    mse,
    mse_by_bandwidth,
    mse_by_bandwidth_over_seeds,
)
from .runs import LEARNED_WIDTH_DATA, ALPHAS, W_GRID, self_weight_sweep, write_self_weight_sweep
from .figures import (
    KERNEL_COLORS,
    plot_kernels_and_fits,
    plot_bandwidth_fits,
    plot_attention_row_as_kernel,
    plot_bandwidth_objectives,
    plot_learned_metric,
    plot_weights_on_keys,
    plot_locality,
    plot_input_locality,
)
from .sliders import (
    learned_width_explorer,
    load_self_weight_sweep,
    bandwidth_explorer,
    key_norm_explorer,
)
from .exercises import EXERCISES

__all__ = [
    "kernel_asymmetry",
    "eigenvalue_ratio",
    "own_key_top_rate",
    "rank_correlation",
    "locality_over_draws",
    "input_distances",
    "input_locality",
    "minilm_hidden_attention",
    "input_locality_by_head",
    "BandwidthFit",
    "fit_bandwidth",
    "good_range_limit",
    "learned_width_flip",
    "MetricFit",
    "fit_metric",
    "metric_over_draws",
    "SIGMA_GRID",
    "METRIC_RUN_DATA",
    "tuned_isotropic_sigma",
    "DotAttentionFit",
    "fit_dot_attention",
    "dot_attention_predict",
    "coordinate_weights",
    "compare_learned_kernels",
    "load_metric_run",
    "key_norm_ratio",
    "qk_locality",
    "KERNELS",
    "RegressionData",
    "sine_data",
    "sparse_sine_data",
    "log_kernel",
    "kernel_matrix",
    "nadaraya_watson",
    "gaussian_nw_as_attention",
    "nw_attention_gaps",
    "mse",
    "mse_by_bandwidth",
    "mse_by_bandwidth_over_seeds",
    "LEARNED_WIDTH_DATA",
    "ALPHAS",
    "W_GRID",
    "self_weight_sweep",
    "write_self_weight_sweep",
    "KERNEL_COLORS",
    "plot_kernels_and_fits",
    "plot_bandwidth_fits",
    "plot_attention_row_as_kernel",
    "plot_bandwidth_objectives",
    "plot_learned_metric",
    "plot_weights_on_keys",
    "plot_locality",
    "plot_input_locality",
    "learned_width_explorer",
    "load_self_weight_sweep",
    "bandwidth_explorer",
    "key_norm_explorer",
    "EXERCISES",
]
