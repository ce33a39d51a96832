"""report: metrics, confusion and dataset statistics -> one static HTML report (`report_index`).

The HTML is stored in the table (so it is versioned and content-addressed like every
output) and the flow writes it to `reports/<build_id>/index.html`.
"""

from __future__ import annotations

import hashlib
from importlib import resources

import jinja2
import polars as pl

from finhallu.config import ReportConfig
from finhallu.tasks.base import Frames, StageContext

HEADLINE = [("binary", "f1"), ("binary", "precision"), ("binary", "recall"), ("binary", "balanced_accuracy"),
            ("4class", "macro_f1"), ("type", "macro_f1")]


def _fmt(v) -> str:
    return "–" if v is None else f"{v:.3f}"


def render(metrics: pl.DataFrame, confusion: pl.DataFrame, stats: pl.DataFrame, title: str, backends: dict) -> str:
    detectors = sorted(metrics["detector"].unique().to_list())
    headline = []
    for det in detectors:
        m = metrics.filter((pl.col("detector") == det) & (pl.col("slice") == "all"))
        cells = []
        for setting, metric in HEADLINE:
            r = m.filter((pl.col("setting") == setting) & (pl.col("metric") == metric))
            if r.height:
                row = r.row(0, named=True)
                cells.append({"value": _fmt(row["value"]), "ci": f"[{_fmt(row['ci_low'])}, {_fmt(row['ci_high'])}]"})
            else:
                cells.append({"value": "–", "ci": ""})
        headline.append({"detector": det, "cells": cells})
    by_type = []
    for det in detectors:
        m = metrics.filter((pl.col("detector") == det) & (pl.col("setting") == "binary") & (pl.col("metric") == "recall")
                           & pl.col("slice").str.starts_with("hallu_type="))
        by_type.append({"detector": det, "rows": [{"type": r["slice"].split("=", 1)[1], "value": r["value"],
                                                    "pct": round(100 * r["value"]), "n": r["n"]} for r in m.iter_rows(named=True)]})
    matrices = []
    for det in detectors:
        c = confusion.filter((pl.col("detector") == det) & (pl.col("setting") == "4class"))
        labels = sorted(set(c["true_label"].to_list()) | set(c["pred_label"].to_list()))
        counts = {(r["true_label"], r["pred_label"]): r["count"] for r in c.iter_rows(named=True)}
        peak = max(counts.values(), default=1)
        matrices.append({"detector": det, "labels": labels,
                         "rows": [{"label": t, "cells": [{"n": counts.get((t, p), 0),
                                                          "alpha": round(counts.get((t, p), 0) / peak, 2)} for p in labels]}
                                  for t in labels]})
    stat_rows = [r for r in stats.iter_rows(named=True)]
    validity = {r["metric"]: r["value"] for r in stat_rows if r["split"] == "all" and (
        r["metric"].startswith(("fingerprint", "leakage", "retrieval", "dialogue_retention", "injection_retention")))}
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    template = env.from_string((resources.files("finhallu") / "tasks" / "report_template.html.j2").read_text("utf-8"))
    return template.render(title=title, headline=headline, headline_cols=HEADLINE, by_type=by_type, matrices=matrices,
                           stats=[r for r in stat_rows if r["metric"] in ("samples", "pairs", "dialogues") or
                                  r["metric"].startswith("samples_by_label") or r["metric"] == "samples_by_hallu_type"],
                           validity=validity, backends=backends)


def run(inputs: Frames, ctx: StageContext) -> Frames:
    cfg: ReportConfig = ctx.config
    backends = {role: f"{c.get('provider', 'offline')}:{c.get('model', 'rules')}" for role, c in sorted(ctx.roles.items())}
    html = render(inputs["metrics"], inputs["confusion"], inputs["dataset_stats"], cfg.title, backends)
    rid = hashlib.sha256(html.encode()).hexdigest()[:16]
    ctx.progress(1, 1)
    return {"report_index": pl.DataFrame({"report_id": [rid], "title": [cfg.title],
                                          "detectors": [sorted(inputs["metrics"]["detector"].unique().to_list())],
                                          "html": [html]})}
