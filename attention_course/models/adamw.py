r"""AdamW, computed as ``torch.optim.AdamW`` computes it on the CPU, without its import cost.

``torch.optim`` imports ``torch._dynamo`` (about 3 s); :class:`AdamW` does the same update with
the same operations in the same order (a test checks it bit for bit). With decoupled weight
decay :math:`\lambda` (Loshchilov & Hutter 2019):

.. math::

    \theta &\leftarrow \theta\,(1 - \eta\lambda) \\
    m &\leftarrow \beta_1 m + (1 - \beta_1)\, g, \qquad
    v \leftarrow \beta_2 v + (1 - \beta_2)\, g^2 \\
    \theta &\leftarrow \theta - \frac{\eta}{1 - \beta_1^t}\,
        \frac{m}{\sqrt{v} / \sqrt{1 - \beta_2^t} + \epsilon}
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Union

import torch

__all__ = ["AdamW"]

ParamsOrGroups = Union[Iterable[torch.Tensor], Iterable[dict[str, Any]]]


class AdamW:
    """AdamW over parameters or parameter groups (``torch.optim.AdamW``'s arguments and defaults).

    Parameters
    ----------
    params : iterable of tensors, or of dicts with a ``"params"`` list and any of the options
        below (a parameter group with its own learning rate, say).
    lr : float, default 1e-3
    betas : (float, float), default (0.9, 0.999)
    eps : float, default 1e-8
    weight_decay : float, default 1e-2
        Decoupled: each step multiplies the parameters by ``1 - lr * weight_decay``.

    Attributes
    ----------
    param_groups : list of dict
        Each group's ``"params"`` and options, as ``torch.optim`` lays them out.
    state : dict
        Per parameter: ``"step"`` (int), ``"exp_avg"`` and ``"exp_avg_sq"`` (its shape).

    Examples
    --------
    >>> w = torch.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = AdamW([w], lr=0.1, weight_decay=0.0)
    >>> (w ** 2).sum().backward()
    >>> opt.step()
    >>> w.detach()  # Adam's first step moves every entry by lr against its gradient's sign
    tensor([ 0.9000, -1.9000])
    """

    def __init__(self, params: ParamsOrGroups, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2) -> None:
        if lr < 0 or eps < 0 or weight_decay < 0 or not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"lr={lr}, betas={betas}, eps={eps}, weight_decay={weight_decay}; expected "
                             "lr, eps, weight_decay >= 0 and betas in [0, 1)")
        groups = list(params)
        if not groups:
            raise ValueError("AdamW got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        self.defaults = {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay}
        self.param_groups = [{**self.defaults, **g, "params": list(g["params"])} for g in groups]
        self.state: dict[torch.Tensor, dict[str, Any]] = {}

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear every parameter's ``.grad`` (to ``None``, or to zeros)."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.detach_().zero_()

    @torch.no_grad()
    def step(self) -> None:
        """One update of every parameter that has a gradient (torch's multi-tensor path, op for op)."""
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            lr, (beta1, beta2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            for p in params:
                if p not in self.state:
                    zeros = torch.zeros_like(p, memory_format=torch.preserve_format)
                    self.state[p] = {"step": 0, "exp_avg": zeros, "exp_avg_sq": zeros.clone()}
                self.state[p]["step"] += 1
            states = [self.state[p] for p in params]
            grads = [p.grad for p in params]
            exp_avgs, exp_avg_sqs = [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states]
            if wd != 0:
                torch._foreach_mul_(params, 1 - lr * wd)
            torch._foreach_lerp_(exp_avgs, grads, 1 - beta1)
            torch._foreach_mul_(exp_avg_sqs, beta2)
            torch._foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - beta2)
            # torch keeps the step count in a float32 tensor and reads it back as a Python float
            steps = [float(s["step"]) for s in states]
            step_size = [(lr / (1 - beta1**t)) * -1 for t in steps]
            bias_correction2_sqrt = [(1 - beta2**t) ** 0.5 for t in steps]
            denom = torch._foreach_sqrt(exp_avg_sqs)
            torch._foreach_div_(denom, bias_correction2_sqrt)
            torch._foreach_add_(denom, eps)
            torch._foreach_addcdiv_(params, exp_avgs, denom, step_size)
