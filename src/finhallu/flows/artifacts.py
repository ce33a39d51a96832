"""After an evaluation: the comparison with the previous dataset version and the Prefect artifacts.

`finalize_evaluation` (called inside the build / evaluate / eval-external flows, so the artifacts
attach to that flow run) writes `reports/<build_id>/compare.html` (embedded by the report) and
creates two keyed Prefect artifacts, whose history the UI keeps per key:
  `<dataset>-evaluation`       markdown summary: headline metrics with CIs, significant
                               differences, changes since the previous dataset version, the report path
  `<dataset>-detector-metrics` table: one row per detector of the headline metrics
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from finhallu.stages.report import render_comparison
from finhallu.warehouse import Catalog, TableRef

TABLE_METRICS = [
    ("binary", "f1"),
    ("binary", "precision"),
    ("binary", "recall"),
    ("binary", "mcc"),
    ("binary", "roc_auc"),
    ("binary", "pr_auc"),
    ("4class", "macro_f1"),
    ("3class", "macro_f1"),
    ("type", "macro_f1"),
]


def artifact_key(dataset: str, what: str) -> str:
    """Prefect keys allow lowercase letters, digits and dashes only."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", f"{dataset}-{what}".lower())).strip("-")


def previous_metrics(catalog: Catalog, current: pl.DataFrame, before_version: int) -> pl.DataFrame | None:
    """Metrics of the most recent evaluation of the same dataset at an *earlier dataset version*
    (published in a metrics version before `before_version`), or None."""
    if current.height == 0:
        return None
    dataset, version = current["dataset"][0], current["dataset_version"][0]
    store = catalog.store
    for rec in reversed(store.records("metrics")):
        if rec["version"] >= before_version:
            continue
        old = store.read(store.ref_of_record(rec))
        old = old.filter((pl.col("dataset") == dataset) & (pl.col("dataset_version") != version))
        if old.height:
            latest = old["dataset_version"][-1]
            return old.filter(pl.col("dataset_version") == latest)
    return None


def headline_rows(metrics: pl.DataFrame) -> list[dict]:
    rows = []
    index = {
        (r["detector"], r["setting"], r["metric"]): r for r in metrics.filter(pl.col("slice") == "all").iter_rows(named=True)
    }
    for det in sorted(metrics["detector"].unique().to_list()):
        row = {"detector": det}
        for setting, metric in TABLE_METRICS:
            r = index.get((det, setting, metric))
            row[f"{setting}_{metric}"] = None if r is None else round(r["value"], 4)
            if (setting, metric) == ("binary", "f1") and r is not None and r["ci_low"] is not None:
                row["binary_f1_ci"] = f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]"
        row["n"] = index.get((det, "binary", "f1"), {}).get("n")
        rows.append(row)
    return rows


