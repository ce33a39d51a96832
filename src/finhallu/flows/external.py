"""`finhallu eval-external`: run detectors on an external labelled dataset (RAGTruth, HaluEval, JSONL/CSV).

The dataset is read by its loader (external/), gated and published as an `external_samples`
version (with a small `dataset_stats` version), then the same cached detect -> metrics -> report
stages run on it. Results land in `detections` / `metrics` / `confusion` / `detector_tests` with
`dataset` = the dataset's name and `dataset_version` = its content hash; they never become the
current benchmark views, so query them in `<table>_all`.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import polars as pl
from prefect import flow

from finhallu.config import BuildConfig, load_config, with_detectors
from finhallu.flows.heartbeats import flow_heartbeats
from finhallu.flows.artifacts import finalize_evaluation
from finhallu.flows.publish import gate_outputs, publish_gated
from finhallu.flows.session import check_role_keys, home_session, new_build_id, write_report
from finhallu.flows.evaluate import run_eval_stages
from finhallu.schemas.contracts import CONTRACTS
from finhallu.external import load_external
from finhallu.warehouse.storage import resolve_home
from finhallu.warehouse import Catalog, TableRef

SUMMARY = [
    ("binary", "accuracy"),
    ("binary", "f1"),
    ("binary", "mcc"),
    ("binary", "roc_auc"),
    ("binary", "pr_auc"),
    ("4class", "macro_f1"),
    ("type", "macro_f1"),
]


def dataset_stats_of(samples: pl.DataFrame) -> pl.DataFrame:
    """Counts per split (and overall) of samples, pairs, 4-class labels and types, in the dataset_stats layout."""
    rows = []
    for split, part in [("all", samples)] + [
        (s, samples.filter(pl.col("split") == s)) for s in sorted(samples["split"].unique().to_list())
    ]:
        rows += [
            {"split": split, "metric": "samples", "slice": "all", "value": float(part.height)},
            {"split": split, "metric": "pairs", "slice": "all", "value": float(part["pair_id"].n_unique())},
        ]
        for lab, n in part.group_by("label_4class").len().sort("label_4class").iter_rows():
            rows.append({"split": split, "metric": "samples_by_label_4class", "slice": lab, "value": float(n)})
        for t, n in part.filter(pl.col("hallu_type").is_not_null()).group_by("hallu_type").len().sort("hallu_type").iter_rows():
            rows.append({"split": split, "metric": "samples_by_hallu_type", "slice": t, "value": float(n)})
    return CONTRACTS["dataset_stats"].conform(pl.DataFrame(rows))


def files_digest(path: Path) -> str:
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    h = hashlib.sha256()
    for p in files:
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


@flow(name="finhallu-eval-external", flow_run_name="eval-external-{build_id}", persist_result=False)
def external_flow(cfg: BuildConfig, home: str, build_id: str, samples: TableRef, stats: TableRef) -> dict:
    with flow_heartbeats():
        refs = run_eval_stages(cfg, home, build_id, {"samples": samples, "dataset_stats": stats})
        finalize_evaluation(home, build_id, refs)
    return refs


def publish_dataset(catalog: Catalog, frame: pl.DataFrame, build_id: str) -> tuple[TableRef, TableRef]:
    """The external dataset and its counts, through the same gated publish as a stage's outputs."""
    step = "eval_external"
    samples = publish_gated(catalog, gate_outputs(catalog, step, {"external_samples": frame}, {}, {}, build_id), [], build_id)[
        "external_samples"
    ]
    stats = dataset_stats_of(frame)
    gated = gate_outputs(catalog, step, {"dataset_stats": stats}, {"external_samples": frame}, {}, build_id)
    return samples, publish_gated(catalog, gated, [samples], build_id)["dataset_stats"]


def summarize(metrics: pl.DataFrame) -> dict:
    """{detector: {slice: {setting_metric: {value, ci}}}} for the headline metrics on all samples and the test split."""
    out: dict = {}
    wanted = metrics.filter(pl.col("slice").is_in(["all", "split=test"]))
    for r in wanted.iter_rows(named=True):
        if (r["setting"], r["metric"]) in SUMMARY:
            out.setdefault(r["detector"], {}).setdefault(r["slice"], {})[f"{r['setting']}_{r['metric']}"] = {
                "value": round(r["value"], 4),
                "ci": None if r["ci_low"] is None else [round(r["ci_low"], 4), round(r["ci_high"], 4)],
                "n": r["n"],
            }
    return out


def run_eval_external(
    home: str | Path,
    fmt: str,
    path: str | Path,
    detectors: list[str] | None = None,
    profile: str | BuildConfig = "demo",
    dataset: str | None = None,
    limit: int | None = None,
    wait_s: float = 0.0,
    train_on: str | None = None,
) -> dict:
    """train_on: FORMAT:PATH of a labelled set whose every row the learned detector also trains on
    (its content hash enters the detector's parameters, so the cached detections follow the files)."""
    home = resolve_home(home)  # a path, or a URL standing for its state folder
    cfg = profile if isinstance(profile, BuildConfig) else load_config(profile)
    selected = {d: cfg.detect.detectors.get(d, {}) for d in (detectors or list(cfg.detect.detectors))}
    if train_on:
        if "learned" not in selected:
            raise ValueError("--train-on trains the learned detector: select it (--detector learned)")
        from finhallu.detectors.learned import split_spec

        digest = files_digest(Path(split_spec(train_on)[1]).expanduser())
        selected["learned"] = {**(selected["learned"] or {}), "train_on": train_on, "train_on_sha256": digest}
    cfg = with_detectors(cfg, selected)
    check_role_keys(cfg, only=("detect",))
    frame = load_external(fmt, path, dataset, limit)
    name = frame["dataset"][0]
    build_id = new_build_id("ext-")
    with home_session(home, build_id, wait_s) as catalog:
        samples, stats = publish_dataset(catalog, frame, build_id)
        refs = external_flow(cfg, str(home), build_id, samples, stats)
        report = write_report(home, build_id, refs["report_index"])
    metrics = catalog.store.read(refs["metrics"])
    return {
        "build_id": build_id,
        "format": fmt,
        "dataset": name,
        "dataset_version": samples.content_hash[:16],
        "files_sha256": files_digest(Path(path).expanduser()),
        "samples": frame.height,
        "splits": dict(frame.group_by("split").len().sort("split").iter_rows()),
        "eval_id": metrics["eval_id"][0] if metrics.height else None,
        "report": str(report),
        "tables": {n: f"{r.name}@{r.version}" for n, r in refs.items()},
        "metrics": summarize(metrics),
    }
