"""vision: patches against explicit slicing, the ViT's attention against nn.MultiheadAttention-free references,
and the invariances the deciding number must have (q -> a q with k -> k / a, a shift of every key,
a permutation of heads); vision_locality and vision_figures: summary and figures on a small document."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from attention_course.chapters.lowrank import attention_distance as ad
from attention_course.chapters.lowrank import vision as vi
from attention_course.chapters.lowrank import vision_figures as vf
from attention_course.chapters.lowrank import vision_locality as vr
from attention_course.core._backend import ShapeError
from attention_course.models.experiments import run


def test_patchify_against_slicing():
    x = torch.randn(2, 8, 8, generator=torch.Generator().manual_seed(0))
    for p in (1, 2, 4):
        g = 8 // p
        got = vi.patchify(x, p)
        for i in range(g * g):
            r, c = divmod(i, g)
            torch.testing.assert_close(got[:, i], x[:, r * p:(r + 1) * p, c * p:(c + 1) * p].reshape(2, -1))
    with pytest.raises(ShapeError, match=r"images have shape \(2, 8, 7\)"):
        vi.patchify(x[:, :, :7], 2)


def test_patch_centres_are_the_mean_pixel_coordinate_of_each_patch():
    rows, cols = np.meshgrid(np.arange(8.0), np.arange(8.0), indexing="ij")
    for p in (1, 2, 4):
        mean_row = vi.patchify(torch.tensor(rows)[None], p)[0].mean(-1).numpy()
        mean_col = vi.patchify(torch.tensor(cols)[None], p)[0].mean(-1).numpy()
        np.testing.assert_allclose(vi.patch_centres(p), np.stack([mean_row, mean_col], 1))


def test_the_digits_split_is_disjoint_and_seeded():
    x_tr, y_tr, x_te, y_te = vi.load_digit_split()
    assert len(x_tr) + len(x_te) == 1797 and set(y_te.tolist()) == set(range(10))
    again = vi.load_digit_split()
    torch.testing.assert_close(again[2], x_te)
    flat = {tuple(im.flatten().tolist()) for im in x_te}
    assert sum(tuple(im.flatten().tolist()) in flat for im in x_tr[:200]) <= 2  # the digits have a few duplicates


def _model_and_images(seed=0):
    model = vi.TinyViT(vi.ViTConfig(n_layers=2), seed=seed)
    images = vi.load_digit_split()[2][:12]
    return model, images


def _attention_reference(block, x):
    """One block's attention weights, by the textbook formula, head by head."""
    d = x.shape[-1]
    h, d_k = block.h, d // block.h
    qkv = block.W_qkv(block.ln1(x))  # (B, n, 3 d)
    q, k = qkv[..., :d], qkv[..., d:2 * d]
    out = []
    for head in range(h):
        qh, kh = q[..., head * d_k:(head + 1) * d_k], k[..., head * d_k:(head + 1) * d_k]
        out.append(torch.softmax(qh @ kh.transpose(-1, -2) / d_k ** 0.5, dim=-1))
    return torch.stack(out, 1)  # (B, h, n, n)


