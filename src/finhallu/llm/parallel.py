"""Independent items of an LLM stage in flight together.

The runtime's limiter (RPM, TPM and requests in flight per model) is the only brake on a build;
this makes sure enough work waits at it. Each item (a dialogue, a document's seeds, an injection)
runs its own calls one after another, as its logic needs, in a thread of its own, and all items
run together. With every role offline the items run one after another in the calling thread:
rules are CPU-bound, and threads would only add switching. Results come back in the items'
order, and items share no RNG, so a stage's output never depends on which call finished first.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import gc
import threading
import time
from concurrent.futures import Future, as_completed, wait
from typing import Any, Callable, Iterable, Sequence, TypeVar

from finhallu.llm.item_threads import Fanout

T = TypeVar("T")
R = TypeVar("R")
MAX_THREADS = 256  # each waits on one call at a time; the limiter decides how many are sent
# Items in flight per request the models may have in flight. An item between two of its calls
# (parsing a reply, its rules) holds no request; with one item per request, requests would sit
# unused then, and a stage of chained items (a dialogue's turns) would leave its last items to
# run alone after the first ones finished: 40 dialogues at 32 in flight took 10.6 s, 8 s of
# chain. Extra items wait at the limiter, which still sends no more than the limits allow.
ITEMS_PER_REQUEST = 2
LEAD_WAIT_S = 10.0  # how long the other items wait for the lead items' first requests, at most


class _Path:
    """The sequential path of LLM calls that leads to the running code: `depth` rounds of calls
    (a call, or a `call_many`) had to finish one after another to get here. Items of `map_items`
    branch off their caller's path; the caller goes on from the deepest branch."""

    __slots__ = ("depth", "runtime", "sent", "horizon")

    def __init__(self, runtime: object, depth: int = 0, sent: threading.Event | None = None, horizon: float | None = None):
        self.runtime, self.depth = runtime, depth
        self.sent = sent  # set once the item's first request is on its way (see map_items' lead)
        self.horizon = horizon  # the depth its item is expected to end at (map_items' longest_first), if known


_PATH: contextvars.ContextVar[_Path | None] = contextvars.ContextVar("finhallu_llm_path", default=None)


def _path(runtime: object) -> _Path:
    path = _PATH.get()
    if path is None or path.runtime is not runtime:
        path = _Path(runtime)
        _PATH.set(path)  # a stage's own thread: its path starts at the stage's first call (each stage has its runtime)
    return path


def call_round(runtime: object) -> int:
    """A round of calls starts on this path: its position on the path (1 = nothing before it).
    The ledger records it as `chain`; the longest chain of a stage x the latency is a floor on its
    LLM time that no number of requests in flight can beat."""
    path = _path(runtime)
    path.depth += 1
    return path.depth


def rounds_ahead(runtime: object) -> float:
    """How many rounds of calls the calling item still expects to make, this one included (0 when
    its stage did not say how long its items are): a request of an item with more ahead of it gets a
    freed slot of its model first (`limits.PrioritySlots`). A stage of chained items (a dialogue's
    turns) then ends with its longest chain, not after it: first come, first served, the long
    dialogues' turns waited behind the short ones' and ran alone at the end (dialogues took 9.1 s
    for a floor of 8.0 at demo scale)."""
    path = _path(runtime)
    return 0.0 if path.horizon is None else max(0.0, path.horizon - path.depth + 1)


_frozen = 0  # map_items and waits on the LLM loop (of any thread) under old_objects_frozen()
_frozen_lock = threading.Lock()


