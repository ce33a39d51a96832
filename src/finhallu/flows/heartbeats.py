"""A flow run's heartbeats, sent by a thread that stops the moment its flow's body ends.

Prefect sends a flow run's heartbeat events (`prefect.flow-run.heartbeat`, every
`flows.heartbeat_frequency` seconds; what a zombie-run automation watches) from a thread that
sleeps in 1 s steps, and the run's end joins it: every flow run ended up to 1 s late (0.46 s in a
measured demo build's 0.9 s from its last stage to its end). Here the caller turns Prefect's
thread off for the flow runs it starts (`heartbeats_from_body`), and the flow's body sends the
same events at the same frequency (`flow_heartbeats`) from a thread that wakes as soon as the
body is done. A flow run started any other way (a deployment's worker, a test calling the flow)
keeps Prefect's own heartbeats, and `flow_heartbeats` then sends none.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from contextvars import ContextVar, copy_context
from typing import Any, Iterator

MINIMUM_INTERVAL_S = 30  # Prefect's own floor (flow_engine.MINIMUM_HEARTBEAT_INTERVAL)

# The configured heartbeat frequency, handed from the flow's caller to its body; unset: Prefect's on
_FREQUENCY: ContextVar[int | None] = ContextVar("finhallu_heartbeat_frequency")


@contextmanager
def heartbeats_from_body() -> Iterator[None]:
    """Around a flow call: Prefect's heartbeat thread off, its frequency left for the body's."""
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, get_current_settings, temporary_settings

    token = _FREQUENCY.set(get_current_settings().flows.heartbeat_frequency)
    try:
        with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
            yield
    finally:
        _FREQUENCY.reset(token)


def heartbeat_event() -> tuple[dict[str, str], list[Any]]:
    """The running flow run's heartbeat event (resource, related), as Prefect's engine sends it."""
    from prefect import __version__
    from prefect.context import FlowRunContext
    from prefect.events.related import tags_as_related_resources
    from prefect.events.schemas.events import RelatedResource

    ctx = FlowRunContext.get()
    assert ctx is not None and ctx.flow_run is not None, "called in a flow run's body"
    run = ctx.flow_run
    resource = {
        "prefect.resource.id": f"prefect.flow-run.{run.id}",
        "prefect.resource.name": run.name or "",
        "prefect.version": __version__,
    }
    related = [
        {
            "prefect.resource.id": f"prefect.flow.{run.flow_id}",
            "prefect.resource.role": "flow",
            "prefect.resource.name": ctx.flow.name if ctx.flow else "",
        }
    ]
    if run.deployment_id:
        related.append({"prefect.resource.id": f"prefect.deployment.{run.deployment_id}", "prefect.resource.role": "deployment"})
    return resource, [RelatedResource.model_validate(r) for r in related] + tags_as_related_resources(set(run.tags or []))


@contextmanager
def flow_heartbeats() -> Iterator[threading.Thread | None]:
    """In a flow's body: its run's heartbeats, the first now, until the body ends (none where the
    caller left Prefect's on, or where the frequency is off)."""
    frequency = _FREQUENCY.get(None)
    if frequency is None:
        yield None
        return
    from prefect.events import emit_event

    interval = max(frequency, MINIMUM_INTERVAL_S)
    resource, related = heartbeat_event()
    stop = threading.Event()

    def beat() -> None:
        while True:
            try:
                emit_event(event="prefect.flow-run.heartbeat", resource=resource, related=related)
            except Exception:  # as Prefect's: a missed heartbeat never fails the run
                pass
            if stop.wait(interval):
                return

    thread = threading.Thread(target=copy_context().run, args=(beat,), name="flow-heartbeats", daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        stop.set()
        thread.join(timeout=2)  # as Prefect's: a send stuck in the events client does not hold the run's end
