"""attention_course: the companion package of "Attention Is Learned Association".

The names below are the public API, flat: ``import attention_course as ac;
ac.softmax(...)``. Behind them the package is laid out the way the book is read, and
imports point one way only::

    core, figures, exercises  <-  models  <-  chapters (in reading order)  <-  course  <-  this module

* ``core``: softmax, scaled dot-product attention, masks, multi-head attention,
  efficient attention (imports nothing else of the package);
* ``figures``: what every chapter's figures share (the style, the slider engine);
* ``exercises``: the checker engine (``check`` never raises);
* ``models``: the tiny transformer and its one training loop, toy tasks, our BERT
  encoder, the pretrained MiniLM, SmolLM2's weights read from a GGUF file, and the one runner
  of the long experiments (``models/experiments.py``: every ``python -m attention_course``
  command but ``progress`` and ``evidence`` is an ``Experiment`` a chapter registers);
* ``chapters/<topic>/``: one folder per chapter (mechanics, kernels, lowrank, heads,
  graphs, scaling, insight, encoder, decoder, gpt), each with its measures and long runs
  (modules named by what they compute, their runs stored as JSON in ``data/``),
  ``figures.py``, ``sliders.py`` and ``exercises.py``; a chapter imports from earlier
  chapters only;
* ``course``: the claims ledger, solutions, glue and inline values, progress.

``attention_course/README.md`` has the full map (layer, module, chapter).
Importing the package does not import ``transformers`` (only :func:`load_minilm` does).
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
    local_window_attention,
    online_softmax_step,
    topk_attention,
)
from .core.approximations import linformer_attention, nystrom_attention, performer_attention
from .exercises import check, evaluate
from .chapters.graphs.collapse import attention_stack, rank_collapse, rank_one_residual
from .chapters.mechanics.hull import convex_hull, in_convex_hull
from .chapters.mechanics.properties import fraction_in_hull, row_sum_errors, torch_agreement
from .chapters.graphs.gnn import ranking_comparison
from .chapters.graphs.figures import plot_attention_graph, plot_rank_collapse
from .chapters.graphs.propagation import (
    banded_mask,
    dependency_support,
    message_passing,
    receptive_field,
    topology_mask,
)
from .chapters.heads.bottleneck import fit_low_rank_attention
from .chapters.heads.subspaces import (
    head_bilinear_forms,
    head_subspace_angles,
    mha_parameter_count,
    principal_angles,
    smallest_head_angles,
)
from .chapters.heads.circuits import head_ov_maps, head_overlaps, subspace_overlap
from .chapters.heads.roles import head_role_scores
from .chapters.heads.figures import plot_bottleneck, plot_head_gallery, plot_role_scores
from .chapters.kernels.learning import fit_bandwidth, fit_metric
from .chapters.kernels.smoothing import (
    KERNELS,
    gaussian_nw_as_attention,
    kernel_matrix,
    nadaraya_watson,
    sine_data,
    sparse_sine_data,
)
from .chapters.lowrank.spectra import (
    best_rank_k,
    effective_rank,
    rank_k_error,
    singular_values,
    stable_rank,
    synthetic_attention,
    topk_error,
)
from .chapters.lowrank.figures import plot_method_errors
from .models.tiny import ModelConfig, TinyTransformer, qk_logits
from .models.training import TrainingRun, evaluate_loss, train, train_run
from .models.probes import head_scores
from .core.multihead import (
    MultiHeadAttention,
    from_torch,
    head_contributions,
    merge_heads,
    multi_head_attention,
    split_heads,
)
from .chapters.mechanics.figures import plot_attention, plot_convex_hull, plot_heatmap, plot_masks
from .figures.diagrams import plot_induction_circuit, plot_qkv_diagram
from .figures.style import setup_notebook
from .course.notebook import setup_chapter
from .course.verdict_boxes import closing_summary
from .models.pretrained import MiniLMNotFoundError, attention_maps, load_minilm, minilm_tokenizer, minilm_weights
from .models.perturb import encoder_maps, scrambled_weights
from .models.queries_keys import bert_queries_keys, minilm_queries_keys
from .models.smollm2 import DecoderConfig, DecoderWeights, load_smollm2, smollm2_tokenizer
from .chapters.graphs.rollout import attention_rollout
from .chapters.scaling.training import compare_scales
from .chapters.scaling.measures import (
    dot_product_variance,
    resolve_scale,
    saturation_stats,
    softmax_entropy,
    softmax_jacobian,
    softmax_jacobian_norm,
    variance_vs_dim,
)
from .chapters.scaling.saturated_rows import saturated_share, scale_pair, swapped_softmax

from . import chapters  # noqa: F401,E402  (every chapter, in reading order: registers every exercise)

__version__ = "0.1.0"

__all__ = [
    # attention
    "ShapeError", "softmax", "scaled_dot_product_attention", "causal_mask", "padding_mask",
    # kernels
    "KERNELS", "nadaraya_watson", "kernel_matrix", "gaussian_nw_as_attention",
    "fit_bandwidth", "fit_metric", "sine_data", "sparse_sine_data",
    # low rank and efficient attention
    "singular_values", "effective_rank", "stable_rank", "best_rank_k",
    "rank_k_error", "topk_error", "synthetic_attention",
    "chunked_attention", "online_softmax_step", "linear_attention", "performer_attention",
    "linformer_attention", "nystrom_attention", "local_window_attention", "topk_attention",
    "plot_method_errors",
    # multi-head
    "split_heads", "merge_heads", "multi_head_attention", "MultiHeadAttention", "from_torch",
    "head_bilinear_forms", "principal_angles", "head_subspace_angles",
    "head_contributions", "fit_low_rank_attention", "smallest_head_angles", "head_role_scores",
    "mha_parameter_count", "plot_bottleneck", "plot_head_gallery", "plot_role_scores",
    "subspace_overlap", "head_overlaps", "head_ov_maps",
    # message passing
    "topology_mask", "banded_mask", "message_passing", "receptive_field", "dependency_support",
    "attention_rollout",
    "ranking_comparison", "attention_stack", "rank_one_residual", "rank_collapse",
    "plot_attention_graph", "plot_rank_collapse",
    # scaling
    "resolve_scale", "dot_product_variance", "variance_vs_dim", "softmax_entropy",
    "softmax_jacobian", "softmax_jacobian_norm", "saturation_stats",
    "compare_scales", "scale_pair", "saturated_share", "swapped_softmax",
    # models and data
    "BertWeights", "EncoderOutput", "bert_encode", "MiniLMNotFoundError", "load_minilm",
    "minilm_tokenizer", "minilm_weights", "attention_maps", "encoder_maps", "scrambled_weights",
    "bert_queries_keys", "minilm_queries_keys", "DecoderConfig", "DecoderWeights", "load_smollm2",
    "smollm2_tokenizer", "ModelConfig", "TinyTransformer", "train",
    "train_run", "TrainingRun", "qk_logits",
    "evaluate_loss", "head_scores", "TASKS", "make_task",
    "repeated_sequences", "associative_recall", "copy_sequences", "ToySentence", "toy_sentence",
    # exercises and figures
    "check", "evaluate", "setup_notebook", "setup_chapter", "closing_summary",
    "plot_attention", "plot_heatmap", "plot_masks", "plot_convex_hull",
    "plot_qkv_diagram", "plot_induction_circuit",
    "convex_hull", "in_convex_hull",
    "row_sum_errors", "fraction_in_hull", "torch_agreement",
]
