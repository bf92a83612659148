"""Chapter 8, Build it: everything the chapter computes, draws and checks.

One module per concept (``assemble``, ``block``, ``causal``, ``embeddings``, ``fallback``, ``feed_forward``, ``layer_norm``, ``pooling``, ``random_weights``, ``recheck``, ``reproduce``, ``search``, ``self_attention``, ``figures``, ``exercises``); their public names are
re-exported here, flat, so the notebook imports one thing:
``from attention_course.chapters import encoder as ch``. Generated: after changing a module's
``__all__``, regenerate it (see attention_course/README.md).
"""

from .assemble import encode
from .block import block, stream_size
from .causal import CausalConfig, CausalLM, dependence, causal_leaks, describe_leaks
from .embeddings import embeddings
from .fallback import solved, yours_or_ours, describe_parts
from .feed_forward import gelu, gelu_gap, GELU_GAP, GELU_GAP_AT, feed_forward
from .layer_norm import layer_norm
from . import pooling  # noqa: F401
from .random_weights import random_layer
from .recheck import rank_shares
from .reproduce import (
    UNIT_ROUNDOFF_FLOAT32,
    layer_bounds,
    layer_gaps,
    first_departure,
    transformers_hidden_states,
)
from .search import search_sentences, embed, reference_embeddings, rank, similarities
from .self_attention import self_attention
from .figures import (
    plot_encoder_plan,
    plot_gelus,
    plot_stream_size,
    plot_layer_gaps,
    plot_search,
    plot_dependence,
    plot_rank_shares,
)
from .exercises import EXERCISES, ENCODER_ATOL, MINILM_MAX_ABS

__all__ = [
    "encode",
    "block",
    "stream_size",
    "CausalConfig",
    "CausalLM",
    "dependence",
    "causal_leaks",
    "describe_leaks",
    "embeddings",
    "solved",
    "yours_or_ours",
    "describe_parts",
    "gelu",
    "gelu_gap",
    "GELU_GAP",
    "GELU_GAP_AT",
    "feed_forward",
    "layer_norm",
    "random_layer",
    "rank_shares",
    "UNIT_ROUNDOFF_FLOAT32",
    "layer_bounds",
    "layer_gaps",
    "first_departure",
    "transformers_hidden_states",
    "search_sentences",
    "embed",
    "reference_embeddings",
    "rank",
    "similarities",
    "self_attention",
    "plot_encoder_plan",
    "plot_gelus",
    "plot_stream_size",
    "plot_layer_gaps",
    "plot_search",
    "plot_dependence",
    "plot_rank_shares",
    "EXERCISES",
    "ENCODER_ATOL",
    "MINILM_MAX_ABS",
]
