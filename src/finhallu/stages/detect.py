"""detect: samples -> `detections` for every configured detector (registry in detectors/).

Each row records the detector's code version and its full configuration (parameters, and for
LLM or model-backed detectors the backend/model id), so results from different versions or
settings never get mixed up in `detections_all`.
"""

from __future__ import annotations

import contextvars
from concurrent.futures import ThreadPoolExecutor

import polars as pl

from finhallu.schemas.rows import DetectionsRow
from finhallu.schemas.contracts import CONTRACTS
from finhallu.stages.base import Frames, Stage, StageContext, hand_back, typed_rows_frame, shared_rows
from finhallu.detectors import DetectorContext, base_name, canonical_json, get_detector
from pydantic import Field, field_validator
from finhallu.schemas.section import Section


class DetectConfig(Section):
    # detector name -> its parameters (a dict so `--set detect.detectors.NAME.threshold=...` works).
    # `base:variant` names run one detector under another configuration (e.g. numeric_grounding:no_history).
    # The offline set by default; `nli` needs a local cross-encoder (see detectors/nli.py).
    detectors: dict[str, dict] = Field(
        default_factory=lambda: {
            "numeric_grounding": {},
            "lexical_support": {},
            "embedding_similarity": {},
            "refusal_answerability": {},
            "llm_judge": {},
            "learned": {},
        }
    )
    # The trivial baselines (detectors/baselines.py: length, novel-token share, verbatim copy)
    # run beside the detectors in every evaluation, so no score is read without them.
    baselines: bool = True

    @field_validator("detectors")
    @classmethod
    def _known_detectors(cls, detectors: dict[str, dict]) -> dict[str, dict]:
        """Every name a registered detector, every parameter one it has (a missing local model is
        the detector's preflight, checked before a run, not a config error)."""
        for name, params in detectors.items():
            get_detector(base_name(name)).params(params or {})
        return detectors


DATASET = "finhallu"


def eval_id_for(dataset: str, version: str) -> str:
    return f"{dataset}@{version[:12]}"


def dataset_of(samples: pl.DataFrame) -> str:
    """The evaluated dataset's name: the benchmark's own, or an external dataset's (`dataset` column)."""
    if "dataset" in samples.columns and samples.height:
        return str(samples["dataset"][0])
    return DATASET


def run_detectors(
    samples: pl.DataFrame, detectors: dict[str, dict], eval_id: str, ctx: DetectorContext | None = None, progress=None
) -> pl.DataFrame:
    return detect_items(list(shared_rows(samples)), detectors, eval_id, ctx, progress)


def detect_items(
    items: list[dict], detectors: dict[str, dict], eval_id: str, ctx: DetectorContext | None = None, progress=None
) -> pl.DataFrame:
    """`run_detectors` on the samples already read as rows (`shared_rows`)."""
    ctx = ctx or DetectorContext()
    plan = []
    for name, overrides in detectors.items():  # validate every configuration before running any
        det = get_detector(base_name(name))
        plan.append((name, det, det.params(overrides or {})))
    # Detectors waiting on a remote model start first, each on a thread: their calls are in flight
    # while the findings and the offline detectors compute (at 0.5 s a call, the offline work had
    # added its own ~1 s to the LLM phase's).
    remote = [(name, params) for name, det, params in plan if det.remote and det.remote(params, ctx)]
    # (a pool starts no thread until something is submitted: none without a remote detector)
    with ThreadPoolExecutor(max_workers=max(1, len(remote)), thread_name_prefix="remote-detector") as pool:
        in_flight = {
            name: pool.submit(contextvars.copy_context().run, ctx.detections, name, items, params) for name, params in remote
        }
        return _detection_rows(items, plan, in_flight, eval_id, ctx, progress)


def _detection_rows(items: list[dict], plan: list, in_flight: dict, eval_id: str, ctx: DetectorContext, progress):
    # The grounding findings the detectors will read (each under the evidence its parameters give it),
    # computed first in one fan-out: in partitions on the cluster under --runner dask.
    wanted = [r for _, det, params in plan if det.findings_inputs for r in det.findings_inputs(items, params, ctx)]
    if wanted:
        from finhallu.detectors.grounding import prefetch_findings

        prefetch_findings(wanted, ctx.fanout, ctx.cache_dir)
    rows: list[DetectionsRow] = []
    # The offline detectors first, the remote ones' results when they are in (rows are sorted below).
    for done, (name, det, params) in enumerate(sorted(plan, key=lambda p: p[0] in in_flight), 1):
        found = in_flight[name].result() if name in in_flight else ctx.detections(name, items, params)
        version, config = det.code_version, canonical_json(det.config(params, ctx))
        for s, d in zip(items, found):
            if d is None:
                continue
            if not 0.0 <= d.score <= 1.0:
                raise ValueError(f"detector {name!r} scored {d.score} for {s['sample_id']}; scores must lie in [0, 1]")
            rows.append(
                {
                    "eval_id": eval_id,
                    "detector": name,
                    "sample_id": s["sample_id"],
                    "score": float(d.score),
                    "pred_binary": d.pred_binary,
                    "pred_4class": d.pred_4class,
                    "pred_type": d.pred_type,
                    "rationale": d.rationale,
                    "detector_version": version,
                    "detector_config": config,
                }
            )
        if progress:
            progress(done, len(plan))
    return typed_rows_frame(rows, CONTRACTS["detections"].columns, ["detector", "sample_id"])


def run(inputs: Frames, ctx: StageContext[DetectConfig]) -> Frames:
    cfg = ctx.config
    samples = hand_back(inputs, "samples")  # the detectors read its rows, made below
    eval_id = eval_id_for(dataset_of(samples), ctx.input_hashes.get("samples", "unversioned"))
    items = list(shared_rows(samples))
    del samples
    dctx = DetectorContext(seed=ctx.seed, roles=ctx.roles, cache_dir=ctx.cache_dir, fanout=ctx.fanout, _router=ctx.llm)
    detectors = dict(cfg.detectors)
    if cfg.baselines:
        from finhallu.detectors.baselines import BASELINES

        detectors.update({b: detectors.get(b, {}) for b in BASELINES})
    return {"detections": detect_items(items, detectors, eval_id, dctx, ctx.progress)}


def _judge_roles(cfg: DetectConfig, _roles) -> list[str]:
    """The roles of the configured LLM-judge detectors (their `role` parameter)."""
    return [params.get("role", "detector_judge") for name, params in cfg.detectors.items() if base_name(name) == "llm_judge"]


STAGE = Stage(
    "detect",
    run,
    DetectConfig,
    inputs=("samples",),
    outputs=("detections",),
    description="detectors",
    roles=("detector_judge",),
    configured_roles=_judge_roles,
    operations=("detect_hallucination", "detect_4class", "detect_type"),
    # the learned detector and the baselines' classifiers
    imports=("sklearn.ensemble", "sklearn.linear_model", "sklearn.pipeline", "sklearn.preprocessing", "sklearn.metrics"),
)
