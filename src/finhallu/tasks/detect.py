"""detect: samples -> `detections` for every configured detector (registry in tasks/detectors/)."""

from __future__ import annotations

import polars as pl

from finhallu.config import DetectConfig
from finhallu.tasks.base import Frames, StageContext, rows_frame
from finhallu.tasks.detectors import get_detector

DATASET = "finhallu"


def eval_id_for(dataset: str, version: str) -> str:
    return f"{dataset}@{version[:12]}"


def run_detectors(samples: pl.DataFrame, detectors: dict[str, dict], eval_id: str, progress=None) -> pl.DataFrame:
    rows = []
    items = list(samples.iter_rows(named=True))
    total = len(items) * len(detectors)
    n = 0
    for name, overrides in detectors.items():
        det = get_detector(name)
        unknown = set(overrides) - set(det.defaults)
        if unknown:
            raise ValueError(f"detector {name!r} has no parameter(s) {sorted(unknown)}; known: {sorted(det.defaults)}")
        params = {**det.defaults, **overrides}
        for s in items:
            d = det.detect(s, params)
            rows.append({"eval_id": eval_id, "detector": name, "sample_id": s["sample_id"], "score": float(d.score),
                         "pred_binary": d.pred_binary, "pred_4class": d.pred_4class, "pred_type": d.pred_type,
                         "rationale": d.rationale})
            n += 1
            if progress and n % 50 == 0:
                progress(n, total)
    return rows_frame(rows, ["detector", "sample_id"])


def run(inputs: Frames, ctx: StageContext) -> Frames:
    cfg: DetectConfig = ctx.config
    eval_id = eval_id_for(DATASET, ctx.input_hashes.get("samples", "unversioned"))
    return {"detections": run_detectors(inputs["samples"], cfg.detectors, eval_id, ctx.progress)}
