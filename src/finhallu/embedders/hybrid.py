"""hybrid: a dense embedder fused with BM25 over Kiwi morphemes.

Its vectors are the dense part's (the embeddings table, the embedding cache and a FAISS index
hold exactly those), so `encode` = the dense encode. Fusion needs the passage texts for BM25,
so it happens in `build_index(texts, vectors).search(queries, k)`:
  sum<w>  w * dense + (1 - w) * BM25, each min-max normalized per query over the passage set
  rrf<k>  reciprocal rank fusion, sum of 1 / (k + rank) over the two rankings (depth 1000)

Model id: `hybrid:<fusion>:<lexical id>:<dense model id>`, e.g.
`hybrid:sum0.5:bm25-kiwi0.24-k1.5-b0.75-v1:hashing-char23-w-d2048-v1`.
"""

from __future__ import annotations

import re

import numpy as np

from finhallu.embedders import DenseIndex, Embedder, embedder_class, embedder_for_model, register_embedder, topk

RRF_DEPTH = 1000
_FUSION = re.compile(r"^(sum)(\d+(?:\.\d+)?)$|^(rrf)(\d+)$")
_LEX = re.compile(r"^bm25-kiwi[\d.]+-k(\d+(?:\.\d+)?)-b(\d+(?:\.\d+)?)-v1$")


def _minmax(s: np.ndarray) -> np.ndarray:
    lo = s.min(axis=1, keepdims=True)
    span = s.max(axis=1, keepdims=True) - lo
    return np.where(span > 0, (s - lo) / np.where(span > 0, span, 1), 0).astype(np.float32)


def _rrf(s: np.ndarray, k: int, depth: int = RRF_DEPTH) -> np.ndarray:
    n, m = s.shape
    d = min(depth, m)
    order = np.argsort(-s, axis=1, kind="stable")[:, :d]
    out = np.zeros((n, m), dtype=np.float32)
    np.put_along_axis(out, order, (1.0 / (k + np.arange(1, d + 1, dtype=np.float32)))[None, :].repeat(n, 0), axis=1)
    return out


def fusion_spec(fusion: str, weight: float, rrf_k: int) -> str:
    if fusion == "sum":
        return f"sum{weight:g}"
    if fusion == "rrf":
        return f"rrf{rrf_k}"
    raise ValueError(f"unknown fusion {fusion!r} (sum or rrf)")


class HybridIndex:
    def __init__(self, emb: "HybridEmbedder", texts: list[str], vectors: np.ndarray, batch: int = 512):
        from finhallu.embedders.bm25 import BM25Index

        self.emb = emb
        self.dense = DenseIndex(emb.dense, vectors)
        self.bm25 = BM25Index(texts, k1=emb.k1, b=emb.b)
        self.batch = batch

    def scores(self, queries: list[str]) -> np.ndarray:
        d = self.dense.scores(queries)
        b = self.bm25.scores(queries)
        if self.emb.fusion == "sum":
            w = self.emb.weight
            return w * _minmax(d) + (1 - w) * _minmax(b)
        return _rrf(d, self.emb.rrf_k) + _rrf(b, self.emb.rrf_k)

    def search(self, queries: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        parts = [topk(self.scores(queries[i : i + self.batch]), k) for i in range(0, len(queries), self.batch)]
        if not parts:
            return np.zeros((0, k), np.int64), np.zeros((0, k), np.float32)
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


@register_embedder("hybrid")
class HybridEmbedder(Embedder):
    id_prefix = "hybrid:"

    def __init__(
        self, dense: Embedder, fusion: str = "sum", weight: float = 0.5, rrf_k: int = 60, k1: float = 1.5, b: float = 0.75
    ):
        from finhallu.embedders.bm25 import lexical_id

        if isinstance(dense, HybridEmbedder):
            raise ValueError("hybrid needs a dense embedder, not another hybrid")
        if not 0.0 <= weight <= 1.0:
            raise ValueError("hybrid weight must be in [0, 1]")
        self.dense = dense
        self.fusion, self.weight, self.rrf_k, self.k1, self.b = fusion, weight, rrf_k, k1, b
        self.lexical_id = lexical_id(k1, b)
        self.model_id = f"hybrid:{fusion_spec(fusion, weight, rrf_k)}:{self.lexical_id}:{dense.model_id}"

    @property
    def dim(self) -> int:  # type: ignore[override]
        return self.dense.dim

    @property
    def vector_id(self) -> str:
        return self.dense.vector_id

    def encode(self, texts: list[str]) -> np.ndarray:
        return self.dense.encode(texts)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self.dense.encode_queries(texts)

    def build_index(self, texts: list[str], vectors: np.ndarray | None = None) -> HybridIndex:
        return HybridIndex(self, texts, self.encode(texts) if vectors is None else vectors)

    @classmethod
    def from_config(cls, cfg) -> "HybridEmbedder":
        if cfg.dense == "hybrid":
            raise ValueError("embed.dense must name a dense backend (hashing, sentence_transformers, kure, minilm)")
        dense = embedder_class(cfg.dense).from_config(cfg)
        return cls(dense, cfg.fusion, cfg.fusion_weight, cfg.rrf_k, cfg.bm25_k1, cfg.bm25_b)

    @classmethod
    def from_model_id(cls, model_id: str) -> "HybridEmbedder":
        try:
            _, fusion, lex, dense_id = model_id.split(":", 3)
        except ValueError:
            raise ValueError(f"not a hybrid model id: {model_id!r}") from None
        fm, lm = _FUSION.match(fusion), _LEX.match(lex)
        if not fm or not lm:
            raise ValueError(f"not a hybrid model id: {model_id!r}")
        dense = embedder_for_model(dense_id)
        kind = "sum" if fm.group(1) else "rrf"
        weight = float(fm.group(2)) if kind == "sum" else 0.5
        rrf_k = int(fm.group(4)) if kind == "rrf" else 60
        emb = cls(dense, kind, weight, rrf_k, float(lm.group(1)), float(lm.group(2)))
        if emb.model_id != model_id:
            raise ValueError(
                f"hybrid model id {model_id!r} does not round-trip (this build makes {emb.model_id!r}; "
                "a different Kiwi version changes BM25 terms)"
            )
        return emb
