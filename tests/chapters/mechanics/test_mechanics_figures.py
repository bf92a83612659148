"""Chapter 1's figures read on a phone: at most 5.4 in wide, no text under 10 pt; the evidence page's gap plot.

At the book's 160 dpi a 5.4-in figure is 864 px; a 390-px phone shows it about 358 px wide, so 10-pt text
(22 px in the image) lands at about 9 CSS px, and at more on the narrower figures.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import attention_course as ac  # noqa: E402
from attention_course.chapters import mechanics as ch  # noqa: E402

PHONE_MAX_WIDTH, SMALLEST_PT = 5.4, 10.0


def _small_texts(fig) -> list[str]:
    """Every visible text of ``fig`` (titles, labels, ticks, legends, annotations) smaller than SMALLEST_PT."""
    fig.canvas.draw()  # tick labels exist only once drawn
    texts = [t for t in fig.findobj(matplotlib.text.Text) if t.get_visible() and t.get_text().strip()]
    return [f"{t.get_text()!r}: {t.get_fontsize():.1f} pt" for t in texts if t.get_fontsize() < SMALLEST_PT - 1e-9]


def _lesson_figures():
    """The chapter's figures as its two pages draw them."""
    ex = ac.toy_sentence("the cat sat on the mat", d_model=8, d_k=4, d_v=2, seed=0)
    q, k, v = ex.X @ ex.W_q, ex.X @ ex.W_k, ex.X @ ex.W_v  # (6, 4), (6, 4), (6, 2)
    scores = q @ k.T / 2.0  # (6, 6)
    keys = np.array([[1.2, 0.0], [0.5, 1.0], [-0.8, 0.6], [-0.6, -0.9]])
    values = np.array([[4.0, 1.0], [3.0, 3.0], [0.0, 4.0], [1.0, 0.0]])
    P = ch.sinusoidal_positions(64, 64)
    gaps = ch.torch_agreement()
    return {
        "lookup": lambda: ch.plot_soft_lookup(np.array([1.3, 0.6]), keys, values, ["cat", "dog", "car", "fish"]),
        "qkv": lambda: ac.plot_qkv_diagram(n=6, d=8, d_k=4, d_v=2),
        "weights": lambda: ac.plot_attention(ac.softmax(scores), ex.tokens, title="Attention weights $A$"),
        "hull": lambda: ac.plot_convex_hull(v, ac.softmax(scores) @ v, value_labels=[f"v: {t}" for t in ex.tokens]),
        "masks": lambda: ac.plot_masks({"causal": ac.causal_mask(6), "padding": ac.causal_mask(6) | True},
                                       labels=ex.tokens),
        "sinusoids": lambda: ch.plot_sinusoids(P),
        "similarity": lambda: ch.plot_position_similarity({"a": ch.cosine_similarity(P), "b": ch.cosine_similarity(P)}),
        "dropout": lambda: ch.plot_dropout_outputs(0.3),
        "gaps": lambda: ch.plot_gaps({"the package": gaps, "wrong": {c: 0.5 for c in gaps}}, tolerance=1e-12),
    }


@pytest.mark.parametrize("name", list(_lesson_figures()))
def test_every_chapter_1_figure_reads_on_a_phone(name):
    fig = _lesson_figures()[name]()
    assert fig.get_size_inches()[0] <= PHONE_MAX_WIDTH + 1e-9, f"{name}: {fig.get_size_inches()[0]:.2f} in wide"
    assert _small_texts(fig) == [], name
    plt.close(fig)


def test_the_small_text_check_finds_small_text():
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.set_title("fine", fontsize=11)
    ax.text(0.5, 0.5, "tiny", fontsize=8)
    assert _small_texts(fig) == ["'tiny': 8.0 pt"]
    plt.close(fig)


def test_a_big_heatmap_keeps_small_annotations_and_its_width():
    """Only cells wide enough take 10-pt numbers: a 12 x 12 map (chapter 4) keeps 'small' and 7 in."""
    fig = ac.plot_heatmap(np.zeros((12, 12)))
    assert fig.get_size_inches()[0] == pytest.approx(7.0)
    assert {t.get_fontsize() for t in fig.axes[0].texts} == {matplotlib.font_manager.font_scalings["small"] * 11}
    plt.close(fig)



def test_gaps_plot_every_case_and_reject_mismatched_cases():
    fig = ch.plot_gaps({"ours": {"x": 0.0, "y": 1e-16}, "wrong": {"x": 0.3, "y": 1e-16}}, tolerance=1e-12)
    ax = fig.axes[0]
    xs = np.concatenate([c.get_offsets()[:, 0] for c in ax.collections])
    assert xs.min() > 0 and xs.min() < 1e-16  # the exact 0 is drawn at the floor, left of every real gap
    assert "0: at the left edge" in ax.get_xlabel()
    plt.close(fig)
    with pytest.raises(ValueError, match="every implementation needs the cases"):
        ch.plot_gaps({"ours": {"x": 0.0}, "wrong": {"y": 1.0}}, tolerance=1e-12)
