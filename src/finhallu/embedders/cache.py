"""Embedding vectors cached by (model id, sha256 of the text) in a SQLite (WAL) file under a home's
cache folder (`<home>/cache/embeddings.sqlite`): only texts missing from the cache are encoded. A
cached vector is the exact float32 bytes the embedder produced, so results are the same with or
without the cache. The embed stage keeps its passages' vectors here, and the embedding_similarity
detector its responses' and context lines'.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from pathlib import Path

import numpy as np

from finhallu.embedders import Embedder


CACHE_FILE = "embeddings.sqlite"


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EmbeddingCache:
    """(model id, text sha256) -> float32 vector, in SQLite with WAL (safe across threads/processes)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._conn() as con:
            con.execute(
                "CREATE TABLE IF NOT EXISTS vectors (model_id TEXT NOT NULL, text_sha256 TEXT NOT NULL, "
                "dim INTEGER NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (model_id, text_sha256)) WITHOUT ROWID"
            )

    def _conn(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            con = sqlite3.connect(self.path, timeout=60)
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")
            self._local.con = con
        return con

    def get(self, model_id: str, hashes: list[str], dim: int | None = None) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        con = self._conn()
        for i in range(0, len(hashes), 500):
            part = hashes[i : i + 500]
            q = f"SELECT text_sha256, dim, vector FROM vectors WHERE model_id = ? AND text_sha256 IN ({','.join('?' * len(part))})"
            for h, d, blob in con.execute(q, [model_id, *part]):
                if len(blob) == 4 * d and (dim is None or d == dim):
                    out[h] = np.frombuffer(blob, dtype=np.float32)
        return out

    def put(self, model_id: str, items: list[tuple[str, np.ndarray]]) -> None:
        if not items:
            return
        con = self._conn()
        with con:
            con.executemany(
                "INSERT OR REPLACE INTO vectors (model_id, text_sha256, dim, vector) VALUES (?, ?, ?, ?)",
                [(model_id, h, int(v.shape[0]), np.ascontiguousarray(v, dtype=np.float32).tobytes()) for h, v in items],
            )

    def count(self, model_id: str | None = None) -> int:
        con = self._conn()
        if model_id is None:
            return con.execute("SELECT COUNT(*) FROM vectors").fetchone()[0]
        return con.execute("SELECT COUNT(*) FROM vectors WHERE model_id = ?", (model_id,)).fetchone()[0]

    def close(self) -> None:
        con = getattr(self._local, "con", None)
        if con is not None:
            con.close()
            self._local.con = None


def embed_texts(
    emb: Embedder,
    texts: list[str],
    cache: EmbeddingCache | None = None,
    batch: int = 256,
    progress=lambda done, total: None,
    queries: bool = False,
) -> tuple[np.ndarray, dict]:
    """Vectors of texts (float32, (n, dim)); only distinct texts missing from the cache are encoded.
    `queries`: encoded as queries (`encode_queries`: a model may prefix them), filed apart.

    Returns the matrix and stats {texts, distinct, cached, encoded}.
    """
    encode, vector_id = (emb.encode_queries, f"{emb.vector_id}#query") if queries else (emb.encode, emb.vector_id)
    hashes = [text_hash(t) for t in texts]
    first: dict[str, int] = {}
    for i, h in enumerate(hashes):
        first.setdefault(h, i)
    found = cache.get(vector_id, list(first)) if cache is not None else {}
    missing = [h for h in first if h not in found]
    total = len(missing)
    for start in range(0, total, batch):
        part = missing[start : start + batch]
        vecs = encode([texts[first[h]] for h in part])
        new = list(zip(part, vecs))
        found.update(new)
        if cache is not None:
            cache.put(vector_id, new)
        progress(min(start + batch, total), total)
    dim = next(iter(found.values())).shape[0] if found else emb.dim
    out = np.zeros((len(texts), dim), dtype=np.float32)
    for i, h in enumerate(hashes):
        out[i] = found[h]
    return out, {"texts": len(texts), "distinct": len(first), "cached": len(first) - total, "encoded": total}


def home_vectors(emb: Embedder, texts: list[str], cache_dir: Path | None, queries: bool = False) -> np.ndarray:
    """`embed_texts` through the embedding cache of a home's cache folder (None: no cache, all encoded)."""
    if not texts:
        return np.zeros((0, emb.dim), np.float32)
    cache = EmbeddingCache(cache_dir / CACHE_FILE) if cache_dir is not None else None
    try:
        return embed_texts(emb, texts, cache, queries=queries)[0]
    finally:
        if cache is not None:
            cache.close()
