"""The one Prefect task every stage runs through: load inputs -> run -> gate -> publish -> TableRefs.

Cache key = stage name + stage code version (source closure) + prompt versions + config
section + seed + roles used + input content hashes (+ raw-file fingerprint for ingest) +
home. Not Prefect's default policy: that includes the flow-run id, and TASK_SOURCE misses
edits in helpers and prompt files.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Iterator

from prefect import task
from prefect.context import TaskRunContext

from finhallu.config import BuildConfig, canonical_hash
from finhallu.schemas.contracts import CONTRACTS
from finhallu.collector import collector_paused
from finhallu.estimate import saved_stage_estimate, stage_calls_remote
from finhallu.fanout import current_fanout
from finhallu.memos import clear_memos
from finhallu.flows.rss import RssWatch
from finhallu.flows.stage_report import publish_stage_summary
from finhallu.llm.operations import prompt_versions
from finhallu.llm.runtime import LLMRuntime, use_runtime
from finhallu.result_cache import use_morpheme_cache
from finhallu.progress import reporter
from finhallu.flows.overlap import handoff, wait_for_earlier
from finhallu.flows.gate_worker import gate_worker
from finhallu.flows.preload import settle_preload
from finhallu.flows.publish import conform_outputs, gate_conformed, publish_gated, record_gates, write_ahead
from finhallu.codeversion import source_hash
from finhallu.stages.base import OwnedFrames
from finhallu.stages.pipeline import STAGES_BY_NAME
from finhallu.warehouse import Catalog, TableRef
from finhallu.warehouse.store import part_of


def stage_key_material(stage_name: str, inputs: dict[str, TableRef], cfg: BuildConfig, home: str) -> dict:
    stage = STAGES_BY_NAME[stage_name]
    material = {
        "stage": stage.name,
        "code": stage.code_version,
        "resources": stage.resource_version,  # e.g. the report's HTML templates
        "contracts": source_hash("finhallu.schemas.contracts", "finhallu.taxonomy"),  # conform() casts outputs
        "prompts": prompt_versions(stage.operations),
        "config": cfg.section(stage.name),
        "reads": {name: cfg.section(name) for name in stage.reads},
        "seed": cfg.seed,
        "roles": {
            r: role_key_material(r, cfg.roles[r].model_dump())
            for r in stage.roles_for(getattr(cfg, stage.name), cfg.roles)
            if r in cfg.roles
        },
        "inputs": {name: ref.content_hash for name, ref in sorted(inputs.items())},
        "home": str(Path(home).resolve()),
    }
    if stage.environment is not None:
        material["environment"] = dict(stage.environment(getattr(cfg, stage.name)))
    if stage.name == "ingest":
        from finhallu.stages.ingest import inputs_fingerprint

        material["raw_files"] = inputs_fingerprint(cfg.ingest)
    return material


def role_key_material(role: str, cfg: dict) -> dict:
    """A role's config plus the endpoint it resolves to (OPENAI_BASE_URL can change it from outside
    the profile); key settings (env var or secret names) do not change outputs and stay out."""
    from finhallu.llm.providers import get_provider

    out = {k: v for k, v in cfg.items() if k not in ("api_key_env", "api_key_secret", "batch")}
    provider = get_provider(cfg["provider"])
    if not getattr(provider, "offline", False):
        try:
            out["endpoint"] = provider.endpoint(role, cfg)
        except ValueError:
            out["endpoint"] = None  # reported when the stage runs
    return out


def stage_results_dir(home: str | Path) -> Path:
    """Where the stage task's results (its cache records) are persisted: in the home."""
    return Path(home).resolve() / "cache" / "prefect-results"


def stage_cache_key(context: TaskRunContext, parameters: dict) -> str:
    material = stage_key_material(parameters["stage_name"], parameters["inputs"], parameters["cfg"], parameters["home"])
    return f"{parameters['stage_name']}-{canonical_hash(material)[:32]}"


def execute_stage(
    stage_name: str, inputs: dict[str, TableRef], cfg: BuildConfig, home: str, build_id: str, flow_run_id: str | None = None
) -> dict[str, TableRef]:
    """Run one stage end to end; publishes only if every output passes its gate."""
    stage = STAGES_BY_NAME[stage_name]
    clear_memos()  # the previous stage's per-text memos: a build holds one stage's, not every stage's
    with RssWatch() as memory:
        return _execute(stage, inputs, cfg, home, build_id, flow_run_id, memory)


