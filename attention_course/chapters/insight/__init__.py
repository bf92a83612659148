"""Chapter 7, The insight: everything the chapter computes, draws and checks.

One module per concept (``ablations``, ``ingredients``, ``memory``, ``mixers``, ``position_content``, ``recall_tasks``, ``runs``, ``figures``, ``sliders``, ``exercises``); their public names are
re-exported here, flat, so the notebook imports one thing:
``from attention_course.chapters import insight as ch``. Generated: after changing a module's
``__all__``, regenerate it (see attention_course/README.md).
"""

from .ablations import (
    RecallTask,
    TASKS,
    accuracy,
    train_variant,
    tune_and_train,
    TEST_SEED,
    VALID_SEED,
)
from .ingredients import (
    Score,
    accuracy_table,
    window_curve,
    covered_share,
    first_within,
    ROWS,
    decide_data_dependent,
    decide_all_pairs,
    decide_differentiable,
    decide_asymmetric,
    decide_metric,
    decide_linear,
    decide_memory,
)
from .memory import (
    MEMORIES,
    store_patterns,
    corrupt,
    retrieve,
    retrieval_accuracy,
    capacity,
    capacity_sweep,
    outer_product_law,
    exponential_law,
)
from .mixers import Variant, MixerModel, sparsemax, mixing_mask
from .position_content import (
    CATEGORIES,
    ContentPositionScores,
    content_position_scores,
    word_maps,
    follow_scores,
    best_offset_share,
    classify_heads,
    count_categories,
    rule_maps,
    rule_scores,
)
from .recall_tasks import BLANK, N_VALUES, stacked_mqar, previous_token, gaps
from .runs import GRID, MEMORY_FILE, ABLATION_FILE, load_memory, load_ablations, run_job
from .figures import (
    KIND_COLORS,
    plot_head_kinds,
    plot_verdicts,
    plot_memory,
    plot_ingredients,
)
from .sliders import window_explorer, task_explorer, TASK_SLIDERS, WINDOW_MARGIN
from .exercises import EXERCISES

__all__ = [
    "RecallTask",
    "TASKS",
    "accuracy",
    "train_variant",
    "tune_and_train",
    "TEST_SEED",
    "VALID_SEED",
    "Score",
    "accuracy_table",
    "window_curve",
    "covered_share",
    "first_within",
    "ROWS",
    "decide_data_dependent",
    "decide_all_pairs",
    "decide_differentiable",
    "decide_asymmetric",
    "decide_metric",
    "decide_linear",
    "decide_memory",
    "MEMORIES",
    "store_patterns",
    "corrupt",
    "retrieve",
    "retrieval_accuracy",
    "capacity",
    "capacity_sweep",
    "outer_product_law",
    "exponential_law",
    "Variant",
    "MixerModel",
    "sparsemax",
    "mixing_mask",
    "CATEGORIES",
    "ContentPositionScores",
    "content_position_scores",
    "word_maps",
    "follow_scores",
    "best_offset_share",
    "classify_heads",
    "count_categories",
    "rule_maps",
    "rule_scores",
    "BLANK",
    "N_VALUES",
    "stacked_mqar",
    "previous_token",
    "gaps",
    "GRID",
    "MEMORY_FILE",
    "ABLATION_FILE",
    "load_memory",
    "load_ablations",
    "run_job",
    "KIND_COLORS",
    "plot_head_kinds",
    "plot_verdicts",
    "plot_memory",
    "plot_ingredients",
    "window_explorer",
    "task_explorer",
    "TASK_SLIDERS",
    "WINDOW_MARGIN",
    "EXERCISES",
]
