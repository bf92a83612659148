r"""A tiny attention-only transformer that trains in seconds on a CPU.

The model reads tokens, adds learned positional embeddings, and passes the
residual stream :math:`x` through ``n_layers`` blocks of multi-head causal
attention (optionally preceded by LayerNorm and followed by an MLP):

.. math::

    x \leftarrow x + \sum_{h=1}^{H} m_{\ell h}\,
        \operatorname{softmax}\!\left(c\,(x W_Q^h)(x W_K^h)^\top + M\right)
        x W_V^h W_O^h

where :math:`c = 1/\sqrt{d_k}` by default (``ModelConfig.scale``; chapter 6
also trains with :math:`c = 1` and :math:`c = 1/d_k`), :math:`M` is the causal
mask and :math:`m_{\ell h} \in \{0, 1\}` is a head mask used for ablations
(Michel et al., 2019). Each head keeps its own
:math:`W_Q^h, W_K^h, W_V^h \in \mathbb{R}^{d_{model} \times d_k}` and
:math:`W_O^h \in \mathbb{R}^{d_k \times d_{model}}`, stored as tensors of shape
``(h, d_model, d_k)`` and ``(h, d_k, d_model)``, so heads can be read,
compared and switched off one at a time. The attention itself is the
package's :func:`~attention_course.core.attention.scaled_dot_product_attention`.

The forward pass returns the logits *and* every layer's attention weights; the
module stores nothing for plotting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

import numpy as np
import torch
from torch import nn

from ..core._backend import ShapeError, shape_str
from ..core.attention import causal_mask, resolve_scale, scaled_dot_product_attention
from .tasks import Task

__all__ = [
    "ModelConfig",
    "TinyTransformer",
    "attention_block",
    "masked_loss",
    "train",
    "TrainingRun",
    "train_run",
    "qk_logits",
    "evaluate_loss",
    "head_ablation",
    "attention_pattern_scores",
    "head_scores",
    "loss_by_period",
]


@dataclass(frozen=True)
class ModelConfig:
    r"""Sizes and switches of :class:`TinyTransformer`.

    ``d_k = d_model // n_heads`` by default. ``layer_norm`` adds a pre-LN before
    each block and before the unembedding; ``mlp`` adds a ReLU MLP of width
    ``4 d_model`` after each attention block. ``scale`` multiplies the scores
    :math:`q \cdot k` before the softmax: ``"sqrt"`` (:math:`1/\sqrt{d_k}`, the
    default), ``"none"`` (1), ``"mup"`` (:math:`1/d_k`) or a positive number; see
    :func:`~attention_course.core.attention.resolve_scale`.

    Examples
    --------
    >>> ModelConfig(d_k=64, scale="none").head_dim
    64
    >>> ModelConfig(scale="1/d")
    Traceback (most recent call last):
        ...
    ValueError: unknown scale '1/d'; expected one of ('sqrt', 'none', 'mup') or a positive number
    """

    vocab_size: int = 64
    max_len: int = 32
    d_model: int = 32
    n_heads: int = 4
    n_layers: int = 2
    d_k: Optional[int] = None
    layer_norm: bool = True
    mlp: bool = False
    scale: Union[str, float] = "sqrt"

    def __post_init__(self) -> None:
        resolve_scale(self.head_dim, self.scale)  # a bad scale fails here, not mid-training

    @property
    def head_dim(self) -> int:
        """The per-head dimension d_k."""
        return self.d_k if self.d_k is not None else self.d_model // self.n_heads

    @property
    def score_scale(self) -> float:
        r"""The factor :math:`c(d_k)` that multiplies :math:`q \cdot k`."""
        return resolve_scale(self.head_dim, self.scale)


def attention_block(
    x: torch.Tensor,
    W_q: torch.Tensor,
    W_k: torch.Tensor,
    W_v: torch.Tensor,
    W_o: torch.Tensor,
    head_mask: Optional[torch.Tensor] = None,
    scale: Optional[float] = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Causal multi-head self-attention with per-head weight tensors.

    .. math::

        \operatorname{out} = \sum_h m_h\, \operatorname{softmax}\!\left(
            c\, q_h k_h^\top + M_{\text{causal}}\right) v_h W_O^h,
        \qquad q_h = x W_Q^h,\; k_h = x W_K^h,\; v_h = x W_V^h

    Parameters
    ----------
    x : torch.Tensor, shape (B, T, d_model)
    W_q, W_k, W_v : torch.Tensor, shape (h, d_model, d_k)
    W_o : torch.Tensor, shape (h, d_k, d_model)
    head_mask : torch.Tensor, optional, shape (h,)
        Multiplies each head's output before ``W_o``; 0 removes the head.
    scale : float, optional
        The factor :math:`c` on the scores; default :math:`1/\sqrt{d_k}`.

    Returns
    -------
    out : torch.Tensor, shape (B, T, d_model)
        What the block adds to the residual stream.
    weights : torch.Tensor, shape (B, h, T, T)
        Attention weights; query ``i`` attends to keys ``j <= i`` (causal mask,
        True = may attend), each row sums to 1.

    Examples
    --------
    >>> g = torch.Generator().manual_seed(0)
    >>> x = torch.randn(2, 5, 8, generator=g)
    >>> W = [torch.randn(2, 8, 4, generator=g) for _ in range(3)]
    >>> out, w = attention_block(x, *W, torch.randn(2, 4, 8, generator=g))
    >>> tuple(out.shape), tuple(w.shape), float(w[0, 0, 0, 1])
    ((2, 5, 8), (2, 2, 5, 5), 0.0)
    """
    B, T, d_model = x.shape
    h, _, d_k = W_q.shape
    # one matmul for all heads' q, k, v (the same numbers as x @ W_q[h] for each h)
    W_qkv = torch.cat([W_q, W_k, W_v], dim=2)  # (h, d_model, 3 d_k)
    W_qkv = W_qkv.permute(1, 0, 2).reshape(d_model, 3 * h * d_k)  # (d_model, h * 3 d_k)
    qkv = (x @ W_qkv).view(B, T, h, 3 * d_k).transpose(1, 2)  # (B, h, T, 3 d_k)
    q, k, v = qkv.split(d_k, dim=-1)  # each (B, h, T, d_k): q_h = x W_Q^h, ...
    mask = torch.from_numpy(causal_mask(T))  # (T, T), True = may attend (j <= i)
    z, weights = scaled_dot_product_attention(q, k, v, mask=mask, scale=scale)
    # z: (B, h, T, d_k); weights: (B, h, T, T), each row normalised over the T keys
    if head_mask is not None:
        z = z * head_mask.to(z.dtype)[None, :, None, None]  # (B, h, T, d_k), ablated heads = 0
    z = z.transpose(1, 2).reshape(B, T, h * d_k)  # (B, T, h d_k): heads side by side
    out = z @ W_o.reshape(h * d_k, d_model)  # $\sum_h z_h W_O^h$   (B, T, d_model)
    return out, weights


