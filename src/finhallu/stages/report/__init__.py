"""report: metrics, confusion, tests, detections and dataset statistics -> one static HTML report (`report_index`).

The HTML is stored in the table (so it is versioned and content-addressed like every output)
and the flow writes it to `reports/<build_id>/index.html`. Everything is inline (tables, CSS
heatmaps and bars, SVG curves): the file opens anywhere, offline.

The comparison with the previous dataset version depends on the catalog's history, not on this
stage's inputs, so the flow renders it (`render_comparison`) into `compare.html` beside the
report, which embeds it.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from typing import cast

import jinja2
import numpy as np
import polars as pl

from finhallu.coverage import warnings_from_stats
from finhallu.stages.assemble.validity import failing as failing_shortcuts
from finhallu.taxonomy import HALLU_TYPES, LABEL_4CLASS
from finhallu.schemas.rows import ConfusionRow, DetectorTestsRow, MetricsRow, ReportIndexRow
from finhallu.stages.base import Frames, Stage, StageContext, typed_rows
from finhallu.stages.metrics import LABEL_3CLASS, UNREAD
from pydantic import Field
from finhallu.schemas.section import Section


class ReportConfig(Section):
    title: str = "finhallu benchmark report"
    curve_points: int = Field(200, ge=10)  # ROC/PR curves are thinned to at most this many points per detector


HEADLINE = [
    ("binary", "accuracy"),
    ("binary", "precision"),
    ("binary", "recall"),
    ("binary", "f1"),
    ("binary", "mcc"),
    ("binary", "roc_auc"),
    ("binary", "pr_auc"),
    ("4class", "macro_f1"),
    ("3class", "macro_f1"),
    ("type", "macro_f1"),
]
COMPARED = [
    ("binary", "f1"),
    ("binary", "roc_auc"),
    ("binary", "mcc"),
    ("4class", "macro_f1"),
    ("3class", "macro_f1"),
    ("type", "macro_f1"),
]
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"]


def _fmt(v) -> str:
    return "–" if v is None or (isinstance(v, float) and np.isnan(v)) else f"{v:.3f}"


def _cell(row: MetricsRow | None) -> dict:
    if row is None:
        return {"value": "–", "ci": "", "raw": None}
    ci = f"[{_fmt(row['ci_low'])}, {_fmt(row['ci_high'])}]" if row["ci_low"] is not None else ""
    return {"value": _fmt(row["value"]), "ci": ci, "raw": row["value"], "n": row["n"]}


class MetricIndex:
    def __init__(self, metrics: pl.DataFrame):
        self.rows: dict[tuple[str, str, str, str], MetricsRow] = {
            (r["detector"], r["setting"], r["slice"], r["metric"]): r for r in typed_rows(metrics, MetricsRow)
        }
        self.detectors = sorted(metrics["detector"].unique().to_list()) if metrics.height else []
        self.slices = sorted({k[2] for k in self.rows})
        self.keys = sorted(self.rows)  # (detector, setting, slice, metric) in order, sorted once

    def get(self, det, setting, slice_, metric):
        return self.rows.get((det, setting, slice_, metric))

    def cell(self, det, setting, slice_, metric) -> dict:
        return _cell(self.get(det, setting, slice_, metric))


def _headline(mx: MetricIndex, slice_: str) -> list[dict]:
    return [
        {"detector": d, "cells": [mx.cell(d, s, slice_, m) for s, m in HEADLINE]}
        for d in mx.detectors
        if mx.get(d, "binary", slice_, "f1")
    ]


def _bars(mx: MetricIndex, setting: str, metric: str, slice_prefix: str) -> list[dict]:
    out = []
    for d in mx.detectors:
        rows = [
            mx.rows[(det, s, sl, m)]
            for det, s, sl, m in mx.keys
            if det == d and s == setting and m == metric and sl.startswith(slice_prefix) and "&" not in sl
        ]
        out.append(
            {
                "detector": d,
                "rows": [
                    {"label": r["slice"].split("=", 1)[1], "value": _fmt(r["value"]), "pct": round(100 * r["value"]), "n": r["n"]}
                    for r in rows
                ],
            }
        )
    return out


def _per_type_f1(mx: MetricIndex) -> list[dict]:
    out = []
    for d in mx.detectors:
        rows = [
            {"label": t, "value": _fmt(r["value"]), "pct": round(100 * r["value"])}
            for t in HALLU_TYPES
            if (r := mx.get(d, "type", "all", f"f1:{t}"))
        ]
        out.append({"detector": d, "rows": rows})
    return out


def _class_accuracy(mx: MetricIndex, setting: str, labels: tuple) -> dict:
    return {
        "labels": labels,
        "rows": [
            {
                "detector": d,
                "cells": [mx.cell(d, setting, "all", f"class_accuracy:{lab}") for lab in labels]
                + [mx.cell(d, setting, "all", "accuracy"), mx.cell(d, setting, "all", "macro_f1")],
            }
            for d in mx.detectors
        ],
    }


def _grid(mx: MetricIndex, metric: str, prefix: str, combined: bool = False) -> dict:
    """Detector x slice table of one binary metric: e.g. miss rate by subtype, recall by type x injector
    (`combined`: the `a=x&b=y` slices)."""
    cols = sorted(
        {sl for (_, s, sl, m) in mx.rows if s == "binary" and m == metric and sl.startswith(prefix) and ("&" in sl) == combined}
    )
    rows = [{"detector": d, "cells": [mx.cell(d, "binary", c, metric) for c in cols]} for d in mx.detectors]
    return {"cols": [c[len(prefix) :].replace("&injector=", " / ") for c in cols], "rows": rows}


def _matrices(confusion: pl.DataFrame, setting: str, order: tuple) -> list[dict]:
    out = []
    c_all = confusion.filter((pl.col("setting") == setting) & (pl.col("slice") == "all"))
    for det in sorted(c_all["detector"].unique().to_list()):
        c = c_all.filter(pl.col("detector") == det)
        present = set(c["true_label"].to_list()) | set(c["pred_label"].to_list())
        labels = [x for x in order if x in present] + sorted(present - set(order))
        counts = {(r["true_label"], r["pred_label"]): r["count"] for r in typed_rows(c, ConfusionRow)}
        peak = max(counts.values(), default=1)
        out.append(
            {
                "detector": det,
                "labels": labels,
                "rows": [
                    {
                        "label": t,
                        "cells": [
                            {"n": counts.get((t, p), 0), "alpha": round(counts.get((t, p), 0) / peak, 2), "diag": t == p}
                            for p in labels
                        ],
                    }
                    for t in labels
                    if any(counts.get((t, p)) for p in labels)
                ],
            }
        )
    return out


def _thin(x: np.ndarray, y: np.ndarray, points: int) -> list[tuple[float, float]]:
    if len(x) > points:
        keep = np.unique(np.linspace(0, len(x) - 1, points).round().astype(int))
        x, y = x[keep], y[keep]
    return list(zip(x.tolist(), y.tolist()))


def curves(detections: pl.DataFrame, samples: pl.DataFrame, points: int) -> dict:
    """ROC and PR curves per detector (SVG polylines in a 0-200 box) from the detection scores."""
    from sklearn.metrics import precision_recall_curve, roc_curve

    joined = detections.select("detector", "sample_id", "score").join(samples.select("sample_id", "label_binary"), on="sample_id")
    roc, pr = [], []
    for i, det in enumerate(sorted(joined["detector"].unique().to_list())):
        d = joined.filter(pl.col("detector") == det)
        y = (d["label_binary"] == "hallucinated").to_numpy()
        if y.all() or not y.any():
            continue
        s = d["score"].to_numpy()
        color = PALETTE[i % len(PALETTE)]
        fpr, tpr, _ = roc_curve(y, s)
        prec, rec, _ = precision_recall_curve(y, s)
        roc.append(
            {
                "detector": det,
                "color": color,
                "points": " ".join(f"{200 * a:.1f},{200 - 200 * b:.1f}" for a, b in _thin(fpr, tpr, points)),
            }
        )
        order = np.argsort(rec, kind="stable")
        pr.append(
            {
                "detector": det,
                "color": color,
                "points": " ".join(f"{200 * a:.1f},{200 - 200 * b:.1f}" for a, b in _thin(rec[order], prec[order], points)),
            }
        )
    return {
        "roc": roc,
        "pr": pr,
        "base_rate": float(cast(float | None, (joined["label_binary"] == "hallucinated").mean()) or 0) if joined.height else 0.0,
    }


def _tests(tests: pl.DataFrame) -> dict:
    if tests.height == 0:
        return {"mcnemar": [], "cochran": [], "impact": []}
    rows = sorted(typed_rows(tests, DetectorTestsRow), key=lambda r: (r["setting"], r["slice"], r["detector_a"], r["detector_b"]))
    fmt = lambda r: {
        **r,
        "statistic_s": f"{r['statistic']:.3f}",
        "p_s": f"{r['p_value']:.4f}",  # noqa: E731
        "p_holm_s": "–" if r["p_holm"] is None else f"{r['p_holm']:.4f}",
        "significant": (r["p_holm"] if r["p_holm"] is not None else r["p_value"]) < 0.05,
    }
    return {
        "mcnemar": [fmt(r) for r in rows if r["test"].startswith("mcnemar")],
        "cochran": [fmt(r) for r in rows if r["test"] == "cochran_q"],
        "impact": [fmt(r) for r in rows if r["test"] == "helped_hurt"],
    }


def _configs(detections: pl.DataFrame) -> list[dict]:
    if detections.height == 0:
        return []
    cfg = (
        detections.group_by("detector")
        .agg(pl.col("detector_version").first(), pl.col("detector_config").first(), n=pl.len())
        .sort("detector")
    )
    return cfg.to_dicts()


def _env() -> jinja2.Environment:
    return jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)


def _template(name: str) -> jinja2.Template:
    return _env().from_string((resources.files("finhallu") / "stages" / "report" / name).read_text("utf-8"))


def render(
    metrics: pl.DataFrame,
    confusion: pl.DataFrame,
    stats: pl.DataFrame,
    title: str,
    backends: dict,
    tests: pl.DataFrame | None = None,
    detections: pl.DataFrame | None = None,
    samples: pl.DataFrame | None = None,
    curve_points: int = 200,
) -> str:
    mx = MetricIndex(metrics)
    tests = tests if tests is not None else pl.DataFrame()
    detections = detections if detections is not None and detections.height else pl.DataFrame()
    stat_rows = list(stats.iter_rows(named=True)) if stats.height else []
    validity = {
        (r["metric"] if r["slice"] == "all" else f"{r['metric']} [{r['slice']}]"): r["value"]
        for r in stat_rows
        if r["split"] == "all"
        and r["metric"].startswith(
            ("fingerprint", "shortcut", "leakage", "retrieval", "dialogue_retention", "injection_retention")
        )
    }
    thr = [
        {
            "detector": d,
            "slice": sl,
            "cells": [mx.cell(d, "threshold", sl, m) for m in ("threshold", "precision", "recall", "f1", "mcc")],
        }
        for d in mx.detectors
        for sl in mx.slices
        if mx.get(d, "threshold", sl, "threshold")
    ]
    info = metrics.select("dataset", "dataset_version", "eval_id").unique().sort("eval_id").to_dicts() if metrics.height else []
    return _template("report_template.html.j2").render(
        title=title,
        info=info,
        headline_cols=HEADLINE,
        headline={"all": _headline(mx, "all"), "test": _headline(mx, "split=test")},
        thresholds=thr,
        curves=curves(detections, samples, curve_points)
        if detections.height and samples is not None
        else {"roc": [], "pr": [], "base_rate": 0.0},
        class4=_class_accuracy(mx, "4class", LABEL_4CLASS),
        class3=_class_accuracy(mx, "3class", LABEL_3CLASS),
        matrices={
            s: _matrices(confusion, s, order)
            for s, order in (
                ("binary", ("faithful", "hallucinated")),
                ("4class", LABEL_4CLASS),
                ("3class", LABEL_3CLASS),
                ("type", HALLU_TYPES + ("none",)),
            )
        }
        if confusion.height
        else {},
        recall_by_type=_bars(mx, "binary", "recall", "hallu_type="),
        type_f1=_per_type_f1(mx),
        type_injector=_grid(mx, "recall", "hallu_type=", combined=True),
        subtypes=_grid(mx, "miss_rate", "hallu_subtype="),
        turns=_grid(mx, "accuracy", "turn_index="),
        sources=_grid(mx, "f1", "source="),
        langs=_grid(mx, "f1", "lang="),
        tests=_tests(tests),
        configs=_configs(detections),
        stats=[
            r
            for r in stat_rows
            if r["metric"] in ("samples", "pairs", "dialogues")
            or r["metric"].startswith("samples_by_label")
            or r["metric"] == "samples_by_hallu_type"
        ],
        validity=validity,
        backends=backends,
        warnings=warnings_from_stats(stat_rows),
        labels=_label_rows(stat_rows),
        shortcuts=failing_shortcuts(stat_rows),
    )


def _label_rows(stat_rows: list[dict]) -> list[dict]:
    """Per label leaf: generated, verified by the label verifier, passed QC, and the drop reasons."""
    leaves: dict[str, dict] = {}
    for r in stat_rows:
        if r["split"] != "all" or not r["metric"].startswith("label_") or r["metric"] == "label_verified_share":
            continue
        if r["metric"] == "label_dropped_by":
            leaf, reason = r["slice"].split(" | ", 1)
            leaves.setdefault(leaf, {}).setdefault("dropped", []).append(f"{reason} ({r['value']:g})")
        else:
            leaves.setdefault(r["slice"], {})[r["metric"].removeprefix("label_")] = int(r["value"])
    return [
        {
            "leaf": leaf,
            "generated": v.get("generated", 0),
            "verified": v.get("verified", 0),
            "passed_qc": v.get("passed_qc", 0),
            "dropped": "; ".join(v.get("dropped", [])),
        }
        for leaf, v in sorted(leaves.items())
    ]


def render_comparison(current: pl.DataFrame, previous: pl.DataFrame | None, title: str) -> str:
    """Current vs previous dataset version: headline metrics per detector, with the change and whether
    the previous value falls outside the current 95% interval."""
    cur = MetricIndex(current)
    prev = MetricIndex(previous) if previous is not None and previous.height else None
    rows = []
    for d in cur.detectors:
        for setting, metric in COMPARED:
            c = cur.get(d, setting, "all", metric)
            if c is None:
                continue
            p = prev.get(d, setting, "all", metric) if prev else None
            delta = None if p is None else c["value"] - p["value"]
            outside = p is not None and c["ci_low"] is not None and not (c["ci_low"] <= p["value"] <= c["ci_high"])
            rows.append(
                {
                    "detector": d,
                    "setting": setting,
                    "metric": metric,
                    "current": _cell(c),
                    "previous": _cell(p),
                    "delta": "–" if delta is None else f"{delta:+.3f}",
                    "outside": outside,
                }
            )
    versions = {
        "current": current.select("dataset", "dataset_version").unique().to_dicts() if current.height else [],
        "previous": previous.select("dataset", "dataset_version").unique().to_dicts() if prev and previous is not None else [],
    }
    return _template("report_compare.html.j2").render(title=title, rows=rows, versions=versions, has_previous=prev is not None)


def run(inputs: Frames, ctx: StageContext[ReportConfig]) -> Frames:
    cfg: ReportConfig = ctx.config
    backends = {role: f"{c.get('provider', 'offline')}:{c.get('model', 'rules')}" for role, c in sorted(ctx.roles.items())}
    html = render(
        inputs["metrics"],
        inputs["confusion"],
        inputs["dataset_stats"],
        cfg.title,
        backends,
        inputs.get("detector_tests"),
        inputs.get("detections"),
        inputs.get("samples"),
        cfg.curve_points,
    )
    rid = hashlib.sha256(html.encode()).hexdigest()[:16]
    ctx.progress(1, 1)
    row: ReportIndexRow = {
        "report_id": rid,
        "title": cfg.title,
        "detectors": sorted(inputs["metrics"]["detector"].unique().to_list()),
        "html": html,
    }
    return {"report_index": pl.DataFrame({column: [value] for column, value in row.items()})}


STAGE = Stage(
    "report",
    run,
    ReportConfig,
    inputs=("metrics", "confusion", "detector_tests", "dataset_stats", "detections", "samples"),
    outputs=("report_index",),
    description="HTML report",
    unread=UNREAD,
    # The report names the backend of every role that made the benchmark.
    configured_roles=lambda cfg, roles: roles,
    resources=("stages/report/report_template.html.j2", "stages/report/report_compare.html.j2"),
    imports=("sklearn.metrics",),  # the ROC and precision-recall curves
)
