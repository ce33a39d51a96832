"""Offline default: signed feature hashing of character n-grams + words (no model download).

A real lexical-semantic vector space: Korean text is compared by character 2-3-grams (robust to
particles and spacing), English and numbers by words. Vectors are sub-linear TF weighted,
L2-normalized, so inner product = cosine. Each vector depends only on its own text, so
unchanged passages embed identically.

Versions (the model id names the version, so vectors of different versions never mix):
  v1  `hashing-char<ngrams>-w-d<dim>-v1`: char n-grams over the whole normalized text (spaces
      removed, so Latin text too), content words x2. Vectors are the same bytes on every CPU (the norm is exactly rounded, not BLAS).
  v2  `hashing-char<ngrams>-wb-d<dim>-v2` (default): char n-grams over Hangul and digits only
      (Latin text no longer floods the vector with cross-word letter n-grams, which made
      templated English questions match boilerplate prose), content words x2, adjacent
      content-word bigrams x1. benchmarks/retrieval.py measured it against BM25-Kiwi.
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from collections import Counter
from functools import lru_cache

import numpy as np

from finhallu.embedders import Embedder, register_embedder
from finhallu.text.normalize import normalize
from finhallu.text.words import content_words

_ID = re.compile(r"^hashing-char(\d+)-(w|wb)-d(\d+)-v(\d+)$")
_FEATURES = {1: "w", 2: "wb"}
_NOT_HANGUL_OR_DIGIT = re.compile(r"[^가-힣0-9]+")
_WEIGHT = {"w": 2.0, "b": 1.0, "c": 1.0}


def _features(text: str, ngrams: list[int], version: int = 1) -> Counter:
    feats: Counter = Counter()
    words = content_words(text)
    feats.update(f"w:{w}" for w in words)
    t = unicodedata.normalize("NFKC", normalize(text))
    if version >= 2:
        t = _NOT_HANGUL_OR_DIGIT.sub("", t)
        feats.update(f"b:{a} {b}" for a, b in zip(words, words[1:]))
    for n in ngrams:
        feats.update(f"c{n}:{t[i : i + n]}" for i in range(max(0, len(t) - n + 1)))
    return feats


@lru_cache(maxsize=1 << 16)  # n-grams and words recur across texts: one digest each (~1 M per detect stage)
def _bucket(feature: str, dim: int) -> tuple[int, float]:
    h = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "big")
    return h % dim, (1.0 if (h >> 63) & 1 else -1.0)


@register_embedder("hashing")
class HashingEmbedder(Embedder):
    id_prefix = "hashing-"

    def __init__(self, dim: int = 2048, ngrams: list[int] | None = None, version: int = 2):
        if version not in _FEATURES:
            raise ValueError(f"hashing embedder version {version} unknown (known: {sorted(_FEATURES)})")
        self.dim = dim
        self.ngrams = ngrams or [2, 3]
        self.version = version
        self.model_id = f"hashing-char{''.join(map(str, self.ngrams))}-{_FEATURES[version]}-d{dim}-v{version}"

    def encode(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for feat, tf in _features(text, self.ngrams, self.version).items():
                j, sign = _bucket(feat, self.dim)
                weight = (1.0 + math.log(tf)) * _WEIGHT[feat[0]]
                out[i, j] += sign * weight
            # An exactly rounded norm: np.linalg.norm goes through BLAS, whose kernels (chosen per CPU,
            # e.g. by OPENBLAS_CORETYPE) round differently, and vectors must be the same bytes everywhere.
            row = out[i]
            norm = math.sqrt(math.fsum(float(x) * float(x) for x in row[row != 0]))
            if norm > 0:
                out[i] = (row.astype(np.float64) / norm).astype(np.float32)
        return out

    @classmethod
    def from_config(cls, cfg) -> "HashingEmbedder":
        return cls(cfg.dim, cfg.char_ngrams, cfg.hashing_version)

    @classmethod
    def claims(cls, model_id: str) -> bool:
        return model_id.startswith(cls.id_prefix)

    @classmethod
    def from_model_id(cls, model_id: str) -> "HashingEmbedder":
        m = _ID.match(model_id)
        if not m or _FEATURES.get(int(m.group(4))) != m.group(2):
            raise ValueError(
                f"not a hashing model id this build knows: {model_id!r} (known versions: "
                f"{', '.join(f'-{f}-...-v{v}' for v, f in _FEATURES.items())})"
            )
        return cls(int(m.group(3)), [int(c) for c in m.group(1)], int(m.group(4)))