def _execute(
    stage, inputs: dict[str, TableRef], cfg: BuildConfig, home: str, build_id: str, flow_run_id: str | None, memory: RssWatch
):
    started = time.perf_counter()
    settle_preload(stage)  # the modules it imports, made while earlier stages waited on a model
    catalog = Catalog(Path(home))
    frames = read_inputs(catalog, stage, inputs)
    rows_in = {name: frame.height for name, frame in frames.items()}
    ctx = stage.context(
        cfg,
        input_hashes={n: r.content_hash for n, r in inputs.items()},
        progress=lambda done, total: reporter().stage_progress(stage.name, done, total),
        cache_dir=Path(home) / "cache",
        warn=stage_warning,
        fanout=current_fanout(),
    )
    runtime = LLMRuntime.for_home(Path(home), cfg.llm, stage.name)

    def record_calls(stopped: bool) -> list[dict]:
        """The stage's LLM calls into the warehouse, its summary as an artifact; a warning for failures."""
        catalog.record_llm_calls(build_id, stage.name, runtime.ledger.rows())
        summary = runtime.ledger.summary()
        failed = sum(r["failures"] for r in summary)
        if failed and stopped:
            stage_warning(
                f"stage {stage.name}: {failed} of {sum(r['calls'] for r in summary)} LLM calls failed "
                "before the stage stopped (see llm_calls.error)"
            )
        elif failed:  # the stage went on without those outputs: a WARNING, so the console and the run's log show it
            stage_warning(
                f"stage {stage.name}: {failed} of {sum(r['calls'] for r in summary)} LLM calls failed "
                "after retries and one repair (their items were dropped; see llm_calls.error; "
                "`finhallu build --retry-failed` sends them again)"
            )
        publish_llm_summary(stage.name, summary)
        if runtime.cache is not None:
            runtime.cache.close()
        return summary

    try:
        with stage_run_context(stage, cfg, runtime, ctx.cache_dir):
            outputs = stage.run(frames, ctx)
        runtime.close()  # the rules' answers still buffered, written while the stage's result stands
    except BaseException:  # a rejected key or a spent failure budget stops it: spent money is recorded
        record_calls(stopped=True)
        raise
    # Spent money is recorded even when the stage's outputs or gates fail; on the way, after the
    # next stage started (its bookkeeping, ~0.01-0.02 s a stage, is off the build's critical path).
    llm_summary: list[dict] | None = None
    try:
        missing = set(stage.outputs) - set(outputs)
        if missing:
            raise RuntimeError(f"stage {stage.name} did not return {sorted(missing)}")

        clear_memos()  # the stage's memos and freed heap handed back before the gates copy its outputs
        gated = conform_outputs(stage.name, {n: outputs[n] for n in stage.outputs})
        give, worker = handoff(), gate_worker()
        if (give or worker) and not gated.failed:
            ahead = write_ahead(catalog, gated)
            if give:
                give(ahead)  # the next stage starts on them while these gates run
    finally:
        llm_summary = record_calls(stopped=False)
    if worker and not gated.failed:
        outcomes = worker.gate(stage.name, {n: part_of(r) for n, r in ahead.items()}, gate_reads(stage, inputs))
        record_gates(catalog, gated, outcomes, build_id)
    else:
        gate_conformed(catalog, gated, inputs_for_gates(catalog, stage, inputs, frames), stage.rules, build_id)
    publish_stage_summary(
        stage.name,
        rows_in,
        {n: gated.tables.get(n, outputs[n]) for n in stage.outputs},
        time.perf_counter() - started,
        {n: r.rows for n, r in gated.results.items()},
        llm_summary,
        saved_stage_estimate(Path(home), cfg.hash(), stage.name),
        memory.line(),  # up to the gates (the stage's work); publishing writes what is already held
    )
    wait_for_earlier()  # stages publish in order
    return publish_gated(catalog, gated, list(inputs.values()), build_id, flow_run_id)


