"""The build flow: the whole DAG as one Prefect flow of cached stage tasks.

`run_build` is the entry point for the CLI, deployments and tests: it loads the profile (once),
checks the roles' keys, holds the home for the run (flows/session.py), runs the flow and records
the build in the catalog. Each stage's results (its cache records) live in the home folder.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from prefect import flow

from finhallu.config import BuildConfig, load_config
from finhallu.flows.artifacts import finalize_evaluation
from finhallu.flows.gate_worker import use_gate_worker
from finhallu.flows.heartbeats import flow_heartbeats
from finhallu.flows.overlap import StageOverlap
from finhallu.flows.preload import use_preload
from finhallu.flows.runners import RunnerSpec
from finhallu.flows.session import check_role_keys, home_session, new_build_id, write_report
from finhallu.flows.stage_task import stage_results_dir, stage_task
from finhallu.progress import reporter
from finhallu.schemas.gate import GateFailed
from finhallu.export import export_files
from finhallu.memos import clear_memos
from finhallu.stages.pipeline import STAGES
from finhallu.warehouse.storage import resolve_home
from finhallu.warehouse import Catalog, TableRef
from finhallu.warehouse.store import read_table, utc_now


@dataclass
class BuildOutcome:
    build_id: str
    status: str  # succeeded | failed
    stages_run: list[str] = field(default_factory=list)
    stages_cached: list[str] = field(default_factory=list)
    refs: dict[str, TableRef] = field(default_factory=dict)
    failed_stage: str | None = None
    message: str = ""
    report: str | None = None
    seconds: float = 0.0
    flow_run_id: str | None = None  # the Prefect run (its UI page: /runs/flow-run/<id>)

    def warnings(self) -> list[str]:
        """Coverage warnings (an empty split, a source without samples) of the published dataset_stats."""
        ref = self.refs.get("dataset_stats")
        if self.status != "succeeded" or ref is None:
            return []
        from finhallu.coverage import warnings_from_stats

        return warnings_from_stats(read_table(ref).to_dicts())


def _run_stage(stage, inputs, cfg, home, build_id, refresh: bool = False):
    # Results (the cache) live in the home, whichever flow runs the stage: a deployment's subflow
    # would otherwise inherit its parent's storage under PREFECT_HOME and miss the CLI's cache.
    task = stage_task.with_options(
        task_run_name=stage.name,
        refresh_cache=refresh or None,  # type: ignore[arg-type]  # None = the setting; Task() takes it, the hint omits it
        result_storage=stage_results_dir(home),
    )
    return task(stage.name, inputs, cfg, home, build_id, return_state=True)


def run_stage_step(stage, refs: dict[str, TableRef], cfg: BuildConfig, home: str, build_id: str, store) -> bool:
    """One stage of a flow on the refs so far (its outputs are added to them); True when it was cached."""
    reporter().stage_started(stage.name)
    inputs = {n: refs[n] for n in stage.inputs}
    state = _run_stage(stage, inputs, cfg, home, build_id)
    result = state.result(raise_on_failure=False)
    if state.is_completed() and state.name == "Cached" and not all(store.is_published(r) for r in result.values()):
        # The cache record outlived its tables (home edited by hand): rebuild the stage.
        state = _run_stage(stage, inputs, cfg, home, build_id, refresh=True)
        result = state.result(raise_on_failure=False)
    if not state.is_completed():
        reporter().stage_finished(stage.name, "failed")
        raise result if isinstance(result, BaseException) else RuntimeError(f"stage {stage.name} failed: {state.message}")
    refs.update(result)
    reporter().stage_finished(stage.name, "cached" if state.name == "Cached" else "done")
    return state.name == "Cached"


@flow(name="finhallu-build", flow_run_name="build-{build_id}", persist_result=False, log_prints=True)
def build_flow(cfg: BuildConfig, home: str, build_id: str, until: str | None = None) -> dict:
    with flow_heartbeats():
        return _build_stages(cfg, home, build_id, until)


def _build_stages(cfg: BuildConfig, home: str, build_id: str, until: str | None) -> dict:
    catalog = Catalog(Path(home))
    store = catalog.store
    refs: dict[str, TableRef] = {}
    ran: list[str] = []  # stage names
    cached: list[str] = []
    stages = STAGES if until is None else STAGES[: [s.name for s in STAGES].index(until) + 1]

    def step(stage, stage_refs: dict[str, TableRef]) -> bool:
        return run_stage_step(stage, stage_refs, cfg, home, build_id, store)

    from finhallu.estimate import has_remote_roles

    overlap_on = overlap_gates(cfg)
    preloaded = [m for s in stages for m in s.imports] if has_remote_roles(cfg) else []
    with use_gate_worker(overlap_on), use_preload(preloaded), StageOverlap(overlap_on) as overlap:
        for i, stage in enumerate(stages):
            overlap.run(stage, refs, step, last=i == len(stages) - 1)
        for name, was_cached in overlap.finish():
            (cached if was_cached else ran).append(name)
    # Current versions advance together, only when every stage passed: analysts always query
    # one consistent build, never a mix of a failed build's early stages and older late ones.
    if until is None:
        store.set_current(list(refs.values()))
        catalog.refresh_views()  # compare.html beside the report + keyed Prefect artifacts of this run
        finalize_evaluation(home, build_id, refs)
    from prefect.runtime import flow_run

    return {"refs": refs, "ran": ran, "cached": cached, "config_hash": cfg.hash(), "seed": cfg.seed, "flow_run_id": flow_run.id}


def overlap_gates(cfg: BuildConfig) -> bool:
    """Whether a stage's gates run behind the next stage (`llm.overlap_gates`; auto: where a stage
    calls a remote model)."""
    if cfg.llm.overlap_gates != "auto":
        return bool(cfg.llm.overlap_gates)
    from finhallu.estimate import has_remote_roles

    return has_remote_roles(cfg)


def announce_estimate(cfg, home: Path) -> None:
    """Before a build with LLM roles: what it will cost (the dry run's line), made once per config."""
    from finhallu.estimate import BuildEstimate, dry_run, estimate_path, has_remote_roles, save_estimate

    if not (cfg.llm.estimate_before_build and has_remote_roles(cfg)):
        return
    if estimate_path(home, cfg.hash()).exists():
        est = BuildEstimate.from_json(json.loads(estimate_path(home, cfg.hash()).read_text(encoding="utf-8")))
    else:
        est = dry_run(cfg)
        save_estimate(home, est)
    reporter().note(est.line() + " (`finhallu build --dry-run` prints it per stage)")


def run_build(
    profile: str | BuildConfig,
    home: str | Path,
    overrides: dict | None = None,
    wait_s: float = 0.0,
    build_id: str | None = None,
    until: str | None = None,
    runner: RunnerSpec | None = None,
) -> BuildOutcome:
    """Run the DAG (or, with `until`, the stages up to and including that one: their versions are
    published and visible in `<table>_all`, but current versions move only on a full build).
    `profile`: a profile name or path (loaded here, once) or an already loaded config.
    `runner`: where the stages' partitioned work runs (flows/runners.py; default in process)."""
    home = resolve_home(home)  # a path, or a URL standing for its state folder
    build_id = build_id or new_build_id()
    cfg = profile if isinstance(profile, BuildConfig) else load_config(profile, overrides)  # fails fast, before the lock
    check_role_keys(cfg, until)  # and on a missing API key, before any stage runs
    home.mkdir(parents=True, exist_ok=True)
    announce_estimate(cfg, home)
    t0 = time.perf_counter()
    with home_session(home, build_id, wait_s) as catalog:
        record = {
            "build_id": build_id,
            "profile": cfg.profile,
            "status": "running",
            "started_at": utc_now(),
            "config_hash": cfg.hash(),
            "seed": cfg.seed,
        }
        catalog.record_build(record)
        outcome = BuildOutcome(build_id, "failed")
        try:
            task_runner = (runner or RunnerSpec()).task_runner()
            flow_fn = build_flow if task_runner is None else build_flow.with_options(task_runner=task_runner)
            out = flow_fn(cfg=cfg, home=str(home), build_id=build_id, until=until)
            outcome.status = "succeeded"
            outcome.refs, outcome.stages_run, outcome.stages_cached = out["refs"], out["ran"], out["cached"]
            outcome.flow_run_id = out.get("flow_run_id")
            if until is None:
                outcome.report = str(write_report(home, build_id, out["refs"]["report_index"]))
                clear_memos()  # the last stage's, and the heap it freed, before the export reads samples
                export_files(home, out["refs"]["samples"])
        except GateFailed as exc:
            outcome.failed_stage, outcome.message = exc.stage, str(exc)
        except Exception as exc:  # any other stage error: recorded, re-raised after bookkeeping
            outcome.failed_stage, outcome.message = "?", f"{type(exc).__name__}: {exc}"
            raise
        finally:
            _finish(catalog, record, outcome, t0)
        return outcome


def _finish(catalog: Catalog, record: dict, outcome: BuildOutcome, t0: float) -> None:
    outcome.seconds = time.perf_counter() - t0
    record.update(
        status=outcome.status,
        finished_at=utc_now(),
        stages_run=outcome.stages_run,
        flow_run_id=outcome.flow_run_id,
        stages_cached=outcome.stages_cached,
        failed_stage=outcome.failed_stage,
        message=outcome.message[:4000],
        report=outcome.report,
    )
    catalog.record_build(record)


def summary_json(outcome: BuildOutcome) -> str:
    return json.dumps(
        {
            "build_id": outcome.build_id,
            "status": outcome.status,
            "ran": outcome.stages_run,
            "cached": outcome.stages_cached,
            "failed_stage": outcome.failed_stage,
            "report": outcome.report,
            "seconds": round(outcome.seconds, 2),
            "warnings": outcome.warnings(),
            "tables": {n: f"{r.name}@{r.version}" for n, r in outcome.refs.items()},
        },
        ensure_ascii=False,
    )
