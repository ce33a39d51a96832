"""The cyclic garbage collector paused while a stage does offline work (issue "paper scale and beyond").

A stage builds millions of long-lived objects (rows, turn views, inventories, memo entries), and
CPython's collector walks all of them again each time the objects that survived young collections
grow by a quarter: at 3,060 documents inject spent 17 of its 100 s in those walks (22-35 full
passes). What they look for, garbage in reference cycles, these stages hardly make: a collection
right after assemble or detect at that size found no unreachable object. So the collector is
paused for the stage's run; reference counting frees everything acyclic as before, and any cycle
made meanwhile is collected once the collector runs again (its first pass after the stage walks
what the stage left, once).

Not for a stage that calls a remote model: its requests, retries and event loop make cyclic garbage
for as long as the model takes (hours at paper scale); those builds keep `old_objects_frozen`
(llm.parallel), which spares the walks over the objects made before.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from typing import Iterator

_paused = 0  # entries in progress (a stage's run may overlap its predecessor's end)
_resume = False  # whether the collector ran when the first of them began
_lock = threading.Lock()


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The collector off until the last overlapping entry ends; left as it was found then (one
    paused by someone else, e.g. the build's warm-up, stays paused)."""
    global _paused, _resume
    with _lock:
        if _paused == 0:
            _resume = gc.isenabled()
            gc.disable()
        _paused += 1
    try:
        yield
    finally:
        with _lock:
            _paused -= 1
            if _paused == 0 and _resume:
                gc.enable()
