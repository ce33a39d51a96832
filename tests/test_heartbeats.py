"""A flow run in a home session sends Prefect's heartbeat events from its body, and its end does not
wait on a sleeping heartbeat thread; a flow run started any other way keeps Prefect's own."""

import os

import prefect.events
import pytest
from prefect import flow
from prefect.context import FlowRunContext
from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, get_current_settings, temporary_settings

from finhallu.flows.heartbeats import flow_heartbeats, heartbeats_from_body

SEEN: dict = {}


@flow(name="finhallu-heartbeat-probe", persist_result=False)
def probe_flow() -> str:
    SEEN["prefect_frequency"] = get_current_settings().flows.heartbeat_frequency
    run = FlowRunContext.get().flow_run
    with flow_heartbeats() as thread:
        SEEN["thread"] = thread
    return str(run.id)


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    from finhallu.cli import prefect_api
    from finhallu.service.local_api import stop_home_api

    home = tmp_path_factory.mktemp("heartbeat-home")
    before = {k: os.environ.pop(k, None) for k in ("PREFECT_API_URL", "PREFECT_HOME")}
    os.environ["PREFECT_HOME"] = str(home / "prefect")  # its runs in the test's home, as the CLI sets it
    try:
        with prefect_api(home) as ready:
            ready()
            yield
    finally:
        stop_home_api(home)
        for k, v in before.items():
            os.environ.pop(k, None)
            if v is not None:
                os.environ[k] = v


@pytest.fixture
def sent(monkeypatch):
    events: list[dict] = []
    monkeypatch.setattr(prefect.events, "emit_event", lambda **event: events.append(event))
    SEEN.clear()
    return events


def test_the_body_sends_the_runs_heartbeat_and_stops_when_it_ends(api, sent):
    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: 60}):
        with heartbeats_from_body():
            run_id = probe_flow()
        configured = get_current_settings().flows.heartbeat_frequency
    assert SEEN["prefect_frequency"] is None  # Prefect's own thread was off for this run
    thread = SEEN["thread"]
    assert thread is not None and not thread.is_alive()  # joined as the body ended, not a sleep later
    assert len(sent) == 1  # the first at once; the next only after the interval
    event = sent[0]
    assert event["event"] == "prefect.flow-run.heartbeat"
    assert event["resource"]["prefect.resource.id"] == f"prefect.flow-run.{run_id}"
    flows = [r for r in event["related"] if r["prefect.resource.role"] == "flow"]
    assert [r["prefect.resource.name"] for r in flows] == ["finhallu-heartbeat-probe"]
    assert configured == 60  # restored after the session


def test_a_flow_run_outside_a_session_keeps_prefects_heartbeats(api, sent):
    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: 60}):
        probe_flow()
    assert SEEN["prefect_frequency"] == 60
    assert SEEN["thread"] is None and sent == []


def test_heartbeats_turned_off_stay_off(api, sent):
    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}), heartbeats_from_body():
        probe_flow()
    assert SEEN["prefect_frequency"] is None and SEEN["thread"] is None and sent == []
