"""Chapter 3, Low rank, and why efficient attention works: everything the chapter computes, draws and checks.

One module per concept (``approximation_error``, ``attention_distance``, ``baselines``, ``decisions``, ``essay_sentences``, ``focus``, ``head_properties``, ``head_swap``, ``in_function``, ``pages``, ``rank_grid``, ``real_methods``, ``recall``, ``sentence_figures``, ``spectra``, ``sweep_figures``, ``trailing``, ``trained_methods``, ``two_models``, ``verdict_measures``, ``vision``, ``vision_figures``, ``vision_locality``, ``benchmarks``, ``figures``, ``sliders``, ``exercises``); their public names are
re-exported here, flat, so the notebook imports one thing:
``from attention_course.chapters import lowrank as ch``. Generated: after changing a module's
``__all__``, regenerate it (see attention_course/README.md).
"""

from .approximation_error import (
    approximation_errors,
    chunked_gaps,
    lowrank_beats_baselines,
    write_structure_sweep,
)
from .attention_distance import neighbourhood
from .baselines import (
    SENTENCES,
    uniform_error,
    centred_rank_k_error,
    rank_vs_topk,
    sink_share,
    HEAD_BINS,
    classify_heads,
    loglog_slope,
)
from .decisions import (
    lowrank_bins,
    entropy_auc,
    decide_low_rank_real,
    trailing_passes,
    decide_trailing,
    near_shares,
    decide_patches,
    combine_halves,
)
from .essay_sentences import load_sentences
from .focus import focus_verdict, claim_verdict, verdicts_over_k
from . import head_properties  # noqa: F401
from . import head_swap  # noqa: F401
from .in_function import load
from .pages import EVIDENCE_EXERCISES
from . import rank_grid  # noqa: F401
from . import real_methods  # noqa: F401
from .recall import recall_accuracy, breaking_n
from .sentence_figures import plot_focus
from .spectra import (
    effective_rank,
    effective_rank_from_singular_values,
    stable_rank,
    stable_rank_from_singular_values,
    best_rank_k,
    rank_k_error,
    topk_error,
    synthetic_attention,
    exp_rank_demo,
)
from .sweep_figures import (
    plot_lowrank_bins,
    plot_growth,
    plot_trailing_sweep,
    plot_trained_gap,
    plot_near_sweep,
)
from . import trailing  # noqa: F401
from .trained_methods import LINEAR, load_trained_runs, trained_points, decide_trained
from .two_models import load_two_models
from .verdict_measures import load_verdicts
from .vision import accuracy
from .vision_figures import plot_neighbourhood_mass
from .vision_locality import PIXEL_DATA, MOST, summarise_vision, load_vision
from .benchmarks import summarise, crossover_n, load_benchmarks
from .figures import (
    plot_attention_matrices,
    plot_method_errors,
    plot_recall,
    METHOD_COLORS,
    method_color,
    plot_scaling,
    plot_memory,
    plot_rank_grid,
    plot_real_methods,
)
from .sliders import (
    efficient_structure_explorer,
    load_structure_sweep,
    lowrank_explorer,
    soft_logits_explorer,
    rank_grid_explorer,
)
from .exercises import EXERCISES

__all__ = [
    "approximation_errors",
    "chunked_gaps",
    "lowrank_beats_baselines",
    "write_structure_sweep",
    "neighbourhood",
    "SENTENCES",
    "uniform_error",
    "centred_rank_k_error",
    "rank_vs_topk",
    "sink_share",
    "HEAD_BINS",
    "classify_heads",
    "loglog_slope",
    "lowrank_bins",
    "entropy_auc",
    "decide_low_rank_real",
    "trailing_passes",
    "decide_trailing",
    "near_shares",
    "decide_patches",
    "combine_halves",
    "load_sentences",
    "focus_verdict",
    "claim_verdict",
    "verdicts_over_k",
    "load",
    "EVIDENCE_EXERCISES",
    "recall_accuracy",
    "breaking_n",
    "plot_focus",
    "effective_rank",
    "effective_rank_from_singular_values",
    "stable_rank",
    "stable_rank_from_singular_values",
    "best_rank_k",
    "rank_k_error",
    "topk_error",
    "synthetic_attention",
    "exp_rank_demo",
    "plot_lowrank_bins",
    "plot_growth",
    "plot_trailing_sweep",
    "plot_trained_gap",
    "plot_near_sweep",
    "LINEAR",
    "load_trained_runs",
    "trained_points",
    "decide_trained",
    "load_two_models",
    "load_verdicts",
    "accuracy",
    "plot_neighbourhood_mass",
    "PIXEL_DATA",
    "MOST",
    "summarise_vision",
    "load_vision",
    "summarise",
    "crossover_n",
    "load_benchmarks",
    "plot_attention_matrices",
    "plot_method_errors",
    "plot_recall",
    "METHOD_COLORS",
    "method_color",
    "plot_scaling",
    "plot_memory",
    "plot_rank_grid",
    "plot_real_methods",
    "efficient_structure_explorer",
    "load_structure_sweep",
    "lowrank_explorer",
    "soft_logits_explorer",
    "rank_grid_explorer",
    "EXERCISES",
]
