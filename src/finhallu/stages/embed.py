"""embed: passages -> embeddings, with the embedder `embed.backend` names (embedders/).

Vectors are cached by (model id, sha256 of the passage text) in a SQLite (WAL) file under the
stage's cache folder (`<home>/cache/embeddings.sqlite`): only texts missing from the cache are
encoded, so re-ingesting unchanged passages never re-embeds them. A cached vector is the exact
float32 bytes the embedder produced, so the output is the same with or without the cache.
"""

from __future__ import annotations

import polars as pl

from finhallu.stages.base import Frames, Stage, StageContext
from finhallu.embedders import EmbedConfig, embedder_for_model, embedder_from_config
from finhallu.embedders.cache import CACHE_FILE, EmbeddingCache, embed_texts, text_hash
from finhallu.embedders.hashing import HashingEmbedder

__all__ = [
    "CACHE_FILE",
    "EmbeddingCache",
    "HashingEmbedder",
    "embed_texts",
    "embedder_for_model",
    "embedder_from_config",
    "run",
    "text_hash",
]


def run(inputs: Frames, ctx: StageContext[EmbedConfig]) -> Frames:
    cfg: EmbedConfig = ctx.config
    emb = embedder_from_config(cfg)
    passages = inputs["passages"]
    cache = EmbeddingCache(ctx.cache_dir / CACHE_FILE) if ctx.cache_dir is not None else None
    try:
        vecs, _stats = embed_texts(emb, passages["text"].to_list(), cache, progress=ctx.progress)
    finally:
        if cache is not None:
            cache.close()
    ctx.progress(passages.height, passages.height)
    return {
        "embeddings": pl.DataFrame(
            {
                "passage_id": passages["passage_id"],
                "model": [emb.model_id] * passages.height,
                "dim": [int(vecs.shape[1])] * passages.height,
                "vector": pl.Series(vecs.tolist(), dtype=pl.List(pl.Float32)),
            }
        )
    }


STAGE = Stage("embed", run, EmbedConfig, inputs=("passages",), outputs=("embeddings",), description="passage embeddings")
