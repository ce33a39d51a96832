"""The Prefect API a build reports to when PREFECT_API_URL names none: kept warm per home.

Prefect's ephemeral mode starts a server (uvicorn on `create_app`) inside every process, only
when the first flow runs: ~3 s importing the server package, ~3.5 s waiting for it, on every
build. finhallu instead starts that same server as a small detached process per home (like a
build tool's daemon): the first build boots it while it imports the pipeline, later builds
find it through `<home>/prefect/api.json` and use it at once. It stops by itself once it has been
ready and unused for `FINHALLU_API_IDLE_S` seconds (default 900): idle time counts from its own
readiness and the last client's release, never while a client holds it (a shared lock on
`prefect/api.clients`, kept from `ensure()` to `release()`, so a slow start or a long import on a
busy machine cannot race it) nor while a build holds the home lock. Runs land in the run database under PREFECT_HOME, which `finhallu ui` serves; a
running `finhallu ui` for the home is preferred over it.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import TextIO

DEFAULT_IDLE_S = 900.0


# A fresh run database is Prefect's migrations plus its block registry, the same on every home:
# its first server saves it here (per Prefect version) and new homes start from a copy, which
# spares each new home the migrations (~10 s, several times that on a busy machine).
_TEMPLATE_TABLES = {"alembic_version", "block_type", "block_schema", "block_schema_reference"}


def run_db() -> Path:
    """The Prefect run database servers started from here use (SQLite under PREFECT_HOME, which
    the CLI sets to `<home>/prefect`; Prefect's own default otherwise)."""
    return Path(os.environ.get("PREFECT_HOME") or Path.home() / ".prefect") / "prefect.db"


def template_db() -> Path | None:
    """Where the pristine run database of this Prefect version is kept; None when runs go to a
    database other than the default SQLite file (PREFECT_API_DATABASE_CONNECTION_URL)."""
    if os.environ.get("PREFECT_API_DATABASE_CONNECTION_URL"):
        return None
    from importlib.metadata import version

    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "finhallu"
    return cache / f"prefect-{version('prefect')}-rundb.sqlite"


def seed_run_db() -> bool:
    """A home without a run database gets a copy of the template, if there is one."""
    template, db = template_db(), run_db()
    if template is None or db.exists() or not template.exists():
        return False
    tmp = db.with_name(f".{db.name}.{os.getpid()}.tmp")
    shutil.copyfile(template, tmp)
    os.replace(tmp, db)
    _seeded_mark(db).write_text(template.name, encoding="utf-8")
    return True


def _seeded_mark(db: Path) -> Path:
    return db.with_name(db.name + ".template")


def seeded_from_template(db: Path) -> bool:
    """Whether the run database is a copy of this Prefect version's template: migrated, with the
    block registry, so that a server on it need not check either."""
    template = template_db()
    mark = _seeded_mark(db)
    return template is not None and db.exists() and mark.exists() and mark.read_text(encoding="utf-8") == template.name


def server_env() -> dict[str, str]:
    """The environment of a server started for the home. On a run database seeded from the
    template it skips the start's migration check and block registration, which import every block
    collection and hash the registry (~3 s of its ~8 s boot); the template had both done."""
    env = {**os.environ, "PREFECT_UI_ENABLED": "0"}
    env.pop("PREFECT_API_URL", None)
    if seeded_from_template(run_db()):
        env.update(
            PREFECT_API_DATABASE_MIGRATE_ON_START="0",
            PREFECT_API_BLOCKS_REGISTER_ON_START="0",
            PREFECT_MEMOIZE_BLOCK_AUTO_REGISTRATION="0",  # else it imports the collections before asking
        )
    return env


def pristine(db: Path) -> bool:
    """Only migrations and the block registry: nothing a home ran or configured."""
    with contextlib.closing(sqlite3.connect(db)) as con:
        tables = [t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        if "alembic_version" not in tables:
            return False
        return all(
            con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] == 0
            for t in tables
            if t not in _TEMPLATE_TABLES and not t.startswith("sqlite_")
        )


def save_template(db: Path) -> bool:
    """Keep a ready server's run database as the template when none is kept yet and it is still
    pristine (a snapshot taken after a build's first run arrived is dropped)."""
    template = template_db()
    if template is None or template.exists() or not db.exists():
        return False
    template.parent.mkdir(parents=True, exist_ok=True)
    tmp = template.with_name(f".{template.name}.{os.getpid()}.tmp")
    try:
        with contextlib.closing(sqlite3.connect(db)) as src, contextlib.closing(sqlite3.connect(tmp)) as dst:
            src.backup(dst)  # a consistent snapshot while the server writes
        if not pristine(tmp):
            return False
        os.replace(tmp, template)
        return True
    finally:
        tmp.unlink(missing_ok=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _healthy(url: str, timeout: float = 0.5) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=timeout) as r:
            return r.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError, OSError):
        return False


def api_file(home: Path) -> Path:
    return Path(home) / "prefect" / "api.json"


def lease_file(home: Path) -> Path:
    return Path(home) / "prefect" / "api.lease"


def clients_file(home: Path) -> Path:
    return Path(home) / "prefect" / "api.clients"


def ui_url_file(home: Path) -> Path:
    return Path(home) / "prefect" / "ui-api-url"


def running_ui_url(home: Path) -> str | None:
    """The API URL of a `finhallu ui` server for this home, if one is up and healthy."""
    f = ui_url_file(home)
    if not f.exists():
        return None
    url = f.read_text().strip()
    return url if _healthy(url) else None