@contextlib.contextmanager
def stage_run_context(stage, cfg: BuildConfig, runtime: LLMRuntime, cache_dir: Path | None) -> Iterator[None]:
    """What a stage's run is wrapped in (benchmarks/stage_alone.py runs one the same way): its LLM
    runtime, the home's morpheme store, and the garbage collector paused unless the stage calls a
    remote model (finhallu.collector)."""
    paused = contextlib.nullcontext() if stage_calls_remote(stage, cfg) else collector_paused()
    with use_runtime(runtime), use_morpheme_cache(cache_dir), paused:
        yield


def read_inputs(catalog: Catalog, stage, inputs: dict[str, TableRef]) -> OwnedFrames:
    """The stage's input frames, without the columns it declares unread, given for it to own."""
    return OwnedFrames((name, catalog.store.read(ref, stage.unread.get(name, ()))) for name, ref in inputs.items())


def inputs_for_gates(catalog: Catalog, stage, inputs: dict[str, TableRef], frames: dict) -> dict:
    """The stage's inputs as the gates see them (references, rules): an input the stage handed back
    (stages.base.hand_back) read again; where no rule of the stage reads neighbours, only the key
    columns its outputs reference (detect's gate needs samples' ids, not their 0.31 GB)."""
    out = {}
    for name, ref in inputs.items():
        if name in frames:
            out[name] = frames[name]
            continue
        needed = _read_by_gates(stage, name)
        if needed is None:
            out[name] = catalog.store.read(ref, stage.unread.get(name, ()))
        elif needed:  # a published table has its contract's columns
            out[name] = catalog.store.read(ref, tuple(c for c in CONTRACTS[name].columns if c not in needed))
    return out


def gate_reads(stage, inputs: dict[str, TableRef]) -> dict[str, tuple[str, tuple[str, ...]]]:
    """What `inputs_for_gates` gives the gates, for a gate worker (flows/gate_worker.py) to read
    itself: each input's file and the columns to leave unread."""
    out = {}
    for name, ref in inputs.items():
        needed = _read_by_gates(stage, name)
        if needed is None:
            out[name] = (part_of(ref), tuple(stage.unread.get(name, ())))
        elif needed:
            out[name] = (part_of(ref), tuple(c for c in CONTRACTS[name].columns if c not in needed))
    return out


def _read_by_gates(stage, table: str) -> set[str] | None:
    """The columns of input `table` the gates of `stage` read: None for all (a rule may read any
    column of its neighbours), else those its outputs' contracts reference."""
    if any(stage.rules.values()):
        return None
    return {t.split(".")[1] for o in stage.outputs for t in CONTRACTS[o].parents.values() if t.split(".")[0] == table}


def stage_warning(message: str) -> None:
    """A warning in the Prefect run's log (and so on the console: builds log at WARNING unless -v),
    or on the `finhallu` logger when the stage runs outside Prefect."""
    import logging

    try:
        from prefect.logging import get_run_logger

        get_run_logger().warning(message)
    except Exception:  # no run context (tests calling execute_stage directly)
        logging.getLogger("finhallu.llm").warning(message)


def publish_llm_summary(stage: str, summary: list[dict]) -> None:
    """Per-stage LLM calls, cache hits, failures, tokens and cost as a Prefect table artifact
    (keyed per stage, so the UI keeps its history across builds)."""
    if not summary:
        return
    from prefect.context import get_run_context

    try:
        get_run_context()
    except Exception:  # run outside Prefect (tests calling execute_stage directly)
        return
    from prefect.artifacts import create_table_artifact

    failures = sum(r["failures"] for r in summary)
    cost = sum(r["cost_usd"] for r in summary)
    create_table_artifact(
        key=f"llm-calls-{stage.replace('_', '-')}",
        table=summary,
        description=f"LLM calls of stage {stage}: {sum(r['calls'] for r in summary)} calls, "
        f"{sum(r['cache_hits'] for r in summary)} cache hits, {failures} failed, "
        f"${cost:.4f}",
    )


@task(
    name="stage",
    cache_key_fn=stage_cache_key,
    persist_result=True,
    cache_result_in_memory=False,
    retries=0,
    log_prints=True,
)
def stage_task(stage_name: str, inputs: dict[str, TableRef], cfg: BuildConfig, home: str, build_id: str) -> dict[str, TableRef]:
    from prefect.runtime import flow_run

    return execute_stage(stage_name, inputs, cfg, home, build_id, flow_run_id=str(flow_run.id) if flow_run.id else None)
