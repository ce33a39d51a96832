"""The DuckDB catalog: a file of views only, rebuilt from the manifest after each publish.

The file is written fresh under a temp name and renamed over `warehouse.duckdb`, so an
analyst holding it open read-only never blocks a publish and never sees a half-built catalog.

Views name their Parquet/JSON files by absolute path, so the file opens from any directory
(`duckdb -readonly <home>/warehouse.duckdb`). The catalog also records the home it was written
for; a home that was moved is re-pointed by the next `connect_readonly` or finhallu command.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from pathlib import Path

import duckdb

from finhallu.warehouse.store import VERSIONS, TableStore, utc_now

STORAGE_VERSION = "v1.2.0"

# Catalog records beside the table manifest, in the home's storage (its folder or its URL).
DQ_DIR = "catalog/dq_results"
BUILDS_DIR = "catalog/builds"
LLM_DIR = "catalog/llm_calls"

# Fixed column types for the JSON-backed views, so an empty catalog still has a schema.
DQ_COLUMNS = {
    "build_id": "VARCHAR",
    "stage": "VARCHAR",
    "table_name": "VARCHAR",
    "suite": "VARCHAR",
    "expectation": "VARCHAR",
    "column_name": "VARCHAR",
    "outcome": "VARCHAR",  # passed | failed | error
    "unexpected_count": "BIGINT",
    "sample": "VARCHAR",
    "detail": "VARCHAR",
    "checked_at": "VARCHAR",
}
BUILD_COLUMNS = {
    "build_id": "VARCHAR",
    "profile": "VARCHAR",
    "status": "VARCHAR",
    "flow_run_id": "VARCHAR",
    "started_at": "VARCHAR",
    "finished_at": "VARCHAR",
    "config_hash": "VARCHAR",
    "seed": "BIGINT",
    "stages_run": "VARCHAR[]",
    "stages_cached": "VARCHAR[]",
    "failed_stage": "VARCHAR",
    "message": "VARCHAR",
    "report": "VARCHAR",
}
VERSION_COLUMNS = {
    "name": "VARCHAR",
    "version": "BIGINT",
    "content_hash": "VARCHAR",
    "rows": "BIGINT",
    "columns": "VARCHAR[]",
    "build_id": "VARCHAR",
    "flow_run_id": "VARCHAR",
    "stage": "VARCHAR",
    "created_at": "VARCHAR",
    "parents": "VARCHAR[]",
    "gate": "VARCHAR",
}
LLM_CALL_COLUMNS = {
    "build_id": "VARCHAR",
    "stage": "VARCHAR",
    "role": "VARCHAR",
    "operation": "VARCHAR",
    "provider": "VARCHAR",
    "model": "VARCHAR",
    "input_tokens": "BIGINT",
    "output_tokens": "BIGINT",
    "cost_usd": "DOUBLE",
    "latency_s": "DOUBLE",
    "cache_hit": "BOOLEAN",
    "error": "VARCHAR",
    "attempts": "INTEGER",
    "batch": "BOOLEAN",
    "repair": "BOOLEAN",
    "request_key": "VARCHAR",
    "created_at": "TIMESTAMP",
    "chain": "INTEGER",  # the call's round on its stage's longest sequential path of calls
}


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _json_view(name: str, files: list[str], columns: dict[str, str]) -> str:
    if not files:
        cols = ", ".join(f"CAST(NULL AS {t}) AS {c}" for c, t in columns.items())
        return f"CREATE VIEW {name} AS SELECT {cols} WHERE false"
    spec = "{" + ", ".join(f"{_sql_str(c)}: {_sql_str(t)}" for c, t in columns.items()) + "}"
    file_list = "[" + ", ".join(_sql_str(f) for f in files) + "]"
    return f"CREATE VIEW {name} AS SELECT * FROM read_json({file_list}, format='auto', columns={spec})"


class Catalog:
    def __init__(self, home: Path):
        self.store = TableStore(home)
        self.home = self.store.home
        self.storage = self.store.storage
        self.db_path = self.home / "warehouse.duckdb"

    # ---- JSON-lines records -----------------------------------------------------------
    def record_dq(self, build_id: str, stage: str, table: str, rows: list[dict]) -> None:
        now = utc_now()
        lines = []
        for r in rows:
            row = {c: r.get(c) for c in DQ_COLUMNS}
            row.update(build_id=build_id, stage=stage, table_name=table, checked_at=now)
            lines.append(json.dumps(row, ensure_ascii=False, default=str))
        self.storage.write_bytes(f"{DQ_DIR}/{build_id}__{stage}__{table}.jsonl", ("\n".join(lines) + "\n").encode("utf-8"))

    def record_llm_calls(self, build_id: str, stage: str, rows: list[dict]) -> None:
        """The stage's cost-ledger rows (one file per build and stage; a rerun of the stage replaces it)."""
        if not rows:
            return
        lines = []
        for r in sorted(rows, key=lambda r: (r["role"], r["operation"], r["request_key"], r["repair"])):
            row = {c: r.get(c) for c in LLM_CALL_COLUMNS}
            row.update(build_id=build_id, stage=stage)
            lines.append(json.dumps(row, ensure_ascii=False, default=str))
        self.storage.write_bytes(f"{LLM_DIR}/{build_id}__{stage}.jsonl", ("\n".join(lines) + "\n").encode("utf-8"))

    def record_build(self, build: dict) -> None:
        row = {c: build.get(c) for c in BUILD_COLUMNS}
        self.storage.write_bytes(f"{BUILDS_DIR}/{build['build_id']}.jsonl", (json.dumps(row, ensure_ascii=False) + "\n").encode())

    def builds(self) -> list[dict]:
        rows = [json.loads(self.storage.read_bytes(f"{BUILDS_DIR}/{n}")) for n in self.storage.names(BUILDS_DIR, "*.jsonl")]
        return sorted(rows, key=lambda r: r.get("started_at") or "")

    def _json_files(self, folder: str) -> list[str]:
        return [self.storage.url(f"{folder}/{n}") for n in self.storage.names(folder, "*.json*")]

    # ---- views --------------------------------------------------------------------------
    def refresh_views(self) -> Path:
        store = self.store
        current = store.current()
        by_name: dict[str, list[int]] = {}
        for rec in store.records():
            by_name.setdefault(rec["name"], []).append(rec["version"])

        stmts = []
        for name, versions in sorted(by_name.items()):
            files = [store.part_url(name, v) for v in sorted(versions)]
            # Current versions move only on a full build; a table that has none yet (a new home after
            # `finhallu stage chunk`) shows its newest version, so `<table>` always exists.
            cur = current.get(name, max(versions))
            latest = store.part_url(name, cur)
            stmts.append(f"CREATE VIEW {name} AS SELECT * FROM read_parquet({_sql_str(latest)})")
            file_list = "[" + ", ".join(_sql_str(f) for f in files) + "]"
            stmts.append(
                f"CREATE VIEW {name}_all AS SELECT * FROM read_parquet({file_list}, hive_partitioning=true, union_by_name=true)"
            )
        stmts.append(_json_view("table_versions", self._json_files(VERSIONS), VERSION_COLUMNS))
        stmts.append(_json_view("dq_results", self._json_files(DQ_DIR), DQ_COLUMNS))
        stmts.append(_json_view("builds", self._json_files(BUILDS_DIR), BUILD_COLUMNS))
        stmts.append(_json_view("llm_calls", self._json_files(LLM_DIR), LLM_CALL_COLUMNS))
        stmts.append(f"CREATE VIEW {HOME_VIEW} AS SELECT {_sql_str(str(self.home.resolve()))} AS home")

        self.home.mkdir(parents=True, exist_ok=True)
        # The writer's pid in the name: a sweep removes only temp files of processes that are gone.
        tmp = self.home / f".warehouse.{os.getpid()}.{uuid.uuid4().hex}.duckdb"
        con = duckdb.connect()
        self.storage.register(con)  # views are bound when created: their files must be readable now
        try:
            # An older storage format keeps the file readable by the `duckdb` CLI analysts have
            # (PyPI's duckdb-cli is 1.5.x; files in the 2.0 format do not open there).
            con.execute(f"ATTACH {_sql_str(str(tmp))} AS w (STORAGE_VERSION '{STORAGE_VERSION}')")
            con.execute("USE w")
            for s in stmts:
                con.execute(s)
            con.execute("CHECKPOINT w")
            con.execute("USE memory")
            con.execute("DETACH w")
        finally:
            con.close()
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, self.db_path)
        return self.db_path

    # ---- recovery after a killed build (call under the home lock) ------------------------
    def recover(self) -> dict[str, list[str]]:
        """Sweep debris of killed processes: unpublished table versions and temp dirs, catalog temp
        files whose writer is gone, and build records still `running` (no build runs while the
        caller holds the lock) — those are marked `interrupted`."""
        swept = self.store.sweep()
        for tmp in self.home.glob(".warehouse.*.duckdb*"):
            m = _TMP_NAME.match(tmp.name)
            if not (m and m.group(1) and _alive(int(m.group(1)))):
                tmp.unlink(missing_ok=True)
                swept.append(str(tmp))
        interrupted = []
        for build in self.builds():
            if build.get("status") == "running":
                build.update(
                    status="interrupted",
                    finished_at=utc_now(),
                    message="the build process ended without recording an outcome (killed or crashed)",
                )
                self.record_build(build)
                interrupted.append(build["build_id"])
        return {"swept": swept, "interrupted": interrupted}

    def points_here(self) -> bool:
        """Whether the catalog's views name this home's files (false after the home was moved)."""
        if not self.db_path.exists():
            return True
        con = duckdb.connect(str(self.db_path), read_only=True)
        try:
            row = con.execute(f"SELECT home FROM {HOME_VIEW}").fetchone()
        except duckdb.Error:
            return False  # written before the catalog recorded its home
        finally:
            con.close()
        if not row:
            return False
        return row[0] == str(self.home.resolve())


HOME_VIEW = "_finhallu_home"
_TMP_NAME = re.compile(r"^\.warehouse\.(?:(\d+)\.)?[0-9a-f]{32}\.duckdb")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


def connect_readonly(home: Path) -> duckdb.DuckDBPyConnection:
    """A read-only connection to a home's catalog, re-pointed first if the home was moved (or
    written first on a machine new to a home stored at a URL); a URL home's filesystem is
    registered on it."""
    catalog = Catalog(Path(home))
    if catalog.storage.exists("catalog") and (not catalog.db_path.exists() or not catalog.points_here()):
        catalog.refresh_views()
    con = duckdb.connect(str(catalog.db_path), read_only=True)
    catalog.storage.register(con)
    return con
