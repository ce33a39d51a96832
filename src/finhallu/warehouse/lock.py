"""One build per home folder: an flock that the kernel releases even on SIGKILL."""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path
from typing import TextIO


class HomeBusy(RuntimeError):
    pass


class HomeLock:
    def __init__(self, home: Path, owner: dict, wait_s: float = 0.0):
        self.path = Path(home) / ".build.lock"
        self.owner = owner
        self.wait_s = wait_s
        self._fh: TextIO | None = None  # the open lock file while held

    def holder(self) -> dict:
        try:
            return json.loads(self.path.read_text() or "{}")
        except (OSError, ValueError):
            return {}

    def __enter__(self) -> "HomeLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(self.path, "a+")
        deadline = time.monotonic() + self.wait_s
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    h = self.holder()
                    fh.close()
                    raise HomeBusy(
                        f"another build is running on {self.path.parent} "
                        f"(pid {h.get('pid', '?')}, build {h.get('build_id', '?')}, started {h.get('started_at', '?')}); "
                        "it was left untouched. Wait for it, or pass --wait SECONDS to queue behind it."
                    ) from None
                time.sleep(0.5)
        fh.seek(0)
        fh.truncate()
        fh.write(json.dumps({"pid": os.getpid(), **self.owner}))
        fh.flush()
        self._fh = fh
        return self

    def __exit__(self, *exc) -> None:
        if self._fh is not None:
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None
