"""Chapter 7, The insight: everything the chapter computes, draws and checks.

One module per concept (``ablation_grid``, ``ablations``, ``asymmetry``, ``asymmetry_figures``, ``converged_comparisons``, ``convergence``, ``ingredients``, ``memory``, ``mixers``, ``position_content``, ``recall_tasks``, ``take_away``, ``figures``, ``sliders``, ``exercises``); their public names are
re-exported here, flat, so the notebook imports one thing:
``from attention_course.chapters import insight as ch``. Generated: after changing a module's
``__all__``, regenerate it (see attention_course/README.md).
"""

from .ablation_grid import load_ablations
from .ablations import RecallTask, TASKS, accuracy, train_variant, window_copy_accuracy
from . import asymmetry  # noqa: F401
from .asymmetry_figures import plot_asymmetry
from .converged_comparisons import (
    LONG_RULE,
    PARTNER,
    load_partner,
    load_long,
    merged_linear,
    PAIRS,
    WIDTHS,
    load_metric,
    load_linear,
    linear_table,
    decide_metric_learned,
    decide_softmax_linear,
    ratio_threshold,
    CYCLIC,
    SIGNED,
    load_signed,
    decide_asymmetric_signed,
    weights_clause,
    asymmetry_runs,
    untrained_baseline,
)
from . import convergence  # noqa: F401
from .ingredients import (
    Score,
    accuracy_table,
    window_curve,
    covered_share,
    ROWS,
    decide_data_dependent,
    decide_all_pairs,
    decide_differentiable,
    decide_memory,
)
from .memory import (
    memory_cues,
    capacity,
    recall_shares,
    capacity_sweep,
    outer_product_law,
    exponential_law,
    load_memory,
)
from .mixers import Variant, MixerModel, sparsemax
from .position_content import CATEGORIES, content_position_scores, word_maps, classify_heads, rule_scores
from .recall_tasks import BLANK, stacked_mqar, previous_token, gaps
from .take_away import take_away_table
from .figures import (
    plot_head_kinds,
    plot_verdicts,
    plot_memory,
    plot_ingredients,
    plot_linear_capacity,
    plot_lookup,
    plot_retrieval,
    plot_shuffled_heads,
    plot_margin_sweep,
    plot_take_away,
    copy_attention_maps,
    plot_copy_attention,
)
from .sliders import (
    window_explorer,
    task_explorer,
    metric_explorer,
    pairs_explorer,
    temperature_explorer,
)
from .exercises import EXERCISES

__all__ = [
    "load_ablations",
    "RecallTask",
    "TASKS",
    "accuracy",
    "train_variant",
    "window_copy_accuracy",
    "plot_asymmetry",
    "LONG_RULE",
    "PARTNER",
    "load_partner",
    "load_long",
    "merged_linear",
    "PAIRS",
    "WIDTHS",
    "load_metric",
    "load_linear",
    "linear_table",
    "decide_metric_learned",
    "decide_softmax_linear",
    "ratio_threshold",
    "CYCLIC",
    "SIGNED",
    "load_signed",
    "decide_asymmetric_signed",
    "weights_clause",
    "asymmetry_runs",
    "untrained_baseline",
    "Score",
    "accuracy_table",
    "window_curve",
    "covered_share",
    "ROWS",
    "decide_data_dependent",
    "decide_all_pairs",
    "decide_differentiable",
    "decide_memory",
    "memory_cues",
    "capacity",
    "recall_shares",
    "capacity_sweep",
    "outer_product_law",
    "exponential_law",
    "load_memory",
    "Variant",
    "MixerModel",
    "sparsemax",
    "CATEGORIES",
    "content_position_scores",
    "word_maps",
    "classify_heads",
    "rule_scores",
    "BLANK",
    "stacked_mqar",
    "previous_token",
    "gaps",
    "take_away_table",
    "plot_head_kinds",
    "plot_verdicts",
    "plot_memory",
    "plot_ingredients",
    "plot_linear_capacity",
    "plot_lookup",
    "plot_retrieval",
    "plot_shuffled_heads",
    "plot_margin_sweep",
    "plot_take_away",
    "copy_attention_maps",
    "plot_copy_attention",
    "window_explorer",
    "task_explorer",
    "metric_explorer",
    "pairs_explorer",
    "temperature_explorer",
    "EXERCISES",
]
