"""probe_report: items, scores and endpoints -> `probe_report_index`, the probe's HTML report.

A mechanism × field heatmap per target (mean axis score; the judge's rebuttal rate where a
language has no axis embedder, and the report says so), a per-model comparison (axis score,
rebutted / comply-then-warn / complied shares, with and without evidence, axis-judge agreement)
and the endpoints every score was normalised with.
"""

from __future__ import annotations

from importlib import resources

import polars as pl

from finhallu.probe import MECHANISMS
from finhallu.probe.axis import anchor_version
from finhallu.schemas.section import Section
from finhallu.stages.base import Frames, Stage, StageContext


class ProbeReportConfig(Section):
    title: str = "finhallu false-premise probe"


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f}%"


def _num(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def _shares(df: pl.DataFrame) -> dict:
    judged = df.filter(pl.col("judge_label").is_not_null())
    n = judged.height

    def share(label: str, frame: pl.DataFrame = judged) -> float | None:
        return frame.filter(pl.col("judge_label") == label).height / frame.height if frame.height else None

    axis = df["axis_score"].drop_nulls()
    return {
        "n": df.height,
        "axis_value": float(axis.mean()) if axis.len() else None,  # type: ignore[arg-type]
        "rebutted_value": share("rebutted") if n else None,
        "rebutted": _pct(share("rebutted")),
        "warned": _pct(share("complied_then_warned")),
        "complied": _pct(share("complied")),
        "rebutted_ev": _pct(share("rebutted", judged.filter(pl.col("with_evidence")))),
        "rebutted_noev": _pct(share("rebutted", judged.filter(~pl.col("with_evidence")))),
    }


def _models(scores: pl.DataFrame, backends: dict[str, str]) -> list[dict]:
    rows = []
    for target in sorted(scores["target"].unique()):
        df = scores.filter(pl.col("target") == target)
        s = _shares(df)
        both = df.filter(pl.col("axis_label").is_not_null() & pl.col("judge_label").is_not_null())
        agree = float((both["axis_label"] == both["judge_label"]).cast(pl.Float64).sum()) / both.height if both.height else None
        rows.append(
            s | {"target": target, "backend": backends.get(target, ""), "axis": _num(s["axis_value"]), "agree": _pct(agree)}
        )
    return rows


def _heatmaps(scores: pl.DataFrame) -> list[dict]:
    fields = sorted(scores["field"].unique())
    out = []
    settings = ((False, "without evidence (HalBench's setting)"), (True, "with the evidence passage in context"))
    for target, (evidence, setting) in ((t, s) for t in sorted(scores["target"].unique()) for s in settings):
        df = scores.filter((pl.col("target") == target) & (pl.col("with_evidence") == evidence))
        if df.height == 0:
            continue
        rows = []
        for code, mech in MECHANISMS.items():
            cells: list[dict | None] = []
            for field in fields:
                sub = df.filter((pl.col("mechanism") == code) & (pl.col("field") == field))
                if sub.height == 0:
                    cells.append(None)
                    continue
                s = _shares(sub)
                value = s["axis_value"] if s["axis_value"] is not None else s["rebutted_value"]
                hue = 0 if value is None else round(120 * value)  # red (complied) -> green (rebutted)
                shown = _num(value) if s["axis_value"] is not None else f"{_pct(value)} (judge)"
                cells.append(s | {"value": shown, "hue": hue})
            if any(cells):
                rows.append({"code": code, "name": mech.name, "cells": cells})
        out.append({"target": target, "setting": setting, "fields": fields, "rows": rows})
    return out


def _notes(items: pl.DataFrame, scores: pl.DataFrame) -> list[str]:
    notes = []
    for lang in sorted(items["lang"].unique()):
        sub = scores.filter(pl.col("lang") == lang)
        if sub.height and sub["axis_score"].null_count() == sub.height:
            notes.append(
                f"No axis score for language {lang!r}: no dense embedder for it is available here "
                "(probe_scores.embedders; KURE for Korean must be in the local model cache). "
                "Its cells show the judge's rebuttal rate alone."
            )
    return notes


def render(title: str, items: pl.DataFrame, scores: pl.DataFrame, endpoints: pl.DataFrame, backends: dict[str, str]) -> str:
    import jinja2

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    template = env.from_string((resources.files("finhallu") / "probe" / "probe_report.html.j2").read_text("utf-8"))
    ends = [e | {"defer_end": _num(e["defer_end"]), "hard_end": _num(e["hard_end"])} for e in endpoints.to_dicts()]
    return template.render(
        title=title,
        n_items=items.height,
        n_replies=scores.height,
        targets=sorted(scores["target"].unique()) if scores.height else [],
        anchor_version=anchor_version(),
        notes=_notes(items, scores),
        models=_models(scores, backends) if scores.height else [],
        heatmaps=_heatmaps(scores) if scores.height else [],
        endpoints=ends,
    )


def run(inputs: Frames, ctx: StageContext[ProbeReportConfig]) -> Frames:
    responses = inputs["probe_responses"]
    backends = dict(zip(responses["target"], responses["backend"])) if responses.height else {}
    html = render(ctx.config.title, inputs["premise_items"], inputs["probe_scores"], inputs["probe_endpoints"], backends)
    report_id = "probe-" + "-".join(sorted(backends)) if backends else "probe"
    return {"probe_report_index": pl.DataFrame({"report_id": [report_id], "title": [ctx.config.title], "html": [html]})}


STAGE = Stage(
    "probe_report",
    run,
    ProbeReportConfig,
    inputs=("premise_items", "probe_responses", "probe_scores", "probe_endpoints"),
    outputs=("probe_report_index",),
    description="probe report",
    resources=("probe/probe_report.html.j2",),
)
