"""Entrypoints of the deployments in prefect.yaml: scheduled `rebuild`, on-demand `evaluate` and `probe`."""

from __future__ import annotations

from prefect import flow

from finhallu.flows.build import run_build
from finhallu.flows.evaluate import run_evaluate
from finhallu.flows.probe import run_probe


@flow(name="finhallu-rebuild", log_prints=True)
def rebuild(profile: str = "demo", home: str = "data", wait_s: float = 3600.0) -> dict:
    """Rebuild the benchmark (scheduled weekly); waits for a build already running on the home."""
    outcome = run_build(profile, home, wait_s=wait_s)
    if outcome.status != "succeeded":
        raise RuntimeError(f"build {outcome.build_id} failed at {outcome.failed_stage}: {outcome.message}")
    return {"build_id": outcome.build_id, "ran": outcome.stages_run, "cached": outcome.stages_cached, "report": outcome.report}


@flow(name="finhallu-evaluate", log_prints=True)
def evaluate(
    home: str = "data",
    profile: str = "demo",
    dataset_version: int | None = None,
    detectors: list[str] | None = None,
    wait_s: float = 3600.0,
    make_current: bool = False,
) -> dict:
    """Run detectors on a published samples version (default: the current one); its results are
    added beside the build's, and replace them in the plain views only with make_current."""
    return run_evaluate(
        home, profile=profile, dataset_version=dataset_version, detectors=detectors, wait_s=wait_s, make_current=make_current
    )


@flow(name="finhallu-probe", log_prints=True)
def probe(profile: str = "demo", home: str = "data", targets: list[str] | None = None, wait_s: float = 3600.0) -> dict:
    """The false-premise probe of the target roles (default: the profile's) over the home's corpus."""
    return run_probe(profile, home, targets=targets, wait_s=wait_s)
