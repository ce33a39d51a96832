"""Versioned Parquet store: content hashing, atomic publish, version dedup.

Layout under the home's storage (its folder, or the URL its storage.json names; warehouse/storage.py):
    tables/<name>/version=<n>/part-0.parquet   published data (immutable once renamed)
    tables/<name>/.tmp-<uuid>/                 in-flight writes, never read, swept on start
    catalog/table_versions/<name>@<n>.json     one manifest record per published version
    catalog/current.json                       table name -> current version

A version directory without a manifest record is an orphan of a killed publish: readers
never see it (views are built from the manifest) and the next publish removes it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Collection

import polars as pl

import pyarrow as pa
import pyarrow.ipc as ipc

from finhallu.warehouse.storage import Storage, read_parquet, storage_of


@dataclass(frozen=True)
class TableRef:
    """What tasks pass between each other: never frames, never clients."""

    name: str
    version: int
    content_hash: str
    path: str  # the version's folder: an absolute path, or a URL for a home stored at one


class _Sha256Sink:
    """A write-only file that hashes what is written to it and keeps nothing."""

    closed = False

    def __init__(self) -> None:
        self.digest = hashlib.sha256()

    def write(self, data) -> int:
        self.digest.update(data)
        return len(data)

    def flush(self) -> None:
        pass


def arrow_table(df: pl.DataFrame) -> pa.Table:
    """df as published: Arrow, without schema metadata (pandas/polars annotations)."""
    return df.to_arrow().replace_schema_metadata(None)


def content_hash(table: pl.DataFrame | pa.Table) -> str:
    """Hash of schema + data in Arrow IPC form; independent of Parquet encoder details. Only names,
    types and values count. The stream is hashed as it is written: held in memory and copied out of
    it, hashing `samples` at 3,060 documents took +0.64 GB, this way +0.31 GB."""
    if isinstance(table, pl.DataFrame):
        table = arrow_table(table)
    sink = _Sha256Sink()
    with ipc.new_stream(sink, table.schema) as writer:
        for batch in table.combine_chunks().to_batches():
            writer.write_batch(batch)
    return sink.digest.hexdigest()


def _json_bytes(obj) -> bytes:
    return json.dumps(obj, ensure_ascii=False, indent=1, default=str).encode("utf-8")


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class TableStore:
    def __init__(self, home: Path):
        self.home = Path(home).resolve()
        self.storage: Storage = storage_of(self.home)

    # ---- manifest -------------------------------------------------------------------
    def records(self, name: str | None = None) -> list[dict]:
        pattern = f"{name}@*.json" if name else "*.json"
        names = self.storage.names(VERSIONS, pattern)
        out = [json.loads(self.storage.read_bytes(f"{VERSIONS}/{n}")) for n in names]
        return sorted(out, key=lambda r: (r["name"], r["version"]))

    def record(self, name: str, version: int) -> dict | None:
        rel = f"{VERSIONS}/{name}@{version}.json"
        try:
            return json.loads(self.storage.read_bytes(rel))
        except FileNotFoundError:
            return None

    def current(self) -> dict[str, int]:
        try:
            return json.loads(self.storage.read_bytes(CURRENT))
        except FileNotFoundError:
            return {}

    def current_ref(self, name: str) -> TableRef | None:
        version = self.current().get(name)
        if version is None:
            return None
        rec = self.record(name, version)
        return self.ref_of_record(rec) if rec else None

    def set_current(self, refs: list[TableRef]) -> bool:
        cur = self.current()
        changed = {r.name: r.version for r in refs if cur.get(r.name) != r.version}
        if changed:
            cur.update(changed)
            self.storage.write_bytes(CURRENT, _json_bytes(dict(sorted(cur.items()))))
        return bool(changed)

    def ref_of_record(self, rec: dict) -> TableRef:
        return TableRef(rec["name"], rec["version"], rec["content_hash"], self.version_url(rec["name"], rec["version"]))

    def version_url(self, name: str, version: int) -> str:
        """The version's folder: a local path, or a URL for a home stored at one."""
        return self.storage.url(_version_rel(name, version))

    def part_url(self, name: str, version: int) -> str:
        return self.storage.url(f"{_version_rel(name, version)}/{PART}")

    def _has_part(self, name: str, version: int) -> bool:
        return self.storage.exists(f"{_version_rel(name, version)}/{PART}")

    def is_published(self, ref: TableRef) -> bool:
        rec = self.record(ref.name, ref.version)
        if not rec:
            return False
        return rec["content_hash"] == ref.content_hash and self._has_part(ref.name, ref.version)

    # ---- housekeeping ---------------------------------------------------------------
    def sweep(self) -> list[str]:
        """Remove temp dirs and orphan versions left by killed publishes (call under the home lock)."""
        removed: list[str] = []
        for table in self.storage.folders(TABLES):
            for child in self.storage.folders(f"{TABLES}/{table}"):
                orphan = child.startswith(".tmp-")
                if child.startswith("version="):
                    orphan = self.record(table, int(child.split("=", 1)[1])) is None
                if orphan:
                    rel = f"{TABLES}/{table}/{child}"
                    self.storage.remove_tree(rel)
                    removed.append(self.storage.url(rel))
        return removed

    # ---- read / publish -------------------------------------------------------------
    def read(self, ref: TableRef, without: Collection[str] = ()) -> pl.DataFrame:
        return read_table(ref, without)

    def publish(self, name: str, df: pl.DataFrame, **provenance: Any) -> TableRef:
        """Publish df as a new version of `name`, or re-use the version holding identical content:
        `write_version`, then `commit_version` with its keywords (parents, build_id, ...)."""
        return self.commit_version(self.write_version(name, df), **provenance)

    def write_version(self, name: str, df: pl.DataFrame) -> "Written":
        """Write df's Parquet file as the next version of `name`, not yet published (no manifest
        record: views and `current` never see it, only a reader given its ref), or find the
        published version holding identical content. On a local disk the file is written in a temp
        dir renamed into place; on an object store it is one upload."""
        table = arrow_table(df)
        digest = content_hash(table)
        records = self.records(name)
        for rec in reversed(records):
            if rec["content_hash"] == digest and self._has_part(name, rec["version"]):
                return Written(self.ref_of_record(rec), df.height, df.columns, published=True)
        versions = [r["version"] for r in records]
        version = (max(versions) + 1) if versions else 1
        self.storage.write_parquet(f"{_version_rel(name, version)}/{PART}", table)
        return Written(TableRef(name, version, digest, self.version_url(name, version)), df.height, df.columns)

    def commit_version(
        self,
        written: "Written",
        *,
        parents: list[TableRef],
        build_id: str,
        flow_run_id: str | None,
        stage: str,
        gate: str,
        extra: dict | None = None,
    ) -> TableRef:
        """Publish a written version: its manifest record is the commit point (`current.json` is
        advanced separately by the caller)."""
        ref = written.ref
        if written.published:
            return ref
        rec = {
            "name": ref.name,
            "version": ref.version,
            "content_hash": ref.content_hash,
            "rows": written.rows,
            "columns": written.columns,
            "build_id": build_id,
            "flow_run_id": flow_run_id,
            "stage": stage,
            "created_at": utc_now(),
            "parents": [f"{p.name}@{p.version}" for p in parents],
            "gate": gate,
            **(extra or {}),
        }
        self.storage.write_bytes(f"{VERSIONS}/{ref.name}@{ref.version}.json", _json_bytes(rec))
        return self.ref_of_record(rec)


@dataclass(frozen=True)
class Written:
    """A version `write_version` wrote (or found published): what `commit_version` records."""

    ref: TableRef
    rows: int
    columns: list[str]
    published: bool = False


TABLES = "tables"
VERSIONS = "catalog/table_versions"
CURRENT = "catalog/current.json"
PART = "part-0.parquet"


def _version_rel(name: str, version: int) -> str:
    return f"{TABLES}/{name}/version={version}"


def part_of(ref: TableRef) -> str:
    """The version's Parquet file (a path, or a URL for a home stored at one)."""
    return f"{ref.path}/{PART}"


def read_table(ref: TableRef, without: Collection[str] = ()) -> pl.DataFrame:
    """A published version's rows, wherever its home keeps them; `without`: columns left unread."""
    return read_parquet(part_of(ref), without)