@contextlib.contextmanager
def old_objects_frozen():
    """While calls are in flight (a map_items, or a stage thread waiting for its calls), the objects
    made before are out of the garbage collector's reach (gc.freeze). A full collection walks every
    tracked object with the GIL held: at demo scale up to 1 s, during which no reply is read and
    every call in flight waits. Garbage made meanwhile is collected as usual; the frozen objects are
    collectable again once the last of these returns: a build with remote roles holds one for its
    whole run (cli), so that its offline work between the calls does not walk the objects of the
    stages before either (a full pass in inject took 0.25 s at demo scale). Freezing and thawing are
    O(1)."""
    global _frozen
    with _frozen_lock:
        gc.freeze()  # what exists now, held or not (a nested entry adds what was made since)
        _frozen += 1
    try:
        yield
    finally:
        with _frozen_lock:
            _frozen -= 1
            if _frozen == 0:
                gc.unfreeze()


_REQUEST_WATCHERS: list[threading.Event] = []
_watchers_lock = threading.Lock()


def on_next_request(event: threading.Event) -> None:
    """`event` is set when this process next sends a remote request (flows/preload.py waits for it)."""
    with _watchers_lock:
        _REQUEST_WATCHERS.append(event)


def sending() -> None:
    """The calling item's request is about to go to the LLM loop (the router says so)."""
    if _REQUEST_WATCHERS:  # unlocked look first: every call passes here
        with _watchers_lock:
            for event in _REQUEST_WATCHERS:
                event.set()
            _REQUEST_WATCHERS.clear()
    path = _PATH.get()
    if path is not None and path.sent is not None:
        path.sent.set()


def _in_branch(
    parent: _Path,
    branches: list[_Path],
    fn: Callable[[T], R],
    item: T,
    sent: threading.Event | None = None,
    rounds: float | None = None,
) -> R:
    horizon = parent.horizon if rounds is None else parent.depth + rounds
    # A nested item's first request is its caller's too (a lead item that fans out its first calls)
    branch = _Path(parent.runtime, parent.depth, sent or parent.sent, horizon)
    branches.append(branch)
    _PATH.set(branch)  # in the item's own context copy
    try:
        return fn(item)
    finally:
        if sent is not None:
            sent.set()


class _FirstRequests:
    """A lead item that fans out its first requests (a document's chunks asked together) is on its
    way once every item of the fan-out that starts at once has its first request on the way (or has
    ended). Counted from its first item's request, the items waiting for the lead started then and
    took the free slots from the lead's other first requests: seed_qa's question generators, whose
    grouping every later call of the document waits for, went out a wave late."""

    def __init__(self, lead: threading.Event, items: int):
        self.lead, self.left, self.lock = lead, items, threading.Lock()
        if items == 0:
            lead.set()


class _FirstRequest(threading.Event):
    """One item's first request of a lead's fan-out (`_FirstRequests`)."""

    def __init__(self, group: _FirstRequests):
        super().__init__()
        self._group = group

    def set(self) -> None:
        group = self._group
        with group.lock:
            if self.is_set():
                return
            super().set()
            group.left -= 1
            last = group.left == 0
        if last:
            group.lead.set()


def in_flight(router, roles: Iterable[str]) -> int:
    """How many calls the remote roles' models may have in flight together (0: all offline)."""
    runtime = router.runtime
    if runtime.estimating:
        return 0  # a dry run answers with the rules: nothing to wait for
    seen: dict[tuple, int] = {}
    for role in roles:
        if router.is_offline(role):
            continue
        cfg = router.role_config(role)
        lim = runtime.settings.limits.get(cfg["model"]) or runtime.settings.default_limits
        seen[(cfg["provider"], cfg.get("base_url"), cfg["model"])] = lim.concurrency
    return min(MAX_THREADS, sum(seen.values()))


