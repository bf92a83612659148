"""Chapter 10, A GPT at work: everything the chapter computes, draws and checks.

One module per concept (``bench``, ``fallback``, ``generation``, ``loss``, ``sampling``, ``shakespeare``, ``small_gpt``, ``figures``, ``exercises``); their public names are
re-exported here, flat, so the notebook imports one thing:
``from attention_course.chapters import gpt as ch``. Generated: after changing a module's
``__all__``, regenerate it (see attention_course/README.md).
"""

from .bench import BenchConfig, stored_bench
from .fallback import solved, yours_or_ours, describe_parts
from .generation import (
    forward,
    empty_cache,
    encode,
    decode,
    PROMPTS,
    stored_reference,
    logit_estimate,
    greedy,
    sample_tokens,
)
from .loss import next_token_loss
from .sampling import next_token_probs, sample
from .shakespeare import (
    plain_text,
    corpus,
    CharTask,
    unigram_loss,
    bigram_loss,
    LIVE,
    held_out_loss,
    stored_shakespeare,
)
from .small_gpt import SmallGPT, generate_text
from .figures import cache_bytes, plot_cache_diagram, plot_cache_memory, plot_shakespeare
from .exercises import EXERCISES

__all__ = [
    "BenchConfig",
    "stored_bench",
    "solved",
    "yours_or_ours",
    "describe_parts",
    "forward",
    "empty_cache",
    "encode",
    "decode",
    "PROMPTS",
    "stored_reference",
    "logit_estimate",
    "greedy",
    "sample_tokens",
    "next_token_loss",
    "next_token_probs",
    "sample",
    "plain_text",
    "corpus",
    "CharTask",
    "unigram_loss",
    "bigram_loss",
    "LIVE",
    "held_out_loss",
    "stored_shakespeare",
    "SmallGPT",
    "generate_text",
    "cache_bytes",
    "plot_cache_diagram",
    "plot_cache_memory",
    "plot_shakespeare",
    "EXERCISES",
]
