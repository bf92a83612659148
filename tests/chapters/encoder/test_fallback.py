"""fallback.py: yours once it passes, the package's until then; each function is checked once."""

from __future__ import annotations

import attention_course.chapters.encoder.fallback as fb
from attention_course.chapters.encoder.block import block
from attention_course.chapters.encoder.layer_norm import layer_norm
from attention_course.course.solutions import SOLUTIONS
import torch

from attention_course.exercises import REGISTRY


def _stub(x, layer, num_heads, mask, eps):
    raise NotImplementedError


def test_solved_asks_the_checker():
    assert fb.solved("post-ln-block", SOLUTIONS["post-ln-block"]) is True
    assert fb.solved("post-ln-block", _stub) is False
    wrong = REGISTRY["post-ln-block"].mutants[0].fn
    assert fb.solved("post-ln-block", wrong) is False
    assert fb.solved("post-ln-block", "not a function") is False  # never raises
    assert fb.solved("no-such-exercise", SOLUTIONS["post-ln-block"]) is False


def test_a_function_is_checked_once(monkeypatch):
    calls = []
    real = fb.evaluate
    monkeypatch.setattr(fb, "evaluate", lambda eid, fn: calls.append(eid) or real(eid, fn))

    def mine(x, layer, num_heads, mask, eps):
        return SOLUTIONS["post-ln-block"](x, layer, num_heads, mask, eps)

    assert fb.solved("post-ln-block", mine) and fb.solved("post-ln-block", mine)
    assert calls == ["post-ln-block"]

    def mine(x, layer, num_heads, mask, eps):  # noqa: F811  (a redefinition is a new function: checked again)
        return SOLUTIONS["post-ln-block"](x, layer, num_heads, mask, eps)

    assert fb.solved("post-ln-block", mine) and calls == ["post-ln-block", "post-ln-block"]


def test_an_unhashable_callable_is_checked_every_time():
    class Unhashable:
        __hash__ = None

        def __call__(self, x, layer, num_heads, mask, eps):
            return SOLUTIONS["post-ln-block"](x, layer, num_heads, mask, eps)

    assert fb.solved("post-ln-block", Unhashable())


def test_yours_or_ours_and_describe_parts(capsys):
    mine = SOLUTIONS["post-ln-block"]
    picked = fb.yours_or_ours("post-ln-block", mine, block)
    assert isinstance(picked, fb.Guarded) and picked.yours is mine
    assert fb.yours_or_ours("post-ln-block", _stub, block) is block
    assert capsys.readouterr().out == ""  # a passing part and the untouched stub: nothing to say

    def my_block(x, layer, num_heads, mask, eps):
        return mine(x, layer, num_heads, mask, eps)

    assert fb.describe_parts({"post_ln_block": block, "mine": my_block}) == (
        "post_ln_block: the course's version (ch.block), until yours passes its exercise\nmine: yours (my_block)")


def test_a_failing_part_is_replaced_and_the_cell_says_why(capsys):
    def my_block(x, layer, num_heads, mask, eps):
        return SOLUTIONS["post-ln-block"](x, layer, num_heads, mask, eps).numpy()  # numpy: the next parts need tensors

    assert fb.yours_or_ours("post-ln-block", my_block, block) is block
    out = capsys.readouterr().out
    assert out.startswith("block: the course's version (ch.block), because my_block does not pass")
    assert "expected a torch tensor" in out


def test_a_passing_part_that_breaks_on_new_inputs_is_replaced_not_raised(capsys):
    """A part that returns float64 for float32 inputs (MiniLM's): the guard sees the dtype differ from the
    package's on the first float32 call, uses the package's, and says so once."""
    def my_layer_norm(x, gamma, beta, eps):
        return layer_norm(x.double(), gamma.double(), beta.double(), eps)  # always float64

    picked = fb.Guarded("layer_norm", my_layer_norm, layer_norm)
    x32 = torch.randn(1, 3, 8)
    y = picked(x32, torch.ones(8), torch.zeros(8), 1e-12)
    assert y.dtype == torch.float32 and picked.replaced
    assert "the course's version from here on" in capsys.readouterr().out
    picked(x32, torch.ones(8), torch.zeros(8), 1e-12)
    assert capsys.readouterr().out == ""  # said once
    assert "in place of yours" in fb.describe_parts({"layer_norm": picked})

    def raising(x, gamma, beta, eps):
        if x.dtype == torch.float32:
            raise RuntimeError("expected scalar type Double")
        return layer_norm(x, gamma, beta, eps)

    guarded = fb.Guarded("layer_norm", raising, layer_norm)
    assert guarded(x32, torch.ones(8), torch.zeros(8), 1e-12).dtype == torch.float32 and guarded.replaced
