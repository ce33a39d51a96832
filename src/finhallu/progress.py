"""Progress events from stages to whatever displays them (the CLI's rich progress, or nothing)."""

from __future__ import annotations

from typing import Protocol


class Reporter(Protocol):
    def stage_started(self, stage: str) -> None: ...
    def stage_progress(self, stage: str, done: int, total: int) -> None: ...
    def stage_finished(self, stage: str, status: str) -> None: ...
    def note(self, message: str) -> None: ...


class _Null:
    def stage_started(self, stage: str) -> None:
        pass

    def stage_progress(self, stage: str, done: int, total: int) -> None:
        pass

    def stage_finished(self, stage: str, status: str) -> None:
        pass

    def note(self, message: str) -> None:
        print(message, flush=True)  # inside a deployment's flow (log_prints): a line of its run log


_reporter: Reporter = _Null()


def set_reporter(r: Reporter | None) -> None:
    global _reporter
    _reporter = r or _Null()


def reporter() -> Reporter:
    return _reporter
