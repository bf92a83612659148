"""Chapter 3, Low rank, and why efficient attention works: everything the chapter computes, draws and checks.

One module per concept (``approximation_error``, ``attention_distance``, ``baselines``, ``essay_sentences``, ``focus``, ``head_properties``, ``head_swap``, ``in_function``, ``pages``, ``rank_grid``, ``real_methods``, ``recall``, ``sentence_figures``, ``spectra``, ``trailing``, ``verdict_measures``, ``vision``, ``vision_figures``, ``vision_locality``, ``benchmarks``, ``figures``, ``sliders``, ``exercises``); their public names are
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
    loglog_slope,
)
from .essay_sentences import load_sentences
from .focus import top_key_mass
from .head_properties import auc, best_threshold
from . import head_swap  # noqa: F401
from .in_function import load
from .pages import EVIDENCE_EXERCISES
from . import rank_grid  # noqa: F401
from . import real_methods  # noqa: F401
from .recall import recall_accuracy, breaking_n
from .sentence_figures import plot_trailing_costs, plot_focus
from .spectra import (
    singular_values,
    effective_rank,
    effective_rank_from_singular_values,
    stable_rank,
    stable_rank_from_singular_values,
    best_rank_k,
    rank_k_error,
    topk_error,
    synthetic_attention,
    temperature_sweep,
    crossover_beta,
    exp_rank_demo,
)
from . import trailing  # noqa: F401
from .verdict_measures import load_verdicts
from .vision import load_digit_split, ViTConfig, TinyViT, train_vit, accuracy
from .vision_figures import plot_patch_attention, plot_neighbourhood_mass
from .vision_locality import ALPHA, MOST, measure_heads, summarise_vision, load_vision
from .benchmarks import summarise, crossover_n, load_benchmarks
from .figures import (
    plot_temperature_sweep,
    plot_attention_matrices,
    plot_spectra,
    plot_exp_rank,
    plot_method_errors,
    plot_rank_vs_length,
    plot_recall,
    METHOD_COLORS,
    method_color,
    plot_method_schematic,
    plot_scaling,
    plot_memory,
    plot_rank_grid,
    plot_real_methods,
    plot_head_properties,
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
    "loglog_slope",
    "load_sentences",
    "top_key_mass",
    "auc",
    "best_threshold",
    "load",
    "EVIDENCE_EXERCISES",
    "recall_accuracy",
    "breaking_n",
    "plot_trailing_costs",
    "plot_focus",
    "singular_values",
    "effective_rank",
    "effective_rank_from_singular_values",
    "stable_rank",
    "stable_rank_from_singular_values",
    "best_rank_k",
    "rank_k_error",
    "topk_error",
    "synthetic_attention",
    "temperature_sweep",
    "crossover_beta",
    "exp_rank_demo",
    "load_verdicts",
    "load_digit_split",
    "ViTConfig",
    "TinyViT",
    "train_vit",
    "accuracy",
    "plot_patch_attention",
    "plot_neighbourhood_mass",
    "ALPHA",
    "MOST",
    "measure_heads",
    "summarise_vision",
    "load_vision",
    "summarise",
    "crossover_n",
    "load_benchmarks",
    "plot_temperature_sweep",
    "plot_attention_matrices",
    "plot_spectra",
    "plot_exp_rank",
    "plot_method_errors",
    "plot_rank_vs_length",
    "plot_recall",
    "METHOD_COLORS",
    "method_color",
    "plot_method_schematic",
    "plot_scaling",
    "plot_memory",
    "plot_rank_grid",
    "plot_real_methods",
    "plot_head_properties",
    "efficient_structure_explorer",
    "load_structure_sweep",
    "lowrank_explorer",
    "soft_logits_explorer",
    "rank_grid_explorer",
    "EXERCISES",
]
