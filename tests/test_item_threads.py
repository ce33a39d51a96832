"""Threads for map_items' items: reused across fan-outs, bounded per fan-out, never deadlocked by
nesting, and a lead item's first fan-out counted as one first request."""

from __future__ import annotations

import threading
import time

import pytest

from finhallu.llm.config import LLMConfig, ModelLimits
from finhallu.llm.item_threads import Fanout, ItemThreads
from finhallu.llm.parallel import map_items
from finhallu.llm.router import LLMRouter
from finhallu.llm.runtime import LLMRuntime


def _router(concurrency: int = 4) -> LLMRouter:
    rt = LLMRuntime(LLMConfig(limits={"m": ModelLimits(concurrency=concurrency)}))
    return LLMRouter({"r": {"provider": "openai_compatible", "model": "m", "base_url": "http://127.0.0.1:9/v1"}}, rt)


def test_a_fanout_runs_at_most_its_limit_at_once_in_submission_order():
    threads = ItemThreads(prefix="t-limit")
    fanout, lock, running, peak, order = Fanout(2, threads), threading.Lock(), [0], [0], []

    def item(i: int) -> int:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
            order.append(i)
        time.sleep(0.01)
        with lock:
            running[0] -= 1
        return i * i

    futures = [fanout.submit(item, i) for i in range(8)]
    assert [f.result(timeout=30) for f in futures] == [i * i for i in range(8)]
    assert peak[0] <= 2 and order[2:] == list(range(2, 8))  # the waiting ones in order


def test_threads_are_reused_from_one_fanout_to_the_next():
    threads = ItemThreads(prefix="t-reuse")
    seen: set[int] = set()
    for _ in range(5):
        fanout, together = Fanout(3, threads), threading.Barrier(3, timeout=30)  # three at once each time

        def item() -> int:
            together.wait()
            return threading.get_ident()

        futures = [fanout.submit(item) for _ in range(3)]
        seen.update(f.result(timeout=30) for f in futures)
        deadline = time.monotonic() + 30
        while threads.idle() < 3 and time.monotonic() < deadline:  # each goes idle after its item
            time.sleep(0.005)
    assert len(seen) == 3  # a pool per fan-out would have started 15


def test_an_idle_thread_ends_after_its_idle_time():
    threads = ItemThreads(prefix="t-idle", idle_s=0.05)
    Fanout(1, threads).submit(lambda: None).result(timeout=30)
    deadline = time.monotonic() + 30
    while (threads.idle() or any(t.name.startswith("t-idle") for t in threading.enumerate())) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert threads.idle() == 0 and not any(t.name.startswith("t-idle") for t in threading.enumerate())


def test_cancelled_waiting_items_never_start_and_an_error_reaches_the_caller():
    threads = ItemThreads(prefix="t-cancel")
    fanout, release, started = Fanout(1, threads), threading.Event(), []

    def first() -> None:
        release.wait(30)
        raise ValueError("item failed")

    running = fanout.submit(first)
    waiting = [fanout.submit(started.append, i) for i in range(3)]
    fanout.cancel_waiting()
    release.set()
    with pytest.raises(ValueError, match="item failed"):
        running.result(timeout=30)
    assert all(f.cancelled() for f in waiting) and started == []


def test_nested_fanouts_at_their_limit_do_not_wait_for_their_callers_threads():
    """Every item of every fan-out in flight holds a thread: a fan-out inside items that fill
    their own fan-out's limit still runs (a shared fixed pool would deadlock here)."""
    router = _router(concurrency=1)  # two items in flight per fan-out

    def inner(j: int) -> int:
        return j + 1

    def outer(i: int) -> list[int]:
        return map_items(inner, [i, i + 10, i + 20], router, ["r"])

    assert map_items(outer, list(range(4)), router, ["r"]) == [[i + 1, i + 11, i + 21] for i in range(4)]


def test_a_lead_item_is_on_its_way_once_all_of_its_first_fanout_has_sent():
    """A lead item (a document) whose first requests come from a fan-out (its chunks): the other
    items start only once every item of that fan-out has its first request on the way."""
    from finhallu.llm import parallel

    router = _router(concurrency=8)
    lock, sent, seen_at_start = threading.Lock(), set(), []

    def chunk(j: int) -> None:
        if j == 2:
            time.sleep(0.05)  # the last chunk's request goes out later
        with lock:
            sent.add(j)
        parallel.sending()

    def item(i: int) -> int:
        if i == 0:
            map_items(chunk, [0, 1, 2], router, ["r"])
        else:
            with lock:
                seen_at_start.append(set(sent))
        return i

    assert map_items(item, [0, 1, 2], router, ["r"], longest_first=lambda i: 3 if i == 0 else 1) == [0, 1, 2]
    assert seen_at_start == [{0, 1, 2}, {0, 1, 2}]
