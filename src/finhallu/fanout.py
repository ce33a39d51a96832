"""Fan-out of a stage's pure per-item work over partitions of its items.

A stage (or a detector) hands `Fanout.map` a module-level function of a list of items that
returns one result per item, and the items; it gets the results back in the items' order. How
the partitions run is the build's choice, not the stage's:

- `InProcess` (the default, and every run outside a flow): one call over all the items.
- `PrefectTasks`: the items cut into contiguous partitions, each one run of the `partition`
  Prefect task, mapped by the flow's task runner. Under `finhallu build --runner dask` that runner
  is prefect-dask's `DaskTaskRunner`, so the partitions run on the Dask cluster's workers and
  show in the Prefect UI as task runs of the stage.

The function must be pure (its results depend only on its items): the output is then the same
whichever way it ran, byte for byte, which the Dask build's test checks against the local one.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Protocol, Sequence, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Fanout(Protocol):
    def map(
        self, fn: Callable[[list[Any]], list[Any]], items: Sequence[Any], name: str = "", min_items: int | None = None
    ) -> list[Any]:
        """`fn` over `items` in partitions, the results in the items' order; `min_items`: fewer
        items than this run in one call where they are (a round trip would cost more)."""
        ...


def partitions(items: Sequence[T], n: int) -> list[list[T]]:
    """`items` cut into at most `n` contiguous parts whose sizes differ by at most one."""
    n = max(1, min(n, len(items)))
    size, extra = divmod(len(items), n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        out.append(list(items[start:end]))
        start = end
    return [p for p in out if p]


def _checked(fn: Callable, part: list, results: list) -> list:
    if len(results) != len(part):
        raise RuntimeError(f"{getattr(fn, '__name__', fn)} returned {len(results)} results for {len(part)} items")
    return results


@dataclass(frozen=True)
class InProcess:
    def map(
        self, fn: Callable[[list[Any]], list[Any]], items: Sequence[Any], name: str = "", min_items: int | None = None
    ) -> list[Any]:
        part = list(items)
        return _checked(fn, part, fn(part)) if part else []


class _Opaque:
    """A partition's items in a box Prefect does not open: it walks list, tuple, dict, dataclass and
    model parameters to their every nested value looking for futures to track (12,000 samples' dicts:
    3 s per map, most of a partitioned stage's overhead). `prefect...annotations.quote` would say the
    same, but reached a Dask worker as a plain tuple around the items."""

    __slots__ = ("items",)

    def __init__(self, items: list) -> None:
        self.items = items


def _run_partition(fn: Callable[[list[Any]], list[Any]], part: _Opaque, index: int, label: str) -> list:
    return _checked(fn, part.items, fn(part.items))


@lru_cache(maxsize=1)
def _partition_task():
    """The Prefect task a partition runs as (made on first use: stage code imports no Prefect)."""
    from prefect import task
    from prefect.cache_policies import NO_CACHE

    return task(name="partition", task_run_name="{label}[{index}]", cache_policy=NO_CACHE, persist_result=False, retries=0)(
        _run_partition
    )


@dataclass(frozen=True)
class PrefectTasks:
    """Partitions as mapped runs of one Prefect task on the current flow's task runner."""

    workers: int
    per_worker: int = 2  # partitions per worker: a slow one does not leave the others idle
    min_items: int = 32  # below this (unless a caller says otherwise) a round trip costs more than the work

    def map(
        self, fn: Callable[[list[Any]], list[Any]], items: Sequence[Any], name: str = "", min_items: int | None = None
    ) -> list[Any]:
        from prefect import unmapped

        items = list(items)
        if len(items) < max(2, self.min_items if min_items is None else min_items):
            return InProcess().map(fn, items)
        parts = partitions(items, self.workers * self.per_worker)
        label = name or getattr(fn, "__name__", "partition")
        boxed = [_Opaque(p) for p in parts]
        futures = _partition_task().map(unmapped(fn), boxed, range(len(parts)), unmapped(label))
        return [r for f in futures for r in f.result()]


def current_fanout() -> Fanout:
    """The fan-out of the running flow: Prefect tasks over its Dask cluster's workers when the flow
    runs on a DaskTaskRunner, else in process."""
    try:
        from prefect.context import FlowRunContext

        runner = getattr(FlowRunContext.get(), "task_runner", None)
    except Exception:  # pragma: no cover - prefect is a dependency; no context outside a flow
        runner = None
    if runner is None or type(runner).__name__ != "DaskTaskRunner":
        return InProcess()
    slots = sum(runner.client.nthreads().values())  # worker threads across the cluster
    return PrefectTasks(workers=max(1, slots))
