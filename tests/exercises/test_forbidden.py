"""A forbidden shortcut is seen however it is written: by name, through a module, inside a class or a helper."""

from __future__ import annotations

import math
import types

import torch
import torch.nn.functional as F
from torch.nn.functional import layer_norm as imported_layer_norm

from attention_course.chapters.encoder import exercises as bx
from attention_course.exercises import evaluate
from attention_course.exercises._forbidden import names_used, spy, uses_any

TORCH_LN = "you called torch's LayerNorm"


def _learner(source: str, **names):
    """A function defined as in a notebook (module __main__), from its source."""
    scope = {"__name__": "__main__", "torch": torch, "F": F, "math": math, **names}
    exec(source, scope)  # noqa: S102 - the test's own source
    return scope


def _block_with(norm):
    """A post-LN block (the exercise `post-ln-block`) whose two LayerNorms are ``norm(z, weight, bias, eps)``."""
    def mine(x, L, h, m, eps):
        a = norm(x + bx.self_attention(x, L, h, m)[0], L.ln1_weight, L.ln1_bias, eps)
        return norm(a + bx.feed_forward(a, L), L.ln2_weight, L.ln2_bias, eps)
    return mine


def test_a_call_through_a_module_is_spied():
    fn = _block_with(lambda z, w, b, eps: F.layer_norm(z, (z.shape[-1],), w, b, eps))
    assert TORCH_LN in evaluate("post-ln-block", fn).message
    fn = _block_with(lambda z, w, b, eps: torch.nn.functional.layer_norm(z, (z.shape[-1],), w, b, eps))
    assert TORCH_LN in evaluate("post-ln-block", fn).message


def test_a_module_object_is_spied_through_its_forward():
    fn = _block_with(lambda z, w, b, eps: torch.nn.LayerNorm(z.shape[-1], eps=eps, elementwise_affine=False,
                                                            dtype=z.dtype)(z) * w + b)
    assert TORCH_LN in evaluate("post-ln-block", fn).message


def test_a_name_imported_from_torch_is_seen_in_the_code():
    fn = _block_with(lambda z, w, b, eps: imported_layer_norm(z, (z.shape[-1],), w, b, eps))
    assert uses_any(fn, [F.layer_norm]) and TORCH_LN in evaluate("post-ln-block", fn).message


BLOCK = ("def mine(x, L, h, m, eps):\n"
         "    a = norm(x + self_attention(x, L, h, m)[0], L.ln1_weight, L.ln1_bias, eps)\n"
         "    return norm(a + feed_forward(a, L), L.ln2_weight, L.ln2_bias, eps)\n")


def test_the_learners_own_helpers_are_followed_and_defaults_seen():
    scope = _learner("def norm(z, w, b, eps):\n    return imported(z, (z.shape[-1],), w, b, eps)\n\n" + BLOCK,
                     imported=F.layer_norm, self_attention=bx.self_attention, feed_forward=bx.feed_forward)
    assert uses_any(scope["mine"], [F.layer_norm])
    scope = _learner("def mine(z, w, b, eps, ln=F.layer_norm):\n    return ln(z, (z.shape[-1],), w, b, eps)\n")
    assert uses_any(scope["mine"], [F.layer_norm])


def test_a_helper_named_like_the_forbidden_function_is_not_mistaken_for_it():
    scope = _learner("def layer_norm(z, w, b, eps):\n    mu = z.mean(-1, keepdim=True)\n"
                     "    return w * (z - mu) / torch.sqrt(((z - mu) ** 2).mean(-1, keepdim=True) + eps) + b\n\n"
                     "norm = layer_norm\n\n" + BLOCK, self_attention=bx.self_attention, feed_forward=bx.feed_forward)
    assert not uses_any(scope["mine"], [F.layer_norm])
    assert evaluate("post-ln-block", scope["mine"]).passed


def test_the_spy_restores_every_attribute_even_when_the_block_raises():
    before = F.gelu
    try:
        with spy([F.gelu, torch.nn.GELU]) as called:
            F.gelu(torch.zeros(1))
            raise KeyError("boom")
    except KeyError:
        pass
    assert F.gelu is before and called == [before]
    assert torch.nn.GELU.forward is vars(torch.nn.GELU)["forward"]


def test_the_package_attention_called_inside_a_learners_function_is_named():
    msg = evaluate("bert-attention", lambda *a: bx.self_attention(*a)).message
    assert "you called the package's attention" in msg
    assert not names_used(types.SimpleNamespace)  # not a function: nothing found, nothing raised
