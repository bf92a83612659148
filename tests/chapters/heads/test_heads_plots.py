"""chapters/heads/figures.py: every chapter-4 figure renders on Agg, returns its Figure and draws what it is given."""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest
from matplotlib.figure import Figure

from attention_course.chapters.heads import figures as FH
from attention_course.chapters.heads.roles import ROLES


def test_plots_render_and_return_figures():
    assert matplotlib.get_backend().lower() == "agg"
    figs = [
        FH.plot_bottleneck([1, 2, 4], {"dense": [0.3, 0.2, 0.0], "perm": [1.0, 0.1, 0.01]}, title="t"),
        FH.plot_form_spectra(np.linspace(3, 1, 16), np.ones((4, 4)), title="t"),
        FH.plot_head_gallery({"a": (np.eye(3), ["x", "y", "z"]), "b": (np.eye(3), None)}, ncols=3),
        FH.plot_role_scores({r: np.zeros((2, 3)) for r in ROLES}),
    ]
    for fig in figs:
        assert isinstance(fig, Figure)
        fig.canvas.draw()
    assert figs[0].axes[0].get_yscale() == "log"
    assert figs[2].axes[0].get_xlabel() == "key (attended to)"
    assert len(figs[3].axes) == len(ROLES) + 1  # one heatmap per role + a shared colour bar


def test_head_gallery_and_role_scores_fit_the_column():
    panels = {f"p{i}": (np.eye(17), [f"t{j}" for j in range(17)]) for i in range(6)}
    for ncols in (2, 3):
        fig = FH.plot_head_gallery(panels, ncols=ncols, panel_size=4.8)
        assert fig.get_size_inches()[0] <= 7.0
        ticks = fig.axes[0].get_yticklabels()
        assert ticks and min(t.get_fontsize() for t in ticks) >= 9  # legible in the column
    fig = FH.plot_role_scores({r: np.zeros((6, 12)) for r in ROLES})
    assert fig.get_size_inches()[0] <= 7.0


def test_role_panels_take_the_role_colour():
    from attention_course.figures.style import role_color

    fig = FH.plot_role_scores({r: np.zeros((2, 3)) for r in ROLES})
    for ax, role in zip(fig.axes, ROLES):
        assert ax.title.get_color() == role_color(role)
    colors = [role_color(r) for r in ROLES[:2]]
    fig = FH.plot_head_gallery({"a": (np.eye(2), None), "b": (np.eye(2), None)}, title_colors=colors)
    assert [ax.title.get_color() for ax in fig.axes[:2]] == colors
    with pytest.raises(ValueError, match="1 colours for 2 panels"):
        FH.plot_head_gallery({"a": (np.eye(2), None), "b": (np.eye(2), None)}, title_colors=colors[:1])


def test_long_panel_titles_wrap_inside_their_panel():
    name = "softmax of the 12 heads' summed scores, a long title"
    fig = FH.plot_head_gallery({name: (np.eye(3), None), "b": (np.eye(3), None)}, ncols=2)
    title = fig.axes[0].get_title()
    assert "\n" in title and title.replace("\n", " ") == name


def test_multihead_path_draws_every_box_to_scale_in_its_heads_colours():
    import matplotlib.colors as mcolors
    from matplotlib.patches import Rectangle

    T, d, h = 4, 6, 3
    fig = FH.plot_multihead_path(T=T, d=d, h=h)
    fig.canvas.draw()
    ax = fig.axes[0]
    assert fig.get_size_inches()[0] <= 7.0
    filled = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_fill() and p.get_alpha() == 0.55
              and p.get_height() == T]  # the coloured blocks of the boxes (not the colour key)
    widths = sorted({(p.get_width(), mcolors.to_hex(p.get_facecolor())) for p in filled})
    heads = {mcolors.to_hex(c) for c in FH.HEAD_COLORS[:h]}
    # a head's block is d_k = 2 wide in Q and in the concatenation, its cards d_k or T wide; X and the output d
    assert {w for w, c in widths if c in heads} == {d // h, T}
    assert {c for w, c in widths if w == d} == {"#bbbbbb"}
    texts = [t.get_text() for t in ax.texts]
    assert texts.count("(B, T, d)") == 4 and "(B, h, T, d_k)" in texts and "(B, h, T, T)" in texts
    assert [f"head {i + 1}" for i in range(h)] == [t for t in texts if t.startswith("head ")]


@pytest.mark.parametrize("kwargs, message", [({"d": 6, "h": 4}, "not a multiple of h = 4"),
                                             ({"d": 14, "h": 7}, "at most 6 heads"),
                                             ({"T": 0}, "sizes must be positive")])
def test_multihead_path_rejects_what_it_cannot_draw(kwargs, message):
    with pytest.raises(ValueError, match=message):
        FH.plot_multihead_path(**kwargs)


def test_head_gallery_tick_size_sets_the_token_labels():
    toks = ["a", "b", "c"]
    fig = FH.plot_head_gallery({"x": (np.eye(3), toks), "y": (np.eye(3), toks)}, ncols=2, panel_size=2.5, tick_size=10)
    assert {t.get_fontsize() for t in fig.axes[0].get_yticklabels()} == {10.0}
    assert fig.get_size_inches()[0] <= 6.2  # narrow: its 10-pt tokens stay legible on a 390-px phone


def test_relation_gains_frames_carriers_and_writes_head_numbers_upright():
    gains = np.array([[[2.0, -1.9], [-0.7, 2.1], [0.1, 0.3]]])  # (1 run, 3 heads, 2 relations)
    fig = FH.plot_relation_gains(gains, ["previous", "three back"], [""], threshold=1.0)
    fig.canvas.draw()
    heatmaps = [ax for ax in fig.axes if ax.get_xlabel() == "head"]
    assert len(heatmaps) == 2
    for ax in heatmaps:
        assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "3"]
        assert {t.get_rotation() for t in ax.get_xticklabels()} == {0.0}
        assert list(ax.get_yticks()) == []  # a single unlabelled row has no tick
    framed = [[(p.get_x() + 0.5) for p in ax.patches if not p.get_fill()] for ax in heatmaps]
    assert framed == [[0.0], [1.0]]  # head 1 carries the first relation, head 2 the second
