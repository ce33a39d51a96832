"""Results of work whose inputs are found only as it runs, kept across builds with the reads they made.

A dialogue follows the retrievals of its own questions into other documents' seeds: which rows it
reads is known only once it has run, so no key made before it runs can name them. Such a function
runs here on `Traced` views of its lookup tables, which log every (table, key) it reads; its result
is stored (finhallu.result_cache) under a key the caller makes of its fixed inputs, with the keys
read and one digest of the values they had. A later build takes the result only when every logged
key still holds a value of the same digest: a deterministic function that reads the same values
takes the same path, so it reads nothing else and returns the same result (the rule build systems
with dynamic dependencies use). Anything else the function depends on (settings, seeds, code) must
be in the caller's key.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, Hashable, Iterator, Sequence

from finhallu.result_cache import ResultCache, item_digest

_MISSING = ("<missing>",)  # the digest's stand-in for a key the table does not hold


def _plain(value: Any) -> Any:
    """`value` as data marshal can write: dicts as sorted (key, value) tuples, sequences as lists."""
    if isinstance(value, dict):
        return tuple(sorted((str(k), _plain(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, bytes, int, float, bool)):
        return value
    return repr(value)  # a date, a decimal: its text says what it is


def value_digest(value: Any) -> bytes:
    return item_digest(_plain(value))


class Reads:
    """The (table, key) pairs one run read, in first-read order."""

    def __init__(self) -> None:
        self.keys: dict[tuple[str, Hashable], None] = {}

    def view(self, name: str, table: Mapping) -> "Traced":
        return Traced(name, table, self)


class Traced(Mapping):
    """A read-only view of a lookup table that logs the keys read (`[]`, `get`, `in`). It cannot be
    listed: every key would count as read."""

    __slots__ = ("name", "table", "reads")

    def __init__(self, name: str, table: Mapping, reads: Reads):
        self.name, self.table, self.reads = name, table, reads

    def __getitem__(self, key: Hashable) -> Any:
        self.reads.keys[(self.name, key)] = None
        return self.table[key]

    def get(self, key: Hashable, default: Any = None) -> Any:
        self.reads.keys[(self.name, key)] = None
        return self.table.get(key, default)

    def __contains__(self, key: Hashable) -> bool:
        self.reads.keys[(self.name, key)] = None
        return key in self.table

    def __iter__(self) -> Iterator:
        raise TypeError(f"the traced table {self.name!r} cannot be listed (every key would be a read)")

    def __len__(self) -> int:
        raise TypeError(f"the traced table {self.name!r} cannot be listed (every key would be a read)")


class TracedMemo:
    """Results by the caller's key, each valid while the values it read are unchanged. The tables
    are read as they are while the memo is in use (their values' digests are kept): one memo per run."""

    def __init__(self, cache: ResultCache, tables: dict[str, Mapping]):
        self.cache, self.tables = cache, tables
        self._digests: dict[tuple[str, Hashable], bytes] = {}  # of the current tables, as asked
        self._lock = threading.Lock()

    def _digest(self, name: str, key: Hashable) -> bytes:
        found = self._digests.get((name, key))
        if found is None:
            found = value_digest(self.tables[name].get(key, _MISSING))
            with self._lock:
                self._digests[(name, key)] = found
        return found

    def _reads_digest(self, keys: Sequence[tuple[str, Hashable]]) -> bytes:
        return item_digest([self._digest(name, key) for name, key in keys])

    def get(self, keys: Sequence[bytes], chunk: int = 500) -> dict[bytes, Any]:
        """The stored results of these keys whose reads still hold the values they had. Read `chunk`
        keys at a time: the logged reads are dropped once checked (at 3,060 documents the dialogue
        memo holds ~150 MB pickled, about a third of it reads)."""
        out = {}
        for i in range(0, len(keys), chunk):
            for key, (reads, digest, result) in self.cache.get(keys[i : i + chunk]).items():
                if all(name in self.tables for name, _ in reads) and self._reads_digest(reads) == digest:
                    out[key] = result
        return out

    def put(self, key: bytes, reads: Reads, result: Any) -> None:
        keys = list(reads.keys)
        self.cache.put([(key, (keys, self._reads_digest(keys), result))])
