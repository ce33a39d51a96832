"""The one way a run holds a home: its lock, the debris of killed publishes swept first, the
warehouse views refreshed last (whatever happened), and the run's report written beside it."""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from pathlib import Path
from typing import Iterator

from finhallu.flows.heartbeats import heartbeats_from_body
from finhallu.warehouse import Catalog, TableRef
from finhallu.warehouse.lock import HomeLock
from finhallu.warehouse.store import read_table, utc_now


def new_build_id(prefix: str = "") -> str:
    return prefix + time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + uuid.uuid4().hex[:6]


@contextlib.contextmanager
def home_session(home: str | Path, build_id: str, wait_s: float = 0.0) -> Iterator[Catalog]:
    """Hold the home for one run (a build, an evaluation): another run on it waits up to `wait_s`.
    Its flow runs send their heartbeats from their bodies (flows/heartbeats.py): a flow run here
    whose body does not enter `flow_heartbeats` sends none."""
    home = Path(home).resolve()
    home.mkdir(parents=True, exist_ok=True)
    with HomeLock(home, {"build_id": build_id, "started_at": utc_now()}, wait_s=wait_s), heartbeats_from_body():
        catalog = Catalog(home)
        catalog.recover()
        try:
            yield catalog
        finally:
            catalog.refresh_views()


def write_report(home: Path, build_id: str, ref: TableRef) -> Path:
    """The run's HTML report (stored in `report_index`) at reports/<build_id>/index.html, atomically."""
    html = read_table(ref)["html"][0]
    out = Path(home) / "reports" / build_id / "index.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(html, encoding="utf-8")
    os.replace(tmp, out)
    return out


def check_role_keys(cfg, until: str | None = None, only: tuple[str, ...] | None = None) -> None:
    """Every LLM role a stage of this run calls (all stages, those up to `until`, or `only` these)
    must have its key and endpoint now, not hours in."""
    from finhallu.llm.errors import MissingKeyError
    from finhallu.llm.keys import check_keys
    from finhallu.llm.providers import get_provider

    from finhallu.stages.pipeline import ALL_STAGES, STAGES

    stages = STAGES if until is None else STAGES[: [s.name for s in STAGES].index(until) + 1]
    if only is not None:
        stages = [s for s in ALL_STAGES if s.name in only]
    needed = {r for s in stages for r in s.calls_roles(cfg) if r in cfg.roles}
    roles = {r: cfg.roles[r].model_dump() for r in sorted(needed)}
    check_keys(roles)
    for role, rc in roles.items():
        provider = get_provider(rc["provider"])
        if not getattr(provider, "offline", False):
            try:
                provider.endpoint(role, rc)
            except ValueError as exc:
                raise MissingKeyError(str(exc)) from None
