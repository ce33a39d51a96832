"""What the stages of a build import lazily, imported while the build waits on a remote model.

Stages import scikit-learn, SciPy and the like inside their functions, so the CLI starts fast and
an offline stage pays only for what it uses. On the LLM path those imports fell between the LLM
phases, on the build's critical path: at demo scale assemble took 1.5 s, 1.2 s of it importing
scikit-learn. A build whose stages call a remote model imports what its stages declare
(`Stage.imports`) on a thread of its own from the build's first remote request: the process then
mostly waits for answers, so the imports take its idle time instead of the stages'.

A stage that declares imports waits for that thread before it runs (`settle_preload`), so it never
imports one of those modules while the thread does: two threads importing modules that import each
other is a deadlock Python can only report as an import error. Before any request was sent (every
call answered from the cache), settling starts the imports and waits for them: what the stage's
own imports would have cost. A module that fails to import is left to the stage, whose own import
then raises where it belongs.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from contextvars import ContextVar
from typing import Iterable, Iterator

from finhallu.llm.parallel import on_next_request

_PRELOAD: ContextVar["Preload | None"] = ContextVar("finhallu_preload", default=None)


class Preload:
    """Imports `modules`, in order, on a daemon thread once the process sends a remote request."""

    def __init__(self, modules: Iterable[str]):
        self.modules = tuple(dict.fromkeys(modules))
        self.failed: dict[str, str] = {}  # module -> the error its import raised here
        self._begin = threading.Event()
        self._closed = False
        on_next_request(self._begin)
        self._thread = threading.Thread(target=self._run, name="finhallu-preload", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        self._begin.wait()
        for name in self.modules:
            if self._closed:
                return
            try:
                importlib.import_module(name)
            except Exception as exc:  # the stage's own import raises it again
                self.failed[name] = f"{type(exc).__name__}: {exc}"

    def settle(self) -> None:
        """Return once every module was tried (starting the imports now if no request started them)."""
        self._begin.set()
        self._thread.join()

    def close(self) -> None:
        """Stop after the module being imported (a build that ends before its stages needed them)."""
        self._closed = True
        self._begin.set()
        self._thread.join()


@contextlib.contextmanager
def use_preload(modules: Iterable[str]) -> Iterator[Preload | None]:
    """A Preload of `modules` for the stages run inside (none when there is nothing to import)."""
    wanted = tuple(modules)
    preload = Preload(wanted) if wanted else None
    token = _PRELOAD.set(preload)
    try:
        yield preload
    finally:
        _PRELOAD.reset(token)
        if preload is not None:
            preload.close()


def settle_preload(stage) -> None:
    """Before `stage` runs: if it declares imports, wait until the build's preload has made them."""
    preload = _PRELOAD.get()
    if preload is not None and stage.imports:
        preload.settle()
