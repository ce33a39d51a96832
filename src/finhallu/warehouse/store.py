"""Versioned Parquet store: content hashing, atomic publish, version dedup.

Layout under the home folder:
    tables/<name>/version=<n>/part-0.parquet   published data (immutable once renamed)
    tables/<name>/.tmp-<uuid>/                 in-flight writes, never read, swept on start
    catalog/table_versions/<name>@<n>.json     one manifest record per published version
    catalog/current.json                       table name -> current version

A version directory without a manifest record is an orphan of a killed publish: readers
never see it (views are built from the manifest) and the next publish removes it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import polars as pl

import pyarrow.ipc as ipc
import pyarrow.parquet as pq


@dataclass(frozen=True)
class TableRef:
    """What tasks pass between each other: never frames, never clients."""

    name: str
    version: int
    content_hash: str
    path: str  # absolute path of the version directory


def content_hash(df: pl.DataFrame) -> str:
    """Hash of schema + data in Arrow IPC form; independent of Parquet encoder details."""
    table = df.to_arrow()
    # Drop schema metadata (pandas/polars annotations) so only names, types and values count.
    table = table.replace_schema_metadata(None)
    sink = io.BytesIO()
    with ipc.new_stream(sink, table.schema) as writer:
        for batch in table.combine_chunks().to_batches():
            writer.write_batch(batch)
    return hashlib.sha256(sink.getvalue()).hexdigest()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write a small file so that readers see the old or the new content, never a mix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def atomic_write_json(path: Path, obj) -> None:
    atomic_write_bytes(path, json.dumps(obj, ensure_ascii=False, indent=1, default=str).encode("utf-8"))


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class TableStore:
    def __init__(self, home: Path):
        self.home = Path(home).resolve()
        self.tables_dir = self.home / "tables"
        self.catalog_dir = self.home / "catalog"
        self.versions_dir = self.catalog_dir / "table_versions"
        self.current_path = self.catalog_dir / "current.json"

    # ---- manifest -------------------------------------------------------------------
    def records(self, name: str | None = None) -> list[dict]:
        if not self.versions_dir.exists():
            return []
        pattern = f"{name}@*.json" if name else "*.json"
        out = [json.loads(p.read_text("utf-8")) for p in self.versions_dir.glob(pattern)]
        return sorted(out, key=lambda r: (r["name"], r["version"]))

    def record(self, name: str, version: int) -> dict | None:
        p = self.versions_dir / f"{name}@{version}.json"
        return json.loads(p.read_text("utf-8")) if p.exists() else None

    def current(self) -> dict[str, int]:
        if not self.current_path.exists():
            return {}
        return json.loads(self.current_path.read_text("utf-8"))

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
            atomic_write_json(self.current_path, dict(sorted(cur.items())))
        return bool(changed)

    def ref_of_record(self, rec: dict) -> TableRef:
        return TableRef(rec["name"], rec["version"], rec["content_hash"], str(self.version_dir(rec["name"], rec["version"])))

    def version_dir(self, name: str, version: int) -> Path:
        return self.tables_dir / name / f"version={version}"

    def is_published(self, ref: TableRef) -> bool:
        rec = self.record(ref.name, ref.version)
        if not rec:
            return False
        return rec["content_hash"] == ref.content_hash and Path(ref.path, "part-0.parquet").exists()

    # ---- housekeeping ---------------------------------------------------------------
    def sweep(self) -> list[str]:
        """Remove temp dirs and orphan versions left by killed publishes (call under the home lock)."""
        removed: list[str] = []
        if not self.tables_dir.exists():
            return removed
        for table_dir in self.tables_dir.iterdir():
            if not table_dir.is_dir():
                continue
            for child in table_dir.iterdir():
                orphan = child.name.startswith(".tmp-")
                if child.name.startswith("version="):
                    version = int(child.name.split("=", 1)[1])
                    orphan = self.record(table_dir.name, version) is None
                if orphan:
                    shutil.rmtree(child, ignore_errors=True)
                    removed.append(str(child))
        return removed

    # ---- read / publish -------------------------------------------------------------
    def read(self, ref: TableRef) -> pl.DataFrame:
        return pl.read_parquet(Path(ref.path) / "part-0.parquet")

    def publish(
        self,
        name: str,
        df: pl.DataFrame,
        *,
        parents: list[TableRef],
        build_id: str,
        flow_run_id: str | None,
        stage: str,
        gate: str,
        extra: dict | None = None,
    ) -> TableRef:
        """Publish df as a new version of `name`, or re-use the version holding identical content.

        Order: write temp dir, fsync, rename to version=<n>, fsync, then write the manifest record.
        The record is the commit point; `current.json` is advanced separately by the caller.
        """
        digest = content_hash(df)
        for rec in reversed(self.records(name)):
            if rec["content_hash"] == digest and Path(self.version_dir(name, rec["version"]), "part-0.parquet").exists():
                return self.ref_of_record(rec)

        table_dir = self.tables_dir / name
        table_dir.mkdir(parents=True, exist_ok=True)
        versions = [r["version"] for r in self.records(name)]
        version = (max(versions) + 1) if versions else 1
        final = self.version_dir(name, version)
        if final.exists():  # orphan of a killed publish with this number
            shutil.rmtree(final)

        tmp = table_dir / f".tmp-{uuid.uuid4().hex}"
        tmp.mkdir()
        part = tmp / "part-0.parquet"
        arrow = df.to_arrow().replace_schema_metadata(None)
        with open(part, "wb") as fh:
            pq.write_table(arrow, fh, compression="zstd")
            fh.flush()
            os.fsync(fh.fileno())
        _fsync_dir(tmp)
        os.rename(tmp, final)
        _fsync_dir(table_dir)

        rec = {
            "name": name,
            "version": version,
            "content_hash": digest,
            "rows": df.height,
            "columns": df.columns,
            "build_id": build_id,
            "flow_run_id": flow_run_id,
            "stage": stage,
            "created_at": utc_now(),
            "parents": [f"{p.name}@{p.version}" for p in parents],
            "gate": gate,
            **(extra or {}),
        }
        atomic_write_json(self.versions_dir / f"{name}@{version}.json", rec)
        return self.ref_of_record(rec)