@torch.no_grad()
def test_the_vit_attention_is_the_textbook_formula():
    model, images = _model_and_images()
    x = model.W_E(vi.patchify(images, 2)) + model.W_pos
    _, weights = model(images)
    torch.testing.assert_close(weights[0], _attention_reference(model.blocks[0], x), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(weights[0].sum(-1), torch.ones(12, 4, 16))


@torch.no_grad()
def _distances(model, images):
    D = ad.grid_distances(vi.patch_centres(2))
    return np.stack([ad.mean_attention_distance(w.double().numpy(), D) for w in model(images)[1]])  # (L, h)


@torch.no_grad()
def test_distances_do_not_move_when_attention_does_not():
    """q -> a q with k -> k / a, and one vector added to every key, leave every weight and every distance."""
    model, images = _model_and_images()
    before = _distances(model, images)
    d = model.config.d_model
    for block in model.blocks:
        W, b = block.W_qkv.weight, block.W_qkv.bias  # rows 0..d-1: q, d..2d-1: k
        W[:d] *= 3.0
        b[:d] *= 3.0
        W[d:2 * d] /= 3.0
        b[d:2 * d] /= 3.0
        b[d:2 * d] += torch.linspace(-1, 1, d)  # k_j -> k_j + c for every key j: q.c is the same for all keys
    # float32 attention: weights agree to about 1e-6, distances (below 8 px) to about 1e-5
    np.testing.assert_allclose(_distances(model, images), before, rtol=1e-4, atol=1e-5)


@torch.no_grad()
def test_permuting_heads_permutes_the_distances_and_keeps_the_shares():
    model, images = _model_and_images()
    before = _distances(model, images)
    d, h = model.config.d_model, model.config.n_heads
    d_k, perm = d // h, [2, 0, 3, 1]
    idx = torch.cat([torch.arange(p * d_k, (p + 1) * d_k) for p in perm])  # new head i = old head perm[i]
    logits_before = model(images)[0]
    for block in model.blocks:
        rows = torch.cat([idx, idx + d, idx + 2 * d])
        block.W_qkv.weight.copy_(block.W_qkv.weight[rows])
        block.W_qkv.bias.copy_(block.W_qkv.bias[rows])
        block.W_o.weight.copy_(block.W_o.weight[:, idx])
    torch.testing.assert_close(model(images)[0], logits_before, rtol=1e-5, atol=1e-5)  # the same function
    np.testing.assert_allclose(_distances(model, images), before[:, perm], rtol=1e-5)


def test_vit_rejects_wrong_image_shapes():
    with pytest.raises(ShapeError, match=r"images have shape \(2, 4, 4\); expected \(B, 8, 8\)"):
        vi.TinyViT()(torch.zeros(2, 4, 4))


def test_training_is_seeded_and_leaves_the_global_random_state_alone():
    x_tr, y_tr, _, _ = vi.load_digit_split()
    runs = []
    for _ in range(2):
        model = vi.TinyViT(vi.ViTConfig(n_layers=1, d_model=16, n_heads=2), seed=0)
        state = torch.random.get_rng_state()
        losses = vi.train_vit(model, x_tr[:64], y_tr[:64], epochs=2, batch_size=32, seed=1)
        assert torch.equal(torch.random.get_rng_state(), state)
        runs.append((losses, model.W_pos.detach().clone()))
    assert runs[0][0].shape == (2,) and np.array_equal(runs[0][0], runs[1][0])
    torch.testing.assert_close(runs[0][1], runs[1][1], rtol=0, atol=0)
    assert abs(runs[0][0][0] - np.log(10)) < 0.3  # an untrained classifier of 10 classes: about ln 10 nats


def _doc():
    layer = {"distance": [2.0, 4.0], "p_space": [0.001, 0.5], "p_content": [0.5, 0.002], "null_mean": [4.0, 4.0],
             "null_p01": [3.5, 3.6], "self_weight": [0.5, 0.1], "mass": [0.6, 0.45], "p_mass": [0.001, 0.001],
             "content_mass": [0.3, 0.55], "p_content_mass": [0.5, 0.002], "mass_uniform": 0.39}
    untrained = {"distance": [4.0, 4.0], "p_space": [0.3, 0.001], "p_content": [0.5, 0.5], "self_weight": [0.1, 0.1],
                 "mass": [0.4, 0.41], "p_mass": [0.3, 0.001], "content_mass": [0.4, 0.4], "p_content_mass": [0.5, 0.5],
                 "mass_uniform": 0.39}
    return {"alpha": 0.005, "uniform": 4.0,
            "runs": [{"seed": s, "test_accuracy": 0.9 + 0.02 * s, "layers": [layer, layer], "untrained": [untrained] * 2}
                     for s in range(2)]}


def test_summary_counts_near_heads_per_layer():
    """Near = most of the weight on the neighbourhood and beyond the shuffle; a p-value alone is only a tilt."""
    s = vr.summarise_vision(_doc())
    assert s["local_share"] == [0.5, 0.5] and s["content_share"] == [0.5, 0.5] and s["near_share"] == [1.0, 1.0]
    assert s["untrained_near_share"] == [0.0, 0.0] and s["untrained_tilt_share"] == [0.5, 0.5]
    assert s["tilt_share"] == [1.0, 1.0] and s["n_heads"] == 8 and s["n_seeds"] == 2
    assert s["max_mass"] == [0.6, 0.6] and s["mass_uniform"] == 0.39
    assert s["accuracy_mean"] == pytest.approx(0.91) and s["accuracy_std"] == pytest.approx(np.std([0.9, 0.92], ddof=1))
    assert vr.summarise_vision(_doc(), alpha=0.0005)["near_share"] == [0.0, 0.0]


def test_figures_render_and_label_their_axes():
    fig = vf.plot_neighbourhood_mass(_doc())
    fig.canvas.draw()
    assert all(ax.get_xlabel() == "layer" for ax in fig.axes) and fig.axes[0].get_ylabel() == "share of the weight"


def test_the_shipped_run_is_complete():
    doc = vr.load_vision()
    s = doc["settings"]
    assert len(doc["runs"]) >= 5 and s["n_layers"] == len(doc["runs"][0]["layers"])
    assert all(len(m["distance"]) == s["n_heads"] for r in doc["runs"] for m in r["layers"] + r["untrained"])
    assert doc["uniform"] == pytest.approx(ad.uniform_distance(ad.grid_distances(vi.patch_centres(s["patch"]))))


@pytest.mark.extended
def test_the_shipped_run_recomputes_its_first_seed():
    doc = vr.load_vision()
    config = vr.VisionConfig(seeds=1, first_seed=doc["runs"][0]["seed"])  # the deciding run used seeds 8-15
    again = {"runs": run(vr.PATCH_RUN, config).records}  # what ``vision-run --seeds 1 --first-seed 8`` computes
    assert again["runs"][0]["test_accuracy"] == pytest.approx(doc["runs"][0]["test_accuracy"], abs=0.02)
    # float32 training drifts with the CPU's kernels: AVX-512 against the stored AVX2 run moved one
    # head's mean distance by 0.08 px (of a uniform 4.14); 0.15 px is twice that, still well inside
    # the gap between the local heads and uniform attention that the verdict reads.
    np.testing.assert_allclose(again["runs"][0]["layers"][0]["distance"], doc["runs"][0]["layers"][0]["distance"],
                               atol=0.15)
    json.dumps(again)  # serialisable
