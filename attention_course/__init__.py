"""attention_course: the companion package of "Attention Is Learned Association".

One module per concept; the names below are the public API. Importing the
package does not import ``transformers`` (only :func:`load_minilm` does).

=================  =======================================================
module             concept
=================  =======================================================
``attention``      softmax, scaled dot-product attention, masks (chapter 1)
``kernels``        Nadaraya-Watson kernel smoothing (chapter 2)
``lowrank``        spectra, effective rank, low-rank vs sparse (chapter 3)
``lowrank_plots``  figures for low rank vs sparsity (chapter 3)
``efficient``      efficient attention, chunked exact attention (chapter 3)
``benchmarks``     ``python -m attention_course.experiments.benchmarks`` (chapter 3)
``multihead``      multi-head attention and head analysis (chapter 4)
``heads``          low-rank bottleneck, heads vs the SVD, head roles (chapter 4)
``graphs``         attention as message passing on a masked graph (chapter 5)
``rollout``        attention rollout and flow across layers (chapter 5)
``gnn``            GCN, GAT and GATv2 for comparison (chapter 5)
``depth``          stacks of attention layers and rank collapse (chapter 5)
``graph_plots``    drawings of attention graphs (chapter 5)
``scaling``        the 1/sqrt(d_k) scale (chapter 6)
``claims``         the claims ledger: verdicts and evidence (chapter 7)
``verdicts``       the chapters' verdict boxes and glued numbers vs the ledger
``insight``        one head through the four lenses (chapter 7)
``progress``       ``python -m attention_course progress``: your exercises
``encoder``        our BERT encoder on our own attention
``pretrained``     the real all-MiniLM-L6-v2, loaded offline
``models``         a tiny attention model trained in seconds
``data``           seeded toy data and synthetic tasks
``exercises``      the exercise checker, ``check(id, fn)``
``plotting``       figures (each helper returns its Figure)
=================  =======================================================
"""

from .core._backend import ShapeError
from .core.attention import causal_mask, padding_mask, scaled_dot_product_attention, softmax
from .models.tasks import (
    TASKS,
    ToySentence,
    associative_recall,
    copy_sequences,
    make_task,
    repeated_sequences,
    toy_sentence,
)
from .models.encoder import BertWeights, EncoderOutput, bert_encode
from .core.efficient import (
    chunked_attention,
    linear_attention,
    linformer_attention,
    local_window_attention,
    nystrom_attention,
    online_softmax_step,
    performer_attention,
    topk_attention,
)
from .course.exercises import check, evaluate
from .lenses.depth import attention_stack, rank_collapse, rank_one_residual
from .lenses.geometry import convex_hull, in_convex_hull
from .lenses.gnn import gat_layer, gatv2_layer, gcn_layer, ranking_comparison
from .figures.graphs import plot_attention_graph, plot_rank_collapse, plot_receptive_field_growth
from .lenses.graphs import banded_mask, dependency_support, message_passing, receptive_field, topology_mask
from .lenses.heads import (
    fit_low_rank_attention,
    head_role_scores,
    mha_parameter_count,
    plot_bottleneck,
    plot_head_gallery,
    plot_role_scores,
    smallest_head_angles,
)
from .lenses.kernels import (
    KERNELS,
    fit_bandwidth,
    fit_metric,
    gaussian_nw_as_attention,
    kernel_matrix,
    nadaraya_watson,
    sine_data,
    sparse_sine_data,
)
from .lenses.lowrank import (
    best_rank_k,
    effective_rank,
    energy_rank,
    rank_k_error,
    singular_values,
    stable_rank,
    synthetic_attention,
    temperature_sweep,
    topk_error,
)
from .figures.lowrank import (
    plot_cumulative_spectra,
    plot_exp_rank,
    plot_head_ranks,
    plot_lowrank_vs_sparse,
    plot_method_errors,
)
from .models.tiny import (
    ModelConfig,
    TinyTransformer,
    TrainingRun,
    evaluate_loss,
    head_ablation,
    head_scores,
    qk_logits,
    train,
    train_run,
)
from .core.multihead import (
    MultiHeadAttention,
    from_torch,
    head_bilinear_forms,
    head_contributions,
    head_subspace_angles,
    mask_from_torch,
    merge_heads,
    multi_head_attention,
    principal_angles,
    split_heads,
)
from .figures.mechanics import plot_attention, plot_convex_hull, plot_heatmap, plot_masks
from .models.pretrained import MiniLMNotFoundError, attention_maps, load_minilm, minilm_weights
from .lenses.rollout import attention_flow, attention_rollout
from .lenses.scaling import (
    absorb_scale,
    compare_scales,
    dot_product_variance,
    qk_norm_scores,
    resolve_scale,
    saturation_stats,
    softmax_entropy,
    softmax_jacobian,
    softmax_jacobian_norm,
    variance_vs_dim,
)

__version__ = "0.1.0"

__all__ = [
    # attention
    "ShapeError", "softmax", "scaled_dot_product_attention", "causal_mask", "padding_mask",
    # kernels
    "KERNELS", "nadaraya_watson", "kernel_matrix", "gaussian_nw_as_attention",
    "fit_bandwidth", "fit_metric", "sine_data", "sparse_sine_data",
    # low rank and efficient attention
    "singular_values", "effective_rank", "stable_rank", "energy_rank", "best_rank_k",
    "rank_k_error", "topk_error", "synthetic_attention", "temperature_sweep",
    "chunked_attention", "online_softmax_step", "linear_attention", "performer_attention",
    "linformer_attention", "nystrom_attention", "local_window_attention", "topk_attention",
    "plot_exp_rank", "plot_cumulative_spectra", "plot_head_ranks", "plot_lowrank_vs_sparse",
    "plot_method_errors",
    # multi-head
    "split_heads", "merge_heads", "multi_head_attention", "MultiHeadAttention", "from_torch",
    "mask_from_torch", "head_bilinear_forms", "principal_angles", "head_subspace_angles",
    "head_contributions", "fit_low_rank_attention", "smallest_head_angles", "head_role_scores",
    "mha_parameter_count", "plot_bottleneck", "plot_head_gallery", "plot_role_scores",
    # message passing
    "topology_mask", "banded_mask", "message_passing", "receptive_field", "dependency_support",
    "attention_rollout", "attention_flow", "gcn_layer", "gat_layer", "gatv2_layer",
    "ranking_comparison", "attention_stack", "rank_one_residual", "rank_collapse",
    "plot_attention_graph", "plot_receptive_field_growth", "plot_rank_collapse",
    # scaling
    "resolve_scale", "dot_product_variance", "variance_vs_dim", "softmax_entropy",
    "softmax_jacobian", "softmax_jacobian_norm", "saturation_stats", "qk_norm_scores",
    "absorb_scale", "compare_scales",
    # models and data
    "BertWeights", "EncoderOutput", "bert_encode", "MiniLMNotFoundError", "load_minilm",
    "minilm_weights", "attention_maps", "ModelConfig", "TinyTransformer", "train",
    "train_run", "TrainingRun", "qk_logits",
    "evaluate_loss", "head_ablation", "head_scores", "TASKS", "make_task",
    "repeated_sequences", "associative_recall", "copy_sequences", "ToySentence", "toy_sentence",
    # exercises and figures
    "check", "evaluate", "plot_attention", "plot_heatmap", "plot_masks", "plot_convex_hull",
    "convex_hull", "in_convex_hull",
]
