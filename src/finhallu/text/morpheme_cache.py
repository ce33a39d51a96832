"""Kiwi's morphemes of a text, kept across stages and builds (issue "paper scale and beyond").

Kiwi is the costliest text analysis a build makes: at 544 documents a third of the inject stage
(the entity inventories read every passage of a split; the turns' answers are read for their
entities), and assemble and the label checks read the same answers again. A rebuild after new
filings reads the same passages and mostly the same answers. So the morphemes of each text are
stored, content-addressed, in a SQLite (WAL) file under the home's cache folder
(`<home>/cache/morphemes.sqlite`), keyed by the analyser (kiwipiepy and its model's versions,
default options) and a digest of the text: a stage analyses only the texts no earlier stage or
build has. A stored analysis is exactly what Kiwi returned (form, tag, start, length of each
morpheme), so outputs are the same with or without the file.

The cache is active while `use_morpheme_cache(dir)` holds (a build's stage task, benchmarks);
elsewhere (tests, a Dask worker) texts are analysed as before.
"""

from __future__ import annotations

import hashlib
import logging
import marshal
import sqlite3
import threading
import zlib
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from pathlib import Path
from typing import Iterator, NamedTuple

CACHE_FILE = "morphemes.sqlite"


class Morph(NamedTuple):
    """One morpheme as the text analyses read it (the fields of a kiwipiepy Token they use)."""

    form: str
    tag: str
    start: int
    len: int


Morphs = tuple[Morph, ...]


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
    return tuple(Morph(*m) for m in marshal.loads(zlib.decompress(blob)))


class MorphemeCache:
    """(analyser, text digest) -> morphemes, in SQLite with WAL (one connection, shared by the
    stage's threads under a lock)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._con = sqlite3.connect(self.path, timeout=60, check_same_thread=False)
        with self._lock, self._con as con:
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")
            con.execute(
                "CREATE TABLE IF NOT EXISTS morphemes (analyser TEXT NOT NULL, text_key BLOB NOT NULL, "
                "morphs BLOB NOT NULL, PRIMARY KEY (analyser, text_key)) WITHOUT ROWID"
            )

    def get(self, texts: list[str]) -> dict[str, Morphs]:
        """The stored analyses of those texts that have one."""
        by_key = {_key(t): t for t in dict.fromkeys(texts)}
        keys = list(by_key)
        out: dict[str, Morphs] = {}
        with self._lock:
            for i in range(0, len(keys), 500):
                part = keys[i : i + 500]
                q = f"SELECT text_key, morphs FROM morphemes WHERE analyser = ? AND text_key IN ({','.join('?' * len(part))})"
                for key, blob in self._con.execute(q, [analyser_id(), *part]):
                    out[by_key[key]] = _decode(blob)
        return out

    def put(self, items: list[tuple[str, Morphs]]) -> None:
        if not items:
            return
        rows = [(analyser_id(), _key(t), _encode(m)) for t, m in items]
        with self._lock, self._con as con:
            con.executemany("INSERT OR REPLACE INTO morphemes (analyser, text_key, morphs) VALUES (?, ?, ?)", rows)

    def count(self) -> int:
        with self._lock:
            return self._con.execute("SELECT COUNT(*) FROM morphemes WHERE analyser = ?", [analyser_id()]).fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._con.close()


_ACTIVE: ContextVar[MorphemeCache | None] = ContextVar("finhallu_morpheme_cache", default=None)


def active_cache() -> MorphemeCache | None:
    return _ACTIVE.get()


@contextmanager
def use_morpheme_cache(cache_dir: Path | None) -> Iterator[MorphemeCache | None]:
    """Analyses read from and added to `<cache_dir>/morphemes.sqlite` while this holds (None: no cache).
    Threads a stage starts with a copy of the context (llm.parallel) see it too."""
    cache = None
    if cache_dir is not None:
        try:
            cache = MorphemeCache(Path(cache_dir) / CACHE_FILE)
        except sqlite3.DatabaseError as exc:  # damaged or not ours: the analyses are made without it
            logging.getLogger("finhallu.cache").warning(f"{Path(cache_dir) / CACHE_FILE}: not used ({exc})")
    token = _ACTIVE.set(cache)
    try:
        yield cache
    finally:
        _ACTIVE.reset(token)
        if cache is not None:
            cache.close()
