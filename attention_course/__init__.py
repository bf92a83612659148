"""attention_course: the companion package of "Attention Is Learned Association".

One module per concept; the names below are the public API. Importing the
package does not import ``transformers`` (only :func:`load_minilm` does).

=================  =======================================================
module             concept
=================  =======================================================
``attention``      softmax, scaled dot-product attention, masks (chapter 1)
``kernels``        Nadaraya-Watson kernel smoothing (chapter 2)
``multihead``      multi-head attention and head analysis (chapter 4)
``scaling``        the 1/sqrt(d_k) scale (chapter 6)
``encoder``        our BERT encoder on our own attention
``pretrained``     the real all-MiniLM-L6-v2, loaded offline
``models``         a tiny attention model trained in seconds
``data``           seeded toy data and synthetic tasks
``exercises``      the exercise checker, ``check(id, fn)``
``plotting``       figures (each helper returns its Figure)
=================  =======================================================
"""

from ._backend import ShapeError
from .attention import causal_mask, padding_mask, scaled_dot_product_attention, softmax
from .data import (
    TASKS,
    ToySentence,
    associative_recall,
    copy_sequences,
    make_task,
    repeated_sequences,
    toy_sentence,
)
from .encoder import BertWeights, EncoderOutput, bert_encode
from .exercises import check, evaluate
from .geometry import convex_hull, in_convex_hull
from .kernels import (
    KERNELS,
    fit_bandwidth,
    fit_metric,
    gaussian_nw_as_attention,
    kernel_matrix,
    nadaraya_watson,
    sine_data,
    sparse_sine_data,
)
from .models import ModelConfig, TinyTransformer, evaluate_loss, head_ablation, head_scores, train
from .multihead import (
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
from .plotting import plot_attention, plot_convex_hull, plot_heatmap, plot_masks
from .pretrained import MiniLMNotFoundError, attention_maps, load_minilm, minilm_weights
from .scaling import (
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
    # multi-head
    "split_heads", "merge_heads", "multi_head_attention", "MultiHeadAttention", "from_torch",
    "mask_from_torch", "head_bilinear_forms", "principal_angles", "head_subspace_angles",
    "head_contributions",
    # scaling
    "resolve_scale", "dot_product_variance", "variance_vs_dim", "softmax_entropy",
    "softmax_jacobian", "softmax_jacobian_norm", "saturation_stats", "qk_norm_scores",
    # models and data
    "BertWeights", "EncoderOutput", "bert_encode", "MiniLMNotFoundError", "load_minilm",
    "minilm_weights", "attention_maps", "ModelConfig", "TinyTransformer", "train",
    "evaluate_loss", "head_ablation", "head_scores", "TASKS", "make_task",
    "repeated_sequences", "associative_recall", "copy_sequences", "ToySentence", "toy_sentence",
    # exercises and figures
    "check", "evaluate", "plot_attention", "plot_heatmap", "plot_masks", "plot_convex_hull",
    "convex_hull", "in_convex_hull",
]