def summary_markdown(metrics: pl.DataFrame, tests: pl.DataFrame, previous: pl.DataFrame | None, report: Path | None) -> str:
    dataset = metrics["dataset"][0] if metrics.height else "?"
    version = metrics["dataset_version"][0] if metrics.height else "?"
    lines = [f"# Detector evaluation: {dataset} @ {version}", ""]
    if report:
        lines += [f"Report: [{report}]({report.resolve().as_uri()})", ""]
    lines += [
        "| detector | binary F1 [95% CI] | ROC-AUC | MCC | 4-class macro F1 | type macro F1 | n |",
        "|---|---|---|---|---|---|---|",
    ]
    fmt = lambda v: "–" if v is None else f"{v:.3f}"  # noqa: E731
    for r in sorted(headline_rows(metrics), key=lambda r: -(r["binary_f1"] or 0)):
        lines.append(
            f"| {r['detector']} | {fmt(r['binary_f1'])} {r.get('binary_f1_ci', '')} | {fmt(r['binary_roc_auc'])} | "
            f"{fmt(r['binary_mcc'])} | {fmt(r['4class_macro_f1'])} | {fmt(r['type_macro_f1'])} | {r['n']} |"
        )
    if tests.height:
        sig = tests.filter(
            pl.col("test").str.starts_with("mcnemar") & (pl.col("setting") == "binary") & (pl.col("p_holm") < 0.05)
        )
        lines += [
            "",
            f"McNemar (binary, Holm-adjusted p < 0.05): {sig.height} of "
            f"{tests.filter(pl.col('test').str.starts_with('mcnemar') & (pl.col('setting') == 'binary')).height} pairs differ.",
        ]
        for r in sig.sort("p_holm").head(5).iter_rows(named=True):
            better = r["detector_b"] if r["b_only_correct"] > r["a_only_correct"] else r["detector_a"]
            lines.append(f"- {r['detector_a']} vs {r['detector_b']} ({r['slice']}): {better} better, p_holm={r['p_holm']:.4f}")
        for r in tests.filter((pl.col("test") == "helped_hurt") & (pl.col("setting") == "binary")).iter_rows(named=True):
            lines.append(
                f"- {r['detector_b']} vs {r['detector_a']} ({r['slice']}): helped {r['b_only_correct']}, "
                f"hurt {r['a_only_correct']}, net {r['net']:+d} (p={r['p_value']:.4f})"
            )
    if previous is not None and previous.height:
        prev = {
            (r["detector"], r["setting"], r["metric"]): r["value"]
            for r in previous.filter(pl.col("slice") == "all").iter_rows(named=True)
        }
        lines += ["", f"Change since dataset version {previous['dataset_version'][0]} (binary F1):"]
        for r in (
            metrics.filter((pl.col("slice") == "all") & (pl.col("setting") == "binary") & (pl.col("metric") == "f1"))
            .sort("detector")
            .iter_rows(named=True)
        ):
            old = prev.get((r["detector"], "binary", "f1"))
            if old is not None:
                moved = r["ci_low"] is not None and not (r["ci_low"] <= old <= r["ci_high"])
                lines.append(
                    f"- {r['detector']}: {old:.3f} -> {r['value']:.3f} ({r['value'] - old:+.3f}){' outside the current CI' if moved else ''}"
                )
    else:
        lines += ["", "No earlier dataset version evaluated: nothing to compare with yet."]
    return "\n".join(lines)


def finalize_evaluation(home: str | Path, build_id: str, refs: dict[str, TableRef], artifacts: bool = True) -> Path:
    """Write compare.html beside the build's report and (inside a flow run) create the artifacts.
    Returns the report's path (written by the caller from `report_index`)."""
    home = Path(home)
    catalog = Catalog(home)
    metrics = catalog.store.read(refs["metrics"])
    tests = catalog.store.read(refs["detector_tests"]) if "detector_tests" in refs else pl.DataFrame()
    previous = previous_metrics(catalog, metrics, refs["metrics"].version)
    out_dir = home / "reports" / build_id
    out_dir.mkdir(parents=True, exist_ok=True)
    title = catalog.store.read(refs["report_index"])["title"][0] if "report_index" in refs else "finhallu"
    (out_dir / "compare.html").write_text(render_comparison(metrics, previous, title), encoding="utf-8")
    report = out_dir / "index.html"
    if artifacts and metrics.height:
        from prefect.artifacts import create_markdown_artifact, create_table_artifact

        dataset = metrics["dataset"][0]
        try:
            create_markdown_artifact(
                summary_markdown(metrics, tests, previous, report),
                key=artifact_key(dataset, "evaluation"),
                description=f"detector evaluation of {dataset} (build {build_id})",
            )
            create_table_artifact(
                headline_rows(metrics),
                key=artifact_key(dataset, "detector-metrics"),
                description=f"headline metrics per detector, {dataset} @ {metrics['dataset_version'][0]}",
            )
        except Exception as exc:  # the run's results are published; a UI record must not undo them
            print(f"warning: could not create Prefect artifacts: {type(exc).__name__}: {exc}")
    return report
