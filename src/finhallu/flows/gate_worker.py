"""Gates in a process of their own, for builds that overlap them with the next stage (flows/overlap.py).

On threads of the build's process the gates only shared the interpreter's lock with the next
stage: on the demo's LLM path they took 10.9 s instead of 6 s, and the stages' own work slowed by
as much. In a worker process they run on another core, and Great Expectations' import (~4.5 s,
all of it holding the lock) leaves the build's start: the worker makes it while the build starts.

The worker reads what it checks from the home: the outputs the stage wrote ahead of their gates
(unpublished versions) and its inputs by their refs, without the columns the stage leaves unread
or, where no rule of the stage reads them, all but the keys its outputs reference. It runs the same
`run_gate` with the stage's rules and returns each output's outcomes; the build records them.

A plain child (`python -m finhallu.flows.gate_worker`) speaking length-prefixed pickles on its
stdin and stdout, not multiprocessing: a spawned child imports the parent's main script again,
which a benchmark or an embedding program need not guard.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pickle
import struct
import subprocess
import sys
import threading
import traceback
from contextvars import ContextVar
from pathlib import Path
from typing import IO, Any, Iterator

_WORKER: ContextVar["GateWorker | None"] = ContextVar("finhallu_gate_worker", default=None)
_LEN = struct.Struct("!Q")

Reads = dict[str, tuple[str, tuple[str, ...]]]  # input table -> (its Parquet file, columns left unread)


class GateWorkerDied(RuntimeError):
    """The gate worker exited or answered with an error (its traceback is the message)."""


def _send(stream: IO[bytes], obj: object) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_LEN.pack(len(data)) + data)
    stream.flush()


def _receive(stream: IO[bytes]) -> Any:
    head = stream.read(_LEN.size)
    if len(head) < _LEN.size:
        raise EOFError
    return pickle.loads(stream.read(_LEN.unpack(head)[0]))


def gate_stage(stage_name: str, outputs: dict[str, str], inputs: Reads) -> dict[str, list[dict]]:
    """Each output's gate rows: the checks `flows.publish.gate_conformed` runs, read from the files."""
    from finhallu.schemas.gate import run_gate
    from finhallu.stages.pipeline import STAGES_BY_NAME
    from finhallu.warehouse.storage import read_parquet

    stage = STAGES_BY_NAME[stage_name]
    tables = {name: read_parquet(path) for name, path in outputs.items()}
    neighbours = {name: read_parquet(path, without) for name, (path, without) in inputs.items()}
    neighbours.update(tables)
    return {name: run_gate(name, frame, neighbours, tuple(stage.rules.get(name, ()))).rows for name, frame in tables.items()}


class GateWorker:
    """One worker process, warmed (Great Expectations imported) as it starts; requests one at a time."""

    def __init__(self) -> None:
        import finhallu

        env = dict(os.environ)
        src = str(Path(finhallu.__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join([src, *filter(None, [env.get("PYTHONPATH")])])
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "finhallu.flows.gate_worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
        )
        self._lock = threading.Lock()

    def gate(self, stage_name: str, outputs: dict[str, str], inputs: Reads) -> dict[str, list[dict]]:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        with self._lock:
            try:
                _send(self._proc.stdin, (stage_name, outputs, inputs))
                ok, answer = _receive(self._proc.stdout)
            except (EOFError, BrokenPipeError) as exc:
                raise GateWorkerDied(f"the gate worker exited ({self._proc.poll()}) while gating stage {stage_name}") from exc
        if not ok:
            raise GateWorkerDied(f"the gate worker failed on stage {stage_name}:\n{answer}")
        return answer

    def close(self) -> None:
        if self._proc.stdin is not None:
            with contextlib.suppress(OSError):  # a worker that died took its end of the pipe
                self._proc.stdin.close()  # end of requests: it exits
        try:
            self._proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()


def gate_worker() -> GateWorker | None:
    """The build's gate worker, if its stages gate out of process."""
    return _WORKER.get()


_EARLY: list[GateWorker] = []  # started by `start_early`, taken by the build's `use_gate_worker`


def start_early() -> None:
    """Start the build's gate worker now (the CLI does while the API server boots): its import of
    Great Expectations then overlaps the build's start rather than its first stages."""
    if not _EARLY:
        _EARLY.append(GateWorker())
        atexit.register(_close_unused)


def _close_unused() -> None:
    while _EARLY:
        _EARLY.pop().close()


@contextlib.contextmanager
def use_gate_worker(on: bool) -> Iterator[GateWorker | None]:
    worker = (_EARLY.pop() if _EARLY else GateWorker()) if on else None
    token = _WORKER.set(worker)
    try:
        yield worker
    finally:
        _WORKER.reset(token)
        if worker is not None:
            worker.close()


# The worker's CPU priority below the build's: its import (~4.5 s) and gates overlap the build's
# start and next stages, whose work is the build's critical path; the gates need only finish by
# the build's end, and a core is idle often enough for them (the stages wait on remote calls).
NICE = 10


def main() -> None:  # the worker process
    with contextlib.suppress(OSError):
        os.nice(NICE)
    requests, answers = sys.stdin.buffer, os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # what the checks print goes to stderr, never into the answers
    from finhallu.schemas.gate import prepare_gates

    prepare_gates()
    while True:
        try:
            request: tuple[str, dict[str, str], Reads] = _receive(requests)
        except EOFError:  # the build is done with it: no teardown of its heap to wait for
            answers.flush()
            os._exit(0)
        try:
            _send(answers, (True, gate_stage(*request)))
        except Exception:
            _send(answers, (False, traceback.format_exc()))


if __name__ == "__main__":
    main()
