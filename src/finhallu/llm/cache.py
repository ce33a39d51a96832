"""The LLM call cache: SQLite in WAL mode, one row per request key.

WAL lets concurrent readers proceed while one writer commits, and `busy_timeout` makes a
second process (a parallel build on another home sharing the cache, a deployment run) wait
instead of failing. Stored: the raw reply text and its usage, so a rerun re-parses exactly
what the provider said and the ledger can show what a cache hit saved. Batch jobs are kept in
the same file so a rerun finds a job it submitted earlier instead of paying for it twice, and so
are failures (requests that failed for good): a rerun records them again without a request, and
`finhallu build --retry-failed` sends them again.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

from finhallu.llm.request import LLMReply

_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
  key TEXT PRIMARY KEY,
  provider TEXT NOT NULL,
  model TEXT NOT NULL,
  schema_name TEXT NOT NULL,
  reply_text TEXT,
  input_tokens INTEGER NOT NULL,
  output_tokens INTEGER NOT NULL,
  finish_reason TEXT,
  model_version TEXT,
  created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS batch_jobs (
  batch_key TEXT PRIMARY KEY,     -- hash of the sorted request keys in the job
  provider TEXT NOT NULL,
  model TEXT NOT NULL,
  job_id TEXT NOT NULL,
  request_keys TEXT NOT NULL,     -- JSON list, in submission order
  status TEXT NOT NULL,
  created_at REAL NOT NULL,
  updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS failures (
  key TEXT PRIMARY KEY,           -- a request that failed for good (retries spent, or output invalid after the repair)
  provider TEXT NOT NULL,
  model TEXT NOT NULL,
  schema_name TEXT NOT NULL,
  error TEXT NOT NULL,            -- masked: never a key
  created_at REAL NOT NULL
);
"""


class CallCache:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # One connection shared by the stage thread and the LLM loop thread, serialised by a lock;
        # other processes are serialised by SQLite itself (WAL + busy_timeout).
        self._lock = threading.Lock()
        self._absent: set[str] = set()  # keys `look_up` found in neither table, until written here
        self._not_failed: set[str] = set()  # keys it found among the replies only, until `failure` asks
        self._db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
        with self._lock:
            self._db.execute("PRAGMA busy_timeout=30000")
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)

    def _exec(self, sql: str, args: tuple = (), written: str | None = None) -> list:
        with self._lock:
            rows = self._db.execute(sql, args).fetchall()
            if written is not None:
                self._absent.discard(written)
                self._not_failed.discard(written)
            return rows

    def look_up(self, keys: list[str]) -> None:
        """Many keys about to be asked, looked up in one query by the asking thread: those in neither
        `calls` nor `failures` are then answered absent by `get` and `failure` without SQLite, until
        this cache writes them, and `failure` answers those found among the replies only (a rerun's
        hits) once without SQLite. The LLM loop asked twice per call otherwise, and each query let go of
        the GIL: with a stage's offline work beside it, taking it back cost up to a switch interval,
        and detect's first wave of 32 went out over 0.4 s instead of 0.1 s. (Under the lock, as the
        writes are: a key written meanwhile is never left marked absent.)"""
        keys = list(dict.fromkeys(keys))
        with self._lock:
            replied: set[str] = set()
            failed: set[str] = set()
            for i in range(0, len(keys), 400):  # SQLite's bound-parameter limit is 999 (two lists of 400)
                part = keys[i : i + 400]
                marks = ",".join("?" * len(part))
                sql = f"SELECT key, 0 FROM calls WHERE key IN ({marks}) UNION ALL SELECT key, 1 FROM failures WHERE key IN ({marks})"
                for key, in_failures in self._db.execute(sql, (*part, *part)):
                    (failed if in_failures else replied).add(key)
            self._absent.update(k for k in keys if k not in replied and k not in failed)
            self._not_failed.update(replied - failed)

    def get(self, key: str) -> LLMReply | None:
        if key in self._absent:
            return None
        rows = self._exec(
            "SELECT reply_text, input_tokens, output_tokens, finish_reason, model_version FROM calls WHERE key=?", (key,)
        )
        return LLMReply(*rows[0]) if rows else None

    def put(self, key: str, provider: str, model: str, schema_name: str, reply: LLMReply) -> None:
        self._exec(
            "INSERT OR REPLACE INTO calls VALUES (?,?,?,?,?,?,?,?,?,?)",
            (
                key,
                provider,
                model,
                schema_name,
                reply.text,
                reply.input_tokens,
                reply.output_tokens,
                reply.finish_reason,
                reply.model_version,
                time.time(),
            ),
            written=key,
        )

    # ---- failures: a rerun keeps them (no request) unless it is told to retry them -----------
    def failure(self, key: str) -> str | None:
        if key in self._absent:
            return None
        if key in self._not_failed:  # asked once per call, then forgotten: the set stays small
            self._not_failed.discard(key)
            return None
        rows = self._exec("SELECT error FROM failures WHERE key=?", (key,))
        return rows[0][0] if rows else None

    def put_failure(self, key: str, provider: str, model: str, schema_name: str, error: str) -> None:
        self._exec(
            "INSERT OR REPLACE INTO failures VALUES (?,?,?,?,?,?)",
            (key, provider, model, schema_name, error, time.time()),
            written=key,
        )

    def clear_failure(self, key: str) -> None:
        self._exec("DELETE FROM failures WHERE key=?", (key,))

    def failed_keys(self) -> set[str]:
        return {r[0] for r in self._exec("SELECT key FROM failures")}

    def __len__(self) -> int:
        return self._exec("SELECT count(*) FROM calls")[0][0]

    # ---- batch jobs ---------------------------------------------------------------------
    def batch_job(self, batch_key: str) -> dict | None:
        rows = self._exec("SELECT provider, model, job_id, request_keys, status FROM batch_jobs WHERE batch_key=?", (batch_key,))
        if not rows:
            return None
        row = rows[0]
        return {"provider": row[0], "model": row[1], "job_id": row[2], "request_keys": json.loads(row[3]), "status": row[4]}

    def save_batch_job(
        self, batch_key: str, provider: str, model: str, job_id: str, request_keys: list[str], status: str
    ) -> None:
        now = time.time()
        self._exec(
            "INSERT INTO batch_jobs VALUES (?,?,?,?,?,?,?,?) ON CONFLICT(batch_key) DO UPDATE SET "
            "job_id=excluded.job_id, status=excluded.status, updated_at=excluded.updated_at",
            (batch_key, provider, model, job_id, json.dumps(request_keys), status, now, now),
        )

    def close(self) -> None:
        with self._lock:
            self._db.close()
