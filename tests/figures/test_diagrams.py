"""figures/diagrams.py: the chapter-1 Q/K/V diagram and the chapter-4 induction circuit render on Agg."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from attention_course.figures import diagrams as D
from attention_course.figures.style import MAX_WIDTH, role_color


def _boxes(fig):
    return [p for p in fig.axes[0].patches if isinstance(p, Rectangle)]


@pytest.mark.parametrize("n, d, d_k, d_v", [(6, 8, 4, 2), (3, 5, 2, 3), (10, 4, 4, 4)])
def test_qkv_boxes_are_drawn_to_scale(n, d, d_k, d_v):
    fig = D.plot_qkv_diagram(n=n, d=d, d_k=d_k, d_v=d_v)
    fig.canvas.draw()
    shapes = sorted((b.get_height(), b.get_width()) for b in _boxes(fig))  # (rows, cols) of each matrix
    expected = sorted([(n, d), (n, d_k), (n, d_k), (n, d_v), (n, n), (n, n), (n, d_v)])  # X Q K V S A O
    assert shapes == expected
    assert fig.get_size_inches()[0] <= MAX_WIDTH
    texts = {t.get_text() for t in fig.axes[0].texts}
    assert {"$O = AV$", r"$S = QK^\top/\sqrt{d_k}$"} <= texts


def test_qkv_rejects_empty_sizes():
    with pytest.raises(ValueError, match="d_k=0"):
        D.plot_qkv_diagram(d_k=0)


def test_induction_circuit_schematic_alone():
    fig = D.plot_induction_circuit()
    assert isinstance(fig, Figure) and len(fig.axes) == 1 and fig.get_size_inches()[0] <= MAX_WIDTH
    fig.canvas.draw()


def test_induction_circuit_marks_the_two_arcs_on_the_weights():
    T, p = 12, 5
    prev, ind = np.eye(T, k=-1), np.eye(T, k=-(p - 1))
    fig = D.plot_induction_circuit(prev, 0.5 * ind, period=p, heads=(3, 0))
    fig.canvas.draw()
    ax_prev, ax_ind = fig.axes[1], fig.axes[2]
    assert ax_prev.get_title() == "layer 1, head 4: previous token"
    assert ax_prev.title.get_color() == role_color("previous token")
    ring_prev, ring_ind = ax_prev.lines[-1], ax_ind.lines[-1]  # (key, query) of the circled cells
    assert (ring_prev.get_xdata()[0], ring_prev.get_ydata()[0]) == (0, 1)
    assert (ring_ind.get_xdata()[0], ring_ind.get_ydata()[0]) == (1, p)
    assert ax_ind.images[0].get_clim() == (0.0, 1.0)  # one scale: the larger of the two maxima


def test_induction_circuit_rejects_bad_input():
    with pytest.raises(ValueError, match=r"\(4, 4\) and induction_weights \(4, 5\)"):
        D.plot_induction_circuit(np.eye(4), np.ones((4, 5)))
    with pytest.raises(ValueError, match="period 4 must be"):
        D.plot_induction_circuit(np.eye(4), np.eye(4), period=4)
