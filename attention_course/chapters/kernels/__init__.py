"""Chapter 2, Attention as kernel smoothing: everything the chapter computes, draws and checks.

One module per concept (``attention_kernel``, ``gauge_study``, ``input_locality``, ``kernel_family``, ``learning``, ``metric_comparison``, ``pages``, ``qk_kernel``, ``self_weight``, ``smoothing``, ``figures``, ``sliders``, ``exercises``); their public names are
re-exported here, flat, so the notebook imports one thing:
``from attention_course.chapters import kernels as ch``. Generated: after changing a module's
``__all__``, regenerate it (see attention_course/README.md).
"""

from .attention_kernel import locality_over_draws
from .gauge_study import gauge_texts, load_qk_gauge
from .input_locality import minilm_hidden_attention, input_locality_by_head
from .kernel_family import write_family_sweep, load_family_sweep
from .learning import fit_bandwidth, fit_bandwidths, good_range_limit, learned_width_flip, fit_metric
from .metric_comparison import (
    tuned_isotropic_sigma,
    fit_dot_attention,
    dot_attention_predict,
    coordinate_weights,
    load_metric_run,
)
from .pages import EVIDENCE_EXERCISES
from .qk_kernel import (
    dot_product_factors,
    gauge_sweep,
    additive_scores,
    key_sphere_spread,
    query_blind_share,
    diagonal_regauge,
)
from .self_weight import write_self_weight_sweep
from .smoothing import (
    sine_data,
    sparse_sine_data,
    nadaraya_watson,
    gaussian_nw_as_attention,
    nw_attention_gaps,
    mse,
    mse_by_bandwidth,
    mse_by_bandwidth_over_seeds,
)
from .figures import (
    plot_local_average,
    plot_bandwidth_over_draws,
    plot_bandwidth_fits,
    plot_bandwidth_objectives,
    plot_learned_metric,
    plot_weights_on_keys,
    plot_locality,
    plot_input_locality,
    plot_gauge_identity,
)
from .sliders import (
    learned_width_explorer,
    load_self_weight_sweep,
    bandwidth_explorer,
    without_verdict_link,
    key_norm_explorer,
    kernel_family_explorer,
)
from .exercises import EXERCISES

__all__ = [
    "locality_over_draws",
    "gauge_texts",
    "load_qk_gauge",
    "minilm_hidden_attention",
    "input_locality_by_head",
    "write_family_sweep",
    "load_family_sweep",
    "fit_bandwidth",
    "fit_bandwidths",
    "good_range_limit",
    "learned_width_flip",
    "fit_metric",
    "tuned_isotropic_sigma",
    "fit_dot_attention",
    "dot_attention_predict",
    "coordinate_weights",
    "load_metric_run",
    "EVIDENCE_EXERCISES",
    "dot_product_factors",
    "gauge_sweep",
    "additive_scores",
    "key_sphere_spread",
    "query_blind_share",
    "diagonal_regauge",
    "write_self_weight_sweep",
    "sine_data",
    "sparse_sine_data",
    "nadaraya_watson",
    "gaussian_nw_as_attention",
    "nw_attention_gaps",
    "mse",
    "mse_by_bandwidth",
    "mse_by_bandwidth_over_seeds",
    "plot_local_average",
    "plot_bandwidth_over_draws",
    "plot_bandwidth_fits",
    "plot_bandwidth_objectives",
    "plot_learned_metric",
    "plot_weights_on_keys",
    "plot_locality",
    "plot_input_locality",
    "plot_gauge_identity",
    "learned_width_explorer",
    "load_self_weight_sweep",
    "bandwidth_explorer",
    "without_verdict_link",
    "key_norm_explorer",
    "kernel_family_explorer",
    "EXERCISES",
]
