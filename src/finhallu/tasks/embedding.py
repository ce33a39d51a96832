"""embed: passages -> embeddings (offline backend: signed feature hashing of char n-grams + words).

A real lexical-semantic vector space that needs no model download: Korean text is compared
by character 2-3-grams (robust to particles and spacing), English and numbers by words.
Vectors are sub-linear TF weighted, L2-normalized, so inner product = cosine in FAISS.
Each vector depends only on its own text, so unchanged passages embed identically.
"""

from __future__ import annotations

import hashlib
import math
import unicodedata
from collections import Counter

import numpy as np
import polars as pl

from finhallu.config import EmbedConfig
from finhallu.tasks.base import Frames, StageContext
from finhallu.tasks.textnorm import content_words, normalize


def _features(text: str, ngrams: list[int]) -> Counter:
    feats: Counter = Counter()
    words = content_words(text)
    feats.update(f"w:{w}" for w in words)
    t = unicodedata.normalize("NFKC", normalize(text))
    for n in ngrams:
        feats.update(f"c{n}:{t[i:i + n]}" for i in range(max(0, len(t) - n + 1)))
    return feats


def _bucket(feature: str, dim: int) -> tuple[int, float]:
    h = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "big")
    return h % dim, (1.0 if (h >> 63) & 1 else -1.0)


class HashingEmbedder:
    def __init__(self, dim: int = 2048, ngrams: list[int] | None = None):
        self.dim = dim
        self.ngrams = ngrams or [2, 3]
        self.model_id = f"hashing-char{''.join(map(str, self.ngrams))}-w-d{dim}-v1"

    def encode(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for feat, tf in _features(text, self.ngrams).items():
                j, sign = _bucket(feat, self.dim)
                weight = (1.0 + math.log(tf)) * (2.0 if feat.startswith("w:") else 1.0)
                out[i, j] += sign * weight
            norm = np.linalg.norm(out[i])
            if norm > 0:
                out[i] /= norm
        return out


def embedder_from_config(cfg: EmbedConfig) -> HashingEmbedder:
    return HashingEmbedder(cfg.dim, cfg.char_ngrams)


def run(inputs: Frames, ctx: StageContext) -> Frames:
    cfg: EmbedConfig = ctx.config
    emb = embedder_from_config(cfg)
    passages = inputs["passages"]
    vecs = emb.encode(passages["text"].to_list())
    ctx.progress(passages.height, passages.height)
    return {"embeddings": pl.DataFrame({
        "passage_id": passages["passage_id"],
        "model": [emb.model_id] * passages.height,
        "dim": [emb.dim] * passages.height,
        "vector": pl.Series(vecs.tolist(), dtype=pl.List(pl.Float32)),
    })}
