"""models.adamw.AdamW against the reference it stands in for, torch.optim.AdamW: equal bit for bit."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.models.adamw import AdamW
from attention_course.models.tasks import make_task
from attention_course.models.tiny import ModelConfig, TinyTransformer
from attention_course.models.training import train


def _run_both(shapes, dtype, lr, wd, betas, steps, foreach, seed=0, two_groups=False):
    g = torch.Generator().manual_seed(seed)
    start = [torch.randn(s, generator=g, dtype=dtype) for s in shapes]
    ours, ref = ([p.clone().requires_grad_() for p in start] for _ in range(2))

    def groups(ps):
        return [{"params": ps[:1], "lr": lr / 3}, {"params": ps[1:]}] if two_groups and len(ps) > 1 else ps

    opt = AdamW(groups(ours), lr=lr, betas=betas, weight_decay=wd)
    opt_ref = torch.optim.AdamW(groups(ref), lr=lr, betas=betas, weight_decay=wd, foreach=foreach)
    for step in range(steps):
        grads = [torch.randn(s, generator=g, dtype=dtype) * (1 + step % 5) for s in shapes]
        for ps in (ours, ref):
            for p, grad in zip(ps, grads):
                p.grad = grad.clone()
        opt.step()
        opt_ref.step()
    return ours, ref


@settings(max_examples=25, deadline=None)
@given(shapes=st.lists(st.lists(st.integers(1, 5), min_size=0, max_size=3).map(tuple), min_size=1, max_size=3),
       dtype=st.sampled_from([torch.float32, torch.float64]), lr=st.floats(1e-4, 0.1),
       wd=st.sampled_from([0.0, 0.01, 0.3]), beta1=st.sampled_from([0.0, 0.9]), beta2=st.sampled_from([0.99, 0.999]),
       foreach=st.booleans(), two_groups=st.booleans())
def test_parameters_equal_torch_adamw_bit_for_bit(shapes, dtype, lr, wd, beta1, beta2, foreach, two_groups):
    ours, ref = _run_both(shapes, dtype, lr, wd, (beta1, beta2), steps=40, foreach=foreach, two_groups=two_groups)
    for a, b in zip(ours, ref):
        assert torch.equal(a, b), (a - b).abs().max()


def test_training_losses_equal_torch_adamw_bit_for_bit():
    """The one training loop with our AdamW and with torch's: the same losses and weights."""
    task = make_task("repeated_sequences")
    models = [TinyTransformer(ModelConfig(n_layers=2, d_model=32), seed=1) for _ in range(2)]
    losses = train(models[0], task, steps=25, seed=3, weight_decay=0.01)
    ref = train(models[1], task, steps=25, seed=3, weight_decay=0.01,
                optimizer=lambda m, lr, wd: torch.optim.AdamW(m.parameters(), lr=lr, weight_decay=wd, foreach=True))
    assert losses.tolist() == ref.tolist()
    assert all(torch.equal(a, b) for a, b in zip(models[0].parameters(), models[1].parameters()))


def test_a_parameter_without_gradient_is_left_alone_and_zero_grad_clears():
    w, frozen = torch.ones(3, requires_grad=True), torch.ones(2, requires_grad=True)
    opt = AdamW([w, frozen], lr=0.1)
    w.sum().backward()
    opt.step()
    assert torch.equal(frozen.detach(), torch.ones(2)) and frozen not in opt.state
    assert opt.state[w]["step"] == 1
    opt.zero_grad(set_to_none=False)
    assert torch.equal(w.grad, torch.zeros(3))
    opt.zero_grad()
    assert w.grad is None


@pytest.mark.parametrize("kwargs, match", [({"lr": -1.0}, "lr=-1.0"), ({"betas": (0.9, 1.0)}, r"betas=\(0.9, 1.0\)"),
                                           ({"eps": -1e-8}, "eps=-1e-08")])
def test_bad_options_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        AdamW([torch.ones(1, requires_grad=True)], **kwargs)
    with pytest.raises(ValueError, match="empty parameter list"):
        AdamW([])
