"""Chapter 5, Self-attention as message passing: everything the chapter computes, draws and checks.

One module per concept (``collapse``, ``composition``, ``depth_probe``, ``depth_study``, ``gnn``, ``head_budget``, ``hop_sweep``, ``pages``, ``propagation``, ``rollout``, ``slider_data``, ``topology``, ``topology_rule``, ``topology_rule_table``, ``topology_rules``, ``figures``, ``sliders``, ``exercises``); their public names are
re-exported here, flat, so the notebook imports one thing:
``from attention_course.chapters import graphs as ch``. Generated: after changing a module's
``__all__``, regenerate it (see attention_course/README.md).
"""

from .collapse import (
    init_stack_params,
    rank_one_residual,
    rank_collapse_curves,
    shrink_factor,
    rank_one_parts,
    rank_one_part_curves,
)
from .composition import (
    STORED_RUN,
    HELD_OUT_SEED,
    accuracy,
    run_one,
    summarise,
    accuracy_table,
    layers_needed,
    live_run,
    load_runs,
)
from .depth_probe import labelled_sequences, stack_probe_curves
from .depth_study import (
    load_depth_probe,
    depth_rows,
    depth_curves,
    depth_labels,
    depth_verdict,
    margin_sweep,
)
from .gnn import ranking_comparison, shared_top_fraction
from .head_budget import (
    LONG_GRID_RUN,
    LONG_GRID,
    FOLLOW_UP_RUN,
    SECOND_FOLLOW_UP_RUN,
    converged,
    grid_table,
    grid_decision,
    follow_up_decision,
    load_grid,
)
from .hop_sweep import sweep_table, sweep_decision, decision_by_threshold, load_sweep
from .pages import EVIDENCE_EXERCISES
from .propagation import (
    banded_mask,
    example_topologies,
    message_passing,
    message_passing_gap,
    receptive_field,
    dependency_support,
    band_width,
    banded_stack_reach,
)
from .rollout import attention_rollout
from .slider_data import write_probe_data, write_top_key_data
from .topology import shuffled_sentences
from .topology_rule import RULES, fit_fixed_rule, rule_miss, held_out_shuffles
from .topology_rule_table import bin_shares, bin_sweep, topology_verdict, static_verdict
from .topology_rules import write_rule_miss, load_rules, load_matched
from .figures import (
    plot_attention_graph,
    plot_maps_log,
    plot_rank_collapse,
    plot_rank_one_parts,
    plot_head_grid,
    plot_probe_curves,
    plot_relative_depth_probe,
    plot_depth_fades,
    plot_margin_sweep,
    plot_composition,
    plot_head_budget,
    plot_training_curves,
    plot_hop_sweep,
    plot_hop_threshold,
    plot_head_bins,
)
from .sliders import (
    rule_mass_explorer,
    hops_explorer,
    probe_depth_explorer,
    top_key_explorer,
    minilm_head_explorer,
)
from .exercises import EXERCISES

__all__ = [
    "init_stack_params",
    "rank_one_residual",
    "rank_collapse_curves",
    "shrink_factor",
    "rank_one_parts",
    "rank_one_part_curves",
    "STORED_RUN",
    "HELD_OUT_SEED",
    "accuracy",
    "run_one",
    "summarise",
    "accuracy_table",
    "layers_needed",
    "live_run",
    "load_runs",
    "labelled_sequences",
    "stack_probe_curves",
    "load_depth_probe",
    "depth_rows",
    "depth_curves",
    "depth_labels",
    "depth_verdict",
    "margin_sweep",
    "ranking_comparison",
    "shared_top_fraction",
    "LONG_GRID_RUN",
    "LONG_GRID",
    "FOLLOW_UP_RUN",
    "SECOND_FOLLOW_UP_RUN",
    "converged",
    "grid_table",
    "grid_decision",
    "follow_up_decision",
    "load_grid",
    "sweep_table",
    "sweep_decision",
    "decision_by_threshold",
    "load_sweep",
    "EVIDENCE_EXERCISES",
    "banded_mask",
    "example_topologies",
    "message_passing",
    "message_passing_gap",
    "receptive_field",
    "dependency_support",
    "band_width",
    "banded_stack_reach",
    "attention_rollout",
    "write_probe_data",
    "write_top_key_data",
    "shuffled_sentences",
    "RULES",
    "fit_fixed_rule",
    "rule_miss",
    "held_out_shuffles",
    "bin_shares",
    "bin_sweep",
    "topology_verdict",
    "static_verdict",
    "write_rule_miss",
    "load_rules",
    "load_matched",
    "plot_attention_graph",
    "plot_maps_log",
    "plot_rank_collapse",
    "plot_rank_one_parts",
    "plot_head_grid",
    "plot_probe_curves",
    "plot_relative_depth_probe",
    "plot_depth_fades",
    "plot_margin_sweep",
    "plot_composition",
    "plot_head_budget",
    "plot_training_curves",
    "plot_hop_sweep",
    "plot_hop_threshold",
    "plot_head_bins",
    "rule_mass_explorer",
    "hops_explorer",
    "probe_depth_explorer",
    "top_key_explorer",
    "minilm_head_explorer",
    "EXERCISES",
]
