"""Gates behind the next stage: in a build whose stages wait on remote models, a stage's gates run
while the next stage already works on its outputs.

A stage's task writes its conformed outputs ahead of their gates (unpublished versions: no
manifest record, so neither views nor `current` see them) and hands their refs over; the flow
starts the next stage on them at once, and the stage goes on to its gates on a thread of its own.
A stage commits (publishes) only after every stage before it committed; when an earlier stage's
gate fails, a later stage fails before it publishes anything (`EarlierStageFailed`) and the build
reports the earlier failure. So what a build publishes, and when the build fails, are as without
the overlap; only the order of work changes. The cost: a failed gate is known a stage later, after
that stage's calls were made (they are in the call cache for the rerun).

With every role offline the stages are CPU work on the interpreter's one lock, and the gates
would only share it: the overlap is on when a stage calls a remote model (`llm.overlap_gates`).
"""

from __future__ import annotations

import contextvars
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Callable

from finhallu.warehouse import TableRef

_HANDOFF: contextvars.ContextVar[Callable[[dict[str, TableRef]], None] | None] = contextvars.ContextVar(
    "finhallu_stage_handoff", default=None
)
_EARLIER: contextvars.ContextVar[tuple["Behind", ...]] = contextvars.ContextVar("finhallu_earlier_stages", default=())


class EarlierStageFailed(RuntimeError):
    """A stage that must not publish: a stage before it failed (its own error says why)."""


@dataclass
class Behind:
    """A stage still at its gates (or publishing) while later stages run."""

    stage: str
    future: Future


def handoff() -> Callable[[dict[str, TableRef]], None] | None:
    """Where the running stage hands over its written outputs' refs; None when it gates inline."""
    return _HANDOFF.get()


def wait_for_earlier() -> None:
    """Block until every earlier stage still at its gates has published; raise if one failed."""
    for behind in _EARLIER.get():
        if behind.future.exception() is not None:
            raise EarlierStageFailed(f"stage {behind.stage} failed before this stage could publish")


class StageOverlap:
    """Runs a build's stages in order, each one's gates behind the next (see the module docstring).

    `step(stage, refs)` runs one stage task, adds its outputs to `refs` and returns whether it was
    cached. Off, every stage runs inline, exactly as `step` alone."""

    def __init__(self, on: bool):
        self.started: list[Behind] = []  # every stage, in order
        # A thread per stage still at its gates: they wait on the gate worker one after another.
        self._pool = ThreadPoolExecutor(max_workers=32, thread_name_prefix="stage-gates") if on else None

    def __enter__(self) -> "StageOverlap":
        return self

    def __exit__(self, *exc) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)  # a stage still at its gates finishes them (or fails) first

    def run(self, stage, refs: dict[str, TableRef], step: Callable[..., bool], last: bool = False) -> None:
        """Start `stage` and return once its outputs can be read (their refs are in `refs`): at
        once inline (off, or the last stage), else once it has written them."""
        if any(b.future.done() and b.future.exception() is not None for b in self.started):
            self.finish()  # an earlier stage failed: no later stage starts (nor makes its calls)
        earlier = tuple(self.started)
        if self._pool is None or last:
            done: Future = Future()
            self.started.append(Behind(stage.name, done))
            token = _EARLIER.set(earlier)
            try:
                done.set_result(step(stage, refs))
            except BaseException as exc:
                done.set_exception(exc)
                self.finish()  # the first failure in stage order: an earlier stage's, else this one
            finally:
                _EARLIER.reset(token)
            return
        handed: Future = Future()
        ctx = contextvars.copy_context()  # the flow run's context: the stage task is part of it
        ctx.run(_EARLIER.set, earlier)
        ctx.run(_HANDOFF.set, handed.set_result)
        own = dict(refs)
        future = self._pool.submit(ctx.run, step, stage, own)
        self.started.append(Behind(stage.name, future))
        wait([handed, future], return_when=FIRST_COMPLETED)
        if handed.done():
            refs.update(handed.result())
            return
        if future.exception() is not None:
            self.finish()  # raises the first failure in stage order
        refs.update(own)  # cached: its outputs were published by an earlier build

    def finish(self) -> list[tuple[str, bool]]:
        """Wait for every stage; raise the first failure in stage order (an `EarlierStageFailed`
        only stands for it), else return (stage, cached) for each."""
        errors = [(b, b.future.exception()) for b in self.started]
        for _, exc in errors:
            if exc is not None and not isinstance(exc, EarlierStageFailed):
                raise exc
        for _, exc in errors:
            if exc is not None:
                raise exc
        return [(b.stage, b.future.result()) for b in self.started]
