r"""A small semantic search: embed the shipped sentences (``data/search_sentences.json``) with an encoder
and rank them by cosine similarity, :math:`S = \hat E_{\text{queries}} \hat E_{\text{corpus}}^\top`.

:func:`embed` runs any encoder with :func:`~.assemble.encode`'s layout; :func:`reference_embeddings`
is the independent reference (``transformers`` with sentence-transformers' pooling).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ...core._backend import ShapeError, shape_str
from ...models.encoder import BertWeights
from ...models.pretrained import load_minilm
from .pooling import sentence_embeddings

__all__ = ["search_sentences", "embed", "reference_embeddings", "rank", "similarities"]

#: The shipped sentences: ``{"queries": [...], "corpus": [...]}``.
SENTENCES_FILE = Path(__file__).resolve().parents[2] / "data" / "search_sentences.json"


@dataclass(frozen=True)
class SearchSet:
    """Queries and the sentences they search (the corpus)."""

    queries: tuple[str, ...]
    corpus: tuple[str, ...]


def search_sentences(path: Path = SENTENCES_FILE) -> SearchSet:
    """The shipped queries and corpus.

    Examples
    --------
    >>> s = search_sentences()
    >>> len(s.queries), len(s.corpus), s.queries[0]
    (3, 10, 'How do I keep bread from going stale?')
    """
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return SearchSet(tuple(data["queries"]), tuple(data["corpus"]))


def embed(texts: Sequence[str], encoder: Callable, weights: BertWeights, tokenizer,
          pool: Callable = sentence_embeddings) -> torch.Tensor:
    """Sentence vectors (N, d): ``pool`` of the last layer of ``encoder(weights, input_ids, attention_mask)``."""
    enc = tokenizer(list(texts), padding=True, return_tensors="pt")  # input_ids, attention_mask: (N, T)
    with torch.no_grad():
        hidden = encoder(weights, enc["input_ids"], enc["attention_mask"])  # (L+1, N, T, d)
        return pool(hidden[-1], enc["attention_mask"])  # (N, d)


def reference_embeddings(texts: Sequence[str]) -> torch.Tensor:
    """all-MiniLM-L6-v2's sentence vectors (N, d), float32: ``transformers``, then sentence-transformers' pooling."""
    tokenizer, model = load_minilm()
    enc = tokenizer(list(texts), padding=True, return_tensors="pt")
    with torch.no_grad():
        last = model(**enc).last_hidden_state  # (N, T, d)
    m = enc["attention_mask"][..., None].to(last.dtype)  # (N, T, 1)
    mean = (last * m).sum(1) / torch.clamp(m.sum(1), min=1e-9)  # (N, d)
    return F.normalize(mean, p=2, dim=1)  # (N, d)


def similarities(queries: torch.Tensor, corpus: torch.Tensor) -> np.ndarray:
    """Cosine similarities (Q, N) of unit-length query and corpus vectors (dot products, in float64)."""
    if queries.ndim != 2 or corpus.ndim != 2 or queries.shape[1] != corpus.shape[1]:
        raise ShapeError(f"queries have shape {shape_str(queries)} and corpus {shape_str(corpus)}; "
                         f"expected (Q, d) and (N, d)")
    return (queries.double() @ corpus.double().T).numpy()  # (Q, N)


def rank(queries: torch.Tensor, corpus: torch.Tensor) -> np.ndarray:
    """Each query's corpus indices, most similar first: shape (Q, N).

    Examples
    --------
    >>> q = torch.tensor([[1.0, 0.0]]); c = torch.tensor([[0.0, 1.0], [0.8, 0.6], [1.0, 0.0]])
    >>> rank(q, c).tolist()
    [[2, 1, 0]]
    """
    return np.argsort(-similarities(queries, corpus), axis=1, kind="stable")  # (Q, N)
