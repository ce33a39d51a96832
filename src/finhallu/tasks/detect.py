"""detect: samples -> `detections` for every configured detector (registry in tasks/detectors/).

Each row records the detector's code version and its full configuration (parameters, and for
LLM or model-backed detectors the backend/model id), so results from different versions or
settings never get mixed up in `detections_all`.
"""

from __future__ import annotations

import polars as pl

from finhallu.config import DetectConfig
from finhallu.tasks.base import Frames, StageContext, rows_frame
from finhallu.tasks.detectors import DetectorContext, base_name, canonical_json, get_detector

DATASET = "finhallu"


def eval_id_for(dataset: str, version: str) -> str:
    return f"{dataset}@{version[:12]}"


def dataset_of(samples: pl.DataFrame) -> str:
    """The evaluated dataset's name: the benchmark's own, or an external dataset's (`dataset` column)."""
    if "dataset" in samples.columns and samples.height:
        return str(samples["dataset"][0])
    return DATASET


def run_detectors(samples: pl.DataFrame, detectors: dict[str, dict], eval_id: str, ctx: DetectorContext | None = None,
                  progress=None) -> pl.DataFrame:
    ctx = ctx or DetectorContext()
    items = list(samples.iter_rows(named=True))
    plan = []
    for name, overrides in detectors.items():  # validate every configuration before running any
        det = get_detector(base_name(name))
        plan.append((name, det, det.params(overrides or {})))
    rows = []
    for done, (name, det, params) in enumerate(plan, 1):
        found = ctx.detections(name, items, params)
        version, config = det.code_version, canonical_json(det.config(params, ctx))
        for s, d in zip(items, found):
            if d is None:
                continue
            if not 0.0 <= d.score <= 1.0:
                raise ValueError(f"detector {name!r} scored {d.score} for {s['sample_id']}; scores must lie in [0, 1]")
            rows.append({"eval_id": eval_id, "detector": name, "sample_id": s["sample_id"], "score": float(d.score),
                         "pred_binary": d.pred_binary, "pred_4class": d.pred_4class, "pred_type": d.pred_type,
                         "rationale": d.rationale, "detector_version": version, "detector_config": config})
        if progress:
            progress(done, len(plan))
    return rows_frame(rows, ["detector", "sample_id"])


def run(inputs: Frames, ctx: StageContext) -> Frames:
    cfg: DetectConfig = ctx.config
    samples = inputs["samples"]
    eval_id = eval_id_for(dataset_of(samples), ctx.input_hashes.get("samples", "unversioned"))
    dctx = DetectorContext(seed=ctx.seed, roles=ctx.roles, cache_dir=ctx.cache_dir)
    detectors = dict(cfg.detectors)
    if cfg.baselines:
        from finhallu.tasks.detectors.baselines import BASELINES

        detectors.update({b: detectors.get(b, {}) for b in BASELINES})
    return {"detections": run_detectors(samples, detectors, eval_id, dctx, ctx.progress)}