def map_items(
    fn: Callable[[T], R],
    items: Sequence[T],
    router,
    roles: Iterable[str],
    progress: Callable[[int, int], None] | None = None,
    longest_first: Callable[[T], float] | None = None,
) -> list[R]:
    """[fn(item) for item in items], concurrently when a role of `roles` calls a remote model.
    `longest_first`: an item's expected number of sequential calls; the longest start first, and
    a request of an item with more calls ahead of it gets its model's next free slot first
    (`rounds_ahead`), so that few long ones are left running alone at the end (results keep the
    items' order)."""
    roles = list(roles)

    def rounds(item: T) -> float | None:
        return None if longest_first is None else float(longest_first(item))

    workers = min(MAX_THREADS, ITEMS_PER_REQUEST * in_flight(router, roles), len(items))
    parent, branches = _path(router.runtime), list[_Path]()  # each item's calls branch off the caller's path (a dry run's too)
    try:
        if workers <= 1:
            out = []
            for n, item in enumerate(items, start=1):
                out.append(contextvars.copy_context().run(_in_branch, parent, branches, fn, item, None, rounds(item)))
                if progress:
                    progress(n, len(items))
            return out
        router.prepare(roles)  # SDKs imported here, before any call is in flight
        results: list = [None] * len(items)
        # Each item runs in a copy of this context: the stage's LLM runtime and Prefect run context
        # are context variables (one copy per item: a context cannot be entered by two threads).
        with old_objects_frozen():
            fanout = Fanout(workers)
            start = (
                sorted(range(len(items)), key=lambda i: -longest_first(items[i])) if longest_first else list(range(len(items)))
            )
            lead = _lead(items, start, longest_first)
            sent: dict[int, threading.Event | None] = {i: threading.Event() for i in lead}
            if parent.sent is not None and not parent.sent.is_set():  # the first fan-out of a lead item
                group = _FirstRequests(parent.sent, min(workers, len(items)))
                # Items that start later (a thread freed) no longer count, nor set the lead's event.
                sent = {i: _FirstRequest(group) if n < workers else threading.Event() for n, i in enumerate(start)}

            def submit(i: int) -> Future:
                return fanout.submit(
                    contextvars.copy_context().run, _in_branch, parent, branches, fn, items[i], sent.get(i), rounds(items[i])
                )

            futures = {submit(i): i for i in lead}
            # The rest start once every lead item has its first request on the way (or is done): all
            # starting together, the leads' requests would queue behind the first wave of the others'.
            deadline = time.monotonic() + LEAD_WAIT_S
            for i in lead[:workers]:  # a lead beyond the first `workers` waits for a thread, as the rest do
                sent[i].wait(max(0.0, deadline - time.monotonic()))  # type: ignore[union-attr]  # leads have one
            futures.update({submit(i): i for i in start[len(lead) :]})
            try:
                for n, fut in enumerate(as_completed(futures), start=1):
                    results[futures[fut]] = fut.result()
                    if progress:
                        progress(n, len(items))
            except BaseException:
                # Items not started yet never start; running ones stop at their next call (the
                # runtime's stop), and the stage goes on once they have.
                fanout.cancel_waiting()
                wait(futures)
                raise
        return results
    finally:
        parent.depth = max([parent.depth, *(b.depth for b in branches)])


def _lead(items: Sequence[T], start: list[int], longest_first: Callable[[T], float] | None) -> list[int]:
    """The items with the longest expected chain, when not every item has it: they start first."""
    if not longest_first or not start:
        return []
    top = longest_first(items[start[0]])
    lead = [i for i in start if longest_first(items[i]) == top]
    return lead if len(lead) < len(start) else []


def shared_result(maxsize: int = 512) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """lru_cache for a pure function that items in flight together call with the same arguments
    (the validations of one chunk's questions all read its facts): the first caller computes, the
    others wait for its result. A plain lru_cache lets every one of them compute it."""

    def deco(fn: Callable[..., T]) -> Callable[..., T]:
        cached = functools.lru_cache(maxsize=maxsize)(fn)
        pending: dict[tuple, threading.Lock] = {}
        guard = threading.Lock()

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> T:
            key = (args, tuple(sorted(kwargs.items())))
            with guard:
                lock = pending.setdefault(key, threading.Lock())
            with lock:
                try:
                    return cached(*args, **kwargs)
                finally:
                    with guard:
                        pending.pop(key, None)

        wrapper.cache_clear = cached.cache_clear  # type: ignore[attr-defined]  # lru_cache's, passed through
        return wrapper

    return deco
