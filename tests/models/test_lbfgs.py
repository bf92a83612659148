"""lbfgs must move the parameters exactly as torch.optim.LBFGS with the strong-Wolfe line search does."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.models.lbfgs import lbfgs


def _problem(seed, T, S, r):
    """A softmax-of-low-rank fit (chapter 4's) and a second parameter with a quartic term."""
    g = torch.Generator().manual_seed(seed)
    P = torch.softmax(torch.randn(T, S, generator=g, dtype=torch.float64) * 2, -1)  # (T, S) target rows
    q0, k0 = torch.randn(T, r, generator=g, dtype=torch.float64), torch.randn(S, r, generator=g, dtype=torch.float64)
    b0 = torch.randn(3, generator=g, dtype=torch.float64)

    def loss(q, k, b):
        kl = (P * (torch.log(P) - torch.log_softmax(q @ k.T, -1))).sum(-1).mean()
        return kl + ((b - 0.5) ** 4).sum() + 1e-3 * (q**2).sum()

    return loss, (q0, k0, b0)


def _with_torch(loss, starts, **options):
    params = [s.clone().requires_grad_() for s in starts]
    opt = torch.optim.LBFGS(params, line_search_fn="strong_wolfe", **options)

    def closure():
        opt.zero_grad()
        value = loss(*params)
        value.backward()
        return value

    opt.step(closure)
    return [p.detach() for p in params]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), T=st.integers(2, 7), S=st.integers(2, 7), r=st.integers(1, 3),
       max_iter=st.integers(1, 60), history=st.integers(1, 12), tol_change=st.sampled_from([1e-9, 1e-14]))
def test_parameters_equal_torch_lbfgs_bit_for_bit(seed, T, S, r, max_iter, history, tol_change):
    loss, starts = _problem(seed, T, S, r)
    options = dict(max_iter=max_iter, history_size=history, tolerance_grad=1e-10, tolerance_change=tol_change)
    expected = _with_torch(loss, starts, **options)
    params = [s.clone().requires_grad_() for s in starts]
    lbfgs(lambda: loss(*params), params, **options)
    for ours, ref in zip(params, expected):
        assert torch.equal(ours.detach(), ref)


def test_it_minimises_and_stops_at_an_optimum():
    x = torch.tensor([-1.2, 1.0], dtype=torch.float64, requires_grad=True)
    rosenbrock = lambda: (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2  # noqa: E731
    assert lbfgs(rosenbrock, [x], max_iter=200, tolerance_grad=1e-12, tolerance_change=1e-15) == pytest.approx(24.2)
    assert torch.allclose(x.detach(), torch.ones(2, dtype=torch.float64), atol=1e-6)  # the minimum (1, 1)
    before = x.detach().clone()
    lbfgs(rosenbrock, [x], max_iter=5, tolerance_grad=1e-3)  # gradient already below the tolerance: no move
    assert torch.equal(x.detach(), before)


def test_bad_params_are_named():
    with pytest.raises(ValueError, match="leaf tensors with requires_grad=True"):
        lbfgs(lambda: torch.zeros(()), [torch.zeros(2)])
