"""Sentence boundaries for chunking: Kiwi for Korean, a rule-based splitter for English.

Kiwi loads lazily (≈1.3 s, ≈500 MB) and only when a Korean block must be split; it finds
boundaries that have no punctuation ("...상향됐다 이에 따라 ..."). The English splitter keeps
abbreviations (U.S., Inc., No., Dec.), decimals and initials inside their sentence.
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache
from operator import attrgetter
from typing import Iterable

from finhallu.text.morpheme_cache import Morphs, as_morph, keep, stored

_lock = threading.Lock()
_MORPH_FIELDS = attrgetter("form", "tag", "start", "len")  # of a kiwipiepy Token, in Morph's order

_ABBREV = {
    "u.s",
    "inc",
    "corp",
    "co",
    "ltd",
    "no",
    "nos",
    "mr",
    "mrs",
    "ms",
    "dr",
    "jr",
    "sr",
    "st",
    "vs",
    "etc",
    "e.g",
    "i.e",
    "jan",
    "feb",
    "mar",
    "apr",
    "jun",
    "jul",
    "aug",
    "sep",
    "sept",
    "oct",
    "nov",
    "dec",
    "fig",
    "approx",
    "dept",
    "est",
    "n.a",
    "u.k",
    "l.p",
    "s.a",
}
_EN_CANDIDATE = re.compile(r"([.?!][\"')\]]*)\s+(?=[\"'(\[]?[A-Z0-9])")


def split_english(text: str) -> list[str]:
    out, start = [], 0
    for m in _EN_CANDIDATE.finditer(text):
        before = text[start : m.start() + 1]
        word = re.search(r"([A-Za-z][A-Za-z.]*)\.$", before)
        if word and (word.group(1).lower().rstrip(".") in _ABBREV or len(word.group(1).rstrip(".")) == 1):
            continue  # an abbreviation or an initial, not a sentence end
        out.append(text[start : m.end(1)].strip())
        start = m.end()
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return [s for s in out if s]


_load_lock = threading.Lock()


@lru_cache(maxsize=1)
def kiwi():
    """The process-wide Kiwi analyser (loaded on first use, once: threads of an LLM stage that
    need it together wait for the first load instead of each loading their own)."""
    with _load_lock:
        return _load_kiwi()


@lru_cache(maxsize=1)
def _load_kiwi():
    from kiwipiepy import Kiwi

    k = Kiwi()
    k.tokenize("가")  # its model loads on the first analysis (~2 s): part of the load, not of a first call
    return k


def load_for(langs: Iterable[str]) -> None:
    """Load Kiwi now when any text is Korean. A stage calls it before its items go in flight: Kiwi
    holds the GIL for the ~4 s of its load, and loaded by a first item it stalls every LLM call
    in flight (their replies wait for the loop thread)."""
    if "ko" in set(langs):
        kiwi()


def tokenize_korean(text: str) -> Morphs:
    """Kiwi's morphemes of a text (.form, .tag, .start, .len), under the shared lock; read from the
    build's morpheme cache where it has the text (text/morpheme_cache.py)."""
    return tokenize_korean_many([text])[0]


def tokenize_korean_many(texts: list[str]) -> list[Morphs]:
    """`tokenize_korean` of each text, in one call: the texts the morpheme cache lacks analysed by
    Kiwi as a list on its worker threads (all cores, outside the GIL), ~1.8x faster on 2 cores than
    one text at a time; the same morphemes."""
    if not texts:
        return []
    texts = [t or "" for t in texts]
    found = stored(texts)
    todo = [t for t in dict.fromkeys(texts) if t not in found]
    if todo:
        with _lock:
            analysed = kiwi().tokenize(todo) if len(todo) > 1 else [kiwi().tokenize(todo[0])]
            fresh = [(t, tuple(map(as_morph, map(_MORPH_FIELDS, toks)))) for t, toks in zip(todo, analysed)]
        found.update(fresh)
        keep(fresh)
    return [found[t] for t in texts]


def split_korean(text: str) -> list[str]:
    with _lock:  # Kiwi instances are not documented as thread-safe
        sents = kiwi().split_into_sents(text)
    return [s.text.strip() for s in sents if s.text.strip()]


def split(text: str, lang: str) -> list[str]:
    """Sentences of one paragraph-like text; line breaks always end a sentence."""
    out: list[str] = []
    for line in (text or "").splitlines():
        line = line.strip()
        if not line:
            continue
        out.extend(split_korean(line) if lang == "ko" else split_english(line))
    return out


_SENTENCE_BREAK = re.compile(r"(?<=[.?!])\s+(?=\S)|\n+")


def split_sentences(text: str) -> list[str]:
    """Rule-based splitter: sentence-final punctuation followed by space, and line breaks."""
    return list(_split_sentences(text or ""))


@lru_cache(maxsize=1 << 12)  # a response or passage is split by several checks and injectors (a dialogue's few)
def _split_sentences(text: str) -> tuple[str, ...]:
    pieces = _SENTENCE_BREAK.split(text)
    return tuple(p.strip() for p in pieces if p and p.strip())
