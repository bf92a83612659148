r"""L-BFGS with a strong-Wolfe line search, computed as ``torch.optim.LBFGS`` computes it.

One ``torch.optim.LBFGS(..., line_search_fn="strong_wolfe").step(closure)``, bit for bit, without
importing ``torch._dynamo`` (about 3 s); the line search is torch's own.

Each iteration takes the quasi-Newton direction :math:`d = -H g` from the last ``history_size``
pairs :math:`s_i = x_{i+1} - x_i`, :math:`y_i = g_{i+1} - g_i` (the two-loop recursion, with
:math:`H_0 = (s^\top y / y^\top y)\, I`) and a step :math:`t` satisfying the strong Wolfe
conditions (Nocedal & Wright 2006, algorithms 7.4 and 3.5).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from torch.optim.lbfgs import _strong_wolfe

__all__ = ["lbfgs"]


def lbfgs(loss_fn: Callable[[], torch.Tensor], params: Iterable[torch.Tensor], *, max_iter: int = 20,
          max_eval: int | None = None, tolerance_grad: float = 1e-7, tolerance_change: float = 1e-9,
          history_size: int = 100, lr: float = 1.0) -> float:
    """Minimise ``loss_fn()`` over ``params`` in place; return the loss at the start.

    Parameters
    ----------
    loss_fn : callable returning a scalar tensor
        Computed from ``params`` (leaf tensors with ``requires_grad=True``); :func:`lbfgs` clears
        their gradients and calls ``backward`` itself.
    params : iterable of tensors
    max_iter, max_eval, tolerance_grad, tolerance_change, history_size, lr
        As in ``torch.optim.LBFGS`` (``max_eval`` defaults to ``max_iter * 5 // 4``).

    Examples
    --------
    >>> x = torch.tensor([3.0, -2.0], dtype=torch.float64, requires_grad=True)
    >>> start = lbfgs(lambda: ((x - 1) ** 2).sum(), [x], max_iter=10)
    >>> start, x.detach().round(decimals=12).tolist()         # the minimum (1, 1), to round-off
    (13.0, [1.0, 1.0])
    """
    params = list(params)
    if not params or any(not p.requires_grad or p.grad_fn is not None for p in params):
        raise ValueError("params must be leaf tensors with requires_grad=True (at least one)")
    max_eval = max_iter * 5 // 4 if max_eval is None else max_eval

    def closure() -> torch.Tensor:
        with torch.enable_grad():
            for p in params:
                p.grad = None  # torch.optim's zero_grad(set_to_none=True)
            loss = loss_fn()
            loss.backward()
        return loss

    def gather_grad() -> torch.Tensor:  # (numel,): every parameter's gradient, flattened in order
        return torch.cat([p.new(p.numel()).zero_() if p.grad is None else p.grad.view(-1) for p in params], 0)

    def add(step: float, update: torch.Tensor) -> None:
        offset = 0
        for p in params:
            p.add_(update[offset: offset + p.numel()].view_as(p), alpha=step)
            offset += p.numel()

    def directional(x: list, t: float, d: torch.Tensor) -> tuple[float, torch.Tensor]:
        add(t, d)
        loss = float(closure())
        g = gather_grad()
        for p, saved in zip(params, x):
            p.copy_(saved)
        return loss, g

    with torch.no_grad():
        start = float(closure())
        loss, flat_grad, current_evals = start, gather_grad(), 1
        if flat_grad.abs().max() <= tolerance_grad:
            return start
        old_dirs: list = []
        old_stps: list = []
        ro: list = []
        al: list = [None] * history_size
        d = t = prev_flat_grad = None
        H_diag = 1
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            if n_iter == 1:
                d = flat_grad.neg()  # (numel,): steepest descent first
            else:
                y, s = flat_grad.sub(prev_flat_grad), d.mul(t)  # (numel,) each
                ys = y.dot(s)
                if ys > 1e-10:  # keep the pair only if it keeps H positive definite
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / y.dot(y)
                q = flat_grad.neg()
                for i in range(len(old_dirs) - 1, -1, -1):  # the two-loop recursion: d = -H g
                    al[i] = old_stps[i].dot(q) * ro[i]
                    q.add_(old_dirs[i], alpha=-al[i])
                d = r = torch.mul(q, H_diag)
                for i in range(len(old_dirs)):
                    be_i = old_dirs[i].dot(r) * ro[i]
                    r.add_(old_stps[i], alpha=al[i] - be_i)
            if prev_flat_grad is None:
                prev_flat_grad = flat_grad.clone(memory_format=torch.contiguous_format)
            else:
                prev_flat_grad.copy_(flat_grad)
            prev_loss = loss
            t = min(1.0, 1.0 / flat_grad.abs().sum()) * lr if n_iter == 1 else lr
            gtd = flat_grad.dot(d)  # the directional derivative
            if gtd > -tolerance_change:
                break
            x_init = [p.clone(memory_format=torch.contiguous_format) for p in params]
            loss, flat_grad, t, ls_evals = _strong_wolfe(directional, x_init, t, d, loss, flat_grad, gtd,
                                                         max_ls=max_eval - current_evals)
            add(t, d)
            current_evals += ls_evals
            if (n_iter == max_iter or current_evals >= max_eval or flat_grad.abs().max() <= tolerance_grad
                    or d.mul(t).abs().max() <= tolerance_change or abs(loss - prev_loss) < tolerance_change):
                break
    return start
