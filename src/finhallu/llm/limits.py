"""Per-model request limits: RPM, TPM and requests in flight.

RPM: requests are spaced `60/rpm` apart, and a sliding log never lets more than `rpm`
requests into any window of 60 s plus a 1 s margin. A finished request's log entry moves to its
completion time: the provider saw it somewhere between our send and our receipt, so counting
from the receipt can never undercount the provider's window, however late a request arrived
(with start times only, one request in 2,000 still drew a 429 on a loaded machine). TPM: each request reserves its estimated tokens
(prompt estimate + max_tokens) in a 60 s sliding log and settles to the real usage when the
reply arrives. Concurrency: `PrioritySlots` per event loop, a semaphore whose freed slot goes to
the waiting request whose item has the most calls ahead of it.

State is guarded by a thread lock, so one limiter serves every stage and thread of a process:
two roles on the same model share its limits.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import threading
import time
from collections import deque
from typing import AsyncIterator, Callable

WINDOW_S = 60.0
MARGIN_S = 1.0


class Reservation:
    def __init__(self, limiter: "ModelLimiter", start: list | None, tokens: list | None):
        self._limiter, self._start, self._tokens = limiter, start, tokens

    def settle(self, actual_tokens: int) -> None:
        """The request is done: its RPM log entry moves to now (it reached the provider at some
        moment up to now, so counting it from now is never too early), and its token estimate
        becomes the real usage (never below zero)."""
        with self._limiter._lock:
            if self._start is not None:
                self._start[0] = self._limiter.clock()
            if self._tokens is not None:
                actual = max(0, int(actual_tokens))
                if self._tokens[2]:  # still in the 60 s log: the running total follows
                    self._limiter._used += actual - self._tokens[1]
                self._tokens[1] = actual


class PrioritySlots:
    """At most `size` requests in flight on one event loop. A freed slot goes to the waiting
    request with the highest priority (`parallel.rounds_ahead`: the calls its item still has ahead
    of it), then to the one that has waited longest; with equal priorities it is a FIFO semaphore."""

    def __init__(self, size: int):
        self._free = size
        self._waiting: list[tuple[float, int, asyncio.Future]] = []  # heap of (-priority, arrival, future)
        self._arrivals = itertools.count()

    @contextlib.asynccontextmanager
    async def slot(self, priority: float = 0.0) -> AsyncIterator[None]:
        await self._acquire(priority)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, priority: float) -> None:
        if self._free > 0 and not self._waiting:
            self._free -= 1
            return
        granted = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (-priority, next(self._arrivals), granted))
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():  # handed a slot, then cancelled: hand it on
                self._release()
            raise

    def _release(self) -> None:
        while self._waiting:
            granted = heapq.heappop(self._waiting)[2]
            if not granted.done():  # a cancelled waiter's future is done: skipped
                granted.set_result(None)  # the slot passes straight to it
                return
        self._free += 1


class ModelLimiter:
    def __init__(
        self,
        rpm: float | None = None,
        tpm: float | None = None,
        concurrency: int = 8,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.rpm, self.tpm, self.concurrency = rpm, tpm, concurrency
        self.clock = clock
        self._lock = threading.Lock()
        self._starts: list[list[float]] = []  # [start time, moved to completion time by settle()]
        self._prune_at = 64  # the RPM log is pruned when it reaches this size (or the limit)
        self._tokens: deque[list] = deque()  # [start time, tokens, still in the log]
        self._used = 0  # the tokens of the log, kept as entries come, settle and go
        self._next_slot = 0.0
        self._paused_until = 0.0
        self._sems: dict[int, PrioritySlots] = {}

    def semaphore(self) -> PrioritySlots:
        loop = asyncio.get_running_loop()
        with self._lock:
            sem = self._sems.get(id(loop))
            if sem is None:
                self._sems = {k: v for k, v in self._sems.items() if k == id(loop)}  # drop finished loops
                sem = self._sems[id(loop)] = PrioritySlots(self.concurrency)
            return sem

    def _wait_for(self, now: float, tokens: int) -> float:
        # Every request passes here: the logs are kept so that this costs O(1) per request (a scan
        # of the whole log per request was 2 s of the LLM loop's time in a 1,461-call build).
        window = WINDOW_S + MARGIN_S
        if len(self._starts) >= min(self.rpm or self._prune_at, self._prune_at):
            # Settled entries moved to their completion times, so the log is not in time order:
            # pruned when it could bind (or has doubled since), not from the left.
            self._starts = [e for e in self._starts if e[0] > now - window]
            self._prune_at = max(64, 2 * len(self._starts))
        while self._tokens and self._tokens[0][0] <= now - WINDOW_S:
            gone = self._tokens.popleft()
            gone[2] = False
            self._used -= gone[1]
        wait = max(0.0, self._paused_until - now)
        if self.rpm:
            wait = max(wait, self._next_slot - now)
            if len(self._starts) >= self.rpm:
                wait = max(wait, min(e[0] for e in self._starts) + window - now)
        if self.tpm:
            used = self._used
            # A request larger than the whole budget still goes alone into an empty window.
            if self._tokens and used + tokens > self.tpm:
                budget, i = used + tokens - self.tpm, 0
                while budget > 0 and i < len(self._tokens):
                    budget -= self._tokens[i][1]
                    i += 1
                wait = max(wait, self._tokens[i - 1][0] + WINDOW_S - now)
        return wait

    def try_reserve(self, tokens: int) -> tuple[float, Reservation | None]:
        """(0, reservation) when a request may start now, else (seconds to wait, None)."""
        with self._lock:
            now = self.clock()
            wait = self._wait_for(now, tokens)
            if wait > 0:
                return wait, None
            start = None
            if self.rpm:
                start = [now]
                self._starts.append(start)
                # Spacing may catch up on up to one second of lag (a busy event loop) in a short
                # burst; the sliding log above still bounds every window.
                interval = WINDOW_S / self.rpm
                self._next_slot = max(self._next_slot, now - 1.0) + interval
            entry = None
            if self.tpm:
                entry = [now, int(tokens), True]
                self._tokens.append(entry)
                self._used += int(tokens)
            return 0.0, Reservation(self, start, entry)

    def pause(self, seconds: float) -> None:
        """Hold every new request for `seconds` (a 429 with Retry-After speaks for the whole model)."""
        with self._lock:
            self._paused_until = max(self._paused_until, self.clock() + seconds)

    async def acquire(self, tokens: int) -> Reservation:
        while True:
            wait, res = self.try_reserve(tokens)
            if res is not None:
                return res
            await asyncio.sleep(min(wait, 5.0) + 0.001)


class LimiterRegistry:
    """One limiter per (provider, endpoint, model) for the whole process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._limiters: dict[tuple, ModelLimiter] = {}

    def get(self, provider: str, endpoint: str, model: str, rpm, tpm, concurrency) -> ModelLimiter:
        key = (provider, endpoint, model)
        with self._lock:
            lim = self._limiters.get(key)
            if lim is None or (lim.rpm, lim.tpm, lim.concurrency) != (rpm, tpm, concurrency):
                lim = self._limiters[key] = ModelLimiter(rpm, tpm, concurrency)
            return lim


LIMITERS = LimiterRegistry()
