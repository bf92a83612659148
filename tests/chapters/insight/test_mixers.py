"""The one-layer mixer and its ablations (attention_course/chapters/insight/mixers.py) against references."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from attention_course.core.attention import scaled_dot_product_attention
from attention_course.chapters.insight.mixers import MixerModel, Variant, mixing_mask, sparsemax, symmetric_weights
from attention_course.chapters.insight.recall_tasks import previous_token, stacked_mqar


def _sparsemax_ref(z):
    """Martins & Astudillo (2016), Algorithm 1, in numpy."""
    s = np.sort(z)[::-1]
    k = np.arange(1, len(z) + 1)
    cs = np.cumsum(s)
    k_z = k[1 + k * s > cs].max()
    tau = (cs[k_z - 1] - 1) / k_z
    return np.maximum(z - tau, 0)


@given(st.lists(st.floats(-5, 5), min_size=1, max_size=9))
@settings(max_examples=40, deadline=None)
def test_sparsemax_matches_the_reference_and_is_a_distribution(z):
    z = np.array(z)
    p = sparsemax(torch.tensor(z, dtype=torch.float64)).numpy()
    np.testing.assert_allclose(p, _sparsemax_ref(z), atol=1e-12)
    assert p.min() >= 0 and p.sum() == pytest.approx(1.0)


def test_mixing_mask_against_loops():
    T, w = 6, 3
    m = mixing_mask(T, window=w, mask_self=True).numpy()
    ref = np.array([[s <= t and t - s < w and (s != t or t == 0) for s in range(T)] for t in range(T)])
    np.testing.assert_array_equal(m, ref)


def _x():
    return stacked_mqar(4, n_pairs=4, seed=1).inputs


def test_softmax_variant_is_causal_scaled_dot_product_attention():
    model = MixerModel(Variant(), seq_len=8, d_model=16, seed=0).double()
    x = model.E_K[_x()[..., 0]] + model.E_V[_x()[..., 1]] + model.P[:8]
    out, A = model.mix(x)
    ref, w = scaled_dot_product_attention(x @ model.W_q, x @ model.W_k, x @ model.W_v, mask=mixing_mask(8))
    torch.testing.assert_close(A, w)
    torch.testing.assert_close(out, ref @ model.W_o)


def test_scaling_queries_up_and_keys_down_changes_nothing():
    model = MixerModel(Variant(), seq_len=8, d_model=16, seed=0).double()
    logits, _ = model(_x())
    with torch.no_grad():
        model.W_q *= 3.0
        model.W_k /= 3.0
    torch.testing.assert_close(model(_x())[0], logits)


def test_tied_ignores_W_k_and_identity_ignores_both():
    for variant in (Variant(tied=True), Variant(identity=True)):
        model = MixerModel(variant, seq_len=8, d_model=16, seed=0)
        before = model(_x())[0]
        with torch.no_grad():
            model.W_k.normal_()
            if variant.identity:
                model.W_q.normal_()
        torch.testing.assert_close(model(_x())[0], before)


def test_fixed_mixing_is_the_same_for_every_input():
    model = MixerModel(Variant(mixer="fixed"), seq_len=8, d_model=16, seed=0)
    _, (A,) = model(_x())
    torch.testing.assert_close(A, A[:1].expand_as(A))
    assert torch.all(A.triu(1) == 0)


def test_convolution_matches_a_loop():
    model = MixerModel(Variant(mixer="conv"), seq_len=8, d_model=4, seed=0).double()
    x = torch.randn(2, 8, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    out, _ = model.mix(x)
    v, gate = x @ model.W_v, x @ model.W_g
    y = torch.zeros_like(v)
    for t in range(8):
        for s in range(t + 1):
            y[:, t] += model.h[:, t - s] * v[:, s]
    torch.testing.assert_close(out, (y * gate) @ model.W_o)


def test_linear_attention_is_a_fixed_size_recurrent_state():
    # A_t v = phi(q_t)^T S_t / phi(q_t)^T z_t with S_t = sum_{s<=t} phi(k_s) v_s^T: a d x d state.
    model = MixerModel(Variant(mixer="linear"), seq_len=8, d_model=4, seed=0).double()
    x = torch.randn(1, 8, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    out, _ = model.mix(x)
    phi = lambda u: torch.nn.functional.elu(u) + 1
    q, k, v = phi(x @ model.W_q)[0], phi(x @ model.W_k)[0], (x @ model.W_v)[0]
    S, z = torch.zeros(4, 4, dtype=torch.float64), torch.zeros(4, dtype=torch.float64)
    for t in range(8):
        S, z = S + torch.outer(k[t], v[t]), z + k[t]
        torch.testing.assert_close(out[0, t], (q[t] @ S / (q[t] @ z)) @ model.W_o)


def test_hard_selection_is_one_hot_and_only_straight_through_passes_a_gradient():
    for norm, grad in (("straight-through", True), ("argmax", False)):
        model = MixerModel(Variant(norm=norm), seq_len=8, d_model=16, seed=0)
        logits, (A,) = model(_x())
        hard = torch.nn.functional.one_hot(A.detach().argmax(-1), 8).float()
        torch.testing.assert_close(A.detach(), hard)  # the forward pass is one-hot
        logits.sum().backward()
        assert (model.W_q.grad is not None and model.W_q.grad.abs().sum() > 0) == grad


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match=r"expected \(B, T <= 8, 2\)"):
        MixerModel(Variant(), seq_len=8)(torch.zeros(2, 9, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="mixer='mlp'"):
        Variant(mixer="mlp")


def test_previous_token_targets():
    x, y, m = previous_token(3, length=5, seed=2)
    assert torch.equal(y[:, 1:], x[:, :-1, 0]) and not m[:, 0].any()


@pytest.mark.extended  # it trains 2 x 5 small models (about 10 s)
def test_window_copy_sweep_finds_the_gap_plus_one():
    """A causal window of w positions sees the token `gap` back only when w > gap (closed form): trained
    with the window-mask solution, the copy is near chance at w = gap and solved at w = gap + 1."""
    from attention_course.chapters.insight.window_sweep import window_copy_sweep
    from attention_course.course.solutions import SOLUTIONS

    fig = window_copy_sweep(SOLUTIONS["window-mask"], gaps=(1, 3), windows=(1, 2, 3, 4))
    lines = {l.get_label(): dict(zip(l.get_xdata(), l.get_ydata())) for l in fig.axes[0].get_lines()
             if l.get_label().startswith("gap")}
    for gap in (1, 3):
        assert lines[f"gap {gap}"][gap] < 0.2 < 0.95 < lines[f"gap {gap}"][gap + 1], lines  # chance is 1/64


def test_window_sweep_draws_full_attention_once():
    """Full attention copies at every gap alike: one dashed reference line and one legend entry, not one per gap."""
    from attention_course.chapters.insight.window_sweep import plot_window_sweep

    acc = {g: {None: 1.0 - 0.01 * g, 1: 0.02, 2: 1.0 if g == 1 else 0.03, 3: 1.0} for g in (1, 2, 3)}
    ax = plot_window_sweep(acc).axes[0]
    dashed = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
    assert len(dashed) == 1 and list(dashed[0].get_ydata()) == [0.97, 0.97]  # the worst gap's, not a mean
    assert [t.get_text() for t in ax.get_legend().get_texts()][-1] == "full attention (its worst gap)"


@pytest.mark.parametrize("mask_fn,says", [
    (lambda T, w: np.ones((T, T), dtype=bool), "also reads positions after the query"),
    (lambda T, w: np.tril(np.ones((T, T))), "holds numbers (float64), not booleans"),
    (lambda T, w: np.ones((T, 2), dtype=bool), "expected shape (6, 6)"),
    (lambda T, w: 1 / 0, "raised ZeroDivisionError"),
])
def test_window_copy_sweep_trains_nothing_on_a_wrong_mask(monkeypatch, capsys, mask_fn, says):
    from attention_course.chapters.insight import window_sweep

    monkeypatch.setattr(window_sweep, "window_copy_accuracy", lambda *a, **k: pytest.fail("trained"))
    assert window_sweep.window_copy_sweep(mask_fn) is None
    assert says in capsys.readouterr().out


# ------------------------------------------------------------------ symmetric normalisation
def test_symmetric_weights_against_a_hand_computation():
    """s = [[0, log 2], [log 2, log 3]]: E = [[1, 2], [2, 3]], r = (3, 5), A_ij = E_ij / sqrt(r_i r_j)."""
    s = torch.tensor([[0.0, np.log(2.0)], [np.log(2.0), np.log(3.0)]], dtype=torch.float64)
    A = symmetric_weights(s)
    by_hand = torch.tensor([[1 / 3, 2 / np.sqrt(15)], [2 / np.sqrt(15), 3 / 5]], dtype=torch.float64)
    torch.testing.assert_close(A, by_hand)
    assert abs(float(A[0].sum()) - (1 / 3 + 2 / np.sqrt(15))) < 1e-12  # 0.850: the row does not sum to 1


@settings(max_examples=30, deadline=None)
@given(T=st.integers(1, 7), seed=st.integers(0, 10_000))
def test_symmetric_weights_are_symmetric_with_top_eigenvalue_one_but_rows_not_normalised(T, seed):
    """What normalises A = R^{-1/2} E R^{-1/2} is the matrix, not its rows: it is similar to the row-stochastic
    R^{-1} E, so its largest eigenvalue is 1."""
    g = torch.Generator().manual_seed(seed)
    M = torch.randn(T, T, generator=g, dtype=torch.float64) * 2
    s = M + M.T  # a symmetric score
    A = symmetric_weights(s)
    torch.testing.assert_close(A, A.T)
    assert (A >= 0).all()
    assert abs(float(torch.linalg.eigvalsh(A).max()) - 1.0) < 1e-9
    row = torch.softmax(s, dim=-1)
    torch.testing.assert_close(torch.linalg.eigvals(row).real.max(), torch.tensor(1.0, dtype=torch.float64))


def test_symmetric_weights_rows_do_not_sum_to_one_in_general():
    g = torch.Generator().manual_seed(0)
    M = torch.randn(6, 6, generator=g)
    A = symmetric_weights(M + M.T)
    assert (A.sum(-1) - 1).abs().max() > 0.05  # unlike softmax's rows
    assert torch.allclose(torch.softmax(M + M.T, -1).sum(-1), torch.ones(6))


def test_an_asymmetric_score_or_mask_gives_asymmetric_weights():
    s = torch.tensor([[0.0, 2.0], [0.0, 0.0]])
    assert not torch.allclose(symmetric_weights(s), symmetric_weights(s).T)
    causal = mixing_mask(3)
    A = symmetric_weights(torch.zeros(3, 3), causal)
    assert A[0, 1] == 0 and A[1, 0] > 0 and torch.isfinite(A).all()


def test_symmetric_weights_name_a_non_square_score():
    with pytest.raises(ValueError, match=r"shape \(2, 3\).*\(\.\.\., T, T\)"):
        symmetric_weights(torch.zeros(2, 3))
