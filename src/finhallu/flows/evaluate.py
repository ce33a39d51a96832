"""Evaluate detectors on any published samples version: detect -> metrics -> report, cached like a build.

An evaluation is additive: its results land in `<table>_all` under its own eval id (the
`build_id` column) and its report under `reports/<eval id>/`; the plain views keep the build's
results. Only `make_current` (CLI `--make-current`), on the current samples version, moves them.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from finhallu.config import load_config
from finhallu.flows.artifacts import finalize_evaluation
from finhallu.flows.build import _run_stage, _write_report, check_role_keys, new_build_id
from finhallu.tasks.pipeline import STAGES_BY_NAME
from finhallu.warehouse import Catalog, TableRef
from finhallu.warehouse.lock import HomeLock
from finhallu.warehouse.store import utc_now

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
    same = [r for r in catalog.store.records("dataset_stats") if r["parents"] == srec["parents"]]
    return catalog.store.ref_of_record(same[-1]) if same else _ref_of(catalog, "dataset_stats", None)


@flow(name="finhallu-evaluate-stages", flow_run_name="evaluate-{build_id}", persist_result=False)
def evaluate_flow(home: str, profile: str, build_id: str, overrides: dict | None, samples: TableRef,
                  stats: TableRef) -> dict:
    cfg = load_config(profile, overrides)
    if overrides:  # merge_dicts adds keys; the detector selection must replace the profile's set
        cfg.detect.detectors = overrides["detect"]["detectors"]
    refs = run_eval_stages(cfg, home, build_id, {"samples": samples, "dataset_stats": stats})
    finalize_evaluation(home, build_id, refs)
    return refs


def run_eval_stages(cfg, home: str, build_id: str, refs: dict[str, TableRef]) -> dict[str, TableRef]:
    """detect -> metrics -> report on the given `samples` / `dataset_stats` refs (cached stage tasks)."""
    refs = dict(refs)
    for name in EVAL_STAGES:
        stage = STAGES_BY_NAME[name]
        state = _run_stage(stage, {n: refs[n] for n in stage.inputs}, cfg, home, build_id)
        refs.update(state.result(raise_on_failure=True))
    return refs


def run_evaluate(home: str | Path, profile: str = "demo", dataset_version: int | None = None,
                 detectors: list[str] | None = None, wait_s: float = 0.0, make_current: bool = False) -> dict:
    home = Path(home).resolve()
    catalog = Catalog(home)
    build_id = "eval-" + new_build_id()
    overrides = None
    if detectors:  # select exactly these (with the profile's parameters where it has them), not add
        profile_detectors = load_config(profile).detect.detectors
        overrides = {"detect": {"detectors": {d: profile_detectors.get(d, {}) for d in detectors}}}
    check_role_keys(load_config(profile, overrides), only=("detect",))  # e.g. the LLM judge's key, before any work
    with HomeLock(home, {"build_id": build_id, "started_at": utc_now()}, wait_s=wait_s):
        samples = _ref_of(catalog, "samples", dataset_version)
        stats = _stats_for(catalog, samples)
        refs = evaluate_flow(str(home), profile, build_id, overrides, samples, stats)
        current = make_current and catalog.store.current().get("samples") == samples.version
        if current:
            catalog.store.set_current([refs[n] for n in ("detections", "metrics", "confusion", "detector_tests", "report_index")])
        catalog.refresh_views()
        report = _write_report(home, build_id, refs["report_index"])
    return {"build_id": build_id, "samples_version": samples.version, "became_current": current, "report": str(report),
            "tables": {n: f"{r.name}@{r.version}" for n, r in refs.items()}}
