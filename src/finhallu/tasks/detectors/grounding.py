"""Shared evidence measures for the offline detectors."""

from __future__ import annotations

from finhallu.tasks.textnorm import content_words, split_sentences


def query_coverage(query: str, passages: list[str]) -> float:
    """Best share of the query's content words found in any one passage (can the evidence answer?)."""
    q = set(content_words(query))
    if not q or not passages:
        return 0.0
    return max(len(q & set(content_words(p))) / len(q) for p in passages)


def sentence_support(response: str, sources: list[str]) -> list[tuple[str, float]]:
    """Per response sentence: best share of its content words found in one source."""
    vocab = [set(content_words(s)) for s in sources]
    out = []
    for sent in split_sentences(response):
        words = set(content_words(sent))
        if not words:
            continue
        out.append((sent, max((len(words & v) / len(words) for v in vocab), default=0.0)))
    return out
