"""The backward-swap test of chapter 6: swapped_softmax against autograd, and the experiment's plumbing."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from attention_course.core._backend import ShapeError
from attention_course.chapters.scaling import backward_swap as sb
from attention_course.models.experiments import result_document, write_json
from attention_course.chapters.scaling.saturated_rows import BACKWARDS, swapped_softmax
from attention_course.chapters.scaling.saturation_training import row_gradients
from attention_course.chapters.scaling.training_grid import run_grid
from attention_course.models import tiny
from attention_course.models.training import train

# float64 throughout: the swapped backward and autograd's differ only by round-off of a few
# operations on numbers of order 1, far below 1e-12.
TOL = dict(rtol=1e-12, atol=1e-12)
pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny models: faster on a shared 2-core machine
#: The experiment's own configuration, small: one seed at d_k = 8, two steps, no score motion.
SMALL = replace(sb.BACKWARD.config, seeds=(0,), d_ks=(8,), steps=2, motion_every=0)


def scores_and_grad(seed=0, shape=(3, 5, 6), spread=6.0):
    g = torch.Generator().manual_seed(seed)
    s = torch.randn(*shape, generator=g, dtype=torch.float64) * spread  # (B, T, S), wide: some rows saturate
    up = torch.randn(*shape, generator=g, dtype=torch.float64)  # dL/dp
    mask = torch.tril(torch.ones(shape[-2], shape[-1], dtype=torch.bool))  # (T, S), True = may attend
    return s, up, mask


def masked_softmax(s, mask):
    return torch.softmax(s.masked_fill(~mask, -torch.inf), dim=-1)  # (..., T, S), over S


def grad_of(fn, s, up):
    x = s.clone().requires_grad_(True)
    (fn(x) * up).sum().backward()
    return x.grad


@pytest.mark.parametrize("kind", BACKWARDS)
def test_forward_is_the_softmax(kind):
    s, _, mask = scores_and_grad()
    torch.testing.assert_close(swapped_softmax(s, mask, tau=0.125, backward=kind), masked_softmax(s, mask), **TOL)


@pytest.mark.parametrize("kind", BACKWARDS)
def test_tau_one_gives_the_true_gradient(kind):
    s, up, mask = scores_and_grad()
    ref = grad_of(lambda x: masked_softmax(x, mask), s, up)  # autograd through torch.softmax
    got = grad_of(lambda x: swapped_softmax(x, mask, tau=1.0, backward=kind), s, up)
    torch.testing.assert_close(got, ref, **TOL)


@pytest.mark.parametrize("tau", [0.125, 8.0])
def test_tempered_is_the_other_softmax_gradient_without_its_chain_factor(tau):
    s, up, mask = scores_and_grad()
    ref = grad_of(lambda x: masked_softmax(tau * x, mask), s, up) / tau  # d softmax(tau s)/ds = tau J(p_tau)
    got = grad_of(lambda x: swapped_softmax(x, mask, tau=tau, backward="tempered"), s, up)
    torch.testing.assert_close(got, ref, **TOL)


def test_size_and_direction_swap_one_property_each():
    s, up, mask = scores_and_grad()
    true = grad_of(lambda x: masked_softmax(x, mask), s, up)
    tempered = grad_of(lambda x: masked_softmax(x / 8, mask), s, up) * 8
    size = grad_of(lambda x: swapped_softmax(x, mask, tau=1 / 8, backward="size"), s, up)
    direction = grad_of(lambda x: swapped_softmax(x, mask, tau=1 / 8, backward="direction"), s, up)
    norm = lambda x: torch.linalg.vector_norm(x, dim=-1)  # (B, T)
    unit = lambda x: x / norm(x)[..., None]
    rows = norm(true) > 1e-200  # query 0 has one key: gradient exactly 0, no direction
    assert (norm(true)[rows] < norm(tempered)[rows]).any()  # the swap changes something
    torch.testing.assert_close(norm(size), norm(tempered), **TOL)
    torch.testing.assert_close(unit(size)[rows], unit(true)[rows], rtol=1e-9, atol=1e-9)  # 1/|d| amplifies round-off
    torch.testing.assert_close(norm(direction), norm(true), **TOL)
    torch.testing.assert_close(unit(direction)[rows], unit(tempered)[rows], **TOL)


def test_saturated_swap_tempers_exactly_the_saturated_rows():
    s, up, mask = scores_and_grad(spread=8.0)
    true = grad_of(lambda x: masked_softmax(x, mask), s, up)  # autograd references, row by row
    tempered = grad_of(lambda x: masked_softmax(x / 8, mask), s, up) * 8
    got = grad_of(lambda x: swapped_softmax(x, mask, tau=1 / 8, backward="saturated"), s, up)
    sat = masked_softmax(s, mask).amax(-1) > 0.99  # (B, T): the rows the swap tempers
    assert sat.any() and (~sat).any()  # both kinds of row are present
    torch.testing.assert_close(got[sat], tempered[sat], **TOL)
    torch.testing.assert_close(got[~sat], true[~sat], **TOL)


@pytest.mark.parametrize("kind", BACKWARDS)
def test_masked_keys_get_no_gradient(kind):
    s, up, mask = scores_and_grad()
    got = grad_of(lambda x: swapped_softmax(x, mask, tau=0.125, backward=kind), s, up)
    assert torch.all(got[..., ~mask] == 0)


def test_bad_inputs():
    s, _, mask = scores_and_grad()
    with pytest.raises(ValueError, match="backward='sideways'"):
        swapped_softmax(s, mask, backward="sideways")
    with pytest.raises(ShapeError, match=r"mask has shape \(4, 4\)"):
        swapped_softmax(s, mask[:4, :4])
    with pytest.raises(ShapeError, match=r"s has shape \(6,\)"):
        swapped_softmax(s[0, 0])


def test_swapped_backward_true_matches_the_model_and_restores_it():
    model, _ = sb.build_variant(8, "none", d_model=8, seed=0)
    batch = sb.make_task(sb.TASK)(4, seed=0)

    def grads():
        model.zero_grad(set_to_none=True)
        logits, _ = model(batch.inputs)
        torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch.targets.flatten()).backward()
        return [p.grad.clone() for p in model.parameters()]

    original = tiny.scaled_dot_product_attention
    ref = grads()
    with sb.swapped_backward(1.0, "true"):
        assert tiny.scaled_dot_product_attention is not original
        got = grads()
    assert tiny.scaled_dot_product_attention is original
    for a, b in zip(got, ref):  # float32: the swapped path rounds differently, values of order 1
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    with pytest.raises(RuntimeError, match="inside"), sb.swapped_backward(0.5, "tempered"):
        raise RuntimeError("inside")
    assert tiny.scaled_dot_product_attention is original


def test_unknown_variant_and_round_trip(tmp_path):
    with pytest.raises(ValueError, match="unknown variants"):
        run_grid(replace(SMALL, steps=1, variants=("sideways",)))
    r = run_grid(replace(SMALL, seeds=(0, 1), variants=("unscaled", "unscaled, tempered backward")))
    write_json(result_document(r, {"note": "test"}), tmp_path / "b.json")
    back, meta = sb.load_backward(tmp_path / "b.json")
    assert back.variants == r.variants and meta == {"note": "test"}
    np.testing.assert_array_equal(back.eval_loss, r.eval_loss)
    np.testing.assert_array_equal(back.saturated, r.saturated)


def test_a_true_backward_trains_as_train_does_and_a_swapped_one_differently():
    true, swapped = (sb.train_swapped(8, *sb.VARIANTS[v], steps=3, eval_batch=8)
                     for v in ("unscaled", "unscaled, tempered backward"))
    model, optimizer = sb.build_variant(8, "none")
    train(model, sb.make_task(sb.TASK), steps=3, lr=1e-2, optimizer=optimizer)  # reference: no swap at all
    loss, peak, _ = row_gradients(model, *sb.make_task(sb.TASK)(8, seed=12345))
    assert true.eval_loss == loss and true.saturated.tolist() == [float((p > 0.99).mean()) for p in peak]
    assert swapped.eval_loss != true.eval_loss


def test_score_motion_rejects_a_bad_interval():
    with pytest.raises(ValueError, match="not a multiple"):
        sb.score_motion(8, steps=5, every=2)


def test_stored_run():
    r, _ = sb.load_backward()
    assert set(r.variants) <= set(sb.VARIANTS) and r.eval_loss.shape == (len(r.variants), len(r.seeds))
    assert r.settings["d_k"] == 64 and r.saturated.shape[-1] == 2
    assert np.all((r.eval_loss > 0) & (r.eval_loss < 5))  # losses in nats; chance is ln 64 = 4.16


@pytest.mark.parametrize("kind", BACKWARDS)
def test_fully_saturated_rows_stay_finite(kind):
    # float32 scores spread by 300: the true row gradients underflow to 0 or near it, where the
    # size swap's ratio of norms alone would overflow (it gave NaN before the fix)
    s, up, mask = scores_and_grad(spread=300.0)
    got = grad_of(lambda x: swapped_softmax(x, mask, tau=1 / 8, backward=kind), s.float(), up.float())
    assert torch.isfinite(got).all()


def test_size_swap_has_the_tempered_norm_on_nearly_saturated_rows():
    # float32, spread 60: some true row gradients have entries near 1e-25, whose squares underflow;
    # a naive norm reads 0 there and the size swap would blow those rows up by many orders
    s, up, mask = scores_and_grad(spread=60.0)
    s32, up32 = s.float(), up.float()
    tempered = grad_of(lambda x: masked_softmax(x / 8, mask), s32, up32).double() * 8  # autograd, float32
    size = grad_of(lambda x: swapped_softmax(x, mask, tau=1 / 8, backward="size"), s32, up32).double()
    true32 = grad_of(lambda x: masked_softmax(x, mask), s32, up32)
    rows = true32.abs().amax(-1) > 0  # rows with a float32 gradient at all (a direction to keep)
    tiny_rows = rows & (torch.linalg.vector_norm(true32, dim=-1) == 0)  # where a naive float32 norm fails
    assert tiny_rows.any()
    # float32 has 24 bits: relative error of a few 1e-7 per operation on the unit row and the norms
    torch.testing.assert_close(torch.linalg.vector_norm(size, dim=-1)[rows],
                               torch.linalg.vector_norm(tempered, dim=-1)[rows], rtol=1e-5, atol=0)


def test_command_line_writes_a_readable_run(tmp_path):
    from attention_course.__main__ import main

    out = tmp_path / "b.json"
    assert main(["scaling-backward", "--out", str(out), "--seeds", "0", "--steps", "1", "--variants", "unscaled",
                 "--motion-every", "1"]) == 0
    r, meta = sb.load_backward(out)
    assert r.variants == ("unscaled",) and r.motion["median_change"].shape == (1, 1)
    assert meta["command"] == "python -m attention_course scaling-backward" and meta["arguments"]["steps"] == 1


def test_stored_saturated_rows_run_matches_the_stored_run():
    rows, _ = sb.load_backward(sb.STORED_BACKWARD_ROWS)
    full, _ = sb.load_backward()
    assert rows.variants == ("unscaled, saturated rows tempered", "small W_Q init, saturated rows tempered")
    assert rows.seeds.tolist() == full.seeds.tolist()
    assert all(rows.settings[k] == full.settings[k] for k in ("d_k", "steps", "lr", "d_model", "n_layers"))
    both = sb.combine_backward(full, rows)
    assert both.variants == full.variants + rows.variants and both.eval_loss.shape == (len(both.variants), 5)
    with pytest.raises(ValueError, match="differ"):
        sb.combine_backward(full, run_grid(replace(SMALL, variants=("unscaled",))))


@pytest.mark.extended
@pytest.mark.numerics
def test_one_stored_saturated_rows_run_is_reproduced():
    rows, _ = sb.load_backward(sb.STORED_BACKWARD_ROWS)
    run = sb.train_swapped(64, *sb.VARIANTS["unscaled, saturated rows tempered"], steps=1000, seed=3)
    stored = float(rows.eval_loss[0, 3])  # 0.05: a rescued seed
    # Trained (below the ledger's 1 nat), as stored. From this saturated start the run is chaotic: the
    # same code gave 0.05 nats with AVX2 kernels (the stored run) and 0.75 with AVX-512, so only the
    # verdict's own line is asserted.
    assert stored < 1 and run.eval_loss < 1
