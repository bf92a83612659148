"""The flagged sliders of chapter 1 (convex-combination, square-matrix) and their lens.

The numbers come from :mod:`attention_course.chapters.mechanics.properties`; each is checked
against an independent recomputation (a barycentric hull test, softmax by hand).
"""

import numpy as np
import pytest

from attention_course.chapters.mechanics import sliders as fm
from attention_course.chapters.mechanics import properties as lm
from attention_course.chapters.mechanics.properties import fraction_in_hull
from attention_course.models.tasks import toy_sentence


@pytest.fixture(scope="module")
def dropout():
    return fm.dropout_explorer()


@pytest.fixture(scope="module")
def shape():
    return fm.cross_attention_explorer()


# ------------------------------------------------------------------ convex-combination
def _barycentric_inside(o, v):
    """Inside the triangle v (3, 2) when every barycentric coordinate is >= 0: an independent hull test."""
    M = np.vstack([v.T, np.ones(3)])  # (3, 3): [x; y; 1] per vertex
    lam = np.linalg.solve(M, np.vstack([o.T, np.ones(len(o))]))  # (3, N)
    return (lam >= -1e-9).all(axis=0)  # the package's edge tolerance, 1e-9


def test_dropout_curve_is_the_chapters_measurement(dropout):
    rates = list(lm.DROPOUT_RATES)
    curve = np.asarray(dropout.frames[0]["data"][-2]["y"])
    assert curve[0] == 0.0  # without dropout every output is inside: the algebra, not a measurement
    # p = 0.1 is the chapter's cell (seed 1, 500 problems): 1 - fraction_in_hull there
    assert curve[rates.index(0.1)] == 1 - fraction_in_hull(np.random.default_rng(1), n_problems=500, dropout=0.1)
    assert np.all(np.diff(curve) > 0)  # dropping more weights sends more outputs out, at every step of the grid
    for fr, p, y in zip(dropout.frames, rates, curve):
        assert f"a share <b>{y:.3f}</b>" in fr["readout"] and fr["readout"].startswith(f"p = {p:g}:")


def test_dropout_picture_counts_agree_with_a_barycentric_test(dropout):
    rng = np.random.default_rng(0)  # picture_seed: the problem the frames draw
    q, k, v = rng.normal(size=(8, 4)), rng.normal(size=(3, 4)), rng.normal(size=(3, 2))
    s = q @ k.T / 2.0  # (8, 3), sqrt(d_k) = 2
    w = np.exp(s - s.max(1, keepdims=True))
    w /= w.sum(1, keepdims=True)  # (8, 3) softmax by hand
    u = rng.random((10, 8, 3))
    for fr, p in zip(dropout.frames, lm.DROPOUT_RATES):
        o = ((w * (u > p) / (1 - p)) @ v).reshape(-1, 2)  # (80, 2)
        n_out = int((~_barycentric_inside(o, v)).sum())
        assert f"{n_out} of 80 outputs outside" in fr["readout"]
        if p == 0:
            assert n_out == 0


def test_dropout_flag_is_the_first_rate_with_outputs_outside(dropout):
    rates = list(lm.DROPOUT_RATES)
    outside = [1 - fraction_in_hull(np.random.default_rng(1), n_problems=500, dropout=p) for p in rates]
    expected = next(i for i, x in enumerate(outside) if x > 0)  # the verdict's line: every output inside
    assert dropout.flip == expected == 1 and dropout.labels[dropout.flip] == "p = 0.01"
    assert all(x == 0 for x in outside[:expected])


