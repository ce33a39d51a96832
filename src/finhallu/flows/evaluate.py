"""Evaluate detectors on any published samples version: detect -> metrics -> report, cached like a build.

An evaluation is additive: its results land in `<table>_all` under its own eval id (the
`build_id` column) and its report under `reports/<eval id>/`; the plain views keep the build's
results. Only `make_current` (CLI `--make-current`), on the current samples version, moves them.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from finhallu.config import BuildConfig, load_config, with_detectors
from finhallu.flows.heartbeats import flow_heartbeats
from finhallu.flows.artifacts import finalize_evaluation
from finhallu.flows.build import _run_stage
from finhallu.flows.session import check_role_keys, home_session, new_build_id, write_report
from finhallu.stages.pipeline import STAGES_BY_NAME
from finhallu.warehouse.storage import resolve_home
from finhallu.warehouse import Catalog, TableRef

EVAL_STAGES = ("detect", "metrics", "report")


def _ref_of(catalog: Catalog, name: str, version: int | None) -> TableRef:
    store = catalog.store
    if version is None:
        ref = store.current_ref(name)
        if ref is None:
            raise LookupError(f"no current {name!r} table in {catalog.home}; build first")
        return ref
    rec = store.record(name, version)
    if rec is None:
        known = [r["version"] for r in store.records(name)]
        raise LookupError(f"{name} version {version} is not published (published: {known})")
    return store.ref_of_record(rec)


def _stats_for(catalog: Catalog, samples: TableRef) -> TableRef:
    """The dataset_stats version published beside this samples version (same stage inputs)."""
    srec = catalog.store.record("samples", samples.version)
    assert srec is not None, "the samples version was published"
    same = [r for r in catalog.store.records("dataset_stats") if r["parents"] == srec["parents"]]
    return catalog.store.ref_of_record(same[-1]) if same else _ref_of(catalog, "dataset_stats", None)


@flow(name="finhallu-evaluate-stages", flow_run_name="evaluate-{build_id}", persist_result=False)
def evaluate_flow(cfg: BuildConfig, home: str, build_id: str, samples: TableRef, stats: TableRef) -> dict:
    with flow_heartbeats():
        refs = run_eval_stages(cfg, home, build_id, {"samples": samples, "dataset_stats": stats})
        finalize_evaluation(home, build_id, refs)
    return refs


def run_eval_stages(cfg: BuildConfig, home: str, build_id: str, refs: dict[str, TableRef]) -> dict[str, TableRef]:
    """detect -> metrics -> report on the given `samples` / `dataset_stats` refs (cached stage tasks)."""
    refs = dict(refs)
    for name in EVAL_STAGES:
        stage = STAGES_BY_NAME[name]
        state = _run_stage(stage, {n: refs[n] for n in stage.inputs}, cfg, home, build_id)
        refs.update(state.result(raise_on_failure=True))
    return refs


def selected_detectors(cfg: BuildConfig, detectors: list[str] | None) -> BuildConfig:
    """The profile's config with exactly these detectors (its parameters where it has them), or as it is."""
    if not detectors:
        return cfg
    return with_detectors(cfg, {d: cfg.detect.detectors.get(d, {}) for d in detectors})


def run_evaluate(
    home: str | Path,
    profile: str | BuildConfig = "demo",
    dataset_version: int | None = None,
    detectors: list[str] | None = None,
    wait_s: float = 0.0,
    make_current: bool = False,
) -> dict:
    home = resolve_home(home)  # a path, or a URL standing for its state folder
    build_id = new_build_id("eval-")
    cfg = selected_detectors(profile if isinstance(profile, BuildConfig) else load_config(profile), detectors)
    check_role_keys(cfg, only=("detect",))  # e.g. the LLM judge's key, before any work
    with home_session(home, build_id, wait_s) as catalog:
        samples = _ref_of(catalog, "samples", dataset_version)
        stats = _stats_for(catalog, samples)
        refs = evaluate_flow(cfg, str(home), build_id, samples, stats)
        current = make_current and catalog.store.current().get("samples") == samples.version
        if current:
            catalog.store.set_current([refs[n] for n in ("detections", "metrics", "confusion", "detector_tests", "report_index")])
        report = write_report(home, build_id, refs["report_index"])
    return {
        "build_id": build_id,
        "samples_version": samples.version,
        "became_current": current,
        "report": str(report),
        "tables": {n: f"{r.name}@{r.version}" for n, r in refs.items()},
    }
