"""A forbidden shortcut is seen however it is written: by name, through a module, inside a class or a helper."""

from __future__ import annotations

import math
import types

import torch
import torch.nn.functional as F
from torch.nn.functional import gelu as imported_gelu

from attention_course.chapters.encoder import exercises as bx
from attention_course.exercises import evaluate
from attention_course.exercises._forbidden import names_used, spy, uses_any

TORCH_GELU = "you called torch's GELU"


def _learner(source: str, **names):
    """A function defined as in a notebook (module __main__), from its source."""
    scope = {"__name__": "__main__", "torch": torch, "F": F, "math": math, **names}
    exec(source, scope)  # noqa: S102 - the test's own source
    return scope


def test_a_call_through_a_module_is_spied():
    fn = lambda x, L: F.gelu(x @ L.W_1 + L.b_1) @ L.W_2 + L.b_2  # noqa: E731
    assert TORCH_GELU in evaluate("gelu-feed-forward", fn).message
    fn = lambda x, L: torch.nn.functional.gelu(x @ L.W_1 + L.b_1) @ L.W_2 + L.b_2  # noqa: E731
    assert TORCH_GELU in evaluate("gelu-feed-forward", fn).message


def test_a_module_object_is_spied_through_its_forward():
    fn = lambda x, L: torch.nn.GELU()(x @ L.W_1 + L.b_1) @ L.W_2 + L.b_2  # noqa: E731
    assert TORCH_GELU in evaluate("gelu-feed-forward", fn).message


def test_a_name_imported_from_torch_is_seen_in_the_code():
    fn = lambda x, L: imported_gelu(x @ L.W_1 + L.b_1) @ L.W_2 + L.b_2  # noqa: E731
    assert uses_any(fn, [F.gelu]) and TORCH_GELU in evaluate("gelu-feed-forward", fn).message


def test_the_learners_own_helpers_are_followed_and_defaults_seen():
    scope = _learner("def act(z):\n    return imported(z)\n\ndef mine(x, L):\n    return act(x @ L.W_1 + L.b_1) @ L.W_2 + L.b_2\n",
                     imported=F.gelu)
    assert uses_any(scope["mine"], [F.gelu])
    scope = _learner("def mine(x, L, act=F.gelu):\n    return act(x @ L.W_1 + L.b_1) @ L.W_2 + L.b_2\n")
    assert uses_any(scope["mine"], [F.gelu])


def test_a_helper_named_like_the_forbidden_function_is_not_mistaken_for_it():
    scope = _learner("def gelu(z):\n    return 0.5 * z * (1 + torch.erf(z / math.sqrt(2)))\n\n"
                     "def mine(x, L):\n    return F.linear(gelu(F.linear(x, L.W_1.T, L.b_1)), L.W_2.T, L.b_2)\n")
    assert not uses_any(scope["mine"], [F.gelu])
    assert evaluate("gelu-feed-forward", scope["mine"]).passed


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