def test_static_dropout_picture_is_the_sliders_frame_and_counts_outputs_outside():
    """The chapter's static figure at p = 0.3: its title's count from an independent hull test."""
    rng = np.random.default_rng(0)  # the slider's picture_seed
    q, k, v = rng.normal(size=(8, 4)), rng.normal(size=(3, 4)), rng.normal(size=(3, 2))
    s = q @ k.T / 2.0  # (8, 3)
    w = np.exp(s - s.max(1, keepdims=True))
    w /= w.sum(1, keepdims=True)  # (8, 3) softmax by hand
    u = rng.random((10, 8, 3))
    o = ((w * (u > 0.3) / 0.7) @ v).reshape(-1, 2)  # (80, 2)
    n_out = int((~_barycentric_inside(o, v)).sum())
    assert n_out >= 10  # the prose says several outputs leave the hull: here many do
    _, o_l, inside = lm.dropout_outputs([0.3])
    np.testing.assert_allclose(o_l[0], o, rtol=0, atol=1e-14)  # float64 round-off of a 3-term sum
    assert int((~inside[0]).sum()) == n_out
    fig = fm.plot_dropout_outputs(0.3)
    assert fig.axes[0].get_title() == f"Dropout p = 0.3: {n_out} of 80 outputs leave the hull"
    np.testing.assert_array_equal(fig.axes[0].collections[-1].get_offsets(), o)  # the red stars are these outputs


def test_first_crossing():
    assert lm.first_crossing([0, 0, 0.1], 0) == 2
    assert lm.first_crossing([0, 0], 0) is None
    assert lm.first_crossing([5.0, 1.0], 3.32) == 0


# ------------------------------------------------------------------ square-matrix
def test_shape_frames_hold_t_by_s_softmax_weights(shape):
    ex = toy_sentence(fm.CROSS_TEXT)
    for S, fr in zip(range(1, 12), shape.frames):
        A = np.asarray(fr["data"][0]["z"])
        assert A.shape == (6, S)
        s = (ex.X[:6] @ ex.W_q) @ (ex.X[:S] @ ex.W_k).T / 2.0  # (6, S), d_k = 4
        ref = np.exp(s - s.max(1, keepdims=True))
        np.testing.assert_allclose(A, ref / ref.sum(1, keepdims=True), rtol=0, atol=1e-15)  # float64 round-off
        assert f"<b>6 × {S}</b>" in fr["readout"]


def test_shape_flag_is_where_a_is_square(shape):
    assert shape.labels[shape.flip] == "S = 6" and shape.start == shape.flip
    A = np.asarray(shape.frames[shape.flip]["data"][0]["z"])
    assert A.shape[0] == A.shape[1] and "square, as in self-attention" in shape.frames[shape.flip]["readout"]
    assert all("not square" in fr["readout"] for i, fr in enumerate(shape.frames) if i != shape.flip)
    assert lm.square_index([(2, 1), (2, 3)]) is None


# ------------------------------------------------------------------ HTML
@pytest.mark.parametrize("name, verdict, note", [
    ("dropout", "convex-combination", "outputs start to leave the hull"),
    ("shape", "square-matrix", "S = T: queries and keys from one sequence"),
])
def test_html_is_deterministic_and_links_the_verdict(request, name, verdict, note, check_flagged_html):
    check_flagged_html(request.getfixturevalue(name), verdict, note=note)


def test_html_is_the_same_when_built_again(shape):
    assert fm.cross_attention_explorer().to_html() == shape.to_html()


# ------------------------------------------------------------------ bad input
def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="starting at 0"):
        fm.dropout_explorer([0.1, 0.2], n_problems=5)
    with pytest.raises(ValueError, match=r"in \[0, 1\)"):
        fm.dropout_explorer([0.0, 1.0], n_problems=5)
    ex = toy_sentence(fm.CROSS_TEXT)
    with pytest.raises(ValueError, match=r"S=12 keys from x of shape \(11, 8\)"):
        lm.cross_attention_weights(ex.X, ex.W_q, ex.W_k, T=6, S=12)
    with pytest.raises(ValueError, match="S=12 keys"):
        fm.cross_attention_explorer(S_values=[12])
    with pytest.raises(ValueError, match=r"0 <= p < 1"):
        lm.dropout_outputs([1.0])
