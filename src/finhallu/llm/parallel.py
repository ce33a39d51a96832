"""Independent items of an LLM stage in flight together.

The runtime's limiter (RPM, TPM and requests in flight per model) is the only brake on a build;
this makes sure enough work waits at it. Each item (a dialogue, a document's seeds, an injection)
runs its own calls one after another, as its logic needs, in a thread of its own, and all items
run together. With every role offline the items run one after another in the calling thread:
rules are CPU-bound, and threads would only add switching. Results come back in the items'
order, and items share no RNG, so a stage's output never depends on which call finished first.
"""

from __future__ import annotations

import contextvars
import functools
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, Callable, Iterable, Sequence, TypeVar

T = TypeVar("T")
R = TypeVar("R")
MAX_THREADS = 256  # each waits on one call at a time; the limiter decides how many are sent
# Items in flight per request the models may have in flight. An item between two of its calls
# (parsing a reply, its rules) holds no request; with one item per request, requests would sit
# unused then, and a stage of chained items (a dialogue's turns) would leave its last items to
# run alone after the first ones finished: 40 dialogues at 32 in flight took 10.6 s, 8 s of
# chain. Extra items wait at the limiter, which still sends no more than the limits allow.
ITEMS_PER_REQUEST = 2


class _Path:
    """The sequential path of LLM calls that leads to the running code: `depth` rounds of calls
    (a call, or a `call_many`) had to finish one after another to get here. Items of `map_items`
    branch off their caller's path; the caller goes on from the deepest branch."""

    __slots__ = ("depth", "runtime")

    def __init__(self, runtime: object, depth: int = 0):
        self.runtime, self.depth = runtime, depth


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


def _in_branch(parent: _Path, branches: list[_Path], fn: Callable[[T], R], item: T) -> R:
    branch = _Path(parent.runtime, parent.depth)
    branches.append(branch)
    _PATH.set(branch)  # in the item's own context copy
    return fn(item)


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
    `longest_first`: an item's expected number of sequential calls; the longest start first, so
    that few long ones are left running alone at the end (results keep the items' order)."""
    roles = list(roles)
    workers = min(MAX_THREADS, ITEMS_PER_REQUEST * in_flight(router, roles), len(items))
    parent, branches = _path(router.runtime), list[_Path]()  # each item's calls branch off the caller's path (a dry run's too)
    try:
        if workers <= 1:
            out = []
            for n, item in enumerate(items, start=1):
                out.append(contextvars.copy_context().run(_in_branch, parent, branches, fn, item))
                if progress:
                    progress(n, len(items))
            return out
        router.prepare(roles)  # SDKs imported here, before any call is in flight
        results: list = [None] * len(items)
        # Each thread runs in a copy of this context: the stage's LLM runtime and Prefect run context
        # are context variables (one copy per item: a context cannot be entered by two threads).
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="finhallu-item") as pool:
            start = sorted(range(len(items)), key=lambda i: -longest_first(items[i])) if longest_first else range(len(items))
            futures = {pool.submit(contextvars.copy_context().run, _in_branch, parent, branches, fn, items[i]): i for i in start}
            try:
                for n, fut in enumerate(as_completed(futures), start=1):
                    results[futures[fut]] = fut.result()
                    if progress:
                        progress(n, len(items))
            except BaseException:
                for fut in futures:
                    fut.cancel()  # items not started yet; running ones stop at their next call (the runtime's stop)
                raise
        return results
    finally:
        parent.depth = max([parent.depth, *(b.depth for b in branches)])


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
