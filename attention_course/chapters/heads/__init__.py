"""Chapter 4, Multi-head attention as subspaces: everything the chapter computes, draws and checks.

One module per concept (``agreement``, ``agreement_figures``, ``agreement_models``, ``bottleneck``, ``circuits``, ``division``, ``head_training``, ``lookups``, ``pages``, ``roles``, ``similarity``, ``subspaces``, ``figures``, ``sliders``, ``exercises``); their public names are
re-exported here, flat, so the notebook imports one thing:
``from attention_course.chapters import heads as ch``. Generated: after changing a module's
``__all__``, regenerate it (see attention_course/README.md).
"""

from .agreement import (
    crossed_sentences,
    load_agreement,
    head_property_bins,
    head_on_set,
    agreement_verdict,
)
from .agreement_figures import (
    plot_agreement,
    plot_agreement_sweep,
    sweep_changes,
    sweep_verdicts,
    MEANING_BARS,
    MEANING_SWEEPS,
)
from .agreement_models import read_set
from .bottleneck import dirichlet_attention, near_permutation, fit_low_rank_attention
from .circuits import (
    subspace_overlap,
    head_overlaps,
    random_overlaps,
    shuffled_head_overlaps,
    matched_random_overlaps,
    head_ov_maps,
    reparametrise_ov,
)
from .division import (
    TwoOffsetTask,
    keep_one_losses,
    single_ablation_rises,
    carried_relations,
    RELATION_NAMES,
)
from .head_training import STORED_RUN, run_one, layer_overlaps, converged, load_runs
from .lookups import hand_built_heads
from .pages import EVIDENCE_EXERCISES
from .roles import (
    ROLES,
    head_role_scores,
    uniform_role_baselines,
    top_heads,
    CAUSAL_ROLES,
    load_decoder_roles,
    DECODER_MODELS,
)
from .similarity import similarity_sentences, load_similarity, relations_verdict, relations_verdict_of
from .subspaces import (
    head_bilinear_forms,
    form_singular_values,
    reparametrise_head,
    principal_angles,
    smallest_head_angles,
    random_subspace_angles,
    head_score_matrices,
    combine_head_patterns,
    total_variation,
)
from .figures import (
    plot_multihead_path,
    plot_bottleneck,
    plot_form_spectra,
    plot_head_gallery,
    plot_role_scores,
    plot_relation_gains,
    plot_sorted_role_scores,
)
from .sliders import (
    clear_job_explorer,
    agreement_explorer,
    stored_head_explorer,
    minilm_head_explorer,
    sentence_maps,
    focus_explorer,
)
from .exercises import EXERCISES

__all__ = [
    "crossed_sentences",
    "load_agreement",
    "head_property_bins",
    "head_on_set",
    "agreement_verdict",
    "plot_agreement",
    "plot_agreement_sweep",
    "sweep_changes",
    "sweep_verdicts",
    "MEANING_BARS",
    "MEANING_SWEEPS",
    "read_set",
    "dirichlet_attention",
    "near_permutation",
    "fit_low_rank_attention",
    "subspace_overlap",
    "head_overlaps",
    "random_overlaps",
    "shuffled_head_overlaps",
    "matched_random_overlaps",
    "head_ov_maps",
    "reparametrise_ov",
    "TwoOffsetTask",
    "keep_one_losses",
    "single_ablation_rises",
    "carried_relations",
    "RELATION_NAMES",
    "STORED_RUN",
    "run_one",
    "layer_overlaps",
    "converged",
    "load_runs",
    "hand_built_heads",
    "EVIDENCE_EXERCISES",
    "ROLES",
    "head_role_scores",
    "uniform_role_baselines",
    "top_heads",
    "CAUSAL_ROLES",
    "load_decoder_roles",
    "DECODER_MODELS",
    "similarity_sentences",
    "load_similarity",
    "relations_verdict",
    "relations_verdict_of",
    "head_bilinear_forms",
    "form_singular_values",
    "reparametrise_head",
    "principal_angles",
    "smallest_head_angles",
    "random_subspace_angles",
    "head_score_matrices",
    "combine_head_patterns",
    "total_variation",
    "plot_multihead_path",
    "plot_bottleneck",
    "plot_form_spectra",
    "plot_head_gallery",
    "plot_role_scores",
    "plot_relation_gains",
    "plot_sorted_role_scores",
    "clear_job_explorer",
    "agreement_explorer",
    "stored_head_explorer",
    "minilm_head_explorer",
    "sentence_maps",
    "focus_explorer",
    "EXERCISES",
]
