"""The build process's resident memory over one stage, for the stage's summary: at its start, its
end and the highest sampled in between. The process-wide peak (`getrusage`) cannot say which stage
set it, and resetting the kernel's high-water mark would lose it for the whole run."""

from __future__ import annotations

import os
import threading
import tracemalloc
from types import TracebackType

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def resident_bytes() -> int | None:
    """This process's resident set now (Linux /proc), or None where there is no /proc."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return None


class RssWatch:
    """`with RssWatch() as w:` samples the resident set every `every_s` seconds on a daemon thread,
    and once more on entry and exit (so what is still held at the end always counts)."""

    def __init__(self, every_s: float = 0.5):
        self.every_s = every_s
        self.start: int | None = None
        self.end: int | None = None
        self.peak: int | None = None
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        now = resident_bytes()
        if now is not None:
            self.peak = now if self.peak is None else max(self.peak, now)

    def _run(self) -> None:
        while not self._done.wait(self.every_s):
            self._sample()

    def __enter__(self) -> "RssWatch":
        self.start = resident_bytes()
        self._sample()
        if self.start is not None:
            self._thread = threading.Thread(target=self._run, name="finhallu-rss", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()
        self.end = resident_bytes()
        self._sample()

    def line(self) -> str | None:
        """ "memory: peak 2.31 GB resident (1.57 at the start, 2.15 at the end)", or None without /proc.
        Inside the block, "the end" is now (sampled as the line is made)."""
        end = self.end
        if end is None:
            end = resident_bytes()
            self._sample()
        if self.start is None or self.peak is None or end is None:
            return None
        gb = 2**30
        line = f"memory: peak {self.peak / gb:.2f} GB resident ({self.start / gb:.2f} at the start, {end / gb:.2f} at the end)"
        if tracemalloc.is_tracing():  # PYTHONTRACEMALLOC=1: what of it is Python objects still alive
            line += f"; Python heap {tracemalloc.get_traced_memory()[0] / gb:.2f} GB traced"
        return line
