"""Chapter 9's figures render on Agg, fit the column and label what they show."""

from __future__ import annotations

from attention_course.chapters.decoder import plot_causal_graph, plot_decoder_gaps, plot_rope
from attention_course.chapters.gpt import cache_bytes, plot_cache_memory, plot_shakespeare, stored_shakespeare
from attention_course.figures.style import MAX_WIDTH
from attention_course.models.smollm2 import DecoderConfig


def _fits(fig):
    assert fig.get_size_inches()[0] <= MAX_WIDTH
    return fig


def test_figures_render():
    _fits(plot_rope())
    _fits(plot_causal_graph(5))
    fig = _fits(plot_decoder_gaps([0.0, 1e-6, 2e-6], [1e-6, 1e-5, 2e-5], "ours"))
    assert fig.axes[0].get_yscale() == "log"
    _fits(plot_cache_memory(DecoderConfig()))
    fig = _fits(plot_shakespeare(stored_shakespeare()))
    assert any("bigram" in t.get_text() for t in fig.axes[0].get_legend().get_texts())


def test_cache_bytes_is_the_course_formula():
    cfg = DecoderConfig()
    assert cache_bytes(cfg, 2048) == 2 * 30 * 3 * 64 * 2048 * 4 == 94_371_840
    assert cache_bytes(cfg, 2048, kv_heads=9) == 3 * cache_bytes(cfg, 2048)
