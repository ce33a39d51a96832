"""Gates behind the next stage (flows/overlap.py) and the gate worker (flows/gate_worker.py)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from finhallu.flows.gate_worker import GateWorker, GateWorkerDied
from finhallu.flows.overlap import StageOverlap, handoff, wait_for_earlier
from finhallu.warehouse import TableRef


def _stages(*names: str):
    return [SimpleNamespace(name=n) for n in names]


def _ref(name: str) -> TableRef:
    return TableRef(name, 1, name * 4, f"/nowhere/{name}")


def test_a_stage_starts_on_the_handed_outputs_and_publishes_after_the_earlier_one():
    gate_open = threading.Event()
    order: list[str] = []

    def step(stage, refs):
        give = handoff()
        if stage.name == "a":
            give({"a_out": _ref("a_out")})  # the next stage may start now
            assert gate_open.wait(30)  # a's gates are slow
            wait_for_earlier()
            order.append("a published")
        else:
            assert "a_out" in refs  # b works on a's unpublished outputs
            order.append("b ran")
            gate_open.set()
            wait_for_earlier()  # b publishes only after a did
            order.append("b published")
            refs["b_out"] = _ref("b_out")
        return False

    refs: dict = {}
    with StageOverlap(True) as overlap:
        for i, stage in enumerate(_stages("a", "b")):
            overlap.run(stage, refs, step, last=i == 1)
        assert overlap.finish() == [("a", False), ("b", False)]
    assert order == ["b ran", "a published", "b published"]
    assert set(refs) == {"a_out", "b_out"}


def test_an_earlier_gate_failure_stops_the_later_stage_before_it_publishes_and_is_the_one_raised():
    class GateFailed(RuntimeError):
        pass

    published: list[str] = []

    def step(stage, refs):
        if stage.name == "a":
            handoff()({"a_out": _ref("a_out")})
            raise GateFailed("a's gate failed")
        wait_for_earlier()
        published.append(stage.name)
        return False

    with pytest.raises(GateFailed, match="a's gate"):
        with StageOverlap(True) as overlap:
            for i, stage in enumerate(_stages("a", "b")):
                overlap.run(stage, {}, step, last=i == 1)
    assert published == []


def test_off_every_stage_runs_inline_without_a_handoff():
    seen = []

    def step(stage, refs):
        seen.append((stage.name, handoff(), threading.current_thread() is threading.main_thread()))
        return stage.name == "b"

    with StageOverlap(False) as overlap:
        for stage in _stages("a", "b"):
            overlap.run(stage, {}, step)
        assert overlap.finish() == [("a", False), ("b", True)]
    assert seen == [("a", None, True), ("b", None, True)]


def test_the_gate_worker_answers_a_failed_request_with_its_error_and_serves_the_next():
    worker = GateWorker()
    try:
        for _ in range(2):  # the first failure did not end it
            with pytest.raises(GateWorkerDied, match="KeyError: 'no_such_stage'"):
                worker.gate("no_such_stage", {}, {})
        worker._proc.kill()
        worker._proc.wait()
        with pytest.raises(GateWorkerDied, match="exited"):  # a dead worker is an error, not a hang
            worker.gate("report", {}, {})
    finally:
        worker.close()


def test_the_gate_worker_runs_below_the_builds_cpu_priority():
    """Its Great Expectations import and gates yield the cores to the build's own work."""
    import os
    import time

    from finhallu.flows.gate_worker import NICE

    worker = GateWorker()
    try:
        pid, own = worker._proc.pid, os.getpriority(os.PRIO_PROCESS, 0)
        for _ in range(600):  # set by the worker first thing as it starts (bounded wait, generous on a busy machine)
            if os.getpriority(os.PRIO_PROCESS, pid) != own:
                break
            time.sleep(0.1)
        assert os.getpriority(os.PRIO_PROCESS, pid) == min(19, own + NICE)
    finally:
        worker.close()
