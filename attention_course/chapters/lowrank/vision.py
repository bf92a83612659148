r"""A tiny vision transformer on scikit-learn's 8×8 digits: images as sequences of patch tokens.

.. math::

    x^{(0)}_i = \operatorname{vec}(P_i) W_E + e_i, \qquad
    x \leftarrow x + \operatorname{MHA}(\operatorname{LN}(x)), \qquad
    x \leftarrow x + \operatorname{MLP}(\operatorname{LN}(x)), \qquad
    \text{logits} = \operatorname{LN}\big(\tfrac1n \textstyle\sum_i x_i\big) W_U

Mean pooling replaces the class token, so every attention row is a distribution over patches.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ...core._backend import ShapeError, shape_str
from ...core.attention import scaled_dot_product_attention
from ...core.multihead import merge_heads, split_heads
from ...models.adamw import AdamW

__all__ = ["accuracy"]

IMAGE_SIDE = 8  # load_digits: 8×8 images, pixel values 0..16


def load_digit_split(test_fraction: float = 0.25, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor,
                                                                            torch.Tensor, torch.Tensor]:
    """scikit-learn's 1,797 handwritten digits, scaled to [0, 1], split into train and test sets.

    Returns ``x_train, y_train, x_test, y_test``: images ``(N, 8, 8)`` float32 and labels ``(N,)``
    int64, split by a permutation seeded with ``seed``.

    Examples
    --------
    >>> x_tr, y_tr, x_te, y_te = load_digit_split()
    >>> tuple(x_tr.shape), tuple(x_te.shape), float(x_tr.max()), int(y_te.max())
    ((1348, 8, 8), (449, 8, 8), 1.0, 9)
    """
    from sklearn.datasets import load_digits  # shipped in the wheel: no download

    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction={test_fraction!r}; expected a number in (0, 1)")
    digits = load_digits()
    x = torch.tensor(digits.images / 16.0, dtype=torch.float32)  # (N, 8, 8)
    y = torch.tensor(digits.target, dtype=torch.long)  # (N,)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(int(seed)))
    n_test = int(round(test_fraction * len(y)))
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


def patchify(images: torch.Tensor, patch: int = 2) -> torch.Tensor:
    r"""Cut images into non-overlapping ``patch × patch`` patches, row-major over the grid.

    Patch :math:`i = r\,g + c` (grid side :math:`g = 8/p`) holds pixels
    :math:`[r p, (r+1) p) \times [c p, (c+1) p)`, flattened row-major.

    ``images`` (B, H, W), H and W divisible by ``patch`` -> (B, (H/p)(W/p), p * p).

    Examples
    --------
    >>> x = torch.arange(16.).reshape(1, 4, 4)
    >>> patchify(x, 2)[0]
    tensor([[ 0.,  1.,  4.,  5.],
            [ 2.,  3.,  6.,  7.],
            [ 8.,  9., 12., 13.],
            [10., 11., 14., 15.]])
    """
    if images.ndim != 3 or images.shape[1] % patch or images.shape[2] % patch:
        raise ShapeError(f"images have shape {shape_str(images)}; expected (B, H, W) with H and W "
                         f"divisible by patch={patch}")
    B, H, W = images.shape
    g_h, g_w = H // patch, W // patch
    x = images.reshape(B, g_h, patch, g_w, patch)  # (B, g_h, p, g_w, p)
    x = x.permute(0, 1, 3, 2, 4)  # (B, g_h, g_w, p, p)
    return x.reshape(B, g_h * g_w, patch * patch)  # (B, n, p²)


def patch_centres(patch: int = 2, side: int = IMAGE_SIDE) -> np.ndarray:
    """Pixel coordinates (row, column) of each patch's centre, in :func:`patchify`'s order.

    Examples
    --------
    >>> patch_centres(4)
    array([[1.5, 1.5],
           [1.5, 5.5],
           [5.5, 1.5],
           [5.5, 5.5]])
    """
    if side % patch:
        raise ValueError(f"patch={patch} does not divide the image side {side}")
    g = side // patch
    r, c = np.divmod(np.arange(g * g), g)  # grid row and column of patch i = r g + c
    return np.stack([r, c], axis=1) * patch + (patch - 1) / 2  # (n, 2) pixels


@dataclass(frozen=True)
class ViTConfig:
    """Sizes of :class:`TinyViT`: ``d_model`` split over ``n_heads`` heads, an MLP of width ``4 d_model``."""

    patch: int = 2
    d_model: int = 32
    n_heads: int = 4
    n_layers: int = 2
    n_classes: int = 10

    @property
    def n_patches(self) -> int:
        """Tokens per image, ``(8 / patch)²``."""
        return (IMAGE_SIDE // self.patch) ** 2


class _Block(nn.Module):
    def __init__(self, d: int, h: int) -> None:
        super().__init__()
        self.h = h
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.W_qkv = nn.Linear(d, 3 * d)
        self.W_o = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        qkv = self.W_qkv(self.ln1(x))  # (B, n, 3d): queries, keys and values side by side
        q, k, v = (split_heads(t, self.h) for t in qkv.chunk(3, dim=-1))  # each (B, h, n, d_k)
        z, w = scaled_dot_product_attention(q, k, v)  # z (B, h, n, d_k); w (B, h, n, n), softmax over keys
        x = x + self.W_o(merge_heads(z))  # (B, n, h d_k) -> (B, n, d)
        return x + self.mlp(self.ln2(x)), w


class TinyViT(nn.Module):
    """A vision transformer for 8×8 images; returns the logits and every layer's attention weights.

    ``seed`` seeds the initialisation (the global random state is restored afterwards).

    Examples
    --------
    >>> model = TinyViT(ViTConfig(n_layers=2), seed=0)
    >>> logits, weights = model(torch.zeros(3, 8, 8))
    >>> tuple(logits.shape), len(weights), tuple(weights[0].shape)
    ((3, 10), 2, (3, 4, 16, 16))
    """

    def __init__(self, config: ViTConfig = ViTConfig(), seed: int = 0) -> None:
        super().__init__()
        self.config = c = config
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed))
            self.W_E = nn.Linear(c.patch * c.patch, c.d_model)  # patch pixels -> token
            self.W_pos = nn.Parameter(0.02 * torch.randn(c.n_patches, c.d_model))  # one per grid cell
            self.blocks = nn.ModuleList([_Block(c.d_model, c.n_heads) for _ in range(c.n_layers)])
            self.ln = nn.LayerNorm(c.d_model)
            self.W_U = nn.Linear(c.d_model, c.n_classes)

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Class logits ``(B, n_classes)`` and the attention weights, one ``(B, h, n, n)`` per layer."""
        side = IMAGE_SIDE
        if images.ndim != 3 or tuple(images.shape[1:]) != (side, side):
            raise ShapeError(f"images have shape {shape_str(images)}; expected (B, {side}, {side})")
        x = self.W_E(patchify(images, self.config.patch)) + self.W_pos  # (B, n, d_model)
        weights = []
        for block in self.blocks:
            x, w = block(x)  # (B, n, d_model), (B, h, n, n)
            weights.append(w)
        return self.W_U(self.ln(x.mean(dim=1))), weights  # (B, n_classes)


