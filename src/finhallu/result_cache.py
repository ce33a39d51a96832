"""Results of pure per-item work kept across builds (issue "paper scale and beyond": per-item
caching inside stages, keyed by the item's own content and the code that made the result).

A stage's Prefect cache key covers its whole input table, so one new document reruns every row of
every later stage. Work whose result depends only on its item (the fan-out contract,
finhallu.fanout: the numeric grounding findings of a (response, passages, evidence, question))
is stored here by a digest of the item, under a namespace and the code version of the function's
module closure (finhallu.codeversion): a rebuild computes only the items it has not seen with
this code. Results are pickled; the file lives in the home's cache folder
(`<home>/cache/results.sqlite`, SQLite WAL) and deleting it only costs time.
"""

from __future__ import annotations

import hashlib
import logging
import marshal
import pickle
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from finhallu.text import morpheme_cache
from finhallu.text.morpheme_cache import use_morpheme_store

CACHE_FILE = "results.sqlite"


def item_digest(item: Any) -> bytes:
    """A digest of an item made of str, bytes, int, float, bool, None, tuples and lists (marshal's
    bytes of those are canonical for one interpreter version)."""
    return hashlib.blake2b(marshal.dumps(item), digest_size=16).digest()


class ResultCache:
    """(namespace, version, item digest) -> pickled result."""

    def __init__(self, path: Path, namespace: str, version: str, buffer: int = 0):
        """`buffer`: results put one at a time are written in batches of this many (a transaction
        each), and on `flush`/`close`; 0 writes each `put` at once."""
        self.path, self.namespace, self.version = Path(path), namespace, version
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.buffer = buffer
        self._pending: dict[bytes, bytes] = {}
        self._known: set[bytes] | None = None  # the digests stored, read at the first `get`
        self._con = sqlite3.connect(self.path, timeout=60, check_same_thread=False)
        with self._lock, self._con as con:
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")
            con.execute(
                "CREATE TABLE IF NOT EXISTS results (namespace TEXT NOT NULL, version TEXT NOT NULL, item BLOB NOT NULL, "
                "result BLOB NOT NULL, PRIMARY KEY (namespace, version, item)) WITHOUT ROWID"
            )

    def get(self, digests: Sequence[bytes]) -> dict[bytes, Any]:
        out: dict[bytes, Any] = {}
        keys = list(dict.fromkeys(digests))
        with self._lock:
            out.update((d, pickle.loads(self._pending[d])) for d in keys if d in self._pending)
            if self._known is None:  # one read of the digests spares a query per miss (most items of a first build)
                q = "SELECT item FROM results WHERE namespace = ? AND version = ?"
                self._known = {d for (d,) in self._con.execute(q, [self.namespace, self.version])}
            keys = [d for d in keys if d not in out and d in self._known]
            for i in range(0, len(keys), 500):
                part = keys[i : i + 500]
                q = (
                    "SELECT item, result FROM results WHERE namespace = ? AND version = ? "
                    f"AND item IN ({','.join('?' * len(part))})"
                )
                for item, blob in self._con.execute(q, [self.namespace, self.version, *part]):
                    try:
                        out[item] = pickle.loads(blob)
                    except Exception:  # a damaged entry is a miss: computed again and rewritten
                        continue
        return out

    def put(self, items: Sequence[tuple[bytes, Any]]) -> None:
        if not items:
            return
        with self._lock:
            self._pending.update((d, pickle.dumps(r, protocol=5)) for d, r in items)
            if len(self._pending) >= self.buffer:
                self._write()

    def flush(self) -> None:
        with self._lock:
            self._write()

    def _write(self) -> None:
        rows = [(self.namespace, self.version, d, blob) for d, blob in self._pending.items()]
        if self._known is not None:
            self._known.update(self._pending)
        if rows:
            with self._con as con:
                con.executemany("INSERT OR REPLACE INTO results (namespace, version, item, result) VALUES (?, ?, ?, ?)", rows)
        self._pending.clear()

    def count(self) -> int:
        with self._lock:
            self._write()
            q = "SELECT COUNT(*) FROM results WHERE namespace = ? AND version = ?"
            return self._con.execute(q, [self.namespace, self.version]).fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._write()
            self._con.close()


def open_result_cache(path: Path, namespace: str, version: str, buffer: int = 0) -> ResultCache | None:
    """The cache at `path`, or None (with a warning) where the file is not a database SQLite can
    open (damaged, or not ours): a cache only saves time, so the work is done without it."""
    try:
        return ResultCache(path, namespace, version, buffer)
    except sqlite3.DatabaseError as exc:
        logging.getLogger("finhallu.cache").warning(f"{path}: not used ({exc}); delete it to start a new one")
        return None


def cached_map(
    compute: Callable[[list[Any]], list[Any]],
    items: Sequence[Any],
    cache: ResultCache | None,
    keys: Callable[[Any], Any] | None = None,
) -> tuple[list[Any], int]:
    """`compute` (a fan-out map: one result per item, in order) over the items the cache lacks;
    (every item's result in order, how many came from the cache). `keys`: what an item is filed
    under, digested (default: the item itself; a key can stand in for large inputs by their digests)."""
    if cache is None:
        return compute(list(items)), 0
    digests = [item_digest(keys(i) if keys else i) for i in items]
    found = cache.get(digests)
    todo = [k for k, d in enumerate(digests) if d not in found]
    fresh = compute([items[k] for k in todo]) if todo else []
    cache.put([(digests[k], r) for k, r in zip(todo, fresh)])
    by_position = dict(zip(todo, fresh))
    return [by_position[k] if k in by_position else found[d] for k, d in enumerate(digests)], len(items) - len(todo)


@contextmanager
def use_morpheme_cache(cache_dir: Path | None) -> Iterator[ResultCache | None]:
    """Kiwi's analyses (text/morpheme_cache.py) read from and kept in the home's result cache under
    `cache_dir` while this holds, by the analyser's versions and the text's digest (None: none)."""
    store = None
    if cache_dir is not None:
        store = open_result_cache(Path(cache_dir) / CACHE_FILE, "kiwi-morphemes", morpheme_cache.analyser_id(), buffer=2000)
    try:
        with use_morpheme_store(store):
            yield store
    finally:
        if store is not None:
            store.close()
