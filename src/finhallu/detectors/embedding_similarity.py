"""embedding_similarity: cosine between the response and each context line, aggregated and thresholded.

The context (passages, and the history unless `use_history: false`) is cut into lines
(sentences and table rows); each line and the response are embedded with a registered embedder
(embedders/: `hashing` offline by default, `minilm`, `sentence_transformers` ...), and the
per-line cosines are aggregated by min, median or max (`aggregate`). A response whose aggregate
similarity falls below `threshold` is flagged; the score is 1 - similarity, clipped to [0, 1].
All three aggregates are written into the rationale. Refusals are judged by question coverage.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

import numpy as np

from finhallu.embedders.cache import home_vectors
from finhallu.detectors import Detection, looks_like_refusal, register_detector
from finhallu.detectors.grounding import Findings, evidence_texts, passage_texts, query_coverage, question_of, refusal_detection
from finhallu.text.sentences import split_sentences

AGGREGATES: dict[str, Callable[[np.ndarray], Any]] = {"min": np.min, "median": np.median, "max": np.max}


@lru_cache(maxsize=4)
def _embedder(backend: str, model: str | None):
    from finhallu.embedders import EmbedConfig, embedder_from_config

    return embedder_from_config(EmbedConfig(backend=backend, model=model))


def context_lines(sample: dict, use_history: bool) -> list[str]:
    return [ln for t in evidence_texts(sample, use_history=use_history, use_query=False) for ln in _lines(t)]


@lru_cache(maxsize=1 << 15)  # a passage is evidence for many samples: cut once
def _lines(text: str) -> tuple[str, ...]:
    return tuple(ln for ln in split_sentences(text) if len(ln) >= 4)


def _describe(params: dict, ctx) -> dict:
    return {"embedder_model_id": _embedder(params["embedder"], params["model"]).model_id}


@register_detector(
    "embedding_similarity",
    batch=True,
    version="1",
    describe=_describe,
    embedder="hashing",
    model=None,
    aggregate="max",
    threshold=0.35,
    coverage_threshold=0.5,
    use_history=True,
)
def detect(samples: list[dict], params: dict, ctx=None) -> list[Detection]:
    if params["aggregate"] not in AGGREGATES:
        raise ValueError(f"embedding_similarity: aggregate must be one of {sorted(AGGREGATES)}, got {params['aggregate']!r}")
    emb = _embedder(params["embedder"], params["model"])
    # Each sample's context lines as positions in one table of distinct texts: a passage's lines,
    # split anew for every sample it is evidence for, were held once per sample.
    first_seen: dict[str, int] = {}
    lines = [[first_seen.setdefault(ln, len(first_seen)) for ln in context_lines(s, params["use_history"])] for s in samples]
    for s in samples:
        first_seen.setdefault(s.get("response") or "", len(first_seen))
    texts = sorted(first_seen)  # encoded in sorted order, as always (a batching embedder's batches)
    position = np.empty(len(texts), dtype=np.int64)  # first-seen id -> row of `vectors`
    for row, text in enumerate(texts):
        position[first_seen[text]] = row
    vectors = home_vectors(emb, texts, ctx.cache_dir if ctx is not None else None)
    out = []
    for i, s in enumerate(samples):
        response = s.get("response") or ""
        if looks_like_refusal(response):
            coverage = query_coverage(question_of(s), passage_texts(s))
            out.append(refusal_detection(Findings(refusal=True, coverage=coverage), params["coverage_threshold"]))
            continue
        if not lines[i]:
            out.append(Detection(1.0, "hallucinated", "hallucination", "unverifiable", "no context lines to compare with"))
            continue
        sims = vectors[position[lines[i]]] @ vectors[position[first_seen[response]]]
        agg = {k: float(fn(sims)) for k, fn in AGGREGATES.items()}
        value = agg[params["aggregate"]]
        score = float(np.clip(1.0 - value, 0.0, 1.0))
        why = f"cosine to {len(sims)} context lines: min {agg['min']:.2f}, median {agg['median']:.2f}, max {agg['max']:.2f}"
        if value < params["threshold"]:
            out.append(
                Detection(
                    score,
                    "hallucinated",
                    "hallucination",
                    "unverifiable",
                    f"{params['aggregate']} below {params['threshold']}; {why}",
                )
            )
        else:
            out.append(Detection(score, "faithful", "faithful_answer", None, why))
    return out