class TinyTransformer(nn.Module):
    """Attention-only (optionally with MLP) causal transformer; a thin wrapper.

    Parameters
    ----------
    config : ModelConfig
    seed : int, default 0
        Seeds the initialisation (through a private ``torch.Generator``, so
        the global random state is not touched).

    Examples
    --------
    >>> model = TinyTransformer(ModelConfig(d_model=32, n_heads=4, n_layers=2), seed=0)
    >>> tokens = torch.randint(0, 64, (3, 10), generator=torch.Generator().manual_seed(0))
    >>> logits, weights = model(tokens)
    >>> tuple(logits.shape), len(weights), tuple(weights[0].shape)
    ((3, 10, 64), 2, (3, 4, 10, 10))
    >>> tuple(model.W_q[0].shape)                    # layer 0: (h, d_model, d_k)
    (4, 32, 8)
    """

    def __init__(self, config: ModelConfig = ModelConfig(), seed: int = 0) -> None:
        super().__init__()
        self.config = config
        c, L, h, d, d_k = config, config.n_layers, config.n_heads, config.d_model, config.head_dim
        g = torch.Generator().manual_seed(int(seed))

        def param(*shape: int, std: float) -> nn.Parameter:
            return nn.Parameter(torch.randn(*shape, generator=g) * std)

        self.W_E = param(c.vocab_size, d, std=1.0)  # token embeddings
        self.W_pos = param(c.max_len, d, std=1.0)  # learned positional embeddings
        self.W_q = nn.ParameterList([param(h, d, d_k, std=d**-0.5) for _ in range(L)])
        self.W_k = nn.ParameterList([param(h, d, d_k, std=d**-0.5) for _ in range(L)])
        self.W_v = nn.ParameterList([param(h, d, d_k, std=d**-0.5) for _ in range(L)])
        self.W_o = nn.ParameterList([param(h, d_k, d, std=(h * d_k) ** -0.5) for _ in range(L)])
        self.ln = nn.ModuleList(
            [nn.LayerNorm(d) if c.layer_norm else nn.Identity() for _ in range(L + 1)]
        )  # before each block, and before the unembedding
        self.mlps = nn.ModuleList()
        if c.mlp:
            for _ in range(L):
                mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.ReLU(), nn.Linear(4 * d, d))
                for lin in (mlp[0], mlp[2]):
                    std = lin.in_features**-0.5
                    lin.weight.data = torch.randn(lin.weight.shape, generator=g) * std
                    lin.bias.data.zero_()
                self.mlps.append(mlp)
        self.W_U = param(d, c.vocab_size, std=0.1 * d**-0.5)  # unembedding: start near ln V

    def forward(
        self, tokens: torch.Tensor, head_mask: Optional[torch.Tensor] = None
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Logits for the next token at every position, and all attention weights.

        Parameters
        ----------
        tokens : torch.LongTensor, shape (B, T), T <= max_len, values in [0, vocab_size)
        head_mask : torch.Tensor, optional, shape (n_layers, n_heads)
            1 keeps a head, 0 zeroes its output (ablation). Default: all ones.

        Returns
        -------
        logits : torch.Tensor, shape (B, T, vocab_size)
        weights : list of torch.Tensor, one per layer, each (B, n_heads, T, T)
        """
        c = self.config
        if tokens.ndim != 2 or tokens.dtype not in (torch.int64, torch.int32):
            raise ShapeError(
                f"tokens have shape {shape_str(tokens)} and dtype {tokens.dtype}; "
                f"expected integer tokens of shape (B, T)"
            )
        B, T = tokens.shape
        if T > c.max_len:
            raise ShapeError(f"tokens have shape {(B, T)}: T={T} exceeds max_len={c.max_len}")
        if tokens.numel() and (tokens.min() < 0 or tokens.max() >= c.vocab_size):
            raise ValueError(
                f"tokens range over [{int(tokens.min())}, {int(tokens.max())}]; "
                f"expected values in [0, {c.vocab_size})"
            )
        if head_mask is not None and tuple(head_mask.shape) != (c.n_layers, c.n_heads):
            raise ShapeError(
                f"head_mask has shape {shape_str(head_mask)}; expected "
                f"(n_layers, n_heads) = ({c.n_layers}, {c.n_heads})"
            )
        x = self.W_E[tokens] + self.W_pos[:T]  # (B, T, d_model)
        weights = []
        for layer in range(c.n_layers):
            m = None if head_mask is None else head_mask[layer]
            out, w = attention_block(
                self.ln[layer](x),
                self.W_q[layer], self.W_k[layer], self.W_v[layer], self.W_o[layer], m,
                scale=c.score_scale,
            )  # (B, T, d_model), (B, h, T, T)
            x = x + out  # residual stream
            if c.mlp:
                x = x + self.mlps[layer](x)  # (B, T, d_model)
            weights.append(w)
        logits = self.ln[-1](x) @ self.W_U  # (B, T, vocab_size)
        return logits, weights


# ----------------------------------------------------------------------------
# Training, evaluation and head analysis
# ----------------------------------------------------------------------------


def masked_loss(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    r"""Mean cross-entropy (nats) over the positions where ``mask`` is True.

    .. math::

        \mathcal{L} = -\frac{1}{|\mathcal{M}|}\sum_{(b, t) \in \mathcal{M}}
            \log \operatorname{softmax}(z_{b t})_{y_{b t}}

    Parameters
    ----------
    logits : torch.Tensor, shape (B, T, V)
    targets : torch.LongTensor, shape (B, T)
    mask : torch.BoolTensor, shape (B, T)
    """
    if logits.shape[:2] != targets.shape or targets.shape != mask.shape:
        raise ShapeError(
            f"logits {shape_str(logits)}, targets {shape_str(targets)} and mask "
            f"{shape_str(mask)}; expected (B, T, V), (B, T) and (B, T)"
        )
    nll = torch.nn.functional.cross_entropy(
        logits.transpose(1, 2), targets, reduction="none"
    )  # (B, T)
    return nll[mask].mean()


def train(
    model: TinyTransformer,
    task: Task,
    steps: int = 1000,
    seed: int = 0,
    lr: float = 3e-3,
    batch_size: int = 32,
    weight_decay: float = 0.0,
    num_threads: Optional[int] = 1,
) -> np.ndarray:
    """Train ``model`` in place on fresh batches of ``task`` with Adam(W).

    Deterministic on the CPU for a fixed ``seed`` and thread count: batches
    come from a ``torch.Generator`` seeded with ``seed``, and the global torch
    RNG is seeded inside :func:`torch.random.fork_rng`, so the caller's random
    state is left as it was. The thread count is set to ``num_threads`` for the
    duration of the call and restored afterwards. :func:`train_run` runs the
    same loop and also records gradient norms and attention sharpness.

    Parameters
    ----------
    model : TinyTransformer
        Updated in place; its initialisation is seeded when it is built.
    task : Task
        From :func:`~attention_course.models.tasks.make_task`.
    steps : int, default 1000
    seed : int, default 0
    lr : float, default 3e-3
    batch_size : int, default 32
    weight_decay : float, default 0
    num_threads : int or None, default 1
        Threads torch uses while training (restored on return); ``None`` leaves
        the current setting alone. See the notes.

    Returns
    -------
    numpy.ndarray, shape (steps,)
        The training loss (nats, on the masked positions only: for the
        induction task, the repeated part) *before* each update.

    Notes
    -----
    With the defaults a 2-layer model (``ModelConfig()``) learns the
    ``"repeated_sequences"`` task in 250-350 steps (loss below 0.6; seeds 0-5).
    For a model this small one thread is fastest, hence the default
    ``num_threads=1``: on a busy 2-core machine two threads ran 10x slower
    (433 s instead of 42 s for 1,000 steps) and gave the same losses.

    Examples
    --------
    >>> from attention_course.models.tasks import make_task
    >>> model = TinyTransformer(ModelConfig(d_model=16, n_heads=2), seed=0)
    >>> history = train(model, make_task("repeated_sequences"), steps=3, seed=0)
    >>> history.shape, round(float(history[0]), 1)     # starts near ln 64 = 4.16
    ((3,), 4.2)
    """
    return _train_loop(model, task, steps, seed, lr, batch_size, weight_decay, num_threads,
                       record=False).loss


@dataclass(frozen=True)
class TrainingRun:
    """What :func:`train_run` records, one row per step (measured *before* the update).

    Attributes
    ----------
    loss : numpy.ndarray, shape (steps,)
        Training loss, as returned by :func:`train`.
    grad_norm_q, grad_norm_k : numpy.ndarray, shape (steps, n_layers)
        Frobenius norm of the loss gradient with respect to each layer's
        ``W_q`` (all heads together) and ``W_k``.
    grad_norm : numpy.ndarray, shape (steps,)
        Norm of the gradient with respect to all parameters.
    max_weight : numpy.ndarray, shape (steps, n_layers)
        Mean over the batch, the heads and the queries ``t >= 1`` of the largest
        attention weight in the row (query 0 has one key, so its weight is 1):
        near 1 means saturated, one-hot attention.
    """

    loss: np.ndarray
    grad_norm_q: np.ndarray
    grad_norm_k: np.ndarray
    grad_norm: np.ndarray
    max_weight: np.ndarray


def train_run(
    model: TinyTransformer,
    task: Task,
    steps: int = 1000,
    seed: int = 0,
    lr: float = 3e-3,
    batch_size: int = 32,
    weight_decay: float = 0.0,
    num_threads: Optional[int] = 1,
) -> TrainingRun:
    r""":func:`train`, also recording gradient norms and how peaked the attention is.

    The parameters and the updates are exactly those of :func:`train` (same
    seed, same losses, bit for bit); only measurements are added. At each step,
    after the backward pass and before the optimiser step, it records

    .. math::

        \lVert \nabla_{W_Q^{(\ell)}} \mathcal{L} \rVert_F, \quad
        \lVert \nabla_{W_K^{(\ell)}} \mathcal{L} \rVert_F, \quad
        \lVert \nabla_\theta \mathcal{L} \rVert_2, \quad
        \overline{\max_j A^{(\ell)}_{ij}} .

    Parameters
    ----------
    See :func:`train`.

    Returns
    -------
    TrainingRun

    Examples
    --------
    >>> from attention_course.models.tasks import make_task
    >>> model = TinyTransformer(ModelConfig(d_model=16, n_heads=2), seed=0)
    >>> run = train_run(model, make_task("repeated_sequences"), steps=3, seed=0)
    >>> run.loss.shape, run.grad_norm_q.shape, run.max_weight.shape
    ((3,), (3, 2), (3, 2))
    """
    return _train_loop(model, task, steps, seed, lr, batch_size, weight_decay, num_threads,
                       record=True)


def _train_loop(model, task, steps, seed, lr, batch_size, weight_decay, num_threads, record):
    if int(steps) != steps or steps < 1:
        raise ValueError(f"steps={steps!r}; expected a positive integer")
    steps, L = int(steps), model.config.n_layers
    g = torch.Generator().manual_seed(int(seed))
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay, foreach=True)
    history = np.empty(steps)
    shape = (steps, L) if record else (0, L)
    gq, gk, peak = np.empty(shape), np.empty(shape), np.empty(shape)
    gall = np.empty(steps if record else 0)
    threads = torch.get_num_threads()
    if num_threads is not None:
        torch.set_num_threads(int(num_threads))
    model.train()
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed))
            for step in range(steps):
                inputs, targets, mask = task(batch_size, generator=g)
                logits, weights = model(inputs)  # (B, T, V), n_layers x (B, h, T, T)
                loss = masked_loss(logits, targets, mask)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                if record:
                    with torch.no_grad():
                        for layer in range(L):
                            gq[step, layer] = torch.linalg.vector_norm(model.W_q[layer].grad)
                            gk[step, layer] = torch.linalg.vector_norm(model.W_k[layer].grad)
                            w = weights[layer][:, :, 1:]  # (B, h, T - 1, T): queries t >= 1
                            peak[step, layer] = w.amax(dim=-1).mean()  # largest weight per row
                        grads = [p.grad for p in model.parameters() if p.grad is not None]
                        gall[step] = torch.linalg.vector_norm(
                            torch.stack([torch.linalg.vector_norm(gr) for gr in grads])
                        )  # $\lVert \nabla_\theta \mathcal{L} \rVert_2$ over all parameters
                opt.step()
                history[step] = loss.item()
    finally:
        torch.set_num_threads(threads)
        model.eval()
    return TrainingRun(history, gq, gk, gall, peak)


@torch.no_grad()
def qk_logits(model: TinyTransformer, tokens: torch.Tensor) -> list[torch.Tensor]:
    r"""The scaled scores :math:`c\,(x W_Q^h)(x W_K^h)^\top` that each layer's softmax sees.

    Runs the model once and reads each block's input :math:`x` (after the
    pre-LayerNorm) through forward hooks, so the forward pass itself is
    untouched. The causal mask is *not* applied: entries with key ``j > i``
    are scores the model never uses; select ``j <= i`` (e.g. with
    :func:`~attention_course.core.attention.causal_mask`) before taking statistics.

    Parameters
    ----------
    model : TinyTransformer
    tokens : torch.LongTensor, shape (B, T)

    Returns
    -------
    list of torch.Tensor, one per layer, each (B, h, T, T)
        ``softmax`` of an entry's causal part equals the model's attention weights.

    Examples
    --------
    >>> model = TinyTransformer(ModelConfig(d_k=64, scale="none"), seed=0)
    >>> s = qk_logits(model, torch.zeros(2, 6, dtype=torch.long))
    >>> len(s), tuple(s[0].shape)
    (2, (2, 4, 6, 6))
    """
    c = model.config
    block_inputs: list[torch.Tensor] = []
    hooks = [
        model.ln[layer].register_forward_hook(lambda mod, args, out: block_inputs.append(out))
        for layer in range(c.n_layers)
    ]  # ln[layer] feeds block `layer`; ln[-1] (before the unembedding) is not hooked
    try:
        model(tokens)
    finally:
        for hook in hooks:
            hook.remove()
    logits = []
    for layer, x in enumerate(block_inputs):  # x: (B, T, d_model)
        q = torch.einsum("btd,hdk->bhtk", x, model.W_q[layer])  # (B, h, T, d_k)
        k = torch.einsum("btd,hdk->bhtk", x, model.W_k[layer])  # (B, h, T, d_k)
        logits.append(c.score_scale * (q @ k.transpose(-2, -1)))  # $c\,QK^T$   (B, h, T, T)
    return logits


@torch.no_grad()
def evaluate_loss(
    model: TinyTransformer,
    task: Task,
    batch_size: int = 256,
    seed: int = 12345,
    head_mask: Optional[torch.Tensor] = None,
) -> float:
    """Loss (nats) on the masked positions of one fresh, seeded batch.

    The default ``seed`` differs from the training seeds used in the course,
    so the batch is held out (the tasks have far more sequences than a run sees).

    Parameters
    ----------
    model : TinyTransformer
    task : Task
    batch_size : int, default 256
    seed : int, default 12345
    head_mask : torch.Tensor, optional, shape (n_layers, n_heads)
        Passed to the model: 0 ablates a head.

    Examples
    --------
    >>> from attention_course.models.tasks import make_task
    >>> model = TinyTransformer(ModelConfig(), seed=0)          # untrained
    >>> round(evaluate_loss(model, make_task("repeated_sequences")), 2)   # ln 64 = 4.16
    4.17
    """
    inputs, targets, mask = task(batch_size, seed=seed)
    logits, _ = model(inputs, head_mask=head_mask)  # (B, T, V)
    return float(masked_loss(logits, targets, mask))


@torch.no_grad()
def head_ablation(
    model: TinyTransformer, task: Task, batch_size: int = 256, seed: int = 12345
) -> np.ndarray:
    r"""Loss increase when each head alone is switched off (Michel et al., 2019).

    .. math::

        \Delta_{\ell h} = \mathcal{L}(\text{head } (\ell, h) \text{ zeroed})
            - \mathcal{L}(\text{all heads})

    on the same evaluation batch. A large :math:`\Delta` marks a head the model
    relies on; a value near 0 marks a head it can do without.

    Returns
    -------
    numpy.ndarray, shape (n_layers, n_heads)

    Examples
    --------
    >>> from attention_course.models.tasks import make_task
    >>> model = TinyTransformer(ModelConfig(n_heads=2), seed=0)
    >>> head_ablation(model, make_task("repeated_sequences"), batch_size=16).shape
    (2, 2)
    """
    c = model.config
    base = evaluate_loss(model, task, batch_size, seed)
    delta = np.zeros((c.n_layers, c.n_heads))
    for layer in range(c.n_layers):
        for head in range(c.n_heads):
            m = torch.ones(c.n_layers, c.n_heads)
            m[layer, head] = 0.0
            delta[layer, head] = evaluate_loss(model, task, batch_size, seed, head_mask=m) - base
    return delta


def attention_pattern_scores(
    weights: list[torch.Tensor], tokens: torch.Tensor
) -> dict[str, np.ndarray]:
    r"""Score every head as a previous-token head and as an induction head.

    For attention weights :math:`A` (rows = queries) on token sequences :math:`s`,

    .. math::

        \text{prev}_{\ell h} = \operatorname{mean}_{i \ge 1} A^{\ell h}_{i,\, i-1},
        \qquad
        \text{induction}_{\ell h} = \operatorname{mean}_{i:\, J(i) \ne \emptyset}
            \sum_{j \in J(i)} A^{\ell h}_{i,\, j + 1},
        \qquad J(i) = \{j < i : s_j = s_i\}

    The induction score is the attention that query :math:`i` pays to the
    tokens that *followed* earlier occurrences of its own token (Olsson et al.,
    2022), averaged over the queries whose token occurred before. On a sequence
    that repeats more than twice, every earlier occurrence is followed by the
    same token, so all of them count. Both scores lie in [0, 1]; 1 is a perfect
    head.

    Parameters
    ----------
    weights : list of torch.Tensor, each (B, h, T, T)
        One entry per layer, as returned by :class:`TinyTransformer`.
    tokens : torch.LongTensor, shape (B, T)

    Returns
    -------
    dict with ``"previous_token"`` and ``"induction"``, each numpy (n_layers, h)

    Examples
    --------
    >>> tokens = torch.tensor([[5, 6, 7, 5, 6, 7]])
    >>> T = 6
    >>> prev = torch.diag(torch.ones(T - 1), -1); prev[0, 0] = 1.0   # attends to i - 1
    >>> ind = torch.eye(T); ind[3:] = torch.eye(T)[1:4]             # attends to j + 1
    >>> w = torch.stack([prev, ind])[None]                          # (1, 2, 6, 6)
    >>> s = attention_pattern_scores([w], tokens)
    >>> s["previous_token"].round(2).tolist(), s["induction"].round(2).tolist()
    ([[1.0, 0.0]], [[0.0, 1.0]])
    """
    if tokens.ndim != 2:
        raise ShapeError(f"tokens have shape {shape_str(tokens)}; expected (B, T)")
    B, T = tokens.shape
    same = tokens[:, :, None] == tokens[:, None, :]  # (B, T, T): s_i == s_j
    earlier = torch.ones(T, T, dtype=torch.bool).tril(diagonal=-1)  # (T, T): j < i
    follows = torch.zeros(B, T, T, dtype=torch.bool)
    follows[:, :, 1:] = (same & earlier)[:, :, :-1]  # (B, T, T): key j + 1 with j in J(i)
    has = follows.any(dim=2)  # (B, T): token i occurred before
    n = has.sum().clamp(min=1)
    prev, ind = [], []
    for w in weights:
        if w.ndim != 4 or w.shape[0] != B or w.shape[-2:] != (T, T):
            raise ShapeError(
                f"weights have shape {shape_str(w)} but tokens have shape {(B, T)}; "
                f"expected (B, h, T, T) = ({B}, h, {T}, {T})"
            )
        w = w.detach().double()
        diag = torch.diagonal(w, offset=-1, dim1=-2, dim2=-1)  # (B, h, T - 1): A[i, i-1]
        prev.append(diag.mean(dim=(0, 2)))  # (h,)
        a = (w * follows[:, None]).sum(dim=3)  # (B, h, T): attention on the j + 1
        ind.append((a * has[:, None]).sum(dim=(0, 2)) / n)  # (h,)
    return {
        "previous_token": torch.stack(prev).numpy(),
        "induction": torch.stack(ind).numpy(),
    }


@torch.no_grad()
def head_scores(
    model: TinyTransformer, task: Task, batch_size: int = 64, seed: int = 12345
) -> dict[str, np.ndarray]:
    """Previous-token and induction scores of every head on a fresh batch of ``task``.

    Runs the model on one seeded batch (use the ``"repeated_sequences"`` task)
    and applies :func:`attention_pattern_scores`.

    Returns
    -------
    dict with ``"previous_token"`` and ``"induction"``, each numpy (n_layers, n_heads)

    Examples
    --------
    >>> from attention_course.models.tasks import make_task
    >>> model = TinyTransformer(ModelConfig(), seed=0)
    >>> scores = head_scores(model, make_task("repeated_sequences"))
    >>> scores["previous_token"].shape, scores["induction"].shape
    ((2, 4), (2, 4))
    """
    inputs, _, _ = task(batch_size, seed=seed)
    _, weights = model(inputs)
    return attention_pattern_scores(weights, inputs)


@torch.no_grad()
def loss_by_period(
    model: TinyTransformer, task: Task, batch_size: int = 512, seed: int = 12345
) -> dict[str, np.ndarray]:
    r"""Loss on the repeated part, split by the period of each sequence.

    For the ``"repeated_sequences"`` task only: sequence ``b`` has period
    :math:`p_b` = the number of unmasked positions. A model without an induction
    mechanism can at best guess among the :math:`p` tokens of the block, so
    compare ``loss`` with :math:`\ln p`.

    Returns
    -------
    dict with ``"period"`` (the periods that occur, sorted), ``"loss"`` (mean
    loss over their masked positions) and ``"count"`` (number of such positions),
    each a 1-D numpy array of the same length.

    Examples
    --------
    >>> from attention_course.models.tasks import make_task
    >>> model = TinyTransformer(ModelConfig(), seed=0)
    >>> loss_by_period(model, make_task("repeated_sequences"))["period"].tolist()
    [6, 7, 8, 9, 10, 11, 12, 13, 14]
    """
    if task.name != "repeated_sequences":
        raise ValueError(f"loss_by_period needs the 'repeated_sequences' task, got {task.name!r}")
    inputs, targets, mask = task(batch_size, seed=seed)
    logits, _ = model(inputs)  # (B, T, V)
    nll = torch.nn.functional.cross_entropy(
        logits.transpose(1, 2), targets, reduction="none"
    )  # (B, T)
    periods = (~mask).sum(dim=1)  # (B,): mask is False exactly for t < p
    ps, losses, counts = [], [], []
    for p in periods.unique().tolist():
        sel = mask & (periods == p)[:, None]  # (B, T)
        ps.append(p)
        losses.append(float(nll[sel].mean()))
        counts.append(int(sel.sum()))
    return {"period": np.array(ps), "loss": np.array(losses), "count": np.array(counts)}
