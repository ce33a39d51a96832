"""Threads for the items of `map_items`, reused from one fan-out to the next.

A stage's items fan out again inside themselves (a question's answers from three models, then
their checks): with a `ThreadPoolExecutor` per fan-out, seed_qa started ~450 threads at demo
scale. `Thread.start()` waits until the new thread runs, which under a busy GIL takes a switch
interval or more, and `ThreadPoolExecutor.submit` does it holding a lock shared by every executor
of the process, so the LLM loop's own executor hand-offs (aiohttp's per-request `.netrc` lookup,
the OpenAI SDK's platform probe) waited behind them: sampled, the loop stood there ~0.8 s of
seed_qa's 10 s and the items ~3 s. Here an idle thread takes the next item, a new one starts only
when none is idle (no lock held while it starts), and a thread idle for `IDLE_S` ends.

`Fanout` bounds how many items of one fan-out run at once; every running item has a thread of
its own, so a nested fan-out never waits for a thread that its own caller holds.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections import deque
from concurrent.futures import Future
from typing import Any, Callable

IDLE_S = 30.0  # an idle thread ends after this long (the next stage's items usually come sooner)

_Job = Callable[[], None]


class _ItemThread(threading.Thread):
    def __init__(self, pool: "ItemThreads", job: _Job, name: str):
        super().__init__(name=name, daemon=True)  # idle ones must not hold the interpreter's exit
        self.pool, self.jobs = pool, queue.SimpleQueue[_Job]()
        self._first: _Job | None = job

    def run(self) -> None:
        job, self._first = self._first, None
        while job is not None:
            job()
            job = None  # nothing of the last item stays referenced while idle
            job = self.pool._idle_until_next(self)


class ItemThreads:
    """Runs jobs (callables that never raise) on idle threads, starting a thread only when none
    is idle."""

    def __init__(self, prefix: str = "finhallu-item", idle_s: float = IDLE_S):
        self.prefix, self.idle_s = prefix, idle_s
        self._idle: list[_ItemThread] = []  # last in, first out: the coldest ones time out
        self._lock = threading.Lock()
        self._names = itertools.count()

    def run(self, job: _Job) -> None:
        with self._lock:
            thread = self._idle.pop() if self._idle else None
        if thread is not None:
            thread.jobs.put(job)
        else:
            _ItemThread(self, job, f"{self.prefix}_{next(self._names)}").start()

    def idle(self) -> int:
        with self._lock:
            return len(self._idle)

    def _idle_until_next(self, thread: _ItemThread) -> _Job | None:
        with self._lock:
            self._idle.append(thread)
        try:
            return thread.jobs.get(timeout=self.idle_s)
        except queue.Empty:
            with self._lock:
                if thread in self._idle:
                    self._idle.remove(thread)
                    return None
            return thread.jobs.get()  # taken off the idle list just now: its job is on the way


_THREADS = ItemThreads()


class Fanout:
    """The items of one fan-out: at most `limit` run at once, each on a thread of its own; the
    rest wait in submission order. Futures are concurrent.futures' (as_completed works on them)."""

    def __init__(self, limit: int, threads: ItemThreads = _THREADS):
        self.threads = threads
        self._free = max(1, limit)
        self._waiting: deque[tuple[Future, Callable[..., Any], tuple]] = deque()
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        future: Future = Future()
        with self._lock:
            start = self._free > 0
            if start:
                self._free -= 1
            else:
                self._waiting.append((future, fn, args))
        if start:
            self.threads.run(lambda: self._serve(future, fn, args))
        return future

    def cancel_waiting(self) -> None:
        """Items not started yet never start (their futures are cancelled)."""
        with self._lock:
            waiting, self._waiting = list(self._waiting), deque()
        for future, _, _ in waiting:
            future.cancel()

    def _serve(self, future: Future, fn: Callable[..., Any], args: tuple) -> None:
        """Runs the item, then the fan-out's waiting ones, one after another on this thread."""
        while True:
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args)
                except BaseException as exc:  # as ThreadPoolExecutor: the caller's result() raises it
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            del future, fn, args
            with self._lock:
                if not self._waiting:
                    self._free += 1
                    return
                future, fn, args = self._waiting.popleft()