class HomeAPI:
    """Find the home's warm API server or start one; `url()` blocks until it answers."""

    def __init__(self, home: Path):
        self.home = Path(home)
        self._url: str | None = None
        self._process: subprocess.Popen | None = None
        self._client: TextIO | None = None  # the shared lock that keeps the server up while this process uses it

    def ensure(self) -> "HomeAPI":
        lease_file(self.home).parent.mkdir(parents=True, exist_ok=True)
        self._client = open(clients_file(self.home), "a+")
        fcntl.flock(self._client.fileno(), fcntl.LOCK_SH)
        lease_file(self.home).touch()
        f = api_file(self.home)
        if f.exists():
            try:
                url = json.loads(f.read_text())["url"]
            except (ValueError, KeyError):
                url = None
            if url and _healthy(url, timeout=0.3):
                self._url = url
                return self
        seed_run_db()
        port = _free_port()
        idle = os.environ.get("FINHALLU_API_IDLE_S", str(DEFAULT_IDLE_S))
        env = server_env()
        with open(self.home / "prefect" / "api.log", "ab") as log:
            self._process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "finhallu.service.local_api",
                    "--home",
                    str(self.home),
                    "--port",
                    str(port),
                    "--idle-s",
                    idle,
                ],
                env=env,
                stdout=log,
                stderr=log,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self._pending = f"http://127.0.0.1:{port}/api"
        return self

    @property
    def booting(self) -> bool:
        """Whether ensure() started a server that has not yet been seen answering."""
        return self._url is None and self._process is not None

    def url(self, timeout: float = 90.0) -> str:
        if self._url:
            return self._url
        process = self._process
        assert process is not None, "ensure() started a server when it found none warm"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                tail = (self.home / "prefect" / "api.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"the local Prefect API server exited ({process.returncode}): {tail}")
            if _healthy(self._pending, timeout=1):
                self._url = self._pending
                tmp = api_file(self.home).with_suffix(".tmp")
                tmp.write_text(json.dumps({"url": self._url, "pid": process.pid}))
                os.replace(tmp, api_file(self.home))
                return self._url
            time.sleep(0.1)
        raise RuntimeError(f"the local Prefect API server did not answer on {self._pending} within {timeout:.0f}s")

    def release(self) -> None:
        lease_file(self.home).touch()
        if self._client is not None:
            fcntl.flock(self._client.fileno(), fcntl.LOCK_UN)
            self._client.close()
            self._client = None


def stop_home_api(home: Path) -> bool:
    """Stop the home's warm API server, if one runs. Returns whether one was stopped."""
    f = api_file(home)
    if not f.exists():
        return False
    try:
        pid = json.loads(f.read_text())["pid"]
        os.kill(pid, 15)
    except (ValueError, KeyError, ProcessLookupError, PermissionError):
        f.unlink(missing_ok=True)
        return False
    f.unlink(missing_ok=True)
    return True


def _held(lock: Path) -> bool:
    """Whether another process holds a lock on this file (build: exclusive; clients: shared)."""
    if not lock.exists():
        return False
    with open(lock, "a+") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
    return False


def _build_running(home: Path) -> bool:
    return _held(home / ".build.lock")


# What a client's first run asks, read-only: the server sets up its database engine and each
# route's queries on their first request (0.23-0.31 s for the first, ~0.07 s for a first query), and
# a build's flow start waited for that after a boot it had overlapped with its own start.
_WARM_UP = (
    ("admin/version", None),
    ("flows/filter", b'{"limit": 1}'),
    ("flow_runs/filter", b'{"limit": 1}'),
    ("task_runs/filter", b'{"limit": 1}'),
)


def warm_up(url: str) -> None:
    """Ask a ready server what a build's start will, so that its first requests find it warm."""
    for path, body in _WARM_UP:
        req = urllib.request.Request(f"{url}/{path}", data=body, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                r.read()
        except OSError:  # URLError, refused, timed out
            return  # only an optimisation


def _watchdog(home: Path, port: int, idle_s: float) -> None:
    while not _healthy(f"http://127.0.0.1:{port}/api", timeout=2):  # idle time starts at readiness
        time.sleep(0.1)
    ready = time.time()
    try:
        save_template(run_db())
    except (OSError, sqlite3.Error):
        pass  # only an optimisation for the next new home
    warm_up(f"http://127.0.0.1:{port}/api")
    while True:
        time.sleep(min(5.0, max(0.5, idle_s / 4)))
        try:
            last = max(ready, lease_file(home).stat().st_mtime)
        except FileNotFoundError:
            last = ready
        if time.time() - last > idle_s and not _held(clients_file(home)) and not _build_running(home):
            api_file(home).unlink(missing_ok=True)
            os._exit(0)


def main() -> None:  # the server process itself
    ap = argparse.ArgumentParser()
    ap.add_argument("--home", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--idle-s", type=float, default=DEFAULT_IDLE_S)
    args = ap.parse_args()
    os.environ.update({"PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1", "PREFECT_UI_ENABLED": "0"})
    threading.Thread(target=_watchdog, args=(Path(args.home), args.port, args.idle_s), daemon=True).start()
    import uvicorn

    uvicorn.run(
        "prefect.server.api.server:create_app", factory=True, host="127.0.0.1", port=args.port, log_level="error", lifespan="on"
    )


if __name__ == "__main__":
    main()