def train_vit(model: TinyViT, x: torch.Tensor, y: torch.Tensor, epochs: int = 30, lr: float = 3e-3,
              batch_size: int = 64, seed: int = 0) -> np.ndarray:
    r"""Train ``model`` in place with AdamW on cross-entropy; return the mean loss of each epoch.

    Each epoch visits the images ``x`` (N, 8, 8) once in a seeded order, at a constant learning rate
    without weight decay; the global random state is left as it was. Returns (epochs,) mean losses.
    """
    if len(x) != len(y):
        raise ShapeError(f"x has shape {shape_str(x)} but y has shape {shape_str(y)}; expected (N, 8, 8) and (N,)")
    g = torch.Generator().manual_seed(int(seed))
    opt = AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    history = np.empty(epochs)
    model.train()
    for epoch in range(epochs):
        order, total = torch.randperm(len(y), generator=g), 0.0
        for start in range(0, len(y), batch_size):
            idx = order[start:start + batch_size]
            loss = nn.functional.cross_entropy(model(x[idx])[0], y[idx])  # mean over the batch
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        history[epoch] = total / len(y)
    model.eval()
    return history


@torch.no_grad()
def accuracy(model: TinyViT, x: torch.Tensor, y: torch.Tensor) -> float:
    """Share of images whose largest logit is the true class."""
    return float((model(x)[0].argmax(dim=1) == y).float().mean())
