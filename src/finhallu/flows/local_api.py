"""A private Prefect API server for one CLI run, started before the heavy imports.

Prefect's ephemeral mode starts the same server (uvicorn on `create_app`) but only when the
first flow runs, after importing the server package in the client process (~3 s) and then
waiting for it (~3.5 s). Started first, it boots while finhallu imports and hashes inputs,
which keeps a fully cached rebuild at a few seconds. Runs land in the run database under
PREFECT_HOME, which `finhallu ui` serves. Skipped when PREFECT_API_URL names a server.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from importlib.util import find_spec
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalPrefectAPI:
    def __init__(self):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/api"
        self.process: subprocess.Popen | None = None

    def start(self) -> "LocalPrefectAPI":
        app_dir = Path(find_spec("prefect").origin).parent.parent
        env = {**os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1"}
        env.pop("PREFECT_API_URL", None)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "--app-dir", str(app_dir), "--factory", "prefect.server.api.server:create_app",
             "--host", "127.0.0.1", "--port", str(self.port), "--log-level", "error", "--lifespan", "on"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        return self

    def wait(self, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                err = self.process.stderr.read().decode(errors="replace")[-2000:] if self.process.stderr else ""
                raise RuntimeError(f"the local Prefect API server exited ({self.process.returncode}): {err}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=1) as r:
                    if r.status == 200:
                        return self.url
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.1)
        raise RuntimeError(f"the local Prefect API server did not answer on {self.url} within {timeout:.0f}s")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def ui_url_file(home: Path) -> Path:
    return Path(home) / "prefect" / "ui-api-url"


def running_ui_url(home: Path) -> str | None:
    """The API URL of a `finhallu ui` server for this home, if one is up and healthy."""
    f = ui_url_file(home)
    if not f.exists():
        return None
    url = f.read_text().strip()
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=0.5) as r:
            return url if r.status == 200 else None
    except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
        return None
