"""The garbage collector paused during a stage's offline work (finhallu.collector)."""

from __future__ import annotations

import gc
import threading

import pytest

from finhallu.collector import collector_paused
from finhallu.config import load_config
from finhallu.flows.stage_task import stage_run_context
from finhallu.llm.runtime import LLMRuntime
from finhallu.stages.pipeline import STAGES_BY_NAME


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was else gc.disable)()


def test_paused_until_the_last_overlapping_entry_ends(collector_on):
    """A stage's run may overlap its predecessor's end (another thread): the collector runs again
    only when both have ended, whichever ends first."""
    first_in, second_in, first_may_leave, first_out = (threading.Event() for _ in range(4))
    seen = {}

    def earlier():
        with collector_paused():
            first_in.set()
            first_may_leave.wait(60)
        first_out.set()

    t = threading.Thread(target=earlier)
    t.start()
    assert first_in.wait(60)
    assert not gc.isenabled()
    with collector_paused():
        second_in.set()
        first_may_leave.set()
        assert first_out.wait(60)
        seen["after the first left"] = gc.isenabled()
    t.join(60)
    assert seen["after the first left"] is False
    assert gc.isenabled()


def test_a_collector_paused_by_someone_else_stays_paused(collector_on):
    gc.disable()
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_an_exception_in_the_work_still_restores_the_collector(collector_on):
    with pytest.raises(ValueError):
        with collector_paused():
            raise ValueError("stage failed")
    assert gc.isenabled()


@pytest.mark.parametrize(
    "profile, stage, paused",
    [
        ("demo", "inject", True),  # offline roles: the rules run in process
        ("demo", "assemble", True),  # no LLM at all
        ("paper", "assemble", True),
        ("paper", "inject", False),  # its injectors are remote models: calls in flight for hours
        ("paper", "dialogues", False),
    ],
)
def test_a_stage_runs_with_the_collector_paused_unless_it_calls_a_remote_model(tmp_path, collector_on, profile, stage, paused):
    cfg = load_config(profile)
    s = STAGES_BY_NAME[stage]
    runtime = LLMRuntime.for_home(tmp_path, cfg.llm, s.name)
    try:
        with stage_run_context(s, cfg, runtime, tmp_path / "cache"):
            inside = gc.isenabled()
    finally:
        runtime.close()
    assert inside is (not paused)
    assert gc.isenabled()
