"""The probe flow: the false-premise probe as one Prefect flow of cached stage tasks.

It runs the build stages it reads from (ingest, chunk, embed, seed_qa: cached when a build made
them) and the probe's own (premise_items -> probe_responses -> probe_scores -> probe_report). Its
tables become current together when every stage passed; its report lands at
reports/<probe id>/index.html beside `probe_ratings.csv`, the judge's and the axis's labels in the
layout `finhallu agreement` reads (add human raters' rows to validate them).
"""

from __future__ import annotations

import csv
from pathlib import Path

from prefect import flow

from finhallu.config import BuildConfig, load_config, merge_dicts
from finhallu.flows.heartbeats import flow_heartbeats
from finhallu.flows.build import run_stage_step
from finhallu.flows.session import check_role_keys, home_session, new_build_id, write_report
from finhallu.stages.pipeline import PROBE_INPUT_STAGES, PROBE_STAGES, STAGES_BY_NAME
from finhallu.warehouse.storage import resolve_home
from finhallu.warehouse import Catalog, TableRef
from finhallu.warehouse.store import read_table

CRITERION = "premise_handling"


@flow(name="finhallu-probe-stages", flow_run_name="probe-{build_id}", persist_result=False, log_prints=True)
def probe_flow(cfg: BuildConfig, home: str, build_id: str) -> dict:
    store = Catalog(Path(home)).store
    refs: dict[str, TableRef] = {}
    ran: list[str] = []
    cached: list[str] = []
    with flow_heartbeats():
        for stage in [STAGES_BY_NAME[n] for n in PROBE_INPUT_STAGES] + PROBE_STAGES:
            (cached if run_stage_step(stage, refs, cfg, home, build_id, store) else ran).append(stage.name)
    probe_tables = [t for s in PROBE_STAGES for t in s.outputs]
    store.set_current([refs[t] for t in probe_tables])
    return {"refs": {t: refs[t] for t in probe_tables}, "ran": ran, "cached": cached}


def probe_roles_problem(cfg: BuildConfig) -> str | None:
    """A target or panel role must be configured: a typo would otherwise probe the rules backend."""
    missing = [r for r in cfg.probe_responses.targets + cfg.probe_responses.panel if r not in cfg.roles]
    if missing:
        return f"probe_responses: role {missing[0]!r} is not configured (roles: {sorted(cfg.roles)})"
    return None


def check_probe_keys(cfg: BuildConfig) -> None:
    """Every role the probe calls is configured (ValueError) and has its key and endpoint (MissingKeyError)."""
    problem = probe_roles_problem(cfg)
    if problem:
        raise ValueError(problem)
    check_role_keys(cfg, only=tuple(PROBE_INPUT_STAGES) + tuple(s.name for s in PROBE_STAGES))


def write_ratings(out: Path, scores: TableRef) -> Path:
    """The judge's (rater `llm`) and the axis's (rater `axis`) labels, one row each, for `finhallu agreement`."""
    df = read_table(scores)
    tmp = out.with_suffix(".tmp")
    with tmp.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", "criterion", "rater", "rating"])
        for r in df.sort("response_id").iter_rows(named=True):
            for rater, label in (("llm", r["judge_label"]), ("axis", r["axis_label"])):
                if label is not None:
                    w.writerow([r["response_id"], CRITERION, rater, label])
    tmp.replace(out)
    return out


def run_probe(
    profile: str | BuildConfig,
    home: str | Path,
    targets: list[str] | None = None,
    overrides: dict | None = None,
    wait_s: float = 0.0,
) -> dict:
    """Probe the target roles (default: the profile's probe_responses.targets) on the home's corpus."""
    home = resolve_home(home)  # a path, or a URL standing for its state folder
    build_id = new_build_id("probe-")
    extra = dict(overrides or {})
    if targets:
        extra["probe_responses"] = {**extra.get("probe_responses", {}), "targets": list(targets)}
    if isinstance(profile, BuildConfig):
        cfg = BuildConfig.model_validate(merge_dicts(profile.model_dump(mode="json"), extra)) if extra else profile
    else:
        cfg = load_config(profile, extra)
    check_probe_keys(cfg)
    with home_session(home, build_id, wait_s) as catalog:
        out = probe_flow(cfg=cfg, home=str(home), build_id=build_id)
        report = write_report(home, build_id, out["refs"]["probe_report_index"])
        ratings = write_ratings(report.parent / "probe_ratings.csv", out["refs"]["probe_scores"])
        catalog.refresh_views()
    return {
        "probe_id": build_id,
        "targets": cfg.probe_responses.targets,
        "ran": out["ran"],
        "cached": out["cached"],
        "report": str(report),
        "ratings": str(ratings),
        "tables": {n: f"{r.name}@{r.version}" for n, r in out["refs"].items()},
    }
