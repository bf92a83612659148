"""Chapter 9, Build a GPT: everything the chapter computes, draws and checks.

One module per concept (``block``, ``fallback``, ``grouped_attention``, ``model``, ``random_weights``, ``reproduce``, ``rms_norm``, ``rope``, ``swiglu``, ``tokenizer``, ``figures``, ``exercises``); their public names are
re-exported here, flat, so the notebook imports one thing:
``from attention_course.chapters import decoder as ch``. Generated: after changing a module's
``__all__``, regenerate it (see attention_course/README.md).
"""

from .block import attention, decoder_block
from .fallback import solved, yours_or_ours, describe_parts
from .grouped_attention import grouped_query_attention
from .model import empty_cache, forward, hidden_states, output_logits
from .random_weights import random_layer, random_decoder
from .reproduce import (
    UNIT_ROUNDOFF_FLOAT32,
    PROMPTS,
    decoder_estimates,
    logit_estimate,
    transformers_model,
    stored_reference,
    transformers_outputs,
    greedy_with_gaps,
)
from .rms_norm import rms_norm
from .rope import apply_rope, permute_for_llama_cpp, unpermute_from_llama_cpp
from .swiglu import silu, swiglu
from .tokenizer import encode, decode
from .figures import plot_decoder_plan, plot_rope, plot_causal_graph, plot_decoder_gaps
from .exercises import EXERCISES, TWO_GROUPS

__all__ = [
    "attention",
    "decoder_block",
    "solved",
    "yours_or_ours",
    "describe_parts",
    "grouped_query_attention",
    "empty_cache",
    "forward",
    "hidden_states",
    "output_logits",
    "random_layer",
    "random_decoder",
    "UNIT_ROUNDOFF_FLOAT32",
    "PROMPTS",
    "decoder_estimates",
    "logit_estimate",
    "transformers_model",
    "stored_reference",
    "transformers_outputs",
    "greedy_with_gaps",
    "rms_norm",
    "apply_rope",
    "permute_for_llama_cpp",
    "unpermute_from_llama_cpp",
    "silu",
    "swiglu",
    "encode",
    "decode",
    "plot_decoder_plan",
    "plot_rope",
    "plot_causal_graph",
    "plot_decoder_gaps",
    "EXERCISES",
    "TWO_GROUPS",
]
