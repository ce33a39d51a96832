"""Kiwi's morphemes of a text, kept across stages and builds (issue "paper scale and beyond").

Kiwi is the costliest text analysis a build makes: at 544 documents a third of the inject stage
(the entity inventories read every passage of a split; the turns' answers are read for their
entities), and assemble and the label checks read the same answers again. A rebuild after new
filings reads the same passages and mostly the same answers. So the morphemes of each text are
kept in a store, by the analyser (kiwipiepy and its model's versions, default options) and a
digest of the text: a stage analyses only the texts no earlier stage or build has. A stored
analysis is exactly what Kiwi returned (form, tag, start, length of each morpheme), so outputs
are the same with or without a store.

This module (below everything, like all of text/) holds the format and the store of the running
stage (a context variable); the store itself is the home's result cache, which a build's stage
task sets with `finhallu.result_cache.use_morpheme_cache`. Without one (tests, a Dask worker)
texts are analysed as before.
"""

from __future__ import annotations

import hashlib
import marshal
import zlib
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache, partial
from typing import Any, Iterator, NamedTuple, Protocol, Sequence


class Morph(NamedTuple):
    """One morpheme as the text analyses read it (the fields of a kiwipiepy Token they use)."""

    form: str
    tag: str
    start: int
    len: int


Morphs = tuple[Morph, ...]

# Morph from a 4-tuple without NamedTuple's Python-level __new__ (a frame per morpheme: ~4 us,
# a fifth of reading a stage's stored analyses); the same objects.
as_morph = partial(tuple.__new__, Morph)


@lru_cache(maxsize=1)
def analyser_id() -> str:
    """What the analyses depend on: kiwipiepy and its model (Kiwi() with default options), and the
    storage format (marshal's version)."""
    from importlib.metadata import version

    return f"kiwipiepy-{version('kiwipiepy')}+model-{version('kiwipiepy_model')}/default/marshal{marshal.version}"


def _key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


def _encode(morphs: Morphs) -> bytes:
    return zlib.compress(marshal.dumps(tuple(tuple(m) for m in morphs)), 1)


def _decode(blob: bytes) -> Morphs:
    return tuple(map(as_morph, marshal.loads(zlib.decompress(blob))))


class MorphemeStore(Protocol):
    """Where analyses are kept (finhallu.result_cache.ResultCache): values by 16-byte digest."""

    def get(self, digests: Sequence[bytes]) -> dict[bytes, Any]: ...

    def put(self, items: Sequence[tuple[bytes, Any]]) -> None: ...


_ACTIVE: ContextVar[MorphemeStore | None] = ContextVar("finhallu_morpheme_store", default=None)


@contextmanager
def use_morpheme_store(store: MorphemeStore | None) -> Iterator[MorphemeStore | None]:
    """Analyses read from and added to `store` while this holds (None: none kept). Threads a stage
    starts with a copy of the context (llm.parallel) see it too."""
    token = _ACTIVE.set(store)
    try:
        yield store
    finally:
        _ACTIVE.reset(token)


def stored(texts: list[str]) -> dict[str, Morphs]:
    """The analyses the running stage's store holds of these texts."""
    store = _ACTIVE.get()
    if store is None:
        return {}
    by_key = {_key(t): t for t in dict.fromkeys(texts)}
    return {by_key[k]: _decode(blob) for k, blob in store.get(list(by_key)).items()}


def keep(items: list[tuple[str, Morphs]]) -> None:
    """Add analyses to the running stage's store (if any)."""
    store = _ACTIVE.get()
    if store is not None and items:
        store.put([(_key(t), _encode(m)) for t, m in items])
